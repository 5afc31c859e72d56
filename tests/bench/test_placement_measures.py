"""The placement benchmark's measures and its offline lower bound, against hand-computed
cases and, for the bound, against the true optimum found by brute force."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.placement.measures import (
    exact_optimum,
    lower_bound,
    node_loads,
    optimum_work,
    percentile,
    summarise,
    timing,
    water_level,
)
from benchmarks.placement.scenario import Node, Resources, select

GI = 2.0**30


def node(name: str, cpu: float, mem_gi: float, bg_cpu: float = 0, bg_gi: float = 0, hot=False):
    return Node(name, Resources(cpu, mem_gi * GI), Resources(bg_cpu, bg_gi * GI), hot)


def test_water_level_fills_the_emptiest_node_first():
    # Node b already sits at 50 %: one core on node a alone reaches 25 % before b is touched.
    assert water_level([4, 4], [0, 2], 1) == pytest.approx(0.25)


def test_water_level_spreads_over_every_node_once_levels_meet():
    # a (2 cores, 1 used) starts at 50 %, b (4 cores) at 0 %: 3 cores bring b to 50 % with
    # 2, then the last core spreads over 6 cores: (3 + 1) / 6 = 2/3 on both.
    assert water_level([2, 4], [1, 0], 3) == pytest.approx(2 / 3)


def test_water_level_refuses_a_zero_capacity():
    with pytest.raises(ValueError, match="capacities"):
        water_level([4, 0], [0, 0], 1)


def test_bound_counts_background_above_the_fill_level():
    # 1 core over two empty-ish nodes fills to 12.5 %, but b's background alone is 75 %.
    b = lower_bound([node("a", 4, 8), node("b", 4, 8, bg_cpu=3)], [Resources(1, 0)])
    assert b.cpu == pytest.approx(0.75)


def test_bound_counts_an_indivisible_pod():
    # One 3-core pod on two empty 4-core nodes: water-filling says 37.5 %, the pod 75 %.
    b = lower_bound([node("a", 4, 8), node("b", 4, 8)], [Resources(3, GI)])
    assert b.cpu == pytest.approx(0.75)
    assert b.memory == pytest.approx(1 / 8)  # split, 1 Gi would be 1/16; whole, 1/8
    assert b.overall == pytest.approx(0.75)


def test_bound_of_the_hog_case_by_hand():
    # Three 8 Gi nodes, one with 6 Gi of background; 30 pods of 160 Mi (4800 Mi in all).
    # Memory: the two free nodes (0.25 Gi background each) fill first; the level where
    # 16 Gi x L - 0.5 Gi = 4800 Mi is (4.6875 + 0.5) / 16 = 0.3242, below the hog's 0.75;
    # so the bound is the hog's own background, 6/8.
    nodes = [node("a", 4, 8, 0.1, 0.25), node("b", 4, 8, 0.1, 0.25), node("hog", 4, 8, 0.5, 6)]
    b = lower_bound(nodes, [Resources(0.1, 160 * 2**20)] * 30)
    assert b.memory == pytest.approx(0.75)
    # CPU: 3 cores over 12 with 0.7 background: (3 + 0.7) / 12.
    assert b.cpu == pytest.approx(3.7 / 12)


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.lists(st.tuples(st.integers(1, 8), st.integers(0, 6)), min_size=1, max_size=3),
    pods=st.lists(st.integers(0, 6), min_size=0, max_size=5),
)
def test_bound_never_exceeds_the_true_optimum(nodes, pods):
    """Brute force over every assignment of the pods (one resource; the same numbers for
    memory): the bound is never above the best assignment's maximum."""
    ns = [node(f"n{i}", c, c, b % (c + 1), b % (c + 1)) for i, (c, b) in enumerate(nodes)]
    use = [Resources(u, u * GI) for u in pods]
    best = math.inf
    for assign in itertools.product(range(len(ns)), repeat=len(pods)):
        extra = [0.0] * len(ns)
        for p, i in zip(pods, assign, strict=True):
            extra[i] += p
        best = min(
            best,
            max((n.background.cpu + e) / n.capacity.cpu for n, e in zip(ns, extra, strict=True)),
        )
    assert lower_bound(ns, use).cpu <= best + 1e-9


