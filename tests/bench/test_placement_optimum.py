"""The optima of a steady run's trace (optimum.py): a tiny instance whose answers are known
by hand, and recorded runs, where neither optimum may lie above the contender's figure."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from benchmarks.placement import optimum, scenario, store
from benchmarks.placement.scenario import Change, Node, Resources
from benchmarks.placement.steady_measures import Timeline, hotter_mean, measure
from benchmarks.placement.steady_report import timeline_of
from benchmarks.placement.timeline import Stay

REPO = Path(__file__).resolve().parents[2]
GI = 1024**3

# Two 1-core nodes. p1 (0.6 cores) runs 0-20 s, p2 (0.6) 0-10 s, p3 and p4 (0.3 each)
# 0-20 s. For 0-10 s the best any placement does is 0.9 (0.6 + 0.3 on each node), and a
# placement that never moves must keep it: p3 and p4 are then one with each big pod, so
# once p2 leaves one node still holds 0.9. A pod free to move would go to the emptied
# node: 0.6 + 0.3 + 0.3 at 10-20 s on two nodes is at best 0.6.
#   per instant:       (10 x 0.9 + 10 x 0.6) / 20 = 0.75
#   without migration: 0.9 (every other placement is worse: see the test)
TWO = (Node("a", Resources(1, 1), Resources(0, 0)), Node("b", Resources(1, 1), Resources(0, 0)))
USAGE = {"big": Resources(0.6, 0.0), "small": Resources(0.3, 0.0)}


def tiny(where: dict[str, str]) -> Timeline:
    stays = (
        Stay("p1", "big", where["p1"], 0, 20),
        Stay("p2", "big", where["p2"], 0, 10),
        Stay("p3", "small", where["p3"], 0, 20),
        Stay("p4", "small", where["p4"], 0, 20),
    )
    return Timeline(TWO, stays, USAGE, (), 20)


def test_the_optima_of_a_tiny_instance_are_the_ones_worked_out_by_hand():
    # the contender put both small pods beside p1: 1.2 all along
    tl = tiny({"p1": "a", "p2": "b", "p3": "a", "p4": "a"})
    assert measure(tl, warmup=0).cpu.mean == pytest.approx(1.2)
    assert optimum.per_instant(tl, "cpu", 0) == pytest.approx(0.75)
    nm = optimum.no_migration(tl, "cpu", 0)
    assert nm.proven and nm.value == pytest.approx(0.9) and nm.bound == pytest.approx(0.9)
    assert (nm.pods, nm.resource) == (4, "cpu")


def test_the_no_migration_optimum_is_the_best_of_every_placement_enumerated():
    import itertools

    pods = ["p1", "p2", "p3", "p4"]
    best = min(
        measure(tiny(dict(zip(pods, w, strict=True))), warmup=0).cpu.mean
        for w in itertools.product("ab", repeat=4)
    )
    assert best == pytest.approx(0.9)
    assert optimum.no_migration(tiny(dict.fromkeys(pods, "a")), "cpu", 0).value == (
        pytest.approx(best)
    )


def test_the_warm_up_leaves_the_first_instants_out_of_both_optima():
    tl = tiny({"p1": "a", "p2": "b", "p3": "a", "p4": "b"})
    # after 10 s only p1, p3 and p4 run, and nothing before 10 s is measured: p1 alone
    # and the two small pods together, 0.6, with or without migration; p2, gone by then,
    # is not in the programme
    assert optimum.per_instant(tl, "cpu", 10) == pytest.approx(0.6)
    nm = optimum.no_migration(tl, "cpu", 10)
    assert nm.value == pytest.approx(0.6) and nm.pods == 3
    assert measure(tl, warmup=10).cpu.mean == pytest.approx(0.9)  # the contender's


def test_instant_is_exact_with_whole_pods_and_backgrounds():
    # three pods of 0.5 on two 1-core nodes: two share one node, 100 %
    assert optimum.instant([1, 1], [0, 0], {0.5: 3}) == pytest.approx(1.0)
    # a background of 0.8 on the first: the pods go to the second, 1.5 there... or one
    # beside the background (1.3): 1.3 is the best of the whole-pod placements
    assert optimum.instant([1, 1], [0.8, 0], {0.5: 3}) == pytest.approx(1.3)
    assert optimum.instant([2, 1], [0, 0], {}) == 0.0
    with pytest.raises(ValueError, match="one capacity"):
        optimum.instant([0, 1], [0, 0], {0.5: 1})


def _recorded(name: str, contender: str) -> list[store.RunResult]:
    """The first run of the pair the docs' index lists (one file read, not all)."""
    index = REPO / "docs/placement/results.json"
    idx = store.read_index(index)
    files = [n for n in idx.runs if n.startswith(f"runs/{name}/{contender}-")]
    inline = [r for r in idx.inline if r.scenario == name and r.contender == contender]
    return inline[:1] or [store.read_run(index.parent / f) for f in files[:1]]


