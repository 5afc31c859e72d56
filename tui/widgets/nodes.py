"""The nodes table: one row per node, kube-capacity style, with live usage and trends."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message

from ..model import ClusterModel, NodeState
from .cells import bar, compact_bytes, cores, plain, sparkline, triple
from .table import Cell, KeyedTable, Row

__all__ = ["NodesTable", "node_row"]


def _state(state: NodeState) -> Text:
    info = state.info
    if not info.ready:
        return Text(info.state, style="bold red")
    if info.unschedulable:
        return Text(info.state, style="yellow")
    return Text(info.state, style="green")


def node_row(state: NodeState, *, metrics: bool, stale: bool) -> Row:
    """Cells for one node. Without metrics the bars show requests (in blue) instead of use."""
    alloc = state.info.allocatable
    usage = state.usage.usage if metrics and state.usage is not None else None
    if metrics:
        cpu_bar = bar(state.cpu_fraction() if usage else None, dim=stale)
        mem_bar = bar(state.memory_fraction() if usage else None, dim=stale)
    else:
        cpu_bar = bar(state.cpu_fraction(requests=True), style="blue")
        mem_bar = bar(state.memory_fraction(requests=True), style="blue")
    name = Text(state.name, style="bold")
    if state.info.edit_interrupted:
        # the detail (enter) says what the edit was; Text, so nothing in it is markup
        name.append("  ⚠ scheduler edit interrupted", style="bold red")
    cells = (
        name,
        plain(state.info.role),
        _state(state),
        cpu_bar,
        triple(
            cores(usage.cpu_m) if usage else None,
            cores(state.requests.cpu_m),
            cores(alloc.cpu_m),
            dim=stale,
        ),
        mem_bar,
        triple(
            compact_bytes(usage.memory) if usage else None,
            compact_bytes(state.requests.memory),
            compact_bytes(alloc.memory),
            dim=stale,
        ),
        plain(f"{state.pods}/{state.info.pods_allocatable}"),
        sparkline(state.cpu_history),
        sparkline(state.memory_history),
    )
    return state.name, cells


class NodesTable(KeyedTable):
    """Nodes, sorted and filtered by the screen; enter opens the node's detail."""

    COLUMNS = (
        ("node", "NODE", None),
        ("role", "ROLE", None),
        ("state", "STATE", 14),
        ("cpu", "CPU", 11),
        ("cpu_n", "used/req/alloc", 14),
        ("mem", "MEM", 11),
        ("mem_n", "used/req/alloc", 17),
        ("pods", "PODS", 7),
        ("cpu_t", "CPU~", 8),
        ("mem_t", "MEM~", 8),
    )

    class NodeChosen(Message):
        """The operator picked a node (enter): the screen opens its detail."""

        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def render_model(self, model: ClusterModel, nodes: list[NodeState], *, stale: bool) -> None:
        metrics = model.metrics_available is not False
        by_name = {n.name: n for n in nodes}

        def build(name: str) -> tuple[Cell, ...]:
            return node_row(by_name[name], metrics=metrics, stale=stale)[1]

        self.show_keys(list(by_name), build)

    def on_data_table_row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self._keys):
            self.post_message(self.NodeChosen(self.key_at(event.cursor_row)))
