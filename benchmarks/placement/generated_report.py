"""The report's summary over generated scenarios (generator.py): how often each contender
beats stock, by how much, and how far it stays from the optimum.

One generated scenario tells little: a draw can favour anyone. Over many, the question is
whether a contender is better than stock on clusters nobody tuned it on. Per scenario and
resource the figure is the hottest node's time-weighted mean after the warm-up
(steady_measures.Hottest.mean), the median over the contender's runs of it (the lower
median, an observed run's figure); its difference to stock's median on the same scenario
(the rounds share traces, trace.py) is one sample, and the samples' spread (min, the
nearest-rank quartiles, max) is the distribution a reader judges. "Beats" counts the
scenarios where that difference is below zero.

Beside the two resources, the hotter of them: at each instant the higher of the hottest
node's CPU and its memory, time-averaged (``steady_measures.hotter_mean``). A placement
that lowers a cluster's hot resource by raising the other where it is cool shows as a loss
on that other one alone; on a node, what runs out first is the hotter one. Its optimum is
one placement judged on both (optimum.HOTTER), so its gap is not the larger of the two
resources' gaps.

The gap to the optimum is per run, the figure minus the no-migration optimum of the run's
own trace (steady_tables, optimum.py), in percentage points.

TargetLoadPacking aims the CPU of the nodes it packs at a target (targetUtilization, 40 %
by default, extender.estimate.TLP_TARGET_UTILIZATION, the same default as Trimaran's), so
it is also judged on its own terms: the share of the measured time during which the
hottest node's CPU is above that target, for every contender.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.placement import optimum, steady_tables
from benchmarks.placement.generator import parse_name
from benchmarks.placement.measures import HOT_THRESHOLD
from benchmarks.placement.runner import RunResult
from benchmarks.placement.scenario import Scenario
from benchmarks.placement.steady_measures import RESOURCES, Settings, Timeline, slices
from loadwise.extender.estimate import TLP_TARGET_UTILIZATION

TLP_TARGET = TLP_TARGET_UTILIZATION / 100
BASELINE = "stock"
# The estimator issue's bars: never more than 2 points worse than stock; on clusters of
# equal nodes, the replica share within 10 points of stock's.
WORSE_BY = 0.02
SHARE_WITHIN = 0.10
HOTTER = steady_tables.HOTTER_LABEL


def lower_median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


@dataclass(frozen=True)
class Distribution:
    """Samples' min, nearest-rank quartiles (observed values) and max."""

    n: int
    minimum: float
    q1: float
    median: float
    q3: float
    maximum: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        if not values:
            raise ValueError("no values")
        v = sorted(values)

        def rank(q: float) -> float:
            return v[max(0, math.ceil(q * len(v)) - 1)]

        return cls(len(v), v[0], rank(0.25), rank(0.5), rank(0.75), v[-1])

    def cells(self, scale: float = 100) -> str:
        return " / ".join(
            f"{scale * x:+.1f}" for x in (self.minimum, self.q1, self.median, self.q3, self.maximum)
        )


@dataclass(frozen=True)
class Versus:
    """One contender against the baseline on one resource over the generated scenarios
    both ran: in how many its median figure is lower, and the differences."""

    contender: str
    resource: str
    compared: int
    beats: int
    diffs: Distribution | None
    worse: int = 0
    """Scenarios where its median is more than ``worse_by`` above the baseline's."""


def versus(
    figures: Mapping[str, Mapping[str, Sequence[float]]],
    resource: str,
    baseline: str = BASELINE,
    worse_by: float = WORSE_BY,
) -> list[Versus]:
    """`figures`: scenario -> contender -> the runs' figures (lower is better). For every
    contender but the baseline, in order of first appearance, the paired comparison."""
    names: dict[str, None] = {}
    for by in figures.values():
        names.update(dict.fromkeys(c for c in by if c != baseline))
    out = []
    for name in names:
        diffs = [
            lower_median(by[name]) - lower_median(by[baseline])
            for by in figures.values()
            if by.get(name) and by.get(baseline)
        ]
        out.append(
            Versus(
                name,
                resource,
                len(diffs),
                sum(1 for d in diffs if d < -1e-9),
                Distribution.of(diffs) if diffs else None,
                sum(1 for d in diffs if d > worse_by + 1e-9),
            )
        )
    return out


def above(tl: Timeline, warmup: float, level: float, resource: str = "cpu") -> tuple[float, float]:
    """Seconds of the measured span during which the hottest node's `resource` is above
    `level` (a fraction of capacity), and their share of the span."""
    total = hot = 0.0
    for g in slices(tl, warmup):
        total += g.seconds
        if max(g.util(resource)) > level:
            hot += g.seconds
    if not total > 0:
        raise ValueError("nothing measured after the warm-up")
    return hot, hot / total


