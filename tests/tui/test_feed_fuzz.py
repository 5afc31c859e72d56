"""Property-based fuzzing of the dashboard's parsers (hypothesis): one hostile object in a
list is skipped and counted, and never costs the rest of the list.

Strategies build Event-, Pod-, Node-, NodeMetrics- and PodMetrics-shaped documents in
which every field may instead hold arbitrary JSON: nested lists and maps, integers of
hundreds of digits, long digit strings, NaN and infinities (Python's json reads them, so
a recorded cluster can hold them), any Unicode, markup-like text. Properties:

- parsing a list object by object (`tui.sources.skipped.read_each`, what both sources
  use) never raises, every parsed-or-skipped object is accounted for, and the
  well-formed objects mixed into the list are all kept;
- the live source's `listed`/`watched`, fed the same documents as raw bytes, never
  raise and report exactly the objects they skipped;
- whatever was kept goes through the model and the row builders of every table
  without raising, and no string it holds carries a control character; cells are
  `rich.text.Text`, so "[bold]" is shown as typed.

Each property is bounded (`max_examples`, no deadline on a busy 2-core machine).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from conftest import NOW, SIZE, UNSAFE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes.client import ApiClient, Configuration
from rich.text import Text

from loadwise.tui.app import make_app
from loadwise.tui.model import ClusterModel
from loadwise.tui.objects import (
    DECISION_ANNOTATION,
    Decision,
    Eviction,
    parse_event,
    parse_node,
    parse_node_metrics,
    parse_pod,
    parse_pod_metrics,
)
from loadwise.tui.sources import changes as ch
from loadwise.tui.sources.kubernetes import KubernetesSource
from loadwise.tui.sources.recorded import RecordedCluster, RecordedSource
from loadwise.tui.sources.skipped import SkipLedger, object_key, read_each
from loadwise.tui.status import banner_text, summary
from loadwise.tui.widgets.nodes import node_row
from loadwise.tui.widgets.placements import describe_item, feed_row
from loadwise.tui.widgets.pods import pod_row

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    # CI replays the same examples (a red build names a reproducible input).
    derandomize=os.environ.get("CI") == "true",
)

BIG = 10**400  # the finding: a score of 1 followed by 400 zeros raised OverflowError
MARKUP = ["[bold]", "[/]", "[link=https://example.invalid]x[/link]", "[red]x[/red]", "[/x]"]

hostile_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([BIG, -BIG, 2**63, 2**64, -(2**63) - 1]),
    st.floats(),  # NaN and both infinities included
    st.text(max_size=30),
    st.sampled_from(MARKUP),
    st.text("0123456789", min_size=20, max_size=5000),  # long digit strings
    st.sampled_from(["1" + "0" * 400, "1e400", "1e999999", "-1e400", "NaN", "Infinity"]),
    st.just("x" * 100_000),  # a huge string
)
any_json = st.recursive(
    hostile_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def deep(depth: int) -> Any:
    """JSON nested `depth` levels deep: past the recursion limit of json and msgspec."""
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def _or_any(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field's value: usually one that looks right, else anything at all."""
    return st.one_of(plausible, plausible, any_json)


