"""The lab: a real Kubernetes control plane on one machine, for loadwise's tests and demo.

Every program here is the real one, built from its Go module by tests/lab/build: etcd,
kube-apiserver, kube-controller-manager, kwok (fake nodes and pods), metrics-server and
paypal/load-watcher. kube-scheduler is not started by `up`: the end-to-end tests and the
Ansible-managed hosts start it (Lab.start_scheduler() / `scripts/lab scheduler`).

Metrics flow kwok -> metrics-server -> load-watcher -> extender:

* kwok serves a kubelet-like `/metrics/nodes/<node>/metrics/resource` for every fake node.
  Per-container usage comes from the pod annotations `kwok.x-k8s.io/usage-cpu` and
  `kwok.x-k8s.io/usage-memory` (quantities, per container); a node's usage is the sum of
  its pods' usage plus the node's *background* usage, declared with the node annotations
  `loadwise.dev/background-cpu-cores` and `loadwise.dev/background-memory-bytes` (plain
  numbers; Lab.add_node() takes quantities such as "500m" and "12Gi"). Background usage
  stands for memory and CPU used by nothing any pod requests, like seed 000's memory hog.
* metrics-server scrapes those endpoints and serves metrics.k8s.io through the aggregation
  layer (an APIService and an ExternalName Service pointing at 127.0.0.1).
* load-watcher reads metrics.k8s.io with the admin kubeconfig and serves GET :2020/watcher.

Everything listens on 127.0.0.1, except load-watcher: v0.2.4 hard-codes the listen address
":2020" (pkg/watcher/watcher.go), so it listens on every interface. See docs/lab.md.

State lives in the run directory (${LOADWISE_LAB_RUN:-/tmp/loadwise-lab}): pki/, etcd/,
logs/<name>.log, pids/<name>.pid, admin.kubeconfig. One lab per machine at a time (the fixed
load-watcher port makes two impossible).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from extender.quantity import parse_quantity as _parse_quantity

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BUILD = HERE / "build"

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
}
HOST = "127.0.0.1"
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"  # kwok hands out fake pod IPs from here; nothing routes to them

# The order processes start in; `down` stops them in reverse.
COMPONENTS = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kwok",
    "metrics-server",
    "load-watcher",
    "loadwise-extender",  # started only by `scripts/lab demo` (tests/lab/demo.py)
    "kube-scheduler",
]

# load-watcher v0.2.4 catches SIGTERM/SIGINT, shuts its HTTP server down and then blocks
# forever in main (`select {}`), so it never exits on a signal; it holds no state: kill it.
STOP_TIMEOUT = {"load-watcher": 0.0}

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
# something no pod requests (seed 000's situation: low requests, high real usage).
DEFAULT_NODES = (
    NodeSpec("lab-small", cpu="2", memory="4Gi"),
    NodeSpec("lab-medium", cpu="4", memory="8Gi"),
    NodeSpec("lab-large", cpu="8", memory="16Gi"),
    NodeSpec("lab-hog", cpu="4", memory="8Gi", background_cpu="500m", background_memory="6Gi"),
)


class LabError(RuntimeError):
    pass


# ---------------------------------------------------------------------------- quantities


def parse_quantity(q: str | int | float) -> float:
    """A Kubernetes resource quantity ("500m", "6Gi", "2") as a number of base units."""
    return float(_parse_quantity(q))


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


# ---------------------------------------------------------------------------- processes


def _proc_start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22 (starttime); the command name in field 2 may contain spaces, so split after ')'.
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(pid: int, start: str | None) -> bool:
    st = _proc_start_time(pid)
    if st is None or (start is not None and st != start):
        return False
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def port_open(port: int, host: str = HOST) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _wait(what: str, check, timeout: float, interval: float = 0.5, proc_check=None):
    """Poll check() until it returns a truthy value; raise LabError with the last error."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        if proc_check is not None:
            proc_check()
        try:
            v = check()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - reported if the wait times out
            last = e
        time.sleep(interval)
    raise LabError(
        f"timed out after {timeout:.0f}s waiting for {what}" + (f": {last}" if last else "")
    )


