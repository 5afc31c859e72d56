"""Parsing of API objects and, above all, of the Events the placements feed joins."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import fields, is_dataclass
from datetime import UTC, datetime
from typing import Any

from conftest import HOSTILE_TEXT, UNSAFE
from hypothesis import given

from loadwise.extender import kubeobjects
from loadwise.tui.model import ClusterModel
from loadwise.tui.objects import (
    Decision,
    Eviction,
    parse_event,
    parse_node,
    parse_node_metrics,
    parse_pod,
    parse_pod_metrics,
    parse_ref,
)
from loadwise.tui.sources import changes as ch
from loadwise.tui.sources.recorded import RecordedCluster


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


def _strings(value: Any) -> Iterator[str]:
    """Every string a parsed record holds, in fields, keys, values and members."""
    if isinstance(value, str):
        yield value
    elif is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            yield from _strings(getattr(value, f.name))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, tuple | list | frozenset):
        for item in value:
            yield from _strings(item)


def _decision_event(text: str) -> dict[str, Any]:
    decision = {
        "policy": text,
        "source": text,
        "scores": {text: 9},
        "use": {text: [10, 20]},
        "estimated": [text],
        "failed": {text: text},
        "best": text,
        "why": text,
        "tied": [text],
        "bound": text,
        "thresholds": {text: {text: 80, "cpu": 90}},
    }
    return {
        # json.dumps escapes a lone surrogate as \udXXX, which decodes back to it.
        "metadata": {
            "namespace": text,
            "annotations": {"loadwise.dev/decision": json.dumps(decision)},
        },
        "involvedObject": {"kind": "Pod", "namespace": text, "name": text, "uid": text},
        "reason": "LoadwiseScored",
        "message": text,
    }


def _eviction_event(text: str) -> dict[str, Any]:
    return {
        "metadata": {"uid": text, "namespace": text},
        "involvedObject": {"kind": "Pod", "namespace": text, "name": text, "uid": text},
        "reason": text,
        "action": "Descheduled",
        # the node's name runs to the next blank
        "note": f"pod eviction from n{''.join(text.split())}x node {text}",
        "reportingController": "sigs.k8s.io.descheduler",
    }


@given(HOSTILE_TEXT)
def test_no_parsed_string_holds_a_control_character(text: str) -> None:
    """Whatever the cluster writes into any field, the records the screens get are clean."""
    node = kubeobjects.node(
        text,
        cpu="4",
        memory="8Gi",
        labels={f"node-role.kubernetes.io/{text}": ""},
        ready=True,
        internal_ip=text,
        node_info={"kubeletVersion": text},
    )
    pod = kubeobjects.pod(
        text,
        namespace=text,
        uid=text,
        node_name=text,
        phase=text,
        scheduled_at="2026-05-04T10:00:00Z",
        extra={"schedulerName": text},
    )
    metrics = {"metadata": {"name": text, "namespace": text}, "containers": []}
    records: list[Any] = [
        parse_node(node),
        parse_pod(pod),
        parse_node_metrics(metrics),
        parse_pod_metrics(metrics),
        parse_ref(pod),
        parse_event(_decision_event(text)),
        parse_event(_eviction_event(text)),
    ]
    assert isinstance(records[-2], Decision) and isinstance(records[-1], Eviction)
    assert records[-1].node  # the descheduler's note names a node, hostile as it is
    strings = list(_strings(records))
    assert strings and not [s for s in strings if UNSAFE.search(s)]


def test_api_error_texts_are_cleaned_as_they_enter_the_model() -> None:
    model = ClusterModel()
    model.apply(
        ch.ApiUnreachable(
            "forbidden (403): \x1b]52;c;aGk=\x07", 1.0, datetime(2026, 5, 4, 10, tzinfo=UTC)
        )
    )
    model.apply(ch.MetricsUnavailable("503 \x9b2J\u202e"))
    assert model.unreachable_reason == "forbidden (403): ^[]52;c;aGk=^G"
    assert model.metrics_reason == "503 ^[[2J\ufffd"


def test_a_deleted_objects_key_matches_the_cleaned_key_it_was_stored_under() -> None:
    """A watch DELETED for a pod whose name needed cleaning still removes it."""
    model = ClusterModel()
    doc = kubeobjects.pod("web-\x1b1", namespace="shop", node_name="n1", phase="Running")
    model.apply(ch.PodUpserted(parse_pod(doc)))
    assert list(model.pods) == ["shop/web-^[1"]
    model.apply(ch.PodDeleted(*parse_ref(doc)))
    assert model.pods == {}
