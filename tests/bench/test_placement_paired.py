"""Ratios paired within rounds (benchmarks/placement/paired.py) and the report's use of
them: the pairing, the bootstrap interval and the verdict a goal gets from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.placement import paired, report
from benchmarks.placement.scenario import select
from benchmarks.placement.store import load

ROOT = Path(__file__).resolve().parents[2]


def test_interval_holds_the_median_and_needs_three_values() -> None:
    assert paired.interval([1.0, 2.0]) is None
    values = [1.10, 1.12, 1.15, 1.11, 1.13, 1.14, 1.12, 1.16, 1.10, 1.13]
    low, high = paired.interval(values) or (0.0, 0.0)
    assert low <= sorted(values)[len(values) // 2] <= high
    assert 1.10 <= low < high <= 1.16


def test_interval_is_wide_when_rounds_disagree() -> None:
    low, high = paired.interval([1.51, 1.42, 0.84, 1.61, 1.08]) or (0.0, 0.0)
    assert low < 1.0 < 1.2 < high


@pytest.mark.parametrize(
    ("low", "high", "at_most", "at_least"),
    [
        (1.05, 1.18, True, False),
        (1.21, 1.4, False, True),
        (0.9, 1.3, None, None),
        (None, None, None, None),
    ],
)
def test_a_goal_is_decided_only_when_the_whole_interval_is_on_one_side(
    low: float | None, high: float | None, at_most: bool | None, at_least: bool | None
) -> None:
    p = paired.Paired((1.1,), 1.1, low, high)
    assert p.at_most(1.2) is at_most
    assert p.at_least(1.2) is at_least


def test_only_rounds_both_ran_are_paired() -> None:
    p = paired.paired({1: 2.0, 2: 3.0, 3: 4.0, 4: 9.0}, {1: 1.0, 2: 2.0, 3: 2.0, 5: 1.0})
    assert p is not None and p.ratios == (2.0, 1.5, 2.0) and p.median == 2.0
    assert paired.paired({1: 1.0}, {2: 1.0}) is None


def test_the_report_pairs_runs_of_one_seed_and_repeat() -> None:
    """On the recorded scale-100 runs: every ratio is loadwise's CPU per pod over the null
    extender's of the same invocation seed and repeat."""
    _, _, results = load(ROOT / "docs/cost/placement/results.json")
    (sc,) = select(["scale-100"])
    by_round: dict[tuple[int | None, int | None], dict[str, float]] = {}
    for r in results:
        if r.scenario == "scale-100" and r.contender in ("loadwise-least-used", "null-extender"):
            d = report.row(sc, r).decisions
            if d is not None and d.cpu:
                by_round.setdefault((r.seed, r.repeat), {})[r.contender] = d.cpu
    want = sorted(
        (k, v["loadwise-least-used"] / v["null-extender"])
        for k, v in by_round.items()
        if len(v) == 2
    )
    lines = report.paired_cost_table([sc], results)
    line = next(x for x in lines if "loadwise-least-used / null-extender" in x)
    cells = [c.strip() for c in line.split("|")]
    assert cells[3] == str(len(want)) and len(want) >= 3
    assert cells[4] == ", ".join(f"{x:.2f}" for _, x in want)


def _normal(text: str) -> str:
    return " ".join(text.split())


def test_the_benchmarks_page_quotes_the_recorded_cost_tables() -> None:
    """docs/benchmarks.md's cost paragraph against docs/cost/placement.md, the report
    rendered from the recorded runs: the per-round ratios, their median, interval and
    verdict, and the medians of CPU per pod it names."""
    page = _normal((ROOT / "docs/benchmarks.md").read_text())
    cost = (ROOT / "docs/cost/placement.md").read_text().splitlines()
    for pair, quoted in (
        ("loadwise-least-used / null-extender", "{rounds} (median {median}, 95 % bootstrap "
         "interval {interval}): the 1.2x goal is **{verdict}**"),
        ("loadwise-prioritize-only / null-prioritize-only", "with prioritize only {median} "
         "({interval}), {verdict}"),
    ):  # fmt: skip
        line = next(x for x in cost if x.startswith(f"| scale-100 | {pair} |"))
        cells = [c.strip() for c in line.split("|")]
        want = quoted.format(
            rounds=cells[4], median=cells[5], interval=cells[6], verdict=cells[7].lower()
        )
        assert want in page, want
    cpu = {}
    for x in cost:
        cells = [c.strip() for c in x.split("|")]
        if len(cells) > 13 and cells[1] == "100":
            cpu[cells[2]] = (cells[12].split()[0], cells[13].split()[0])
    stock, null, mine = cpu["stock"][0], cpu["null-extender"], cpu["loadwise-least-used"]
    assert (
        f"stock {stock} ms, the null extender {null[0]}, loadwise {mine[0]}, of which "
        f"loadwise's own process {mine[1]} against the null server's {null[1]}"
    ) in page