def test_node_loads_add_background_and_bound_pods_actual_usage():
    nodes = [node("a", 4, 8, 0.5, 1), node("b", 2, 4, 0, 3, hot=True)]
    usage = {"p1": Resources(1, 2 * GI), "p2": Resources(0.5, GI), "p3": Resources(0.5, GI)}
    loads = node_loads(nodes, usage, {"p1": "a", "p2": "b", "p3": "a"})
    a, b = loads
    assert (a.cpu, a.memory, a.pods) == (pytest.approx(2 / 4), pytest.approx(4 / 8), 2)
    assert (b.cpu, b.memory, b.pods) == (pytest.approx(0.25), pytest.approx(1.0), 1)
    s = summarise(loads)
    assert s.max_cpu == pytest.approx(0.5)
    assert s.max_memory == pytest.approx(1.0)
    assert s.std_cpu == pytest.approx(0.125)  # |0.5 - 0.25| / 2
    assert s.std_memory == pytest.approx(0.25)
    assert (s.over_80, s.pods_on_hot, s.hottest) == (1, 1, "b")


def test_node_loads_refuse_a_pod_on_an_unknown_node():
    with pytest.raises(ValueError, match="elsewhere"):
        node_loads([node("a", 1, 1)], {"p": Resources(0, 0)}, {"p": "elsewhere"})


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(10, 0, -1)]  # unsorted on purpose
    assert percentile(values, 50) == 5
    assert percentile(values, 90) == 9
    assert percentile(values, 99) == 10
    assert percentile([7.0], 1) == 7
    with pytest.raises(ValueError):
        percentile([], 50)


def test_timing_from_client_side_timestamps():
    created = {"a": 0.0, "b": 0.5, "c": 1.0, "d": 1.0}
    bound = {"a": 0.25, "b": 1.5, "c": 2.0}  # d never bound
    t = timing(created, bound)
    assert t is not None
    assert t.bound == 3
    assert t.throughput == pytest.approx(3 / 2.0)  # 3 pods from first creation to last bind
    assert t.create_rate == pytest.approx(4 / 1.0)
    assert (t.p50, t.p99) == (1.0, 1.0)  # latencies 0.25, 1.0, 1.0
    assert timing(created, {}) is None


def brute_optimum(nodes: list[Node], pods: list[Resources]) -> float:
    """The least max(CPU, memory) utilisation over every assignment of the pods."""
    best = math.inf
    for assign in itertools.product(range(len(nodes)), repeat=len(pods)):
        cpu = [n.background.cpu for n in nodes]
        mem = [n.background.memory for n in nodes]
        for p, i in zip(pods, assign, strict=True):
            cpu[i] += p.cpu
            mem[i] += p.memory
        best = min(
            best,
            max(
                max(c / n.capacity.cpu, m / n.capacity.memory)
                for n, c, m in zip(nodes, cpu, mem, strict=True)
            ),
        )
    return best


@settings(max_examples=200, deadline=None)
@given(
    nodes=st.lists(
        st.tuples(st.integers(1, 8), st.integers(1, 8), st.integers(0, 4), st.integers(0, 4)),
        min_size=1,
        max_size=3,
    ),
    pods=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3)).map(lambda t: Resources(*t)),
        min_size=0,
        max_size=6,
    ),
)
def test_exact_optimum_matches_brute_force_over_both_resources(nodes, pods):
    """Small random instances, up to 3 nodes and 6 pods of up to 6 shapes (several shapes
    exercise the dynamic programme, one shape the count per node)."""
    ns = [
        Node(f"n{i}", Resources(c, m), Resources(bc % (c + 1), bm % (m + 1)))
        for i, (c, m, bc, bm) in enumerate(nodes)
    ]
    got = exact_optimum(ns, pods)
    assert got is not None
    best = brute_optimum(ns, pods)
    assert got.value == pytest.approx(best, abs=1e-8)
    # The witness is a placement of exactly these pods with that maximum.
    shapes = Counter(pods)
    for k, shape in enumerate(got.shapes):
        assert sum(c[k] for c in got.counts) == shapes[shape]
    assert got.value == max(got.max_cpu, got.max_memory)
    assert got.value >= lower_bound(ns, pods).overall - 1e-9


