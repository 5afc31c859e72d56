"""Typed records for the Kubernetes objects the TUI shows, and the parsers that build them.

Both sources (the real API client and the fake fed from recorded JSON) hand raw JSON
dicts to these functions, so the rest of the TUI never touches a dict shaped like the
API. Each parser keeps only the fields a view needs: with 10,000 pods the raw objects
(managedFields and all) would cost far more memory than the screens ever use. Every
string they keep has been through `tui.untrusted.clean`: whoever may write an Event or
an annotation writes what the dashboard shows, and no control character of theirs gets
past this module.

A field of the wrong type or out of range reads as absent where the view has a sensible
default (a number where a name belongs, a score of 1e400, a timestamp that is not a
string); what is left, such as a map where a list belongs, raises one of `UNREADABLE`,
and the sources skip that one object and count it (`tui.sources.skipped`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from loadwise.extender.quantity import INT64_MAX

from .quantity import cpu_millicores, memory_bytes
from .untrusted import clean

__all__ = [
    "DECISION_ANNOTATION",
    "INT64_MAX",
    "LOADWISE_REASON",
    "Decision",
    "Eviction",
    "NodeInfo",
    "PodInfo",
    "Resources",
    "SCHEDULER_EDIT_ANNOTATION",
    "UNREADABLE",
    "Usage",
    "parse_edit_marker",
    "parse_event",
    "parse_node",
    "parse_node_metrics",
    "parse_pod",
    "parse_pod_metrics",
    "parse_ref",
    "parse_time",
]

JSON = dict[str, Any]

LOADWISE_REASON = "LoadwiseScored"
DECISION_ANNOTATION = "loadwise.dev/decision"
# What roles/loadwise_scheduler_config (tasks/marker.yml) puts on a Node before it changes
# that node's scheduler configuration, and takes away once the scheduler is proven healthy
# with it: still there, a run stopped half way. JSON {host, action, files, started_at, marker}.
SCHEDULER_EDIT_ANNOTATION = "loadwise.dev/scheduler-edit-interrupted"
_EDIT_FILES_SHOWN = 3
_EDIT_FIELD_CHARS = 120
# The descheduler records evictions through the events.k8s.io recorder named
# "sigs.k8s.io.descheduler" (older releases: core/v1 source.component of the same name,
# reason "Descheduled"). The reason is the strategy or plugin, the action "Descheduled",
# and the note "pod eviction from <node> node by sigs.k8s.io/descheduler".
DESCHEDULER_COMPONENT = "sigs.k8s.io.descheduler"
_DESCHEDULER_NODE = re.compile(r"pod evict(?:ion|ed) from (?P<node>\S+) node")

UNREADABLE: tuple[type[Exception], ...] = (
    ArithmeticError,  # OverflowError (float() of a 400-digit int), decimal's signals
    AttributeError,  # `.get` on a list or a number where an object belongs
    LookupError,  # KeyError, IndexError
    RecursionError,  # JSON nested deeper than the interpreter's recursion limit
    TypeError,  # iterating a number, hashing a list, comparing a str with an int
    ValueError,  # int() of a non-number or of more than 4,300 digits, JSON and Unicode errors
)
"""What a parser here raises on a hostile or malformed object: the caller skips the object.

