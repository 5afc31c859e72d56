"""The main screen: the nodes table and the placements feed, as two tabs."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Footer, Header, TabbedContent, TabPane

from ..messages import NodeRequested
from ..model import NodeSort
from ..status import banner_text, is_stale, metrics_stale, nodes_notice, placements_notice, summary
from ..widgets import DecisionPanel, FilterBar, NodesTable, Notice, PlacementsTable
from ..widgets.placements import describe_item
from .base import ModelScreen

__all__ = ["MainScreen"]


class MainScreen(ModelScreen):
    """Nodes (1) and Placements (2); `/` filters the visible table, shift+letter sorts nodes."""

    BINDINGS = [
        Binding("1", "tab('nodes')", "Nodes"),
        Binding("2", "tab('placements')", "Placements"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("C", "sort('cpu')", "Sort CPU", key_display="C"),
        Binding("M", "sort('memory')", "Sort MEM", key_display="M"),
        Binding("N", "sort('name')", "Sort name", key_display="N"),
        Binding("P", "sort('pods')", "Sort pods", key_display="P"),
        Binding("R", "sort('role')", "Sort role", key_display="R", show=False),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    AUTO_FOCUS = "#nodes-table"

    filter_text: reactive[str] = reactive("", init=False)
    """Substring the visible table is narrowed to (name, role, state / pod, node)."""
    sort: reactive[NodeSort] = reactive(NodeSort.CPU, init=False)
    """Node order; CPU first because "which node is hottest" is the first question."""
    descending: reactive[bool] = reactive(True, init=False)

    _nodes_signature: tuple[object, ...] = ()

    @property
    def nodes_table(self) -> NodesTable:
        return self.query_one(NodesTable)

    @property
    def feed_table(self) -> PlacementsTable:
        return self.query_one(PlacementsTable)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Notice(id="banner")
        with TabbedContent(initial="nodes"):
            with TabPane("Nodes [1]", id="nodes"):
                yield Notice(id="nodes-notice", classes="notice")
                yield NodesTable(id="nodes-table")
            with TabPane("Placements [2]", id="placements"):
                yield Notice(id="placements-notice", classes="notice")
                yield PlacementsTable(id="feed-table")
                yield DecisionPanel(id="decision")
        yield FilterBar()
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(FilterBar).display = False
        self.refresh_view()

    # -- rendering ------------------------------------------------------------------------

    @property
    def active_tab(self) -> str:
        return self.query_one(TabbedContent).active or "nodes"

    def refresh_view(self) -> None:
        model, now, refresh = self.model, self.clock(), self.settings.refresh_seconds
        self.sub_title = summary(model, self.description)
        self.query_one("#banner", Notice).say(banner_text(model))
        stale = is_stale(model)
        if self.active_tab == "nodes":
            mstale = metrics_stale(model, now, refresh)
            signature = (
                model.revision,
                self.sort,
                self.descending,
                self.filter_text,
                stale,
                mstale,
            )
            if signature == self._nodes_signature:
                return  # nothing on this tab depends on the clock alone: skip the rebuild
            self._nodes_signature = signature
            self.query_one("#nodes-notice", Notice).say(nodes_notice(model, now, refresh))
            nodes = model.node_list(self.sort, descending=self.descending, text=self.filter_text)
            nodes_table = self.nodes_table
            nodes_table.render_model(model, nodes, stale=stale or mstale)
            nodes_table.border_title = self._title("Nodes", len(nodes), len(model.nodes))
            arrow = "↓" if self.descending else "↑"
            nodes_table.border_subtitle = Content(
                f"sorted by {self.sort.value} {arrow}" + (" · STALE" if stale else "")
            )
        else:
            self.query_one("#placements-notice", Notice).say(placements_notice(model))
            items = model.feed(self.settings.feed_limit, self.filter_text)
            feed_table = self.feed_table
            feed_table.render_feed(items, now)
            feed_table.border_title = self._title(
                "Placements and evictions, newest first", len(items), None
            )
            feed_table.border_subtitle = Content("STALE" if stale else "")
            self._describe_current()

    def _title(self, what: str, shown: int, total: int | None) -> Content:
        """A Content, not a str: a str title is parsed as markup, and the filter is typed."""
        count = f"{shown}" if total is None or shown == total else f"{shown} of {total}"
        text = f"{what} ({count})"
        return Content(f"{text} · filter: {self.filter_text}" if self.filter_text else text)

    def _describe_current(self) -> None:
        self.query_one(DecisionPanel).update(
            describe_item(self.feed_table.current_item, self.clock())
        )

    def watch_filter_text(self) -> None:
        self.refresh_view()

    def watch_sort(self) -> None:
        self.refresh_view()

    def watch_descending(self) -> None:
        self.refresh_view()

    # -- actions and messages -------------------------------------------------------------

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        self._nodes_signature = ()
        self.refresh_view()
        (self.nodes_table if tab == "nodes" else self.feed_table).focus()

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        self.refresh_view()

    def action_filter(self) -> None:
        bar = self.query_one(FilterBar)
        bar.display = True
        bar.value = self.filter_text
        bar.focus()

    def action_clear_filter(self) -> None:
        self.filter_text = ""

    def action_sort(self, key: str) -> None:
        """Pick an order; picking the current one again flips its direction."""
        chosen = NodeSort(key)
        if chosen == self.sort:
            self.descending = not self.descending
        else:
            self.sort = chosen
            self.descending = chosen not in (NodeSort.NAME, NodeSort.ROLE)
        self.action_tab("nodes")

    @on(FilterBar.FilterChanged)
    def _filter_changed(self, message: FilterBar.FilterChanged) -> None:
        self.filter_text = message.text

    @on(FilterBar.FilterDone)
    def _filter_done(self) -> None:
        bar = self.query_one(FilterBar)
        bar.display = False
        (self.nodes_table if self.active_tab == "nodes" else self.feed_table).focus()

    @on(NodesTable.NodeChosen)
    @on(PlacementsTable.NodeChosen)
    def _open_node(self, message: NodesTable.NodeChosen | PlacementsTable.NodeChosen) -> None:
        if message.name in self.model.nodes:
            self.post_message(NodeRequested(message.name))

    @on(PlacementsTable.RowHighlighted)
    def _feed_highlighted(self) -> None:
        self._describe_current()