def _doc(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A document with these fields (each possibly hostile), or now and then no map at all."""
    shaped = st.fixed_dictionaries(
        {k: _or_any(v) for k, v in required.items()},
        optional={k: _or_any(v) for k, v in optional.items()},
    )
    return st.one_of(shaped, shaped, shaped, any_json)


names = st.text(min_size=1, max_size=20) | st.sampled_from(MARKUP)
times = st.sampled_from(["2026-05-04T10:29:00Z", "2026-05-04T10:29:00.123456+02:00", "", "x"])
quantities = st.sampled_from(["250m", "1", "64Mi", "3901488Ki", "123456789n", "1e3", "7E"])
metadata = _doc(
    {"name": names},
    {
        "namespace": names,
        "uid": names,
        "creationTimestamp": times,
        "labels": st.dictionaries(st.sampled_from(["node-role.kubernetes.io/x", "a"]), names),
    },
)
resource_map = _doc({}, {"cpu": quantities, "memory": quantities})

decision_annotation = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "scores": st.dictionaries(names, any_json, max_size=3),
            "failed": any_json,
            "best": any_json,
            "why": any_json,
            "use": st.dictionaries(names, any_json, max_size=3),
            "estimated": any_json,
            "omitted": any_json,
            "tied": any_json,
            "bound": any_json,
            "thresholds": st.dictionaries(names, any_json, max_size=3),
            "policy": any_json,
            "source": any_json,
            "stale": any_json,
            "scored_lowest": any_json,
        },
    ).map(json.dumps),
    st.sampled_from(
        [
            '{"scores": {"n1": 1' + "0" * 400 + "}}",
            '{"omitted": 1' + "0" * 5000 + "}",  # beyond int()'s 4,300 digits
            '{"scores": {"n1": NaN, "n2": Infinity}}',
            "[" * 5000 + "]" * 5000,
            "{",
        ]
    ),
    any_json,
)
event = _doc(
    {
        "metadata": _doc(
            {},
            {
                "name": names,
                "namespace": names,
                "uid": names,
                "annotations": st.fixed_dictionaries({DECISION_ANNOTATION: decision_annotation}),
            },
        )
    },
    {
        "reason": st.sampled_from(["LoadwiseScored", "Descheduled", "LowNodeUtilization"]),
        "involvedObject": _doc({"kind": st.just("Pod")}, {"name": names, "namespace": names}),
        "regarding": _doc({"kind": st.just("Pod")}, {"name": names, "uid": names}),
        "message": names,
        "note": st.just("pod eviction from n1 node by sigs.k8s.io/descheduler") | names,
        "source": _doc({"component": st.just("sigs.k8s.io.descheduler")}, {}),
        "reportingController": st.just("sigs.k8s.io.descheduler"),
        "action": st.just("Descheduled"),
        "type": st.sampled_from(["Normal", "Warning"]),
        "series": _doc({}, {"lastObservedTime": times}),
        "lastTimestamp": times,
        "eventTime": times,
    },
)
container = _doc({}, {"resources": _doc({}, {"requests": resource_map, "limits": resource_map})})
pod = _doc(
    {"metadata": metadata},
    {
        "spec": _doc(
            {},
            {
                "nodeName": names,
                "schedulerName": names,
                "containers": st.lists(container, max_size=3),
                "initContainers": st.lists(
                    _doc({"restartPolicy": st.just("Always")}, {"resources": container}),
                    max_size=2,
                ),
                "overhead": resource_map,
            },
        ),
        "status": _doc(
            {},
            {
                "phase": st.sampled_from(["Running", "Pending", "Succeeded"]),
                "conditions": st.lists(
                    _doc(
                        {"type": st.just("PodScheduled"), "status": st.just("True")},
                        {"lastTransitionTime": times},
                    ),
                    max_size=2,
                ),
            },
        ),
    },
)
node = _doc(
    {"metadata": metadata},
    {
        "spec": _doc({}, {"unschedulable": st.booleans()}),
        "status": _doc(
            {},
            {
                "conditions": st.lists(
                    _doc({"type": st.just("Ready"), "status": st.just("True")}, {}), max_size=2
                ),
                "allocatable": _doc(
                    {}, {"cpu": quantities, "memory": quantities, "pods": st.just("110")}
                ),
                "capacity": resource_map,
                "addresses": st.lists(
                    _doc({"type": st.just("InternalIP"), "address": names}, {}), max_size=2
                ),
                "nodeInfo": _doc({}, {"kubeletVersion": names}),
            },
        ),
    },
)
node_metrics = _doc({"metadata": metadata}, {"usage": resource_map, "timestamp": times})
pod_metrics = _doc(
    {"metadata": metadata},
    {"containers": st.lists(_doc({}, {"usage": resource_map}), max_size=3), "timestamp": times},
)
hostile_documents = st.one_of(any_json, st.just(deep(5000)), st.just({"metadata": deep(3000)}))


# Well-formed objects, named `good-N`, with markup in their text: they must all be kept.


def good_node(n: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"good-{n}",
            "uid": f"node-uid-{n}",
            "labels": {"node-role.kubernetes.io/[bold]": ""},
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        },
    }


def good_pod(n: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"good-{n}",
            "namespace": "[bold]shop[/bold]",
            "uid": f"pod-uid-{n}",
            "creationTimestamp": "2026-05-04T10:00:00Z",
        },
        "spec": {
            "nodeName": "good-0",
            "containers": [{"resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": "2026-05-04T10:00:01Z",
                }
            ],
        },
    }


def good_event(n: int) -> dict[str, Any]:
    decision = {"scores": {"good-0": 87.5}, "best": "good-0", "why": "[red]least used[/red]"}
    return {
        "metadata": {
            "name": f"good-{n}.1",
            "namespace": "shop",
            "uid": f"event-uid-{n}",
            "annotations": {DECISION_ANNOTATION: json.dumps(decision)},
        },
        "involvedObject": {
            "kind": "Pod",
            "namespace": "[bold]shop[/bold]",
            "name": f"good-{n}",
            "uid": f"pod-uid-{n}",
        },
        "reason": "LoadwiseScored",
        "message": "[bold]scored[/bold]",
        "lastTimestamp": "2026-05-04T10:00:01Z",
    }


def good_node_metrics(n: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"good-{n}"},
        "usage": {"cpu": "1", "memory": "1Gi"},
        "timestamp": "2026-05-04T10:29:54Z",
    }


def good_pod_metrics(n: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"good-{n}", "namespace": "[bold]shop[/bold]"},
        "containers": [{"usage": {"cpu": "100m", "memory": "32Mi"}}],
    }


def mixed(documents: st.SearchStrategy[Any], good: Any) -> st.SearchStrategy[list[Any]]:
    """A list of hostile documents with well-formed ones (`good(0)`, `good(1)`...) among them."""

    def interleave(hostile: list[Any], at: list[int]) -> list[Any]:
        items = list(hostile)
        for n, index in enumerate(sorted(at)):
            items.insert(min(index + n, len(items)), good(n))
        return items

    return st.builds(
        interleave,
        st.lists(st.one_of(documents, hostile_documents), min_size=1, max_size=6),
        st.lists(st.integers(0, 6), min_size=1, max_size=3),
    )


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            yield from _strings(getattr(value, f.name))
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, tuple | list | frozenset):
        for v in value:
            yield from _strings(v)


def _good_count(items: list[Any], good: Any) -> int:
    return sum(1 for n in range(len(items)) if good(n) in items)


def _check_clean(records: Any) -> None:
    unsafe = [s for s in _strings(records) if UNSAFE.search(s)]
    assert not unsafe, unsafe[:3]


def _render(model: ClusterModel) -> None:
    """Every row builder over the model, as the tables call them: none may raise, and a
    cell is always `Text` (never a `str`, which DataTable would read as markup)."""
    rows = [
        node_row(s, metrics=bool(model.metrics_available), stale=False) for s in model.node_list()
    ]
    rows += [pod_row(p, model, NOW) for p in model.pods.values()]
    feed = model.feed()
    rows += [feed_row(item, NOW) for item in feed]
    for _key, cells in rows:
        assert all(isinstance(cell, Text) for cell in cells)
    for item in feed:
        describe_item(item, NOW)
    summary(model, "fuzz")


@FUZZ
@given(mixed(event, good_event))
def test_an_event_list_keeps_its_good_events_whatever_the_others_hold(items: list[Any]) -> None:
    read = read_each(parse_event, items)
    kept = {r.pod for r in read.parsed if isinstance(r, Decision)}
    goods = _good_count(items, good_event)
    assert {f"good-{n}" for n in range(goods)} <= kept
    assert len(read.parsed) + len(read.skipped) <= len(items)
    _check_clean(read.parsed)
    model = ClusterModel()
    model.apply(ch.NodesListed((parse_node(good_node(0)),)))
    model.apply(ch.PodsListed(tuple(parse_pod(good_pod(n)) for n in range(goods))))
    model.apply(ch.EventsSeen(read.parsed))
    for n in range(goods):
        placement = model.placements[f"pod-uid-{n}"]
        decision = model.decision_for(placement)
        assert decision is not None and decision.scores == {"good-0": 87.5}
        assert decision.why == "[red]least used[/red]"  # kept as typed, never markup
    _render(model)


@FUZZ
@given(mixed(pod, good_pod))
def test_a_pod_list_keeps_its_good_pods_whatever_the_others_hold(items: list[Any]) -> None:
    read = read_each(parse_pod, items)
    assert len(read.parsed) + len(read.skipped) == len(items)
    kept = {p.key for p in read.parsed}
    goods = _good_count(items, good_pod)
    assert {f"[bold]shop[/bold]/good-{n}" for n in range(goods)} <= kept
    _check_clean(read.parsed)
    model = ClusterModel()
    model.apply(ch.NodesListed((parse_node(good_node(0)),)))
    model.apply(ch.PodsListed(read.parsed))
    assert model.nodes["good-0"].pods >= goods
    _render(model)


@FUZZ
@given(mixed(node, good_node), st.lists(node_metrics, max_size=3))
def test_a_node_list_keeps_its_good_nodes_whatever_the_others_hold(
    items: list[Any], usage: list[Any]
) -> None:
    read = read_each(parse_node, items)
    assert len(read.parsed) + len(read.skipped) == len(items)
    goods = _good_count(items, good_node)
    by_name = {n.name: n for n in read.parsed}
    for n in range(goods):
        assert by_name[f"good-{n}"].allocatable.cpu_m == 4000
        assert by_name[f"good-{n}"].roles == ("[bold]",)
    _check_clean(read.parsed)
    metrics = read_each(parse_node_metrics, usage + [good_node_metrics(n) for n in range(goods)])
    model = ClusterModel()
    model.apply(ch.NodesListed(read.parsed))
    model.apply(ch.MetricsPolled(NOW, metrics.parsed))
    for n in range(goods):
        assert model.nodes[f"good-{n}"].cpu_fraction() is not None
    _render(model)


@FUZZ
@given(mixed(node_metrics, good_node_metrics), mixed(pod_metrics, good_pod_metrics))
def test_metrics_lists_keep_their_good_items_whatever_the_others_hold(
    nodes: list[Any], pods: list[Any]
) -> None:
    node_usage = read_each(parse_node_metrics, nodes)
    pod_usage = read_each(parse_pod_metrics, pods)
    assert len(node_usage.parsed) + len(node_usage.skipped) == len(nodes)
    assert len(pod_usage.parsed) + len(pod_usage.skipped) == len(pods)
    for n in range(_good_count(nodes, good_node_metrics)):
        assert any(u.name == f"good-{n}" and u.usage.cpu_m == 1000 for u in node_usage.parsed)
    for n in range(_good_count(pods, good_pod_metrics)):
        assert any(u.key == f"[bold]shop[/bold]/good-{n}" for u in pod_usage.parsed)
    for usage in (*node_usage.parsed, *pod_usage.parsed):
        assert math.isfinite(usage.usage.cpu_m) and abs(usage.usage.memory) < 2**63
    _check_clean((node_usage.parsed, pod_usage.parsed))


DEEP_RAW = [
    msgspec.Raw(b"[" * 5000 + b"]" * 5000),
    msgspec.Raw(b'{"metadata": {"name": "deep"}, "spec": ' + b"[" * 5000 + b"]" * 5000 + b"}"),
]


@FUZZ
@given(
    st.sampled_from(["nodes", "pods", "events[reason=LoadwiseScored]"]),
    st.lists(st.one_of(event, pod, node, any_json), min_size=1, max_size=6),
    st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
)
def test_the_live_source_skips_and_counts_what_it_cannot_read(
    name: str, documents: list[Any], kind: str
) -> None:
    """The live source's list and watch handlers, fed raw bytes as the reflector hands
    them over: JSON nested past the decoder's recursion limit included (NaN and the
    infinities are not: no API server writes them)."""
    # one object per uid (or name, without one), as in any list an API server sends: two
    # unreadable documents with one uid are one object skipped (the ledger keys by it)
    keys: set[str] = set()
    unique = []
    for d in documents:
        key = object_key(d)
        if key and key in keys:
            continue
        keys.add(key)
        unique.append(d)
    raws = [
        msgspec.Raw(json.dumps(d).encode())
        for d in unique
        if "NaN" not in json.dumps(d) and "Infinity" not in json.dumps(d)
    ] + DEEP_RAW
    source = KubernetesSource(ApiClient(Configuration()))
    stream = next(s for s in source.streams if s.name == name)
    listed, *counted = source.listed(stream, raws)
    assert isinstance(listed, ch.NodesListed | ch.PodsListed | ch.EventsSeen)
    counts = [c.count for c in counted if isinstance(c, ch.ObjectsSkipped) and c.stream == name]
    assert len(counts) == len(counted) <= 1
    skipped = counts[0] if counts else 0
    assert skipped >= len(DEEP_RAW)
    if isinstance(listed, ch.NodesListed):
        assert len(listed.nodes) + skipped == len(raws)
    if isinstance(listed, ch.PodsListed):
        assert len(listed.pods) + skipped == len(raws)
    for raw in raws:
        for change in source.watched(stream, kind, raw):
            assert not isinstance(change, ch.ApiUnreachable | ch.ApiReachable)


def test_the_reported_event_no_longer_fails_the_feed() -> None:
    """The finding: a LoadwiseScored Event scoring a node 1 followed by 400 zeros."""
    hostile = good_event(1)
    hostile["metadata"]["annotations"][DECISION_ANNOTATION] = (
        '{"scores": {"good-0": 1' + "0" * 400 + ', "good-1": 12}}'
    )
    read = read_each(parse_event, [good_event(0), hostile, {"involvedObject": [1]}])
    assert [type(r) for r in read.parsed] == [Decision, Decision]
    assert read.parsed[1].scores == {"good-1": 12.0}  # the unrankable score alone is dropped
    assert read.skipped == ("#2",)  # `.get` on a list: skipped, counted, keyed by position


def test_recorded_cluster_counts_what_it_skips() -> None:
    cluster = RecordedCluster(
        nodes={"items": [good_node(0), {"metadata": {"name": "bad"}, "status": {"conditions": 7}}]},
        pods={"items": [good_pod(0), {"metadata": {"uid": "p"}, "spec": {"containers": [[]]}}]},
        events={"items": [good_event(0), {"metadata": {"name": "e"}, "involvedObject": "x"}]},
        node_metrics=[
            {"items": [good_node_metrics(0), {"metadata": [], "usage": {}}]},
            {"items": [good_node_metrics(0)]},
        ],
    )
    model = ClusterModel()
    model.apply_all(cluster.changes(now=NOW))
    assert list(model.nodes) == ["good-0"] and len(model.pods) == 1 and model.has_decisions
    # The last poll skipped nothing: its count replaces the first poll's.
    assert model.skipped == {"nodes": 1, "pods": 1, "events": 1}
    assert summary(model, "demo").endswith("· 3 objects skipped")
    model.apply(ch.ObjectsSkipped("pods", 0))
    assert summary(model, "demo").endswith("· 2 objects skipped")


def test_the_ledger_counts_an_object_only_while_it_is_unreadable() -> None:
    ledger = SkipLedger()
    assert ledger.listed(["a", "b"]) and ledger.count == 2
    assert not ledger.listed(["a", "c"])  # same count: no change to send
    assert ledger.watched("d", readable=False) and ledger.count == 3
    assert ledger.watched("d", readable=True) and ledger.count == 2  # fixed by its owner
    assert ledger.deleted("a") and ledger.count == 1  # deleted, or an Event expired
    assert not ledger.deleted("zzz")
    assert ledger.listed([]) and ledger.count == 0


@pytest.mark.parametrize("value", ["1e400", "1" * 100_000, "9" * 30, float("inf"), float("nan")])
def test_an_out_of_range_quantity_reads_as_zero(value: Any) -> None:
    node = parse_node(
        {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": value, "pods": value}}}
    )
    assert node.allocatable.cpu_m == 0 and node.pods_allocatable == 0


def test_an_eviction_is_kept_beside_a_hostile_one() -> None:
    eviction = {
        "metadata": {"uid": "ev-1"},
        "regarding": {"kind": "Pod", "namespace": "shop", "name": "web"},
        "note": "pod eviction from n1 node by sigs.k8s.io/descheduler",
        "reportingController": "sigs.k8s.io.descheduler",
        "eventTime": "2026-05-04T10:00:00Z",
    }
    hostile = {**eviction, "metadata": {"uid": "ev-2"}, "source": ["x"], "reportingController": 1}
    read = read_each(parse_event, [hostile, eviction])
    assert [r.uid for r in read.parsed if isinstance(r, Eviction)] == ["ev-1"]
    assert read.skipped == ("ev-2",)
    assert datetime(2026, 5, 4, 10, tzinfo=UTC) == read.parsed[0].at


async def test_the_status_line_shows_the_count_and_the_feed_stays_live(
    recorded: RecordedCluster,
) -> None:
    assert recorded.events is not None
    recorded.events["items"].append(
        {"metadata": {"uid": "bad"}, "reason": "LoadwiseScored", "involvedObject": 7}
    )
    app = make_app(RecordedSource(recorded, now=lambda: NOW), clock=lambda: NOW)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert str(app.screen.sub_title).endswith("· 1 object skipped")
        assert app.model.connected is True and app.model.has_decisions
        assert banner_text(app.model) == ""
