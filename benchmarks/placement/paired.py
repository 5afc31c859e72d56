"""Ratios paired within each round, with bootstrap intervals.

The cost scenarios run every contender once per round, one after another, on a machine
whose load moves from minute to minute. The ratio of two contenders' medians mixes that
drift into the comparison; the ratio within each round (both runs minutes apart, under
the load of that round) does not, so a goal on a ratio is judged on the rounds' ratios:
their median, and a 95 % bootstrap interval of that median (scipy.stats.bootstrap,
percentile method: with 3-10 rounds BCa's jackknife has too few points to be better). A
goal is met only when the whole interval is on its side, missed when the whole interval
is on the other, and undecided otherwise.

The report (report.py) pairs the runs and renders the table; this module holds the
arithmetic, so it imports nothing of the report.
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import bootstrap  # type: ignore[import-untyped]  # scipy ships no types

# Resamples of the bootstrap: the interval's ends move by well under 0.01 between seeds
# at this count for the 3-10 ratios a cost comparison has.
RESAMPLES = 9999
LEVEL = 0.95

# The CPU goal (docs/benchmarks.md, "Cost inside the real scheduler"): loadwise's CPU per
# pod at most this many times an extender's that answers at once, both verbs or one.
CPU_GOAL = 1.2

# The pairs the CPU goal is stated on: loadwise against an extender that does nothing.
CPU_PAIRS = (
    ("loadwise-least-used", "null-extender"),
    ("loadwise-prioritize-only", "null-prioritize-only"),
)


@dataclass(frozen=True)
class Paired:
    """One contender against another over the rounds both completed."""

    ratios: tuple[float, ...]  # per round, in round order
    median: float
    low: float | None  # the interval, None with fewer than 3 rounds
    high: float | None

    def at_most(self, goal: float) -> bool | None:
        """True when the ratio is shown to be at most `goal`, False when shown above it,
        None when the interval straddles it (or there are too few rounds)."""
        if self.low is None or self.high is None:
            return None
        if self.high <= goal:
            return True
        if self.low > goal:
            return False
        return None

    def at_least(self, goal: float) -> bool | None:
        """The same for a ratio that must be at least `goal`."""
        if self.low is None or self.high is None:
            return None
        if self.low >= goal:
            return True
        if self.high < goal:
            return False
        return None

    def interval_text(self) -> str:
        if self.low is None or self.high is None:
            return "no interval (fewer than 3 rounds)"
        return f"{self.low:.2f}-{self.high:.2f}"


def interval(values: Sequence[float], seed: int = 0) -> tuple[float, float] | None:
    """The 95 % percentile-bootstrap interval of the median of `values`; None with fewer
    than 3 values (resampling 2 values gives only 3 distinct medians)."""
    if len(values) < 3:
        return None
    res = bootstrap(
        (np.asarray(values, dtype=float),),
        np.median,
        n_resamples=RESAMPLES,
        confidence_level=LEVEL,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def paired(mine: Mapping[Hashable, float], theirs: Mapping[Hashable, float]) -> Paired | None:
    """`mine[k] / theirs[k]` for every round k both have (a positive denominator), in the
    rounds' sorted order; None when no round has both."""
    keys = sorted((k for k in mine if k in theirs and theirs[k] > 0), key=repr)
    if not keys:
        return None
    ratios = tuple(mine[k] / theirs[k] for k in keys)
    ci = interval(ratios)
    return Paired(
        ratios=ratios,
        median=statistics.median(ratios),
        low=None if ci is None else ci[0],
        high=None if ci is None else ci[1],
    )
