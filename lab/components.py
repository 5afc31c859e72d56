"""The lab's programs, each the real one built from its Go module by lab/build: how each is
configured and started, and when it counts as up.

Metrics flow kwok -> metrics-server -> load-watcher -> extender:

* kwok serves a kubelet-like `/metrics/nodes/<node>/metrics/resource` for every fake node,
  computed from the pod and node annotations described in lab/fakenodes.py.
* metrics-server scrapes those endpoints and serves metrics.k8s.io through the aggregation
  layer (an APIService and an ExternalName Service pointing at 127.0.0.1).
* load-watcher reads metrics.k8s.io with the admin kubeconfig and serves GET :2020/watcher.

Everything listens on 127.0.0.1, except load-watcher: v0.2.4 hard-codes the listen address
":2020" (pkg/watcher/watcher.go), so it listens on every interface. See docs/lab.md.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from lab.fakenodes import (
    BG_CPU,
    BG_MEMORY,
    KWOK_NODE_ANNOTATION,
    LAB_LABEL,
    USAGE_CPU,
    USAGE_MEMORY,
)
from lab.processes import HOST, LabError, Processes, port_open, wait_for

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build"
GO = HERE / "go"

# Ports, all on 127.0.0.1 (load-watcher excepted, see above). Chosen away from the
# components' defaults so that the lab does not collide with a real cluster on the machine.
PORTS = {
    "etcd-client": 12379,
    "etcd-peer": 12380,
    "kube-apiserver": 16443,
    "kube-controller-manager": 20257,
    "kube-scheduler": 20259,
    "kwok": 20247,
    "metrics-server": 14443,
    "load-watcher": 2020,  # fixed in load-watcher v0.2.4
    # Prometheus for scenarios that read load through it (lab/prometheus.py start_for_kwok);
    # the real-node cluster's listens on the podman bridge at 19090.
    "prometheus": 19091,
}
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"  # kwok hands out fake pod IPs from here; nothing routes to them

# The order processes start in; `down` stops them in reverse.
COMPONENTS = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kwok",
    "kwok-clock",  # lab/kwokclock.py: reads kwok's node counters every second
    "metrics-server",
    "load-watcher",
    "prometheus",  # started only by scenarios that read load through it (runner.reset)
    "loadwise-extender",  # started only by `scripts/lab demo` (lab/demo.py)
    "kube-scheduler",
]
# What `up` starts and `status` requires; kube-scheduler and the extender come later.
UP = COMPONENTS[:7]
# The binaries `up` needs (kwok-clock is lab/kwokclock.py, run by this Python).
CORE = [n for n in UP if n != "kwok-clock"]


def build_binaries(names: Iterable[str] = (), env: dict[str, str] | None = None) -> dict[str, str]:
    """Run lab/build (cached: instant once built) and return {name: path}; what is not built
    yet is built first with progress on stderr (lab/prepare.py)."""
    from lab.prepare import prepare_programs

    prepare_programs(names)
    out = subprocess.run(
        [str(BUILD), *names], check=True, stdout=subprocess.PIPE, text=True, env=env
    ).stdout
    bins = {}
    for line in out.splitlines():
        k, _, v = line.partition("=")
        if v:
            bins[k] = v
    return bins


def _healthz(port: int) -> bool:
    """GET https://127.0.0.1:<port>/healthz of a component with a self-signed serving cert."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    url = f"https://{HOST}:{port}/healthz"
    with urllib.request.urlopen(url, context=ctx, timeout=2) as r:
        body: bytes = r.read()
        return body == b"ok"


def _wait_healthz(procs: Processes, name: str, interval: float) -> None:
    """Wait up to 60 s for `name`'s /healthz on its port to say "ok" (while it runs)."""
    wait_for(
        f"{name} /healthz",
        lambda: _healthz(PORTS[name]),
        60,
        interval=interval,
        proc_check=procs.check_running(name),
    )


# ---------------------------------------------------------------------------- kwok config


def kwok_module_dir() -> Path:
    """Where Go keeps the kwok module source: its stage YAMLs are read from there."""
    env = dict(os.environ, GOFLAGS="-mod=readonly", GOWORK="off", GOTOOLCHAIN="local")
    go = shutil.which("go") or "/usr/local/go/bin/go"
    r = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
        cwd=GO / "kwok",
        env=env,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0 or not r.stdout.strip():
        raise LabError(f"cannot locate the kwok module: {r.stderr.strip()}")
    return Path(r.stdout.strip())


def kustomize_resources(d: Path) -> list[str]:
    k = yaml.safe_load((d / "kustomization.yaml").read_text())
    return [(d / r).read_text() for r in k.get("resources", [])]


