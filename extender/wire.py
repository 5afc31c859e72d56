"""The kube-scheduler extender v1 wire format (k8s.io/kube-scheduler/extender/v1).

The Go structs carry no json tags, so their keys are the capitalised Go field
names ("Pod", "NodeNames", "FailedNodes", "Host", "Score") and nil values are sent
as ``null``. The embedded Pod and Node objects use the normal API casing.

Only the Pod and Node fields the extender needs are decoded; msgspec skips the
rest without building objects for them, which is what keeps a request with 100
full Node objects (each with a long ``status.images``) cheap. Node items are
also kept as raw bytes so that a non-cache-capable filter can answer with the
very objects it was given.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, TypeVar, overload

import msgspec
from msgspec import Raw, Struct, field

from .exceptions import WireError

__all__ = [
    "Container",
    "ContainerState",
    "ContainerStateRunning",
    "ContainerStatus",
    "ExtenderArgs",
    "FilterResult",
    "HostPriority",
    "MAX_EXTENDER_PRIORITY",
    "MIN_EXTENDER_PRIORITY",
    "Node",
    "NodeKeys",
    "NodeListOut",
    "NodeMeta",
    "NodeSpec",
    "NodeStatus",
    "ObjectMeta",
    "OwnerReference",
    "Pod",
    "PodCondition",
    "PodSpec",
    "PodStatus",
    "PrioritizeArgs",
    "QuantityValue",
    "ResourceRequirements",
    "WireError",
    "decode_args",
    "decode_node",
    "encode",
    "timestamp",
]


def timestamp(value: str | None) -> float | None:
    """Unix seconds of an RFC 3339 time as the API server writes them
    (``2026-11-29T18:00:00Z``); None for none, or for text that is not one."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


MIN_EXTENDER_PRIORITY = 0
MAX_EXTENDER_PRIORITY = 10

QuantityValue = str | int | float
T = TypeVar("T")


class OwnerReference(Struct, omit_defaults=True):
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    """True on the reference to the pod's managing controller (a DaemonSet's pods)."""


class ObjectMeta(Struct, omit_defaults=True):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[OwnerReference] | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    """Set once the pod's deletion is asked for: it is leaving (gracefully, by this time)."""


class ResourceRequirements(Struct, omit_defaults=True):
    requests: dict[str, QuantityValue] | None = None
    limits: dict[str, QuantityValue] | None = None


class Container(Struct, omit_defaults=True):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements | None = None
    restartPolicy: str | None = None
    """On an init container, "Always" makes it a native sidecar (Kubernetes 1.29+)."""


class PodSpec(Struct, omit_defaults=True):
    containers: list[Container] | None = None
    initContainers: list[Container] | None = None
    overhead: dict[str, QuantityValue] | None = None
    resources: ResourceRequirements | None = None
    """Pod-level requests and limits (PodLevelResources, Kubernetes 1.32+)."""
    nodeName: str = ""
    schedulerName: str = ""
    priorityClassName: str = ""
    priority: int | None = None
    """Resolved from priorityClassName by the Priority admission plugin."""


class PodCondition(Struct, omit_defaults=True):
    type: str = ""
    status: str = ""
    lastTransitionTime: str | None = None


class ContainerStateRunning(Struct, omit_defaults=True):
    startedAt: str | None = None


class ContainerState(Struct, omit_defaults=True):
    running: ContainerStateRunning | None = None


class ContainerStatus(Struct, omit_defaults=True):
    state: ContainerState | None = None


class PodStatus(Struct, omit_defaults=True):
    phase: str = ""
    conditions: list[PodCondition] | None = None
    containerStatuses: list[ContainerStatus] | None = None


class Pod(Struct, omit_defaults=True):
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: PodSpec = field(default_factory=PodSpec)
    status: PodStatus | None = None

    @property
    def key(self) -> str:
        """The pod's identity: its UID, else namespace/name."""
        return self.metadata.uid or f"{self.metadata.namespace}/{self.metadata.name}"


class NodeSpec(Struct, omit_defaults=True):
    unschedulable: bool = False


