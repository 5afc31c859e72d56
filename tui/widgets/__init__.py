"""Widgets, grouped by the screen area they fill."""

from __future__ import annotations

from .banner import Notice
from .filterbar import FilterBar
from .nodes import NodesTable
from .placements import DecisionPanel, PlacementsTable
from .pods import PodsTable

__all__ = ["DecisionPanel", "FilterBar", "NodesTable", "Notice", "PlacementsTable", "PodsTable"]