def metric_doc() -> dict[str, Any]:
    """kwok Metric: the kubelet resource-metrics endpoint metrics-server scrapes.

    Node values add the node's background usage to the sum of its pods' usage; the CPU
    counter grows by the background cores for every second since the node was created.
    """

    def ann(key: str) -> str:
        return (
            f'("{key}" in node.metadata.annotations ? '
            f'double(node.metadata.annotations["{key}"]) : 0.0)'
        )

    pod_labels = [
        {"name": "namespace", "value": "pod.metadata.namespace"},
        {"name": "pod", "value": "pod.metadata.name"},
    ]
    ctr_labels = [{"name": "container", "value": "container.name"}, *pod_labels]
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Metric",
        "metadata": {"name": "loadwise-lab-resource"},
        "spec": {
            "path": "/metrics/nodes/{nodeName}/metrics/resource",
            "metrics": [
                {
                    "name": "scrape_error",
                    "dimension": "node",
                    "kind": "gauge",
                    "value": "0",
                    "help": "1 if there was an error while getting metrics from the node",
                },
                {
                    "name": "container_start_time_seconds",
                    "dimension": "container",
                    "kind": "gauge",
                    "labels": ctr_labels,
                    "value": "pod.SinceSecond()",
                    "help": "Start time of the container since unix epoch in seconds",
                },
                {
                    "name": "container_cpu_usage_seconds_total",
                    "dimension": "container",
                    "kind": "counter",
                    "labels": ctr_labels,
                    "value": 'pod.CumulativeUsage("cpu", container.name)',
                    "help": "Cumulative cpu time consumed by the container in core-seconds",
                },
                {
                    "name": "container_memory_working_set_bytes",
                    "dimension": "container",
                    "kind": "gauge",
                    "labels": ctr_labels,
                    "value": 'pod.Usage("memory", container.name)',
                    "help": "Current working set of the container in bytes",
                },
                {
                    "name": "pod_cpu_usage_seconds_total",
                    "dimension": "pod",
                    "kind": "counter",
                    "labels": pod_labels,
                    "value": 'pod.CumulativeUsage("cpu")',
                    "help": "Cumulative cpu time consumed by the pod in core-seconds",
                },
                {
                    "name": "pod_memory_working_set_bytes",
                    "dimension": "pod",
                    "kind": "gauge",
                    "labels": pod_labels,
                    "value": 'pod.Usage("memory")',
                    "help": "Current working set of the pod in bytes",
                },
                {
                    "name": "node_cpu_usage_seconds_total",
                    "dimension": "node",
                    "kind": "counter",
                    "value": f'node.CumulativeUsage("cpu") + {ann(BG_CPU)} * node.SinceSecond()',
                    "help": "Cumulative cpu time consumed by the node in core-seconds",
                },
                {
                    "name": "node_memory_working_set_bytes",
                    "dimension": "node",
                    "kind": "gauge",
                    "value": f'node.Usage("memory") + {ann(BG_MEMORY)}',
                    "help": "Current working set of the node in bytes",
                },
            ],
        },
    }


def machine_doc() -> dict[str, Any]:
    """kwok Metric: a kubelet-like cAdvisor endpoint with only the machine's size
    (`machine_cpu_cores`, `machine_memory_bytes`, the node's capacity), the two series of a
    real kubelet's /metrics/cadvisor that lab/prometheus.py's recording rules divide by, so the
    kwok nodes and the real ones are read by the same rules."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Metric",
        "metadata": {"name": "loadwise-lab-machine"},
        "spec": {
            "path": "/metrics/nodes/{nodeName}/metrics/cadvisor",
            "metrics": [
                {
                    "name": "machine_cpu_cores",
                    "dimension": "node",
                    "kind": "gauge",
                    "value": 'node.status.capacity["cpu"]',
                    "help": "Number of logical CPU cores",
                },
                {
                    "name": "machine_memory_bytes",
                    "dimension": "node",
                    "kind": "gauge",
                    "value": 'node.status.capacity["memory"]',
                    "help": "Amount of memory installed on the machine",
                },
            ],
        },
    }


def usage_doc() -> dict[str, Any]:
    """kwok ClusterResourceUsage: every container uses what its pod's annotations say."""

    def expr(key: str, default: str) -> str:
        return (
            f'"{key}" in pod.metadata.annotations ? '
            f'Quantity(pod.metadata.annotations["{key}"]) : Quantity("{default}")'
        )

    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterResourceUsage",
        "metadata": {"name": "loadwise-lab-usage-from-annotations"},
        "spec": {
            "usages": [
                {
                    "usage": {
                        "cpu": {"expression": expr(USAGE_CPU, "1m")},
                        "memory": {"expression": expr(USAGE_MEMORY, "1Mi")},
                    }
                }
            ]
        },
    }


# ---------------------------------------------------------------------------- start


