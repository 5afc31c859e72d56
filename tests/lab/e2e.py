"""Helpers only the end-to-end tests use: the extender as a process, scheduler configs,
counts and reasons for failure messages. Placing workloads is lab/workloads.py (the demo
uses it too)."""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from pathlib import Path

import yaml

from lab import Lab
from lab.processes import Child, http_get, start
from lab.workloads import Cluster, scored_events, wait_ready

REPO = Path(__file__).resolve().parents[2]
EXTENDER = Path(sys.executable).parent / "loadwise-extender"
EXTENDER_PORT = 18888
# The extender's weight in the scheduler config: what the Ansible role writes by default.
_ROLE_DEFAULTS = REPO / "roles/loadwise_scheduler_config/defaults/main.yml"
WEIGHT = int(yaml.safe_load(_ROLE_DEFAULTS.read_text())["loadwise_scheduler_config_weight"])
COOL = {"lab-small", "lab-medium", "lab-large"}
HOT = "lab-hog"
# What every object site.yml creates carries (roles/loadwise/defaults/main.yml loadwise_labels).
LOADWISE_OBJECTS = "app.kubernetes.io/part-of=loadwise"


def cluster_objects(cluster: Cluster) -> list[str]:
    """Every object carrying loadwise's part-of label, as kind/name."""
    from kubernetes import client

    api = cluster.api_client()
    core, apps, rbac = (
        client.CoreV1Api(api),
        client.AppsV1Api(api),
        client.RbacAuthorizationV1Api(api),
    )
    listings = {
        "ServiceAccount": core.list_service_account_for_all_namespaces,
        "Secret": core.list_secret_for_all_namespaces,
        "ConfigMap": core.list_config_map_for_all_namespaces,
        "Service": core.list_service_for_all_namespaces,
        "Deployment": apps.list_deployment_for_all_namespaces,
        "Role": rbac.list_role_for_all_namespaces,
        "RoleBinding": rbac.list_role_binding_for_all_namespaces,
        "ClusterRole": rbac.list_cluster_role,
        "ClusterRoleBinding": rbac.list_cluster_role_binding,
    }
    return sorted(
        f"{kind}/{item.metadata.name}"
        for kind, listing in listings.items()
        for item in listing(label_selector=LOADWISE_OBJECTS).items
    )


def another_clusters_kubeconfig(kubeconfig: str | Path, workdir: Path) -> str:
    """A cluster's admin kubeconfig with its CA swapped for a fresh one: what an operator's
    controller holds for a cluster rebuilt at the same address, or a stale context."""
    key, cert = workdir / "other-ca.key", workdir / "other-ca.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", "/CN=another-cluster-ca"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    doc = yaml.safe_load(Path(kubeconfig).read_text())
    for entry in doc["clusters"]:
        entry["cluster"]["certificate-authority-data"] = base64.b64encode(
            cert.read_bytes()
        ).decode()
    path = workdir / f"another-cluster-{time.monotonic_ns()}.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


class Extender:
    """loadwise-extender as a process on loopback, reading load-watcher like in a cluster."""

    def __init__(self, lab: Lab, tmp: Path) -> None:
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
        self.child: Child | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{EXTENDER_PORT}"

    def start(self) -> None:
        argv = [str(EXTENDER), "--config", str(self.config), "--log-level", "debug"]
        self.child = start("extender", argv, log=self.log)
        try:
            wait_ready(self.url, proc_check=self.child.check_running)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.log.read_text()[-3000:]}") from None

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop(10)

    def get(self, path: str) -> tuple[int, str]:
        return http_get(self.url + path)

    def requests(self, verb: str) -> float:
        return request_count(self.url, verb)


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


def restart_scheduler(lab: Lab, config: Path) -> None:
    lab.stop("kube-scheduler")
    lab.start_scheduler(config)


def decisions(lab: Lab, prefix: str, since: float, **kw) -> list[str]:
    """Why the pods named ``prefix-*`` went where they did, one line per pod, for failure
    messages (the messages of :func:`scored_events`)."""
    return [
        f"{e.involved_object.name}: {e.message}"
        for e in scored_events(lab, prefix, since=since, **kw)
    ]
