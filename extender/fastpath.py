"""least-used for a whole request at the cost of the arithmetic that changes.

Within one load snapshot, a node's measured use in absolute units and its
allocatable do not change from pod to pod; only the pods placed since (the
ledger) and the incoming pod do. This keeps those bases per snapshot and does
per request only the additions and the integer scoring, without building a
NodeState per node. It covers the common case (fresh metrics and a known size
for every node, cpu/memory weights); anything else returns None and the caller
takes the general path. Equality with the general path is tested
(tests/extender/test_fastpath.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .estimate import PodFacts
from .ledger import Pending
from .model import LoadSnapshot, NodeInfo
from .policies import LeastUsed, Policy
from .policies.least_used import least_used

__all__ = ["LeastUsedFastPath"]

_Base = tuple[NodeInfo, float, int, float, int]  # info, cpu used, cpu alloc, mem used, mem alloc


class LeastUsedFastPath:
    def __init__(self, policy: LeastUsed) -> None:
        self.policy = policy
        self._snapshot: LoadSnapshot | None = None
        self._bases: dict[str, _Base] = {}

    @classmethod
    def for_policy(cls, policy: Policy) -> LeastUsedFastPath | None:
        """A fast path for ``policy`` when it is least-used without a pods weight."""
        if isinstance(policy, LeastUsed) and not policy.weights.get("pods"):
            return cls(policy)
        return None

    def scores(
        self,
        pod: PodFacts,
        names: Sequence[str],
        infos: Mapping[str, NodeInfo],
        snapshot: LoadSnapshot,
        recent: Mapping[str, Pending],
    ) -> list[int] | None:
        if snapshot is not self._snapshot:
            self._snapshot, self._bases = snapshot, {}
        bases = self._bases
        measured = snapshot.nodes
        policy = self.policy
        wc, wm = policy.weights.get("cpu", 0), policy.weights.get("memory", 0)
        pc, pm = pod.usage.cpu_millis, pod.usage.memory_bytes
        out: list[int] = []
        for name in names:
            info = infos.get(name)
            base = bases.get(name)
            if base is None or base[0] is not info:
                load = measured.get(name)
                if (
                    info is None
                    or load is None
                    or (wc and load.cpu.avg is None)
                    or (wm and load.memory.avg is None)
                ):
                    return None
                base = (
                    info,
                    (load.cpu.avg or 0.0) * info.cpu_capacity_millis / 100,
                    info.cpu_allocatable_millis,
                    (load.memory.avg or 0.0) * info.memory_capacity_bytes / 100,
                    info.memory_allocatable_bytes,
                )
                bases[name] = base
            pending = recent.get(name)
            # the same sums, in the same order, as estimate.demand_after
            if pending is None:
                cu, mu = base[1] + (0.0 + pc), base[3] + (0.0 + pm)
            else:
                cu, mu = base[1] + (pending.cpu_millis + pc), base[3] + (pending.memory_bytes + pm)
            score = policy.combine(least_used(base[2], cu), least_used(base[4], mu), None)
            assert score is not None  # cpu or memory has a weight and, checked above, data
            out.append(score)
        return out