def build_binaries(names: Iterable[str] = (), env: dict[str, str] | None = None) -> dict[str, str]:
    """Run tests/lab/build (cached: instant once built) and return {name: path}."""
    out = subprocess.run(
        [str(BUILD), *names], check=True, stdout=subprocess.PIPE, text=True, env=env
    ).stdout
    bins = {}
    for line in out.splitlines():
        k, _, v = line.partition("=")
        if v:
            bins[k] = v
    return bins


# ---------------------------------------------------------------------------- PKI


def _openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise LabError(f"openssl {' '.join(args)} failed: {r.stderr.strip()}")


def _make_ca(pki: Path, name: str, cn: str) -> None:
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key", cwd=pki)
    _openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        f"{name}.key",
        "-out",
        f"{name}.crt",
        "-days",
        "3650",
        "-subj",
        f"/CN={cn}",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        cwd=pki,
    )


def _make_cert(
    pki: Path,
    name: str,
    ca: str,
    subj: str,
    *,
    server_sans: list[str] | None = None,
    client: bool = True,
) -> None:
    ext = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "subjectKeyIdentifier=hash",
        "authorityKeyIdentifier=keyid,issuer",
    ]
    usages = []
    if server_sans:
        usages.append("serverAuth")
        ext.append("subjectAltName=" + ",".join(server_sans))
    if client:
        usages.append("clientAuth")
    ext.append("extendedKeyUsage=" + ",".join(usages))
    (pki / f"{name}.ext").write_text("\n".join(ext) + "\n")
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key", cwd=pki)
    _openssl("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", subj, cwd=pki)
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        f"{ca}.crt",
        "-CAkey",
        f"{ca}.key",
        "-CAcreateserial",
        "-out",
        f"{name}.crt",
        "-days",
        "3650",
        "-extfile",
        f"{name}.ext",
        cwd=pki,
    )
    (pki / f"{name}.csr").unlink()
    (pki / f"{name}.ext").unlink()


