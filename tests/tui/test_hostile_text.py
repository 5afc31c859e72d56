"""Cluster text that tries to act on the dashboard: markup and terminal escape sequences.

Whoever may create an Event, or name a pod, a namespace or (on a cluster they run) a node,
writes text the dashboard shows. These tests put such text into the recorded cluster,
drive the real app through every tab and screen with Pilot, and read what Textual would
send to the terminal: the app must not crash, must show the text as typed (brackets kept),
and nothing from the cluster may reach the terminal as a control character.
"""

from __future__ import annotations

import copy
import io
import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from conftest import NOW, UNSAFE
from rich.console import Console
from textual.pilot import Pilot

from loadwise.extender import events as extender_events
from loadwise.extender import kubeobjects
from loadwise.tui.app import LoadwiseApp, make_app
from loadwise.tui.screens import HelpScreen, MainScreen, NodeDetailScreen
from loadwise.tui.sources import changes as ch
from loadwise.tui.sources.recorded import RecordedCluster, RecordedSource
from loadwise.tui.widgets import FilterBar, PlacementsTable

SIZE = (220, 50)  # wide and tall enough that every hostile string is on screen

# Rendered text holds no tab or newline either: Textual lays them out, never sends them.
LAYOUT = re.compile("[\t\n]")
# In the terminal byte stream Textual itself writes CSI sequences (colours, cursor moves),
# but never an OSC (a hyperlink, the clipboard, the title), a C1 control, or BEL.
NOT_TEXTUAL = re.compile("\x1b[^\\[]|[\x07\x80-\x9f]")

AppFactory = Callable[..., LoadwiseApp]

OSC8 = "\x1b]8;;https://example.invalid\x1b\\click\x1b]8;;\x1b\\"
OSC52 = "\x1b]52;c;aGk=\x07"


def shown(app: LoadwiseApp) -> list[str]:
    """The current screen's lines as the terminal gets them, after checking that none of
    its text is a control character and that the byte stream holds no OSC, C1 or BEL.

    The screen's compositor renders the update that `App._display` writes to the
    terminal driver (the headless test driver discards it; `App.export_screenshot`
    renders the same update).
    """
    update = app.screen._compositor.render_full_update()
    lines = []
    for strip in update.strips:
        line = ""
        for segment in strip:
            unsafe = UNSAFE.search(segment.text) or LAYOUT.search(segment.text)
            assert not unsafe, f"control character shown: {segment.text!r}"
            line += segment.text
        lines.append(line)
    console = Console(
        file=io.StringIO(), force_terminal=True, color_system="truecolor", legacy_windows=False
    )
    stream = update.render_segments(console)
    assert not NOT_TEXTUAL.findall(stream), "an OSC, C1 or BEL reached the terminal"
    return lines


def on_screen(app: LoadwiseApp, text: str) -> bool:
    return any(text in line for line in shown(app))


def table_row(app: LoadwiseApp, *cells: str) -> str:
    """The screen line holding `cells` side by side (only blanks between): a table's row."""
    pattern = re.compile(r"(?:^|\s)" + r"\s+".join(map(re.escape, cells)) + r"(?:\s|$)")
    rows = [line for line in shown(app) if pattern.search(line)]
    assert rows, f"no row shows {cells}"
    return rows[0]


def _hostile_cluster(
    recorded: RecordedCluster, extra_events: list[dict[str, Any]]
) -> RecordedCluster:
    cluster = copy.deepcopy(recorded)
    assert cluster.events is not None
    cluster.events["items"].extend(extra_events)
    return cluster


def _app(cluster: RecordedCluster) -> LoadwiseApp:
    return make_app(RecordedSource(cluster, now=lambda: NOW), clock=lambda: NOW)


async def _visit(pilot: Pilot[None], *keys: str) -> None:
    await pilot.press(*keys)
    await pilot.pause()


def _newest_row(app: LoadwiseApp) -> str:
    """The feed's row one second old: the hostile Event's."""
    return next(line for line in shown(app) if re.match(r"\W*1s\s+evicted\s", line))


def _eviction(recorded: RecordedCluster, message: str, seconds_ago: int = 1) -> dict[str, Any]:
    """A descheduler eviction Event as its events.k8s.io recorder writes it, newest of all."""
    assert recorded.events is not None
    template = next(e for e in recorded.events["items"] if e.get("action") == "Descheduled")
    event = copy.deepcopy(template)
    event["message"] = message
    event["reason"] = "Descheduled"  # no strategy: the WHY column shows the message
    event["metadata"]["uid"] = f"hostile-{seconds_ago}"
    at = NOW - timedelta(seconds=seconds_ago)
    event["eventTime"] = at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return event


