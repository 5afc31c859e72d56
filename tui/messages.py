"""Messages between the app and its screens, so that no screen imports the app.

Down: the app posts `ModelChanged` to every screen on its stack after it applied changes
(and once per tick, for ages). Up: a screen posts `NodeRequested` and the app, which owns
navigation, opens the node's detail screen.
"""

from __future__ import annotations

from textual.message import Message

__all__ = ["ModelChanged", "NodeRequested"]


class ModelChanged(Message, bubble=False):
    """The model may have changed: re-render from it. Sent to one screen; does not bubble."""

    def __init__(self, revision: int) -> None:
        super().__init__()
        self.revision = revision
        """The app's revision counter when this was sent."""


class NodeRequested(Message):
    """The user chose a node (enter on a table row): show its detail screen."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
