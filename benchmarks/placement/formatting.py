"""The figures of docs/placement.md as text: a median over repeats with its range, a number
scaled and formatted, a scenario section's heading. Shared by report.py and the steady
sections (steady_report.py, steady_tables.py), which report.py in turn includes."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from benchmarks.placement.measures import percentile
from benchmarks.placement.scenario import Scenario


def median(values: Sequence[float]) -> float:
    """The lower median (nearest rank 50, measures.percentile): an observed value, so the
    run a median names exists (its hottest node can be shown) and n=2 picks a real run."""
    return percentile(values, 50)


def spread(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    """ "median (min-max)" over the repeats; one run is just its value (n says 1)."""
    if not values:
        return "-"
    if len(values) == 1:
        return fmt(values[0])
    return f"{fmt(median(values))} ({fmt(min(values))}-{fmt(max(values))})"


def num(scale: float = 100, fmt: str = "{:.1f}") -> Callable[[float], str]:
    """A formatter of `scale` times its argument: num() shows a share as a percentage."""
    return lambda x: fmt.format(scale * x)


def heading(scenario: Scenario, facts: str) -> list[str]:
    """A scenario section's title, description and a line of `facts` naming its file."""
    return [
        f"## {scenario.name}: {scenario.title}",
        "",
        scenario.description,
        "",
        f"{facts}; file {_file(scenario.name)}.",
        "",
    ]


def _file(name: str) -> str:
    """Where a scenario's file is: a generated one (generator.py, gen-<seed>-<index>) is
    written beside the report's results, or kept in the development set."""
    if re.fullmatch(r"gen-\d+-\d+", name):
        return (
            f"`placement/generated/{name}.yaml` beside this report "
            "(the development set's in `benchmarks/scenarios/generated-dev/`)"
        )
    return f"`benchmarks/scenarios/{name}.yaml`"
