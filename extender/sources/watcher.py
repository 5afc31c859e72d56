"""paypal/load-watcher's ``GET /watcher`` document, as v0.2.4 serves it.

Shape (pkg/watcher/watcher.go and its gojay marshaller): ``timestamp``,
``window{duration,start,end}``, ``source``, ``data.NodeMetricsMap[node].metrics[]``
with ``type`` CPU/Memory/..., ``operator`` AVG/STD/Latest (or empty) and ``value``
in percent of the node's capacity. The example JSON in load-watcher's repository
is stale (no NodeMetricsMap level, lowercase types) and is not what the server sends.

A node whose entry does not have that shape (a value that is not a number, a number
beyond float64) is refused alone, as one with an impossible value is (``readings``);
the document is refused only when its frame is. The document is decoded in one pass,
and node by node only when some entry does not fit.

Every node's reading is as old as ``window.end`` (load-watcher collects them all at
once). An end further in the future than ``readings.CLOCK_SKEW_SECONDS`` refuses every
node (reason ``future``) instead of keeping them fresh until that date.
"""

from __future__ import annotations

import time
from typing import Generic, TypeVar

import msgspec

from ..model import DEFAULT_SETTLE_SECONDS, InvalidReading, LoadSnapshot, NodeLoad, ResourceLoad
from ..readings import MALFORMED, validated
from .base import (
    DEFAULT_MAX_NODES,
    WATCHER_MAX_RESPONSE_BYTES,
    SourceError,
    decode_document,
    over_node_cap,
)
from .credentials import Credentials
from .http import HTTPReader

__all__ = ["LATEST_SETTLE_SECONDS", "WATCHER_WINDOW_SECONDS", "LoadWatcherSource", "parse_watcher"]

# How long before window.end a placed pod may still be missing from a document of
# *latest* values, the only kind load-watcher's metrics-server provider gives (no AVG;
# pkg/watcher/internal/metricsprovider/k8s.go). load-watcher reads NodeMetrics when it
# collects (window.end); that figure is up to one metrics-server --metric-resolution
# old (15 s by default) and its CPU is a rate over about one resolution, and a pod
# needs some seconds to start: 15 + 15 + 15. Averaged documents (Prometheus, SignalFx)
# keep Trimaran's 60 s (LoadSnapshot's default). Counting a pod after the reading
# already holds it counts it twice: the strong-weak placement benchmark's 27 pods were
# all counted twice for a whole collection period under the 60 s rule.
LATEST_SETTLE_SECONDS = 45.0
# The longest window load-watcher averages over: its Prometheus provider asks for
# avg_over_time and stddev_over_time over 15m (10m, 5m when the 15m entry is missing:
# GetLatestWatcherMetrics), and the document's window{start,end} says which. An averaged
# document holds a pod placed within that window only for the part after its placement;
# Trimaran's 60 s counted a pod placed two minutes before the end of a 15-minute mean as
# wholly in it, so a node receiving pods read cooler than it was for a quarter of an hour
# (the placement lab's steady-vary: predicted use at the binding 7-9 CPU points and, on
# the calm nodes, 17 memory points below what the node used).
WATCHER_WINDOW_SECONDS = 900.0


class _Metric(msgspec.Struct):
    type: str = ""
    operator: str = ""
    value: float = 0.0
    name: str = ""
    rollup: str = ""


class _NodeMetrics(msgspec.Struct):
    metrics: list[_Metric] | None = None


E = TypeVar("E")  # a node's entry: _NodeMetrics, or msgspec.Raw to decode each alone


class _Data(msgspec.Struct, Generic[E]):
    NodeMetricsMap: dict[str, E] | None = None


class _Window(msgspec.Struct):
    duration: str = ""
    start: int = 0
    end: int = 0


class _WatcherMetrics(msgspec.Struct, Generic[E]):
    timestamp: int = 0
    window: _Window | None = None
    source: str = ""
    data: _Data[E] | None = None


