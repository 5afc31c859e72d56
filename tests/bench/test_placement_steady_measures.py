"""A steady run's per-resource measures after a warm-up (steady_measures.py) on a trace
small enough to add up by hand, and the section of the report they make."""

from __future__ import annotations

import json

import pytest

from benchmarks.placement.scenario import Change, Node, Resources, loads
from benchmarks.placement.steady_measures import (
    Timeline,
    measure,
    piled,
    share,
    slices,
    weighted_percentile,
)
from benchmarks.placement.timeline import Stay

GI = 2.0**30

# Two 2-core / 4 GiB nodes; b holds 1 GiB nobody requests, 3.5 GiB from 50 s on. Each pod
# uses 1 core and 1 GiB. p1 on a for 0-100 s, p2 on a for 20-60 s, p3 on b for 40-100 s.
NODES = (
    Node("a", Resources(2, 4 * GI), Resources(0, 0)),
    Node("b", Resources(2, 4 * GI), Resources(0, 1 * GI)),
)
TL = Timeline(
    NODES,
    (
        Stay("p1", "web", "a", 0, 100),
        Stay("p2", "web", "a", 20, 60),
        Stay("p3", "web", "b", 40, 100),
    ),
    {"web": Resources(1, 1 * GI)},
    (Change(50, "b", 3.5 * GI),),
    100,
)


def test_the_hottest_node_per_resource_after_the_warm_up_by_hand():
    # From 10 s (the warm-up) on, the hottest node:
    #            10-20  20-40  40-50  50-60  60-100 (seconds: 10, 20, 10, 10, 40)
    # CPU        50 %   100 %  100 %  100 %  50 %    (a's pods; b's one pod is 50 %)
    # memory     25 %   50 %   50 %   112.5% 112.5%  (b from 50 s: 3.5 + 1 GiB of 4)
    m = measure(TL, warmup=10)
    assert m.seconds == 90
    assert m.cpu.mean == pytest.approx((10 * 0.5 + 40 * 1.0 + 40 * 0.5) / 90)
    assert m.cpu.p99 == 1.0 and m.cpu.peak == 1.0
    assert m.cpu.over_80_seconds == 40
    assert m.cpu.over_100_seconds == 0  # at capacity is not over it
    assert m.memory.mean == pytest.approx((10 * 0.25 + 30 * 0.5 + 50 * 1.125) / 90)
    assert m.memory.p99 == 1.125
    assert m.memory.over_80_seconds == 50 and m.memory.over_100_seconds == 50


def test_the_warm_up_is_left_out_and_a_longer_one_changes_the_figures():
    # the first 10 s (one pod, 50 % CPU) count without a warm-up
    none = measure(TL, warmup=0)
    assert none.seconds == 100
    assert none.cpu.mean == pytest.approx((20 * 0.5 + 40 * 1.0 + 40 * 0.5) / 100)
    late = measure(TL, warmup=60)  # only 60-100 s: CPU 50 %, memory 112.5 %
    assert late.cpu.mean == pytest.approx(0.5) and late.memory.mean == pytest.approx(1.125)
    with pytest.raises(ValueError, match="nothing to measure"):
        measure(TL, warmup=100)


def test_phases_split_at_the_background_change():
    m = measure(TL, warmup=10)
    by = {p.label: p for p in m.phases}
    assert list(by) == ["b 1Gi", "b 3.5Gi"]
    before, after = by["b 1Gi"], by["b 3.5Gi"]
    assert (before.seconds, after.seconds) == (40, 50)
    assert before.cpu == pytest.approx((10 * 0.5 + 30 * 1.0) / 40)
    assert before.memory == pytest.approx((10 * 0.25 + 30 * 0.5) / 40)
    assert after.cpu == pytest.approx((10 * 1.0 + 40 * 0.5) / 50)
    assert after.memory == pytest.approx(1.125)


def test_phases_with_the_same_backgrounds_are_one():
    # b back at 1 GiB from 80 s: 80-100 s joins the first phase
    tl = Timeline(TL.nodes, TL.stays, TL.usage, (*TL.changes, Change(80, "b", 1 * GI)), 100)
    by = {p.label: p for p in measure(tl, warmup=10).phases}
    assert by["b 1Gi"].seconds == 40 + 20 and by["b 3.5Gi"].seconds == 30


