"""The per-node state the policies score (``extender.nodestate.build_states``): a measured
node, a node the reading lacks, a stale reading, no usable reading, a refused reading."""

from __future__ import annotations

from loadwise.extender.ledger import Ledger
from loadwise.extender.model import (
    InvalidReading,
    LoadSnapshot,
    NodeInfo,
    NodeLoad,
    PodLoad,
    ResourceLoad,
    Usage,
)
from loadwise.extender.nodestate import ClusterFacts, build_states

GI = 1024**3
END = 1000.0  # the reading's window end; with the default 60 s settle, pods after 940 count


def reading(**nodes: tuple[float, float]) -> LoadSnapshot:
    return LoadSnapshot(
        "test",
        END,
        END,
        {n: NodeLoad(ResourceLoad(c), ResourceLoad(m)) for n, (c, m) in nodes.items()},
    )


def info(name: str) -> NodeInfo:
    return NodeInfo(name, 4000, 8 * GI, 3800, 7 * GI, pods_allocatable=110)


def pod(cpu: float, memory: float = 0.0) -> PodLoad:
    return PodLoad(Usage(cpu, memory), Usage(cpu, memory), cpu)


INFOS = {n: info(n) for n in ("a", "b", "new")}


def test_a_measured_node_is_its_reading_plus_the_pods_placed_since():
    ledger = Ledger()
    ledger.assume("ns/early", "a", pod(999), at=900.0)  # before 940: the reading holds it
    ledger.assume("ns/late", "a", pod(250, GI), at=990.0)
    (a,) = build_states(
        ["a"], INFOS, reading(a=(30.0, 40.0)), fresh=True, ledger=ledger, cluster=None
    )
    assert (a.load.cpu.avg, a.load.memory.avg, a.estimated) == (30.0, 40.0, False)
    assert a.pending.cpu_millis == 250 and a.pending.memory_bytes == GI
    assert (a.pending_pods, a.pending_tlp_cpu_millis, a.pod_count) == (1, 250, None)


def test_a_departure_since_the_reading_is_taken_off_the_node():
    ledger = Ledger()
    ledger.depart("ns/gone", "a", pod(600), at=990.0)
    (a,) = build_states(
        ["a"], INFOS, reading(a=(10.0, 10.0)), fresh=True, ledger=ledger, cluster=None
    )
    assert a.pending.cpu_millis == -600  # the policies clamp the sum (estimate.used_after)
    assert a.pending_pods == 0


def test_a_node_the_reading_lacks_is_estimated_from_the_idlest_node_and_its_pods():
    ledger = Ledger()
    ledger.assume("ns/guess", "new", pod(200), at=995.0)  # assumed, not yet seen by the watch
    facts = ClusterFacts({"new": 3}, {"new": Usage(800.0, 2 * GI)}, {"new": 800.0})
    snap = reading(a=(30.0, 50.0), b=(20.0, 60.0))
    a, new = build_states(["a", "new"], INFOS, snap, fresh=True, ledger=ledger, cluster=facts)
    # floor: the idlest measured CPU (20 %) and memory (50 %); plus the pods over capacity
    assert new.estimated and new.load.cpu.avg == 20.0 + 100 * 1000 / 4000
    assert new.load.memory.avg == 50.0 + 100 * 2 / 8
    assert (new.pending_pods, new.pod_count) == (1, 3)
    assert not a.estimated and a.pod_count == 0


def test_a_node_of_unknown_size_missing_from_the_reading_reads_the_floor_alone():
    snap = reading(a=(30.0, 50.0))
    (ghost,) = build_states(["ghost"], {}, snap, fresh=True, ledger=Ledger(), cluster=None)
    assert (ghost.load.cpu.avg, ghost.load.memory.avg, ghost.info) == (30.0, 50.0, None)


def test_a_stale_reading_still_usable_keeps_the_figures_marked_estimated():
    ledger = Ledger()
    ledger.bind("ns/p", "a", pod(100), at=980.0)
    (a,) = build_states(
        ["a"], INFOS, reading(a=(95.0, 20.0)), fresh=False, usable=True, ledger=ledger, cluster=None
    )
    assert a.estimated and a.load.cpu.avg == 95.0 and a.pending.cpu_millis == 100


def test_without_a_usable_reading_every_load_is_unknown_but_the_placements_are_counted():
    ledger = Ledger()
    ledger.bind("ns/seen", "a", pod(100), at=10.0)
    ledger.assume("ns/guess", "a", pod(100), at=11.0)
    snap = reading(a=(95.0, 20.0))
    without_watch = build_states(["a"], INFOS, snap, fresh=False, ledger=ledger, cluster=None)
    (a,) = without_watch
    assert a.load.cpu.avg is None and a.load.memory.avg is None and a.estimated
    assert a.pending_pods == 2  # everything the ledger holds
    facts = ClusterFacts({"a": 5}, {}, {})
    (watched,) = build_states(["a"], INFOS, None, fresh=False, ledger=ledger, cluster=facts)
    # with a watch, its pods are in the count already: only the unconfirmed one is extra
    assert (watched.pending_pods, watched.pod_count) == (1, 5)


def test_a_refused_reading_makes_its_node_unknown_and_leaves_the_others_alone():
    snap = reading(a=(30.0, 40.0), b=(20.0, 20.0))
    snap = LoadSnapshot(
        snap.source,
        snap.window_end,
        snap.fetched_at,
        {"b": snap.nodes["b"]},
        invalid={"a": InvalidReading("over_capacity", "cpu 250%")},
    )
    a, b, new = build_states(
        ["a", "b", "new"], INFOS, snap, fresh=True, ledger=Ledger(), cluster=None
    )
    assert a.load.cpu.avg is None and a.estimated  # not estimated from the idlest node
    assert b.load.cpu.avg == 20.0 and not b.estimated
    assert new.load.cpu.avg == 20.0  # a missing node's floor is read from the good nodes


def test_the_states_come_in_the_order_of_the_names():
    snap = reading(a=(1.0, 1.0), b=(2.0, 2.0))
    states = build_states(["b", "a", "b"], INFOS, snap, fresh=True, ledger=Ledger(), cluster=None)
    assert [s.name for s in states] == ["b", "a", "b"]
    assert [s.load.cpu.avg for s in states] == [2.0, 1.0, 2.0]