_decoder = msgspec.json.Decoder(_WatcherMetrics[_NodeMetrics])
_lenient_decoder = msgspec.json.Decoder(_WatcherMetrics[msgspec.Raw])
_node_decoder = msgspec.json.Decoder(_NodeMetrics)


def _resource(metrics: list[_Metric], kind: str) -> ResourceLoad:
    # Trimaran's GetResourceData: AVG wins; Latest/empty counts only without AVG.
    avg = latest = std = None
    for m in metrics:
        if m.type != kind:
            continue
        if m.operator == "AVG":
            avg = m.value
        elif m.operator == "STD":
            std = m.value
        elif m.operator in ("", "Latest"):
            latest = m.value
    return ResourceLoad(avg if avg is not None else latest, std)


def _averaged_over(window: _Window | None) -> float:
    """How long an averaged document's means run over: its window's length, from Trimaran's
    60 s (``DEFAULT_SETTLE_SECONDS``) to ``WATCHER_WINDOW_SECONDS``; 60 s when the document
    gives no usable window (no start, or none before its end)."""
    if window is None or not 0 < window.start < window.end:
        return DEFAULT_SETTLE_SECONDS
    return min(
        max(float(window.end - window.start), DEFAULT_SETTLE_SECONDS), WATCHER_WINDOW_SECONDS
    )


def parse_watcher(
    body: bytes | bytearray, *, fetched_at: float | None = None, max_nodes: int = DEFAULT_MAX_NODES
) -> LoadSnapshot:
    """The checked snapshot of a ``/watcher`` document; SourceError when its frame is
    unusable or it names more than ``max_nodes`` nodes."""
    doc = decode_document(body, _decoder, _lenient_decoder, "a load-watcher /watcher document")
    if doc.data is None or doc.data.NodeMetricsMap is None:
        raise SourceError("load-watcher document has no data.NodeMetricsMap")
    if len(doc.data.NodeMetricsMap) > max_nodes:
        raise over_node_cap("load-watcher document", len(doc.data.NodeMetricsMap), max_nodes)
    nodes = {}
    invalid = {}
    averaged = False
    for name, entry in doc.data.NodeMetricsMap.items():
        if isinstance(entry, msgspec.Raw):  # the lenient pass: this node's entry alone
            try:
                node = _node_decoder.decode(entry)
            except msgspec.DecodeError as exc:
                invalid[name] = InvalidReading(MALFORMED, f"entry unusable: {exc}")
                continue
        else:
            node = entry
        metrics = node.metrics or []
        nodes[name] = NodeLoad(_resource(metrics, "CPU"), _resource(metrics, "Memory"))
        averaged = averaged or any(m.operator == "AVG" for m in metrics)
    end = doc.window.end if doc.window and doc.window.end else doc.timestamp
    source = f"load-watcher/{doc.source}" if doc.source else "load-watcher"
    return validated(
        LoadSnapshot(
            source=source,
            window_end=float(end),
            fetched_at=time.time() if fetched_at is None else fetched_at,
            nodes=nodes,
            settle_seconds=_averaged_over(doc.window) if averaged else LATEST_SETTLE_SECONDS,
            invalid=invalid,
        )
    )


class LoadWatcherSource:
    """Polls ``GET {url}/watcher``."""

    name = "load-watcher"

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10.0,
        credentials: Credentials | None = None,
        max_bytes: int = WATCHER_MAX_RESPONSE_BYTES,
        max_nodes: int = DEFAULT_MAX_NODES,
    ) -> None:
        self._http = HTTPReader(
            url.rstrip("/") + "/watcher",
            what="load-watcher",
            timeout=timeout,
            max_bytes=max_bytes,
            credentials=credentials,
        )
        self.url = self._http.shown_url  # what may be shown: no credentials
        self.max_nodes = max_nodes

    async def fetch(self) -> LoadSnapshot:
        return parse_watcher(await self._http.get(), max_nodes=self.max_nodes)

    async def close(self) -> None:
        await self._http.close()
