"""Shorthands over ``extender.kubeobjects`` for the Pod and Node JSON that kube-scheduler
sends, plus node states for the policy tests."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from loadwise.extender import kubeobjects
from loadwise.extender.model import LoadSnapshot, NodeInfo, NodeLoad, NodeState, ResourceLoad, Usage
from loadwise.extender.wire import Node, Pod

GI = 1024**3
MI = 1024**2


def snapshot(
    loads: dict[str, tuple[float | None, float | None]], age: float = 5.0, now: float | None = None
) -> LoadSnapshot:
    """One reading of node -> (cpu %, memory %), its window ending at ``now`` (default: the
    wall clock) and starting ``age`` seconds before."""
    end = time.time() if now is None else now
    return LoadSnapshot(
        "static",
        end - age,
        end,
        {n: NodeLoad(ResourceLoad(c), ResourceLoad(m)) for n, (c, m) in loads.items()},
    )


class StaticSource:
    """A load source that always answers the same snapshot."""

    name = "static"

    def __init__(self, snapshot: LoadSnapshot) -> None:
        self.snapshot = snapshot

    async def fetch(self) -> LoadSnapshot:
        return self.snapshot

    async def close(self) -> None:
        pass


def container(
    requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, name: str = "c"
) -> dict[str, Any]:
    """``kubeobjects.container`` with requests first, the tests' most common argument."""
    return kubeobjects.container(name, requests=requests, limits=limits)


def pod_json(
    *containers: dict[str, Any],
    name: str = "p",
    namespace: str = "default",
    uid: str = "uid-p",
    overhead: dict[str, str] | None = None,
    init: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``kubeobjects.pod`` with its containers as positional arguments."""
    return kubeobjects.pod(
        name,
        namespace=namespace,
        uid=uid,
        containers=containers,
        init_containers=init or (),
        overhead=overhead,
    )


def pod(*containers: dict[str, Any], **kw: Any) -> Pod:
    return msgspec.convert(pod_json(*containers, **kw), type=Pod)


def node_json(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    allocatable: dict[str, str] | None = None,
    images: int = 0,
) -> dict[str, Any]:
    """``kubeobjects.node`` with a default size and ``images`` made-up images."""
    return kubeobjects.node(
        name,
        cpu=cpu,
        memory=memory,
        pods=pods,
        allocatable=allocatable,
        images=[
            {
                "names": [
                    f"registry.example/app{i}@sha256:{i:064x}",
                    f"registry.example/app{i}:v1",
                ],
                "sizeBytes": 1000000 + i,
            }
            for i in range(images)
        ],
    )


def node_info(name: str = "n", cpu: str = "4", memory: str = "8Gi", pods: str = "110") -> NodeInfo:
    return NodeInfo.from_node(msgspec.convert(node_json(name, cpu, memory, pods), type=Node))


def state(
    info: NodeInfo | None,
    cpu: float | None = None,
    memory: float | None = None,
    *,
    cpu_std: float | None = None,
    memory_std: float | None = None,
    pending: Usage | None = None,
    pending_tlp: float = 0.0,
    pending_pods: int = 0,
    pod_count: int | None = None,
    estimated: bool = False,
) -> NodeState:
    return NodeState(
        name=info.name if info else "n",
        info=info,
        load=NodeLoad(ResourceLoad(cpu, cpu_std), ResourceLoad(memory, memory_std)),
        estimated=estimated,
        pending=pending or Usage(),
        pending_tlp_cpu_millis=pending_tlp,
        pending_pods=pending_pods,
        pod_count=pod_count,
    )
