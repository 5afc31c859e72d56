"""Node detail: the node's capacity and load, and every pod on it with usage and requests."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Footer, Header, Static

from ..model import ClusterModel
from ..objects import PodInfo
from ..settings import Clock, Settings
from ..status import banner_text, is_stale, metrics_stale, summary
from ..widgets import Notice, PodsTable
from ..widgets.cells import bar, compact_bytes, cores, sparkline
from ..widgets.pods import pod_row
from .base import ModelScreen

__all__ = ["NodeDetailScreen"]


class NodeDetailScreen(ModelScreen):
    """One node (`node`) of the model: its load, and its pods sorted by use; says so when
    the node is gone from the cluster."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", key_display="esc"),
        Binding("C", "sort('cpu')", "Sort CPU", key_display="C"),
        Binding("M", "sort('memory')", "Sort MEM", key_display="M"),
        Binding("N", "sort('name')", "Sort name", key_display="N"),
    ]

    AUTO_FOCUS = "#pods-table"

    sort: reactive[str] = reactive("cpu", init=False)
    """Pod order: by CPU or memory use (requests when there are no metrics), or by name."""

    def __init__(
        self,
        node: str,
        model: ClusterModel,
        *,
        clock: Clock,
        settings: Settings,
        description: str,
    ) -> None:
        super().__init__(model, clock=clock, settings=settings, description=description)
        self.node = node

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Notice(id="banner")
        yield Static(id="node-summary", markup=False)
        yield PodsTable(id="pods-table")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_view()

    def watch_sort(self) -> None:
        self.refresh_view()

    def action_sort(self, key: str) -> None:
        self.sort = key

    def _order(self, pods: list[PodInfo]) -> list[PodInfo]:
        usage = self.model.pod_usage
        if self.sort == "name":
            return pods
        if self.sort == "memory":
            return sorted(
                pods,
                key=lambda p: -(u.usage.memory if (u := usage.get(p.key)) else p.requests.memory),
            )
        return sorted(
            pods, key=lambda p: -(u.usage.cpu_m if (u := usage.get(p.key)) else p.requests.cpu_m)
        )

    def refresh_view(self) -> None:
        model, now = self.model, self.clock()
        self.sub_title = summary(model, self.description)
        self.query_one("#banner", Notice).say(banner_text(model))
        state = model.nodes.get(self.node)
        summary_widget = self.query_one("#node-summary", Static)
        if state is None:
            summary_widget.update(
                Text(f"Node {self.node} is gone from the cluster.", style="bold red")
            )
            self.query_one(PodsTable).show([])
            return
        info = state.info
        stale = is_stale(model) or metrics_stale(model, now, self.settings.refresh_seconds)
        text = Text()
        text.append(info.name, style="bold")
        text.append(
            f"  {info.role}  {info.state}  {info.internal_ip}  kubelet {info.kubelet_version}\n",
            style="dim",
        )
        if info.edit_interrupted:
            text.append(
                "⚠ A loadwise run stopped half way through a scheduler change on this node: "
                f"{info.edit_interrupted}. Run site.yml again to finish it, or rollback.yml "
                '(docs/ansible.md, "An interrupted run").\n',
                style="bold red",
            )
        metrics = model.metrics_available is not False and state.usage is not None
        for label, used, req, lim, alloc, frac, rfrac, hist, fmt in (
            (
                "CPU",
                state.usage.usage.cpu_m if state.usage else 0,
                state.requests.cpu_m,
                state.limits.cpu_m,
                info.allocatable.cpu_m,
                state.cpu_fraction(),
                state.cpu_fraction(requests=True),
                state.cpu_history,
                cores,
            ),
            (
                "MEM",
                state.usage.usage.memory if state.usage else 0,
                state.requests.memory,
                state.limits.memory,
                info.allocatable.memory,
                state.memory_fraction(),
                state.memory_fraction(requests=True),
                state.memory_history,
                compact_bytes,
            ),
        ):
            text.append(f"{label}  used ")
            text.append_text(bar(frac if metrics else None, 20, dim=stale))
            text.append(f" {fmt(used) if metrics else '–'}", style="bold")
            text.append("   requested ")
            text.append_text(bar(rfrac, 12, style="cyan"))
            text.append(f" {fmt(req)}   limits {fmt(lim)}   allocatable {fmt(alloc)}   ")
            text.append_text(sparkline(hist, 24))
            text.append("\n")
        text.append(f"{state.pods} pods (of {info.pods_allocatable})", style="dim")
        if stale:
            text.append("   usage is STALE", style="bold yellow")
        summary_widget.update(text)
        pods = self._order(model.pods_on(self.node))
        table = self.query_one(PodsTable)
        table.show([pod_row(p, model, now) for p in pods])
        # A Content, not a str: a str title is parsed as markup, and this one holds a node name.
        table.border_title = Content(f"Pods on {self.node} ({len(pods)}), sorted by {self.sort}")