def test_exact_optimum_of_strong_weak_is_the_issues_76_25_percent():
    # 8 cores / 16 Gi (0.5 / 1 Gi background) and four 2 / 4 Gi (0.3 / 1 Gi); 48 pods of
    # 200m / 400 Mi. 28 on the strong node: CPU (0.5 + 5.6) / 8 = 76.25 %; five on each weak
    # one: memory (1024 + 2000) / 4096 = 73.8 %. 27 would push a sixth pod onto a weak node
    # (memory 83.6 %). The lower bound is memory's water level, 74.2 %.
    (sc,) = select(["strong-weak"])
    usage = list(sc.pod_usage().values())
    got = exact_optimum(sc.all_nodes(), usage)
    assert got is not None
    assert got.value == pytest.approx(0.7625)
    assert sorted(c for (c,) in got.counts) == [5, 5, 5, 5, 28]
    assert lower_bound(sc.all_nodes(), usage).overall == pytest.approx(0.7422, abs=1e-4)


def test_exact_optimum_refuses_what_it_cannot_enumerate():
    # Two shapes of 40 pods on 3 nodes: 41 states, 3 x 41^2 = 5043 steps a check.
    nodes = [node(f"n{i}", 4, 8) for i in range(3)]
    pods = [Resources(0.1, GI)] * 40 + [Resources(0.2, GI / 2)] * 40
    assert optimum_work(nodes, pods) == 3 * 41 * 41
    assert exact_optimum(nodes, pods, work=5000) is None
    assert exact_optimum(nodes, pods, work=5043) is not None


def test_the_optimal_placement_shown_is_evened_out():
    # hog: the optimum is the hog's own 75 % memory; the programme alone fills hog-a to the
    # level first (19 and 11 pods); evened out it is least-used's placement, 15 and 15.
    (sc,) = select(["hog"])
    got = exact_optimum(sc.all_nodes(), list(sc.pod_usage().values()))
    assert got is not None
    assert got.counts == ((15,), (15,), (0,))
    assert got.value == pytest.approx(0.75)


def test_the_algorithm_histogram_is_read_from_a_schedulers_metrics():
    from benchmarks.placement.runner import algorithm_totals

    text = (
        "# HELP scheduler_scheduling_algorithm_duration_seconds Scheduling algorithm latency\n"
        "# TYPE scheduler_scheduling_algorithm_duration_seconds histogram\n"
        'scheduler_scheduling_algorithm_duration_seconds_bucket{le="0.001"} 10\n'
        'scheduler_scheduling_algorithm_duration_seconds_bucket{le="+Inf"} 2000\n'
        "scheduler_scheduling_algorithm_duration_seconds_sum 5.15\n"
        "scheduler_scheduling_algorithm_duration_seconds_count 2000\n"
        "# TYPE scheduler_pending_pods gauge\n"
        'scheduler_pending_pods{queue="active"} 0\n'
    )
    assert algorithm_totals(text) == (2000.0, 5.15)
    assert algorithm_totals('scheduler_pending_pods{queue="active"} 3\n') is None


def test_largest_share_is_the_most_of_one_workload_on_one_node():
    from benchmarks.placement.measures import largest_share

    owner = {"a-1": "a", "a-2": "a", "a-3": "a", "a-4": "a", "b-1": "b", "b-2": "b"}
    # a: 2 of 4 on n1; b: both of its 2 on n2 (the worst); a pod of no workload is ignored.
    bindings = {"a-1": "n1", "a-2": "n1", "a-3": "n2", "a-4": "n3", "b-1": "n2", "b-2": "n2"}
    assert largest_share({**bindings, "x": "n1"}, owner, {"a": 4, "b": 2}) == 1.0
    assert (
        largest_share(
            {k: v for k, v in bindings.items() if k.startswith("a")}, owner, {"a": 4, "b": 2}
        )
        == 0.5
    )
    assert largest_share({}, owner, {"a": 4}) is None
