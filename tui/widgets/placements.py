"""The placements feed: bindings joined with the extender's decision, and evictions."""

from __future__ import annotations

from datetime import datetime

from rich.console import Group, RenderableType
from rich.text import Text
from textual.message import Message
from textual.widgets import Static

from ..model import FeedItem
from ..objects import Decision
from .cells import age
from .table import Cell, KeyedTable, Row

__all__ = ["DecisionPanel", "PlacementsTable", "describe_item", "feed_row"]


def _score_summary(decision: Decision | None) -> Text:
    if decision is None:
        return Text("–", style="dim")
    if not decision.scores:
        return Text("filter only", style="dim")
    ranked = sorted(decision.scores.values(), reverse=True)
    best = decision.scores.get(decision.best, ranked[0])
    runner = next((s for s in ranked if s != best), None) if len(ranked) > 1 else None
    text = Text(f"{best:g}", style="bold green")
    if runner is not None:
        text.append(f" vs {runner:g}", style="dim")
    text.append(f" ({len(decision.scores)})", style="dim")
    return text


def feed_row(item: FeedItem, now: datetime) -> Row:
    if item.placement is not None:
        p, d = item.placement, item.decision
        why = (
            Text(d.why) if d is not None and d.why else Text("no LoadwiseScored Event", style="dim")
        )
        if d is not None and d.failed:
            why.append(f"  ✗{len(d.failed)} filtered", style="yellow")
        cells: tuple[Cell, ...] = (
            age(p.at, now),
            Text("bound", style="green"),
            p.namespace,
            Text(p.pod, style="bold"),
            Text(p.node, style="bold"),
            p.scheduler,
            _score_summary(d),
            why,
        )
    else:
        e = item.eviction
        assert e is not None
        cells = (
            age(e.at, now),
            Text(
                "evict-fail" if e.failed else "evicted",
                style="bold red" if not e.failed else "yellow",
            ),
            e.namespace,
            Text(e.pod, style="bold"),
            e.node or "?",
            "descheduler",
            Text("–", style="dim"),
            Text(e.strategy or e.message, style="magenta"),
        )
    return item.key, cells


def describe_item(item: FeedItem | None, now: datetime) -> RenderableType:
    """The panel under the feed: every candidate's score, the winner's reason, rejections."""
    if item is None:
        return Text("No placements yet.", style="dim")
    if item.eviction is not None:
        e = item.eviction
        text = Text()
        text.append("evicted " if not e.failed else "eviction refused ", style="bold red")
        text.append(f"{e.namespace}/{e.pod}", style="bold")
        text.append(f" from {e.node or '?'} ({age(e.at, now)} ago) by the descheduler")
        if e.strategy:
            text.append(f", strategy {e.strategy}", style="magenta")
        text.append(f"\n{e.message}", style="dim")
        return text
    p, d = item.placement, item.decision
    assert p is not None
    head = Text()
    head.append(f"{p.namespace}/{p.pod}", style="bold")
    head.append(" → ")
    head.append(p.node, style="bold green")
    head.append(f"  {age(p.at, now)} ago, by {p.scheduler}", style="dim")
    if d is None:
        head.append(
            "\nNo LoadwiseScored Event for this pod: it was scheduled without the extender, "
            "or its Event expired (1 h TTL).",
            style="dim",
        )
        return head
    head.append(f"  policy {d.policy or '?'}, load from {d.source or '?'}", style="dim")
    if d.stale:
        head.append("  (load data was STALE)", style="bold yellow")
    lines: list[RenderableType] = [head]
    top = max(d.scores.values(), default=0) or 1
    for node, score in sorted(d.scores.items(), key=lambda kv: (-kv[1], kv[0])):
        line = Text("  ")
        winner = node == (d.best or p.node)
        line.append(f"{node:<20}", style="bold green" if winner else "")
        filled = round(score / top * 20)
        line.append("█" * filled, style="green" if winner else "cyan")
        line.append("░" * (20 - filled), style="dim")
        line.append(f" {score:g}")
        if winner and d.why:
            line.append(f"  ← best: {d.why}", style="green")
        lines.append(line)
    if not d.scores:
        lines.append(Text("  only the filter ran (one node left), no scores", style="dim"))
    for node, reason in sorted(d.failed.items()):
        line = Text("  ")
        line.append(f"{node:<20}", style="yellow")
        line.append(f"✗ filtered: {reason}", style="yellow")
        lines.append(line)
    return Group(*lines)


class PlacementsTable(KeyedTable):
    COLUMNS = (
        ("age", "AGE", 5),
        ("what", "EVENT", 10),
        ("ns", "NAMESPACE", None),
        ("pod", "POD", None),
        ("node", "NODE", None),
        ("sched", "SCHEDULER", None),
        ("score", "SCORE", 12),
        ("why", "WHY", None),
    )

    class NodeChosen(Message):
        """Enter on a feed row: open the node the pod went to (or was evicted from)."""

        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.items: dict[str, FeedItem] = {}

    def render_feed(self, items: list[FeedItem], now: datetime) -> None:
        self.items = {item.key: item for item in items}
        self.show([feed_row(item, now) for item in items])

    @property
    def current_item(self) -> FeedItem | None:
        key = self.current_key
        return self.items.get(key) if key is not None else None

    def on_data_table_row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        if not 0 <= event.cursor_row < len(self._keys):
            return
        item = self.items.get(self.key_at(event.cursor_row))
        if item is None:
            return
        node = (
            item.placement.node
            if item.placement is not None
            else (item.eviction.node if item.eviction else "")
        )
        if node:
            self.post_message(self.NodeChosen(node))


class DecisionPanel(Static):
    """Shows `describe_item` for the highlighted feed row."""
