"""The estimator on streams where pods come and go and use more or less than they request
(``steady_sim``: the lab's timing and kube-scheduler's own scores, in-process, on a fake
clock), against stock kube-scheduler and against the request rule it replaces.

Measured when written (run seeds 31-34, a node's CPU as the lab's kwok serves it, the
hottest node's mean CPU after a 2-minute warm-up): steady-mix stock 73.8 %, least-used
71.5-72.4 %; het-22 (2-, 4- and 8-core nodes) stock 91.3-92.0 %, least-used 66.5-69.0 %;
het-23 (4-core nodes, backgrounds) stock 71.8-82.4 %, least-used 64.5-69.2 %. Error
predicting the chosen node's use at the binding, CPU / memory points: steady-mix 2.2 / 2.4
learned against 11.6 / 10.4 by the request rule. Streams 1-12 and run seeds 1-6 were the
ones looked at while building it; these are others.
"""

from __future__ import annotations

import functools
import statistics

import pytest

from . import steady_sim as sim

SEEDS = (31, 32, 33, 34)
STREAMS = {
    "steady-mix": sim.STEADY_MIX,
    "het-22": sim.heterogeneous(22),  # 2-, 4- and 8-core nodes
    "het-23": sim.heterogeneous(23),  # 4-core nodes with backgrounds nobody requested
}


def _runs(make, stream):
    return [sim.run(make(seed, stream), seed) for seed in SEEDS]


@pytest.mark.parametrize("name", list(STREAMS))
def test_least_used_is_no_worse_than_stock_and_predicts_better_than_the_request_rule(name):
    stream = STREAMS[name]
    stock = _runs(sim.request_placer, stream)
    learned = _runs(sim.new_extender, stream)
    rule = _runs(sim.request_rule_extender, stream)
    assert all(r.placed > 100 for r in stock + learned + rule)
    # the hottest node after the warm-up: no worse than stock on every seed
    for s, n in zip(stock, learned, strict=True):
        assert n.hottest_cpu <= s.hottest_cpu + 0.5, (name, s.hottest_cpu, n.hottest_cpu)
    # never a set's pods all on one node while another has room for one of them
    assert [r.all_on_one for r in learned] == [0] * len(SEEDS), name
    # no drift: over the seeds, the last third no hotter than the first by more than 2
    # points (one seed's thirds are some 160 s each: a single long pod moves them by 2)
    first, last = (statistics.mean(r.thirds[i] for r in learned) for i in (0, 1))
    assert last <= first + 2.0, [r.thirds for r in learned]
    # the error predicting the chosen node's use at the binding: at most half the request
    # rule's, per resource
    for key in ("cpu@0", "memory@0"):
        mine = statistics.mean(r.error[key] for r in learned)
        base = statistics.mean(r.error[key] for r in rule)
        assert mine <= base / 2, (name, key, mine, base)


@pytest.mark.parametrize("cpu", [sim.INSTANT, sim.MEAN])
def test_pods_arriving_are_not_counted_twice_beside_a_reading_of_latest_values(cpu):
    """While the stream ramps up, the pods placed within the reading's last 45 s were counted
    beside it as if it held a third of what it did: a pod placed 30 s before a scrape is all
    in it. With the lab's kwok nodes (``INSTANT``: a node's CPU is its pods' use at the
    scrape) the binding's predicted CPU was +4.7 points too high in the second minute, the
    hottest node's p99 79.1 % and 8 s above 80 % (old rule; seeds 31-34, load-watcher).

    Read from metrics-server, as the role installs it, each node's figure carries its
    scrape's time, and the second minute's bias is within a point on every seed, on real
    kubelets' figures (``MEAN``) too. Through load-watcher the scrape's time is lost (its
    document says when it collected): the extender takes the scrape as anywhere in the
    resolution before the collection, and where it was in fact taken just before, the pods
    placed in that resolution are counted again beside it. With the periods' phases drawn
    apart from the stream (``run``) that is seeds 32-34 here: +9.8 to +15.2 points with
    ``INSTANT``, +3.9 to +8.6 with ``MEAN``, at the default refresh (15 s); at 30 s, +11.0
    to +17.2 and +5.3 to +9.8. Seed 31 (scraped 12 s before the collection): +0.9 and -1.8.
    The bound below holds that, no more."""
    stock = _runs(sim.request_placer, sim.STEADY_MIX)
    learned = [
        sim.run(sim.new_extender(seed), seed, cpu=cpu, source=sim.METRICS_SERVER) for seed in SEEDS
    ]
    assert all(-1.5 <= r.bias[60] <= 1.5 for r in learned), [r.bias[60] for r in learned]
    assert statistics.mean(r.error["cpu@0"] for r in learned) <= 2.0
    assert sum(r.above_80 for r in learned) == 0
    p99 = statistics.mean(r.hottest_cpu_p99 for r in learned)
    assert p99 <= statistics.mean(r.hottest_cpu_p99 for r in stock) + 0.5, p99
    watcher = [sim.run(sim.new_extender(seed), seed, cpu=cpu) for seed in SEEDS]
    ramp = statistics.mean(r.bias[60] for r in watcher)
    assert ramp <= (10.0 if cpu == sim.INSTANT else 5.0), [r.bias[60] for r in watcher]
    assert statistics.mean(r.error["cpu@0"] for r in watcher) <= 3.2


