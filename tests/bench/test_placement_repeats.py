"""The order of repeated runs: interleaved rounds, shuffled by a seed."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.placement.__main__ import main
from benchmarks.placement.runner import run_order

PAIRS = [(s, c) for s in ("hog", "burst") for c in ("stock", "lw", "tri")]


def test_every_round_runs_every_pair_once():
    order = run_order(PAIRS, 5, seed=7)
    assert len(order) == 5 * len(PAIRS)
    assert Counter(p for p, _ in order) == {p: 5 for p in PAIRS}
    for k in range(5):
        assert sorted(p for p, r in order if r == k) == sorted(PAIRS)
    # Rounds follow each other: round k's runs all come before round k + 1's.
    assert [r for _, r in order] == sorted(r for _, r in order)


def test_the_seed_fixes_the_order_and_shuffles_it():
    assert run_order(PAIRS, 3, seed=1) == run_order(PAIRS, 3, seed=1)
    assert run_order(PAIRS, 3, seed=1) != run_order(PAIRS, 3, seed=2)
    rounds = [[p for p, r in run_order(PAIRS, 5, seed=1) if r == k] for k in range(5)]
    assert len({tuple(x) for x in rounds}) > 1  # not the same order every round


def test_one_repeat_is_allowed_and_none_is_refused():
    assert [r for _, r in run_order(PAIRS, 1, seed=0)] == [0] * len(PAIRS)
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        run_order(PAIRS, 0, seed=0)
    with pytest.raises(SystemExit):
        main(["--repeats", "0", "--from-results", "x"])
