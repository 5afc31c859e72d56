"""What every screen that shows the model has in common: its inputs, and when it re-renders."""

from __future__ import annotations

from textual.screen import Screen

from ..messages import ModelChanged
from ..model import ClusterModel
from ..settings import Clock, Settings

__all__ = ["ModelScreen"]


class ModelScreen(Screen[None]):
    """Renders `model` as of `clock()` with `settings`; `description` names the source in
    the header (the kubeconfig context, or "demo ...").

    Subclasses implement `refresh_view`, call it when mounted, and get it called again
    on every `ModelChanged` the app posts.
    """

    def __init__(
        self, model: ClusterModel, *, clock: Clock, settings: Settings, description: str
    ) -> None:
        super().__init__()
        self.model = model
        self.clock = clock
        self.settings = settings
        self.description = description

    def refresh_view(self) -> None:
        raise NotImplementedError

    def on_model_changed(self, _message: ModelChanged) -> None:
        self.refresh_view()
