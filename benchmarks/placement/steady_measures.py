"""A steady run's measures per resource, after a warm-up: pure functions.

The ground truth is timeline.py's: between two events (a pod bound, a pod going, a
node's background changed) each node's load is constant, its background plus the declared
usage of the pods on it, over its capacity. Unlike timeline.over_time, which takes the
worse of CPU and memory at each instant over the whole stream, these keep the resources
apart (CPU above 100 % on a kwok node is demand nothing throttles, memory above 100 % is
what a real node would kill for: different things), leave out the first `warmup` seconds
(the ramp, when every contender places onto empty nodes), and split the rest into the
phases the scenario's background changes make.

* hottest node, per resource: at each instant the highest utilisation of any node; its
  time-weighted mean and 99th percentile over time (the least value the hottest node
  stays at or below for 99 % of the measured seconds), and the seconds above 80 % and
  above 100 %.
* phases: the measured span split at the changes' instants; phases with the same
  backgrounds (steady-vary's swing returns to the same state every 60 s) are one row.
* replica share: at each instant, of every workload with at least two running pods, the
  largest part of its running pods on one node (1/n spread over n nodes, 1.0 all on one:
  what losing that node takes from the workload); time-averaged over the instants where
  some workload has two.
* piled: the seconds during which some workload's running pods, two or more, are all on one
  node while another node would stay at or under 80 % CPU and memory with one more of them
  (the bar the estimator issue sets for clusters of unequal nodes: more may go to a big
  node, never all while another has room). A workload runs fewer pods than its replicas
  between one pod's going and its replacement's binding (0.06-0.5 s in the lab's runs);
  that stretch says nothing of where the scheduler put them (3 of 4 on a big node and the
  fourth being replaced would count, as would 2 + 1 over two equal nodes), so it is not
  judged when the replicas are known. A replica left pending shows in the report's
  "pending at end" and latency columns instead.
* freshness of the load reading at each decision: the runs do not record when the
  reading a decision used was taken, so there is no such figure (the report says so).
"""

from __future__ import annotations

import json
import os
import statistics
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from benchmarks.placement.measures import HOT_THRESHOLD
from benchmarks.placement.scenario import Change, Node, Resources
from benchmarks.placement.timeline import OVER_CAPACITY, Stay

WARMUP = 120.0  # seconds: steady-mix's ramp of 16 pods at 0.25/s takes 60 s on average
P_HIGH = 99.0
RESOURCES = ("cpu", "memory")


@dataclass(frozen=True)
class Timeline:
    """A run as the measures see it: the nodes, each pod's stay, each workload's usage,
    the background changes as applied, all in seconds into the stream, which ends at
    `end`."""

    nodes: tuple[Node, ...]
    stays: tuple[Stay, ...]
    usage: Mapping[str, Resources]
    changes: tuple[Change, ...]
    end: float
    replicas: Mapping[str, int] = field(default_factory=dict)
    """Each workload's declared replicas (`piled` judges a workload only while it runs
    all of them); empty: not known, every workload with two or more running judged."""


@dataclass(frozen=True)
class Slice:
    """A stretch over which nothing changed: per node (in `Timeline.nodes` order) its CPU
    and memory utilisation and background memory (bytes), and how many pods of each
    workload each node runs, as sorted (workload, node index, count) with count > 0."""

    start: float
    seconds: float
    cpu: tuple[float, ...]
    memory: tuple[float, ...]
    background: tuple[float, ...]
    counts: tuple[tuple[str, int, int], ...]

    def util(self, resource: str) -> tuple[float, ...]:
        return self.cpu if resource == "cpu" else self.memory

    def running(self) -> Counter[str]:
        """Running pods per workload."""
        out: Counter[str] = Counter()
        for w, _, k in self.counts:
            out[w] += k
        return out


