"""docs/placement.md's section for a steady scenario: figures over the stream's span
(benchmarks/placement/timeline.py) instead of one final placement."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks.placement.measures import timing
from benchmarks.placement.report import _num, heading, spread
from benchmarks.placement.runner import RunResult
from benchmarks.placement.scenario import Change, Scenario
from benchmarks.placement.timeline import OverTime, Stay, over_time


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


def steady_row(scenario: Scenario, result: RunResult) -> SteadyRow:
    over = None
    if result.stream is not None and result.stream[1] > result.stream[0]:
        start, end = result.stream
        over = over_time(
            scenario.nodes,
            stays(result, start, end),
            {w.name: w.usage for w in scenario.workloads},
            {w.name: w.replicas for w in scenario.workloads},
            (0.0, end - start),
            # as applied, not as scheduled
            [Change(c["at"] - start, c["node"], c["memory"], c.get("hot")) for c in result.changes],
        )
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
    pct, one, ms = _num(), _num(1, "{:.0f}"), _num(1000, "{:.0f}")
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
                    cell([o.mean_pods_on_hot for o in overs], _num(1, "{:.1f}")),
                    cell([o.peak_share for o in overs], _num(100, "{:.0f}")),
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


def section(scenario: Scenario, results: Sequence[RunResult]) -> list[str]:
    """The scenario's heading, description, table and the runs' errors."""
    assert scenario.steady is not None
    st = scenario.steady
    hot = [n.name for n in scenario.nodes if n.hot]
    rows = [steady_row(scenario, r) for r in results]
    out = heading(
        scenario,
        f"{len(scenario.nodes)} nodes"
        + (f", hot: {', '.join(hot)}" if hot else "")
        + f"; {scenario.pod_count} pods at a time, a {st.duration_seconds:g} s stream",
    )
    out += [*table(rows), ""]
    errs = [f"- {r.contender}: {r.error}" for r in rows if r.error]
    if errs:
        out += ["Runs with an error:", "", *errs, ""]
    return out


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
"""
