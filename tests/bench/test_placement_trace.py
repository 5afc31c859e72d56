"""A steady run's trace (trace.py) follows from the seed and the round: the same for every
contender of a round, another for another round or seed; and results record it."""

from __future__ import annotations

import random

import pytest

from benchmarks.placement.runner import RunResult
from benchmarks.placement.scenario import loads, select
from benchmarks.placement.trace import Trace, trace_key
from tests.bench.test_placement_steady import STEADY


def lifetimes(t: Trace, workload: str, n: int) -> list[float]:
    return [t.lifetime(workload) for _ in range(n)]


def test_the_contenders_of_a_round_share_its_trace():
    sc = select(["steady-mix"])[0]
    # the draw takes no contender: two draws of one round are the same trace
    a, b = Trace.draw(sc, 1202, 3), Trace.draw(sc, 1202, 3)
    assert a.key == b.key == trace_key("steady-mix", 1202, 3)
    assert a.arrivals == b.arrivals
    for w in ("idle", "exact", "over"):
        assert lifetimes(a, w, 50) == lifetimes(b, w, 50)


@pytest.mark.parametrize(("seed", "repeat"), [(1203, 3), (1202, 4)])
def test_another_seed_or_round_is_another_trace(seed, repeat):
    sc = select(["steady-mix"])[0]
    base, other = Trace.draw(sc, 1202, 3), Trace.draw(sc, seed, repeat)
    for w in ("idle", "exact", "over"):
        assert base.arrivals[w] != other.arrivals[w]
        assert lifetimes(base, w, 20) != lifetimes(other, w, 20)


def test_draws_are_in_range_and_the_ramp_keeps_its_pace_on_average():
    sc = loads(STEADY.replace("replicas: 4", "replicas: 2000"))
    t = Trace.draw(sc, 5, 0)
    arr = t.arrivals["web"]
    assert len(arr) == 2000 and arr[0] == 0.0
    assert all(x <= y for x, y in zip(arr, arr[1:], strict=False))
    # Poisson arrivals at 1 pod/s: 1999 gaps of mean 1 s, sd sqrt(1999) ~ 45 s
    assert 1999 - 4 * 45 < arr[-1] < 1999 + 4 * 45
    assert all(10 <= x <= 20 for x in lifetimes(t, "web", 500))
    with pytest.raises(KeyError, match="no lifetime range"):
        t.lifetime("nope")


def test_a_workload_without_a_rate_arrives_at_once():
    sc = loads(STEADY.replace(" rate: 1,", ""))
    assert Trace.draw(sc, 1, 0).arrivals["web"] == (0.0,) * 4


def test_the_legacy_trace_is_the_one_every_run_replayed_before():
    sc = loads(STEADY)
    old = random.Random(f"{sc.name}/web")  # what steady.Lifetimes drew from
    t = Trace.legacy(sc)
    assert lifetimes(t, "web", 10) == [old.uniform(10, 20) for _ in range(10)]
    assert t.arrivals["web"] == (0.0, 1.0, 2.0, 3.0)  # the fixed pace, rate 1


def test_a_result_records_its_trace_and_duration_and_old_ones_load_without():
    sc = loads(STEADY)
    t = Trace.draw(sc, 9, 2)
    r = RunResult("s", "stock", trace=t.to_json(), duration=600.0, seed=9, repeat=2)
    back = RunResult.from_json(r.to_json())
    assert back.trace == {"key": "s/seed=9/round=2", "arrivals": {"web": list(t.arrivals["web"])}}
    assert back.duration == 600.0
    old = r.to_json()
    del old["trace"], old["duration"]
    assert RunResult.from_json(old).trace is None
