"""One-line notices: the connectivity banner and the per-view degraded-mode notices."""

from __future__ import annotations

from textual.widgets import Static

__all__ = ["Notice"]


class Notice(Static):
    """A line that is hidden while it has nothing to say.

    Plain text, never markup: notices quote API error messages and names from the cluster.
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(markup=False, id=id, classes=classes)

    def say(self, text: str) -> None:
        self.update(text)
        self.display = bool(text)
