"""Helpers for the end-to-end tests: the extender as a process, scheduler configs,
and workloads placed and counted through the real API server."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
EXTENDER = Path(sys.executable).parent / "loadwise-extender"
EXTENDER_PORT = 18888
# The extender's weight in the scheduler config: what the Ansible role writes by default.
_ROLE_DEFAULTS = REPO / "roles/loadwise_scheduler_config/defaults/main.yml"
WEIGHT = int(yaml.safe_load(_ROLE_DEFAULTS.read_text())["loadwise_scheduler_config_weight"])
COOL = {"lab-small", "lab-medium", "lab-large"}
HOT = "lab-hog"


class Extender:
    """loadwise-extender as a process on loopback, reading load-watcher like in a cluster."""

    def __init__(self, lab, tmp: Path) -> None:
        self.lab = lab
        self.config = tmp / "extender.yaml"
        self.log = tmp / "extender.log"
        self.config.write_text(
            yaml.safe_dump(
                {
                    "listen": f"127.0.0.1:{EXTENDER_PORT}",
                    "kubeconfig": lab.kubeconfig,
                    "source": {
                        "kind": "load-watcher",
                        "url": lab.load_watcher_url,
                        "refresh_seconds": 5,
                        "stale_after_seconds": 300,
                    },
                    "events": {"enabled": True, "per_minute": 600},
                }
            )
        )
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{EXTENDER_PORT}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [str(EXTENDER), "--config", str(self.config), "--log-level", "debug"],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )

        def died() -> str | None:
            if self.proc is None or self.proc.poll() is None:
                return None
            return f"the extender exited:\n{self.log.read_text()[-3000:]}"

        try:
            wait_ready(self.url, died=died)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.log.read_text()[-3000:]}") from None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def get(self, path: str) -> tuple[int, str]:
        return http_get(self.url + path)

    def requests(self, verb: str) -> float:
        return request_count(self.url, verb)


def http_get(url: str, timeout: float = 2) -> tuple[int, str]:
    """(status, body) of a GET; status 0 and the error's text when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def wait_ready(
    extender_url: str, timeout: float = 150, died: Callable[[], str | None] = lambda: None
) -> str:
    """Wait until an extender's /readyz says 200 and return its body. The first load
    document can take a minute (load-watcher collects once a minute); ``died`` names a
    reason to stop waiting early (the process exited)."""
    deadline, body = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        if reason := died():
            raise AssertionError(reason)
        status, body = http_get(f"{extender_url}/readyz")
        if status == 200:
            return body.strip()
        time.sleep(1)
    raise TimeoutError(f"extender at {extender_url} not ready after {timeout:.0f} s: {body}")


def request_count(extender_url: str, verb: str) -> float:
    """How many ``verb`` (filter, prioritize) requests an extender has served (its /metrics)."""
    _, text = http_get(f"{extender_url}/metrics")
    prefix = f'loadwise_extender_request_duration_seconds_count{{verb="{verb}"}}'
    return sum(float(ln.split()[-1]) for ln in text.splitlines() if ln.startswith(prefix))


def scheduler_config(tmp: Path, *, with_extender: bool) -> Path:
    cfg: dict = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler"}],
    }
    if with_extender:
        cfg["extenders"] = [
            {
                "urlPrefix": f"http://127.0.0.1:{EXTENDER_PORT}/scheduler",
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "weight": WEIGHT,
                "nodeCacheCapable": True,
                "httpTimeout": "2s",
                "ignorable": True,
            }
        ]
    path = tmp / ("with-extender.yaml" if with_extender else "stock.yaml")
    path.write_text(yaml.safe_dump(cfg))
    return path


def restart_scheduler(lab, config: Path) -> None:
    lab.stop("kube-scheduler")
    lab.start_scheduler(config)


def apps(lab):
    from kubernetes import client

    return client.AppsV1Api(lab.api_client())


def deploy(
    lab,
    name: str,
    replicas: int,
    *,
    cpu: str = "100m",
    memory: str = "128Mi",
    usage_cpu: str = "100m",
    usage_memory: str = "160Mi",
    namespace: str = "default",
) -> None:
    labels = {"app": name}
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        "kwok.x-k8s.io/usage-cpu": usage_cpu,
                        "kwok.x-k8s.io/usage-memory": usage_memory,
                    },
                },
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.invalid/app:1",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                    # kwok nodes carry no taints; keep pods off anything that is not a lab node
                    "nodeSelector": {"type": "kwok"},
                },
            },
        },
    }
    apps(lab).create_namespaced_deployment(namespace, body)


def placements(
    lab, name: str, replicas: int, timeout: float = 180, namespace: str = "default"
) -> Counter:
    deadline = time.monotonic() + timeout
    while True:
        pods = lab.core().list_namespaced_pod(namespace, label_selector=f"app={name}").items
        bound = [p.spec.node_name for p in pods if p.spec.node_name]
        if len(bound) >= replicas:
            return Counter(bound)
        if time.monotonic() > deadline:
            raise AssertionError(
                f"only {len(bound)}/{replicas} pods of {name} bound: {Counter(bound)}"
            )
        time.sleep(1)


def delete(lab, name: str, namespace: str = "default") -> None:
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
            try:
                lab.core().delete_namespaced_pod(
                    pod.metadata.name, namespace, grace_period_seconds=0
                )
            except ApiException:
                pass
        assert time.monotonic() < deadline, f"pods of {name} never went away"
        time.sleep(1)


def scored_events(
    lab,
    prefix: str,
    *,
    since: float = 0.0,
    namespace: str = "default",
    at_least: int = 1,
    timeout: float = 20,
) -> list:
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


def decisions(lab, prefix: str, since: float, **kw) -> list[str]:
    """Why the pods named ``prefix-*`` went where they did, one line per pod, for failure
    messages (the messages of :func:`scored_events`)."""
    return [
        f"{e.involved_object.name}: {e.message}"
        for e in scored_events(lab, prefix, since=since, **kw)
    ]


def place(lab, name: str, replicas: int, **kw) -> Counter:
    """Deploy `replicas` pods, wait until all are bound, delete them; where they went."""
    deploy(lab, name, replicas, **kw)
    try:
        return placements(lab, name, replicas)
    finally:
        delete(lab, name)