def test_the_replica_share_counts_workloads_with_two_running_pods_time_averaged():
    # 10-20 s: one pod running, no share; 20-40 s: both on a (100 %); 40-60 s: 2 of 3 on
    # a; 60-100 s: one on each (50 %). Averaged over the 80 s where it is defined.
    m = measure(TL, warmup=10)
    assert m.share == pytest.approx((20 * 1.0 + 20 * 2 / 3 + 40 * 0.5) / 80)
    parts = list(slices(TL, warmup=10))
    assert share(parts[0]) is None


def test_a_second_workload_counts_on_its_own():
    # q1, q2 of "db" on b for the whole stream: db's share is 1.0 at every instant, so
    # the largest share is 1.0 wherever db runs, whatever web does
    usage = {"web": Resources(1, 1 * GI), "db": Resources(0, 0)}
    stays = (*TL.stays, Stay("q1", "db", "b", 0, 100), Stay("q2", "db", "b", 0, 100))
    m = measure(Timeline(NODES, stays, usage, TL.changes, 100), warmup=10)
    assert m.share == pytest.approx(1.0)


def test_a_workload_all_on_one_node_counts_as_piled_only_while_another_node_has_room():
    # 20-40 s both web pods are on a, and b (0 cores, 1 GiB of 4 used) would hold one more
    # at 50 % CPU and memory: piled; 40-60 s one is on b, 60-100 s one pod each
    assert measure(TL, warmup=10).piled_seconds == 20
    # b full from the start (3.5 GiB nobody requests: 112.5 % with one more): no room
    full = Node("b", Resources(2, 4 * GI), Resources(0, 3.5 * GI))
    tl = Timeline((NODES[0], full), TL.stays, TL.usage, (), 100)
    assert measure(tl, warmup=10).piled_seconds == 0
    # room at exactly 80 % counts as room; just above it does not
    for memory, room in ((2.2 * GI, True), (2.3 * GI, False)):
        b = Node("b", Resources(2, 4 * GI), Resources(0, memory))
        tl = Timeline((NODES[0], b), TL.stays, TL.usage, (), 100)
        g = next(g for g in slices(tl) if g.start == 20)
        assert piled(g, (NODES[0], b), TL.usage) is room, memory


def test_a_replacement_in_flight_is_not_judged_as_piled_when_the_replicas_are_known():
    # web has 3 replicas: two on a, one on b (b has room); b's pod goes at 50 s and its
    # replacement binds on b at 50.5 s: for that half second both running pods are on a
    stays = (
        Stay("p1", "web", "a", 0, 100),
        Stay("p2", "web", "a", 0, 100),
        Stay("p3", "web", "b", 0, 50),
        Stay("p4", "web", "b", 50.5, 100),
    )
    usage = {"web": Resources(0.2, 0.2 * GI)}
    unknown = Timeline(NODES, stays, usage, (), 100)
    assert measure(unknown, warmup=10).piled_seconds == pytest.approx(0.5)
    known = Timeline(NODES, stays, usage, (), 100, {"web": 3})
    assert measure(known, warmup=10).piled_seconds == 0
    # the replacement bound on a instead: all three on a while b has room, judged
    onto_a = (*stays[:3], Stay("p4", "web", "a", 50.5, 100))
    m = measure(Timeline(NODES, onto_a, usage, (), 100, {"web": 3}), warmup=10)
    assert m.piled_seconds == pytest.approx(49.5)
    # more running than declared (a replacement bound before its predecessor went): judged
    over = (*onto_a[:2], Stay("p3", "web", "a", 0, 60), Stay("p4", "web", "a", 50, 100))
    m = measure(Timeline(NODES, over, usage, (), 100, {"web": 3}), warmup=10)
    assert m.piled_seconds == pytest.approx(90)


def test_weighted_percentile_is_nearest_rank_over_time():
    values = [(0.25, 10.0), (0.5, 30.0), (1.125, 50.0)]
    assert weighted_percentile(values, 40) == 0.5  # 36 of 90 s: reached within 0.5
    assert weighted_percentile(values, 50) == 1.125  # 45 s needs the last value
    assert weighted_percentile(values, 11) == 0.25  # 9.9 s: within the first 10 s
    assert weighted_percentile(values, 12) == 0.5  # 10.8 s: not
    assert weighted_percentile(values, 100) == 1.125
    with pytest.raises(ValueError, match="q must be"):
        weighted_percentile(values, 0)
    with pytest.raises(ValueError, match="no values"):
        weighted_percentile([], 50)


