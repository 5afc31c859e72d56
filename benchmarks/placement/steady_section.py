"""docs/placement.md's section for a steady scenario: the run table (steady_report.py) and
the per-resource tables after the warm-up (steady_tables.py, which builds on
steady_report), under one heading."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchmarks.placement import steady_tables
from benchmarks.placement.formatting import heading
from benchmarks.placement.runner import RunResult
from benchmarks.placement.scenario import Scenario
from benchmarks.placement.steady_measures import Settings
from benchmarks.placement.steady_report import steady_row, table


def section(
    scenario: Scenario,
    results: Sequence[RunResult],
    plot: str | None = None,
    settings: Settings | None = None,
    cache: Path | None = None,
) -> list[str]:
    """The scenario's heading, description, table, the measures after the warm-up with
    the optima (steady_tables), the runs' errors and its `plot`."""
    assert scenario.steady is not None
    st = scenario.steady
    hot = [n.name for n in scenario.nodes if n.hot]
    rows = [steady_row(scenario, r) for r in results]
    durations = sorted({r.duration or st.duration_seconds for r in results})
    out = heading(
        scenario,
        f"{len(scenario.nodes)} nodes"
        + (f", hot: {', '.join(hot)}" if hot else "")
        + f"; {scenario.pod_count} pods at a time, a "
        + " or ".join(f"{d:g}" for d in durations)
        + " s stream",
    )
    out += [*table(rows), ""]
    out += steady_tables.lines(scenario, results, settings or Settings(), cache)
    errs = [f"- {r.contender}: {r.error}" for r in rows if r.error]
    if errs:
        out += ["Runs with an error:", "", *errs, ""]
    if plot:
        out += [f"![the hottest node over time, {scenario.name}]({plot})", ""]
    return out