def start_etcd(procs: Processes, binary: str) -> None:
    c, p = PORTS["etcd-client"], PORTS["etcd-peer"]
    procs.spawn(
        "etcd",
        [
            binary,
            "--name=lab",
            f"--data-dir={procs.run / 'etcd'}",
            f"--listen-client-urls=http://{HOST}:{c}",
            f"--advertise-client-urls=http://{HOST}:{c}",
            f"--listen-peer-urls=http://{HOST}:{p}",
            f"--initial-advertise-peer-urls=http://{HOST}:{p}",
            f"--initial-cluster=lab=http://{HOST}:{p}",
            "--unsafe-no-fsync=true",  # a throwaway test store; fsync only slows the lab down
            "--quota-backend-bytes=2147483648",
            "--log-level=warn",
        ],
    )

    def healthy() -> bool:
        with urllib.request.urlopen(f"http://{HOST}:{c}/health", timeout=2) as r:
            return bool(json.loads(r.read()).get("health") == "true")

    wait_for("etcd /health", healthy, 30, proc_check=procs.check_running("etcd"))


def start_apiserver(procs: Processes, pki: Path, binary: str, readyz: Callable[[], object]) -> None:
    """Start kube-apiserver and wait until `readyz()` (a GET of /readyz) says "ok"."""
    procs.spawn(
        "kube-apiserver",
        [
            binary,
            f"--etcd-servers=http://{HOST}:{PORTS['etcd-client']}",
            f"--bind-address={HOST}",
            f"--secure-port={PORTS['kube-apiserver']}",
            # Loopback advertise address: accepted because no Endpoints object is written for
            # it (--endpoint-reconciler-type=none); also avoids needing a default route.
            f"--advertise-address={HOST}",
            "--endpoint-reconciler-type=none",
            f"--cert-dir={pki}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            "--authorization-mode=Node,RBAC",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--allow-privileged=true",
            # Aggregation layer, so that metrics-server's APIService works.
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-username-headers=X-Remote-User",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            "--enable-aggregator-routing=false",
            "--profiling=false",
        ],
    )
    wait_for(
        "kube-apiserver /readyz",
        lambda: readyz() == "ok",
        90,
        interval=1,
        proc_check=procs.check_running("kube-apiserver"),
    )


def bootstrap_objects(api: Any) -> None:
    """metrics-server's Service and APIService (as kwokctl does: ExternalName -> 127.0.0.1).

    `api` is a kubernetes.client.ApiClient with the admin identity."""
    from kubernetes import client

    # Typed Any: the client sends plain dicts as they are, its annotations name only its models.
    core: Any = client.CoreV1Api(api)
    registration: Any = client.ApiregistrationV1Api(api)
    core.create_namespaced_service(
        "kube-system",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "metrics-server", "labels": {LAB_LABEL: "true"}},
            "spec": {
                "type": "ExternalName",
                "externalName": HOST,
                "ports": [
                    {
                        "name": "https",
                        "port": PORTS["metrics-server"],
                        "targetPort": PORTS["metrics-server"],
                    }
                ],
            },
        },
    )
    registration.create_api_service(
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": "v1beta1.metrics.k8s.io", "labels": {LAB_LABEL: "true"}},
            "spec": {
                "group": "metrics.k8s.io",
                "version": "v1beta1",
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                "insecureSkipTLSVerify": True,
                "service": {
                    "namespace": "kube-system",
                    "name": "metrics-server",
                    "port": PORTS["metrics-server"],
                },
            },
        }
    )


def start_controller_manager(procs: Processes, pki: Path, binary: str) -> None:
    kc = procs.run / "controller-manager.kubeconfig"
    procs.spawn(
        "kube-controller-manager",
        [
            binary,
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            f"--bind-address={HOST}",
            f"--secure-port={PORTS['kube-controller-manager']}",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            f"--cluster-signing-cert-file={pki / 'ca.crt'}",
            f"--cluster-signing-key-file={pki / 'ca.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allocate-node-cidrs=false",
            "--profiling=false",
        ],
    )
    _wait_healthz(procs, "kube-controller-manager", interval=1)


