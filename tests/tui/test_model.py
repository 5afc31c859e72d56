from __future__ import annotations

from datetime import UTC, datetime, timedelta

from loadwise.tui.model import ClusterModel, NodeSort
from loadwise.tui.objects import Decision, NodeInfo, PodInfo, Resources, Usage
from loadwise.tui.sources import changes as ch
from loadwise.tui.sources.recorded import RecordedCluster

NOW = datetime(2026, 5, 4, 10, 30, 0, tzinfo=UTC)


def _node(name: str, cpu: float = 4000) -> NodeInfo:
    return NodeInfo(name, ready=True, allocatable=Resources(cpu, 8 * 2**30), pods_allocatable=110)


def _pod(
    name: str, node: str = "n1", cpu: float = 500, uid: str = "", phase: str = "Running"
) -> PodInfo:
    return PodInfo(
        "ns",
        name,
        uid or f"uid-{name}",
        node,
        phase,
        requests=Resources(cpu, 2**20),
        scheduled_at=NOW - timedelta(seconds=len(name)),
    )


def test_requests_are_kept_per_node_incrementally() -> None:
    model = ClusterModel()
    model.apply(ch.PodsListed((_pod("a"), _pod("b"), _pod("c", node="n2"))))  # pods before nodes
    model.apply(ch.NodesListed((_node("n1"), _node("n2"))))
    assert model.nodes["n1"].requests.cpu_m == 1000 and model.nodes["n1"].pods == 2
    model.apply(ch.PodUpserted(_pod("a", phase="Succeeded")))  # finished pods stop counting
    assert model.nodes["n1"].requests.cpu_m == 500 and model.nodes["n1"].pods == 1
    model.apply(ch.PodDeleted("ns", "b"))
    assert model.nodes["n1"].requests.cpu_m == 0
    model.apply(ch.PodsListed((_pod("c", node="n2"),)))  # relist drops the finished pod too
    assert set(model.pods) == {"ns/c"} and model.nodes["n2"].requests.cpu_m == 500
    model.apply(ch.NodeDeleted("n2"))
    assert "n2" not in model.nodes


def test_history_is_a_ring_buffer() -> None:
    model = ClusterModel(history=3)
    model.apply(ch.NodesListed((_node("n1"),)))
    for i in range(5):
        model.apply(ch.MetricsPolled(NOW, (Usage("n1", usage=Resources(400 * i, 0)),)))
    assert list(model.nodes["n1"].cpu_history) == [0.2, 0.3, 0.4]
    assert model.metrics_available


def test_feed_joins_decisions_by_uid_and_ignores_namesakes() -> None:
    model = ClusterModel()
    model.apply(ch.NodesListed((_node("n1"),)))
    model.apply(ch.PodsListed((_pod("web-0", uid="new"),)))
    old = Decision(
        "ns", "web-0", pod_uid="old", scores={"n1": 3}, best="n1", at=NOW - timedelta(hours=1)
    )
    model.apply(ch.EventsSeen((old,)))
    [item] = model.feed()
    assert item.decision is None  # a StatefulSet namesake's decision is not this pod's
    fresh = Decision("ns", "web-0", pod_uid="new", scores={"n1": 9}, best="n1", at=NOW)
    model.apply(ch.EventsSeen((fresh,)))
    assert model.feed()[0].decision == fresh


def test_placements_are_capped_newest_kept() -> None:
    model = ClusterModel(placement_limit=10)
    model.apply(
        ch.PodsListed(
            tuple(
                PodInfo("ns", f"p{i}", f"u{i}", "n1", scheduled_at=NOW - timedelta(seconds=i))
                for i in range(100)
            )
        )
    )
    feed = model.feed(limit=1000)
    assert len(model.placements) <= 15
    assert feed[0].placement is not None and feed[0].placement.pod == "p0"


def test_sorting_and_filtering(recorded: RecordedCluster) -> None:
    model = ClusterModel()
    model.apply_all(recorded.changes(now=NOW))
    by_cpu = model.node_list(NodeSort.CPU)
    fractions = [n.cpu_fraction() or 0 for n in by_cpu]
    assert fractions == sorted(fractions, reverse=True)
    assert [n.name for n in model.node_list(NodeSort.NAME, descending=False)][0] == "cp-1"
    assert [n.name for n in model.node_list(text="control")] == ["cp-1"]
    assert all("cordoned" in n.info.state for n in model.node_list(text="cordon"))


def test_connectivity_state() -> None:
    model = ClusterModel()
    model.apply(ch.ApiReachable(NOW))
    model.apply(ch.ApiUnreachable("connection refused", 2, NOW + timedelta(seconds=5)))
    model.apply(ch.ApiUnreachable("connection refused", 4, NOW + timedelta(seconds=9)))
    assert model.connected is False and model.unreachable_since == NOW + timedelta(seconds=5)
    assert model.retry_in == 4
    model.apply(ch.ApiReachable(NOW + timedelta(seconds=20)))
    assert model.connected and model.unreachable_since is None