@pytest.mark.parametrize(
    ("name", "contender", "seconds"),
    [("steady-hog", "loadwise-least-used", 10.0), ("steady-mix", "loadwise-least-used", 1.0)],
)
def test_neither_optimum_is_above_the_contender_on_a_recorded_run(name, contender, seconds):
    # steady-mix's programme is not proven within 1 s: the value found must still be
    # at most the run's own, as the search starts from the run's placement
    sc = scenario.select([name])[0]
    runs = _recorded(name, contender)
    assert runs, f"no recorded {contender} run of {name}"
    tl = timeline_of(sc, runs[0])
    assert tl is not None
    m = measure(tl, warmup=120)
    for res in ("cpu", "memory"):
        inst = optimum.per_instant(tl, res, 120)
        nm = optimum.no_migration(tl, res, 120, time_limit=seconds)
        assert inst <= nm.bound + 1e-9 <= nm.value + 2e-9, res
        assert nm.value <= m.of(res).mean + 1e-9, res
        assert 0 <= nm.gap < 1
    if optimum.first_change(tl) is not None:
        # the optimum that cannot see the change coming lies between the one that can
        # (its bound: the kept pods are one of the placements it searched) and the run
        known = optimum.no_migration(tl, optimum.HOTTER, 120, time_limit=seconds)
        blind = optimum.no_migration(tl, optimum.HOTTER, 120, time_limit=seconds, unforeseen=True)
        assert known.bound - 1e-9 <= blind.value <= hotter_mean(tl, 120) + 1e-9


def test_unforeseen_keeps_the_pods_bound_before_the_first_change_where_the_run_put_them():
    """Two nodes of 1 GiB; at 10 s something no pod requests takes half of a's memory. p1
    (0.5 GiB, 0-20 s) was bound before that, on a; p2 (0.25, 12-20 s) after, also on a.
    Knowing the change is coming, p1 goes to b: 0.5 until 12 s, then 0.75 wherever p2
    goes, (12 x 0.5 + 8 x 0.75) / 20 = 0.6. Not knowing it, p1 stays on a, at 1.0 from
    10 s whatever p2 does, and p2 goes to b: (10 x 0.5 + 10 x 1.0) / 20 = 0.75. The run
    put p2 beside them: 1.25 from 12 s, 0.85."""
    usage = {"big": Resources(0, 0.5 * GI), "small": Resources(0, 0.25 * GI)}
    nodes = (
        Node("a", Resources(1, GI), Resources(0, 0)),
        Node("b", Resources(1, GI), Resources(0, 0)),
    )
    stays = (Stay("p1", "big", "a", 0, 20), Stay("p2", "small", "a", 12, 20))
    tl = Timeline(nodes, stays, usage, (Change(10, "a", 0.5 * GI),), 20)
    assert optimum.first_change(tl) == 10
    assert hotter_mean(tl, 0) == pytest.approx(0.85)
    foreseen = optimum.no_migration(tl, optimum.HOTTER, 0)
    unforeseen = optimum.no_migration(tl, optimum.HOTTER, 0, unforeseen=True)
    assert foreseen.proven and foreseen.value == pytest.approx(0.6)
    assert unforeseen.proven and unforeseen.value == pytest.approx(0.75)
    # without a change nothing is kept: the same as the optimum that knows everything
    calm = Timeline(nodes, stays, usage, (), 20)
    assert optimum.first_change(calm) is None
    # a change before the first pod is the state the stream starts in (steady-vary's at 0 s)
    opening = Timeline(nodes, stays, usage, (Change(0, "a", 0.5 * GI),), 20)
    assert optimum.first_change(opening) is None
    assert optimum.no_migration(calm, optimum.HOTTER, 0, unforeseen=True).value == (
        pytest.approx(optimum.no_migration(calm, optimum.HOTTER, 0).value)
    )


