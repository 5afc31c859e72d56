from __future__ import annotations

import asyncio
from typing import Protocol, TypeVar

import msgspec

from ..exceptions import KubeError, SourceError
from ..kubeapi import KubeAPI
from ..model import LoadSnapshot

__all__ = [
    "DEFAULT_MAX_CONTAINERS",
    "DEFAULT_MAX_NODES",
    "DEFAULT_MAX_PODS",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "Entry",
    "LoadSource",
    "SourceError",
    "WATCHER_MAX_RESPONSE_BYTES",
    "count_items",
    "count_results",
    "counted",
    "decode_document",
    "get_from_api",
    "over_node_cap",
]

# The defaults of source.max_response_bytes and source.max_nodes (docs/contracts.md,
# "Limits"), sized for 5,000 nodes, the most Kubernetes supports. Measured on generated
# answers with 63-character node names: a load-watcher document of Prometheus averages
# (CPU and memory, AVG and STD) is 570 bytes a node, 2.9 MB for 5,000; a Prometheus
# vector with a node-exporter target's usual labels 348 bytes a series, 1.7 MB; a
# NodeMetricsList whose items carry 20 node labels 1,405 bytes an item, 7.0 MB. 16 MiB
# holds the largest 2.4 times over. The node cap is twice 5,000: room for a node that
# two jobs scrape (two series of one name), and for nodes coming while others go.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
# load-watcher's own default, twice its 2.9 MB for 5,000 nodes. Its document names nodes as
# the keys of one JSON object, which no pass can count without building every key: 16 MiB
# of distinct empty entries took 252 MiB to decode, over the unit's MemoryMax of 256M
# beside the 45 MB the extender idles at; 6 MiB takes 91 MiB
# (benchmarks/source_decode_memory.py --mib 6 --case load-watcher-unique-empty-nodes).
WATCHER_MAX_RESPONSE_BYTES = 6 * 1024 * 1024
DEFAULT_MAX_NODES = 10_000
# The most PodMetrics items one answer may hold: 150,000, the most pods a cluster may have
# (the Kubernetes documentation, "Considerations for large clusters"). 16 MiB holds about
# 40,000 real PodMetrics (some 400 bytes each), so only an answer of near-empty items
# reaches it.
DEFAULT_MAX_PODS = 150_000
# The most containers one pod-usage answer may hold (a PodMetricsList's items' containers
# together, or a Prometheus answer's per-container series): four a pod at the pod cap.
# Kubernetes sets no limit per pod; without one, one PodMetrics of 16 MiB of ``{}``
# containers took 656 MiB to decode (benchmarks/source_decode_memory.py).
DEFAULT_MAX_CONTAINERS = 4 * DEFAULT_MAX_PODS

T = TypeVar("T")
U = TypeVar("U")


class LoadSource(Protocol):
    """``fetch`` answers a snapshot its decoder passed through ``readings.validated``
    (every figure in 0..100, refused nodes in ``invalid``), or raises SourceError."""

    name: str

    async def fetch(self) -> LoadSnapshot: ...

    async def close(self) -> None: ...


def over_node_cap(what: str, count: int, cap: int) -> SourceError:
    """The error for an answer naming more nodes than ``source.max_nodes``. Raised right
    after the one decoding pass, before a node's reading is built or checked: that
    per-node work (and what every request then does per node) is what the cap bounds."""
    return SourceError(f"{what} names {count} nodes, over {cap} (source.max_nodes)")


class _Skipped(msgspec.Struct, gc=False):
    """An item read only to be counted: msgspec skips every field it does not declare
    without building it, so an item costs one small object however much it holds."""


# scalars are allowed (they cost nothing or one small object, and the full decoding skips
# them); an array is not: an empty list costs 64 bytes, 21 times the 3 bytes of ``[],``
Entry = _Skipped | None | bool | int | float | str


class _Counted(msgspec.Struct, gc=False):
    items: list[Entry] | None = None