Anything else is a bug of ours, not a property of the data, and is left to propagate.
"""


@dataclass(frozen=True, slots=True)
class Resources:
    """A CPU and memory pair: millicores and bytes."""

    cpu_m: float = 0.0
    memory: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu_m + other.cpu_m, self.memory + other.memory)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu_m - other.cpu_m, self.memory - other.memory)

    @classmethod
    def from_map(cls, data: Mapping[str, Any] | None) -> Resources:
        """Read `{"cpu": "250m", "memory": "64Mi"}`, ignoring other resources."""
        if not data:
            return cls()
        return cls(cpu_millicores(data.get("cpu")), memory_bytes(data.get("memory")))

    def max(self, other: Resources) -> Resources:
        return Resources(max(self.cpu_m, other.cpu_m), max(self.memory, other.memory))


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """What the nodes table needs from a Node."""

    name: str
    roles: tuple[str, ...] = ()
    ready: bool = False
    unschedulable: bool = False
    allocatable: Resources = Resources()
    pods_allocatable: int = 0
    created: datetime | None = None
    kubelet_version: str = ""
    internal_ip: str = ""
    edit_interrupted: str = ""
    """What an unfinished loadwise scheduler edit on this node was (one plain line, made
    safe to show); "" when there is none."""

    @property
    def role(self) -> str:
        return ",".join(self.roles) if self.roles else "worker"

    @property
    def state(self) -> str:
        state = "Ready" if self.ready else "NotReady"
        return f"{state},cordoned" if self.unschedulable else state


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the placements feed and node detail need from a Pod."""

    namespace: str
    name: str
    uid: str = ""
    node: str = ""
    phase: str = "Pending"
    scheduler: str = "default-scheduler"
    requests: Resources = Resources()
    limits: Resources = Resources()
    scheduled_at: datetime | None = None
    created: datetime | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def active(self) -> bool:
        """Counts against its node: bound and not finished (the scheduler's own rule)."""
        return bool(self.node) and self.phase not in ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class Usage:
    """One metrics.k8s.io sample: a node's or a pod's (summed over containers) usage."""

    name: str
    namespace: str = ""
    usage: Resources = Resources()
    at: datetime | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Decision:
    """The extender's `LoadwiseScored` Event for one pod (docs/contracts.md)."""

    namespace: str
    pod: str
    pod_uid: str = ""
    policy: str = ""
    source: str = ""
    stale: bool = False
    scores: Mapping[str, float] = field(default_factory=dict)
    failed: Mapping[str, str] = field(default_factory=dict)
    best: str = ""
    why: str = ""
    message: str = ""
    at: datetime | None = None
    # Version 2 of the annotation (all optional; a v1 Event leaves them empty).
    use: Mapping[str, tuple[int | None, int | None]] = field(default_factory=dict)
    estimated: frozenset[str] = frozenset()
    omitted: int = 0
    tied: tuple[str, ...] = ()
    bound: str = ""
    # Per-node thresholds (node -> {"cpu": percent, "memory": percent}), for the nodes whose
    # thresholds differ from the extender's default; absent from older Events.
    thresholds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # The extender ran prioritize-only: the nodes in `failed` were scored lowest, not
    # rejected (its config's filter.enabled false).
    scored_lowest: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.pod}"

    def went_to(self, node: str = "") -> str:
        """The node the pod went to: the pod's own spec.nodeName if known, else `bound`."""
        return node or self.bound


@dataclass(frozen=True, slots=True)
class Eviction:
    """A descheduler eviction (or a refused one, `failed`) read from its Event."""

    uid: str
    namespace: str
    pod: str
    node: str = ""
    strategy: str = ""
    message: str = ""
    failed: bool = False
    at: datetime | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.pod}"


def parse_time(value: object) -> datetime | None:
    """RFC 3339 (with or without fractional seconds) to an aware UTC datetime.

    None for anything else: a missing field, a number, a malformed or overlong string
    (RFC 3339 with nanoseconds and an offset is 35 characters).
    """
    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _number(raw: Any) -> int:
    """A count (allocatable pods, omitted nodes) as an int from 0 to int64; else 0."""
    if isinstance(raw, str) and raw.isdigit() and len(raw) <= 19:
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int):
        return 0
    return raw if 0 <= raw <= INT64_MAX else 0


def _text(raw: Any) -> str:
    """A string field, made safe to show (`tui.untrusted.clean`); anything else (a null
    `bound` when the extender has no pod watch, a number where a name belongs) reads as ""."""
    return clean(raw) if isinstance(raw, str) else ""


def _short(text: str) -> str:
    return text if len(text) <= _EDIT_FIELD_CHARS else text[: _EDIT_FIELD_CHARS - 1] + "…"


def parse_edit_marker(raw: Any) -> str:
    """One plain line for the annotation an unfinished scheduler edit leaves on its Node
    (``SCHEDULER_EDIT_ANNOTATION``): what the run was changing, since when, and on which
    files; "" without the annotation. A value that is not the JSON the role writes (cut
    short, edited by hand) still marks the edit, shown as it is, shortened. Every field is
    cluster text: cleaned and shortened here, and shown as plain text, never as markup."""
    if raw is None:
        return ""
    if not isinstance(raw, str):
        return "(unreadable marker)"
    try:
        marker = json.loads(raw)
    except ValueError:
        marker = None
    if not isinstance(marker, dict):
        return _short(f"marker: {clean(raw).strip()}") if raw.strip() else "(empty marker)"
    action = _short(_text(marker.get("action"))) or "change"
    started = _short(_text(marker.get("started_at"))) or "at an unknown time"
    files = marker.get("files")
    names = [_short(_text(f)) for f in files[:_EDIT_FILES_SHOWN]] if isinstance(files, list) else []
    more = len(files) - _EDIT_FILES_SHOWN if isinstance(files, list) else 0
    shown = ", ".join(n for n in names if n) + (f" and {more} more" if more > 0 else "")
    return f"{action} started {started}" + (f" on {shown}" if shown else "")


