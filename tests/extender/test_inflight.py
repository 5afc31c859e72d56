"""Learned estimates, delta accounting, departures at measured use and spreading:
each piece alone, then through the real Extender and ClusterWatch."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import msgspec
import pytest

from loadwise.extender import kubeobjects
from loadwise.extender.cluster import ClusterWatch, latest, scheduled_at, started_at
from loadwise.extender.config import load_settings
from loadwise.extender.estimate import pod_facts
from loadwise.extender.inflight import (
    DELTA,
    IMPLIED,
    LEARNED,
    NOT_STARTED,
    REQUEST_MODE,
    REQUEST_RULE,
    InFlight,
    Tracked,
    delta_load,
    departed_share,
    held_share,
    held_shares,
    implied,
    unheld_load,
)
from loadwise.extender.ledger import Ledger
from loadwise.extender.model import (
    LoadSnapshot,
    NodeInfo,
    NodeLoad,
    NodeState,
    PodLoad,
    ResourceLoad,
    Usage,
)
from loadwise.extender.podusage import PodUsage, PodUsageReading
from loadwise.extender.policies import LeastUsed
from loadwise.extender.policies.spread import spread_factor, spread_score
from loadwise.extender.wire import Pod
from loadwise.extender.workloads import LearnedUsage, Learner, owner_key, percentile, workload_key

MI = 1024**2


def _pod(name="p", owner="rs-1", hash_="h1", cpu="100m", memory="128Mi", node="", limits=None):
    obj = kubeobjects.pod(
        name,
        namespace="ns",
        uid=f"uid-{name}",
        containers=[
            kubeobjects.container("c", requests={"cpu": cpu, "memory": memory}, limits=limits)
        ],
    )
    if owner:
        obj["metadata"]["ownerReferences"] = [
            {"kind": "ReplicaSet", "name": "web", "uid": owner, "controller": True},
            {"kind": "Other", "name": "x", "uid": "not-the-controller"},
        ]
    if hash_:
        obj["metadata"]["labels"] = {"pod-template-hash": hash_}
    if node:
        obj["spec"]["nodeName"] = node
    return msgspec.convert(obj, type=Pod)


def _snap(end, settle=60.0):
    return LoadSnapshot(
        "t",
        end,
        end,
        {"n1": NodeLoad(ResourceLoad(10.0), ResourceLoad(10.0))},
        settle_seconds=settle,
    )


# -- workloads ----------------------------------------------------------------------


def test_workload_key_is_the_controller_and_its_revision():
    assert workload_key(_pod()) == "ns/rs-1@h1"
    assert owner_key(_pod()) == "ns/rs-1"
    assert workload_key(_pod(hash_="")) == "ns/rs-1"  # a Job: the controller alone
    # no controller: its namespace and template, the same for pods of one template
    bare = workload_key(_pod("a", owner=""))
    assert bare.startswith("ns/~") and bare == workload_key(_pod("b", owner="", hash_=""))
    assert bare != workload_key(_pod("c", owner="", memory="256Mi"))


def test_percentile_is_nearest_rank():
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90) == 9.0
    assert percentile([3.0], 90) == 3.0
    assert percentile([1.0, 2.0], 100) == 2.0


def test_learner_p90_over_the_window_then_forgets():
    learner = Learner(LearnedUsage(percentile=90, window_seconds=100, max_workloads=2))
    for i in range(10):
        learner.observe("w", Usage(100.0 * (i + 1), 10.0), at=1000.0 + i)
    assert learner.estimate("w", 1010.0) == Usage(900.0, 10.0)
    assert learner.estimate("w", 1105.0) == Usage(1000.0, 10.0)  # the older ones aged out
    assert learner.estimate("w", 1200.0) is None and len(learner) == 0
    for name in ("a", "b", "c"):
        learner.observe(name, Usage(1.0, 1.0), at=0.0)
    assert len(learner) == 2 and learner.estimate("a", 0.0) is None  # bounded, oldest out
    with pytest.raises(ValueError):
        Learner(LearnedUsage(percentile=0))


# -- delta and departures -------------------------------------------------------------


def test_delta_counts_what_the_reading_has_not_seen_of_the_measured_use():
    base = PodLoad(Usage(85.0, 90.0 * MI), Usage(85.0, 90.0 * MI), 150.0)
    measured = PodUsage(400.0, 768.0 * MI, at=1000.0)
    # placed after the window's end: all of its measured use, not the 85m estimate
    load, applied = delta_load(base, measured, 1010.0, _snap(1000.0))
    assert applied and load.usage == Usage(400.0, 768.0 * MI) and load.tlp_cpu_millis == 150.0
    # placed 15 s before the end of a 60 s mean: a quarter of it is in the reading
    load, _ = delta_load(base, measured, 985.0, _snap(1000.0))
    assert load.usage.cpu_millis == pytest.approx(300.0)
    # never measured: the estimate
    assert delta_load(base, None, 985.0, _snap(1000.0)) == (base, False)


def test_departed_share_is_the_part_of_the_window_it_ran_in():
    snap = _snap(1000.0)
    assert departed_share(1010.0, snap) == 1.0
    assert departed_share(970.0, snap) == pytest.approx(0.5)
    assert departed_share(930.0, snap) == 0.0


def test_ledger_recount_moves_the_totals_and_keeps_time_and_node():
    ledger = Ledger()
    ledger.bind("k", "n1", PodLoad(Usage(85, 1), Usage(85, 1), 0), at=100.0)
    assert ledger.recount("k", PodLoad(Usage(400, 2), Usage(400, 2), 0))
    totals = ledger.recent(50.0)["n1"]
    assert totals.cpu_millis == 400 and totals.pods == 1
    assert ledger.placement("k").at == 100.0 and ledger.placement("k").confirmed
    assert not ledger.recount("missing", PodLoad(Usage(), Usage(), 0))
    ledger.depart("k", "n1", PodLoad(Usage(400, 2), Usage(400, 2), 0), at=200.0)
    [(key, gone)] = ledger.departed_after(150.0)
    assert ledger.recount(key, PodLoad(Usage(100, 1), Usage(100, 1), 0))
    assert ledger.recent(150.0)["n1"].cpu_millis == -100


def test_sync_recounts_measured_pods_and_departures_once_per_change():
    ledger = Ledger()
    flight = InFlight()
    base = PodLoad(Usage(85.0, 1.0), Usage(85.0, 1.0), 0.0)
    for name, at in (("a", 1010.0), ("b", 1010.0)):
        ledger.bind(name, "n1", base, at)
        flight.track(name, Tracked(f"ns/{name}", "n1", "w", "o", base, REQUEST_RULE, True, at))
    flight.take(PodUsageReading({"ns/a": PodUsage(400.0, 2.0, 1015.0)}, {}, 1015.0))
    snap = _snap(1000.0)
    flight.sync(ledger, snap)
    assert ledger.placement("a").load.usage.cpu_millis == 400.0
    assert ledger.placement("b").load == base  # not measured: its estimate
    assert flight.how("a") == DELTA and flight.how("b") == REQUEST_RULE
    # the departure of a measured pod: its measured use, scaled by what the reading holds
    gone = flight.departure("a", base)
    assert gone.usage.cpu_millis == 400.0 and flight.get("a") is None
    ledger.forget("a")
    ledger.bind("old", "n1", base, 900.0)
    ledger.depart("old", "n1", gone, at=970.0)
    flight.sync(ledger, _snap(1000.0))
    [(key, entry)] = ledger.departed_after(940.0)
    assert entry.load.usage.cpu_millis == pytest.approx(200.0)  # half the window ran it


def test_a_departure_never_measured_leaves_at_its_estimate():
    flight = InFlight()
    base = PodLoad(Usage(340.0, 1.0), Usage(340.0, 1.0), 0.0)
    flight.track("k", Tracked("ns/k", "n1", None, None, base, REQUEST_RULE, True, 0.0))
    assert flight.departure("k", PodLoad(Usage(1.0, 1.0), Usage(1.0, 1.0), 0.0)) == base


def test_estimate_is_learned_from_measured_siblings_else_the_request_rule():
    flight = InFlight()
    facts = pod_facts(_pod(cpu="100m", memory="128Mi"))
    got, how = flight.estimate(facts, "ns/rs-1@h1", 100.0)
    assert how == REQUEST_RULE and got.usage.cpu_millis == 85  # Koordinator's 85 %
    base = facts.placed()
    for i in range(10):
        flight.track(
            f"s{i}",
            Tracked(f"ns/s{i}", "n1", "ns/rs-1@h1", "ns/rs-1", base, REQUEST_RULE, True, 0.0),
        )
    flight.take(
        PodUsageReading(
            {f"ns/s{i}": PodUsage(300.0 + 10 * i, 700.0 * MI, 90.0) for i in range(10)}, {}, 90.0
        )
    )
    got, how = flight.estimate(facts, "ns/rs-1@h1", 100.0)
    assert how == LEARNED and got.usage == Usage(380.0, 700.0 * MI)
    assert got.placed().usage == got.usage and got.tlp_cpu_millis == facts.tlp_cpu_millis
    assert flight.taken == {LEARNED: 1, IMPLIED: 0, REQUEST_RULE: 1}


def test_assumptions_expire_and_a_bound_pod_is_not_replaced_by_one():
    flight = InFlight()
    base = PodLoad(Usage(), Usage(), 0.0)
    flight.track("k", Tracked("ns/k", "n1", None, "o", base, REQUEST_RULE, True, 0.0))
    flight.track("k", Tracked("ns/k", "n2", None, "o", base, REQUEST_RULE, False, 1.0))
    assert flight.spread("o") == {"n1": 1}
    flight.track("a", Tracked("ns/a", "n2", None, "o", base, REQUEST_RULE, False, 1.0))
    flight.expire(5.0)
    assert flight.spread("o") == {"n1": 1} and flight.get("a") is None


# -- through the watch ----------------------------------------------------------------


class _Sink:
    def __init__(self):
        self.calls = []

    def bind(self, key, node, load, at):
        self.calls.append(("bind", key, node, load))

    def forget(self, key):
        self.calls.append(("forget", key))

    def depart(self, key, node, load, at):
        self.calls.append(("depart", key, node, load))

    def started(self, key, at):
        self.calls.append(("started", key, at))


def test_the_watch_binds_at_the_learned_use_and_departs_at_the_measured_use():
    flight = InFlight()
    sink = _Sink()
    watch = _watching(sink, flight, now=100.0)
    watch._pod_event("ADDED", _pod("a", node="n1"))
    assert sink.calls[-1][3].usage.cpu_millis == 85  # nothing learned yet: the request rule
    flight.take(PodUsageReading({"ns/a": PodUsage(400.0, 768.0 * MI, 95.0)}, {}, 95.0))
    watch._pod_event("ADDED", _pod("b", node="n2"))
    assert sink.calls[-1][3].usage == Usage(400.0, 768.0 * MI)  # learned from a
    assert flight.spread("ns/rs-1") == {"n1": 1, "n2": 1}
    watch._pod_event("DELETED", _pod("a", node="n1"))
    kind, key, node, load = sink.calls[-1]
    assert (kind, node, load.usage.cpu_millis) == ("depart", "n1", 400.0)
    assert flight.spread("ns/rs-1") == {"n2": 1}


@pytest.mark.parametrize("own_cpu", [False, True])
def test_the_watch_binds_a_pod_at_its_workload_s_implied_figure_as_a_placed_pod_counts(own_cpu):
    """A pod the watch reports bound counts what a pod being placed counts
    (``InFlight.estimate``): a figure implied without its CPU replaces memory only, so the
    filter keeps the request (100m) and the scores the request rule's 425m; a figure with
    its CPU counts whole. Taken whole, every bound pod of strong-weak's stream counted
    425m in the filter, and the 8-core node was refused while its reading said it had room."""
    learner = Learner(LearnedUsage(window_seconds=600))
    flight = InFlight(learner)
    sink = _Sink()
    watch = _watching(sink, flight, now=100.0)
    figure = Usage(200.0 if own_cpu else 425.0, 400.0 * MI)
    assert learner.imply("ns/rs-1@h1", figure, at=99.0, cpu=own_cpu)
    limits = {"cpu": "500m", "memory": "512Mi"}
    watch._pod_event("ADDED", _pod("a", node="n1", limits=limits))
    load = sink.calls[-1][3]
    assert load.usage == figure
    assert load.request == (figure if own_cpu else Usage(100.0, 400.0 * MI))
    tracked = flight.get(sink.calls[-1][1])
    assert tracked is not None and tracked.how == IMPLIED and tracked.base == load


# -- spreading ------------------------------------------------------------------------


def test_spread_factor_and_score():
    assert spread_factor(0, 10, 1.0) == 1.0
    assert spread_factor(5, 10, 1.0) == 0.5
    assert spread_factor(5, 10, 0.0) == 1.0
    assert spread_factor(20, 10, 1.0) == 0.0
    assert spread_score(80, 1, 4, 1.0) == 60
    assert spread_score(80, 0, 4, 1.0) == 80


def _state(name, cpu_pct, here, total, cpu=4000):
    info = NodeInfo(name, cpu, 8 * 1024 * MI, cpu, 8 * 1024 * MI, 110)
    load = NodeLoad(ResourceLoad(cpu_pct), ResourceLoad(20.0))
    return NodeState(name, info, load, same_owner=here, owner_pods=total)


def test_least_used_prefers_the_node_without_the_workload_at_equal_load():
    policy = LeastUsed(spread_weight=1.0)
    facts = pod_facts(_pod())
    crowded, empty = _state("a", 30.0, 3, 4), _state("b", 30.0, 0, 4)
    assert policy.score(facts, empty).score > policy.score(facts, crowded).score
    assert "3 of its workload's 4 pods here" in policy.score(facts, crowded).why
    # a much emptier node still wins with a larger share: a bigger node may take more
    big = _state("c", 5.0, 2, 4, cpu=16000)
    assert policy.score(facts, big).score > policy.score(facts, _state("d", 60.0, 1, 4)).score
    # weight 0: the plain least-used score
    assert LeastUsed().score(facts, crowded).score == LeastUsed().score(facts, empty).score


def test_held_share_is_the_part_of_the_window_between_placement_and_departure():
    snap = _snap(1000.0)  # the window is 940..1000
    assert held_share(-float("inf"), 970.0, snap) == pytest.approx(departed_share(970.0, snap))
    # placed within the window, gone after it: the part after its placement (delta's seen)
    assert held_share(985.0, 1010.0, snap) == pytest.approx(0.25)
    # placed and gone within it
    assert held_share(950.0, 980.0, snap) == pytest.approx(0.5)
    # placed after the window's end: the reading holds none of it
    assert held_share(1005.0, 1010.0, snap) == 0.0
    # a reading of latest values (no window): held when it ran at the reading's instant
    latest = _snap(1000.0, settle=0.0)
    assert held_share(990.0, 1010.0, latest) == 1.0
    assert held_share(1001.0, 1010.0, latest) == 0.0


def test_a_reading_of_latest_values_holds_a_pod_by_its_rate_window():
    """load-watcher over metrics-server (settle 45 s): the reading is a scrape within the
    15 s before its end, its CPU the rate over the 15 s before that scrape."""
    snap = _snap(1000.0, settle=45.0)
    assert held_share(1000.0, float("inf"), snap) == 0.0
    assert held_share(985.0, float("inf"), snap) == pytest.approx(0.5)  # the old rule: 1/3
    assert held_share(970.0, float("inf"), snap) == pytest.approx(1.0)  # the old rule: 2/3
    assert held_share(992.5, float("inf"), snap) == pytest.approx(0.125)  # (7.5/15)^2 / 2
    # a pod there all along and gone at 990: whole in scrapes up to 990, then less
    assert held_share(-float("inf"), 990.0, snap) == pytest.approx((5 + 200 / 30) / 15)
    assert held_share(-float("inf"), 1000.0, snap) == 1.0  # every scrape saw it
    assert held_share(-float("inf"), 985.0, snap) == pytest.approx(0.5)
    # placed and gone between scrapes' rate windows: a part, never more than it ran
    assert 0.0 < held_share(985.0, 990.0, snap) <= 5 / 15
    # measured pods leave the same share out: placed 15 s before the end, half counts
    base = PodLoad(Usage(85.0, 1.0), Usage(85.0, 1.0), 0.0)
    load, _ = delta_load(base, PodUsage(400.0, 2.0, 990.0), 985.0, snap)
    assert load.usage.cpu_millis == pytest.approx(200.0)


def test_a_node_stamped_with_its_own_time_holds_memory_at_that_instant_and_cpu_before_it():
    """metrics-server: the node's sample at 990 (its NodeMetrics timestamp), the list read
    at 1000. Memory is the working set at 990, CPU the rate over 975..990."""
    snap = msgspec.structs.replace(_snap(1000.0, settle=30.0), measured_at={"n1": 990.0})
    assert held_shares(985.0, math.inf, snap, node="n1") == (pytest.approx(5 / 15), 1.0)
    assert held_shares(992.0, math.inf, snap, node="n1") == (0.0, 0.0)  # after the sample
    assert held_shares(960.0, math.inf, snap, node="n1") == (1.0, 1.0)
    # gone 5 s before the sample: none of its memory is in it, two thirds of its CPU are
    assert held_shares(-math.inf, 985.0, snap, node="n1") == (pytest.approx(10 / 15), 0.0)
    assert held_shares(-math.inf, 995.0, snap, node="n1") == (1.0, 1.0)
    # another node, or none named: the reading's own rule, one share for both
    share = held_share(985.0, math.inf, snap)
    assert held_shares(985.0, math.inf, snap, node="n2") == (share, share)
    assert held_shares(985.0, math.inf, snap) == (share, share)
    # through the delta: a measured pod placed 5 s before the sample counts two thirds of
    # its CPU and none of its memory beside it
    base = PodLoad(Usage(85.0, 1.0), Usage(85.0, 1.0), 0.0)
    load, _ = delta_load(base, PodUsage(300.0, 2.0 * MI, 995.0), 985.0, snap, node="n1")
    assert load.usage == Usage(pytest.approx(200.0), 0.0)


def test_a_pod_not_measured_yet_counts_what_the_reading_does_not_hold_of_its_estimate():
    snap = _snap(1000.0, settle=45.0)
    base = PodLoad(Usage(400.0, 800.0), Usage(100.0, 800.0), 600.0)
    half = unheld_load(base, 985.0, snap)
    assert half.usage == Usage(200.0, 400.0) and half.request == Usage(50.0, 400.0)
    assert half.tlp_cpu_millis == 600.0  # TargetLoadPacking's own prediction, kept
    assert unheld_load(base, 1001.0, snap) is base
    assert unheld_load(base, 960.0, snap).usage == Usage(0.0, 0.0)
    # through sync: placed 30 s before the reading's end and never measured, the reading
    # holds all of it, so it no longer counts twice; one placed after the end counts whole
    ledger, flight = Ledger(), InFlight()
    for key, at in (("a", 970.0), ("b", 1002.0)):
        ledger.bind(key, "n1", base, at)
        flight.track(key, Tracked(f"ns/{key}", "n1", "w", "o", base, LEARNED, True, at))
    flight.sync(ledger, snap)
    assert ledger.recent(955.0)["n1"].cpu_millis == pytest.approx(400.0)
    assert ledger.recent(955.0)["n1"].pods == 2


def test_a_pod_placed_within_the_window_leaves_with_the_part_the_reading_holds():
    """The reading (window 940..1000) saw the pod for the 45 s after its placement at 955:
    when it leaves, 3/4 of its measured use comes off the node, not nothing."""
    for partial, expected in ((True, -300.0), (False, 0.0)):
        ledger = Ledger()
        ledger.partial_departures = partial
        flight = InFlight()
        base = PodLoad(Usage(85.0, 1.0), Usage(85.0, 1.0), 0.0)
        ledger.bind("a", "n1", base, 955.0)
        flight.track("a", Tracked("ns/a", "n1", "w", "o", base, REQUEST_RULE, True, 955.0))
        flight.take(PodUsageReading({"ns/a": PodUsage(400.0, 2.0, 970.0)}, {}, 970.0))
        snap = _snap(1000.0)
        flight.sync(ledger, snap)
        # counted beside the reading: the quarter of its use the window did not see
        assert ledger.recent(940.0)["n1"].cpu_millis == pytest.approx(100.0)
        gone = flight.departure("a", base)
        ledger.depart("a", "n1", gone, at=1010.0)
        flight.sync(ledger, snap)
        totals = ledger.recent(940.0).get("n1")
        assert (totals.cpu_millis if totals else 0.0) == pytest.approx(expected), partial


def test_request_mode_drops_pod_readings_and_counts_every_pod_at_the_request_rule():
    flight = InFlight(mode=REQUEST_MODE)
    assert not flight.delta and not flight.learn
    base = PodLoad(Usage(85.0, 1.0), Usage(85.0, 1.0), 0.0)
    flight.track("a", Tracked("ns/a", "n1", "w", "o", base, REQUEST_RULE, True, 10.0))
    assert flight.take(PodUsageReading({"ns/a": PodUsage(400.0, 2.0, 20.0)}, {}, 20.0)) == 0
    assert flight.learned_how("w", 20.0) == (None, REQUEST_RULE)
    facts = pod_facts(_pod())
    assert flight.estimate(facts, "w", 20.0) == (facts, REQUEST_RULE)
    assert flight.how("a") == REQUEST_RULE
    assert flight.departure("a", base) == base  # its estimate, not the 400m it used
    with pytest.raises(ValueError, match="mode must be"):
        InFlight(mode="guess")


def test_a_node_newer_than_the_window_holds_its_pods_over_its_own_lifetime():
    """A 15-minute mean (900..1800) of a node created at 1620 covers its 180 s alone: a pod
    placed at 1680 is 120/180 of it, not 120/900; one placed before the node could not run
    there, so it counts from the node's start. Unknown creation: the whole window."""
    snap = _snap(1800.0, settle=900.0)
    assert held_share(1680.0, math.inf, snap) == pytest.approx(120 / 900)
    assert held_share(1680.0, math.inf, snap, since=1620.0) == pytest.approx(120 / 180)
    assert held_share(-math.inf, 1710.0, snap, since=1620.0) == pytest.approx(90 / 180)
    # a node older than the window: the window, as without
    assert held_share(1680.0, math.inf, snap, since=100.0) == pytest.approx(120 / 900)
    # created after the reading's end (a clock apart): nothing of the window is its
    assert held_share(1790.0, math.inf, snap, since=1805.0) == 1.0


