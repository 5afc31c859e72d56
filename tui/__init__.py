"""loadwise TUI: live node load and pod placements, with the extender's scores and reasons.

The app (`tui.app`) renders a pure model (`tui.model`) fed through one seam,
`tui.source.ClusterSource`, by either the Kubernetes API (`tui.kube`) or recorded JSON
(`tui.fake`).
"""

from __future__ import annotations

__all__: list[str] = []