def parse_ref(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of an object, as the parsers key it (a deleted object's key)."""
    meta = _meta(obj)
    return _text(meta.get("namespace")), _text(meta.get("name"))


def parse_node(obj: Mapping[str, Any]) -> NodeInfo:
    meta = _meta(obj)
    labels: Mapping[str, str] = meta.get("labels") or {}
    prefix = "node-role.kubernetes.io/"
    roles = tuple(
        sorted(clean(k[len(prefix) :]) for k in labels if k.startswith(prefix) and k != prefix)
    )
    status: Mapping[str, Any] = obj.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    pods = _number(allocatable.get("pods"))
    ip = next(
        (
            _text(a.get("address"))
            for a in status.get("addresses") or ()
            if a.get("type") == "InternalIP"
        ),
        "",
    )
    return NodeInfo(
        name=_text(meta.get("name")),
        roles=roles,
        ready=ready,
        unschedulable=bool((obj.get("spec") or {}).get("unschedulable")),
        allocatable=Resources.from_map(allocatable),
        pods_allocatable=pods,
        created=parse_time(meta.get("creationTimestamp")),
        kubelet_version=_text((status.get("nodeInfo") or {}).get("kubeletVersion")),
        internal_ip=ip,
        edit_interrupted=parse_edit_marker(
            (meta.get("annotations") or {}).get(SCHEDULER_EDIT_ANNOTATION)
        ),
    )


def _container_sum(containers: Iterable[Mapping[str, Any]], kind: str) -> Resources:
    total = Resources()
    for container in containers:
        total = total + Resources.from_map((container.get("resources") or {}).get(kind))
    return total


def _effective(spec: Mapping[str, Any], kind: str) -> Resources:
    """The scheduler's effective request (or limit) of a pod.

    max(sum of app containers + restartable init "sidecars", each ordinary init container
    plus the sidecars started before it), plus the pod overhead.
    """
    sidecars = Resources()
    init_peak = Resources()
    for init in spec.get("initContainers") or ():
        own = Resources.from_map((init.get("resources") or {}).get(kind))
        if init.get("restartPolicy") == "Always":
            sidecars = sidecars + own
        else:
            init_peak = init_peak.max(own + sidecars)
    regular = _container_sum(spec.get("containers") or (), kind) + sidecars
    return regular.max(init_peak) + Resources.from_map(spec.get("overhead"))


def parse_pod(obj: Mapping[str, Any]) -> PodInfo:
    meta = _meta(obj)
    spec: Mapping[str, Any] = obj.get("spec") or {}
    status: Mapping[str, Any] = obj.get("status") or {}
    scheduled_at = None
    for condition in status.get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            scheduled_at = parse_time(condition.get("lastTransitionTime"))
    return PodInfo(
        namespace=_text(meta.get("namespace")),
        name=_text(meta.get("name")),
        uid=_text(meta.get("uid")),
        node=_text(spec.get("nodeName")),
        phase=_text(status.get("phase")) or "Pending",
        scheduler=_text(spec.get("schedulerName")) or "default-scheduler",
        requests=_effective(spec, "requests"),
        limits=_effective(spec, "limits"),
        scheduled_at=scheduled_at,
        created=parse_time(meta.get("creationTimestamp")),
    )


def parse_node_metrics(obj: Mapping[str, Any]) -> Usage:
    meta = _meta(obj)
    return Usage(
        name=_text(meta.get("name")),
        usage=Resources.from_map(obj.get("usage")),
        at=parse_time(obj.get("timestamp")),
    )


def parse_pod_metrics(obj: Mapping[str, Any]) -> Usage:
    meta = _meta(obj)
    return Usage(
        name=_text(meta.get("name")),
        namespace=_text(meta.get("namespace")),
        usage=_container_sum(
            ({"resources": {"usage": c.get("usage")}} for c in obj.get("containers") or ()),
            "usage",
        ),
        at=parse_time(obj.get("timestamp")),
    )


def _event_time(obj: Mapping[str, Any]) -> datetime | None:
    series = obj.get("series") or {}
    return (
        parse_time(series.get("lastObservedTime"))
        or parse_time(obj.get("lastTimestamp"))
        or parse_time(obj.get("eventTime"))
        or parse_time(obj.get("firstTimestamp"))
        or parse_time(_meta(obj).get("creationTimestamp"))
    )


def _scores(raw: Any) -> dict[str, float]:
    if not isinstance(raw, Mapping):
        return {}
    scores: dict[str, float] = {}
    for node, value in raw.items():
        # A number, or a numeric string from an older extender; a bool is neither, and a
        # score that is not finite (NaN, inf, 1e400) cannot be ranked or drawn.
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            continue
        if isinstance(value, str) and len(value) > 64:
            continue
        try:
            score = float(value)
        except (OverflowError, ValueError):
            continue
        if math.isfinite(score):
            scores[clean(str(node))] = score
    return scores


def _percent(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return round(value) if math.isfinite(value) else None


def _use(raw: Any) -> dict[str, tuple[int | None, int | None]]:
    """`{"node": [cpu, memory]}`; an entry that is not a pair of numbers/nulls is dropped."""
    if not isinstance(raw, Mapping):
        return {}
    use: dict[str, tuple[int | None, int | None]] = {}
    for node, pair in raw.items():
        if isinstance(pair, list | tuple) and len(pair) == 2:
            use[clean(str(node))] = (_percent(pair[0]), _percent(pair[1]))
    return use


def _names(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list | tuple):
        return ()
    return tuple(clean(n) for n in raw if isinstance(n, str) and n)


def _thresholds(raw: Any) -> dict[str, dict[str, float]]:
    """`{"node": {"cpu": 80, "memory": 85}}`: a node's own thresholds, percent of allocatable.

    Not every extender writes this key (it is absent before per-node thresholds, and
    for nodes on the default); a value that is not a finite number is dropped.
    """
    if not isinstance(raw, Mapping):
        return {}
    thresholds: dict[str, dict[str, float]] = {}
    for node, limits in raw.items():
        if not isinstance(limits, Mapping):
            continue
        kept = {
            clean(str(resource)): float(value)
            for resource, value in limits.items()
            if isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
        }
        if kept:
            thresholds[clean(str(node))] = kept
    return thresholds


def _count(raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        return 0
    return min(max(0, raw), INT64_MAX)


def _decision(obj: Mapping[str, Any], involved: Mapping[str, Any]) -> Decision:
    annotations: Mapping[str, Any] = _meta(obj).get("annotations") or {}
    raw = annotations.get(DECISION_ANNOTATION)
    try:
        data = json.loads(raw) if isinstance(raw, str) and raw else {}
    # A malformed annotation still shows the Event, without figures: invalid JSON, an
    # integer of more than 4,300 digits (ValueError), nesting deeper than the recursion limit.
    except (ValueError, RecursionError):
        data = {}
    if not isinstance(data, Mapping):
        data = {}
    failed = data.get("failed")
    return Decision(
        namespace=_text(involved.get("namespace")) or _text(_meta(obj).get("namespace")),
        pod=_text(involved.get("name")),
        pod_uid=_text(involved.get("uid")),
        policy=clean(str(data.get("policy", ""))),
        source=clean(str(data.get("source", ""))),
        stale=bool(data.get("stale", False)),
        scores=_scores(data.get("scores")),
        failed=(
            {clean(str(k)): clean(str(v)) for k, v in failed.items()}
            if isinstance(failed, Mapping)
            else {}
        ),
        best=_text(data.get("best")),
        why=_text(data.get("why")),
        message=_message(obj),
        at=_event_time(obj),
        use=_use(data.get("use")),
        estimated=frozenset(_names(data.get("estimated"))),
        omitted=_count(data.get("omitted")),
        tied=_names(data.get("tied")),
        bound=_text(data.get("bound")),
        thresholds=_thresholds(data.get("thresholds")),
        scored_lowest=data.get("scored_lowest") is True,
    )


def _message(obj: Mapping[str, Any]) -> str:
    """core/v1 `message`, or events.k8s.io/v1 `note`."""
    return _text(obj.get("message")) or _text(obj.get("note"))


def _is_descheduler(obj: Mapping[str, Any]) -> bool:
    source = obj.get("source") or {}
    return (
        obj.get("reportingComponent") == DESCHEDULER_COMPONENT
        or obj.get("reportingController") == DESCHEDULER_COMPONENT
        or source.get("component") == DESCHEDULER_COMPONENT
        or obj.get("action") == "Descheduled"
    )


def parse_event(obj: Mapping[str, Any]) -> Decision | Eviction | None:
    """Classify a core/v1 (or events.k8s.io/v1) Event; None for events the TUI ignores."""
    involved: Mapping[str, Any] = obj.get("involvedObject") or obj.get("regarding") or {}
    if involved.get("kind", "Pod") != "Pod":
        return None
    if obj.get("reason") == LOADWISE_REASON:
        return _decision(obj, involved)
    if _is_descheduler(obj):
        message = _message(obj)
        match = _DESCHEDULER_NODE.search(message)
        reason = _text(obj.get("reason"))
        return Eviction(
            uid=_text(_meta(obj).get("uid")) or f"{_text(involved.get('uid'))}:{message}",
            namespace=_text(involved.get("namespace")) or _text(_meta(obj).get("namespace")),
            pod=_text(involved.get("name")),
            node=match["node"] if match else "",
            strategy="" if reason in ("Descheduled", "EvictionFailed") else reason,
            message=message,
            failed=obj.get("type") == "Warning" or "failed" in message,
            at=_event_time(obj),
        )
    return None