class NodeStatus(Struct, omit_defaults=True):
    capacity: dict[str, QuantityValue] | None = None
    allocatable: dict[str, QuantityValue] | None = None


class NodeKeys(Struct, omit_defaults=True):
    """The node labels or annotations the extender reads: its own per-node thresholds
    (percent; ``model.NodeInfo``). Every other key is skipped by msgspec unbuilt."""

    cpu_threshold: str | None = field(default=None, name="loadwise.dev/cpu-threshold")
    memory_threshold: str | None = field(default=None, name="loadwise.dev/memory-threshold")


class NodeMeta(Struct, omit_defaults=True):
    """The Node metadata the extender reads. A kubelet's Node carries some 11
    labels and 13 annotations; decoding them into dicts nobody reads cost ~3.4 us
    per node (100 realistic Nodes, benchmarks/prioritize.py: 937 us per request
    decoded with ObjectMeta, 594 us with this), and msgspec skips unknown fields,
    so labels and annotations are read only for the keys in ``NodeKeys``."""

    name: str = ""
    resourceVersion: str = ""
    labels: NodeKeys | None = None
    annotations: NodeKeys | None = None
    creationTimestamp: str | None = None


class Node(Struct, omit_defaults=True):
    metadata: NodeMeta = field(default_factory=NodeMeta)
    spec: NodeSpec = field(default_factory=NodeSpec)
    status: NodeStatus = field(default_factory=NodeStatus)


class _NodeListIn(Struct):
    items: list[Raw] | None = None


class _NodeListDecoded(Struct):
    items: list[Node] | None = None


class ExtenderArgs(Struct):
    """Body of both ``filter`` and ``prioritize``."""

    pod: Pod | None = field(default=None, name="Pod")
    nodes: _NodeListIn | None = field(default=None, name="Nodes")
    node_names: list[str] | None = field(default=None, name="NodeNames")


class PrioritizeArgs(Struct):
    """ExtenderArgs for prioritize: Node objects decoded in the same pass, since
    prioritize never has to send them back."""

    pod: Pod | None = field(default=None, name="Pod")
    nodes: _NodeListDecoded | None = field(default=None, name="Nodes")
    node_names: list[str] | None = field(default=None, name="NodeNames")


class _ArgsIn(Struct):
    """ExtenderArgs as received, with NodeNames kept as its bytes (``_node_names``)."""

    pod: Pod | None = field(default=None, name="Pod")
    nodes: _NodeListIn | None = field(default=None, name="Nodes")
    node_names: Raw = field(default_factory=Raw, name="NodeNames")


class _PrioritizeIn(Struct):
    """PrioritizeArgs as received, with NodeNames kept as its bytes."""

    pod: Pod | None = field(default=None, name="Pod")
    nodes: _NodeListDecoded | None = field(default=None, name="Nodes")
    node_names: Raw = field(default_factory=Raw, name="NodeNames")


class NodeListOut(Struct):
    metadata: dict[str, str] = field(default_factory=dict)
    items: list[Raw] = field(default_factory=list)


class FilterResult(Struct):
    """Body of the filter answer. Exactly one of ``nodes``/``node_names`` is set."""

    nodes: NodeListOut | None = field(default=None, name="Nodes")
    node_names: list[str] | None = field(default=None, name="NodeNames")
    failed_nodes: dict[str, str] = field(default_factory=dict, name="FailedNodes")
    failed_and_unresolvable: dict[str, str] = field(
        default_factory=dict, name="FailedAndUnresolvableNodes"
    )
    error: str = field(default="", name="Error")


class HostPriority(Struct):
    host: str = field(name="Host")
    score: int = field(name="Score")


_args_decoder = msgspec.json.Decoder(ExtenderArgs)
_prioritize_decoder = msgspec.json.Decoder(PrioritizeArgs)
_args_in = msgspec.json.Decoder(_ArgsIn)
_prioritize_in = msgspec.json.Decoder(_PrioritizeIn)
_names_decoder = msgspec.json.Decoder(list[str])
_NULL = Raw(b"null")
_last_names: tuple[Raw, list[str]] = (Raw(b"[]"), [])
_node_decoder = msgspec.json.Decoder(Node)
_encoder = msgspec.json.Encoder()