def _kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path, user: str) -> None:
    """A self-contained kubeconfig (certificates embedded, like kubeadm's scheduler.conf), so
    it can be copied into a container or another host directory as is."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "loadwise-lab",
                "cluster": {"server": server, "certificate-authority-data": b64(ca)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)},
            }
        ],
        "contexts": [
            {"name": "loadwise-lab", "context": {"cluster": "loadwise-lab", "user": user}}
        ],
        "current-context": "loadwise-lab",
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)


# ---------------------------------------------------------------------------- kwok config


def _kwok_module_dir() -> Path:
    """Where Go keeps the kwok module source: its stage YAMLs are read from there."""
    env = dict(os.environ, GOFLAGS="-mod=mod", GOWORK="off", GOTOOLCHAIN="local")
    go = shutil.which("go") or "/usr/local/go/bin/go"
    r = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
        cwd=HERE / "go" / "kwok",
        env=env,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0 or not r.stdout.strip():
        raise LabError(f"cannot locate the kwok module: {r.stderr.strip()}")
    return Path(r.stdout.strip())


def _kustomize_resources(d: Path) -> list[str]:
    k = yaml.safe_load((d / "kustomization.yaml").read_text())
    return [(d / r).read_text() for r in k.get("resources", [])]


def _metric_doc() -> dict:
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


def _usage_doc() -> dict:
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


# ---------------------------------------------------------------------------- the lab


class Lab:
    """One lab on this machine. `Lab().up()` starts it; `down()` stops every process."""

    def __init__(
        self,
        run_dir: str | os.PathLike | None = None,
        *,
        log=lambda msg: print(f"lab: {msg}", file=sys.stderr, flush=True),
    ):
        self.run = Path(run_dir or os.environ.get("LOADWISE_LAB_RUN", "/tmp/loadwise-lab"))
        self.pki = self.run / "pki"
        self.logs = self.run / "logs"
        self.pids = self.run / "pids"
        self.log = log
        self._bins: dict[str, str] = {}
        self._api = None

    # -- paths and clients ------------------------------------------------------------

    @property
    def kubeconfig(self) -> str:
        """Admin (system:masters) kubeconfig for the lab's API server."""
        return str(self.run / "admin.kubeconfig")

    @property
    def scheduler_kubeconfig(self) -> str:
        """Kubeconfig with the system:kube-scheduler identity, for a kube-scheduler."""
        return str(self.run / "scheduler.kubeconfig")

    @property
    def server(self) -> str:
        return f"https://{HOST}:{PORTS['kube-apiserver']}"

    @property
    def load_watcher_url(self) -> str:
        return f"http://{HOST}:{PORTS['load-watcher']}"

    def binaries(self, names: Iterable[str] = ()) -> dict[str, str]:
        names = list(names)
        want = [n for n in names if n not in self._bins] if names else []
        if not names or want:
            self._bins.update(build_binaries(want))
        return self._bins

    def api_client(self):
        """A kubernetes.client.ApiClient for the admin kubeconfig."""
        if self._api is None:
            from kubernetes import config

            self._api = config.new_client_from_config(config_file=self.kubeconfig)
        return self._api

    def core(self):
        from kubernetes import client

        return client.CoreV1Api(self.api_client())

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def api_get(self, path: str, timeout: float = 5) -> Any:
        """GET a path on the API server as admin; JSON-decoded when it is JSON."""
        with urllib.request.urlopen(
            self.server + path, context=self._ssl_context(), timeout=timeout
        ) as r:
            body = r.read()
        try:
            return json.loads(body)
        except ValueError:
            return body.decode()

    # -- process bookkeeping ----------------------------------------------------------

    def _pidfile(self, name: str) -> Path:
        return self.pids / f"{name}.pid"

    def pid(self, name: str) -> int | None:
        """The pid of a running lab component, or None."""
        try:
            pid_s, start = self._pidfile(name).read_text().split()
        except (OSError, ValueError):
            return None
        pid = int(pid_s)
        return pid if _alive(pid, start) else None

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> int:
        if self.pid(name):
            raise LabError(f"{name} already runs (pid {self.pid(name)})")
        self.logs.mkdir(parents=True, exist_ok=True)
        self.pids.mkdir(parents=True, exist_ok=True)
        logf = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
        logf.write(f"--- {time.strftime('%FT%T')} {' '.join(argv)}\n".encode())
        logf.flush()
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            cwd=self.run,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        logf.close()
        start = None
        for _ in range(50):
            start = _proc_start_time(p.pid)
            if start:
                break
            time.sleep(0.01)
        self._pidfile(name).write_text(f"{p.pid} {start}\n")
        self._children = getattr(self, "_children", {})
        self._children[name] = p
        return p.pid

    def _check_running(self, name: str):
        def check():
            p = getattr(self, "_children", {}).get(name)
            if p is not None and p.poll() is not None:
                raise LabError(
                    f"{name} exited with status {p.returncode}; "
                    f"last lines of {self.logs / (name + '.log')}:\n{self.tail(name)}"
                )

        return check

    def tail(self, name: str, lines: int = 25) -> str:
        try:
            return "\n".join(
                (self.logs / f"{name}.log").read_text(errors="replace").splitlines()[-lines:]
            )
        except OSError:
            return "(no log)"

    def stop(self, name: str, timeout: float | None = None) -> bool:
        """SIGTERM a component (its whole process group), SIGKILL after timeout."""
        timeout = STOP_TIMEOUT.get(name, 15.0) if timeout is None else timeout
        pid = self.pid(name)
        pf = self._pidfile(name)
        if pid is None:
            pf.unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        p = getattr(self, "_children", {}).pop(name, None)
        while time.monotonic() < deadline:
            if p is not None:
                p.poll()
            if self.pid(name) is None:
                break
            time.sleep(0.1)
        else:
            if timeout:
                self.log(f"{name} (pid {pid}) ignored SIGTERM for {timeout:.0f}s; killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            for _ in range(100):
                if p is not None:
                    p.poll()
                if self.pid(name) is None:
                    break
                time.sleep(0.05)
        pf.unlink(missing_ok=True)
        return True

    # -- up / down / status -----------------------------------------------------------

    def running(self) -> dict[str, int]:
        return {n: pid for n in COMPONENTS if (pid := self.pid(n))}

    def up(self, nodes: Iterable[NodeSpec] = DEFAULT_NODES, *, timeout: float = 180) -> Lab:
        """Start the lab from scratch (a fresh run directory) and wait until metrics flow."""
        t0 = time.monotonic()
        nodes = list(nodes)
        if self.running():
            raise LabError(
                f"a lab already runs from {self.run} ({', '.join(self.running())}); "
                "run `scripts/lab down` first"
            )
        bins = self.binaries(
            [
                "etcd",
                "kube-apiserver",
                "kube-controller-manager",
                "kwok",
                "metrics-server",
                "load-watcher",
            ]
        )
        busy = [f"{n}:{p}" for n, p in PORTS.items() if n != "kube-scheduler" and port_open(p)]
        if busy:
            raise LabError(f"ports already in use on {HOST}: {', '.join(busy)}")
        if self.run.exists():
            shutil.rmtree(self.run)
        for d in (self.run, self.pki, self.logs, self.pids):
            d.mkdir(parents=True, exist_ok=True)
        self._api = None
        try:
            self._write_pki()
            self._start_etcd(bins["etcd"])
            self._start_apiserver(bins["kube-apiserver"])
            self._bootstrap_objects()
            self._start_controller_manager(bins["kube-controller-manager"])
            self._start_kwok(bins["kwok"])
            for n in nodes:
                self.add_node(n, wait=False)
            self.wait_nodes_ready([n.name for n in nodes])
            self._wait_default_service_account()
            self._start_metrics_server(bins["metrics-server"])
            self.wait_node_metrics([n.name for n in nodes], timeout=timeout)
            self._start_load_watcher(bins["load-watcher"])
        except BaseException:
            self.log(f"up failed; logs are in {self.logs}; stopping what was started")
            self.down(quiet=True)
            raise
        self.log(f"up in {time.monotonic() - t0:.1f}s; KUBECONFIG={self.kubeconfig}")
        return self

    def down(self, *, quiet: bool = False) -> list[str]:
        """Stop every lab process (in reverse start order). The run dir stays for the logs."""
        stopped = [n for n in reversed(COMPONENTS) if self.stop(n)]
        if not quiet:
            self.log("stopped " + (", ".join(stopped) if stopped else "nothing (no lab running)"))
        self._api = None
        return stopped

    def status(self) -> dict[str, Any]:
        """What runs, and whether the API, nodes, metrics and load-watcher answer."""
        st: dict[str, Any] = {"run_dir": str(self.run), "processes": {}, "checks": {}}
        for n in COMPONENTS:
            st["processes"][n] = self.pid(n)
        checks = st["checks"]
        if not st["processes"]["kube-apiserver"]:
            return st
        try:
            checks["apiserver /readyz"] = self.api_get("/readyz")
        except Exception as e:  # noqa: BLE001
            checks["apiserver /readyz"] = f"error: {e}"
            return st
        try:
            nodes = self.core().list_node().items
            checks["nodes"] = {
                n.metadata.name: next(
                    (c.status for c in n.status.conditions or [] if c.type == "Ready"), "Unknown"
                )
                == "True"
                and "Ready"
                or "NotReady"
                for n in nodes
            }
        except Exception as e:  # noqa: BLE001
            checks["nodes"] = f"error: {e}"
        try:
            nm = self.node_metrics()
            checks["metrics.k8s.io nodes"] = {
                k: f"cpu {v['cpu']:.3f} cores, memory {v['memory'] / 2**30:.2f}Gi"
                for k, v in nm.items()
            }
        except Exception as e:  # noqa: BLE001
            checks["metrics.k8s.io nodes"] = f"error: {e}"
        try:
            w = self.watcher()
            nmm = w.get("data", {}).get("NodeMetricsMap") or {}
            checks["load-watcher /watcher"] = {
                node: ", ".join(f"{m['type']} {m['value']:.1f}%" for m in v.get("metrics", []))
                for node, v in nmm.items()
            }
        except Exception as e:  # noqa: BLE001
            checks["load-watcher /watcher"] = f"error: {e}"
        return st

    # -- components -------------------------------------------------------------------

    def _write_pki(self) -> None:
        pki = self.pki
        _make_ca(pki, "ca", "loadwise-lab-ca")
        _make_ca(pki, "front-proxy-ca", "loadwise-lab-front-proxy-ca")
        sans = [
            "IP:127.0.0.1",
            "DNS:localhost",
            "IP:10.96.0.1",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
        ]
        _make_cert(pki, "apiserver", "ca", "/CN=kube-apiserver", server_sans=sans, client=False)
        _make_cert(pki, "admin", "ca", "/O=system:masters/CN=loadwise-lab-admin")
        _make_cert(pki, "controller-manager", "ca", "/CN=system:kube-controller-manager")
        _make_cert(pki, "scheduler", "ca", "/CN=system:kube-scheduler")
        _make_cert(pki, "kwok", "ca", "/CN=kwok", server_sans=["IP:127.0.0.1", "DNS:localhost"])
        _make_cert(pki, "front-proxy-client", "front-proxy-ca", "/CN=front-proxy-client")
        # Service-account token signing key (ES256) and its public half.
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=pki)
        _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
        for f in pki.glob("*.key"):
            f.chmod(0o600)
        for name, user in (
            ("admin", "loadwise-lab-admin"),
            ("controller-manager", "system:kube-controller-manager"),
            ("scheduler", "system:kube-scheduler"),
        ):
            _kubeconfig(
                self.run / f"{name}.kubeconfig",
                self.server,
                pki / "ca.crt",
                pki / f"{name}.crt",
                pki / f"{name}.key",
                user,
            )

    def _start_etcd(self, binary: str) -> None:
        c, p = PORTS["etcd-client"], PORTS["etcd-peer"]
        self._spawn(
            "etcd",
            [
                binary,
                "--name=lab",
                f"--data-dir={self.run / 'etcd'}",
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

        def healthy():
            with urllib.request.urlopen(f"http://{HOST}:{c}/health", timeout=2) as r:
                return json.loads(r.read()).get("health") == "true"

        _wait("etcd /health", healthy, 30, proc_check=self._check_running("etcd"))

    def _start_apiserver(self, binary: str) -> None:
        pki = self.pki
        self._spawn(
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

        def ready():
            return self.api_get("/readyz") == "ok"

        _wait(
            "kube-apiserver /readyz",
            ready,
            90,
            interval=1,
            proc_check=self._check_running("kube-apiserver"),
        )

    def _bootstrap_objects(self) -> None:
        """metrics-server's Service and APIService (as kwokctl does: ExternalName -> 127.0.0.1)."""
        from kubernetes import client

        api = self.api_client()
        client.CoreV1Api(api).create_namespaced_service(
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
        client.ApiregistrationV1Api(api).create_api_service(
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

    def _start_controller_manager(self, binary: str) -> None:
        pki, kc = self.pki, self.run / "controller-manager.kubeconfig"
        self._spawn(
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

        def healthy():
            ctx = ssl.create_default_context()
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # self-signed serving cert
            url = f"https://{HOST}:{PORTS['kube-controller-manager']}/healthz"
            with urllib.request.urlopen(url, context=ctx, timeout=2) as r:
                return r.read() == b"ok"

        _wait(
            "kube-controller-manager /healthz",
            healthy,
            60,
            interval=1,
            proc_check=self._check_running("kube-controller-manager"),
        )

    def _start_kwok(self, binary: str) -> None:
        mod = _kwok_module_dir()
        stages = []
        for d in ("node/fast", "node/heartbeat-with-lease", "pod/fast"):
            stages += _kustomize_resources(mod / "kustomize" / "stage" / d)
        docs = "\n---\n".join(
            [s.strip() for s in stages]
            + [
                yaml.safe_dump(_metric_doc(), sort_keys=False),
                yaml.safe_dump(_usage_doc(), sort_keys=False),
            ]
        )
        cfg = self.run / "kwok.yaml"
        cfg.write_text(
            "# Written by tests/lab/cluster.py. Stages: kwok's own node/fast,\n"
            f"# node/heartbeat-with-lease and pod/fast, read from {mod}.\n" + docs + "\n"
        )
        k, v = KWOK_NODE_ANNOTATION
        self._spawn(
            "kwok",
            [
                binary,
                f"--kubeconfig={self.kubeconfig}",
                f"--config={cfg}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={k}={v}",
                f"--node-ip={HOST}",
                f"--node-port={PORTS['kwok']}",
                f"--server-address={HOST}:{PORTS['kwok']}",
                f"--tls-cert-file={self.pki / 'kwok.crt'}",
                f"--tls-private-key-file={self.pki / 'kwok.key'}",
                f"--cidr={POD_CIDR}",
                "--node-lease-duration-seconds=40",
            ],
        )
        _wait(
            "kwok listening",
            lambda: port_open(PORTS["kwok"]),
            30,
            proc_check=self._check_running("kwok"),
        )

    def _start_metrics_server(self, binary: str) -> None:
        kc = self.kubeconfig
        self._spawn(
            "metrics-server",
            [
                binary,
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                f"--bind-address={HOST}",
                f"--secure-port={PORTS['metrics-server']}",
                f"--cert-dir={self.run / 'metrics-server'}",
                # kwokctl's flags for scraping kwok's emulated kubelets.
                "--kubelet-use-node-status-port",
                "--kubelet-insecure-tls",
                "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
                "--metric-resolution=15s",
            ],
        )

    def _start_load_watcher(self, binary: str) -> None:
        env = dict(os.environ, KUBE_CONFIG=self.kubeconfig)
        env.pop("METRICS_PROVIDER_NAME", None)  # default provider: metrics-server (k8s API)
        self._spawn("load-watcher", [binary], env=env)

        def serving():
            nmm = self.watcher().get("data", {}).get("NodeMetricsMap") or {}
            return len(nmm) > 0

        _wait(
            "load-watcher /watcher",
            serving,
            60,
            interval=1,
            proc_check=self._check_running("load-watcher"),
        )

    def start_scheduler(
        self,
        config: str | os.PathLike | None = None,
        extra_args: Iterable[str] = (),
        binary: str | None = None,
    ) -> int:
        """Start the real kube-scheduler against the lab (stopped by down()).

        With a config file whose clientConnection.kubeconfig is empty, a copy with the lab's
        scheduler kubeconfig filled in is used (kube-scheduler ignores --kubeconfig when
        --config is given).
        """
        binary = binary or self.binaries(["kube-scheduler"])["kube-scheduler"]
        argv = [binary, f"--bind-address={HOST}", f"--secure-port={PORTS['kube-scheduler']}"]
        if config:
            config = Path(config).resolve()  # the scheduler runs in the run directory
            cfg = yaml.safe_load(config.read_text())
            cc = cfg.setdefault("clientConnection", {})
            if not cc.get("kubeconfig"):
                cc["kubeconfig"] = self.scheduler_kubeconfig
                cfg.setdefault("leaderElection", {}).setdefault("leaderElect", False)
                config = self.run / "kube-scheduler.config.yaml"
                Path(config).write_text(yaml.safe_dump(cfg, sort_keys=False))
            argv.append(f"--config={config}")
        else:
            argv += [f"--kubeconfig={self.scheduler_kubeconfig}", "--leader-elect=false"]
        kc = self.scheduler_kubeconfig
        argv += [
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            *extra_args,
        ]
        pid = self._spawn("kube-scheduler", argv)

        def healthy():
            ctx = ssl.create_default_context()
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            url = f"https://{HOST}:{PORTS['kube-scheduler']}/healthz"
            with urllib.request.urlopen(url, context=ctx, timeout=2) as r:
                return r.read() == b"ok"

        _wait(
            "kube-scheduler /healthz",
            healthy,
            60,
            interval=0.5,
            proc_check=self._check_running("kube-scheduler"),
        )
        return pid

    # -- nodes and metrics ------------------------------------------------------------

    def add_node(self, node: NodeSpec | str, *, wait: bool = True, **kw) -> NodeSpec:
        """Register a fake node that kwok keeps Ready. `add_node("x", cpu="4", memory="8Gi")`."""
        spec = node if isinstance(node, NodeSpec) else NodeSpec(node, **kw)
        k, v = KWOK_NODE_ANNOTATION
        cap = {"cpu": spec.cpu, "memory": spec.memory, "pods": str(spec.pods)}
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": spec.name,
                "labels": {
                    "kubernetes.io/hostname": spec.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    LAB_LABEL: "true",
                    **spec.labels,
                },
                "annotations": {
                    k: v,
                    "node.alpha.kubernetes.io/ttl": "0",
                    # metrics-server (>= 0.7) scrapes this path instead of /metrics/resource.
                    "metrics.k8s.io/resource-metrics-path": (
                        f"/metrics/nodes/{spec.name}/metrics/resource"
                    ),
                    BG_CPU: _num(parse_quantity(spec.background_cpu)),
                    BG_MEMORY: _num(parse_quantity(spec.background_memory)),
                },
            },
            "status": {"capacity": cap, "allocatable": cap},
        }
        self.core().create_node(body)
        if wait:
            self.wait_nodes_ready([spec.name])
        return spec

    def remove_node(self, name: str) -> None:
        """Delete a fake node (kwok stops managing it; its pods are garbage-collected)."""
        self.core().delete_node(name)

    def set_background(
        self, node: str, *, cpu: str | None = None, memory: str | None = None
    ) -> None:
        """Change a node's background usage (what no pod requests) while the lab runs.

        Memory changes show in the next metrics-server scrape. The CPU counter is computed
        as cores x seconds since the node was created, so a change of background CPU makes
        one scrape interval's rate wrong (or dropped, when the counter goes backwards);
        the one after is right again. Allow ~30 s.
        """
        ann = {}
        if cpu is not None:
            ann[BG_CPU] = _num(parse_quantity(cpu))
        if memory is not None:
            ann[BG_MEMORY] = _num(parse_quantity(memory))
        self.core().patch_node(node, {"metadata": {"annotations": ann}})

    def wait_nodes_ready(self, names: Iterable[str], timeout: float = 60) -> None:
        names = list(names)

        def ready():
            ok = set()
            for n in self.core().list_node().items:
                if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []):
                    ok.add(n.metadata.name)
            missing = set(names) - ok
            if missing:
                raise LabError(f"not Ready yet: {sorted(missing)}")
            return True

        _wait(f"nodes Ready {names}", ready, timeout, proc_check=self._check_running("kwok"))

    def _wait_default_service_account(self) -> None:
        def exists():
            return self.core().read_namespaced_service_account("default", "default")

        _wait("the default ServiceAccount", exists, 60, interval=1)

    def node_metrics(self) -> dict[str, dict[str, float]]:
        """metrics.k8s.io NodeMetrics: {node: {"cpu": cores, "memory": bytes}}."""
        doc = self.api_get("/apis/metrics.k8s.io/v1beta1/nodes")
        return {
            i["metadata"]["name"]: {
                "cpu": parse_quantity(i["usage"]["cpu"]),
                "memory": parse_quantity(i["usage"]["memory"]),
            }
            for i in doc.get("items", [])
        }

    def wait_node_metrics(self, names: Iterable[str], timeout: float = 120) -> dict:
        names = list(names)

        def have():
            nm = self.node_metrics()
            missing = set(names) - set(nm)
            if missing:
                raise LabError(f"no NodeMetrics yet for {sorted(missing)}")
            return nm

        return _wait(
            "metrics.k8s.io NodeMetrics",
            have,
            timeout,
            interval=2,
            proc_check=self._check_running("metrics-server"),
        )

    def watcher(self) -> dict:
        """load-watcher's GET /watcher document."""
        with urllib.request.urlopen(self.load_watcher_url + "/watcher", timeout=5) as r:
            return json.loads(r.read())


def _main_hint() -> str:
    return "use scripts/lab up|down|status|scheduler (tests/lab/cli.py)"


if __name__ == "__main__":
    print(_main_hint())
