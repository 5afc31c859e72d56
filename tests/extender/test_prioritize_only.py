"""Prioritize-only (``filter.enabled: false``, the scheduler configured without a filter
verb): a node the filter would reject is scored lowest instead, and never favoured.

The counterpart modelled is kube-scheduler's: with a filter verb it prioritizes only the
nodes the filter returned; without one it sends every node to prioritize. So the passing
nodes' priorities must be what the two-verb extender gives after its own filter, on the
general path and the fast path, with names and with Node objects.
"""

from __future__ import annotations

import json
import random

import msgspec
import pytest

from loadwise.extender.config import load_settings
from loadwise.extender.events import Decision, format_message
from loadwise.extender.service import Extender
from loadwise.extender.wire import decode_args

from .helpers import StaticSource, container, node_json, pod_json, snapshot
from .test_safety import daemonset_pod

LOADS = {"cool": (20.0, 30.0), "warm": (55.0, 60.0), "hot": (95.0, 40.0), "hog": (10.0, 96.0)}
OVER = {"hot", "hog"}  # cpu / memory over the default 90 % thresholds


def _extender(loads, *, filter_enabled: bool, fast: bool, **extra) -> Extender:
    settings = load_settings(
        None,
        {
            "source.kind": "file",
            "source.file": "/dev/null",
            "filter.enabled": filter_enabled,
            **extra,
        },
    )
    snap = snapshot(loads)
    ext = Extender(settings, StaticSource(snap), use_fast_path=fast)
    ext.refresher.snapshot = snap
    return ext


def _body(pod: dict, names: list[str], objects: bool) -> bytes:
    if objects:
        nodes = {"metadata": {}, "items": [node_json(n) for n in names]}
        return json.dumps({"Pod": pod, "Nodes": nodes, "NodeNames": None}).encode()
    return json.dumps({"Pod": pod, "NodeNames": names}).encode()


def _scores(ext: Extender, body: bytes) -> dict[str, int]:
    args = decode_args(body, raw_nodes=False)
    return {h.host: h.score for h in ext.prioritize(args)}


def _filtered(ext: Extender, body: bytes) -> list[str]:
    result = ext.filter(decode_args(body))
    if result.node_names is not None:
        return list(result.node_names)
    assert result.nodes is not None and result.nodes.items is not None
    return [json.loads(bytes(raw))["metadata"]["name"] for raw in result.nodes.items]


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "general"])
@pytest.mark.parametrize("objects", [True, False], ids=["nodes", "names"])
def test_nodes_over_a_threshold_score_lowest_and_the_rest_as_after_a_filter(fast, objects):
    pod = pod_json(container({"cpu": "200m", "memory": "256Mi"}), uid="u1")
    names = list(LOADS)
    one = _extender(LOADS, filter_enabled=False, fast=fast)
    got = _scores(one, _body(pod, names, objects))
    # what kube-scheduler does with both verbs: filter, then prioritize what passed
    two = _extender(LOADS, filter_enabled=True, fast=fast)
    passed = _filtered(two, _body(pod, names, objects))
    assert sorted(passed) == sorted(set(names) - OVER)
    want = _scores(two, _body(pod, passed, objects))
    assert {n: got[n] for n in passed} == want
    assert {n: got[n] for n in OVER} == {"hot": 0, "hog": 0}
    top = max(got.values())
    assert [n for n, s in got.items() if s == top] == ["cool"]  # one favourite, not hot
    # the pod is counted where it was favoured (herding protection), as with both verbs
    assert set(one.ledger.pending()) == {"cool"}
    lowest = {"verb": "prioritize", "outcome": "lowest"}
    assert one.metrics.registry.get_sample_value("loadwise_extender_decisions_total", lowest) == 2


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "general"])
def test_a_burst_never_favours_a_node_over_its_threshold(fast):
    """Each pod goes where the extender put the only top priority; the scheduler's own
    scores are modelled as equal, so a tie at the top would go at random (selectHost)."""
    rng = random.Random(3)
    ext = _extender(LOADS, filter_enabled=False, fast=fast)
    names = list(LOADS)
    went: dict[str, int] = {}
    for i in range(30):
        pod = pod_json(container({"cpu": "100m", "memory": "128Mi"}), name=f"b{i}", uid=f"b{i}")
        scores = _scores(ext, _body(pod, rng.sample(names, len(names)), objects=True))
        top = max(scores.values())
        node = rng.choice([n for n, s in scores.items() if s == top])
        went[node] = went.get(node, 0) + 1
        assert all(scores[n] == 0 for n in OVER), scores
        assert node not in OVER, scores
    # 30 x 100m on 4 cores takes cool from 20 % to 95 % of its CPU: the burst spreads to
    # warm once cool is the warmer, and cool is then scored lowest too
    assert set(went) == {"cool", "warm"}, went


def test_one_node_left_at_the_bottom_step_still_ranks_above_the_lowest():
    """The only node under its threshold (99 % here), its own score rounding to priority 0
    (3 % free; no rival for to_priorities to raise it above), gets 1: a tie with the nodes
    scored lowest would let the scheduler pick one of them at random."""
    loads = {"busy": (97.0, 97.0), "hot": (99.5, 50.0)}
    limits = {"filter.thresholds": {"cpu": 99.0, "memory": 99.0}}
    ext = _extender(loads, filter_enabled=False, fast=False, **limits)
    pod = pod_json(container({"cpu": "10m", "memory": "16Mi"}), uid="u2")
    assert _scores(ext, _body(pod, ["busy", "hot"], objects=False)) == {"busy": 1, "hot": 0}


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "general"])
def test_when_every_node_is_over_the_least_over_is_not_scored_lowest(fast):
    """Every node over 90 % CPU: the least over (a, 5 points) and those within least-used's
    spreading band of it (b, 9 points; the filter's rule, ``decide.filter_nodes``) keep
    their scores, so the policy ranks them; c, 11 points over, is scored lowest."""
    loads = {"a": (95.0, 10.0), "b": (99.0, 10.0), "c": (101.0, 10.0)}
    ext = _extender(loads, filter_enabled=False, fast=fast)
    pod = pod_json(container({"cpu": "10m", "memory": "16Mi"}), uid="u3")
    scores = _scores(ext, _body(pod, ["a", "b", "c"], objects=True))
    assert scores["c"] == 0 and scores["a"] > scores["b"] > 0, scores


def test_a_daemonset_pod_is_scored_on_every_node_as_usual():
    """A pod that must run where it is sent (exemptions) has nothing scored lowest."""
    pod = daemonset_pod("hot")
    both = _extender(LOADS, filter_enabled=True, fast=False)
    one = _extender(LOADS, filter_enabled=False, fast=False)
    body = _body(pod, ["hot"], objects=False)
    assert _scores(one, body) == _scores(both, body)
    assert _filtered(both, body) == ["hot"]


def test_the_filter_verb_if_still_called_rejects_nothing():
    ext = _extender(LOADS, filter_enabled=False, fast=True)
    pod = pod_json(container({"cpu": "200m"}), uid="u4")
    assert _filtered(ext, _body(pod, list(LOADS), objects=True)) == list(LOADS)


def test_the_event_says_scored_lowest_not_filtered():
    decision = Decision(
        policy="least-used",
        source="static",
        scores={"cool": 10},
        failed={"hot": "cpu 96% > 90% threshold"},
        scored_lowest=True,
    )
    text = format_message(decision)
    assert "scored lowest hot: cpu 96% > 90% threshold" in text and "filtered" not in text
    both = msgspec.structs.replace(decision, scored_lowest=False)
    assert "filtered hot: cpu 96%" in format_message(both)