def test_spreading_on_same_size_nodes_stays_within_ten_points_of_stock():
    stock = _runs(sim.request_placer, sim.STEADY_MIX)
    learned = _runs(sim.new_extender, sim.STEADY_MIX)
    share = {
        "stock": statistics.mean(r.largest_share for r in stock),
        "learned": statistics.mean(r.largest_share for r in learned),
    }
    assert share["learned"] <= share["stock"] + 0.10, share


def test_on_the_generator_s_clusters_least_used_is_cooler_and_never_piles_a_workload():
    """The lab's generated scenarios as streams (``steady_sim.generated``: a mini PC beside
    Pis, or equal nodes; pods using 0.2-6x their request), 360 s each as in the lab. Over 30
    of them (drawn after the estimator; gen-1601..1630): least-used's hottest node lower
    than stock's on average, per resource, by 3 points or more (measured: CPU -5.6, memory
    -9.6), at most 3 streams more than 2 points hotter (0 on CPU, 2 on memory), and no
    workload ever with all of its pods on one node while another node has room for one more
    (the bar for clusters of unequal nodes, where more may go to the big node).

    Since a raise of the hottest level of all counts once more (``least_used.OVERALL_WEIGHT``,
    which trades a resource's points for the hotter one's), on the hotter of CPU and memory
    none more than 2 points above stock, -11.0 on average before and -11.8 after; per
    resource 1 and 2 streams on CPU, 2 and 4 on memory (gen-1606 +4.1, gen-1623 +5.1)."""
    rows = sim._worse_than_stock(sim.generated, range(1601, 1631), sim.GENERATED_SECONDS)
    for resource in ("cpu", "memory"):
        diffs = [d for d, _ in rows[resource]]
        assert statistics.mean(diffs) <= -3.0, (resource, rows[resource])
        assert sum(d > 2.0 for d in diffs) <= 4, (resource, rows[resource])
    assert all(d <= 2.0 for d, _ in rows["hotter"]), rows["hotter"]
    assert statistics.mean(d for d, _ in rows["hotter"]) <= -8.0, rows["hotter"]
    assert all(d <= 0 for d, _ in rows["piled"]), rows["piled"]


