"""The node/pod watch fed unusable sizes and amounts: one bad object costs only itself."""

import msgspec

from extender.cluster import ClusterWatch
from extender.estimate import EstimatorArgs, TLPArgs
from extender.ledger import Ledger
from extender.wire import Node, Pod

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