@dataclass(frozen=True)
class RunSummary:
    scenario: str
    contender: str
    mean: dict[str, float]  # the hottest node's mean per resource (fraction)
    gap: dict[str, float]  # minus the no-migration optimum of the run's trace
    over_target: tuple[float, float]  # seconds, share: hottest CPU above TLP_TARGET
    share: float | None = None  # steady_measures.mean_share
    piled_seconds: float = 0.0  # steady_measures.piled
    equal_nodes: bool = False  # every node of the cluster the same size
    hotter: float | None = None  # hotter_mean
    hotter_gap: float | None = None  # minus the no-migration optimum on the hotter


def summaries(
    scenarios: Sequence[Scenario],
    results: Sequence[RunResult],
    settings: Settings,
    cache: Path | None,
) -> list[RunSummary]:
    """Every run of a generated scenario that outlasts the warm-up."""
    opt = steady_tables.OptimumCache(cache)
    out = []
    for sc in scenarios:
        if parse_name(sc.name) is None or sc.steady is None:
            continue
        # all of the scenario's runs at once: each run's optimum starts from its round's
        # other runs too
        mine = [r for r in results if r.scenario == sc.name]
        for f in steady_tables.figures(sc, mine, settings, opt):
            mean = {res: f.measures.of(res).mean for res in RESOURCES}
            gap = {
                res: steady_tables.gap(mean[res], f.no_migration[res].value) for res in RESOURCES
            }
            equal = len({(n.capacity.cpu, n.capacity.memory) for n in sc.nodes}) == 1
            out.append(
                RunSummary(
                    sc.name,
                    f.contender,
                    mean,
                    gap,
                    above(f.timeline, settings.warmup, TLP_TARGET),
                    f.measures.share,
                    f.measures.piled_seconds,
                    equal,
                    f.hotter,
                    steady_tables.gap(f.hotter, f.no_migration[optimum.HOTTER].value),
                )
            )
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _spread(values: Sequence[float]) -> str:
    if len(values) == 1:
        return _pct(values[0])
    return f"{_pct(lower_median(values))} ({_pct(min(values))}-{_pct(max(values))})"


def lines(runs: Sequence[RunSummary], warmup: float) -> list[str]:
    """The section's tables; [] without runs."""
    if not runs:
        return []
    scen = sorted({r.scenario for r in runs}, key=lambda s: parse_name(s) or (0, 0))
    out = [
        f"## Generated scenarios: {len(scen)} ({', '.join(scen)})",
        "",
        "Drawn by benchmarks/placement/generator.py. Per resource, each contender against "
        f"stock on the hottest node's mean after the {warmup:g} s warm-up: in how many of the "
        "scenarios both ran its median is lower, and the distribution of its median minus "
        "stock's, in percentage points (min / q1 / median / q3 / max; negative is better); "
        f"in how many it is more than {100 * WORSE_BY:g} points worse; "
        "the gap to each run's optimum without migration, in points, the median over its "
        "runs (min-max).",
        "",
        "| contender | resource | beats stock | more than "
        f"{100 * WORSE_BY:g} points worse | difference to stock, points "
        "| gap to the optimum, points |",
        "|---|---|---|---|---|---|",
    ]
    for res in RESOURCES:
        figs: dict[str, dict[str, list[float]]] = {}
        for r in runs:
            figs.setdefault(r.scenario, {}).setdefault(r.contender, []).append(r.mean[res])
        gaps: dict[str, list[float]] = {}
        for r in runs:
            gaps.setdefault(r.contender, []).append(r.gap[res])
        for v in versus(figs, res):
            dist = v.diffs.cells() if v.diffs is not None else "not compared"
            out.append(
                f"| {v.contender} | {res} | {v.beats} of {v.compared} | {v.worse} | {dist} "
                f"| {_spread(gaps[v.contender])} |"
            )
        if BASELINE in gaps:
            out.append(f"| {BASELINE} | {res} | | | | {_spread(gaps[BASELINE])} |")
    hotter: dict[str, dict[str, list[float]]] = {}
    for r in runs:
        if r.hotter is not None:
            hotter.setdefault(r.scenario, {}).setdefault(r.contender, []).append(r.hotter)
    hotter_gaps: dict[str, list[float]] = {}
    for r in runs:
        if r.hotter_gap is not None:
            hotter_gaps.setdefault(r.contender, []).append(r.hotter_gap)
    for v in versus(hotter, HOTTER):
        dist = v.diffs.cells() if v.diffs is not None else "not compared"
        mine = hotter_gaps.get(v.contender)
        out.append(
            f"| {v.contender} | {HOTTER} | {v.beats} of {v.compared} | {v.worse} | {dist} "
            f"| {_spread(mine) if mine else '-'} |"
        )
    if BASELINE in hotter_gaps:
        out.append(f"| {BASELINE} | {HOTTER} | | | | {_spread(hotter_gaps[BASELINE])} |")
    out += [
        "",
        f"Judged on TargetLoadPacking's own target ({TLP_TARGET_UTILIZATION:g} % CPU): the "
        "share of the measured time during which the hottest node's CPU was above it, in %, "
        "the median over each contender's runs (min-max):",
        "",
        "| contender | runs | hottest CPU above the target, % of the time |",
        "|---|---|---|",
    ]
    by: dict[str, list[float]] = {}
    for r in runs:
        by.setdefault(r.contender, []).append(r.over_target[1])
    for name, shares in by.items():
        out.append(f"| {name} | {len(shares)} | {_spread(shares)} |")
    return [*out, *spreading(runs)]