def test_sync_reads_each_node_s_creation_for_the_pods_there():
    snap = _snap(1800.0, settle=900.0)
    ledger = Ledger(horizon=3600.0)
    flight = InFlight()
    base = PodLoad(Usage(850.0, 1.0), Usage(850.0, 1.0), 0.0)
    for name, node in (("a", "old"), ("b", "new")):
        ledger.bind(name, node, base, 1680.0)
        flight.track(name, Tracked(f"ns/{name}", node, "w", "o", base, REQUEST_RULE, True, 1680.0))
    created = {"new": 1620.0}
    flight.sync(ledger, snap, created.get)
    # not measured: the estimate less the share the mean holds, 120/900 and 120/180 of it
    assert ledger.placement("a").load.usage.cpu_millis == pytest.approx(850 * (1 - 120 / 900))
    assert ledger.placement("b").load.usage.cpu_millis == pytest.approx(850 * (1 - 120 / 180))


def test_a_node_s_creation_is_read_from_its_object_and_bad_text_is_none():
    from loadwise.extender.model import NodeInfo
    from loadwise.extender.wire import Node, timestamp

    node = msgspec.convert(kubeobjects.node("n", cpu="4", memory="8Gi"), type=Node)
    dated = msgspec.structs.replace(
        node,
        metadata=msgspec.structs.replace(node.metadata, creationTimestamp="2026-11-29T18:00:00Z"),
    )
    assert NodeInfo.from_node(dated).created_at == 1795975200.0
    assert NodeInfo.from_node(node).created_at is None
    assert timestamp("yesterday") is None and timestamp(None) is None