def test_beside_a_memory_hog_least_used_keeps_the_hog_cool():
    """Streams with a memory hog (``steady_sim.hogged``: equal nodes, one holding 65-80 %
    of its memory for processes no pod requests), hog-101..130, 900 s. Least-used keeps
    pods off the hog (the hottest memory 12 points below stock's on average), and on these
    streams no stream ends more than 2 points hotter on CPU than stock (on streams drawn
    later some do, each for more memory than it costs in CPU:
    ``test_beside_a_memory_hog_cpu_is_given_up_only_for_more_memory``). With a point of
    CPU and a point of memory one currency in the hottest-node term
    (``least_used.level_weights`` at power 0) hog-115 ran 7.3 points hotter on CPU; at
    power 2, 4 and 8 the worst was +1.1, +1.6 and +2.8 (``python -c "from tests.extender
    import steady_sim as s; s.main(['101', '131', '--classes', 'hogged', '--level-power',
    '0'])"``). Since a raise of the hottest level of all counts once more
    (``least_used.OVERALL_WEIGHT``), hog-109 runs 3.9 points hotter on CPU than stock (58.5 %
    against 54.6), its memory 33 points cooler (66.7 against 99.7; 78.1 without the term),
    and the hottest memory is 15.4 points below stock's on average (13.8 before): as on the
    streams drawn later, CPU is given up only for more memory."""
    rows = sim._worse_than_stock(sim.hogged, range(101, 131))
    assert statistics.mean(d for d, _ in rows["memory"]) <= -8.0, rows["memory"]
    traded = [seed for d, seed in rows["cpu"] if d > 2.0]
    assert len(traded) <= 1, rows["cpu"]
    for seed in traded:
        stream = sim.hogged(seed)
        stock = sim.run(sim.request_placer(seed, stream), seed, duration=900.0)
        mine = sim.run(sim.new_extender(seed, stream), seed, duration=900.0)
        assert mine.hottest_memory > mine.hottest_cpu, (seed, mine)
        gained = stock.hottest_memory - mine.hottest_memory
        assert gained > mine.hottest_cpu - stock.hottest_cpu, (seed, stock, mine)


def test_a_memory_hog_that_comes_and_goes_is_kept_cooler_than_stock_keeps_it():
    """steady-hog (``steady_sim.STEADY_HOG``: sh-4's background memory 6 GiB of 8 from 60 s
    to 240 s). Stock keeps its even quarter there, 118.75 % while the hog lasts and 50 %
    after it: some 84 % after the warm-up. Least-used stops sending pods there once a
    reading shows the hog, but those bound before it stay. Read from metrics-server (the
    role's default, and the placement lab's steady-hog): 69.7-72.4 % on these seeds at the
    default refresh (15 s), 66.4-72.0 at 30 s. Through load-watcher, which collects once a
    minute, the hog shows later: 72.0-81.4 % at 15 s, and at 30 s 77.2-87.4, seed 31 above
    stock (``python -c "from tests.extender import steady_sim as s; s.main(['1', '1',
    '--steady-hog', '--source', 'metrics-server'])"``; the periods' phases as ``run`` draws
    them since they come from a generator of their own)."""
    for seed in SEEDS:
        stock = sim.run(sim.request_placer(seed, sim.STEADY_HOG), seed, duration=360.0)
        assert stock.hottest_memory == pytest.approx((118.75 + 50) / 2, abs=1.0), seed
        mine = sim.run(
            sim.new_extender(seed, sim.STEADY_HOG), seed, duration=360.0, source=sim.METRICS_SERVER
        )
        assert mine.hottest_memory <= stock.hottest_memory - 10.0, (seed, mine.hottest_memory)
        watcher = sim.run(sim.new_extender(seed, sim.STEADY_HOG), seed, duration=360.0)
        assert watcher.hottest_memory <= stock.hottest_memory - 2.0, (seed, watcher.hottest_memory)


def test_the_request_rule_alone_overshoots_on_steady_mix():
    """The baseline the estimator is judged against: without per-pod use, "over" pods (4x
    their request) count at 85m and pile up; the simulator must show it, or it cannot tell
    a better estimator from a worse one."""
    stock = _runs(sim.request_placer, sim.STEADY_MIX)
    rule = _runs(sim.request_rule_extender, sim.STEADY_MIX)
    assert statistics.mean(r.hottest_cpu for r in rule) > (
        statistics.mean(r.hottest_cpu for r in stock) + 5.0
    )


def test_the_stream_is_reproducible_from_its_seed():
    first = sim.run(sim.new_extender(21, sim.heterogeneous(5)), 21, duration=200.0)
    again = sim.run(sim.new_extender(21, sim.heterogeneous(5)), 21, duration=200.0)
    assert first == again
    assert sim.heterogeneous(5) == sim.heterogeneous(5) != sim.heterogeneous(6)


# Drawn streams, some more loaded than their nodes (het-144: 7 % more CPU use than the
# nodes have): the ones looked at while building the order of nodes over capacity
# (least_used below 0) and while choosing to read a node over capacity as full.
WIDE = range(101, 161)
# Drawn afterwards, first run with the rule that a node the pod takes over capacity scores
# that resource alone (LeastUsed.combine): het-241, a pod of 2.2 cores and 2-core nodes.
FRESH = range(201, 261)


