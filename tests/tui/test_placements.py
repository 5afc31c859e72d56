"""The WHY column and the decision panel explain the node the pod WENT to (decision v2)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rich.console import Console, RenderableType
from rich.text import Text

from loadwise.tui.model import FeedItem, Placement
from loadwise.tui.objects import Decision, parse_event
from loadwise.tui.widgets.placements import describe_item, feed_row

NOW = datetime(2026, 5, 4, 10, 30, tzinfo=UTC)
WHY_COLUMN, SCORE_COLUMN = 7, 6

V2: dict[str, Any] = {
    "policy": "least-used",
    "source": "load-watcher",
    "stale": False,
    "scores": {"node-a": 9, "node-b": 7, "node-c": 9},
    "use": {"node-a": [12, 30], "node-b": [40, 55], "node-c": [13, 29]},
    "estimated": ["node-b"],
    "omitted": 0,
    "failed": {"node-d": "memory 93% > 90% threshold"},
    "best": "node-a",
    "why": "cpu 12%, memory 30% after placement",
    "tied": ["node-a", "node-c"],
}


def _decision(data: dict[str, Any], **extra: Any) -> Decision:
    """Through the real parser, from the annotation as the extender writes it."""
    event = {
        "metadata": {
            "namespace": "shop",
            "annotations": {"loadwise.dev/decision": json.dumps(data | extra)},
        },
        "involvedObject": {"kind": "Pod", "namespace": "shop", "name": "web-1", "uid": "u1"},
        "reason": "LoadwiseScored",
        "lastTimestamp": "2026-05-04T10:29:00Z",
    }
    parsed = parse_event(event)
    assert isinstance(parsed, Decision)
    return parsed


def _item(node: str, decision: Decision | None) -> FeedItem:
    at = NOW - timedelta(seconds=30)
    placement = Placement("shop", "web-1", "u1", node, "loadwise-scheduler", at)
    return FeedItem(at, placement, decision)


def _cell(node: str, decision: Decision | None, column: int = WHY_COLUMN) -> str:
    cell = feed_row(_item(node, decision), NOW)[1][column]
    return cell.plain if isinstance(cell, Text) else cell


def _panel(node: str, decision: Decision) -> str:
    renderable: RenderableType = describe_item(_item(node, decision), NOW)
    console = Console(width=160, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_v2_fields_are_parsed() -> None:
    d = _decision(V2, bound="node-c")
    assert d.use == {"node-a": (12, 30), "node-b": (40, 55), "node-c": (13, 29)}
    assert d.estimated == {"node-b"} and d.tied == ("node-a", "node-c")
    assert d.omitted == 0 and d.bound == "node-c" and d.went_to("") == "node-c"


def test_v2_garbage_fields_are_dropped_not_fatal() -> None:
    d = _decision(
        V2,
        use={"node-a": [12, None], "node-b": "hot", "node-c": [1, 2, 3], "node-e": [True, 4.6]},
        estimated="node-b",
        tied=[5, "node-a", None],
        omitted="3",
        bound=None,
        best=None,
    )
    assert d.use == {"node-a": (12, None), "node-e": (None, 5)}
    assert d.estimated == frozenset() and d.tied == ("node-a",)
    assert d.omitted == 0 and d.bound == "" and d.best == ""
    assert d.scores == {"node-a": 9.0, "node-b": 7.0, "node-c": 9.0}


def test_row_of_pod_bound_elsewhere_shows_that_nodes_figures() -> None:
    """The extender favoured node-a, the scheduler's own plugins chose node-b."""
    d = _decision(V2 | {"tied": []})
    why = _cell("node-b", d)
    assert "cpu 40% mem 55%" in why
    assert "12%" not in why and "30%" not in why  # not the favourite's figures
    assert "≠ fav node-a" in why
    assert _cell("node-b", d, SCORE_COLUMN) == "7 vs 9 (3)"


def test_bound_from_the_decision_when_the_pod_has_no_node_yet() -> None:
    d = _decision(V2 | {"tied": []}, bound="node-b")
    assert "cpu 40% mem 55%" in _cell("", d)


@pytest.mark.parametrize("went", ["node-a", "node-c"])
def test_tie_names_the_other_tied_node(went: str) -> None:
    """kube-scheduler picks among equal totals at random: either tied node may get the pod."""
    d = _decision(V2, bound=went)
    why = _cell(went, d)
    other = "node-c" if went == "node-a" else "node-a"
    assert f"tie {other}" in why
    assert "≠ fav" not in why
    figures = {"node-a": "12%", "node-c": "13%"}
    assert figures[went] in why and figures[other] not in why
    panel = _panel(went, d)
    if went == "node-a":
        assert "scheduler chose" not in panel
    else:
        assert (
            "scheduler chose node-c (9; cpu 13%, mem 29%) over favourite node-a (9): tie" in panel
        )


def test_estimated_figures_are_marked() -> None:
    d = _decision(V2 | {"tied": []})
    assert "cpu 40% mem 55% est. ≠ fav node-a" in _cell("node-b", d)
    assert "est." not in _cell("node-a", d)
    panel = _panel("node-b", d).splitlines()
    line = next(line for line in panel if line.strip().startswith("node-b"))
    assert "bound" in line and "est." in line and "best" not in line


