"""The placements feed: bindings joined with the extender's decision, and evictions."""

from __future__ import annotations

from datetime import datetime

from rich.console import Group, RenderableType
from rich.text import Text
from textual.message import Message
from textual.widgets import Static

from ..model import FeedItem
from ..objects import Decision
from .cells import age, plain
from .table import Cell, KeyedTable, Row

__all__ = ["DecisionPanel", "PlacementsTable", "describe_item", "feed_row"]


def _figures(decision: Decision, node: str, sep: str = ", ") -> str:
    """`cpu 13%, mem 29%`: the after-placement use the policy scored (v2 `use`), or ""."""
    pair = decision.use.get(node)
    if pair is None:
        return ""
    cpu, memory = (f"{v}%" if v is not None else "?" for v in pair)
    return f"cpu {cpu}{sep}mem {memory}"


_SHORT = {"cpu": "cpu", "memory": "mem"}


def _thresholds(decision: Decision, node: str, sep: str = ", ") -> str:
    """`cpu 80%, mem 85%`: the node's own thresholds when the decision carries them, or ""."""
    own = decision.thresholds.get(node)
    if not own:
        return ""
    order = [r for r in _SHORT if r in own] + sorted(r for r in own if r not in _SHORT)
    return sep.join(f"{_SHORT.get(r, r)} {own[r]:g}%" for r in order)


def _others(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]} +{len(names) - 1}"


def _score_summary(decision: Decision | None, node: str) -> Text:
    """The score of the node the pod went to, against the favourite's (or the runner-up's)."""
    if decision is None:
        return Text("–", style="dim")
    if not decision.scores:
        return Text("filter only", style="dim")
    went = decision.went_to(node)
    own = decision.scores.get(went)
    top = max(decision.scores.values())
    # The best other node: the favourite when the pod went elsewhere (its rounded score
    # is the top), else the runner-up, which equals `own` in a tie.
    other = max((s for n, s in decision.scores.items() if n != went), default=None)
    if own is None:
        text = Text("?", style="bold yellow")
    else:
        text = Text(f"{own:g}", style="bold green" if own == top else "bold yellow")
    if other is not None:
        text.append(f" vs {other:g}", style="dim")
    text.append(f" ({len(decision.scores) + decision.omitted})", style="dim")
    return text


def _why(decision: Decision, node: str) -> Text:
    """WHY for the node the pod went to, saying plainly when that is not the favourite.

    Compact, because the column gets what is left of the terminal's width: the figures
    (`use`) of the node the pod went to, then how that node relates to the favourite.
    A v1 decision has no `use`: its `why` (the favourite's reason) is shown as before.
    """
    went, best = decision.went_to(node), decision.best
    text = Text()
    if went in decision.scores or not decision.scores:
        figures = _figures(decision, went, " ")
        if not figures and (went == best or not best):
            figures = decision.why
        text.append(figures)
        if figures and went in decision.estimated:
            text.append(" est.", style="dim")
    sep = " " if text.plain else ""
    if not decision.scores or not best or went == best:
        tied = [n for n in decision.tied if n != went]
        if tied and went in decision.tied:
            text.append(f"{sep}tie {_others(tied)}", style="cyan")
    elif went in decision.scores:
        # The favourite's score is in the SCORE column ("7 vs 9"): the name is enough here.
        if went in decision.tied and best in decision.tied:
            text.append(f"{sep}tie {best} (fav)", style="cyan")
        else:
            text.append(f"{sep}≠ fav {best}", style="yellow")
        if not decision.use and decision.why:  # v1: the only reason given is the favourite's
            text.append(f" ({decision.why})", style="dim")
    elif went in decision.failed:
        text.append(f"{_over(decision)} here: {decision.failed[went]}", style="bold red")
    else:
        text.append(
            f"not in the {len(decision.scores)} listed" if decision.omitted else "not scored",
            style="yellow",
        )
        if best:
            text.append(f" fav {best}", style="dim")
    thresholds = _thresholds(decision, went, " ")
    if thresholds:
        text.append(f"{'  ' if text.plain else ''}thresholds {thresholds}", style="magenta")
    return text