# (Event message, the node the NODE column must show, what the operator must read)
MESSAGES = [
    pytest.param(
        "pod eviction from [/x] node by sigs.k8s.io/descheduler",
        "[/x]",
        "pod eviction from [/x] node by sigs.k8s.io/descheduler",
        id="closing-tag-as-node-name",
    ),
    pytest.param(
        "pod eviction from [bold]x[/] node by sigs.k8s.io/descheduler",
        "[bold]x[/]",
        "pod eviction from [bold]x[/] node",
        id="bold-markup",
    ),
    pytest.param(
        "pod eviction from [link=https://example.invalid]x[/link] node",
        "[link=https://example.invalid]x[/link]",
        "pod eviction from [link=https://example.invalid]x[/link] node",
        id="link-markup",
    ),
    pytest.param(
        f"pod eviction from worker-01 node {OSC8}",
        "worker-01",
        "node ^[]8;;https://example.invalid^[\\click^[]8;;^[\\",
        id="osc8-hyperlink",
    ),
    pytest.param(
        f"pod eviction from worker-01 node {OSC52}",
        "worker-01",
        "node ^[]52;c;aGk=^G",
        id="osc52-clipboard",
    ),
    pytest.param(
        "pod eviction from worker-01 node \x1b[2J\x1b[31mred\x1b[0m\r",
        "worker-01",
        "node ^[[2J^[[31mred^[[0m^M",
        id="csi",
    ),
    pytest.param(
        "pod eviction from worker-01 node \x9b2J \x9d52;c;aGk=\x9c",
        "worker-01",
        "node ^[[2J ^[]52;c;aGk=^[\\",
        id="c1-csi-osc",
    ),
    pytest.param(
        "pod eviction from worker-01 node \u202eevil\u202c and \u2067more\u2069",
        "worker-01",
        "node \ufffdevil\ufffd and \ufffdmore\ufffd",
        id="bidi-override",
    ),
    pytest.param(  # kept, and laid out by Textual: no tab or newline reaches the terminal
        "pod eviction from worker-01 node\tby\nsomeone",
        "worker-01",
        "pod eviction from worker-01 node",
        id="tab-newline",
    ),
]


@pytest.mark.parametrize(("message", "node", "expected"), MESSAGES)
async def test_hostile_eviction_message_is_shown_as_text(
    recorded: RecordedCluster, message: str, node: str, expected: str
) -> None:
    app = _app(_hostile_cluster(recorded, [_eviction(recorded, message)]))
    async with app.run_test(size=SIZE) as pilot:
        await _visit(pilot, "2")
        table = app.screen.query_one(PlacementsTable)
        assert table.current_item is not None and table.current_item.eviction is not None
        assert table.current_item.eviction.uid == "hostile-1"
        row = _newest_row(app)
        assert re.search(rf"\s{re.escape(node)}\s+descheduler\s", row), row  # NODE column
        assert expected in row  # WHY: the Event names no strategy, so its message
        # The panel under the feed describes the highlighted row and quotes the message.
        assert on_screen(app, f"from {node} (1s ago) by the descheduler")
        assert on_screen(app, expected)


# A node, a namespace, a pod, a role label and a scheduler name with markup and escapes in
# them. A real API server refuses such names (they must be DNS-1123 names), unlike Event
# messages, reasons and annotations; a recorded directory (`--demo DIR`), or a server that
# is not what it claims to be, can serve anything.
NODE = "edge-[/x]"
ROLE = "[bold]gpu[/]"
NAMESPACE = "[red]shop"
POD = "web-[link=https://example.invalid]1"
SCHEDULER = "[i]sched\x1b]0;pwned\x07"
SCHEDULER_SHOWN = "[i]sched^[]0;pwned^G"


def _hostile_objects(recorded: RecordedCluster) -> RecordedCluster:
    cluster = copy.deepcopy(recorded)
    at = NOW - timedelta(seconds=2)
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    cluster.nodes["items"].append(
        kubeobjects.node(
            NODE,
            cpu="4",
            memory="8Gi",
            labels={"kubernetes.io/hostname": NODE, f"node-role.kubernetes.io/{ROLE}": ""},
            ready=True,
            internal_ip="10.0.0.99",
            node_info={"kubeletVersion": f"v1.33.4 {OSC52}"},
            created="2026-04-03T10:30:00Z",
        )
    )
    cluster.pods["items"].append(
        kubeobjects.pod(
            POD,
            namespace=NAMESPACE,
            uid="uid-hostile-pod",
            containers=[kubeobjects.container("web", requests={"cpu": "100m", "memory": "64Mi"})],
            node_name=NODE,
            phase="Running",
            scheduled_at=stamp,
            created=stamp,
            extra={"schedulerName": SCHEDULER},
        )
    )
    # The extender's own Event builder, as it writes the Event for a pod it scored.
    decision = extender_events.Decision(
        policy="least-used",
        source="[b]load-watcher",
        scores={NODE: 9, "worker-01": 7, "worker-02": 3},
        use={NODE: [12, 30], "worker-01": [40, 55], "worker-02": [70, 80]},
        failed={"worker-03": f"[bold]cpu[/] 93% > 90% threshold {OSC52}"},
        best="worker-01",
        why="[/x] cpu 40%, memory 55% after placement \x1b[31m",
        tied=None,
        bound=NODE,
    )
    event = extender_events.build_event(
        POD,
        NAMESPACE,
        "uid-hostile-pod",
        decision,
        now=at.timestamp(),
        instance="cp-1",
    )
    # Per-node thresholds, a key newer extenders add to the decision (its absence is the
    # norm: the other Events of the recorded cluster do not carry it).
    annotations = event["metadata"]["annotations"]  # type: ignore[index]
    data = json.loads(annotations[extender_events.ANNOTATION])
    data["thresholds"] = {NODE: {"cpu": 80, "memory": 85.5}, "worker-03": {"cpu": 95}}
    annotations[extender_events.ANNOTATION] = json.dumps(data)
    event["metadata"]["uid"] = "hostile-decision"  # type: ignore[index]
    assert cluster.events is not None
    cluster.events["items"].append(event)
    return cluster