def _hottest(make, seeds: range = WIDE, refresh: float = sim.REFRESH) -> dict[int, sim.Result]:
    """Per stream of ``seeds``, its run after the warm-up (run seed = the stream's, 900 s)."""
    return {
        seed: sim.run(make(seed, sim.heterogeneous(seed)), seed, duration=900, refresh=refresh)
        for seed in seeds
    }


@functools.cache
def _stock(seeds: range = WIDE) -> dict[int, sim.Result]:
    return _hottest(sim.request_placer, seeds)


@functools.cache
def _least_used(seeds: range = WIDE) -> dict[int, sim.Result]:
    return _hottest(sim.new_extender, seeds)


def _worse(mine: dict[int, sim.Result], measure: str = "hottest_cpu") -> list[float]:
    """Points hotter than stock on ``measure`` (the hottest node's mean CPU, or its p99:
    ``hottest_cpu_p99``), per stream, worst first."""
    stock = _stock(range(min(mine), max(mine) + 1))
    return sorted(
        (getattr(mine[s], measure) - getattr(stock[s], measure) for s in mine), reverse=True
    )


def test_least_used_ranks_nodes_over_capacity_by_how_far_over():
    """Measured when written: at most 2.7 points hotter than stock on any of the 60
    streams, 12.7 cooler on average; at most 8.3 hotter and 12.5 cooler on average once a
    node the pod takes over capacity scores that resource alone (het-144, 6.6 cooler than
    stock before: four pods of 3 cores, one 8-core node, the two 4-core ones busy with
    small pods, a packing that placing one pod at a time on the emptiest node does not
    find). Scored 0 over capacity (Koordinator's leastUsedScore), a node far over with free
    memory outscored one just over (policies/least_used.py): het-144 ran 184 % against
    stock's 118 %, 65 points. Those figures read a node's CPU as kwok did when only
    metrics-server read it (``sim.INSTANT``); as a real kubelet and the lab since
    lab/kwokclock.py report it (``sim.MEAN``, the default since), at most 12.2 hotter.

    Since the extender reads its source every 15 s (``sim.REFRESH``) and the periods'
    phases are drawn apart from the stream: at most 7.5 hotter, 14.7 cooler on average, and
    Koordinator's clamp changes nothing here (7.5, 14.8): with readings fresher by 15 s no
    node is left far over long enough for the order among nodes over capacity to decide. It
    did at a 30 s refresh (the default before, and still a setting): stream 101 26.4 points
    hotter than stock with the clamp, 44.5 cooler without, at fa9d56a. Since ``spread.near_best``
    judges a set held by one node over every node and spreads only onto a node with room,
    the clamp costs nothing there either (stream 101 42.3 cooler with it or without): at a
    30 s refresh the worst stream is 1.6 points hotter with it and 7.5 (stream 145)
    without, the same with ``sim.INSTANT`` readings (2.1 and 7.5). So the order among
    nodes over capacity rests on the policy's own cases (tests/extender/test_policies.py),
    and here only the bounds are kept."""
    worse = _worse(_least_used())
    assert worse[0] <= 13.0, worse[:3]
    assert statistics.mean(worse) <= -8.0


def test_a_placement_that_raises_the_hottest_node_loses_to_one_that_does_not(monkeypatch):
    """least-used's hottest-node term (``least_used.HOTTEST_WEIGHT``). Without it the mean
    of free shares let free memory buy placements that made the hottest node hotter: measured
    when written, on ``WIDE``, more than 2 points hotter than stock on memory in 8 streams (worst
    11.4) and on CPU in 2; with it in 3 and 1, and 1.9 points cooler on CPU on average; with
    a node's CPU read as a real kubelet's (``sim.MEAN``, the default since lab/kwokclock.py)
    memory in 5 (worst 10.8). With the extender reading every 15 s (``sim.REFRESH``) and the
    periods' phases drawn apart from the stream: CPU in 1 (7.5), memory in 6 (worst 10.0);
    without the term CPU 2.4 points warmer on average and memory in 11 (worst 11.4)."""
    from loadwise.extender.policies import least_used

    def count(worse: list[float]) -> int:
        return sum(d > 2.0 for d in worse)

    cpu, memory = _worse(_least_used()), _worse(_least_used(), "hottest_memory")
    assert count(cpu) <= 2, cpu[:3]
    assert count(memory) <= 6, memory[:6]

    def unchanged(score: int, raised: float, weight: float = 0.0, ceiling: int = 0) -> int:
        return score

    monkeypatch.setattr(least_used, "less_for_raising", unchanged)
    without = _hottest(sim.new_extender)
    assert count(_worse(without, "hottest_memory")) >= 9
    assert statistics.mean(cpu) < statistics.mean(_worse(without)) - 1.0


