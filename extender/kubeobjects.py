"""Kubernetes Node and Pod documents as plain dicts, in the shape the API server returns.

The one builder of such documents for the extender's tests, the benchmark, the TUI's
synthetic demo and the lab's workloads. Every option is keyword-only and left out of
the document when not given, so a test states only what it is about. ``extra`` merges
further top-level fields into the built part (the spec for ``pod``/``pod_template``,
the whole container, the status for ``node``) for documents that must look like a real
cluster's in size as well as shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "JSON",
    "NODE_CONDITIONS",
    "container",
    "node",
    "node_conditions",
    "pod",
    "pod_template",
    "taint",
]

JSON = dict[str, Any]

# (type, status when healthy, reason, message) as the kubelet reports them.
NODE_CONDITIONS: tuple[tuple[str, str, str, str], ...] = (
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


def container(
    name: str,
    *,
    image: str = "nginx",
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    ports: Sequence[int] = (),
    extra: Mapping[str, Any] | None = None,
) -> JSON:
    """A container; ``resources`` is always present (empty when nothing is requested)."""
    resources: JSON = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    doc: JSON = {"name": name, "image": image}
    if ports:
        doc["ports"] = [{"containerPort": p, "protocol": "TCP"} for p in ports]
    doc["resources"] = resources
    doc.update(extra or {})
    return doc


def _metadata(
    name: str,
    *,
    namespace: str | None = None,
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    resource_version: str | None = None,
    created: str | None = None,
) -> JSON:
    meta: JSON = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if uid is not None:
        meta["uid"] = uid
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    if created is not None:
        meta["creationTimestamp"] = created
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    return meta


def _pod_spec(
    containers: Sequence[JSON],
    *,
    init_containers: Sequence[JSON],
    overhead: Mapping[str, str] | None,
    node_name: str | None,
    node_selector: Mapping[str, str] | None,
    tolerations: Sequence[Mapping[str, Any]],
    extra: Mapping[str, Any] | None,
) -> JSON:
    spec: JSON = {"containers": list(containers)}
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if overhead:
        spec["overhead"] = dict(overhead)
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    spec.update(extra or {})
    return spec


def pod(
    name: str,
    *,
    namespace: str = "default",
    uid: str | None = None,
    containers: Sequence[JSON] = (),
    init_containers: Sequence[JSON] = (),
    overhead: Mapping[str, str] | None = None,
    node_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    phase: str | None = None,
    scheduled_at: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    generate_name: str | None = None,
    owner: Mapping[str, Any] | None = None,
    resource_version: str | None = None,
    created: str | None = None,
    status: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> JSON:
    """A Pod. ``uid`` defaults to ``uid-<name>``; ``scheduled_at`` (RFC 3339) adds a
    true ``PodScheduled`` condition; ``owner`` is one ``ownerReferences`` entry;
    ``status`` adds further status fields (``phase`` and the condition win)."""
    meta = _metadata(
        name,
        namespace=namespace,
        uid=uid if uid is not None else f"uid-{name}",
        labels=labels,
        annotations=annotations,
        resource_version=resource_version,
        created=created,
    )
    if generate_name is not None:
        meta["generateName"] = generate_name
    if owner is not None:
        meta["ownerReferences"] = [dict(owner)]
    pod_status: JSON = dict(status or {})
    if phase is not None:
        pod_status["phase"] = phase
    if scheduled_at is not None:
        pod_status["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled_at}
        ]
    spec = _pod_spec(
        containers,
        init_containers=init_containers,
        overhead=overhead,
        node_name=node_name,
        node_selector=node_selector,
        tolerations=tolerations,
        extra=extra,
    )
    return {"metadata": meta, "spec": spec, "status": pod_status}


def pod_template(
    *,
    containers: Sequence[JSON],
    init_containers: Sequence[JSON] = (),
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    extra: Mapping[str, Any] | None = None,
) -> JSON:
    """A workload's ``spec.template``: a pod without name, namespace or status."""
    meta: JSON = {}
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    spec = _pod_spec(
        containers,
        init_containers=init_containers,
        overhead=None,
        node_name=None,
        node_selector=node_selector,
        tolerations=tolerations,
        extra=extra,
    )
    return {"metadata": meta, "spec": spec}


