"""A scheduler edit a loadwise run left unfinished shows on its node's row and detail.

roles/loadwise_scheduler_config (tasks/marker.yml) puts the annotation
``loadwise.dev/scheduler-edit-interrupted`` on the Node before it changes that node's
scheduler configuration and takes it away once the scheduler is proven healthy. The
annotation is cluster text: whoever may annotate a Node writes what the dashboard shows, so
markup in it stays text and control characters never reach the terminal.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from conftest import NOW
from test_hostile_text import OSC52, SIZE, _visit, on_screen, shown

from loadwise.tui.app import LoadwiseApp, make_app
from loadwise.tui.objects import SCHEDULER_EDIT_ANNOTATION, parse_edit_marker, parse_node
from loadwise.tui.screens import MainScreen, NodeDetailScreen
from loadwise.tui.sources.recorded import RecordedCluster, RecordedSource

MARKER = {
    "host": "cp-1",
    "action": "install",
    "files": ["/etc/kubernetes/loadwise-scheduler-config.yaml", "/etc/kubernetes/manifests/x"],
    "started_at": "2026-11-28T05:00:00Z",
    "marker": "/var/lib/loadwise/backup/IN-PROGRESS",
}


def _node(annotation: Any) -> dict[str, Any]:
    annotations = {"kept.example/other": "yes"}
    if annotation is not None:
        annotations[SCHEDULER_EDIT_ANNOTATION] = annotation
    return {"metadata": {"name": "cp-1", "annotations": annotations}, "status": {}}


def test_the_marker_reads_as_one_plain_line() -> None:
    info = parse_node(_node(json.dumps(MARKER)))
    assert info.edit_interrupted == (
        "install started 2026-11-28T05:00:00Z on "
        "/etc/kubernetes/loadwise-scheduler-config.yaml, /etc/kubernetes/manifests/x"
    )
    assert parse_node(_node(None)).edit_interrupted == ""
    assert parse_node({"metadata": {"name": "n"}}).edit_interrupted == ""


def test_a_marker_that_is_not_the_roles_json_still_marks_the_edit() -> None:
    assert parse_edit_marker("cut short {") == "marker: cut short {"
    assert parse_edit_marker(json.dumps(["a"])) == 'marker: ["a"]'
    assert parse_edit_marker("") == "(empty marker)"
    assert parse_edit_marker(17) == "(unreadable marker)"
    assert parse_edit_marker("{}") == "change started at an unknown time"
    many = dict(MARKER, files=[f"/f{i}" for i in range(10)], action=None)
    assert parse_edit_marker(json.dumps(many)) == (
        "change started 2026-11-28T05:00:00Z on /f0, /f1, /f2 and 7 more"
    )
    long = parse_edit_marker(json.dumps(dict(MARKER, action="x" * 5000)))
    assert long.startswith("x" * 100) and len(long) < 500


def test_control_characters_in_the_marker_are_made_safe() -> None:
    hostile = dict(MARKER, action=f"install{OSC52}", files=["/a\u202e/b"])
    line = parse_edit_marker(json.dumps(hostile))
    assert "\x1b" not in line and "\x07" not in line and "\u202e" not in line
    assert line.startswith("install^[]52;c;aGk=^G started")


def _app(recorded: RecordedCluster, marker: str) -> tuple[LoadwiseApp, str]:
    cluster = copy.deepcopy(recorded)
    node = cluster.nodes["items"][0]
    node["metadata"].setdefault("annotations", {})[SCHEDULER_EDIT_ANNOTATION] = marker
    source = RecordedSource(cluster, now=lambda: NOW)
    return make_app(source, clock=lambda: NOW, refresh_seconds=15), node["metadata"]["name"]


async def test_the_row_and_the_detail_warn_with_the_marker_as_text(
    recorded: RecordedCluster,
) -> None:
    marker = json.dumps(dict(MARKER, action="[bold red]install[/]", started_at=f"now{OSC52}"))
    app, name = _app(recorded, marker)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await _visit(pilot, "N")  # by name: the marked node's place is known
        rows = [line for line in shown(app) if f" {name} " in line]
        assert rows and "⚠ scheduler edit interrupted" in rows[0], rows
        others = [line for line in shown(app) if "⚠ scheduler edit interrupted" in line]
        assert len(others) == 1, others  # the other nodes carry no warning

        await _visit(pilot, "slash", *name, "enter", "enter")
        assert isinstance(app.screen, NodeDetailScreen) and app.screen.node == name
        assert on_screen(app, "A loadwise run stopped half way through a scheduler change")
        # the markup in the annotation is shown as the characters it is
        assert on_screen(app, "[bold red]install[/] started now^[]52;c;aGk=^G")
        await _visit(pilot, "escape")
        assert isinstance(app.screen, MainScreen)


async def test_a_node_without_the_marker_has_no_warning(recorded: RecordedCluster) -> None:
    source = RecordedSource(recorded, now=lambda: NOW)
    app = make_app(source, clock=lambda: NOW, refresh_seconds=15)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not on_screen(app, "scheduler edit interrupted")
        await _visit(pilot, "enter")
        assert isinstance(app.screen, NodeDetailScreen)
        assert not on_screen(app, "stopped half way")