def test_the_per_instant_optimum_does_not_depend_on_the_unit() -> None:
    """Memory in bytes beside tiny pods (a generated scenario's pods use 0.2x of a small
    request) is the same programme as in GiB; HiGHS once failed on the bytes."""
    gib = 2**30
    caps, bg = [32.0, 4.0, 4.0, 8.0], [3.0, 1.5, 0.25, 2.0]
    shapes = {0.05: 7, 1.5: 3, 0.4: 11}
    in_gib = optimum.instant(caps, bg, shapes)
    in_bytes = optimum.instant(
        [c * gib for c in caps], [b * gib for b in bg], {u * gib: k for u, k in shapes.items()}
    )
    assert in_bytes == pytest.approx(in_gib, abs=1e-9)
    assert 0 < in_gib <= 1


def test_the_hotter_optimum_is_one_placement_judged_on_both_resources():
    """Three pods on two nodes of 1 core / 1 GiB, all along: cpu-heavy (0.6 / 0.1),
    memory-heavy (0.1 / 0.6) and even (0.3 / 0.3). Each resource alone is best at 0.6 (its
    heavy pod alone), but then the other resource's heavy pod is beside the even one: 0.9.
    One placement for both: the two heavy pods together, 0.7 on each resource."""
    usage = {
        "cpu-heavy": Resources(0.6, 0.1 * GI),
        "mem-heavy": Resources(0.1, 0.6 * GI),
        "even": Resources(0.3, 0.3 * GI),
    }
    nodes = (
        Node("a", Resources(1, GI), Resources(0, 0)),
        Node("b", Resources(1, GI), Resources(0, 0)),
    )

    def run(where: dict[str, str]) -> Timeline:
        stays = tuple(Stay(w, w, where[w], 0, 20) for w in usage)
        return Timeline(nodes, stays, usage, (), 20)

    tl = run(dict.fromkeys(usage, "a"))
    assert optimum.no_migration(tl, "cpu", 0).value == pytest.approx(0.6)
    assert optimum.no_migration(tl, "memory", 0).value == pytest.approx(0.6)
    both = optimum.no_migration(tl, optimum.HOTTER, 0)
    assert both.proven and both.value == pytest.approx(0.7) and both.resource == "hotter"
    # and no placement does better on the higher of the two, instant by instant
    import itertools

    names = list(usage)
    best = min(
        hotter_mean(run(dict(zip(names, w, strict=True))), 0)
        for w in itertools.product("ab", repeat=3)
    )
    assert best == pytest.approx(0.7)


def test_a_pod_of_a_trace_is_known_by_its_workload_and_arrival_rank_not_its_name():
    stays = [
        Stay("web-zz", "web", "a", 5, 9),
        Stay("db-1", "db", "b", 1, 9),
        Stay("web-aa", "web", "b", 2, 9),
        Stay("web-mm", "web", "a", 2, 9),  # same instant as web-aa: by name
    ]
    assert optimum.arrival_keys(stays) == {
        "db-1": ("db", 0),
        "web-aa": ("web", 0),
        "web-mm": ("web", 1),
        "web-zz": ("web", 2),
    }
    assert optimum.placement_of(stays) == {
        ("db", 0): "b",
        ("web", 0): "b",
        ("web", 1): "a",
        ("web", 2): "a",
    }