class _CountedData(msgspec.Struct, gc=False):
    result: list[Entry] | None = None


class _CountedResponse(msgspec.Struct, gc=False):
    data: _CountedData | None = None


_counter = msgspec.json.Decoder(_Counted)
_result_counter = msgspec.json.Decoder(_CountedResponse)


def counted(
    decoder: msgspec.json.Decoder[T], body: bytes | bytearray, what: str, cap: int
) -> T | None:
    """``body`` decoded by a counting ``decoder`` (entries as ``Entry``); None when some
    entry or the frame does not fit it, and the full decoding, which names what does not
    fit, can build no more than ``cap`` entries. It could if the body has more than
    ``cap - 1`` commas (n entries of a list take n - 1): then SourceError, before anything
    is built, since an entry that is an array costs a list (``[],`` is 3 bytes of 16 MiB).
    SourceError ``not {what}: ...`` when the body is not JSON."""
    try:
        return decoder.decode(body)
    except msgspec.ValidationError:
        bound = body.count(b",") + 1
        if bound <= cap:
            return None
        raise SourceError(
            f"{what} does not have the expected shape (an entry that is not an object?) and "
            f"may hold up to {bound} entries, over {cap}: refused before decoding it"
        ) from None
    except msgspec.DecodeError as exc:
        raise SourceError(f"not {what}: {exc}") from None


def count_items(body: bytes | bytearray, what: str, cap: int) -> int | None:
    """How many entries the ``items`` of a Kubernetes list holds, counted before anything
    of them is built, so that an answer over a cap costs this pass only. Measured
    (benchmarks/source_decode_memory.py): 16 MiB of ``{},`` items peak at 142 MiB here,
    against 1 GiB for a full decoding into the NodeMetrics types. None when an entry is
    an array or the frame does not fit and the body is small enough for the full
    decoding to tell (``counted``), whose own count is checked after it."""
    doc = counted(_counter, body, what, cap)
    return None if doc is None else len(doc.items or ())


def count_results(body: bytes | bytearray, what: str, cap: int) -> int | None:
    """How many samples a Prometheus query response's ``data.result`` holds, counted as
    ``count_items`` counts (the same bound, the same None and errors)."""
    doc = counted(_result_counter, body, what, cap)
    if doc is None:
        return None
    return len(doc.data.result or ()) if doc.data is not None else 0


def decode_document(
    body: bytes | bytearray,
    strict: msgspec.json.Decoder[T],
    lenient: msgspec.json.Decoder[U],
    what: str,
) -> T | U:
    """``body`` decoded in one pass by ``strict``; when some part does not fit, by
    ``lenient``: the same shape with each node's entry left as ``msgspec.Raw``, for the
    caller to decode one by one and refuse only the node whose entry does not fit.
    SourceError ``not {what}: ...`` when the body is not JSON or its frame does not fit."""
    try:
        return strict.decode(body)
    except msgspec.ValidationError:
        pass  # the frame does not fit, or only an entry: the lenient pass tells which
    except msgspec.DecodeError as exc:
        raise SourceError(f"not {what}: {exc}") from None
    try:
        return lenient.decode(body)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise SourceError(f"not {what}: {exc}") from None


async def get_from_api(api: KubeAPI, path: str, max_bytes: int, what: str) -> bytes:
    """GET ``path`` from the API server off the event loop, the read stopping at
    ``max_bytes`` (source.max_response_bytes). The API server is authenticated (the
    kubeconfig's CA), but for metrics.k8s.io it relays what metrics-server answers (an
    aggregated API), so the body is as untrusted as any source's. SourceError names
    ``what`` was being read."""
    try:
        return await asyncio.to_thread(
            api.get, path, max_bytes=max_bytes, cap_name="source.max_response_bytes"
        )
    except KubeError as exc:
        raise SourceError(f"{what}: {exc}") from None
