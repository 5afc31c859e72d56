"""A real Prometheus server for the real-node cluster (lab/realnodes.py), so the extender's
Prometheus source runs its default queries against real series.

The server is Prometheus 3 built from its Go module by lab/build (the tool `prometheus`, no
web UI assets compiled in: the HTTP API is all the lab uses), run as a process on this machine.
It listens only on the podman bridge's gateway address, where the node containers (the
extender on the control-plane node among them) reach it and nothing outside this machine does.

No node_exporter: every node container shares this machine's /proc, so node_exporter would
report the machine's CPU on every node. Prometheus scrapes each real kubelet instead:
`/metrics/resource` for the node's own cgroup (`node_cpu_usage_seconds_total`,
`node_memory_working_set_bytes`, what metrics-server reads too) and `/metrics/cadvisor` for its
capacity (`machine_cpu_cores`, `machine_memory_bytes`: the machine's, which every node
reports). It authenticates with the token of a ServiceAccount allowed `get` on `nodes/metrics`,
the kubelet's authorization for those paths. Two recording rules carry the names the extender's
defaults query (extender/config.py PrometheusConfig), one sample per node, `instance` = the
node's name:

- `instance:node_cpu:ratio`: the node's CPU use (rate over RATE_WINDOW) / its cores
- `instance:node_memory_utilisation:ratio`: the node's working set / its memory

    prom = start(kubeconfig, workdir)   # config, rules, token, TSDB and log in workdir
    prom.by_node(CPU_RULE)              # {"loadwise-real-cp": 0.21, ...}
    prom.stop()

The loopback lab (lab/cluster.py) runs one too, for the placement scenarios whose load source
is Prometheus (benchmarks/placement/runner.py reset): `start_for_kwok` scrapes kwok's
kubelet-like endpoints of each fake node on 127.0.0.1 (kwok asks for no token) with the same
rules, as the lab's component "prometheus", its TSDB new at every start.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lab import realnodes
from lab.components import PORTS
from lab.processes import HOST, LabError, Processes, die_with_parent, stop_child, wait_for

# Away from Prometheus' default 9090, like the lab's other ports (lab/components.py).
PORT = 19090
# Short, so a test sees a rule's first samples within seconds of the start.
INTERVAL = "5s"
# The kubelet stamps its resource metrics with the time cAdvisor measured them (every 10-15 s
# on these nodes), so a window of 1m holds 4-6 distinct samples, enough for rate().
RATE_WINDOW = "1m"
CPU_RULE = "instance:node_cpu:ratio"
MEMORY_RULE = "instance:node_memory_utilisation:ratio"
NAMESPACE = "kube-system"
NAME = "loadwise-lab-prometheus"
# Not loadwise's own part-of label: the site tests count the objects carrying that one.
LABELS = {"app.kubernetes.io/part-of": "loadwise-lab", "app.kubernetes.io/name": NAME}
STOP_TIMEOUT = 15.0


def gateway() -> str:
    """This machine's address on podman's default network (the bridge's gateway), read from
    `podman network inspect podman`: the first address of the subnet when none is named."""
    info = json.loads(realnodes.podman("network", "inspect", "podman"))
    subnet = info[0]["subnets"][0]
    if subnet.get("gateway"):
        return str(subnet["gateway"])
    return str(next(ipaddress.ip_network(subnet["subnet"]).hosts()))


def grant(cluster: realnodes.Cluster, *, timeout: float = 60) -> str:
    """Create (or find) the ServiceAccount Prometheus scrapes as, allowed `get` on
    `nodes/metrics` (the kubelet authorizes /metrics/resource and /metrics/cadvisor as that
    subresource), and its long-lived token Secret; the token, once the controller filled it in."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = cluster.api_client()
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    meta = {"name": NAME, "labels": LABELS}
    objects: list[tuple[Any, dict[str, Any]]] = [
        (
            lambda body: core.create_namespaced_service_account(NAMESPACE, body),
            {"metadata": {**meta, "namespace": NAMESPACE}},
        ),
        (
            rbac.create_cluster_role,
            {
                "metadata": meta,
                "rules": [{"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]}],
            },
        ),
        (
            rbac.create_cluster_role_binding,
            {
                "metadata": meta,
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": NAME,
                },
                "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
            },
        ),
        (
            lambda body: core.create_namespaced_secret(NAMESPACE, body),
            {
                "metadata": {
                    **meta,
                    "namespace": NAMESPACE,
                    "annotations": {"kubernetes.io/service-account.name": NAME},
                },
                "type": "kubernetes.io/service-account-token",
            },
        ),
    ]
    for create, body in objects:
        try:
            create(body)
        except ApiException as e:
            if e.status != 409:  # 409: there from an earlier start against this cluster
                raise

    def token() -> str | None:
        data = core.read_namespaced_secret(NAME, NAMESPACE).data or {}
        return base64.b64decode(data["token"]).decode() if data.get("token") else None

    found = wait_for(f"the token of Secret {NAMESPACE}/{NAME}", token, timeout, interval=1)
    assert found is not None  # wait_for returns only a truthy value
    return found


def _kubelet_job(
    name: str, endpoint: str, targets: Mapping[str, tuple[str, str]], token_file: Path | None
) -> dict[str, Any]:
    """A scrape job for one kubelet endpoint (/metrics/resource or /metrics/cadvisor) of each
    node in `targets`: node name -> (host:port, the path before the endpoint: "" on a kubelet,
    /metrics/nodes/<node> on kwok, which serves every fake node's on one port)."""
    job: dict[str, Any] = {
        "job_name": name,
        "scheme": "https",
        # kubeadm's kubelets serve a self-signed certificate (no serverTLSBootstrap, as
        # metrics-server is told with --kubelet-insecure-tls in realnodes.SITE_VARS), and
        # metrics-server scrapes kwok's the same way (lab/components.py): nothing to verify
        # them against, so they are not verified.
        "tls_config": {"insecure_skip_verify": True},
        "static_configs": [
            {"targets": [addr], "labels": {"node": node, "__metrics_path__": prefix + endpoint}}
            for node, (addr, prefix) in targets.items()
        ],
        # instance = the node's name (not address:port), the label the extender's default
        # node_label and load-watcher's Prometheus provider read
        "relabel_configs": [{"source_labels": ["node"], "target_label": "instance"}],
    }
    if token_file is not None:
        job["authorization"] = {"type": "Bearer", "credentials_file": str(token_file)}
    return job


def config(
    targets: Mapping[str, tuple[str, str]], token_file: Path | None, rule_file: Path
) -> dict[str, Any]:
    """prometheus.yml for the kubelets at `targets` (see _kubelet_job), with a bearer token
    from `token_file` where they authorize (the real ones) or none (kwok)."""
    cadvisor = _kubelet_job("kubelet-cadvisor", "/metrics/cadvisor", targets, token_file)
    # cAdvisor's endpoint has series for every container; only the machine's size is used
    cadvisor["metric_relabel_configs"] = [
        {
            "source_labels": ["__name__"],
            "regex": "machine_cpu_cores|machine_memory_bytes",
            "action": "keep",
        }
    ]
    return {
        "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL},
        "rule_files": [str(rule_file)],
        "scrape_configs": [
            _kubelet_job("kubelet-resource", "/metrics/resource", targets, token_file),
            cadvisor,
        ],
    }


def rules() -> dict[str, Any]:
    """The two recording rules, named as the extender's defaults query them. on(instance): the
    two sides come from different jobs; the result keeps only `instance`."""
    return {
        "groups": [
            {
                "name": "loadwise-lab-node",
                "rules": [
                    {
                        "record": CPU_RULE,
                        "expr": f"rate(node_cpu_usage_seconds_total[{RATE_WINDOW}])"
                        " / on(instance) machine_cpu_cores",
                    },
                    {
                        "record": MEMORY_RULE,
                        "expr": "node_memory_working_set_bytes / on(instance) machine_memory_bytes",
                    },
                ],
            }
        ]
    }


def _argv(
    binary: str,
    workdir: Path,
    targets: Mapping[str, tuple[str, str]],
    token_file: Path | None,
    listen: str,
) -> list[str]:
    """Write rules.yml and prometheus.yml (for `targets`, see _kubelet_job) into workdir and
    return the command line that serves them on `listen` (host:port), its TSDB in
    workdir/data."""
    rule_file, config_file = workdir / "rules.yml", workdir / "prometheus.yml"
    rule_file.write_text(yaml.safe_dump(rules(), sort_keys=False))
    config_file.write_text(yaml.safe_dump(config(targets, token_file, rule_file), sort_keys=False))
    return [
        binary,
        f"--config.file={config_file}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address={listen}",
    ]


@dataclass
class Api:
    """A Prometheus server's HTTP API at `url`."""

    url: str

    def ready(self) -> bool:
        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
            return bool(r.status == 200)

    def get(self, path: str, **params: str) -> Any:
        """GET an API path (JSON), e.g. get("/api/v1/query", query="up")."""
        url = f"{self.url}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's vector: [{"metric": {...}, "value": [t, "v"]}, ...]."""
        doc = self.get("/api/v1/query", query=promql)
        if doc.get("status") != "success" or doc["data"]["resultType"] != "vector":
            raise LabError(f"Prometheus {promql!r}: {doc}")
        result: list[dict[str, Any]] = doc["data"]["result"]
        return result

    def by_node(self, promql: str, label: str = "instance") -> dict[str, float]:
        """An instant query's samples by the node named in `label`."""
        return {s["metric"][label]: float(s["value"][1]) for s in self.query(promql)}

    def targets(self) -> dict[str, str]:
        """Each scrape target's health ("job instance" -> "up"/"down"/"unknown" + error)."""
        doc = self.get("/api/v1/targets", state="active")
        return {
            f"{t['labels']['job']} {t['labels']['instance']}": t["health"]
            + (f": {t['lastError']}" if t.get("lastError") else "")
            for t in doc["data"]["activeTargets"]
        }


@dataclass
class Prometheus(Api):
    """The real-node cluster's Prometheus, a child of this process (start)."""

    workdir: Path
    log: Path
    process: subprocess.Popen[bytes] = field(repr=False)

    def tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def check_running(self) -> None:
        if self.process.poll() is not None:
            raise LabError(
                f"prometheus exited with status {self.process.returncode}; "
                f"last lines of {self.log}:\n{self.tail()}"
            )

    def stop(self) -> None:
        """SIGTERM, SIGKILL after STOP_TIMEOUT; returns once the process is gone."""
        stop_child(self.process, STOP_TIMEOUT)

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(
    cluster_kubeconfig: Path,
    workdir: Path,
    *,
    port: int = PORT,
    binary: str | None = None,
    timeout: float = 60,
) -> Prometheus:
    """Grant the scrape identity in the cluster, write prometheus.yml, rules.yml and the token
    into workdir and start Prometheus there (TSDB in workdir/data, log workdir/prometheus.log)
    on the bridge gateway's `port`; returned once /-/ready answers. binary: default lab/build's."""
    if binary is None:
        from lab.components import build_binaries

        binary = build_binaries(["prometheus"])["prometheus"]
    host = gateway()
    url = f"http://{host}:{port}"
    with contextlib.suppress(OSError):
        urllib.request.urlopen(f"{url}/-/ready", timeout=2).close()
        raise LabError(f"something already answers at {url} (a Prometheus left running?)")
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = realnodes.Cluster(cluster_kubeconfig)
    try:
        token = grant(cluster)
    finally:
        cluster.close()
    token_file = workdir / "token"
    token_file.touch(mode=0o600)
    token_file.write_text(token)
    targets = {node: (f"{realnodes.address(node)}:10250", "") for node in realnodes.nodes()}
    argv = _argv(binary, workdir, targets, token_file, f"{host}:{port}")
    log = workdir / "prometheus.log"
    with open(log, "ab") as out:
        out.write(f"--- {time.strftime('%FT%T')} {' '.join(argv)}\n".encode())
        out.flush()
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            preexec_fn=die_with_parent(),
        )
    prom = Prometheus(url, workdir, log, process)

    try:
        wait_for(f"Prometheus {url}/-/ready", prom.ready, timeout, interval=0.5,
                 proc_check=prom.check_running)  # fmt: skip
    except BaseException:
        prom.stop()
        raise
    return prom


_KWOK_LISTEN = f"{HOST}:{PORTS['prometheus']}"


def kwok_url() -> str:
    """Where the loopback lab's Prometheus (start_for_kwok) answers."""
    return f"http://{_KWOK_LISTEN}"


def start_for_kwok(
    procs: Processes, nodes: Iterable[str], binary: str, *, timeout: float = 60
) -> Api:
    """Prometheus for the loopback lab (lab/cluster.py): the same rules over kwok's
    kubelet-like endpoints of `nodes` (lab/components.py metric_doc and machine_doc), run as
    the lab's component "prometheus" on 127.0.0.1 (so `down` stops it). The TSDB is new at
    every start: an average or a deviation over any window covers this start's samples alone
    (a placement run's, runner.reset). Returned once /-/ready answers."""
    procs.stop("prometheus")
    workdir = procs.run / "prometheus"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    kwok = f"{HOST}:{PORTS['kwok']}"
    targets = {n: (kwok, f"/metrics/nodes/{n}") for n in nodes}
    api = Api(kwok_url())
    procs.spawn("prometheus", _argv(binary, workdir, targets, None, _KWOK_LISTEN))
    wait_for(f"Prometheus {api.url}/-/ready", api.ready, timeout, interval=0.5,
             proc_check=procs.check_running("prometheus"))  # fmt: skip
    return api


def ratios(
    prom: Api,
    nodes: Iterable[str],
    timeout: float = 120,
    proc_check: Callable[[], None] | None = None,
) -> dict[str, dict[str, float]]:
    """Wait until both recording rules have a sample for every node; {rule: {node: value}}.
    A timeout names the scrape targets' health. proc_check: whether the server still runs
    (a Prometheus's own check_running by default)."""
    nodes = tuple(nodes)
    if proc_check is None and isinstance(prom, Prometheus):
        proc_check = prom.check_running

    def complete() -> dict[str, dict[str, float]] | None:
        got = {rule: prom.by_node(rule) for rule in (CPU_RULE, MEMORY_RULE)}
        return got if all(set(v) >= set(nodes) for v in got.values()) else None

    try:
        found = wait_for(
            "both recording rules for every node", complete, timeout, interval=2,
            proc_check=proc_check,
        )  # fmt: skip
    except LabError as e:
        tail = prom.tail() if isinstance(prom, Prometheus) else ""
        raise LabError(f"{e}\ntargets: {prom.targets()}\n{tail}") from None
    assert found is not None  # wait_for returns only a truthy value
    return found
