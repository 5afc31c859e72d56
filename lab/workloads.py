"""Workloads on the lab, placed by whichever kube-scheduler runs and counted through the
real API server; and the extender's readiness, which a placement waits for.

Used by `scripts/lab demo` (lab/demo.py) and the end-to-end tests (tests/lab/).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from lab.fakenodes import USAGE_CPU, USAGE_MEMORY
from lab.processes import http_probe, wait_for
from loadwise.extender.kubeobjects import container, pod_template


def wait_ready(
    extender_url: str, timeout: float = 150, proc_check: Callable[[], None] | None = None
) -> str:
    """Wait until an extender's /readyz says 200 and return its body. The first load
    document can take a minute (load-watcher collects once a minute); ``proc_check`` raises
    to stop waiting early (Child.check_running: the process exited). On time-out NotReady
    (a TimeoutError) names the last answer."""
    _, body = wait_for(
        f"the extender at {extender_url}",
        http_probe(f"{extender_url}/readyz"),
        timeout,
        interval=1,
        proc_check=proc_check,
    )
    return body.strip()


class Cluster(Protocol):
    """What the helpers here need of a cluster: the lab's (lab.cluster.Lab) or the real-node
    cluster's (lab.realnodes.Cluster), each with its admin identity."""

    def api_client(self) -> Any: ...

    def core(self) -> Any: ...


def apps(lab: Cluster) -> Any:
    """A kubernetes.client.AppsV1Api with the cluster's admin identity."""
    from kubernetes import client

    return client.AppsV1Api(lab.api_client())


def create_deployment(
    lab: Cluster, name: str, replicas: int, template: dict[str, Any], namespace: str = "default"
) -> None:
    """A Deployment `name` of `replicas` pods from `template`, selected by the label app=name
    (added to the template's labels)."""
    labels = {"app": name}
    template = {
        **template,
        "metadata": {
            **template.get("metadata", {}),
            "labels": {**template.get("metadata", {}).get("labels", {}), **labels},
        },
    }
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": template},
    }
    apps(lab).create_namespaced_deployment(namespace, body)


def deploy(
    lab: Cluster,
    name: str,
    replicas: int,
    *,
    cpu: str = "100m",
    memory: str = "128Mi",
    usage_cpu: str = "100m",
    usage_memory: str = "160Mi",
    namespace: str = "default",
) -> None:
    """A Deployment `name` of `replicas` pods requesting cpu/memory, each using (as kwok
    reports it) usage_cpu/usage_memory, kept on the lab's kwok nodes."""
    template = pod_template(
        containers=[
            container(
                "app", image="registry.invalid/app:1", requests={"cpu": cpu, "memory": memory}
            )
        ],
        annotations={USAGE_CPU: usage_cpu, USAGE_MEMORY: usage_memory},
        # kwok nodes carry no taints; keep pods off anything that is not a lab node
        node_selector={"type": "kwok"},
    )
    create_deployment(lab, name, replicas, template, namespace)


def placements(
    lab: Cluster, name: str, replicas: int, timeout: float = 180, namespace: str = "default"
) -> Counter[str]:
    """Pods of deployment `name` per node, once `replicas` of them are bound."""
    deadline = time.monotonic() + timeout
    while True:
        pods = lab.core().list_namespaced_pod(namespace, label_selector=f"app={name}").items
        bound: list[str] = [p.spec.node_name for p in pods if p.spec.node_name]
        if len(bound) >= replicas:
            return Counter(bound)
        if time.monotonic() > deadline:
            raise AssertionError(
                f"only {len(bound)}/{replicas} pods of {name} bound: {Counter(bound)}"
            )
        time.sleep(1)


def delete(lab: Cluster, name: str, namespace: str = "default") -> None:
    """Delete deployment `name` and wait until its pods are gone."""
    from kubernetes.client.exceptions import ApiException

    try:
        apps(lab).delete_namespaced_deployment(
            name, namespace, propagation_policy="Foreground", grace_period_seconds=0
        )
    except ApiException as exc:
        if exc.status != 404:
            raise
    deadline = time.monotonic() + 120
    while lab.core().list_namespaced_pod(namespace, label_selector=f"app={name}").items:
        for pod in lab.core().list_namespaced_pod(namespace, label_selector=f"app={name}").items:
            with contextlib.suppress(ApiException):
                lab.core().delete_namespaced_pod(
                    pod.metadata.name, namespace, grace_period_seconds=0
                )
        assert time.monotonic() < deadline, f"pods of {name} never went away"
        time.sleep(1)


def place(lab: Cluster, name: str, replicas: int, **kw: Any) -> Counter[str]:
    """Deploy `replicas` pods, wait until all are bound, delete them; where they went."""
    deploy(lab, name, replicas, **kw)
    try:
        return placements(lab, name, replicas)
    finally:
        delete(lab, name)


def scored_events(
    lab: Cluster,
    prefix: str,
    *,
    since: float = 0.0,
    namespace: str = "default",
    at_least: int = 1,
    timeout: float = 20,
) -> list[Any]:
    """The extender's LoadwiseScored Events for pods named ``prefix-*``, oldest first,
    created after ``since`` (epoch seconds; Events outlive their pods). The extender posts
    them in the background, so this waits up to ``timeout`` for ``at_least`` of them."""
    deadline = time.monotonic() + timeout
    while True:
        events = lab.core().list_namespaced_event(namespace, field_selector="reason=LoadwiseScored")
        found = [
            e
            for e in sorted(events.items, key=lambda e: e.metadata.creation_timestamp)
            if e.involved_object.name.startswith(f"{prefix}-")
            and e.metadata.creation_timestamp.timestamp() >= since - 1
        ]
        if len(found) >= at_least or time.monotonic() > deadline:
            return found
        time.sleep(1)
