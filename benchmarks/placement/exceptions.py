"""The placement benchmark's errors, one tree.

PlacementError
├── ScenarioError   a scenario file that cannot be used (names the file and the key)
└── RunError        the lab or a contender did not do what a run needs
"""

from __future__ import annotations


class PlacementError(Exception):
    """Anything the placement benchmark refuses or cannot do."""


class ScenarioError(PlacementError, ValueError):
    """A scenario file is malformed: the message names the file and the offending key."""


class RunError(PlacementError, RuntimeError):
    """A run could not be carried out (nodes never reported, pods never bound, ...)."""
