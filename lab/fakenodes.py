"""The lab's fake nodes: what kwok keeps Ready, with capacity and a declared background
usage that no pod requests.

A node's usage, as kwok reports it to metrics-server, is the sum of its pods' usage (pod
annotations USAGE_CPU and USAGE_MEMORY, quantities per container) plus the node's
background usage (node annotations BG_CPU and BG_MEMORY, plain numbers of cores and
bytes). The kwok configuration that computes this is in lab/components.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from loadwise.extender import kubeobjects
from loadwise.extender.quantity import parse_quantity as _parse_quantity

KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
BG_CPU = "loadwise.dev/background-cpu-cores"
BG_MEMORY = "loadwise.dev/background-memory-bytes"
USAGE_CPU = "kwok.x-k8s.io/usage-cpu"
USAGE_MEMORY = "kwok.x-k8s.io/usage-memory"
LAB_LABEL = "loadwise.dev/lab"


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """A fake node: capacity, and background usage that no pod requests."""

    name: str
    cpu: str
    memory: str
    pods: int = 110
    background_cpu: str = "100m"
    background_memory: str = "256Mi"
    labels: dict[str, str] = dataclasses.field(default_factory=dict)


# The default heterogeneous set: three sizes and one node whose memory is mostly taken by
# something no pod requests (6Gi of its 8Gi: low requests, high real usage), the situation a
# scheduler that only counts requests keeps filling.
DEFAULT_NODES = (
    NodeSpec("lab-small", cpu="2", memory="4Gi"),
    NodeSpec("lab-medium", cpu="4", memory="8Gi"),
    NodeSpec("lab-large", cpu="8", memory="16Gi"),
    NodeSpec("lab-hog", cpu="4", memory="8Gi", background_cpu="500m", background_memory="6Gi"),
)


def parse_quantity(q: str | int | float) -> float:
    """A Kubernetes resource quantity ("500m", "6Gi", "2") as a number of base units."""
    return float(_parse_quantity(q))


def plain_number(v: float) -> str:
    """An annotation value: "2" for 2.0, "0.5" for 0.5."""
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def background_annotations(cpu: str | None = None, memory: str | None = None) -> dict[str, str]:
    """The node annotations declaring background usage, from quantities ("500m", "6Gi")."""
    ann = {}
    if cpu is not None:
        ann[BG_CPU] = plain_number(parse_quantity(cpu))
    if memory is not None:
        ann[BG_MEMORY] = plain_number(parse_quantity(memory))
    return ann


def node_object(spec: NodeSpec) -> dict[str, Any]:
    """The Node to create for `spec`: kwok manages it (annotation), metrics-server scrapes it."""
    k, v = KWOK_NODE_ANNOTATION
    doc = kubeobjects.node(
        spec.name,
        cpu=spec.cpu,
        memory=spec.memory,
        pods=str(spec.pods),
        ephemeral_storage=None,
        labels={
            "kubernetes.io/hostname": spec.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            LAB_LABEL: "true",
            **spec.labels,
        },
        annotations={
            k: v,
            "node.alpha.kubernetes.io/ttl": "0",
            # metrics-server (>= 0.7) scrapes this path instead of /metrics/resource.
            "metrics.k8s.io/resource-metrics-path": f"/metrics/nodes/{spec.name}/metrics/resource",
            **background_annotations(spec.background_cpu, spec.background_memory),
        },
    )
    return {"apiVersion": "v1", "kind": "Node", **doc}
