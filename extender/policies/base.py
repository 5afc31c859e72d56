"""What every policy is: a pure function from (pod, node state) to a 0..100 score."""

from __future__ import annotations

from typing import Protocol

import msgspec

from ..estimate import PodFacts, go_round
from ..model import NodeState

__all__ = ["MAX_SCORE", "PRIORITY_OF", "NodeScore", "Policy", "to_extender_priority"]

MAX_SCORE = 100


class NodeScore(msgspec.Struct, frozen=True):
    score: int
    """0..100, the scale of kube-scheduler's own plugins."""
    why: str
    """A short human reason, shown in the pod's Event."""


class Policy(Protocol):
    @property
    def name(self) -> str:
        """The policy's name, as in ``--policy``."""
        ...

    def score(self, pod: PodFacts, node: NodeState, explain: bool = True) -> NodeScore:
        """Score one node; ``explain=False`` skips building the reason text, which
        only the winner's Event needs and which costs more than the arithmetic."""
        ...


def to_extender_priority(score: int) -> int:
    """Map 0..100 to the extender's integer 0..10 (kube-scheduler multiplies by 10)."""
    if score <= 0:
        return 0
    return 10 if score >= 100 else go_round(score / 10)


# The same mapping as a table, for the request path (one list index per node).
PRIORITY_OF = [to_extender_priority(s) for s in range(MAX_SCORE + 1)]
