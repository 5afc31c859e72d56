"""loadwise TUI: live node load and pod placements, with the extender's scores and reasons.

The app (`tui.app`) renders a pure model (`tui.model`) fed through one seam,
`tui.sources.ClusterSource`, by the Kubernetes API (`tui.sources.kubernetes`), recorded
JSON (`tui.sources.recorded`) or a generated cluster (`tui.sources.synthetic`). Screens
(`tui.screens`) get the model, clock and `tui.settings.Settings` when built and talk to
the app through `tui.messages`; errors form one tree in `tui.exceptions`.
"""

from __future__ import annotations

__all__: list[str] = []