def test_a_stay_on_an_unknown_node_or_workload_is_refused_by_name():
    bad = Timeline(NODES, (Stay("px", "web", "zz", 0, 10),), TL.usage, (), 100)
    with pytest.raises(ValueError, match="px.*'zz'"):
        list(slices(bad))
    bad = Timeline(NODES, (Stay("py", "cache", "a", 0, 10),), TL.usage, (), 100)
    with pytest.raises(ValueError, match="py.*'cache'"):
        list(slices(bad))


def test_duration_overrides_a_steady_stream_without_touching_the_file():
    from benchmarks.placement.exceptions import ScenarioError
    from tests.bench.test_placement_steady import STEADY

    sc = loads(STEADY)
    long = sc.with_duration(3600)
    assert long.steady is not None and long.steady.duration_seconds == 3600
    assert long.steady.changes == sc.steady.changes  # type: ignore[union-attr]
    short = sc.with_duration(45)  # the change at 60 s falls after the end
    assert [c.at_seconds for c in short.steady.changes] == [30]  # type: ignore[union-attr]
    assert sc.steady.duration_seconds == 300  # type: ignore[union-attr]
    with pytest.raises(ScenarioError, match="--duration must be > 0"):
        sc.with_duration(0)
    hog = loads(STEADY.split("steady:")[0].replace(", lifetime_seconds: {min: 10, max: 20}", ""))
    with pytest.raises(ScenarioError, match="steady scenarios only"):
        hog.with_duration(60)


def test_the_report_gives_each_contender_both_resources_and_the_gaps_to_the_optima(tmp_path):
    from benchmarks.placement.runner import RunResult
    from benchmarks.placement.steady_measures import Settings
    from benchmarks.placement.steady_tables import lines
    from tests.bench.test_placement_steady import STEADY

    sc = loads(STEADY)

    def result(contender: str, second: str, traced: bool) -> RunResult:
        # two pods of web for the whole 100 s stream (clock 1000-1100): both on a, or
        # one on each node
        return RunResult(
            "s",
            contender,
            placed={"web-1": "a", "web-2": second},
            bound_at={"web-1": 1000.0, "web-2": 1000.0},
            workloads={"web-1": "web", "web-2": "web"},
            stream=[1000.0, 1100.0],
            trace={"key": "k", "arrivals": {}} if traced else None,
        )

    runs = [result("stock", "a", False), result("loadwise-least-used", "b", True)]
    cache = tmp_path / "optima.json"
    text = "\n".join(lines(sc, runs, Settings(warmup=10, optimum_seconds=5), cache))
    assert "after a 10 s warm-up" in text
    # both on a: CPU 1.0 of 2 cores (50 %); one each: 25 %; the optimum is one each; no
    # drift (the same placement all along)
    assert "| stock | 1 | CPU | 50.0 | 50.0 | 0.0 | 0 | 0 | 25.0 | 25.0 | 25.0 | 25.0 |" in text
    assert (
        "| loadwise-least-used | 1 | CPU | 25.0 | 25.0 | 0.0 | 0 | 0 | 25.0 | 0.0 | 25.0 | 0.0 |"
        in text
    )
    assert "| loadwise-least-used | 1 | memory |" in text
    assert "| stock | 1 | 100 |" in text and "| loadwise-least-used | 1 | 50 |" in text
    # the hotter of CPU and memory: memory, 50 % in both runs (b's background and a pod
    # whichever way), so CPU's difference does not show there; its optimum is 50 % too
    hotter = "| the hotter of the two | 50.0 | - | - | - | - | - | - | 50.0 | 0.0 |"
    assert f"| stock | 1 {hotter}" in text and f"| loadwise-least-used | 1 {hotter}" in text
    assert "proven optimal in all 6 programmes (run x resource, and the hotter" in text
    assert "Freshness of the load readings at the decisions: in the loadwise extender" in text
    assert "1 of 2 runs predate per-run traces" in text
    assert len(json.loads(cache.read_text())) == 6  # kept for the next render


def test_changes_of_one_instant_applied_milliseconds_apart_make_no_phase():
    # a goes to 512 MiB 3 ms before b goes to 3.5 GiB (one instant in the scenario):
    # those 3 ms are no phase of their own, the two phases around them are
    changes = (Change(49.997, "a", 0.5 * GI), Change(50, "b", 3.5 * GI))
    tl = Timeline(TL.nodes, TL.stays, TL.usage, changes, 100)
    labels = [p.label for p in measure(tl, warmup=10).phases]
    assert labels == ["a 0Gi, b 1Gi", "a 0.5Gi, b 3.5Gi"]


