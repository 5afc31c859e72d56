"""The deviation a node's pods' comings and goings make, taken off its reported one."""

import json
import math
import random

import pytest

from loadwise.extender.churn import pods_variance, without_churn
from loadwise.extender.inflight import InFlight, Tracked
from loadwise.extender.model import LoadSnapshot, NodeInfo, NodeLoad, PodLoad, ResourceLoad, Usage
from loadwise.extender.wire import encode

GI = 1024**3


def _sampled(stays, start, end, steps=20_000):
    """The variance of the summed use, sampled at ``steps`` instants (midpoints)."""
    cpu, mem = [], []
    for i in range(steps):
        t = start + (i + 0.5) * (end - start) / steps
        cpu.append(sum(c for a, b, c, _ in stays if a <= t < b))
        mem.append(sum(m for a, b, _, m in stays if a <= t < b))

    def var(xs):
        mean = sum(xs) / len(xs)
        return sum((x - mean) ** 2 for x in xs) / len(xs)

    return var(cpu), var(mem)


def test_the_variance_is_the_summed_uses_over_the_window():
    rng = random.Random(7)
    for _ in range(30):
        stays = []
        for _ in range(rng.randrange(1, 12)):
            a = rng.uniform(-300, 900)
            b = math.inf if rng.random() < 0.3 else a + rng.uniform(10, 600)
            stays.append((a, b, rng.choice([100.0, 250.0, 2134.0]), rng.uniform(1, 2) * GI))
        got = pods_variance(stays, 0.0, 900.0)
        want = _sampled(stays, 0.0, 900.0)
        for g, w in zip(got, want, strict=True):
            assert g == pytest.approx(w, rel=0.01, abs=1e-3 * (1 + w) + 1.0)


def test_a_pod_there_half_the_window_and_its_replacement():
    # u there for half the window: u^2 / 4
    assert pods_variance([(0, 450, 2000.0, 0.0)], 0, 900) == pytest.approx((1_000_000.0, 0.0))
    # replaced at once by one alike on the same node: the sum never moves
    both = [(-100, 450, 2000.0, GI), (450, math.inf, 2000.0, GI)]
    assert pods_variance(both, 0, 900) == pytest.approx((0.0, 0.0), abs=1e-6)
    # there throughout, or outside the window: no variance; an empty window: none
    assert pods_variance([(-5, math.inf, 500.0, GI), (901, 950, 9.0, 9.0)], 0, 900) == (0, 0)
    assert pods_variance([(0, 450, 2000.0, 0.0)], 900, 900) == (0.0, 0.0)


def _snapshot(std_cpu, std_mem, settle=900.0):
    loads = {
        "n1": NodeLoad(ResourceLoad(50.0, std_cpu), ResourceLoad(60.0, std_mem)),
        "n2": NodeLoad(ResourceLoad(50.0, std_cpu), ResourceLoad(60.0, std_mem)),
    }
    return LoadSnapshot("s", 1000.0, 1001.0, loads, settle_seconds=settle)


def _info(name, created=None):
    return NodeInfo(name, 4000, 8 * GI, 4000, 8 * GI, 110, created_at=created)


def test_without_churn_takes_the_pods_deviation_off_each_node_alone():
    snap = _snapshot(30.0, 20.0)
    infos = {"n1": _info("n1"), "n2": _info("n2")}
    # a 2-core pod on a 4-core node for half the window: 25 points of CPU deviation
    stays = {"n1": [(100.0 + 450, math.inf, 2000.0, 4 * GI)]}
    got = without_churn(snap, stays, infos.get, lambda n: None)
    assert got.nodes["n1"].cpu == ResourceLoad(50.0, pytest.approx(math.sqrt(30**2 - 25**2)))
    # memory: 4 GiB of 8, 25 points too, more than the 20 reported: no deviation left
    assert got.nodes["n1"].memory == ResourceLoad(60.0, 0.0)
    assert got.nodes["n2"] is snap.nodes["n2"]
    assert got.window_end == snap.window_end and got.settle_seconds == snap.settle_seconds


