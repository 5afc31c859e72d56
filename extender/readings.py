"""What a load source may say about a node, checked in one place.

Every figure in a :class:`~extender.model.LoadSnapshot` is a percentage of the node's
capacity (a mean, or its standard deviation). Each source decodes its own wire format
into such figures, unchecked, and hands the snapshot to :func:`validated`, which

- refuses a node with any figure that is not a finite number, is more than ``SLACK``
  below 0, or a use above ``SATURATED`` (a standard deviation above 100 + ``SLACK``):
  the node moves from ``nodes`` to ``invalid`` with the reason, and is scored as one
  whose load is unknown (``nodestate``): neutral, never idle, while every other node
  keeps its figures. One node's broken exporter must not switch load-awareness off
  for the cluster, nor may a reading below zero make its node look idler than idle;
- keeps a use between 100 + ``SLACK`` and ``SATURATED`` as read: a node over its
  capacity, from a source that reports what the pods ask for rather than what the node
  could give (kwok's simulated kubelets, which sum their pods' declared use) or a node
  whose capacity shrank under running pods. Refused as unknown, such a node took no
  departures into account until the next reading (its score is "no data" whatever left
  it), so the nodes beside it took every pod meanwhile: in the in-process streams of
  tests/extender/steady_sim.py (het-21: a node reading 118 % CPU stayed unknown for two
  minutes after a 2-core pod left it) least-used's hottest node ran up to 38 points above
  the request-counting scheduler's on one of 60 drawn streams. Clamped to 100, it lost
  how far over it was, and a departure then came off the clamped figure: a node at
  159 % whose 72 % pod left looked 28 % used where 87 % was, and took the next big pod
  (least-used's hottest node 10.5 points above that scheduler's in the simulator's
  ``equal_sizes(145)``, tests/extender/steady_sim.py; 1.1 kept as read, both before
  least-used's hottest-node term);
- reads a figure within ``SLACK`` of the range as measurement jitter and clamps it
  into 0..100. A usage rate is a counter's increase over a window whose two ends are
  sampled a little apart from their timestamps, so a saturated CPU can read slightly
  above its capacity and an idle one slightly below zero (Prometheus ``rate()``
  extrapolates to the window's edges, promql/functions.go ``extrapolatedRate``; the
  kubelet's CPU usage is also a difference of two counter reads over a window). A
  saturated node must read as full, not as unknown;
- judges each node's measurement time (its own, ``measured_at``, else ``window_end``):
  one up to ``CLOCK_SKEW_SECONDS`` after the fetch is clamped to the time of the fetch,
  so that it still ages; one further ahead refuses the node (``future``): a reading
  stamped with a far-off date would otherwise stay fresh until that date, whatever
  happened since. A time that is not finite reads as the epoch (as old as can be).

:func:`expired` is the other half of a node's age: a node whose reading is older than
``max_stale_seconds`` is refused (``stale``), alone, as the whole snapshot is when it
is that old (``nodestate``); the refresher applies it after each fetch and whenever
the next node reaches that age. So a Prometheus sample 3,000 s old is not read as
current because the sample beside it is new.

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
    "CLOCK_SKEW_SECONDS",
    "FUTURE",
    "MALFORMED",
    "NEGATIVE",
    "NOT_FINITE",
    "OVER_CAPACITY",
    "REASONS",
    "SATURATED",
    "SLACK",
    "STALE",
    "describe",
    "expired",
    "next_expiry",
    "validated",
]

NOT_FINITE = "not_finite"
"""NaN or an infinity (Prometheus answers ``"NaN"`` for 0/0, ``"+Inf"`` for x/0)."""
NEGATIVE = "negative"
OVER_CAPACITY = "over_capacity"
"""A use above ``SATURATED``, a standard deviation above 100 + ``SLACK``: more than the
node could be asked for, a wrong capacity or unit."""
MALFORMED = "malformed"
"""Not a number at all (garbage text, a wrong JSON type in the node's entry)."""
FUTURE = "future"
"""Measured more than ``CLOCK_SKEW_SECONDS`` after the extender read it."""
STALE = "stale"
"""Measured more than ``max_stale_seconds`` ago (:func:`expired`)."""
REASONS = (NOT_FINITE, NEGATIVE, OVER_CAPACITY, MALFORMED, FUTURE, STALE)
"""Every ``reason`` a refused reading carries (the metrics label's values)."""

CLOCK_SKEW_SECONDS = 60.0
"""How far after the fetch a measurement time is read as clock skew (and clamped), not
as a wrong date. Clocks kept by NTP agree within milliseconds, load-watcher's times are
whole seconds; a minute leaves room for a machine whose clock drifts unsynchronised for
a while, and is short beside ``stale_after_seconds`` (180 s), so a reading dated within
it cannot look fresh for much longer than it is."""

SLACK = 1.0
"""Percentage points outside 0..100 read as jitter and clamped, not refused."""

SATURATED = 200.0
"""The highest use, in percent of capacity, read as a node over its capacity (kept as
read) rather than refused: demand of twice what the node has is as far as a node's own pods
plausibly ask (in tests/extender/steady_sim.py's generated streams placed by requests,
``heterogeneous(7)``, the hottest node's CPU demand reaches 198 % at its 99th
percentile); more is a wrong capacity or unit, which scored as full would keep the filter
from the node for as long as the source is wrong."""

_LOW, _HIGH = -SLACK, 100.0 + SLACK


def _figure(resource: str, what: str, value: float, high: float) -> float | InvalidReading:
    """``value`` clamped into 0..100, or why it is refused (above ``high``). Called only
    for a value outside what ``_resource`` keeps as it is (0..100, and a use over
    100 + ``SLACK`` up to ``SATURATED``)."""
    if math.isnan(value) or math.isinf(value):
        # spelt as Prometheus and Go's strconv write them
        text = "NaN" if math.isnan(value) else "+Inf" if value > 0 else "-Inf"
        return InvalidReading(NOT_FINITE, f"{resource} {what} is {text}")
    if value < _LOW:
        return InvalidReading(NEGATIVE, f"{resource} {what} {value:.6g}% is negative")
    if value > high:
        return InvalidReading(
            OVER_CAPACITY, f"{resource} {what} {value:.6g}% is over {high:g}% of capacity"
        )
    return min(max(value, 0.0), 100.0)


def _resource(resource: str, load: ResourceLoad) -> ResourceLoad | InvalidReading:
    avg, std = load.avg, load.std
    # a use over capacity (past the jitter, up to SATURATED) is kept as it is, as in range
    use_kept = avg is None or 0.0 <= avg <= 100.0 or _HIGH < avg <= SATURATED
    if use_kept and (std is None or 0.0 <= std <= 100.0):
        return load  # the usual case: nothing to clamp or refuse (False for NaN)
    if avg is not None and not use_kept:
        checked = _figure(resource, "use", avg, SATURATED)
        if isinstance(checked, InvalidReading):
            return checked
        avg = checked
    if std is not None and not 0.0 <= std <= 100.0:
        checked = _figure(resource, "std", std, _HIGH)
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


def _when(stamp: float) -> float:
    return stamp if math.isfinite(stamp) else 0.0


def validated(snapshot: LoadSnapshot) -> LoadSnapshot:
    """``snapshot`` with every node's figures in range (0..100, a use up to ``SATURATED``)
    and its measurement time at most ``CLOCK_SKEW_SECONDS`` after the fetch (refused nodes
    moved to ``invalid``, joining those the decoder already refused), and every time
    (``window_end``, ``measured_at``) no later than ``fetched_at``. The same object when
    there is nothing to change."""
    changed: dict[str, NodeLoad | InvalidReading] = {}
    for name, load in snapshot.nodes.items():
        checked = _node(load)
        if checked is not load:
            changed[name] = checked
    fetched = snapshot.fetched_at
    limit = fetched + CLOCK_SKEW_SECONDS
    end = _when(snapshot.window_end)
    times = snapshot.measured_at
    if end > limit or times:
        for name in snapshot.nodes:
            stamp = _when(times.get(name, end))
            if stamp > limit:
                changed[name] = InvalidReading(
                    FUTURE,
                    f"measured {stamp - fetched:.0f}s after it was read "
                    f"(clock skew allowed: {CLOCK_SKEW_SECONDS:g}s)",
                )
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
    window_end = min(end, fetched)
    measured_at = times
    if times and (
        nodes is not snapshot.nodes
        or not times.keys() <= nodes.keys()
        or any(not t <= fetched for t in times.values())  # later, or NaN
    ):
        measured_at = {name: min(_when(times[name]), fetched) for name in nodes if name in times}
    if nodes is snapshot.nodes and window_end == snapshot.window_end and measured_at is times:
        return snapshot
    return replace(
        snapshot, nodes=nodes, invalid=invalid, window_end=window_end, measured_at=measured_at
    )


def next_expiry(snapshot: LoadSnapshot, max_age: float) -> float:
    """When the oldest reading in ``snapshot`` gets older than ``max_age`` (a unix time;
    infinity without a node)."""
    times, end = snapshot.measured_at, snapshot.window_end
    if not times:
        return end + max_age if snapshot.nodes else math.inf
    return min((times.get(name, end) for name in snapshot.nodes), default=math.inf) + max_age


def expired(snapshot: LoadSnapshot, now: float, max_age: float) -> LoadSnapshot:
    """``snapshot`` with every node whose reading is more than ``max_age`` seconds old at
    ``now`` moved to ``invalid`` (``stale``); the same object when none is."""
    if next_expiry(snapshot, max_age) >= now:
        return snapshot  # the usual case, without a look at each node
    times, end = snapshot.measured_at, snapshot.window_end
    kept: dict[str, NodeLoad] = {}
    refused = dict(snapshot.invalid)
    for name, load in snapshot.nodes.items():
        age = now - times.get(name, end)
        if age > max_age:
            refused[name] = InvalidReading(
                STALE, f"reading {age:.0f}s old, over max_stale_seconds ({max_age:g}s)"
            )
        else:
            kept[name] = load
    measured_at = {name: t for name, t in times.items() if name in kept}
    return replace(snapshot, nodes=kept, invalid=refused, measured_at=measured_at)


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