def slices(tl: Timeline, warmup: float = 0.0) -> Iterator[Slice]:
    """The step function of the run from `warmup` to its end, one slice per stretch of
    positive length. Every event of one instant is applied before the stretch after it
    (a replacement bound as its predecessor goes never counts beside it), as in
    timeline.segments. A stay on a node the scenario does not have is an error."""
    if not tl.end > warmup:
        raise ValueError(f"nothing to measure: the stream ends at {tl.end:g} s <= {warmup:g} s")
    index = {n.name: i for i, n in enumerate(tl.nodes)}
    for s in tl.stays:
        if s.node not in index:
            raise ValueError(f"pod {s.pod} is on {s.node!r}, not a node of the scenario")
        if s.workload not in tl.usage:
            raise ValueError(f"pod {s.pod}: workload {s.workload!r} has no declared usage")
    cpu = [n.background.cpu for n in tl.nodes]
    bg = [n.background.memory for n in tl.nodes]
    mem = [0.0] * len(tl.nodes)
    per: Counter[tuple[str, int]] = Counter()
    events: list[tuple[float, int, Stay | Change]] = []
    for s in tl.stays:
        if s.end > s.start and s.start < tl.end:
            events += [(max(s.start, 0.0), 1, s), (s.end, -1, s)]
    events += [(max(c.at_seconds, 0.0), 0, c) for c in tl.changes if c.at_seconds < tl.end]
    events.sort(key=lambda e: e[0])
    bounds = sorted({e[0] for e in events if 0 < e[0] < tl.end} | {warmup, tl.end})
    i, t = 0, 0.0
    for nxt in bounds:
        while i < len(events) and events[i][0] <= t:
            _, sign, what = events[i]
            i += 1
            if isinstance(what, Change):
                if what.node in index:
                    bg[index[what.node]] = what.memory
                continue
            u, k = tl.usage[what.workload], index[what.node]
            cpu[k] += sign * u.cpu
            mem[k] += sign * u.memory
            per[(what.workload, k)] += sign
        if nxt > t and t >= warmup:
            yield Slice(
                t,
                nxt - t,
                tuple(c / n.capacity.cpu for c, n in zip(cpu, tl.nodes, strict=True)),
                tuple(
                    (b + m) / n.capacity.memory for b, m, n in zip(bg, mem, tl.nodes, strict=True)
                ),
                tuple(bg),
                tuple(sorted((w, k, c) for (w, k), c in per.items() if c > 0)),
            )
        t = nxt


def hotter_mean(tl: Timeline, warmup: float) -> float:
    """The time-weighted mean after `warmup` of the higher of the hottest node's CPU and
    its memory (fractions of capacity)."""
    total = weighted = 0.0
    for g in slices(tl, warmup):
        total += g.seconds
        weighted += g.seconds * max(max(g.cpu), max(g.memory))
    if not total > 0:
        raise ValueError("nothing measured after the warm-up")
    return weighted / total


def weighted_percentile(values: Sequence[tuple[float, float]], q: float) -> float:
    """The least value v such that the (value, seconds) pairs at or below v hold at least
    q % of the seconds: the nearest-rank percentile over time (an observed value, as
    measures.percentile)."""
    if not values:
        raise ValueError("no values")
    if not 0 < q <= 100:
        raise ValueError(f"q must be in (0, 100], got {q}")
    total = sum(s for _, s in values)
    if not total > 0:
        raise ValueError("no time to take a percentile over")
    acc = 0.0
    ordered = sorted(values)
    for v, s in ordered:
        acc += s
        if acc >= q / 100 * total * (1 - 1e-12):
            return v
    return ordered[-1][0]


@dataclass(frozen=True)
class Hottest:
    """One resource's hottest node over the measured span (fractions of capacity)."""

    mean: float
    p99: float
    peak: float
    over_80_seconds: float
    over_100_seconds: float
    drift: float = 0.0
    """The mean over the last third of the measured seconds minus the mean over the first
    third: a placement that worsens as the stream goes on shows it here."""


