"""The lab: a real Kubernetes control plane on one machine, for loadwise's demo and tests.

`Lab` puts the parts together: the programs (lab/components.py, each the real one built
from its Go module by lab/build: etcd, kube-apiserver, kube-controller-manager, kwok,
metrics-server, paypal/load-watcher), their certificates (lab/pki.py), the fake nodes
(lab/fakenodes.py) and the bookkeeping of their processes (lab/processes.py). kube-scheduler
is not started by `up`: the end-to-end tests and the Ansible-managed hosts (lab/hosts.py)
start it (Lab.start_scheduler() / `scripts/lab scheduler`).

State lives in the run directory (${LOADWISE_LAB_RUN:-/tmp/loadwise-lab}): pki/, etcd/,
logs/<name>.log, pids/<name>.pid, admin.kubeconfig. One lab per machine at a time (the fixed
load-watcher port makes two impossible).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import ssl
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lab.components as components
from lab.components import COMPONENTS, CORE, PORTS, build_binaries
from lab.fakenodes import (
    DEFAULT_NODES,
    NodeSpec,
    background_annotations,
    node_object,
    parse_quantity,
)
from lab.kubeclient import AdminClient
from lab.pki import write_pki
from lab.processes import HOST, LabError, Processes, port_open, wait_for


def _stderr(msg: str) -> None:
    print(f"lab: {msg}", file=sys.stderr, flush=True)


class Lab(AdminClient):
    """One lab on this machine. `Lab().up()` starts it; `down()` stops every process."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str] | None = None,
        *,
        log: Callable[[str], None] = _stderr,
    ) -> None:
        self.run = Path(run_dir or os.environ.get("LOADWISE_LAB_RUN", "/tmp/loadwise-lab"))
        self.pki = self.run / "pki"
        self.log = log
        self.procs = Processes(self.run, log)
        self.logs = self.procs.logs
        self.pids = self.procs.pids
        self._bins: dict[str, str] = {}
        self._api: Any = None

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

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def api_get(self, path: str, timeout: float = 5) -> Any:
        """GET a path on the API server as admin; JSON-decoded when it is JSON."""
        with urllib.request.urlopen(
            self.server + path, context=self._ssl_context(), timeout=timeout
        ) as r:
            body: bytes = r.read()
        try:
            return json.loads(body)
        except ValueError:
            return body.decode()

    @functools.cached_property
    def _scheduler_ssl(self) -> ssl.SSLContext:
        """Admin's certificate for the scheduler's port. Its serving certificate is one it
        made itself at start, signed by no CA the lab has: the peer is not verified
        (loopback only). Built once: the placement benchmark reads /metrics 5 times a
        second."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def scheduler_metrics(self, timeout: float = 2) -> str:
        """The running kube-scheduler's /metrics text, read as admin (it authorizes the
        path through the API server)."""
        url = f"https://{HOST}:{PORTS['kube-scheduler']}/metrics"
        with urllib.request.urlopen(url, context=self._scheduler_ssl, timeout=timeout) as r:
            return str(r.read().decode())

    # -- processes --------------------------------------------------------------------

    def pid(self, name: str) -> int | None:
        """The pid of a running lab component, or None."""
        return self.procs.pid(name)

    def stop(self, name: str, timeout: float | None = None) -> bool:
        """SIGTERM a component (its whole process group), SIGKILL after timeout."""
        return self.procs.stop(name, timeout)

    def tail(self, name: str, lines: int = 25) -> str:
        return self.procs.tail(name, lines)

    def running(self) -> dict[str, int]:
        return {n: pid for n in COMPONENTS if (pid := self.pid(n))}

    # -- up / down / status -----------------------------------------------------------

    def up(self, nodes: Iterable[NodeSpec] = DEFAULT_NODES, *, timeout: float = 180) -> Lab:
        """Start the lab from scratch (a fresh run directory) and wait until metrics flow."""
        t0 = time.monotonic()
        nodes = list(nodes)
        if self.running():
            raise LabError(
                f"a lab already runs from {self.run} ({', '.join(self.running())}); "
                "run `scripts/lab down` first"
            )
        bins = self.binaries(CORE)
        busy = [f"{n}:{p}" for n, p in PORTS.items() if n != "kube-scheduler" and port_open(p)]
        if busy:
            raise LabError(f"ports already in use on {HOST}: {', '.join(busy)}")
        if self.run.exists():
            shutil.rmtree(self.run)
        for d in (self.run, self.pki, self.logs, self.pids):
            d.mkdir(parents=True, exist_ok=True)
        self._api = None
        self.__dict__.pop("_scheduler_ssl", None)  # the certificates are made anew below
        procs = self.procs
        try:
            write_pki(self.pki, self.run, self.server)
            components.start_etcd(procs, bins["etcd"])
            components.start_apiserver(
                procs, self.pki, bins["kube-apiserver"], lambda: self.api_get("/readyz")
            )
            components.bootstrap_objects(self.api_client())
            components.start_controller_manager(procs, self.pki, bins["kube-controller-manager"])
            components.start_kwok(procs, self.pki, self.kubeconfig, bins["kwok"])
            for n in nodes:
                self.add_node(n, wait=False)
            self.wait_nodes_ready([n.name for n in nodes])
            components.start_kwok_clock(procs, self.pki, self.server)
            self._wait_default_service_account()
            components.start_metrics_server(procs, self.kubeconfig, bins["metrics-server"])
            self.wait_node_metrics([n.name for n in nodes], timeout=timeout)
            components.start_load_watcher(
                procs, self.kubeconfig, bins["load-watcher"], self.watcher
            )
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

    def start_scheduler(
        self,
        config: str | os.PathLike[str] | None = None,
        extra_args: Iterable[str] = (),
        binary: str | None = None,
    ) -> int:
        """Start the real kube-scheduler against the lab (stopped by down()).

        With a config file whose clientConnection.kubeconfig is empty, a copy with the lab's
        scheduler kubeconfig filled in is used (kube-scheduler ignores --kubeconfig when
        --config is given).
        """
        binary = binary or self.binaries(["kube-scheduler"])["kube-scheduler"]
        return components.start_scheduler(
            self.procs, binary, self.scheduler_kubeconfig, config, extra_args
        )

    # -- nodes and metrics ------------------------------------------------------------

    def add_node(self, node: NodeSpec | str, *, wait: bool = True, **kw: Any) -> NodeSpec:
        """Register a fake node that kwok keeps Ready. `add_node("x", cpu="4", memory="8Gi")`."""
        spec = node if isinstance(node, NodeSpec) else NodeSpec(node, **kw)
        self.core().create_node(node_object(spec))
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
        ann = background_annotations(cpu, memory)
        self.core().patch_node(node, {"metadata": {"annotations": ann}})

    def wait_nodes_ready(self, names: Iterable[str], timeout: float = 60) -> None:
        """Wait until every named node is Ready and carries none of the node.kubernetes.io/
        taints. Ready alone is not enough for a test that schedules at once: a new node starts
        with node.kubernetes.io/not-ready:NoSchedule, which kube-controller-manager's node
        lifecycle controller removes only after it has seen the Ready condition (0.1 s on a
        quiet machine, longer under load), and until then kube-scheduler's TaintToleration
        filter leaves the node out."""
        names = list(names)

        def ready() -> bool:
            ok = set()
            for n in self.core().list_node().items:
                conditions = n.status.conditions or []
                system_taints = [
                    t.key for t in n.spec.taints or [] if t.key.startswith("node.kubernetes.io/")
                ]
                if not system_taints and any(
                    c.type == "Ready" and c.status == "True" for c in conditions
                ):
                    ok.add(n.metadata.name)
            missing = set(names) - ok
            if missing:
                raise LabError(f"not Ready and untainted yet: {sorted(missing)}")
            return True

        wait_for(
            f"nodes Ready {names}", ready, timeout, proc_check=self.procs.check_running("kwok")
        )

    def _wait_default_service_account(self) -> None:
        def exists() -> Any:
            return self.core().read_namespaced_service_account("default", "default")

        wait_for("the default ServiceAccount", exists, 60, interval=1)

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

    def wait_node_metrics(
        self, names: Iterable[str], timeout: float = 120
    ) -> dict[str, dict[str, float]]:
        names = list(names)

        def have() -> dict[str, dict[str, float]]:
            nm = self.node_metrics()
            missing = set(names) - set(nm)
            if missing:
                raise LabError(f"no NodeMetrics yet for {sorted(missing)}")
            return nm

        return wait_for(
            "metrics.k8s.io NodeMetrics",
            have,
            timeout,
            interval=2,
            proc_check=self.procs.check_running("metrics-server"),
        )

    def watcher(self) -> dict[str, Any]:
        """load-watcher's GET /watcher document."""
        with urllib.request.urlopen(self.load_watcher_url + "/watcher", timeout=5) as r:
            doc: dict[str, Any] = json.loads(r.read())
            return doc


@contextmanager
def session(log: Callable[[str], None] | None = None) -> Iterator[Lab]:
    """A running lab for a test session or a benchmark: the one already up, reused and left
    running (someone ran `scripts/lab up`), or one brought up here and taken down after.
    A lab missing a component other than the scheduler and the extender (which tests and
    benchmarks start themselves) is taken down and brought up again."""
    lab = Lab()
    if lab.running():
        processes = lab.status()["processes"]
        missing = [
            n
            for n, pid in processes.items()
            if not pid and n not in ("kube-scheduler", "loadwise-extender")
        ]
        if not missing:
            if log is not None:
                log("reusing the running lab")
            yield lab
            return
        lab.down(quiet=True)
    lab.up()
    try:
        yield lab
    finally:
        lab.down()
