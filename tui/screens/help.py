"""The `?` screen: every key binding, read from the screens' own BINDINGS so it cannot drift."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .main import MainScreen
from .node import NodeDetailScreen

__all__ = ["HelpScreen"]


def _rows(bindings: list[BindingType]) -> list[tuple[str, str]]:
    rows = []
    for binding in bindings:
        if isinstance(binding, Binding):
            rows.append((binding.key_display or binding.key, binding.description or binding.action))
        else:
            rows.append((binding[0], binding[2] if len(binding) > 2 else binding[1]))
    return rows


class HelpScreen(ModalScreen[None]):
    """Lists `app_bindings` (the app's own keys) and the screens' keys, then a legend."""

    BINDINGS = [
        Binding("escape,question_mark,q", "app.pop_screen", "Close help", key_display="esc"),
    ]

    def __init__(self, *, app_bindings: Sequence[BindingType]) -> None:
        super().__init__()
        self.app_bindings = list(app_bindings)

    def compose(self) -> ComposeResult:

        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", justify="right")
        table.add_column()
        sections = (
            ("Everywhere", self.app_bindings),
            ("Nodes and placements", MainScreen.BINDINGS),
            (
                "Tables",
                [
                    Binding("up,down,pageup,pagedown", "", "Move", key_display="↑ ↓ PgUp PgDn"),
                    Binding("enter", "", "Open the node (detail: pods, usage, requests, limits)"),
                ],
            ),
            ("Node detail", NodeDetailScreen.BINDINGS),
        )
        for title, bindings in sections:
            table.add_row("", Text(title, style="bold underline"))
            for key, description in _rows(list(bindings)):
                # Text, not str: a str cell of a Rich table is parsed as markup.
                table.add_row(Text(key), Text(description))
            table.add_row("", "")
        notes = Text(
            "Bars are percent of allocatable: green < 60 %, yellow < 85 %, red above. Without\n"
            "metrics-server they show requests, in blue. `used / req / alloc` columns compare\n"
            "live use with requests and allocatable. Trends are the last samples, oldest left.",
            style="dim",
        )
        with VerticalScroll(id="help"):
            yield Static(Text("loadwise keys", style="bold"), id="help-title")
            yield Static(table)
            yield Static(notes)