def start_kwok(procs: Processes, pki: Path, kubeconfig: str, binary: str) -> None:
    mod = kwok_module_dir()
    stages = []
    for d in ("node/fast", "node/heartbeat-with-lease", "pod/fast"):
        stages += kustomize_resources(mod / "kustomize" / "stage" / d)
    docs = "\n---\n".join(
        [s.strip() for s in stages]
        + [
            yaml.safe_dump(metric_doc(), sort_keys=False),
            yaml.safe_dump(machine_doc(), sort_keys=False),
            yaml.safe_dump(usage_doc(), sort_keys=False),
        ]
    )
    cfg = procs.run / "kwok.yaml"
    cfg.write_text(
        "# Written by lab/components.py. Stages: kwok's own node/fast,\n"
        f"# node/heartbeat-with-lease and pod/fast, read from {mod}.\n" + docs + "\n"
    )
    k, v = KWOK_NODE_ANNOTATION
    procs.spawn(
        "kwok",
        [
            binary,
            f"--kubeconfig={kubeconfig}",
            f"--config={cfg}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={k}={v}",
            f"--node-ip={HOST}",
            f"--node-port={PORTS['kwok']}",
            f"--server-address={HOST}:{PORTS['kwok']}",
            f"--tls-cert-file={pki / 'kwok.crt'}",
            f"--tls-private-key-file={pki / 'kwok.key'}",
            f"--cidr={POD_CIDR}",
            "--node-lease-duration-seconds=40",
        ],
    )
    wait_for(
        "kwok listening",
        lambda: port_open(PORTS["kwok"]),
        30,
        proc_check=procs.check_running("kwok"),
    )


def start_kwok_clock(procs: Processes, pki: Path, api: str) -> None:
    """lab/kwokclock.py, which makes kwok's node CPU counters integrate (its docstring)."""
    k, v = KWOK_NODE_ANNOTATION
    root = Path(__file__).resolve().parent.parent
    procs.spawn(
        "kwok-clock",
        [
            sys.executable,
            "-m",
            "lab.kwokclock",
            f"--api={api}",
            f"--kwok=https://{HOST}:{PORTS['kwok']}",
            f"--pki={pki}",
            f"--annotation={k}={v}",
        ],
        env={**os.environ, "PYTHONPATH": str(root)},
    )


def start_metrics_server(procs: Processes, kubeconfig: str, binary: str) -> None:
    kc = kubeconfig
    procs.spawn(
        "metrics-server",
        [
            binary,
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            f"--bind-address={HOST}",
            f"--secure-port={PORTS['metrics-server']}",
            f"--cert-dir={procs.run / 'metrics-server'}",
            # kwokctl's flags for scraping kwok's emulated kubelets.
            "--kubelet-use-node-status-port",
            "--kubelet-insecure-tls",
            "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
            "--metric-resolution=15s",
        ],
    )


def start_load_watcher(
    procs: Processes,
    kubeconfig: str,
    binary: str,
    watcher: Callable[[], dict[str, Any]],
    prometheus_url: str | None = None,
) -> None:
    """Start load-watcher and wait until `watcher()` (its /watcher document) names a node.
    It reads metrics.k8s.io (its default provider, latest values), or with `prometheus_url`
    its Prometheus provider: the average and standard deviation of the two recording rules
    over each window (pkg/watcher/internal/metricsprovider/prometheus.go)."""
    env = dict(os.environ, KUBE_CONFIG=kubeconfig)
    for key in ("METRICS_PROVIDER_NAME", "METRICS_PROVIDER_ADDRESS", "METRICS_PROVIDER_TOKEN"):
        env.pop(key, None)
    if prometheus_url:
        env.update(METRICS_PROVIDER_NAME="Prometheus", METRICS_PROVIDER_ADDRESS=prometheus_url)
    procs.spawn("load-watcher", [binary], env=env)

    def serving() -> bool:
        nmm = watcher().get("data", {}).get("NodeMetricsMap") or {}
        return len(nmm) > 0

    wait_for(
        "load-watcher /watcher",
        serving,
        60,
        interval=1,
        proc_check=procs.check_running("load-watcher"),
    )


def start_scheduler(
    procs: Processes,
    binary: str,
    kubeconfig: str,
    config: str | os.PathLike[str] | None = None,
    extra_args: Iterable[str] = (),
) -> int:
    """Start the real kube-scheduler with the identity in `kubeconfig`.

    With a config file whose clientConnection.kubeconfig is empty, a copy with `kubeconfig`
    filled in is used (kube-scheduler ignores --kubeconfig when --config is given).
    """
    argv = [binary, f"--bind-address={HOST}", f"--secure-port={PORTS['kube-scheduler']}"]
    if config:
        path = Path(config).resolve()  # the scheduler runs in the run directory
        cfg = yaml.safe_load(path.read_text())
        cc = cfg.setdefault("clientConnection", {})
        if not cc.get("kubeconfig"):
            cc["kubeconfig"] = kubeconfig
            cfg.setdefault("leaderElection", {}).setdefault("leaderElect", False)
            path = procs.run / "kube-scheduler.config.yaml"
            path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        argv.append(f"--config={path}")
    else:
        argv += [f"--kubeconfig={kubeconfig}", "--leader-elect=false"]
    argv += [
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        *extra_args,
    ]
    pid = procs.spawn("kube-scheduler", argv)
    _wait_healthz(procs, "kube-scheduler", interval=0.5)
    return pid