def test_a_node_read_over_its_capacity_keeps_its_reading_and_its_departures_count(monkeypatch):
    """A node whose reading is over its capacity (kwok's nodes report demand: 118 % CPU at
    times in het-21) keeps that reading (it was read as 100 % until the hottest-node term:
    ``readings.SATURATED``). Refused as unknown, that node scored "no data" until the next
    reading, whatever left it, and everything went beside it: 38 points hotter than stock
    on one of the 60 streams, against at most 2.7 read as full (when written). Since a node
    the pod takes over capacity scores that resource alone, the means come closer (8.3 read
    as full, 6.7 refused), but the spikes do not: the hottest node's p99 at most 16.2 points
    above stock's read as full, 51.5 refused. With ``least_used.level_weights`` at power
    2: 12.6 kept, 33.1 refused (44.2 refused at power 0)."""
    from loadwise.extender import readings

    assert _worse(_least_used(), "hottest_cpu_p99")[0] <= 25.0
    monkeypatch.setattr(readings, "SATURATED", 100.0 + readings.SLACK)
    assert _worse(_hottest(sim.new_extender), "hottest_cpu_p99")[0] > 30.0


def test_a_node_the_pod_takes_over_capacity_loses_to_one_it_fits_on(monkeypatch):
    """On streams drawn after the rule was made (``FRESH``): a node the pod would take over
    capacity scores that resource alone, below every node the pod fits on (LeastUsed.combine).
    Measured when written: at most 0.6 points hotter than stock, 12.2 cooler on average
    (2.1 hotter at most with the hottest-node term, ``least_used.HOTTEST_WEIGHT``; 2.8
    once its points count at ``least_used.level_weights``, power 2, and 10.6 at power 3,
    which is why the power is not higher). In
    the mean of free shares, free memory made up for being over on CPU: het-241's 2-core
    node took pods of 2.2 cores and ran at 125 % for the whole stream, 17.6 points above
    stock's hottest node."""
    from loadwise.extender.policies import least_used
    from loadwise.extender.policies.least_used import LeastUsed

    worse = _worse(_least_used(FRESH))
    assert worse[0] <= 3.0, worse[:3]
    assert statistics.mean(worse) <= -8.0

    def mean_only(self, cpu, memory, pods, soft=()):  # combine as it was before the rule
        parts = [
            (score, self.weights.get(name, 0))
            for name, score in (("cpu", cpu), ("memory", memory), ("pods", pods))
            if score is not None and self.weights.get(name, 0)
        ]
        if not parts:
            return None
        total = sum(score * weight for score, weight in parts)
        weights = sum(weight for _, weight in parts)
        if self.dominant_weight:  # the worst counted again (dominantResourceWeight)
            total += min(score for score, _ in parts) * self.dominant_weight
            weights += self.dominant_weight
        return int(total // weights)

    monkeypatch.setattr(LeastUsed, "combine", mean_only)
    # 17.6 before the hottest-node term; 8.4 with it (the term alone mends some of it), 1.3
    # with raises counted beyond the least and held at a ceiling (least_used.beyond_least,
    # RAISED_POINTS): the rule's own effect is measured with the term as it was
    from loadwise.extender import decide, service

    monkeypatch.setattr(least_used, "RAISED_POINTS", 0.0)
    monkeypatch.setattr(decide, "beyond_least", lambda raises, measured=None: list(raises))
    monkeypatch.setattr(service.Extender, "_fast_answer", lambda *_args, **_kw: None)
    assert _worse(_hottest(sim.new_extender, FRESH))[0] > 5.0


def test_on_the_generator_s_equal_nodes_no_workload_leans_more_than_ten_points_past_stock(
    monkeypatch,
):
    """The placement benchmark's measure of spreading (the largest share of one workload's
    running pods on one node, time-averaged: ``Result.top_share``) on the generated
    clusters of equal nodes (12 of gen-3101..3130, 360 s each): within 10 points of
    stock's on every one, with the fair-share term (``policies.spread.fair_share``),
    while the hotter of the hottest node's mean CPU and memory stays below stock's on
    every one of the 30. Without the term 2 were more than 10 points above (gen-3126: 83 %
    against 33 %, small replicas on the one node without a 2-core pod). The figures:
    ``python tests/extender/steady_sim.py 3101 3131 --classes generated``, and the same
    with ``--no-fair-share``."""
    from loadwise.extender import decide, fastpath

    rows = sim._worse_than_stock(sim.generated, range(3101, 3131), sim.GENERATED_SECONDS)
    share = [d for d, _ in rows["equal share"]]
    assert len(share) == 12
    assert max(share) <= 10.0, share
    assert max(d for d, _ in rows["hotter"]) < 0.0, rows["hotter"]

    def unchanged(scores, *args):
        return list(scores)

    monkeypatch.setattr(decide, "fair_share", unchanged)
    monkeypatch.setattr(fastpath, "fair_share", unchanged)
    rows = sim._worse_than_stock(sim.generated, range(3101, 3131), sim.GENERATED_SECONDS)
    before = [d for d, _ in rows["equal share"]]
    assert sum(d > 10.0 for d in before) >= 2, before


def test_spreading_reaches_nodes_busy_with_cpu_and_nodes_the_hottest_node_term_lowered(
    monkeypatch,
):
    """The placement benchmark's gen-3801..3822 as streams, on metrics-server's readings:
    on the 13 clusters of equal nodes the largest share of a workload within 10 points of
    stock's, the hotter of the hottest node's CPU and memory never more than 2 above. With
    memory's room level for CPU too (``spread.ROOM_CPU_PERCENT`` at 75) and the band judged
    after the hottest-node term (``fair_share`` without its ``loads``), gen-3817 was 16.7
    points above (three of four small replicas on the one node under 75 % CPU)."""
    from loadwise.extender import decide, fastpath
    from loadwise.extender.policies import spread

    drawn = range(3801, 3823)
    kw = {"duration": sim.GENERATED_SECONDS, "source": sim.METRICS_SERVER}
    rows = sim._worse_than_stock(sim.generated, drawn, **kw)
    share = [d for d, _ in rows["equal share"]]
    assert len(share) == 13
    assert max(share) <= 10.0, rows["equal share"]
    assert max(d for d, _ in rows["hotter"]) <= 2.0, rows["hotter"]

    def after_the_term(scores, same, cpu, memory, room, loads=None):
        return spread.fair_share(scores, same, cpu, memory, room)

    monkeypatch.setattr(spread, "ROOM_CPU_PERCENT", spread.ROOM_PERCENT)
    monkeypatch.setattr(decide, "fair_share", after_the_term)
    monkeypatch.setattr(fastpath, "fair_share", after_the_term)
    rows = sim._worse_than_stock(sim.generated, drawn, **kw)
    assert max(d for d, _ in rows["equal share"]) > 10.0, rows["equal share"]


# Drawn after least_used.RAISED_POINTS, read through metrics-server as the role installs it.
LATER = range(701, 721)


@functools.cache
def _pair(make, seed: int) -> tuple[sim.Result, sim.Result]:
    """Stock's run and least-used's on ``make(seed)``, metrics-server's readings."""
    stream = make(seed)
    kw = {
        "duration": sim.GENERATED_SECONDS if make is sim.generated else 900.0,
        "source": sim.METRICS_SERVER,
    }
    return (
        sim.run(sim.request_placer(seed, stream), seed, **kw),
        sim.run(sim.new_extender(seed, stream), seed, **kw),
    )


def test_least_used_never_takes_a_node_s_memory_past_its_capacity_where_stock_does():
    """Memory demand above a node's capacity is the kubelet's eviction and the kernel's OOM
    killer on a real node (docs/placement.md, "On real kubelets"). Beside a memory hog and on
    the generator's clusters (hog-701..720, gen-701..720), measured when written: stock's
    memory demand went over on some node in 10 of the 40 streams, for 78-872 s; least-used's
    in none, with the estimates it learns; with the request rule instead (``estimator.mode:
    request``) in 2 (gen-702 25 s, gen-703 79 s). On the four classes' streams 601-640
    (``Result.memory_over``): stock over in 14 of 160, least-used in none.

    That "none" held for one draw of the periods' phases. Drawn apart from the stream
    (``run``), least-used goes over on gen-708 (stock: 346 s there, its hottest memory
    125.7 % on average): 69 s at the default refresh (15 s), none at 30 s. With the phases
    drawn from the stream's generator, as before, none at 30 s and 91 s at 15; with another
    independent draw, 53 s at 30 s and none at 15. One stream of the 40, each time, where
    stock was over for 346 s."""
    stock_over = rule_over = 0
    over: list[tuple[str, int, int]] = []
    for make in (sim.hogged, sim.generated):
        for seed in LATER:
            stock, mine = _pair(make, seed)
            if mine.memory_over:
                over.append((make(seed).name, mine.memory_over, stock.memory_over))
            stock_over += stock.memory_over > 0
    assert len(over) <= 1, over
    assert all(mine <= 90 and mine * 3 <= stock for _, mine, stock in over), over
    for seed in LATER:
        rule = sim.run(
            sim.request_rule_extender(seed, sim.generated(seed)),
            seed,
            duration=sim.GENERATED_SECONDS,
            source=sim.METRICS_SERVER,
        )
        rule_over += rule.memory_over > 0
    assert stock_over >= 8, stock_over
    assert rule_over >= 1, rule_over


def test_beside_a_memory_hog_cpu_is_given_up_only_for_more_memory():
    """Keeping pods off a memory hog loads the other nodes: on hog-101..130 no stream ends
    more than 2 points hotter on CPU than stock
    (``test_beside_a_memory_hog_least_used_keeps_the_hog_cool``), but on streams drawn later
    some do (601-640: 7 of 40; 701-720: 3 of 20, +2.5 to +6.4). In each of those 10,
    least-used's hottest memory stays above its hottest CPU and comes down from stock's by
    more than the CPU goes up (hog-707: CPU 48.5 -> 54.9 %, memory 103.8 -> 86.9): the hotter
    resource is the one kept cool. Not so on every class: on the generator's gen-620 CPU
    went up 3.6 points for 1.9 of memory, and on het-603 memory 5.0 for 10.7 of CPU with
    memory then the hotter (``python tests/extender/steady_sim.py 601 641 --source
    metrics-server --classes heterogeneous generated``)."""
    traded = 0
    for seed in LATER:
        stock, mine = _pair(sim.hogged, seed)
        if mine.hottest_cpu > stock.hottest_cpu + 2.0:
            traded += 1
            gained = stock.hottest_memory - mine.hottest_memory
            assert mine.hottest_memory > mine.hottest_cpu, (seed, mine)
            assert gained > mine.hottest_cpu - stock.hottest_cpu, (seed, stock, mine)
    assert traded, "no stream of LATER trades CPU for memory: the test checks nothing"


def test_pods_whose_containers_start_late_are_held_by_no_reading_before_they_start(monkeypatch):
    """A pod's use begins when its containers start, 5-40 s after its binding where an
    image is pulled (``run``'s ``start_lag``). On the generator's clusters gen-701..740,
    measured when written: least-used reading the start (``cluster.started_at``) was never
    more than 2 points above stock on the hotter of CPU and memory and never took a node's
    memory over its capacity; counting each pod from its binding instead, a reading taken
    while its image pulled held it, its node looked that much cooler and took more:
    5 of the 40 more than 2 points above stock (gen-707 +6.1), 2 over capacity (gen-718
    24 s). With a real kubelet's 1-3 s and no image to pull, reading the start was 0.1-1.0
    points cooler on average per class (``run(..., start_lag=(1, 3))``: heterogeneous,
    generated and hogged streams 601-616, steady-mix and steady-hog run seeds 31-38).

    Reading the start does not keep every node's memory within capacity: a workload's first
    pods are counted by the request rule until one is measured, and where they use far more
    than that (gen-702's w3: 512 MiB requested, 2.9 GiB used) two can land on a small node
    while the image pulls. Once a raise of the hottest level of all counted once more
    (``least_used.OVERALL_WEIGHT``), gen-702 and gen-708 went over (86 and 98 s); on
    gen-741..780, drawn to see whether that was the term, 3 streams went over without it
    (744, 745, 779) and 2 with it (744, 779), and the hotter resource's mean against stock
    was -12.7 and -13.7 points. So the bound here is the comparison the test is about:
    reading the start keeps fewer streams hotter or over than counting from the binding."""
    from loadwise.extender import cluster

    def hotter(r: sim.Result) -> float:
        return max(r.hottest_cpu, r.hottest_memory)

    kw = {"duration": sim.GENERATED_SECONDS, "source": sim.METRICS_SERVER, "start_lag": (5.0, 40.0)}
    later = range(701, 741)
    worse = {"start": 0, "binding": 0}
    over = {"start": 0, "binding": 0}
    for seed in later:
        stream = sim.generated(seed)
        stock = sim.run(sim.request_placer(seed, stream), seed, **kw)
        mine = sim.run(sim.new_extender(seed, stream), seed, **kw)
        worse["start"] += hotter(mine) > hotter(stock) + 2.0
        over["start"] += mine.memory_over > 0
        with monkeypatch.context() as m:
            m.setattr(cluster, "started_at", lambda pod: None)
            bound = sim.run(sim.new_extender(seed, stream), seed, **kw)
        worse["binding"] += hotter(bound) > hotter(stock) + 2.0
        over["binding"] += bound.memory_over > 0
    assert worse["start"] == 0 and over["start"] <= 2, (worse, over)
    # the lag matters here, and reading the start is what answers it
    assert worse["binding"] + over["binding"] >= 3, (worse, over)
    assert worse["start"] + over["start"] < worse["binding"] + over["binding"], (worse, over)


# -- the placement benchmark's one-shot scenarios, in-process -------------------------


def test_the_one_shot_scenarios_place_under_stock_as_the_lab_s_kube_scheduler_placed_them():
    """The simulator's stock against the real kube-scheduler's runs in docs/placement.md
    (5 of each, every one the same): strong-weak's hottest node at 83.6 % (6 pods on each
    2-core node), hog's at 99.4 % (10 pods on each node). What a change to the extender does
    to these scenarios can then be seen here in seconds, beside the lab's minutes."""
    for stream, hottest, each in ((sim.STRONG_WEAK, 83.6, 6), (sim.HOG, 99.4, 10)):
        for seed in (1, 2):
            pods = sim.one_shot(sim.request_placer(seed, stream), seed)
            assert round(sim.hottest_of(stream, pods), 1) == hottest, (stream.name, pods)
            assert pods[stream.nodes[-1].name] == each, (stream.name, pods)


def test_with_estimates_that_match_use_strong_weak_reaches_its_best_placement():
    """strong-weak with requests whose request rule gives the pods' own use (236m x 0.85,
    572 MiB x 0.70, no limits): the extender's figures are right from the first pod, and it
    reaches the exact optimum (docs/placement.md: 28 pods on the 8-core node, 5 on each
    2-core node, 76.25 %) in every run. Before ``cluster.latest`` read a container's
    startedAt (written to the second) as its start, a pod started in the second of a
    reading's sample counted as held by it: the last pod went to a 2-core node seen 10
    points of memory short of what it held, and ran it at 83.6 %, in 3 of these 5 runs."""
    (w,) = sim.STRONG_WEAK.workloads
    exact = sim.replace(
        sim.STRONG_WEAK, workloads=(sim.replace(w, request=(236, 572 * sim.MI), limits=None),)
    )
    for seed in range(1, 6):
        pods = sim.one_shot(sim.new_extender(seed, exact), seed)
        assert round(sim.hottest_of(exact, pods), 1) == 76.2, (seed, pods)


def test_the_one_shot_scenarios_are_no_hotter_under_least_used_than_under_stock():
    for stream in (sim.STRONG_WEAK, sim.HOG):
        for seed in (1, 2):
            stock = sim.one_shot(sim.request_placer(seed, stream), seed)
            mine = sim.one_shot(sim.new_extender(seed, stream), seed)
            assert sim.hottest_of(stream, mine) <= sim.hottest_of(stream, stock), (
                stream.name,
                mine,
            )
