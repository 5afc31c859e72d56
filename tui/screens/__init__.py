"""Screens: the main tabs, a node's detail, and help."""

from __future__ import annotations

from .help import HelpScreen
from .main import MainScreen
from .node import NodeDetailScreen

__all__ = ["HelpScreen", "MainScreen", "NodeDetailScreen"]