def taint(key: str, *, effect: str = "NoSchedule", value: str | None = None) -> JSON:
    """A node taint."""
    doc: JSON = {"key": key, "effect": effect}
    if value is not None:
        doc["value"] = value
    return doc


def node_conditions(*, ready: bool = True, heartbeat: str | None = None) -> list[JSON]:
    """The kubelet's four conditions, healthy; when not ``ready`` the node controller's
    ``Ready=Unknown`` (the kubelet stopped posting). ``heartbeat`` (RFC 3339) fills in
    ``lastHeartbeatTime`` and ``lastTransitionTime``."""
    conditions: list[JSON] = []
    for kind, status, reason, message in NODE_CONDITIONS:
        if kind == "Ready" and not ready:
            status, reason, message = (
                "Unknown",
                "NodeStatusUnknown",
                "Kubelet stopped posting node status.",
            )
        condition: JSON = {"type": kind, "status": status}
        if heartbeat is not None:
            condition["lastHeartbeatTime"] = heartbeat
            condition["lastTransitionTime"] = heartbeat
        condition["reason"] = reason
        condition["message"] = message
        conditions.append(condition)
    return conditions


def node(
    name: str,
    *,
    cpu: str,
    memory: str,
    pods: str = "110",
    ephemeral_storage: str | None = "61255492Ki",
    capacity: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] = (),
    unschedulable: bool = False,
    ready: bool | None = None,
    conditions: Sequence[Mapping[str, Any]] | None = None,
    internal_ip: str | None = None,
    node_info: Mapping[str, str] | None = None,
    images: Sequence[Mapping[str, Any]] = (),
    uid: str | None = None,
    resource_version: str | None = None,
    created: str | None = None,
    spec: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> JSON:
    """A Node with ``cpu``/``memory``/``pods`` capacity.

    ``capacity`` adds further capacity entries (hugepages …); ``allocatable`` defaults
    to the capacity. ``labels`` default to ``kubernetes.io/hostname``. ``ready`` adds
    the kubelet's conditions (see ``node_conditions``); ``conditions`` gives them
    exactly instead; with neither there are none. ``internal_ip`` adds the addresses.
    ``spec`` adds spec fields (podCIDR …) and ``extra`` status fields.
    """
    cap: JSON = {"cpu": cpu, "memory": memory, "pods": pods}
    if ephemeral_storage is not None:
        cap["ephemeral-storage"] = ephemeral_storage
    cap.update(capacity or {})
    node_spec: JSON = dict(spec or {})
    if unschedulable:
        node_spec["unschedulable"] = True
    if taints:
        node_spec["taints"] = [dict(t) for t in taints]
    status: JSON = {
        "capacity": cap,
        "allocatable": dict(allocatable) if allocatable is not None else dict(cap),
    }
    if conditions is not None:
        status["conditions"] = [dict(c) for c in conditions]
    elif ready is not None:
        status["conditions"] = node_conditions(ready=ready)
    if internal_ip is not None:
        status["addresses"] = [
            {"type": "InternalIP", "address": internal_ip},
            {"type": "Hostname", "address": name},
        ]
    if node_info is not None:
        status["nodeInfo"] = dict(node_info)
    if images:
        status["images"] = [dict(i) for i in images]
    status.update(extra or {})
    meta = _metadata(
        name,
        uid=uid,
        labels=labels if labels is not None else {"kubernetes.io/hostname": name},
        annotations=annotations,
        resource_version=resource_version,
        created=created,
    )
    return {"metadata": meta, "spec": node_spec, "status": status}