def test_a_gap_of_rounding_alone_is_zero_and_a_real_one_stays():
    from benchmarks.placement.steady_tables import gap

    assert gap(0.19999999999999998, 0.2) == 0.0
    assert gap(0.25, 0.2) == pytest.approx(0.05)
    assert gap(0.15, 0.2) == pytest.approx(-0.05)


def test_drift_is_the_last_third_against_the_first_split_at_the_boundaries():
    from benchmarks.placement.steady_measures import third_means

    # 0-30 s at 0.5, 30-90 s at 0.6: thirds of 30 s, the last one at 0.6 throughout
    assert third_means([(0.5, 30.0), (0.6, 60.0)]) == pytest.approx((0.5, 0.6))
    # a piece across both boundaries: 10 s at 0.2 then 80 s at 0.8 -> first third
    # (30 s) is 10 s at 0.2 and 20 s at 0.8
    first, last = third_means([(0.2, 10.0), (0.8, 80.0)])
    assert first == pytest.approx((0.2 * 10 + 0.8 * 20) / 30) and last == pytest.approx(0.8)
    with pytest.raises(ValueError):
        third_means([])


@pytest.mark.parametrize(("count", "columns"), [(1, 0), (2, 2), (6, 6), (7, 0), (31, 0)])
def test_a_phase_gets_a_column_unless_the_backgrounds_ramp(count, columns):
    """gen-1201-1's background grows in 30 steps: a column per phase made a 31-column table.
    From two phases to MAX_PHASE_COLUMNS each has its column; more are said in a line."""
    from benchmarks.placement.steady_measures import Hottest, Phase, SteadyMeasures
    from benchmarks.placement.steady_tables import MAX_PHASE_COLUMNS, RunFigures, phase_table

    assert MAX_PHASE_COLUMNS == 6
    hot = Hottest(0.5, 0.5, 0.0, 0.0, 0.0)
    phases = tuple(Phase(f"b {i}Gi", 10.0, 0.5, 0.25) for i in range(count))
    run = RunFigures(
        "stock",
        SteadyMeasures(10.0 * count, hot, hot, phases, 0.5),
        {},
        {},
        True,
        0.5,
        Timeline((), (), {}, (), 10.0 * count),
    )
    text = "\n".join(phase_table([run]))
    assert text.count("hottest CPU / memory, mean %") == columns
    assert ("a ramp" in text) == (count > MAX_PHASE_COLUMNS)
    if count > MAX_PHASE_COLUMNS:
        assert f"change {count - 1} times" in text


def test_a_run_with_a_background_change_gets_the_optimum_that_cannot_see_it_coming(tmp_path):
    from benchmarks.placement.runner import RunResult
    from benchmarks.placement.steady_measures import Settings
    from benchmarks.placement.steady_tables import lines
    from tests.bench.test_placement_steady import STEADY

    sc = loads(STEADY)
    # web-1 on a from the start; at 30 s b's background goes to 3 GiB of 4; web-2 arrives at
    # 40 s. The run put web-1 on b (4 GiB of 4 from 30 s: 100 %) and web-2 on a (25 %);
    # knowing the change, web-1 would have gone to a, and both together use 2 GiB of a's 4
    # (50 %) against b's 3 (75 %). Kept on b, web-1 holds b at 100 % whatever web-2 does.
    run = RunResult(
        "s",
        "loadwise-least-used",
        placed={"web-1": "b", "web-2": "a"},
        bound_at={"web-1": 1000.0, "web-2": 1040.0},
        workloads={"web-1": "web", "web-2": "web"},
        stream=[1000.0, 1100.0],
        trace={"key": "k", "arrivals": {}},
        changes=[{"at": 1030.0, "node": "b", "memory": 3 * 2**30, "hot": True}],
    )
    text = "\n".join(lines(sc, [run], Settings(warmup=0, optimum_seconds=5), tmp_path / "o.json"))
    assert "the pods bound before the first change (30 s)" in text
    # memory is the hotter: 0-30 s b holds web-1 and its 1 GiB (50 %), then 100 %: 85.0;
    # knowing the change: 0-30 s 25 % (web-1 alone on a; b's 1 GiB: 25 %), 30-40 s b's 75 %,
    # 40-100 s 75 % (a at 50 %): (30 x 25 + 70 x 75) / 100 = 60.0; not knowing: 85.0
    assert "| loadwise-least-used | 1 | 85.0 | 85.0 | 0.0 |" in text
    assert "| the hotter of the two | 85.0 | - | - | - | - | - | - | 60.0 | 25.0 |" in text