# -- a pod's use begins when its containers start -------------------------------------


def _iso(t):
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _bound(name, phase, *starts, scheduled=980.0, waiting=0):
    """``name`` bound to n1 at ``scheduled``, in ``phase``, its running containers started
    at ``starts`` and ``waiting`` more not running."""
    pod = msgspec.to_builtins(_pod(name, node="n1"))
    statuses = [
        {"name": f"c{i}", "state": {"running": {"startedAt": _iso(t)}}}
        for i, t in enumerate(starts)
    ]
    statuses += [{"name": f"w{i}", "state": {}} for i in range(waiting)]
    pod["status"] = {
        "phase": phase,
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": _iso(scheduled)}
        ],
        "containerStatuses": statuses,
    }
    return msgspec.convert(pod, type=Pod)


def _watching(placements, flight, now=1000.0):
    """A watch fed by hand, reporting to ``placements`` and ``flight``, its clock at ``now``."""
    settings = load_settings(None, {"source.kind": "file", "source.file": "/dev/null"})
    return ClusterWatch(
        None,  # type: ignore[arg-type]
        estimator=settings.estimator_args(),
        tlp=settings.tlp_args(),
        placements=placements,
        inflight=flight,
        clock=lambda: now,
    )


def test_started_at_reads_the_pod_s_phase_and_its_containers_start():
    assert started_at(_pod("a", node="n1")) is None  # no status: nothing said
    assert started_at(_bound("a", "Pending")) == math.inf
    assert started_at(_bound("a", "Running")) is None  # running, but no container says since when
    # the latest start, at the latest instant its whole second stands for (cluster.latest)
    assert started_at(_bound("a", "Running", 1000.0, 1003.0)) == 1004.0
    assert started_at(_bound("a", "Running", 1000.0, waiting=1)) == 1001.0
    assert started_at(_bound("a", "Succeeded", 1000.0)) is None
    bad = msgspec.to_builtins(_bound("a", "Running", 1000.0))
    bad["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] = "yesterday"
    assert started_at(msgspec.convert(bad, type=Pod)) is None


def test_a_status_time_to_the_second_stands_for_the_latest_instant_in_it():
    """The API server writes startedAt and PodScheduled to the second: a container that
    started at 990.4 reads 990. A reading sampled at 990 (its timestamp to the second, taken
    at its earliest) may not hold it, so it counts whole until a later sample; one that
    reads 989 started by 990 and is held."""
    assert latest(990.0) == 991.0 and latest(990.25) == 990.25  # a time with a fraction: as is
    assert latest(None) is None and latest(math.inf) == math.inf
    pod = msgspec.to_builtins(_bound("a", "Running", 990.0))
    pod["status"]["conditions"][0]["lastTransitionTime"] = "1970-01-01T00:16:20Z"  # 980
    assert scheduled_at(msgspec.convert(pod, type=Pod)) == 981.0
    # the watch saw the binding at 990.4: it happened by then, whatever its second's end
    ledger = Ledger()
    _watching(ledger, InFlight(), now=990.4)._pod_event(
        "ADDED", _bound("a", "Pending", scheduled=990.0)
    )
    assert ledger.placement("uid-a").at == 990.4
    snap = msgspec.structs.replace(_snap(1000.0, settle=30.0), measured_at={"n1": 990.0})
    for started, held in ((990.0, False), (989.0, True)):
        ledger, flight = Ledger(), InFlight()
        watch = _watching(ledger, flight)
        watch._pod_event("ADDED", _bound("a", "Running", started))
        whole = ledger.placement("uid-a").load.usage
        flight.sync(ledger, snap)
        left = ledger.placement("uid-a").load.usage
        assert (left.memory_bytes < whole.memory_bytes) is held, (started, left, whole)


def test_a_reading_holds_a_pod_from_its_containers_start_not_its_binding():
    """metrics-server: n1 sampled at 990. Pod a was bound at 980 and its image is still
    pulling: the sample holds none of it, so it counts whole; b, bound at 980 too, started
    at 981 and is in the sample. When a starts at 995 it still counts whole beside the
    990 sample, and the next sample (1005) holds it."""
    ledger, flight = Ledger(), InFlight()
    watch = _watching(ledger, flight)
    watch._pod_event("ADDED", _bound("a", "Pending"))
    watch._pod_event("ADDED", _bound("b", "Running", 981.0))
    whole = ledger.placement("uid-a").load.usage
    assert whole.memory_bytes > 0 and flight.pending("uid-a") and not flight.pending("uid-b")
    snap = msgspec.structs.replace(_snap(1000.0, settle=30.0), measured_at={"n1": 990.0})
    flight.sync(ledger, snap)
    assert ledger.placement("uid-a").load.usage == whole
    assert ledger.placement("uid-b").load.usage.memory_bytes == 0.0
    # the Event's "in flight there" names a as not started (b, measured in no pod reading
    # here, as the request rule)
    assert flight.how("uid-a") == NOT_STARTED
    counts = flight.in_flight(ledger, "n1", 970.0)
    assert counts[NOT_STARTED] == 1 and counts[REQUEST_RULE] == 1, counts
    watch._pod_event("MODIFIED", _bound("a", "Running", 995.0))
    assert flight.how("uid-a") != NOT_STARTED
    # started in the second 995 (the status's whole second): by 996 at the latest
    assert ledger.placement("uid-a").at == 996.0 and not flight.pending("uid-a")
    flight.sync(ledger, snap)
    assert ledger.placement("uid-a").load.usage == whole
    later = msgspec.structs.replace(_snap(1010.0, settle=30.0), measured_at={"n1": 1005.0})
    flight.sync(ledger, later)
    assert ledger.placement("uid-a").load.usage.memory_bytes == 0.0
    # a start after the watch's clock (1000: a node's clock ahead) is taken as now, not as
    # a start to come that would keep the pod whole and in the ledger until then
    watch._pod_event("ADDED", _bound("c", "Running", 90_000.0))
    assert ledger.placement("uid-c").at == 1000.0
    # b counts from its start; a container restarted before it never moves it back
    assert ledger.placement("uid-b").at == 982.0  # started in the second 981
    watch._pod_event("MODIFIED", _bound("b", "Running", 970.0))
    assert ledger.placement("uid-b").at == 982.0  # started in the second 981


def test_a_pod_deleted_before_it_started_takes_nothing_off_its_node():
    ledger, flight = Ledger(), InFlight()
    watch = _watching(ledger, flight)
    for name, phase, starts in (("a", "Pending", ()), ("b", "Running", (981.0,))):
        watch._pod_event("ADDED", _bound(name, phase, *starts))
        watch._pod_event("DELETED", _bound(name, phase, *starts))
    departures = ledger.departed_after(985.0)
    # b ran and a reading may hold it: it comes off; a never ran: no departure at all
    assert [p.placed for _, p in departures] == [982.0]  # started in the second 981
    assert ledger.placement("uid-a") is None and flight.get("uid-a") is None
    assert not flight.pending("uid-a")


def test_a_pod_still_pending_when_the_window_passes_its_binding_stays_counted_whole():
    """Bound at 900 and still pulling its image when a reading's window starts at 970: no
    reading holds it, so it keeps counting whole (the ledger's placement moved just past
    the window's start), and once it starts at 1003 it counts from then."""
    ledger, flight = Ledger(), InFlight()
    watch = _watching(ledger, flight, now=1010.0)  # the watch sees the start after it
    watch._pod_event("ADDED", _bound("a", "Pending", scheduled=900.0))
    whole = ledger.placement("uid-a").load.usage
    snap = msgspec.structs.replace(_snap(1000.0, settle=30.0), measured_at={"n1": 995.0})
    flight.sync(ledger, snap)
    assert ledger.recent(970.0)["n1"].usage == whole
    assert 970.0 < ledger.placement("uid-a").at < 970.1
    watch._pod_event("MODIFIED", _bound("a", "Running", 1003.0, scheduled=900.0))
    assert ledger.placement("uid-a").at == 1004.0  # started in the second 1003
    flight.sync(ledger, snap)
    assert ledger.recent(970.0)["n1"].usage == whole  # started after the 995 sample
    # without the wait kept in the window, the ledger would have counted nothing of it
    ledger2, flight2 = Ledger(), InFlight()
    watch2 = _watching(ledger2, flight2)
    watch2._pod_event("ADDED", _bound("a", "Running", 901.0, scheduled=900.0))
    flight2.sync(ledger2, snap)
    assert "n1" not in ledger2.recent(970.0)


# -- implied by node readings ---------------------------------------------------------

GI = 1024**3


def _stamped(at, memory_gib, cpu_millis=None):
    """A metrics-server-like reading at ``at`` of 8-core / 16 GiB nodes: per node its
    memory in GiB (and CPU in millicores; 1000 when not given), each stamped at ``at``."""
    cpu_millis = cpu_millis or {}
    nodes = {
        n: NodeLoad(ResourceLoad(cpu_millis.get(n, 1000.0) / 80), ResourceLoad(g / 16 * 100))
        for n, g in memory_gib.items()
    }
    return LoadSnapshot(
        "metrics-server",
        at + 5,
        at + 5,
        nodes,
        settle_seconds=30.0,
        measured_at=dict.fromkeys(memory_gib, at),
    )


def _sizes(node):
    return (8000.0, 16.0 * GI)


def test_learner_keeps_an_implied_figure_only_until_the_workload_is_measured():
    learner = Learner(LearnedUsage(window_seconds=100))
    assert learner.imply("w", Usage(60.0, 140.0 * MI), at=1000.0)
    assert learner.estimate("w", 1010.0) == Usage(60.0, 140.0 * MI)
    assert not learner.measured("w", 1010.0)
    learner.observe("w", Usage(50.0, 100.0 * MI), at=1020.0)
    assert learner.measured("w", 1020.0)
    assert learner.estimate("w", 1020.0) == Usage(50.0, 100.0 * MI)  # its own figure, alone
    assert not learner.imply("w", Usage(1.0, 1.0), at=1030.0)  # refused once measured
    assert learner.estimate("w", 1030.0) == Usage(50.0, 100.0 * MI)
    assert learner.imply("v", Usage(1.0, 2.0), at=1000.0)
    learner.prune(1101.0)
    assert learner.estimate("v", 1101.0) is None  # aged out of the window like a sample


def test_a_figure_implied_without_its_cpu_keeps_the_cpu_implied_before_it():
    """A later reading implying memory alone (its newest pods in too little of a CPU
    window) keeps the CPU an earlier one implied, within the window; after the window the
    CPU is the request rule's guess again."""
    learner = Learner(LearnedUsage(window_seconds=100))
    assert learner.imply("w", Usage(200.0, 400.0 * MI), at=1000.0)
    assert learner.imply("w", Usage(425.0, 420.0 * MI), at=1015.0, cpu=False)
    assert learner.estimate("w", 1016.0) == Usage(200.0, 420.0 * MI)
    assert not learner.cpu_guessed("w")
    assert learner.imply("w", Usage(425.0, 430.0 * MI), at=1200.0, cpu=False)
    assert learner.estimate("w", 1201.0) == Usage(425.0, 430.0 * MI)
    assert learner.cpu_guessed("w")


def test_implied_is_each_newcomers_share_of_the_rise_less_the_pods_of_known_use():
    """Two readings 15 s apart. n1 took 2 pods of w (140 MiB, 60m each) and lost a pod of
    known use (100 MiB, 300m) it held before; n2 took 3 of w; n3 took 1 of w and its
    background grew by 4 GiB between the readings (a hog starting)."""
    mib = 1 / 1024
    before = _stamped(100.0, {"n1": 4.0, "n2": 4.0, "n3": 4.0})
    after = _stamped(
        115.0,
        {"n1": 4.0 + (2 * 140 - 100) * mib, "n2": 4.0 + 3 * 140 * mib, "n3": 8.0 + 140 * mib},
        {"n1": 1000.0 + 2 * 60 * 10 / 15 - 300 * 5 / 15, "n2": 1000.0 + 3 * 60 * 10 / 15},
    )
    w = (105.0, math.inf, 42.5, 45.0 * MI)  # placed at 105, counted at the request rule
    pods = {
        "n1": [("w", w), ("w", w), (None, (50.0, 110.0, 300.0, 100.0 * MI))],
        "n2": [("w", w)] * 3,
        "n3": [("w", w)],
    }
    cpu, memory = implied(before, after, pods, _sizes)["w"]
    assert memory == pytest.approx(140.0 * MI)  # n3's 4 GiB is the one figure left out
    assert cpu == pytest.approx(60.0)  # n3 made under one pod's CPU window: no CPU figure
    # a reading that does not move (or none stamped) says nothing
    assert implied(before, before, pods, _sizes) == {}
    unstamped = msgspec.structs.replace(after, measured_at={})
    assert implied(before, unstamped, pods, _sizes) == {}


def test_implied_needs_two_nodes_with_one_unknown_workload_each():
    mib = 1 / 1024
    before = _stamped(100.0, {"n1": 4.0, "n2": 4.0})
    after = _stamped(115.0, {"n1": 4.0 + 280 * mib, "n2": 4.0 + 280 * mib})
    w = (105.0, math.inf, 42.5, 45.0 * MI)
    both = {"n1": [("w", w), ("w", w)], "n2": [("w", w), ("v", w)]}
    assert implied(before, after, both, _sizes) == {}  # n2 cannot tell w from v: n1 alone
    one = {"n1": [("w", w), ("w", w)], "n2": [("w", w), ("w", w)]}
    assert implied(before, after, one, _sizes)["w"][1] == pytest.approx(140.0 * MI)
    # nodes of unknown size say nothing either
    assert implied(before, after, one, lambda node: None) == {}


def test_a_reading_implies_the_unmeasured_workload_and_its_pods_in_flight_count_at_it():
    """Through InFlight.sync: pods of a workload never measured, counted at the request rule,
    are counted at what the next readings imply, and a new sibling is estimated at it."""
    flight = InFlight(Learner(LearnedUsage(window_seconds=600)))
    ledger = Ledger()
    base = PodLoad(Usage(42.5, 45.0 * MI), Usage(42.5, 45.0 * MI), 0.0)
    first = _stamped(100.0, {"n1": 4.0, "n2": 4.0})
    flight.sync(ledger, first, capacity=_sizes)
    for i, node in enumerate(("n1", "n1", "n2", "n2", "n1", "n2")):
        key = f"k{i}"
        at = 105.0 if i < 4 else 118.0  # the last two come after the second reading's sample
        ledger.assume(key, node, base, at)
        flight.track(key, Tracked(f"ns/p{i}", node, "w", "rs", base, REQUEST_RULE, True, at))
    assert flight.learned_how("w", 116.0)[1] == REQUEST_RULE
    mib = 1 / 1024
    second = _stamped(115.0, {"n1": 4.0 + 280 * mib, "n2": 4.0 + 280 * mib})
    flight.sync(ledger, second, capacity=_sizes)
    implied, how = flight.learned_how("w", 121.0)
    assert how == IMPLIED
    assert implied is not None and implied.memory_bytes == pytest.approx(140.0 * MI)
    late = flight.get("k4")
    assert late.how == IMPLIED and late.base.usage.memory_bytes == pytest.approx(140.0 * MI)
    # the pods not in the new reading count at the implied figure in the ledger
    assert ledger.placement("k4").load.usage.memory_bytes == pytest.approx(140.0 * MI)
    facts = pod_facts(_pod())
    found, how = flight.estimate(facts, "w", 121.0)
    assert how == IMPLIED and flight.taken[IMPLIED] == 1
    assert found.guessed == ()  # two pods made more than a CPU window: CPU implied too


def _limited():
    """strong-weak's pod (benchmarks/scenarios/strong-weak.yaml): 100m / 128 MiB requested,
    500m / 512 MiB limits; the request rule counts 425m (the filter 100m) and 358 MiB."""
    limits = {"cpu": "500m", "memory": "512Mi"}
    obj = kubeobjects.pod(
        "s",
        namespace="ns",
        uid="uid-s",
        containers=[
            kubeobjects.container("c", requests={"cpu": "100m", "memory": "128Mi"}, limits=limits)
        ],
    )
    return pod_facts(msgspec.convert(obj, type=Pod))


def test_a_figure_implied_without_its_cpu_leaves_the_cpu_a_guess():
    """A reading that holds too little of the newcomers' CPU window implies their memory
    alone; their CPU stays the request rule's for the scores and the request for the
    filter, and the scores know it is a guess (``PodFacts.guessed``, read by
    ``least_used.full_by_guess``)."""
    learner = Learner(LearnedUsage(window_seconds=600))
    flight = InFlight(learner)
    facts = _limited()
    assert facts.guessed == ("cpu", "memory")
    assert (facts.usage.cpu_millis, facts.placed().request.cpu_millis) == (425, 100)
    assert learner.imply("w", Usage(425.0, 400.0 * MI), at=1000.0, cpu=False)
    found, how = flight.estimate(facts, "w", 1001.0)
    assert how == IMPLIED and found.guessed == ("cpu",)
    assert found.usage == Usage(425, 400.0 * MI)
    assert found.placed().request == Usage(100, 400.0 * MI)  # the filter's CPU: the request
    assert learner.imply("w", Usage(200.0, 400.0 * MI), at=1015.0)
    found = flight.estimate(facts, "w", 1016.0)[0]
    assert found.guessed == () and found.placed().request == Usage(200.0, 400.0 * MI)
    learner.observe("v", Usage(200.0, 400.0 * MI), at=1000.0)
    assert flight.estimate(facts, "v", 1001.0)[0].guessed == ()


def test_pods_in_flight_whose_memory_alone_a_reading_implies_keep_their_cpu_figures():
    """Through InFlight.sync: four pods placed 2 s before the second reading's sample, two
    a node, make too little of a CPU window to imply CPU (2/15 each), but their memory is
    whole in it. They count the implied memory from then on, and their CPU as before: the
    request rule's 425m for the scores, the 100m request for the filter. Taken whole, the
    figure's CPU (425m) became the filter's too, and in the placement benchmark's
    strong-weak the 8-core node was refused as over 90 % CPU using about half of it."""
    flight = InFlight(Learner(LearnedUsage(window_seconds=600)))
    ledger = Ledger()
    facts = _limited()
    base = facts.placed()
    flight.sync(ledger, _stamped(100.0, {"n1": 4.0, "n2": 4.0}), capacity=_sizes)
    for i, node in enumerate(("n1", "n1", "n2", "n2")):
        ledger.assume(f"k{i}", node, base, 113.0)
        flight.track(f"k{i}", Tracked(f"ns/p{i}", node, "w", "rs", base, REQUEST_RULE, True, 113.0))
    mib = 1 / 1024
    second = _stamped(115.0, {"n1": 4.0 + 800 * mib, "n2": 4.0 + 800 * mib})
    flight.sync(ledger, second, capacity=_sizes)
    figure, how = flight.learned_how("w", 116.0)
    assert how == IMPLIED and figure is not None
    assert figure.memory_bytes == pytest.approx(400.0 * MI)
    tracked = flight.get("k0")
    assert tracked.how == IMPLIED
    assert tracked.base.usage.cpu_millis == 425 and tracked.base.request.cpu_millis == 100
    assert tracked.base.request.memory_bytes == pytest.approx(400.0 * MI)
    found, how = flight.estimate(facts, "w", 116.0)
    assert how == IMPLIED and found.guessed == ("cpu",)
    assert (found.usage.cpu_millis, found.placed().request.cpu_millis) == (425, 100)