def test_bound_node_not_among_the_listed_candidates() -> None:
    d = _decision(V2 | {"tied": [], "omitted": 484}, bound="node-z")
    why = _cell("node-z", d)
    assert why.startswith("not in the 3 listed") and "fav node-a" in why
    assert _cell("node-z", d, SCORE_COLUMN) == "? vs 9 (487)"
    panel = _panel("node-z", d)
    assert "it is not among the listed candidates" in panel
    assert "484 more scored nodes" in panel


def test_panel_marks_best_bound_tied_and_estimated() -> None:
    d = _decision(V2, bound="node-c")
    lines = {line.split()[0]: line for line in _panel("node-c", d).splitlines()[2:] if line}
    assert "bound" in lines["node-c"] and "tie" in lines["node-c"]
    assert "best" in lines["node-a"] and "tie" in lines["node-a"]
    assert "← cpu 12%, memory 30% after placement" in lines["node-a"]
    assert "est." in lines["node-b"] and "cpu 40%, mem 55%" in lines["node-b"]
    assert "filtered: memory 93%" in lines["node-d"]


V1 = {
    "policy": "least-used",
    "source": "load-watcher",
    "stale": False,
    "scores": {"node-a": 9, "node-b": 7},
    "failed": {},
    "best": "node-a",
    "why": "cpu 12%, memory 30% after placement",
}


def test_v1_decision_on_the_favourite_renders_as_before() -> None:
    d = _decision(V1)
    assert _cell("node-a", d) == "cpu 12%, memory 30% after placement"
    assert _cell("node-a", _decision(V1, use="garbage")) == "cpu 12%, memory 30% after placement"
    assert _cell("node-a", d, SCORE_COLUMN) == "9 vs 7 (2)"
    assert "scheduler chose" not in _panel("node-a", d)


def test_v1_decision_elsewhere_attributes_the_reason_to_the_favourite() -> None:
    d = _decision(V1)
    assert _cell("node-b", d) == "≠ fav node-a (cpu 12%, memory 30% after placement)"


def test_no_decision() -> None:
    assert _cell("node-a", None) == "no LoadwiseScored Event"


THRESHOLDS = {"node-b": {"cpu": 80, "memory": 85.5}, "node-d": {"memory": 88}}


def test_per_node_thresholds_are_parsed_when_the_decision_carries_them() -> None:
    d = _decision(V2, thresholds=THRESHOLDS)
    assert d.thresholds == {"node-b": {"cpu": 80.0, "memory": 85.5}, "node-d": {"memory": 88.0}}
    assert _decision(V2).thresholds == {}  # older Events have no such key
    garbage = _decision(
        V2,
        thresholds={
            "node-a": {"cpu": "80", "memory": None},  # nothing usable: the node is left out
            "node-b": {"cpu": True, "memory": 1e999, "pods": 50},  # bool and inf dropped
            "node-c": [80, 85],
        },
    )
    assert garbage.thresholds == {"node-b": {"pods": 50.0}}
    assert _decision(V2, thresholds=[1, 2]).thresholds == {}


def test_panel_shows_a_nodes_own_thresholds_beside_it() -> None:
    d = _decision(V2 | {"tied": []}, bound="node-b", thresholds=THRESHOLDS)
    lines = {line.split()[0]: line for line in _panel("node-b", d).splitlines()[2:] if line}
    assert lines["node-b"].rstrip().endswith("bound est.  thresholds cpu 80%, mem 85.5%")
    assert "thresholds" not in lines["node-a"] and "thresholds" not in lines["node-c"]
    assert (
        lines["node-d"]
        .rstrip()
        .endswith("✗ filtered: memory 93% > 90% threshold  (thresholds mem 88%)")
    )


def test_why_column_names_the_thresholds_of_the_node_the_pod_went_to() -> None:
    d = _decision(V2 | {"tied": []}, thresholds=THRESHOLDS)
    assert _cell("node-b", d) == (
        "cpu 40% mem 55% est. ≠ fav node-a  thresholds cpu 80% mem 85.5%  ✗1 filtered"
    )
    assert "thresholds" not in _cell("node-a", d)
    assert _cell("node-d", d) == (
        "filtered here: memory 93% > 90% threshold  thresholds mem 88%  ✗1 filtered"
    )


def test_prioritize_only_says_scored_lowest_where_it_would_say_filtered() -> None:
    """An extender without a filter call (filter.enabled false) scores a node over its
    threshold lowest; a pod can still land there, and the screen says what happened."""
    d = _decision(V2 | {"tied": []}, scored_lowest=True)
    assert d.scored_lowest
    assert _cell("node-d", d) == "scored lowest here: memory 93% > 90% threshold  ✗1 scored lowest"
    assert "✗ scored lowest: memory 93% > 90% threshold" in _panel("node-d", d)
    assert "filtered" not in _panel("node-d", d)
    assert "over favourite node-a (9): it was scored lowest" in _panel("node-d", d)
    both = _decision(V2 | {"tied": []})
    assert "over favourite node-a (9): it was filtered out" in _panel("node-d", both)
    assert not _decision(V2, scored_lowest="yes").scored_lowest  # only JSON true counts
