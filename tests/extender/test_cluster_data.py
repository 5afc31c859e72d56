"""The node/pod watch fed unusable sizes and amounts: one bad object costs only itself."""

import msgspec

from loadwise.extender.cluster import ClusterWatch
from loadwise.extender.estimate import EstimatorArgs, TLPArgs
from loadwise.extender.ledger import Ledger
from loadwise.extender.model import PodLoad
from loadwise.extender.wire import Node, Pod

from .helpers import container, node_json, pod_json


def _watch() -> ClusterWatch:
    return ClusterWatch(
        api=None,  # type: ignore[arg-type]  # never started: only the write side is fed
        estimator=EstimatorArgs(),
        tlp=TLPArgs(),
        placements=Ledger(),
    )


def _pod(name, requests, node="n1"):
    doc = pod_json(container(requests), name=name, uid=f"uid-{name}")
    doc["spec"]["nodeName"] = node
    return msgspec.convert(doc, type=Pod)


def test_a_node_of_unusable_size_is_left_unknown_and_the_others_listed(caplog):
    watch = _watch()
    nodes = [node_json("n1"), node_json("bad", memory="-8Gi"), node_json("n2", cpu="1e400")]
    watch._set_nodes([msgspec.convert(n, type=Node) for n in nodes])
    assert set(watch.nodes) == {"n1"} and watch.nodes_synced
    assert 'status.capacity.memory: "-8Gi" is negative' in caplog.text
    # an update that makes n1 unusable drops its old size rather than keeping it
    watch._node_event("MODIFIED", msgspec.convert(node_json("n1", cpu="x"), type=Node))
    assert watch.nodes == {}


def test_a_pod_with_an_unusable_amount_does_not_stop_the_list(caplog):
    watch = _watch()
    watch._set_pods([_pod("a", {"cpu": "1"}), _pod("bad", {"cpu": "-1"}), _pod("b", {"cpu": "2"})])
    assert watch.pods_synced
    facts = watch.facts()
    assert facts.pod_counts == {"n1": 2}
    assert "pod uid-bad left out of the node totals" in caplog.text


def test_the_totals_follow_every_add_move_and_delete_as_a_full_sum_would():
    """facts() re-adds only the nodes a pod event touched; after any sequence of events it
    equals the sum over every pod, and an object handed out earlier keeps its figures."""
    import random

    from loadwise.extender.estimate import pod_load

    rng = random.Random(7)
    watch = _watch()
    where: dict[str, tuple[str, PodLoad]] = {}  # pod -> (node, what it counts)
    before = watch.facts()
    for step in range(400):
        name = f"p{rng.randrange(40)}"
        if name in where and rng.random() < 0.3:
            watch._pod_event("DELETED", _pod(name, {"cpu": "1m"}, where.pop(name)[0]))
        else:
            node = f"n{rng.randrange(5)}"
            pod = _pod(name, {"cpu": f"{rng.randrange(1, 500)}m", "memory": "64Mi"}, node)
            # a pod seen again on its node keeps its first figures, as the watch does
            if where.get(name, ("", None))[0] != node:
                where[name] = (node, pod_load(pod, EstimatorArgs(), TLPArgs()))
            watch._pod_event("MODIFIED", pod)
        if step % 7 == 0:
            facts = watch.facts()
            nodes = {n for n, _ in where.values()}
            assert facts.pod_counts == {
                n: sum(1 for m, _ in where.values() if m == n) for n in nodes
            }, step
            for n in nodes:
                loads = [load for m, load in where.values() if m == n]
                cpu = sum(load.usage.cpu_millis for load in loads)
                memory = sum(load.usage.memory_bytes for load in loads)
                tlp = sum(load.tlp_cpu_millis for load in loads)
                got = facts.pod_usage[n]
                assert (got.cpu_millis, got.memory_bytes) == (cpu, memory), step
                assert facts.pod_tlp_cpu[n] == tlp, step
            assert set(facts.pod_usage) == set(facts.pod_tlp_cpu) == nodes
    assert before.pod_counts == {} and before.pod_usage == {}  # unchanged under its holder
