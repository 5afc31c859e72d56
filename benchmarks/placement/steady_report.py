"""The run table and the figure of a steady scenario's section in docs/placement.md
(steady_section.py): figures over the stream's span (benchmarks/placement/timeline.py)
instead of one final placement."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchmarks.placement.formatting import num, spread
from benchmarks.placement.measures import HOT_THRESHOLD, timing
from benchmarks.placement.runner import RunResult
from benchmarks.placement.scenario import Change, Scenario
from benchmarks.placement.steady_measures import Timeline
from benchmarks.placement.timeline import OverTime, Segment, Stay, over_time, segments

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class SteadyRow:
    """One run of a steady scenario."""

    contender: str
    over: OverTime | None  # None: the run has no stream (it failed before it)
    placed: int  # pods bound during the stream, replacements included
    expired: int  # pods the runner deleted at the end of their lifetime
    evicted: int  # pods deleted by anything else: the descheduler
    pending: int  # pods left unbound at the end
    p50: float | None  # creation to binding, seconds
    p99: float | None
    error: str | None


def stays(result: RunResult, start: float, end: float) -> list[Stay]:
    """Each bound pod's time on its node, in seconds after `start`: from its binding until
    it was first seen going, or `end` for a pod still there."""
    return [
        Stay(
            pod,
            result.workloads[pod],
            node,
            result.bound_at[pod] - start,
            result.gone_at.get(pod, end) - start,
        )
        for pod, node in result.placed.items()
        if pod in result.bound_at and pod in result.workloads
    ]


def timeline_of(scenario: Scenario, result: RunResult) -> Timeline | None:
    """The run as steady_measures sees it, in seconds into its stream, with the changes
    as applied; None when it has no stream (it failed before one)."""
    if result.stream is None or not result.stream[1] > result.stream[0]:
        return None
    start, end = result.stream
    return Timeline(
        scenario.nodes,
        tuple(stays(result, start, end)),
        {w.name: w.usage for w in scenario.workloads},
        tuple(
            Change(c["at"] - start, c["node"], c["memory"], c.get("hot")) for c in result.changes
        ),
        end - start,
        {w.name: w.replicas for w in scenario.workloads},
    )


def stream(scenario: Scenario, result: RunResult) -> list[Segment] | None:
    """The run's step function (timeline.segments), in seconds into its stream; None when
    it has no stream (it failed before one)."""
    if result.stream is None or not result.stream[1] > result.stream[0]:
        return None
    start, end = result.stream
    return list(
        segments(
            scenario.nodes,
            stays(result, start, end),
            {w.name: w.usage for w in scenario.workloads},
            {w.name: w.replicas for w in scenario.workloads},
            (0.0, end - start),
            # as applied, not as scheduled
            [Change(c["at"] - start, c["node"], c["memory"], c.get("hot")) for c in result.changes],
        )
    )


def steady_row(scenario: Scenario, result: RunResult) -> SteadyRow:
    parts = stream(scenario, result)
    over = over_time(parts) if parts is not None else None
    t = timing(result.created, result.bound_at)
    return SteadyRow(
        result.contender,
        over,
        len(result.bound_at),
        len(result.expired),
        len(result.evictions),
        sum(result.pending.values()),
        t.p50 if t else None,
        t.p99 if t else None,
        result.error,
    )


HEADER = [
    "| contender | n | pods placed | hottest node, mean % | hottest node, peak % "
    "| s any node > 80 % | s any node's demand > capacity | pods on hot, mean "
    "| largest share %, peak | ended lifetime | evicted | pending at end | p50 ms | p99 ms |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
]


def table(rows: Sequence[SteadyRow]) -> list[str]:
    """One line per contender, each figure the median over its runs (min-max)."""
    by: dict[str, list[SteadyRow]] = {}
    for r in rows:
        by.setdefault(r.contender, []).append(r)
    pct, one, ms = num(), num(1, "{:.0f}"), num(1000, "{:.0f}")
    out = list(HEADER)
    for name, runs in by.items():
        overs = [r.over for r in runs if r.over is not None]

        def cell(values: Sequence[float | None], fmt: Callable[[float], str] = one) -> str:
            return spread([v for v in values if v is not None], fmt)

        out.append(
            f"| {name} | {len(runs)} | "
            + " | ".join(
                [
                    cell([float(r.placed) for r in runs]),
                    cell([o.mean_hottest for o in overs], pct),
                    cell([o.peak_hottest for o in overs], pct),
                    cell([o.over_80_seconds for o in overs]),
                    cell([o.over_capacity_seconds for o in overs]),
                    cell([o.mean_pods_on_hot for o in overs], num(1, "{:.1f}")),
                    cell([o.peak_share for o in overs], num(100, "{:.0f}")),
                    cell([float(r.expired) for r in runs]),
                    cell([float(r.evicted) for r in runs]),
                    cell([float(r.pending) for r in runs]),
                    cell([r.p50 for r in runs], ms),
                    cell([r.p99 for r in runs], ms),
                ]
            )
            + " |"
        )
    return out


# Beyond this many instants the rotated labels of the changes overprint one another at the
# figure's 10-inch width (steady-vary's 12 instants of two changes each did); the lines stay
# and the scenario's description says what they are.
MAX_CHANGE_LABELS = 8


def figure(scenario: Scenario, results: Sequence[RunResult]) -> Figure | None:
    """The hottest node's utilisation over the stream, one line per contender: its run
    with the median mean (the lower median, an observed run), the 80 % and 100 % lines,
    and the scenario's changes where they were scheduled. None when no run has a stream."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by: dict[str, list[list[Segment]]] = {}
    for r in results:
        parts = stream(scenario, r)
        if parts:
            by.setdefault(r.contender, []).append(parts)
    if not by:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.5), layout="constrained")
    for name, runs in by.items():
        runs.sort(key=lambda parts: over_time(parts).mean_hottest)
        parts = runs[max(0, math.ceil(len(runs) / 2) - 1)]
        xs = [g.start for g in parts] + [parts[-1].start + parts[-1].seconds]
        ys = [100 * g.hottest for g in parts]
        ax.stairs(ys, xs, label=f"{name} (n={len(runs)}, the median run)", baseline=None)
    ax.axhline(100 * HOT_THRESHOLD, color="red", linestyle=":", linewidth=1, label="80 %")
    ax.axhline(100, color="black", linestyle="--", linewidth=1, label="capacity")
    assert scenario.steady is not None
    at: dict[float, list[Change]] = {}
    for c in scenario.steady.changes:
        at.setdefault(c.at_seconds, []).append(c)
    for i, (t, changes) in enumerate(sorted(at.items())):
        ax.axvline(t, color="gray", linestyle="-.", linewidth=1,
                   label="background changed" if i == 0 else None)  # fmt: skip
        if len(at) <= MAX_CHANGE_LABELS:
            ax.annotate(
                ", ".join(f"{c.node} {c.memory / 2**30:g}Gi" for c in changes),
                (t, 0.02),
                xycoords=("data", "axes fraction"),
                fontsize="small",
                rotation=90,
            )
    ax.set(
        xlabel="seconds into the stream",
        ylabel="hottest node, % (max of CPU and memory)",
        title=f"{scenario.name}: {scenario.title}",
    )
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="small", loc="lower right")
    return fig