async def test_names_decisions_and_errors_are_shown_as_text_on_every_screen(
    recorded: RecordedCluster,
) -> None:
    app = _app(_hostile_objects(recorded))
    async with app.run_test(size=SIZE) as pilot:
        source = app.source
        assert isinstance(source, RecordedSource)
        # API error texts quote the server's Status message: cluster text as well.
        source.push(
            ch.MetricsUnavailable(f"metrics.k8s.io answered 503: [/x] {OSC52}"),
            ch.ApiUnreachable(f"forbidden (403): [bold]no[/] {OSC8}", 4, NOW),
        )
        app.drain()
        app.revision += 1
        await pilot.pause()

        # Nodes tab: the node's name and role, the banner and the notice.
        table_row(app, NODE, ROLE, "Ready")
        assert on_screen(app, "forbidden (403): [bold]no[/] ^[]8;;https://example.invalid")
        assert on_screen(app, "metrics.k8s.io answered 503: [/x] ^[]52;c;aGk=^G")

        # The filter line's text goes into the table's title.
        await _visit(pilot, "slash", *"[/x]", "enter")
        assert on_screen(app, "filter: [/x]")
        table_row(app, NODE, ROLE, "Ready")

        # Node detail: the summary, the title and the pods table.
        await _visit(pilot, "enter")
        assert isinstance(app.screen, NodeDetailScreen) and app.screen.node == NODE
        assert on_screen(app, f"Pods on {NODE} (1)")
        assert on_screen(app, "kubelet v1.33.4 ^[]52;c;aGk=^G")
        assert f" {SCHEDULER_SHOWN} " in table_row(app, NAMESPACE, POD, "Running")
        await _visit(pilot, "escape", "escape")
        assert isinstance(app.screen, MainScreen)

        # Placements tab: the hostile pod's binding is the newest row, with its decision.
        await _visit(pilot, "2")
        table = app.screen.query_one(PlacementsTable)
        item = table.current_item
        assert item is not None and item.placement is not None and item.placement.node == NODE
        row = table_row(app, "2s", "bound", NAMESPACE, POD, NODE, SCHEDULER_SHOWN, "9 vs 7 (3)")
        # WHY: the bound node's figures, that it is not the favourite, and its thresholds.
        assert "cpu 12% mem 30% ≠ fav worker-01  thresholds cpu 80% mem 85.5%  ✗1 filtered" in row
        # The decision panel.
        assert on_screen(app, f"{NAMESPACE}/{POD} → {NODE}  2s ago, by {SCHEDULER_SHOWN}")
        assert on_screen(app, "load from [b]load-watcher")
        assert on_screen(app, "← [/x] cpu 40%, memory 55% after placement ^[[31m")
        assert on_screen(app, "✗ filtered: [bold]cpu[/] 93% > 90% threshold ^[]52;c;aGk=^G")
        # The per-node thresholds the decision carries, on the line of the node they are for.
        candidate = re.compile(
            rf"\s{re.escape(NODE)}\s+█+░*\s+9\s+cpu 12%, mem 30%\s+bound\s+"
            r"thresholds cpu 80%, mem 85\.5%\s"
        )
        assert any(candidate.search(line) for line in shown(app))
        assert on_screen(app, "worker-03           ✗ filtered: [bold]cpu[/] 93% > 90% threshold")
        assert on_screen(app, "^[]52;c;aGk=^G  (thresholds cpu 95%)")

        # Enter on the binding opens the node it went to; the help screen; back.
        await _visit(pilot, "enter")
        assert isinstance(app.screen, NodeDetailScreen) and app.screen.node == NODE
        shown(app)
        await _visit(pilot, "escape", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown(app)
        await _visit(pilot, "escape")
        assert isinstance(app.screen, MainScreen)
        for bar in app.screen.query(FilterBar):
            assert not bar.display


async def test_typed_filter_with_brackets_is_text(build_app: AppFactory) -> None:
    """The operator's own filter text is not markup either (it is shown in the title)."""
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await _visit(pilot, "slash", *"[bold]", "enter")
        assert on_screen(app, "filter: [bold]")
        await _visit(pilot, "2", "slash", *"[/", "enter")
        assert on_screen(app, "filter: [/")
