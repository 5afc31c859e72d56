"""The node-size cache (``extender.nodesizes``): learnt from full-Node requests, reused per
resourceVersion, bounded, and a Node with an unusable size forgotten alone."""

from __future__ import annotations

import msgspec

from loadwise.extender.nodesizes import SEEN_NODES_MAX, NodeSizes
from loadwise.extender.wire import Node

from .helpers import node_json


def node(name: str, cpu: str = "4", rv: str = "1") -> Node:
    raw = node_json(name, cpu=cpu)
    raw["metadata"]["resourceVersion"] = rv
    return msgspec.convert(raw, type=Node)


def test_a_learnt_size_is_kept_and_reused_while_the_resource_version_is_unchanged():
    sizes = NodeSizes()
    first = sizes.learn(node("n1", cpu="4"))
    assert first is not None and first.cpu_allocatable_millis == 4000
    assert sizes.get("n1") is first and sizes.known == {"n1": first}
    # the same version: not parsed again (the cpu in this copy is not even read)
    assert sizes.learn(node("n1", cpu="64")) is first
    resized = sizes.learn(node("n1", cpu="8", rv="2"))
    assert resized is not None and resized.cpu_allocatable_millis == 8000
    assert sizes.get("n1") is resized and sizes.version("n1") == "2"


def test_without_a_resource_version_every_request_is_read_afresh():
    sizes = NodeSizes()
    sizes.learn(node("n1", cpu="4", rv=""))
    again = sizes.learn(node("n1", cpu="6", rv=""))
    assert again is not None and again.cpu_allocatable_millis == 6000


def test_an_unusable_size_forgets_that_node_only():
    sizes = NodeSizes()
    sizes.learn(node("n1"))
    sizes.learn(node("n2"))
    assert sizes.learn(node("n1", cpu="lots", rv="2")) is None
    assert sizes.get("n1") is None and sizes.version("n1") is None
    assert sizes.get("n2") is not None and len(sizes) == 1


def test_the_cache_keeps_the_most_recently_refreshed_nodes():
    sizes = NodeSizes(limit=3)
    for name in ("a", "b", "c"):
        sizes.learn(node(name))
    sizes.learn(node("a", rv="2"))  # refreshed: now the newest
    sizes.learn(node("d"))
    assert list(sizes.known) == ["c", "a", "d"]
    assert sizes.version("b") is None  # its version went with it
    # an unchanged version still counts as seen, but does not move the node up
    sizes.learn(node("c"))
    sizes.learn(node("e"))
    assert list(sizes.known) == ["a", "d", "e"]


def test_the_default_bound_covers_the_largest_cluster_kubernetes_supports():
    assert NodeSizes().limit == SEEN_NODES_MAX >= 5000
