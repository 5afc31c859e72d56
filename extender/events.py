"""The Event the extender records on each pod it scored: why it went where it went.

Contract (docs/contracts.md): reason ``LoadwiseScored``, a human message, and
the machine-readable decision as JSON in the ``loadwise.dev/decision``
annotation, which the TUI reads.

kube-scheduler calls filter and prioritize separately (and skips prioritize when
one node is left), so a pod's two halves are merged for a short moment before
the Event is sent. Sending happens off the request path, rate-limited, and a
failure to send is only counted.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import msgspec

from .exceptions import KubeError
from .tasks import cancel

__all__ = [
    "ANNOTATION",
    "REASON",
    "Decision",
    "EventRecorder",
    "build_event",
    "format_message",
    "parse_decision",
]

REASON = "LoadwiseScored"
ANNOTATION = "loadwise.dev/decision"
COMPONENT = "loadwise-extender"
MAX_MESSAGE = 1024  # the API server truncates longer Event messages

log = logging.getLogger("loadwise.extender.events")


class Decision(msgspec.Struct, kw_only=True):
    """The decision annotation's JSON (also what :func:`parse_decision` returns)."""

    policy: str
    source: str
    stale: bool = False
    scores: dict[str, int] = msgspec.field(default_factory=dict)
    failed: dict[str, str] = msgspec.field(default_factory=dict)
    best: str | None = None
    why: str = ""


def format_message(decision: Decision, top: int = 5) -> str:
    parts = []
    if decision.scores:
        ranked = sorted(decision.scores.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = " ".join(f"{n}={s}" for n, s in ranked[:top])
        more = f" (+{len(ranked) - top} more)" if len(ranked) > top else ""
        parts.append(f"scores {shown}{more}")
    if decision.best:
        parts.append(
            f"best {decision.best}: {decision.why}" if decision.why else f"best {decision.best}"
        )
    if decision.failed:
        failed = sorted(decision.failed.items())
        shown = "; ".join(f"{n}: {r}" for n, r in failed[:top])
        more = f" (+{len(failed) - top} more)" if len(failed) > top else ""
        parts.append(f"filtered {shown}{more}")
    if decision.stale:
        parts.append("load data stale, estimates used")
    message = "; ".join(parts) or "no nodes"
    return message[: MAX_MESSAGE - 3] + "..." if len(message) > MAX_MESSAGE else message


def parse_decision(annotation: str | bytes) -> Decision:
    """Decode the annotation; raises msgspec errors on malformed input."""
    return msgspec.json.decode(annotation, type=Decision)


def _now_rfc3339(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_event(
    pod_name: str, namespace: str, uid: str, decision: Decision, *, now: float, instance: str
) -> dict[str, object]:
    stamp = _now_rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "generateName": f"{pod_name}.loadwise-",
            "namespace": namespace,
            "annotations": {ANNOTATION: msgspec.json.encode(decision).decode()},
        },
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod_name,
            "namespace": namespace,
            "uid": uid,
        },
        "reason": REASON,
        "message": format_message(decision),
        "type": "Normal",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


@dataclass
class _Pending:
    name: str
    namespace: str
    uid: str
    decision: Decision
    due: float = field(default=0.0)


class EventRecorder:
    """Merges filter and prioritize per pod, then posts one Event, rate-limited.

    ``post`` is a blocking callable (namespace, event dict) run in a thread; it
    raises ``KubeError`` when the API refuses (counted as an "error" outcome).
    """

    def __init__(
        self,
        post: Callable[[str, Mapping[str, object]], object],
        *,
        per_minute: int,
        merge_seconds: float = 0.5,
        on_result: Callable[[str], None] | None = None,
    ) -> None:
        self._post = post
        self._rate = per_minute / 60.0
        self._tokens = float(per_minute)
        self._capacity = float(per_minute)
        self._last = time.monotonic()
        self.merge_seconds = merge_seconds
        self._pending: dict[str, _Pending] = {}
        self._on_result = on_result or (lambda outcome: None)
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._instance = socket.gethostname()

    def note(
        self,
        key: str,
        name: str,
        namespace: str,
        uid: str,
        update: Callable[[Decision], Decision],
        base: Decision,
    ) -> None:
        entry = self._pending.get(key)
        if entry is None:
            entry = _Pending(name, namespace, uid, base, due=time.monotonic() + self.merge_seconds)
            self._pending[key] = entry
        entry.decision = update(entry.decision)
        self._wake.set()

    def _take_token(self) -> bool:
        now = time.monotonic()
        self._tokens = min(self._capacity, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    async def _send(self, entry: _Pending) -> None:
        if not entry.uid and not entry.name:
            return
        if not self._take_token():
            self._on_result("rate_limited")
            return
        event = build_event(
            entry.name,
            entry.namespace,
            entry.uid,
            entry.decision,
            now=time.time(),
            instance=self._instance,
        )
        try:
            await asyncio.to_thread(self._post, entry.namespace, event)
        except KubeError as exc:
            log.warning("could not record Event for %s/%s: %s", entry.namespace, entry.name, exc)
            self._on_result("error")
            return
        self._on_result("sent")

    async def _run(self) -> None:
        while True:
            now = time.monotonic()
            due = [k for k, e in self._pending.items() if e.due <= now]
            for key in due:
                await self._send(self._pending.pop(key))
            self._wake.clear()
            wait = (
                min((e.due for e in self._pending.values()), default=now + 3600) - time.monotonic()
            )
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=max(0.01, wait))
            except TimeoutError:
                pass

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="events")

    async def stop(self) -> None:
        await cancel(self._task)
        self._task = None
        for entry in list(self._pending.values()):
            await self._send(entry)
        self._pending.clear()