def feed_row(item: FeedItem, now: datetime) -> Row:
    if item.placement is not None:
        p, d = item.placement, item.decision
        why = _why(d, p.node) if d is not None else Text("no LoadwiseScored Event", style="dim")
        if d is not None and d.failed:
            why.append(f"  ✗{len(d.failed)} {_over(d)}", style="yellow")
        cells: tuple[Cell, ...] = (
            plain(age(p.at, now)),
            Text("bound", style="green"),
            plain(p.namespace),
            Text(p.pod, style="bold"),
            Text(p.node, style="bold"),
            plain(p.scheduler),
            _score_summary(d, p.node),
            why,
        )
    else:
        e = item.eviction
        assert e is not None
        cells = (
            plain(age(e.at, now)),
            Text(
                "evict-fail" if e.failed else "evicted",
                style="bold red" if not e.failed else "yellow",
            ),
            plain(e.namespace),
            Text(e.pod, style="bold"),
            plain(e.node or "?"),
            plain("descheduler"),
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
    verdict = _verdict(d, p.node)
    if verdict is not None:
        lines.append(verdict)
    went = d.went_to(p.node)
    top = max(d.scores.values(), default=0) or 1
    for node, score in sorted(d.scores.items(), key=lambda kv: (-kv[1], kv[0])):
        line = Text("  ")
        here, fav = node == went, node == (d.best or went)
        line.append(f"{node:<20}", style="bold green" if here else ("green" if fav else ""))
        filled = round(score / top * 12)
        line.append("█" * filled, style="green" if here else "cyan")
        line.append("░" * (12 - filled), style="dim")
        line.append(f" {score:>2g}")
        figures = _figures(d, node)
        line.append(f"  {figures:<18}" if d.use else "")
        marks = [
            m
            for m, on in (
                ("bound", here),
                ("best", fav),
                ("tie", node in d.tied),
                ("est.", node in d.estimated),
            )
            if on
        ]
        if marks:
            line.append("  " + " ".join(marks), style="bold" if here else "dim")
        thresholds = _thresholds(d, node)
        if thresholds:
            line.append(f"  thresholds {thresholds}", style="magenta")
        if fav and d.why:
            line.append(f"  ← {d.why}", style="green")
        lines.append(line)
    if d.omitted:
        lines.append(Text(f"  … and {d.omitted} more scored nodes, not listed", style="dim"))
    if not d.scores:
        lines.append(Text("  only the filter ran (one node left), no scores", style="dim"))
    for node, reason in sorted(d.failed.items()):
        line = Text("  ")
        line.append(f"{node:<20}", style="yellow")
        line.append(f"✗ {_over(d)}: {reason}", style="yellow")
        thresholds = _thresholds(d, node)
        if thresholds:
            line.append(f"  (thresholds {thresholds})", style="magenta")
        lines.append(line)
    return Group(*lines)


def _over(d: Decision) -> str:
    """What the extender did to a node over its threshold: filtered it out, or (prioritize-
    only) scored it lowest."""
    return "scored lowest" if d.scored_lowest else "filtered"


def _verdict(d: Decision, node: str) -> Text | None:
    """One plain sentence when the scheduler did not take the extender's favourite."""
    went, best = d.went_to(node), d.best
    if not d.scores or not best or went == best:
        return None
    text = Text("  scheduler chose ", style="yellow")
    own = d.scores.get(went)
    figures = _figures(d, went)
    detail = "; ".join(x for x in (f"{own:g}" if own is not None else "", figures) if x)
    text.append(went, style="bold")
    text.append(f" ({detail})" if detail else "")
    fav = d.scores.get(best)
    text.append(" over favourite ")
    text.append(best, style="bold")
    text.append(f" ({fav:g})" if fav is not None else "")
    if own is None:
        over = "it was scored lowest" if d.scored_lowest else "it was filtered out"
        why = over if went in d.failed else "it is not among the listed candidates"
    elif went in d.tied and best in d.tied:
        why = "tie (the scheduler picks among equal totals at random)"
    else:
        why = "the scheduler's own plugin scores were added to the extender's"
    text.append(f": {why}")
    return text


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
        self.show_keys(list(self.items), lambda key: feed_row(self.items[key], now)[1])

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
    """Shows `describe_item` for the highlighted feed row (renderables, never markup)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(markup=False, id=id)
