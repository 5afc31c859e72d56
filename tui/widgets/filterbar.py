"""The `/` filter line, k9s style: type to narrow the current table, enter keeps, esc clears."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input

__all__ = ["FilterBar"]


class FilterBar(Input):
    BINDINGS = [Binding("escape", "clear", "Clear filter", show=False)]

    class FilterChanged(Message):
        """The filter text changed (every keystroke)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class FilterDone(Message):
        """The operator left the filter line (enter keeps the text, escape cleared it)."""

    def __init__(self) -> None:
        super().__init__(
            placeholder="filter: type to narrow, enter to keep, esc to clear", id="filter"
        )

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.FilterChanged(event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.FilterDone())

    def action_clear(self) -> None:
        self.value = ""
        self.post_message(self.FilterDone())