# Two 1-core nodes; two 0.5-core pods at 0 s, a 1-core pod at 1 s, all to 100 s. Greedy in
# arrival order splits the halves (0.5 beats 1.0 while they are alone), and the big pod
# then makes 1.5 wherever it goes: (1 x 0.5 + 99 x 1.5) / 100 = 1.49. The halves together
# and the big pod alone: (1 x 1.0 + 99 x 1.0) / 100 = 1.0, the optimum.
PEER_USAGE = {"half": Resources(0.5, 0.0), "full": Resources(1.0, 0.0)}


def _peer_run(names: Sequence[str], where: Sequence[str], starts: Sequence[float]) -> Timeline:
    workloads = ("half", "half", "full")
    stays = tuple(
        Stay(n, w, node, t, 100)
        for n, w, node, t in zip(names, workloads, where, starts, strict=True)
    )
    return Timeline(TWO, stays, PEER_USAGE, (), 100)


def test_the_no_migration_search_starts_from_a_peer_placement_of_the_same_trace():
    mine = _peer_run(("h-1", "h-2", "f-1"), ("a", "a", "a"), (0, 0, 1))
    # another contender's run of the trace: other pod names, slightly other binding times
    peer = _peer_run(("x-q", "x-p", "y-r"), ("b", "b", "a"), (0.3, 0.2, 1.4))
    assert measure(mine, warmup=0).cpu.mean == pytest.approx(1.99)  # (1 x 1.0 + 99 x 2.0) / 100
    alone = optimum.no_migration(mine, "cpu", 0, time_limit=0.0)
    assert alone.start in ("greedy", "solver") and alone.value <= 1.49 + 1e-9
    # stopped at once, the solver has no bound of its own; the stretches' floors are one
    assert 0.99 - 1e-9 <= alone.bound <= alone.value
    got = optimum.no_migration(mine, "cpu", 0, peers=[optimum.placement_of(peer.stays)])
    assert got.value == pytest.approx(1.0) and got.proven
    assert got.start == "peer"


def test_the_optimum_is_not_above_any_peer_placement_on_a_recorded_round():
    """Two contenders' runs of one recorded trace: the optimum of the one started from the
    other's placement is at most that placement as steady_measures measures it, the pods
    matched by workload and arrival order here independently of optimum.py."""
    index = REPO / "docs/placement/results.json"
    runs = {
        c: store.read_run(index.parent / f)
        for c in ("loadwise-least-used", "stock")
        for f in sorted(store.read_index(index).runs)
        if f.startswith(f"runs/steady-hog/{c}-3001-0-")
    }
    assert len(runs) == 2, "the recorded round of seed 3001 is in the docs' index"
    assert runs["stock"].trace == runs["loadwise-least-used"].trace
    sc = scenario.select(["steady-hog"])[0]
    mine = timeline_of(sc, runs["loadwise-least-used"])
    theirs = timeline_of(sc, runs["stock"])
    assert mine is not None and theirs is not None

    def ranked(tl: Timeline) -> dict[str, list[Stay]]:
        by: dict[str, list[Stay]] = {}
        for s in sorted(tl.stays, key=lambda s: (s.start, s.pod)):
            by.setdefault(s.workload, []).append(s)
        return by

    other = ranked(theirs)
    moved = []
    for w, stays in ranked(mine).items():
        for k, s in enumerate(stays):
            node = other[w][k].node if k < len(other[w]) else s.node
            moved.append(Stay(s.pod, s.workload, node, s.start, s.end))
    as_theirs = Timeline(mine.nodes, tuple(moved), mine.usage, mine.changes, mine.end)
    for res in ("cpu", "memory"):
        nm = optimum.no_migration(
            mine, res, 120, time_limit=1.0, peers=[optimum.placement_of(theirs.stays)]
        )
        assert nm.value <= measure(as_theirs, warmup=120).of(res).mean + 1e-9, res
        assert nm.value <= measure(mine, warmup=120).of(res).mean + 1e-9, res