def third_means(hot: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The time-weighted mean of (value, seconds) pieces over the first and over the last
    third of their seconds, a piece across a boundary split at it."""
    total = sum(s for _, s in hot)
    if total <= 0:
        raise ValueError("no measured seconds")
    edge = total / 3
    first = last = 0.0
    at = 0.0
    for value, seconds in hot:
        start, end = at, at + seconds
        first += value * max(0.0, min(end, edge) - start)
        last += value * max(0.0, end - max(start, total - edge))
        at = end
    return first / edge, last / edge


def hottest(parts: Sequence[Slice], resource: str) -> Hottest:
    if not parts:
        raise ValueError("no slices: nothing measured")
    hot = [(max(g.util(resource)), g.seconds) for g in parts]
    total = sum(s for _, s in hot)
    first, last = third_means(hot)
    return Hottest(
        mean=sum(v * s for v, s in hot) / total,
        p99=weighted_percentile(hot, P_HIGH),
        peak=max(v for v, _ in hot),
        over_80_seconds=sum(s for v, s in hot if v > HOT_THRESHOLD),
        over_100_seconds=sum(s for v, s in hot if v > OVER_CAPACITY),
        drift=0.0 if abs(last - first) < 1e-9 else last - first,  # no "-0.0" for a tie
    )


@dataclass(frozen=True)
class Phase:
    """The measured seconds with one set of backgrounds: `label` names the memory of the
    nodes whose background changes during the run."""

    label: str
    seconds: float
    cpu: float  # the hottest node's time-weighted mean
    memory: float


def phase_label(tl: Timeline, background: Sequence[float]) -> str:
    changing = {c.node for c in tl.changes}
    parts = [
        f"{n.name} {b / 2**30:g}Gi"
        for n, b in zip(tl.nodes, background, strict=True)
        if n.name in changing
    ]
    return ", ".join(parts) or "all"


# Changes scheduled for one instant are applied one after the other, milliseconds apart
# (steady.place's loop): the stretches between them are not phases of the scenario.
PHASE_MIN_SECONDS = 1.0


def phases(tl: Timeline, parts: Sequence[Slice]) -> list[Phase]:
    """Per set of backgrounds (in order of first appearance), the hottest node's mean per
    resource over the measured seconds spent in it; sets held for less than
    PHASE_MIN_SECONDS in all are left out (they still count in every other measure)."""
    acc: dict[str, list[float]] = {}
    for g in parts:
        a = acc.setdefault(phase_label(tl, g.background), [0.0, 0.0, 0.0])
        a[0] += g.seconds
        a[1] += g.seconds * max(g.cpu)
        a[2] += g.seconds * max(g.memory)
    return [Phase(k, s, c / s, m / s) for k, (s, c, m) in acc.items() if s >= PHASE_MIN_SECONDS]


def share(g: Slice) -> float | None:
    """The largest part of one workload's running pods on one node, of workloads with at
    least two running; None when none has two."""
    running = g.running()
    best = [k / running[w] for w, _, k in g.counts if running[w] >= 2]
    return max(best, default=None)


def mean_share(parts: Sequence[Slice]) -> float | None:
    """`share` time-averaged over the slices where it is defined; None if it never is."""
    num = den = 0.0
    for g in parts:
        s = share(g)
        if s is not None:
            num += s * g.seconds
            den += g.seconds
    return num / den if den > 0 else None


def piled(
    g: Slice,
    nodes: Sequence[Node],
    usage: Mapping[str, Resources],
    replicas: Mapping[str, int] | None = None,
) -> bool:
    """Whether in `g` some workload runs two or more pods, all on one node, while another
    node would stay at or under HOT_THRESHOLD in CPU and memory with one more of them;
    with `replicas`, a workload running fewer than its own (one being replaced) is not
    judged."""
    running = g.running()
    for w, k, count in g.counts:
        if count < 2 or count != running[w] or count < (replicas or {}).get(w, 0):
            continue
        u = usage[w]
        for j, n in enumerate(nodes):
            if j != k and (
                g.cpu[j] + u.cpu / n.capacity.cpu <= HOT_THRESHOLD
                and g.memory[j] + u.memory / n.capacity.memory <= HOT_THRESHOLD
            ):
                return True
    return False


@dataclass(frozen=True)
class SteadyMeasures:
    seconds: float  # measured: from the warm-up to the end
    cpu: Hottest
    memory: Hottest
    phases: tuple[Phase, ...]
    share: float | None
    piled_seconds: float = 0.0
    """Seconds some workload's pods were all on one node while another had room (`piled`)."""

    def of(self, resource: str) -> Hottest:
        return self.cpu if resource == "cpu" else self.memory


def measure(tl: Timeline, warmup: float = WARMUP) -> SteadyMeasures:
    parts = list(slices(tl, warmup))
    if not parts:
        raise ValueError("nothing measured after the warm-up")
    return SteadyMeasures(
        seconds=sum(g.seconds for g in parts),
        cpu=hottest(parts, "cpu"),
        memory=hottest(parts, "memory"),
        phases=tuple(phases(tl, parts)),
        share=mean_share(parts),
        piled_seconds=sum(g.seconds for g in parts if piled(g, tl.nodes, tl.usage, tl.replicas)),
    )


@dataclass(frozen=True)
class Settings:
    """How the report measures steady runs: the warm-up left out (seconds) and the
    no-migration optimum's time limit per run and resource (seconds)."""

    warmup: float = WARMUP
    optimum_seconds: float = 20.0


# How long after a decision its prediction is compared with the truth besides the decision's
# own instant: load-watcher's collection period (lab/components.py), the age a node reading
# reaches before the next replaces it.
READING_INTERVAL = 60.0


@dataclass(frozen=True)
class PredictionError:
    """The extender's error predicting the use of the node a pod went to, per resource: the
    mean absolute difference, in points of the node's capacity, between the figure its
    decision record gives (extender/decisionlog.py: the node's use with the pod on it, as the
    scores read it) and the node's true use `lag` seconds after the binding; over the
    `decisions` records joined with a binding after the warm-up (None: no record has a
    figure for that resource)."""

    lag: float
    decisions: int
    cpu: float | None
    memory: float | None

    def of(self, resource: str) -> float | None:
        return self.cpu if resource == "cpu" else self.memory


def _use_at(parts: Sequence[Slice], starts: Sequence[float], t: float) -> Slice | None:
    """The slice holding instant `t` (events of `t` applied), None past the end."""
    i = bisect_right(starts, t) - 1
    if i < 0:
        return None
    g = parts[i]
    return g if t < g.start + g.seconds else None


def last_records(records: Sequence[Mapping[str, object]]) -> dict[str, Mapping[str, object]]:
    """Each pod's last decision record (an earlier one was a retry), by the pod's name without
    its namespace; a record without 'pod' (text) and 'nodes' (a mapping) is an error naming
    it."""
    last: dict[str, Mapping[str, object]] = {}
    for k, rec in enumerate(records):
        pod, nodes = rec.get("pod"), rec.get("nodes")
        if not isinstance(pod, str) or not isinstance(nodes, Mapping):
            raise ValueError(f"decision record {k}: needs 'pod' (text) and 'nodes' (a mapping)")
        last[pod.rpartition("/")[2]] = rec
    return last


def prediction_error(
    tl: Timeline,
    records: Sequence[Mapping[str, object]],
    *,
    lag: float = 0.0,
    warmup: float = WARMUP,
) -> PredictionError:
    """`PredictionError` of decision `records` (JSON objects as extender/decisionlog.py writes
    them) in the run `tl`: each joined by pod name with its stay (the last record of a pod
    counts: an earlier one was a retry), compared at the stay's start + `lag`. A record
    whose shape is wrong is an error naming it; a pod never bound is left out."""
    parts = list(slices(tl, 0.0))
    starts = [g.start for g in parts]
    index = {n.name: i for i, n in enumerate(tl.nodes)}
    last = last_records(records)
    sums = {"cpu": [0.0, 0], "memory": [0.0, 0]}
    joined = 0
    for stay in tl.stays:
        found = last.get(stay.pod)
        if found is None or stay.start < warmup:
            continue
        nodes = found["nodes"]
        assert isinstance(nodes, Mapping)
        figures = nodes.get(stay.node)
        g = _use_at(parts, starts, stay.start + lag)
        if figures is None or g is None:
            continue
        if not isinstance(figures, Sequence) or len(figures) != 2:
            raise ValueError(f"decision record of {stay.pod}: {stay.node} needs [cpu, memory]")
        joined += 1
        k = index[stay.node]
        for resource, predicted in zip(RESOURCES, figures, strict=True):
            if predicted is None:
                continue
            if isinstance(predicted, bool) or not isinstance(predicted, int | float):
                raise ValueError(f"decision record of {stay.pod}: {predicted!r} is not a number")
            acc = sums[resource]
            acc[0] += abs(float(predicted) - 100.0 * g.util(resource)[k])
            acc[1] += 1
    mean = {r: (s / n if n else None) for r, (s, n) in sums.items()}
    return PredictionError(lag, joined, mean["cpu"], mean["memory"])


OVERRIDE_POINTS = 1.0
"""How much hotter (on the hotter of CPU and memory, the extender's own prediction) the node a
pod went to must be than the extender's favourite for the binding to count as overridden
onto a hotter node: among nodes of one size and load the favourite is one of several within
a fraction of a point, and kube-scheduler's pick among them is a tie broken, not an override."""


@dataclass(frozen=True)
class Overrides:
    """How often kube-scheduler bound a pod elsewhere than the extender's favourite: its own
    plugins' scores (requests, the workload's spread) outweighed the extender's weighted
    priority. Over the `decisions` records joined with a binding: `elsewhere` bound to
    another node, `hotter` of those to a node the extender predicted at least
    ``OVERRIDE_POINTS`` hotter than its favourite, by `points` on average (None: none)."""

    decisions: int
    elsewhere: int
    hotter: int
    points: float | None


def _hotter_of_two(figures: object) -> float | None:
    if not isinstance(figures, Sequence) or isinstance(figures, str):
        return None
    values = [float(v) for v in figures if isinstance(v, int | float) and not isinstance(v, bool)]
    return max(values) if values else None


def overrides(records: Sequence[Mapping[str, object]], placed: Mapping[str, str]) -> Overrides:
    """`Overrides` of decision `records` (extender/decisionlog.py) against where each pod
    was first bound (`placed`: pod name -> node); a pod's last record counts (an earlier
    one was a retry: ``last_records``, which refuses a malformed record as
    ``prediction_error`` does); a record without a favourite, or a pod not in `placed`, is
    left out."""
    last = last_records(records)
    decisions = elsewhere = 0
    raised: list[float] = []
    for pod, node in placed.items():
        found = last.get(pod)
        favourite = found.get("favourite") if found is not None else None
        if found is None or not isinstance(favourite, str):
            continue
        decisions += 1
        if node == favourite:
            continue
        elsewhere += 1
        nodes = found["nodes"]
        assert isinstance(nodes, Mapping)  # last_records checked it
        there, best = _hotter_of_two(nodes.get(node)), _hotter_of_two(nodes.get(favourite))
        if there is not None and best is not None and there - best >= OVERRIDE_POINTS:
            raised.append(there - best)
    points = sum(raised) / len(raised) if raised else None
    return Overrides(decisions, elsewhere, len(raised), points)


def read_decisions(path: str) -> list[dict[str, object]]:
    """The records of a decision log (JSON lines), its rotated part (``path.1``, the older)
    first when there is one; a line that is not a JSON object is an error naming its
    file and number."""
    out: list[dict[str, object]] = []
    for part in (f"{path}.1", path):
        if part != path and not os.path.exists(part):
            continue
        with open(part, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{part}:{number}: not JSON ({exc.msg})") from None
                if not isinstance(rec, dict):
                    raise ValueError(f"{part}:{number}: not a JSON object")
                out.append(rec)
    return out


# A decision read metrics older than this and its run counts as stalled: the extender's own
# stale_after_seconds default (docs/contracts.md), past which it stops trusting a reading.
STALLED_SECONDS = 180.0


@dataclass(frozen=True)
class Freshness:
    """How old the load readings behind one run's decisions were: per decision the oldest
    reading among its candidate nodes (``age`` in the decision log)."""

    decisions: int
    median: float | None
    worst: float | None

    @property
    def stalled(self) -> bool:
        return self.worst is not None and self.worst > STALLED_SECONDS


def freshness(records: Sequence[Mapping[str, object]]) -> Freshness:
    """The decisions' ages (decision logs without ``age``, written before it was recorded,
    give None figures)."""
    oldest = []
    for rec in records:
        ages = rec.get("age")
        if isinstance(ages, Mapping) and ages:
            oldest.append(max(float(a) for a in ages.values()))
    if not oldest:
        return Freshness(len(records), None, None)
    return Freshness(len(records), statistics.median(oldest), max(oldest))