INTRO = """\
- **Steady** scenarios are a stream, not one placement: every pod lives for a time drawn
  from its workload's range, is deleted by the benchmark and replaced by its ReplicaSet,
  for the stated number of seconds (at least five of load-watcher's one-minute collections
  for the shipped ones), so each contender decides later pods on metrics that hold its
  earlier ones. Their figures are over that span, from the same ground truth: **hottest
  node** is, at each instant, the highest utilisation of any node in either resource,
  averaged over the span (mean) and at its highest (peak); **s any node > 80 %** and
  **s any node's demand > capacity** are the seconds during which some node was above
  80 % or above 100 % (kwok nodes report what their pods declare, so above 100 % is demand
  a real node could not meet, not measured use); **pods on hot, mean** the pods on nodes
  while they count as hot (marked so, or from a change that makes them so), averaged over
  the span; **largest share %, peak** the most of one workload's
  replicas on one node at any instant; **ended lifetime** the pods the benchmark deleted;
  **evicted** those something else deleted (the descheduler); **p50/p99 ms** creation to
  binding over every pod of the stream.
- Below each steady table, the same runs **per resource, after a warm-up** (120 s unless
  the report says otherwise; `--warmup`), from `benchmarks/placement/steady_measures.py`:
  the hottest node's CPU and memory apart (CPU over 100 % on a kwok node is demand nothing
  throttles, memory over 100 % what a real node would kill for), its time-weighted mean
  and **p99** over time (the least level it stays at or below for 99 % of the measured
  seconds), its **drift** (the mean over the last third of the measured seconds minus the
  mean over the first third, in points: a placement that worsens with time shows here; in a
  scenario whose backgrounds change it mixes in the phases), the seconds above 80 % and
  above 100 %; the hottest node's mean **per phase**
  where background changes split the stream (phases with the same backgrounds together);
  and the **largest share of a workload's running pods on one node**, time-averaged over
  the instants where some workload runs at least two (1/n spread over n nodes, 100 % all on
  one: what a node's loss costs), and the **seconds all on one node while another had
  room**: some workload running all its replicas, two or more, on one node while another
  would stay at or under 80 % with one more of them (the stretch between a pod's going and
  its replacement's binding is not judged). Beside them two **optima over each run's own trace**
  (`benchmarks/placement/optimum.py`, solved with HiGHS): **per instant**, the best
  placement of the pods running at each instant with pods free to move, time-averaged (a
  bound no scheduler, migrating or not, can beat), and **without migration**, each pod
  placed once at its arrival for its whole stay with every lifetime known in hindsight,
  minimising the same time-averaged hottest node (a mixed-integer programme, proven
  optimal or stopped at a time limit with its gap stated). Where the backgrounds change
  after the first pod, a third, on the hotter of CPU and memory: without migration with the
  pods bound before the first change kept where the run put them (**cannot see the change
  coming**): the optimum above places those pods for a change no scheduler could foresee.
  The **gap** is taken per run,
  the contender's figure minus its trace's optimum, in percentage points. The freshness
  of the load readings behind the decisions is in the loadwise extender's decision logs
  (its ``age``, from the runs after 2026-11-28 12:40 UTC on; older logs lack it):
  `python -m benchmarks.placement.prediction` prints it per run and leaves a stalled run
  out of its error tables.
  Runs from before 2026-11-28 replay one trace per scenario (their lifetimes seeded by the
  scenario and workload names); later runs draw the ramp's arrivals and the lifetimes from
  the invocation's `--seed` and the round (`benchmarks/placement/trace.py`): the
  contenders of a round share a trace, each round is another.
"""
