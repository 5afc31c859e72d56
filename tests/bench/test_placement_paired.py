"""Cost ratios paired within rounds (benchmarks/placement/paired.py): the pairing, the
bootstrap interval and the verdict a goal gets from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.placement import paired
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
    ("low", "high", "verdict"),
    [(1.05, 1.18, "met"), (1.21, 1.4, "missed"), (0.9, 1.3, "open"), (None, None, "open")],
)
def test_a_goal_is_met_only_when_the_whole_interval_says_so(
    low: float | None, high: float | None, verdict: str
) -> None:
    p = paired.Paired("s", "a", "b", ("c",), (1.1,), 1.1, low, high)
    assert p.verdict(1.2) == verdict


def test_rounds_pair_runs_of_one_seed_and_repeat() -> None:
    """On the recorded scale-100 runs: every ratio is loadwise's CPU per pod over the null
    extender's of the same invocation seed and repeat, and rounds where one of them is
    missing are left out."""
    _, _, results = load(ROOT / "docs/placement/results.json")
    (sc,) = select(["scale-100"])
    got = paired.paired(sc, results, "loadwise-least-used", "null-extender")
    assert got is not None
    by_round: dict[tuple[int | None, int], dict[str, float]] = {}
    for r in results:
        if r.scenario == "scale-100" and r.contender in ("loadwise-least-used", "null-extender"):
            cpu = paired.cpu_per_pod(sc, r)
            if cpu:
                by_round.setdefault((r.seed, r.repeat), {})[r.contender] = cpu
    want = [
        v["loadwise-least-used"] / v["null-extender"]
        for _, v in sorted(by_round.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1]))
        if len(v) == 2
    ]
    assert list(got.ratios) == pytest.approx(want)
    assert len(want) >= 3 and got.low is not None and got.high is not None
    assert got.low <= got.median <= got.high


def test_the_command_prints_one_line_per_pair_and_round_set(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert paired.main([str(ROOT / "docs/placement/results.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| scenario |")
    assert any("scale-100 | loadwise-least-used / null-extender" in line for line in out)