def test_a_node_newer_than_the_window_is_measured_since_its_creation():
    snap = _snapshot(30.0, 0.0)
    # created 300 s before the end: the pod came at 850, so there for half of 700-1000
    stays = {"n1": [(850.0, math.inf, 2000.0, 0.0)]}
    newer = without_churn(snap, stays, {"n1": _info("n1", 700.0)}.get, lambda n: 700.0)
    older = without_churn(snap, stays, {"n1": _info("n1")}.get, lambda n: None)
    assert newer.nodes["n1"].cpu.std == pytest.approx(math.sqrt(30**2 - 25**2))
    # over the whole 900 s the same pod is there a sixth of it: less of the deviation
    assert older.nodes["n1"].cpu.std > newer.nodes["n1"].cpu.std


def test_nothing_changes_without_a_deviation_a_size_or_pods():
    for snap, infos, stays in (
        (_snapshot(None, None), {"n1": _info("n1")}, {"n1": [(500.0, math.inf, 2000.0, GI)]}),
        (_snapshot(30.0, 20.0), {}, {"n1": [(500.0, math.inf, 2000.0, GI)]}),
        (_snapshot(30.0, 20.0), {"n1": _info("n1")}, {}),
        (_snapshot(30.0, 20.0), {"n1": _info("n1")}, {"gone": [(500.0, 600.0, 1.0, 1.0)]}),
    ):
        assert without_churn(snap, stays, infos.get, lambda n: None) is snap


def test_inflight_keeps_the_stays_of_pods_placed_or_gone_within_the_window():
    flight = InFlight()
    load = PodLoad(Usage(2000, GI), Usage(400, GI), 0.0)
    for key, node, at in (("a", "n1", 100.0), ("b", "n1", 500.0), ("c", "n2", 700.0)):
        flight.track(
            key, Tracked(f"default/{key}", node, None, None, load, "request rule", True, at)
        )
    flight.departure("b", load, 800.0)
    flight.departure("c", load, 300.0 + 700.0)
    flight.departure("unknown", load, 900.0)  # never tracked: no stay
    got = flight.stays(400.0)
    # a came before the window and is still there; b came and went in it; c too
    assert got == {"n1": [(500.0, 800.0, 2000, GI)], "n2": [(700.0, 1000.0, 2000, GI)]}
    # a later window drops the stays that ended before it
    assert flight.stays(850.0) == {"n2": [(700.0, 1000.0, 2000, GI)]}
    assert flight.stays(2000.0) == {}


@pytest.mark.parametrize("fast", [True, False])
def test_the_filter_reads_a_node_whose_pods_made_its_deviation_as_steady(fast):
    """Two 8 GiB nodes read at 70 % memory with a deviation of 25 over a 15-minute window.
    On ``a`` a 4 GiB pod came half-way through it: that explains all of ``a``'s deviation,
    which then passes the filter's 90 % at its mean; ``b``, with no such pod, is still read
    at 95 % and rejected. Fast path and general path alike."""
    from .test_estimator_service import FakeClock, T, _args, _extender, _pod

    ext = _extender(FakeClock(T), fast=fast)
    loads = {n: NodeLoad(ResourceLoad(10.0), ResourceLoad(70.0, 25.0)) for n in ("a", "b")}
    ext.refresher.snapshot = LoadSnapshot("s", T, T + 1, loads, settle_seconds=900.0)
    big = PodLoad(Usage(100, 4 * GI), Usage(100, 4 * GI), 0.0)
    ext.inflight.track(
        "k", Tracked("shop/big", "a", None, None, big, "request rule", True, T - 450)
    )
    verdict = json.loads(encode(ext.filter(_args(_pod("web-abc-1")))))
    assert [n["metadata"]["name"] for n in verdict["Nodes"]["items"]] == ["a"]
    assert verdict["FailedAndUnresolvableNodes"]["b"].startswith("memory 96% > 90%")