def spreading(runs: Sequence[RunSummary]) -> list[str]:
    """What placing by load costs a workload's failure domains: per contender the largest
    share of a workload's running pods on one node (steady_measures.mean_share), its
    median minus stock's per scenario of equal nodes, and the seconds a workload's pods
    were all on one node while another had room (steady_measures.piled)."""
    shares: dict[str, dict[str, list[float]]] = {}
    for r in runs:
        if r.equal_nodes and r.share is not None:
            shares.setdefault(r.scenario, {}).setdefault(r.contender, []).append(r.share)
    equal = {v.contender: v for v in versus(shares, "share", worse_by=SHARE_WITHIN)}
    out = [
        "",
        "Spreading: the largest share of one workload's running pods on one node, "
        "time-averaged, in %, the median over each contender's runs (min-max); on the "
        "clusters of equal nodes, the scenarios where its median is more than "
        f"{100 * SHARE_WITHIN:g} points above stock's; and the seconds during which some "
        "workload's pods, two or more and all its replicas, were all on one node while another "
        f"node would have stayed at or under {100 * HOT_THRESHOLD:g} % with one more of them "
        "(median over runs, max; the instants between a pod's going and its replacement's "
        "binding are not judged).",
        "",
        "| contender | runs | largest share, % | equal nodes: more than "
        f"{100 * SHARE_WITHIN:g} points above stock | s all on one node, another with room |",
        "|---|---|---|---|---|",
    ]
    by: dict[str, list[RunSummary]] = {}
    for r in runs:
        by.setdefault(r.contender, []).append(r)
    for name, mine in by.items():
        values = [r.share for r in mine if r.share is not None]
        piled = [r.piled_seconds for r in mine]
        v = equal.get(name)
        above_stock = f"{v.worse} of {v.compared}" if v is not None and v.compared else ""
        out.append(
            f"| {name} | {len(mine)} | {_spread(values) if values else 'none'} | {above_stock} "
            f"| {lower_median(piled):.0f} ({max(piled):.0f}) |"
        )
    return [*out, ""]


def over_limits(scenarios: Sequence[Scenario]) -> tuple[int, list[tuple[str, str]]]:
    """How many workloads of the generated scenarios have limits, and which of them
    (scenario, workload) are given a usage above a limit. kwok reports the usage it is
    given; a kubelet throttles CPU at the limit and OOM-kills memory past it, so such a
    workload is one no real node runs. The generator caps usage at the limits since
    9cd90d0; reports drawn before keep the files they ran, and this counts them there."""
    limited = 0
    over: list[tuple[str, str]] = []
    for sc in scenarios:
        if parse_name(sc.name) is None:
            continue
        for w in sc.workloads:
            if w.limits is None:
                continue
            limited += 1
            if w.usage.cpu > w.limits.cpu or w.usage.memory > w.limits.memory:
                over.append((sc.name, w.name))
    return limited, over


def limits_line(scenarios: Sequence[Scenario]) -> list[str]:
    """The sentence under the tables on workloads used past their limits; [] without
    generated scenarios."""
    limited, over = over_limits(scenarios)
    if not limited:
        return []
    if not over:
        return [f"No generated workload uses more than its limits ({limited} have limits).", ""]
    where = sorted({s for s, _ in over}, key=lambda s: parse_name(s) or (0, 0))
    return [
        f"**{len(over)} of the {limited} workloads with limits use more than them**, in "
        f"{len(where)} scenarios ({', '.join(where)}): drawn before the generator capped "
        "usage at the limits. kwok reports that usage; a kubelet would throttle the CPU at "
        "the limit and OOM-kill memory past it.",
        "",
    ]


def section(
    scenarios: Sequence[Scenario],
    results: Sequence[RunResult],
    settings: Settings,
    cache: Path | None,
) -> list[str]:
    """The report's section over the generated scenarios; [] when none ran."""
    out = lines(summaries(scenarios, results, settings, cache), settings.warmup)
    return [*out, *limits_line(scenarios)] if out else []
