"""Node sizes learnt from the Node objects kube-scheduler sends (``nodeCacheCapable: false``).

Without a kubeconfig these requests are the only place a node's allocatable and capacity
are seen; the cache keeps the last usable size of each node so a later names-only request,
and the ledger's cap on a placement, can still size it. Parsing a Node's quantities costs
more than the scoring arithmetic, so a node whose resourceVersion is unchanged is not
parsed again.
"""

from __future__ import annotations

from collections.abc import Mapping

from .model import NodeInfo, usable_node_info
from .wire import Node

__all__ = ["SEEN_NODES_MAX", "NodeSizes"]

# At most this many nodes: Kubernetes supports clusters of up to 5,000 nodes
# ("Considerations for large clusters"); beyond it the longest-unrefreshed entry goes,
# so the names of deleted or replaced nodes cannot pile up.
SEEN_NODES_MAX = 10_000


class NodeSizes:
    """The size of each node last seen in a request, bounded to ``limit`` nodes."""

    def __init__(self, limit: int = SEEN_NODES_MAX) -> None:
        self.limit = limit
        # Both ordered by last refresh (a refreshed node is re-inserted last), so the
        # first entry is always the one to evict.
        self._infos: dict[str, NodeInfo] = {}
        self._versions: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._infos)

    @property
    def known(self) -> Mapping[str, NodeInfo]:
        """Every cached size by node name: the cache's own mapping (read it, do not keep it),
        so the request path looks names up without a copy."""
        return self._infos

    def get(self, name: str) -> NodeInfo | None:
        return self._infos.get(name)

    def version(self, name: str) -> str | None:
        """The resourceVersion the cached size of ``name`` was read from, if any."""
        return self._versions.get(name)

    def learn(self, node: Node) -> NodeInfo | None:
        """``node``'s size, kept for later requests; reused while its resourceVersion is
        unchanged. None when the Node's size is unusable (``usable_node_info``): the node
        is then forgotten, so a stale size is not used for it, and no other node is affected."""
        meta = node.metadata
        cached = self._infos.get(meta.name)
        if (
            cached is not None
            and meta.resourceVersion
            and self._versions.get(meta.name) == meta.resourceVersion
        ):
            return cached
        info = usable_node_info(node)
        self._infos.pop(meta.name, None)
        if info is None:
            self._versions.pop(meta.name, None)
            return None
        self._infos[meta.name] = info
        self._versions[meta.name] = meta.resourceVersion
        while len(self._infos) > self.limit:
            oldest = next(iter(self._infos))
            del self._infos[oldest]
            self._versions.pop(oldest, None)
        return info
