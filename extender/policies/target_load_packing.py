"""Trimaran TargetLoadPacking: pack CPU up to a target utilisation, then spread.

Formula from kubernetes-sigs/scheduler-plugins pkg/trimaran/targetloadpacking:
with U the predicted CPU utilisation (node + pods not yet measured + this pod,
over CPU *capacity*) and X the target, the score is ``(100-X)*U/X + X`` when
U <= X, ``X*(100-U)/(100-X)`` when X < U <= 100, else 0; Go rounding.

Unlike Trimaran, a node without metrics is not scored 0 (which starves new
nodes): it is scored from its estimated load, which the caller supplies.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..estimate import TLP_TARGET_UTILIZATION, PodFacts, go_round
from ..model import NodeState
from .base import NodeScore

__all__ = ["TargetLoadPacking", "tlp_score"]


def tlp_score(predicted: float, target: float) -> int:
    if predicted > target:
        if predicted > 100:
            return 0
        return go_round(target * (100 - predicted) / (100 - target))
    return go_round((100 - target) * predicted / target + target)


@dataclass(frozen=True)
class TargetLoadPacking:
    target_utilization: float = TLP_TARGET_UTILIZATION
    name: str = "target-load-packing"

    def score(self, pod: PodFacts, node: NodeState, explain: bool = True) -> NodeScore:
        util = node.load.cpu.avg
        if util is None:
            return NodeScore(0, "no CPU data")
        capacity = node.info.cpu_capacity_millis if node.info else 0
        if capacity > 0:
            used = util / 100 * capacity
            # pods gone since the reading (``ledger``) may take off more than it held
            before = max(used + node.pending_tlp_cpu_millis, 0.0)
            predicted = 100 * (before + pod.tlp_cpu_millis) / capacity
        else:
            predicted = util
        score = tlp_score(predicted, self.target_utilization)
        if not explain:
            return NodeScore(score, "")
        why = f"cpu {predicted:.0f}% predicted, target {self.target_utilization:.0f}%"
        if node.estimated:
            why += " (estimated, no fresh metrics)"
        return NodeScore(score, why)
