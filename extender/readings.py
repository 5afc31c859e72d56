"""What a load source may say about a node, checked in one place.

Every figure in a :class:`~extender.model.LoadSnapshot` is a percentage of the node's
capacity (a mean, or its standard deviation). Each source decodes its own wire format
into such figures, unchecked, and hands the snapshot to :func:`validated`, which

- refuses a node with any figure that is not a finite number, or is more than
  ``SLACK`` below 0 or above 100 (for an absolute source: beyond the node's capacity):
  the node moves from ``nodes`` to ``invalid`` with the reason, and is scored as one
  whose load is unknown (``nodestate``): neutral, never idle, while every other node
  keeps its figures. One node's broken exporter must not switch load-awareness off
  for the cluster, nor may a reading below zero make its node look idler than idle;
- reads a figure within ``SLACK`` of the range as measurement jitter and clamps it
  into 0..100. A usage rate is a counter's increase over a window whose two ends are
  sampled a little apart from their timestamps, so a saturated CPU can read slightly
  above its capacity and an idle one slightly below zero (Prometheus ``rate()``
  extrapolates to the window's edges, promql/functions.go ``extrapolatedRate``; the
  kubelet's CPU usage is also a difference of two counter reads over a window). A
  saturated node must read as full, not as unknown;
- clamps a measurement time in the future to the time of the fetch, so that a source
  whose clock is ahead, or which stamped one reading with a far-off date and then
  died, still goes stale (``Refresher.age`` counts from ``window_end``); a time that
  is not finite reads as the epoch (as old as can be).

The checks are pure and cheap (a chained comparison per figure in the usual case),
so each source's decoder calls :func:`validated` on what it built and a snapshot is
never held unchecked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from msgspec.structs import replace

from .model import InvalidReading, LoadSnapshot, NodeLoad, ResourceLoad

__all__ = [
    "MALFORMED",
    "NEGATIVE",
    "NOT_FINITE",
    "OVER_CAPACITY",
    "REASONS",
    "SLACK",
    "describe",
    "validated",
]

NOT_FINITE = "not_finite"
"""NaN or an infinity (Prometheus answers ``"NaN"`` for 0/0, ``"+Inf"`` for x/0)."""
NEGATIVE = "negative"
OVER_CAPACITY = "over_capacity"
"""Above 100 %: more than the node's capacity."""
MALFORMED = "malformed"
"""Not a number at all (garbage text, a wrong JSON type in the node's entry)."""
REASONS = (NOT_FINITE, NEGATIVE, OVER_CAPACITY, MALFORMED)
"""Every ``reason`` a refused reading carries (the metrics label's values)."""

SLACK = 1.0
"""Percentage points outside 0..100 read as jitter and clamped, not refused."""

_LOW, _HIGH = -SLACK, 100.0 + SLACK


def _figure(resource: str, what: str, value: float) -> float | InvalidReading:
    """``value`` clamped into 0..100, or why it is refused. Called only for a value
    outside 0..100 (the caller's chained comparison is the fast path)."""
    if math.isnan(value) or math.isinf(value):
        # spelt as Prometheus and Go's strconv write them
        text = "NaN" if math.isnan(value) else "+Inf" if value > 0 else "-Inf"
        return InvalidReading(NOT_FINITE, f"{resource} {what} is {text}")
    if value < _LOW:
        return InvalidReading(NEGATIVE, f"{resource} {what} {value:.6g}% is negative")
    if value > _HIGH:
        return InvalidReading(
            OVER_CAPACITY, f"{resource} {what} {value:.6g}% is over 100% of capacity"
        )
    return min(max(value, 0.0), 100.0)


def _resource(resource: str, load: ResourceLoad) -> ResourceLoad | InvalidReading:
    avg, std = load.avg, load.std
    if (avg is None or 0.0 <= avg <= 100.0) and (std is None or 0.0 <= std <= 100.0):
        return load  # the usual case: nothing to clamp or refuse (False for NaN)
    if avg is not None and not 0.0 <= avg <= 100.0:
        checked = _figure(resource, "use", avg)
        if isinstance(checked, InvalidReading):
            return checked
        avg = checked
    if std is not None and not 0.0 <= std <= 100.0:
        checked = _figure(resource, "std", std)
        if isinstance(checked, InvalidReading):
            return checked
        std = checked
    return ResourceLoad(avg, std)


def _node(load: NodeLoad) -> NodeLoad | InvalidReading:
    cpu = _resource("cpu", load.cpu)
    if isinstance(cpu, InvalidReading):
        return cpu
    memory = _resource("memory", load.memory)
    if isinstance(memory, InvalidReading):
        return memory
    if cpu is load.cpu and memory is load.memory:
        return load
    return NodeLoad(cpu, memory)


def validated(snapshot: LoadSnapshot) -> LoadSnapshot:
    """``snapshot`` with every node's figures in 0..100 (refused nodes moved to
    ``invalid``, joining those the decoder already refused) and ``window_end`` no
    later than ``fetched_at``. The same object when there is nothing to change."""
    changed: dict[str, NodeLoad | InvalidReading] = {}
    for name, load in snapshot.nodes.items():
        checked = _node(load)
        if checked is not load:
            changed[name] = checked
    # a node the decoder refused (one query's value was garbage) but read in another
    both = snapshot.invalid.keys() & snapshot.nodes.keys()
    nodes: Mapping[str, NodeLoad] = snapshot.nodes
    invalid: Mapping[str, InvalidReading] = snapshot.invalid
    if changed or both:
        kept: dict[str, NodeLoad] = {}
        refused = dict(invalid)  # the decoder's reason first
        for name, load in snapshot.nodes.items():
            checked = changed.get(name, load)
            if isinstance(checked, InvalidReading):
                refused.setdefault(name, checked)
            elif name not in refused:
                kept[name] = checked
        nodes, invalid = kept, refused
    window_end = snapshot.window_end if math.isfinite(snapshot.window_end) else 0.0
    window_end = min(window_end, snapshot.fetched_at)
    if nodes is snapshot.nodes and window_end == snapshot.window_end:
        return snapshot
    return replace(snapshot, nodes=nodes, invalid=invalid, window_end=window_end)


def describe(invalid: Mapping[str, InvalidReading], *, listed: int = 5) -> str:
    """``2 nodes with invalid readings, scored as unknown: a (cpu use is nan), b (...)``:
    the first ``listed`` by name, then how many more."""
    names = sorted(invalid)
    parts = [f"{_name(n)} ({invalid[n].detail})" for n in names[:listed]]
    if len(names) > listed:
        parts.append(f"+{len(names) - listed} more")
    count = f"{len(names)} node{'s' if len(names) != 1 else ''}"
    return f"{count} with invalid readings, scored as unknown: {', '.join(parts)}"


def _name(name: str) -> str:
    """A node name as the source sent it, safe for a log line or /readyz: quoted and
    escaped when it holds anything but printable characters, cut to 64."""
    shown = name if name.isprintable() and name else repr(name)
    return shown if len(shown) <= 64 else shown[:61] + "..."
