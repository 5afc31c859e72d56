"""Cost ratios paired within each round, with bootstrap intervals.

The cost scenarios run every contender once per round, one after another, on a machine
whose load moves from minute to minute. The ratio of two contenders' medians mixes that
drift into the comparison; the ratio within each round (both runs minutes apart, under
the load of that round) does not, so a goal on a ratio is judged on the rounds' ratios:
their median, and a 95 % bootstrap interval of that median (scipy.stats.bootstrap,
percentile method: with 3-10 rounds BCa's jackknife has too few points to be better). A
goal "at most G" is met only when the interval's upper end is at most G, missed when its
lower end is above G, and open otherwise.

`python -m benchmarks.placement.paired docs/placement/results.json` prints the per-round
ratios of every cost scenario in the index (CPU per pod decided, the figure the cost
table ranks contenders on).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import bootstrap  # type: ignore[import-untyped]  # scipy ships no types

from benchmarks.placement.report import row
from benchmarks.placement.runner import RunResult
from benchmarks.placement.scenario import Scenario, select
from benchmarks.placement.store import load

# Resamples of the bootstrap: the interval's ends move by well under 0.01 between seeds
# at this count for the 3-10 ratios a cost comparison has.
RESAMPLES = 9999
LEVEL = 0.95

# The cost goal (docs/benchmarks.md, "Cost inside the real scheduler"): loadwise's CPU per
# pod at most this many times an extender's that answers at once, both verbs or one.
GOAL = 1.2

# The pairs the goal is stated on: loadwise against an extender that does nothing.
PAIRS = (
    ("loadwise-least-used", "null-extender"),
    ("loadwise-prioritize-only", "null-prioritize-only"),
)


@dataclass(frozen=True)
class Paired:
    """One contender against another over the rounds both completed."""

    scenario: str
    contender: str
    baseline: str
    commits: tuple[str, ...]
    ratios: tuple[float, ...]  # per round, in round order
    median: float
    low: float | None  # the interval, None with fewer than 3 rounds
    high: float | None

    def verdict(self, goal: float) -> str:
        """ "met", "missed" or "open" for the goal ratio <= goal."""
        if self.low is None or self.high is None:
            return "open"
        if self.high <= goal:
            return "met"
        if self.low > goal:
            return "missed"
        return "open"


def cpu_per_pod(scenario: Scenario, result: RunResult) -> float | None:
    """CPU seconds of the scheduler and its extender per pod decided (the cost table's
    figure, computed by the one function the table uses)."""
    d = row(scenario, result).decisions
    return None if d is None else d.cpu


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


def paired(
    scenario: Scenario, results: Iterable[RunResult], contender: str, baseline: str
) -> Paired | None:
    """The per-round ratios contender / baseline of CPU per pod; a round counts when both
    ran in it at one commit (the invocation's seed and the repeat number name a round).
    None when no round has both."""
    rounds: dict[tuple[int | None, int | None, str], dict[str, float]] = defaultdict(dict)
    for r in results:
        if r.scenario != scenario.name or r.contender not in (contender, baseline):
            continue
        cpu = cpu_per_pod(scenario, r)
        if cpu is not None and cpu > 0:
            rounds[(r.seed, r.repeat, r.commit or "unknown")][r.contender] = cpu
    both = [
        (key, v[contender] / v[baseline])
        for key, v in sorted(rounds.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1]))
        if contender in v and baseline in v
    ]
    if not both:
        return None
    ratios = tuple(x for _, x in both)
    ci = interval(ratios)
    return Paired(
        scenario=scenario.name,
        contender=contender,
        baseline=baseline,
        commits=tuple(sorted({k[2][:7] for k, _ in both})),
        ratios=ratios,
        median=statistics.median(ratios),
        low=None if ci is None else ci[0],
        high=None if ci is None else ci[1],
    )


def table(scenarios: Sequence[Scenario], results: Sequence[RunResult]) -> list[str]:
    """A Markdown table of every cost scenario's paired ratios (empty when none ran)."""
    out: list[str] = []
    for sc in scenarios:
        for contender, baseline in PAIRS:
            p = paired(sc, results, contender, baseline)
            if p is None:
                continue
            ci = "n/a (fewer than 3 rounds)" if p.low is None else f"{p.low:.2f}-{p.high:.2f}"
            out.append(
                f"| {sc.name} | {contender} / {baseline} | {len(p.ratios)} "
                f"| {', '.join(f'{x:.2f}' for x in p.ratios)} | {p.median:.2f} | {ci} "
                f"| {p.verdict(GOAL)} | {', '.join(p.commits)} |"
            )
    if not out:
        return []
    head = (
        "| scenario | ratio of CPU per pod | rounds | per round | median | 95 % interval "
        f"| goal <= {GOAL:g}x | commit |"
    )
    return [head, "|---|---|---|---|---|---|---|---|", *out]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.placement.paired",
        description="Cost ratios paired within each round, from a results index.",
    )
    parser.add_argument("results", type=Path, help="a results.json index")
    args = parser.parse_args(argv)
    _, _, results = load(args.results)
    scenarios = [s for s in select(None) if s.goals.throughput_vs_stock is not None]
    lines = table(scenarios, results)
    if not lines:
        print("no cost scenario has a round with both contenders of a pair", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