def _decode(decoder: msgspec.json.Decoder[T], body: bytes | Raw, what: str) -> T:
    """Decode or raise WireError naming the problem: never a RecursionError or
    UnicodeDecodeError (msgspec raises those as they are, not as DecodeError)."""
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise WireError(f"invalid {what}: {exc}", reason="invalid") from None
    except msgspec.DecodeError as exc:
        raise WireError(f"body is not JSON: {exc}", reason="not_json") from None
    except RecursionError:
        raise WireError(
            f"invalid {what}: JSON nested too deeply to decode", reason="too_deep"
        ) from None
    except UnicodeDecodeError as exc:
        raise WireError(
            f"body is not UTF-8: a string holds invalid bytes ({exc.reason})", reason="not_utf8"
        ) from None


@overload
def decode_args(body: bytes, *, raw_nodes: Literal[True] = True) -> ExtenderArgs: ...


@overload
def decode_args(body: bytes, *, raw_nodes: Literal[False]) -> PrioritizeArgs: ...


@overload
def decode_args(body: bytes, *, raw_nodes: bool) -> ExtenderArgs | PrioritizeArgs: ...


def decode_args(body: bytes, *, raw_nodes: bool = True) -> ExtenderArgs | PrioritizeArgs:
    """Decode an ExtenderArgs body, or raise WireError saying what is wrong.

    ``raw_nodes`` keeps each Node's bytes (the filter answers with them);
    without it Nodes are decoded at once (prioritize).
    """
    if not body.isascii():
        # msgspec checks UTF-8 only in the strings it decodes, not in the fields it
        # skips or keeps as Raw; the filter echoes Raw Node bytes, and an answer must be
        # valid JSON (RFC 8259: UTF-8). isascii() is the cheap common case.
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WireError(
                f"body is not UTF-8: invalid bytes at offset {exc.start}", reason="not_utf8"
            ) from None
    head: _ArgsIn | _PrioritizeIn
    if raw_nodes:
        head = _decode(_args_in, body, "ExtenderArgs")
    else:
        head = _decode(_prioritize_in, body, "ExtenderArgs")
    names = _node_names(head.node_names, body, raw_nodes)  # a bad list first, as before
    if head.pod is None:
        raise WireError("invalid ExtenderArgs: no Pod in the request", reason="no_pod")
    if isinstance(head, _ArgsIn):
        return ExtenderArgs(head.pod, head.nodes, names)
    return PrioritizeArgs(head.pod, head.nodes, names)


def _node_names(raw: Raw, body: bytes, raw_nodes: bool) -> list[str] | None:
    """NodeNames, decoded, or the last request's again when its bytes are the same.

    A cache-capable scheduler lists its feasible nodes in every call, and a list
    repeats whenever the same nodes pass its filters in the same order: then the
    bytes are compared (one memcmp) instead of 1,000 names being decoded into new
    strings (measured: 9 us against 31 us for 1,000 names), and the names are the
    very strings of the last request, which later list and dict comparisons
    match by identity. A list that differs costs one extra scan of its bytes
    (~4 us at 1,000 names). Callers get their own list; the strings are immutable.
    """
    global _last_names
    if not raw or raw == _NULL:
        return None
    last, names = _last_names
    if raw == last:
        return names.copy()
    try:
        names = _names_decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        # the whole body again, for the error naming the JSON path ($.NodeNames[3])
        if raw_nodes:
            _decode(_args_decoder, body, "ExtenderArgs")
        else:
            _decode(_prioritize_decoder, body, "ExtenderArgs")
        raise WireError(f"invalid ExtenderArgs: NodeNames: {exc}", reason="invalid") from None
    _last_names = (raw.copy(), names)  # one tuple: readers see both parts or neither
    return names.copy()


def decode_node(raw: Raw | bytes) -> Node:
    return _decode(_node_decoder, raw, "Node in Nodes.items")


def encode(obj: object) -> bytes:
    return _encoder.encode(obj)
