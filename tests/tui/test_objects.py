"""Parsing of API objects and, above all, of the Events the placements feed joins."""

from __future__ import annotations

import json

from tui.objects import Decision, Eviction, parse_event, parse_node, parse_pod, parse_pod_metrics
from tui.sources.recorded import RecordedCluster


def test_loadwise_event_is_a_decision() -> None:
    decision = {
        "policy": "least-used",
        "source": "load-watcher",
        "stale": False,
        "scores": {"node-a": 9, "node-b": 7},
        "failed": {"node-c": "memory 93% > 90% threshold"},
        "best": "node-a",
        "why": "cpu 12%, memory 30% after placement",
    }
    event = {
        "metadata": {
            "name": "web-1.17f",
            "namespace": "shop",
            "uid": "e1",
            "annotations": {"loadwise.dev/decision": json.dumps(decision)},
        },
        "involvedObject": {"kind": "Pod", "namespace": "shop", "name": "web-1", "uid": "p1"},
        "reason": "LoadwiseScored",
        "type": "Normal",
        "message": "scores node-a=9 node-b=7; …",
        "source": {"component": "loadwise-extender"},
        "reportingComponent": "loadwise-extender",
        "lastTimestamp": "2026-05-04T10:00:00Z",
    }
    parsed = parse_event(event)
    assert isinstance(parsed, Decision)
    assert parsed.key == "shop/web-1" and parsed.pod_uid == "p1"
    assert parsed.scores == {"node-a": 9.0, "node-b": 7.0}
    assert parsed.failed == {"node-c": "memory 93% > 90% threshold"}
    assert parsed.best == "node-a" and parsed.why.startswith("cpu 12%")
    assert parsed.at is not None and parsed.at.hour == 10


def test_decision_with_broken_annotation_still_shows() -> None:
    event = {
        "metadata": {"annotations": {"loadwise.dev/decision": "{not json"}},
        "involvedObject": {"kind": "Pod", "namespace": "a", "name": "b"},
        "reason": "LoadwiseScored",
        "message": "scores x=1",
    }
    parsed = parse_event(event)
    assert isinstance(parsed, Decision) and parsed.scores == {} and parsed.message == "scores x=1"


def test_descheduler_eviction_events_v1_style() -> None:
    event = {
        "metadata": {"uid": "ev1", "namespace": "shop"},
        "involvedObject": {"kind": "Pod", "namespace": "shop", "name": "cart-1"},
        "reason": "LowNodeUtilization",
        "action": "Descheduled",
        "type": "Normal",
        "message": "pod eviction from worker-03 node by sigs.k8s.io/descheduler",
        "reportingComponent": "sigs.k8s.io.descheduler",
        "eventTime": "2026-05-04T10:00:00.123456Z",
    }
    parsed = parse_event(event)
    assert isinstance(parsed, Eviction)
    assert (parsed.node, parsed.strategy, parsed.failed) == (
        "worker-03",
        "LowNodeUtilization",
        False,
    )
    assert parsed.at is not None and parsed.at.microsecond == 123456


def test_descheduler_eviction_old_core_recorder() -> None:
    event = {
        "metadata": {"uid": "ev2"},
        "involvedObject": {"kind": "Pod", "namespace": "a", "name": "b"},
        "reason": "Descheduled",
        "message": "pod evicted by sigs.k8s.io/descheduler",
        "source": {"component": "sigs.k8s.io.descheduler"},
        "type": "Normal",
    }
    parsed = parse_event(event)
    assert isinstance(parsed, Eviction) and parsed.strategy == "" and parsed.node == ""


def test_refused_eviction_is_marked_failed() -> None:
    event = {
        "metadata": {"uid": "ev3"},
        "involvedObject": {"kind": "Pod", "namespace": "a", "name": "b"},
        "reason": "EvictionFailed",
        "action": "Descheduled",
        "type": "Warning",
        "message": (
            "pod eviction from n1 node by sigs.k8s.io/descheduler failed: "
            "total eviction limit exceeded (5)"
        ),
        "reportingComponent": "sigs.k8s.io.descheduler",
    }
    parsed = parse_event(event)
    assert isinstance(parsed, Eviction) and parsed.failed and parsed.node == "n1"


def test_other_events_are_ignored() -> None:
    assert (
        parse_event({"involvedObject": {"kind": "Node", "name": "n"}, "reason": "NodeNotReady"})
        is None
    )
    assert (
        parse_event({"involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Scheduled"}) is None
    )


def test_pod_effective_requests_follow_scheduler_rules() -> None:
    pod = {
        "metadata": {"namespace": "a", "name": "p"},
        "spec": {
            "nodeName": "n1",
            "initContainers": [
                {"name": "migrate", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
                {
                    "name": "proxy",
                    "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "100m"}},
                },
            ],
            "containers": [
                {
                    "name": "app",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "256Mi"},
                        "limits": {"memory": "512Mi"},
                    },
                },
                {"name": "log", "resources": {"requests": {"cpu": "50m"}}},
            ],
            "overhead": {"cpu": "10m"},
        },
        "status": {"phase": "Running"},
    }
    parsed = parse_pod(pod)
    # max(500m + 50m + 100m sidecar, 2 cores for the migration init) + 10m overhead
    assert parsed.requests.cpu_m == 2010
    assert parsed.requests.memory == 2**30
    assert parsed.limits.memory == 512 * 2**20
    assert parsed.active


def test_recorded_fixtures_parse(recorded: RecordedCluster) -> None:
    nodes = [parse_node(n) for n in recorded.nodes["items"]]
    assert nodes[0].roles == ("control-plane",)
    assert any(n.unschedulable for n in nodes) and any(not n.ready for n in nodes)
    assert all(n.allocatable.cpu_m > 0 for n in nodes)
    usages = [parse_pod_metrics(p) for p in (recorded.pod_metrics or {})["items"]]
    assert usages and all(u.usage.cpu_m > 0 for u in usages)
    records = [parse_event(e) for e in (recorded.events or {})["items"]]
    assert any(isinstance(r, Decision) and r.scores for r in records)
    assert any(isinstance(r, Eviction) and r.node for r in records)
