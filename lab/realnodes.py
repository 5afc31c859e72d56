"""A real kubeadm cluster in podman containers: `python -m lab realnodes up|down|status`.

Two nodes, each a privileged systemd container (lab/nodes/kubeadm/build-image) on podman's
default bridge network, so each has a network namespace of its own and the only traffic is
between these containers and this machine. Each runs containerd 2.3 and kubelet 1.36.4 built
by lab/build; `kubeadm init` makes the first a control plane (etcd, kube-apiserver,
kube-controller-manager and kube-scheduler as static pods the kubelet runs from
/etc/kubernetes/manifests), `kubeadm join` adds the second as a worker. Pods get addresses
from a bridge + host-local CNI conflist written here, one /24 per node, with routes between
the nodes. No registry: the control-plane images are imported into containerd from the
archive the image build saved.

kube-proxy is kubeadm's own addon (a DaemonSet of the lab's kube-proxy, iptables mode), so
pods reach Services, the API server's `kubernetes` Service first of all, by cluster IP. The
add-ons site.yml installs find their images already in containerd (ADDON_IMAGES). What is
left out: CoreDNS (nothing here resolves cluster names; its addon is skipped). See
docs/lab.md.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lab.fakenodes import parse_quantity
from lab.hosts import GROUPS, SSH_OPTIONS, AnsibleHost
from lab.kubeclient import AdminClient
from lab.peek import Container
from lab.processes import LabError, wait_for
from loadwise.extender.kubeobjects import container, pod_template

HERE = Path(__file__).resolve().parent
BUILD_IMAGE = HERE / "nodes" / "kubeadm" / "build-image"
K8S_VERSION = "v1.36.4"
# The release one patch before (lab/go-tools/kubernetes-previous): a cluster started at it
# (`up(previous=True)`) is upgraded to K8S_VERSION by the real `kubeadm upgrade apply`.
PREVIOUS_MODULE = HERE / "go-tools" / "kubernetes-previous" / "go.mod"
CONTROL_PLANE = "loadwise-real-cp"
# Two workers: the real-load test needs a hot node and a cool one the scheduler may choose
# between (the control plane keeps kubeadm's NoSchedule taint, as on an operator's cluster).
WORKERS = ("loadwise-real-w1", "loadwise-real-w2")
# The second control plane of `up(control_planes=2)`: kubeadm's stacked-etcd HA layout (each
# control plane runs an etcd member, an API server, a controller manager and a scheduler;
# the controller manager and the scheduler elect one leader through their Leases), with one
# worker, WORKERS[0], so that the cluster fits beside the other tests on this machine.
CONTROL_PLANE_2 = "loadwise-real-cp2"
# Every name a node container of either layout may have, for down().
ALL_NODES = (CONTROL_PLANE, CONTROL_PLANE_2, *WORKERS)
POD_SUBNET = "10.244.0.0/16"
SERVICE_SUBNET = "10.96.0.0/12"
CRI_SOCKET = "unix:///run/containerd/containerd.sock"
# not under /opt/loadwise, which is the product's own directory (rollback.yml removes it)
IMAGE_ARCHIVE = "/opt/loadwise-lab/images/cluster-images.tar"
# The build script's plain settings (NAME=value lines without expansions): image names, tags.
_BUILD_VARS = dict(re.findall(r"^([A-Z_]+)=([^\s$]+)$", BUILD_IMAGE.read_text(), re.M))
# The add-ons' images in that archive (METRICS_SERVER_IMAGE, DESCHEDULER_IMAGE,
# LOAD_WATCHER_IMAGE, BURNER_IMAGE).
ADDON_IMAGES = {k: v for k, v in _BUILD_VARS.items() if k.endswith("_IMAGE")}
# The sandbox image, the lab's pause program: also the workloads' do-nothing container.
PAUSE_IMAGE = f"registry.k8s.io/pause:{_BUILD_VARS['PAUSE_TAG']}"
# On a failed init/join: the kubelet's and containerd's last errors, where the cause usually is.
KUBELET_TAIL = (
    "journalctl -u kubelet -u containerd --no-pager | grep -E ' E[0-9]{4} |level=error' | tail -8"
)
# Preflight checks that fail in these containers for reasons that do not apply, each named
# (kubeadm's check names, cmd/kubeadm/app/preflight/checks.go):
#  - SystemVerification: this machine has a cgroup v1 hierarchy, which kubeadm 1.36 reports
#    as an error; the kubelet is told to accept it (failCgroupV1: false below). The same
#    check also wants the kernel config (/proc/config.gz or /boot), which a container lacks.
IGNORED_PREFLIGHT = ("SystemVerification",)


# ...and those of `kubeadm upgrade apply`: the cluster runs no CoreDNS (its addon is disabled
# below), so there is no CoreDNS version to migrate from ("start version '' not supported").
UPGRADE_IGNORED_PREFLIGHT = (*IGNORED_PREFLIGHT, "CoreDNSUnsupportedPlugins", "CoreDNSMigration")


def _run_dir() -> Path:
    return Path(os.environ.get("LOADWISE_REALNODES_RUN", "/tmp/loadwise-realnodes"))


# The layout of the cluster the last up() in this process started: the default one, or the
# two-control-plane one (`up(control_planes=2)`).
_layout: tuple[str, ...] = (CONTROL_PLANE, *WORKERS)


def nodes() -> tuple[str, ...]:
    return _layout


def control_planes() -> tuple[str, ...]:
    """The control-plane nodes of that layout, the first one (kubeadm init's) first."""
    return tuple(n for n in _layout if n not in WORKERS)


def podman(*args: str, timeout: float = 120, check: bool = True) -> str:
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise LabError(f"podman {' '.join(args)} -> {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc.stdout


def sh(node: str, script: str, *, timeout: float = 120, check: bool = True) -> str:
    """Run a bash script inside a node; a failure names the node, the script and its output."""
    proc = subprocess.run(["podman", "exec", node, "bash", "-c", script],
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip
    if check and proc.returncode != 0:
        raise LabError(
            f"{node}: {script!r} -> {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
        )
    return proc.stdout


def build_image() -> str:
    """The node image's reference, building it (and missing binaries) first when needed,
    with progress on stderr (lab/prepare.py)."""
    from lab.prepare import prepare

    prepare("realnodes")
    proc = subprocess.run([str(BUILD_IMAGE)], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise LabError(f"{BUILD_IMAGE} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def previous_version() -> str:
    """The k8s.io/kubernetes release PREVIOUS_MODULE pins (v1.36.3)."""
    found = re.search(
        r"^\s*k8s\.io/kubernetes (v\d+\.\d+\.\d+)$", PREVIOUS_MODULE.read_text(), re.M
    )
    if found is None:
        raise LabError(f"no k8s.io/kubernetes requirement in {PREVIOUS_MODULE}")
    return found.group(1)


def previous_images() -> Path:
    """The archive of the previous release's control-plane and kube-proxy images, building
    the four programs (with progress on stderr, lab/prepare.py) and their images first when
    needed (minutes the first time)."""
    from lab.prepare import prepare

    prepare("upgrade")
    proc = subprocess.run(
        [str(BUILD_IMAGE), "--previous"], capture_output=True, text=True, timeout=3600
    )
    if proc.returncode != 0:
        raise LabError(f"{BUILD_IMAGE} --previous failed:\n{proc.stderr[-3000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def node_subnet(index: int) -> str:
    """Node `index`'s pod /24 inside POD_SUBNET (the control plane is 0)."""
    return f"10.244.{index}.0/24"


def cni_conflist(index: int) -> dict[str, Any]:
    """bridge + host-local for one node. No masquerading: pods only talk to each other and
    to the nodes, all inside podman's network. The pod's lo is not in the chain: containerd
    sets it up itself with the loopback plugin (go-cni's loopback network), and the plugin
    refuses an interface that has a non-loopback address (plugins/main/loopback)."""
    return {
        "cniVersion": "1.0.0",
        "name": "loadwise-lab",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": node_subnet(index)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
        ],
    }


def kubeadm_config(
    cp_ip: str,
    token: str,
    version: str = K8S_VERSION,
    *,
    memory_eviction: bool = False,
    certificate_key: str | None = None,
) -> str:
    """kubeadm's init configuration (v1beta4) with the kubelet's, as one YAML stream; the
    control plane at `version`. memory_eviction: the kubelets also evict on memory
    (MEMORY_EVICTION), for workers with a memory limit (`up(worker_memory=...)`).
    certificate_key: the key `kubeadm init --upload-certs` encrypts the cluster's CA and
    service-account keys with in the Secret kube-system/kubeadm-certs, and that a joining
    control plane decrypts them with (`kubeadm join --control-plane --certificate-key`)."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "InitConfiguration",
            "bootstrapTokens": [{"token": token, "ttl": "2h"}],
            "localAPIEndpoint": {"advertiseAddress": cp_ip, "bindPort": 6443},
            "nodeRegistration": {
                "name": CONTROL_PLANE,
                "criSocket": CRI_SOCKET,
                # every image is imported beforehand; kubeadm's preflight then checks that
                # each one it needs is present under the exact name it expects
                "imagePullPolicy": "Never",
                "ignorePreflightErrors": list(IGNORED_PREFLIGHT),
            },
        },
        {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "ClusterConfiguration",
            "kubernetesVersion": version,
            "clusterName": "loadwise-lab",
            "controlPlaneEndpoint": f"{cp_ip}:6443",
            "networking": {"podSubnet": POD_SUBNET, "serviceSubnet": SERVICE_SUBNET},
            # nothing in the lab resolves cluster names, so no CoreDNS (docs/lab.md); a
            # disabled addon also leaves its image out of kubeadm's preflight image check
            # (cmd/kubeadm/app/images/images.go, GetControlPlaneImages)
            "dns": {"disabled": True},
        },
        {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "iptables",
            # nf_conntrack_max and the conntrack timeouts are machine-wide sysctls that a
            # node container may not set (kube-proxy then exits); 0 leaves them as they are
            # (pkg/proxy/apis/config/types.go: "0 to leave as-is"), as kind's nodes do
            "conntrack": {
                "maxPerCore": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
        },
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # containerd is configured with SystemdCgroup = false; both must agree
            "cgroupDriver": "cgroupfs",
            # kubelet 1.36 refuses cgroup v1 unless told otherwise
            # (pkg/kubelet/apis/config/v1beta1/defaults.go: FailCgroupV1 defaults to true)
            "failCgroupV1": False,
            # the nodes share one small disk with the machine: evict only when it is nearly full
            "evictionHard": {"nodefs.available": "2%", "imagefs.available": "2%"},
            # ...and never garbage-collect images: the nodes cannot pull, so an add-on image
            # imported at start and not yet running (the descheduler's) must stay. The kubelet
            # counts the machine's disk, whose use here crossed the default 85 % once (a second
            # set of caches, 2026-11-26) and the next rollout failed on ErrImagePull. 100
            # disables image GC (KubeletConfiguration imageGCHighThresholdPercent).
            "imageGCHighThresholdPercent": 100,
            # Every node reports the machine's 2 cores; reserving 800m leaves each 1.2 cores
            # allocatable, a small homelab node, so a real burner of 800m makes it hot (67%)
            # without taking the whole machine from the tests running beside it.
            "systemReserved": {"cpu": "800m"},
        },
    ]
    if certificate_key is not None:
        docs[0]["certificateKey"] = certificate_key
    if memory_eviction:
        kubelet = docs[-1]
        kubelet["evictionHard"] = {**kubelet["evictionHard"], **MEMORY_EVICTION["evictionHard"]}
        kubelet["evictionPressureTransitionPeriod"] = MEMORY_EVICTION["transition"]
    return yaml.safe_dump_all(docs, sort_keys=False)


# The kubelet's memory eviction for `up(worker_memory=...)`. The evictionHard above names two
# signals only, and a kubelet given some signals drops the defaults of the others
# (cmd/kubelet/app/server.go, loadConfigFile: DefaultEvictionHard is merged only when
# mergeDefaultEvictionSettings is set, false by default), so these kubelets have no
# memory.available threshold at all; this puts back the default's value,
# pkg/kubelet/eviction/defaults_linux.go "100Mi". The pressure transition period (how long a
# condition stays True after its signal clears) is 30 s instead of the default 5 min, so that
# one measurement's pressure has ended before the next one starts (benchmarks/realplacement.py).
MEMORY_EVICTION: dict[str, Any] = {
    "evictionHard": {"memory.available": "100Mi"},
    "transition": "30s",
}


# The operator's inventory variables for this cluster: kubeadm's defaults leave it without a
# metrics API (site.yml installs metrics-server) and with kubelets serving self-signed
# certificates (no serverTLSBootstrap), which metrics-server must then not verify; load-watcher
# runs as a Deployment of the operator's own image (it publishes none), and the extender
# reads it through its Service, so the whole chain kubelet -> metrics-server -> load-watcher
# -> extender is the real one.
SITE_VARS: dict[str, object] = {
    "loadwise_metrics_server_kubelet_insecure_tls": True,
    "loadwise_load_watcher_enabled": True,
    "loadwise_load_watcher_mode": "deployment",
    "loadwise_load_watcher_image": ADDON_IMAGES["LOAD_WATCHER_IMAGE"],
    "loadwise_extender_source": "load-watcher",
}


@dataclass
class UpResult:
    kubeconfig: Path
    seconds: float
    image: str


def meminfo(limit: int, host: str) -> str:
    """`host` (this machine's /proc/meminfo) with MemTotal said to be `limit` bytes, and
    MemFree and MemAvailable at most that: what a node container with that memory limit
    shows as /proc/meminfo (`up(worker_memory=...)`). The kubelet's capacity is cAdvisor's
    MemTotal from /proc/meminfo (github.com/google/cadvisor machine/machine.go,
    GetMachineMemoryCapacity), which a container otherwise reads as the whole machine's."""
    kib = limit // 1024
    out = []
    for line in host.splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemFree", "MemAvailable"):
            value = kib if key == "MemTotal" else min(kib, int(rest.split()[0]))
            line = f"{key + ':':<16}{value:>8} kB"
        out.append(line)
    return "\n".join(out) + "\n"


# What `up(worker_memory=...)` takes: one quantity for every worker ("2Gi"), one per worker in
# WORKERS' order (a sequence, or one string with commas: "3Gi,2Gi", as the command line gives
# it), or a mapping from worker name to quantity naming every worker.
WorkerMemory = str | Sequence[str] | Mapping[str, str]
# The least a worker may be given: a worker idles at a working set of 160-430 MiB (the
# kubelet, containerd, kube-proxy and the imported images' page cache; docs/lab.md "Workers with
# a memory of their own"), and the kubelet evicts below 100Mi available (MEMORY_EVICTION), so a
# smaller node would be under MemoryPressure before any pod runs.
MIN_WORKER_MEMORY = 512 * 2**20


def worker_limits(spec: WorkerMemory, workers: Sequence[str] = WORKERS) -> dict[str, int]:
    """Each worker's memory limit in bytes from `spec` (WorkerMemory); ValueError naming what
    is wrong: a quantity that is not one or is below MIN_WORKER_MEMORY, a count of sizes other
    than the count of workers, a mapping naming an unknown worker or leaving one out."""
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - set(workers))
        missing = [w for w in workers if w not in spec]
        if unknown or missing:
            raise ValueError(
                f"worker memory must name every worker ({', '.join(workers)}): "
                + "; ".join(
                    part
                    for part in (
                        f"unknown {', '.join(unknown)}" if unknown else "",
                        f"missing {', '.join(missing)}" if missing else "",
                    )
                    if part
                )
            )
        sizes = [spec[w] for w in workers]
    else:
        parts = [p.strip() for p in spec.split(",")] if isinstance(spec, str) else list(spec)
        if len(parts) == 1:
            parts *= len(workers)
        if len(parts) != len(workers):
            raise ValueError(
                f"{len(parts)} worker memory sizes for {len(workers)} workers "
                f"({', '.join(workers)}): give one for all or one each"
            )
        sizes = parts
    out: dict[str, int] = {}
    for worker, size in zip(workers, sizes, strict=True):
        try:
            value = int(parse_quantity(size))
        except Exception as e:  # QuantityError, or a non-string in a sequence
            raise ValueError(f"{worker}: {size!r} is not a memory quantity ({e})") from None
        if value < MIN_WORKER_MEMORY:
            raise ValueError(
                f"{worker}: {size!r} is below {MIN_WORKER_MEMORY // 2**20} MiB, less than a "
                "worker needs idle plus the eviction threshold"
            )
        out[worker] = value
    return out


def _memory_args(name: str, limit: int) -> list[str]:
    """podman run's arguments for a node of `limit` bytes: the cgroup limit (no swap: this
    machine has none, and --memory-swap equal to --memory says so to the cgroup), and the
    file shown as its /proc/meminfo (runc allows a bind mount there, for lxcfs's files)."""
    path = _run_dir() / f"meminfo-{name}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(meminfo(limit, Path("/proc/meminfo").read_text()))
    return ["--memory", str(limit), "--memory-swap", str(limit),
            "--volume", f"{path}:/proc/meminfo:ro"]  # fmt: skip


def _start_node(name: str, image: str, memory: int | None = None) -> str:
    """Start one node container; its address on podman's network. memory: its memory limit
    in bytes (_memory_args); none by default."""
    podman("rm", "--force", "--ignore", "--volumes", "--time", "10", name)
    podman(
        "run", "-d", "--name", name, "--hostname", name, "--network", "podman",
        *(_memory_args(name, memory) if memory else []),
        "--privileged", "--systemd=always",
        # its own cgroup namespace: the kubelet then sees this container's cgroups as the root
        # and makes its kubepods hierarchy inside them, not at the machine's root next to the
        # other node's
        "--cgroupns=private",
        "--sysctl", "net.ipv4.ip_forward=1",
        # bridged pod traffic through iptables, so kube-proxy's Service rules also apply
        # between pods on one node's bridge (kubeadm's preflight checks it is 1)
        "--sysctl", "net.bridge.bridge-nf-call-iptables=1",
        # containerd's overlayfs snapshots cannot live on the container's own overlay root,
        # and the kubelet's stats (cadvisor) want a real filesystem under /var/lib/kubelet
        "--volume", "/var/lib/containerd", "--volume", "/var/lib/kubelet",
        image, "/sbin/init",
    )  # fmt: skip
    return address(name)


def _prepare_node(name: str, index: int, routes: dict[str, str]) -> None:
    """Wait for containerd, import the images, write the CNI conflist and the pod routes."""
    wait_for(f"containerd on {name}",
          lambda: sh(name, "ctr version >/dev/null 2>&1 && echo ok", check=False), 60)  # fmt: skip
    sh(name, f"ctr -n k8s.io images import {IMAGE_ARCHIVE} >/dev/null",
       timeout=300)  # fmt: skip
    conf = json.dumps(cni_conflist(index), indent=2)
    script = f"cat > /etc/cni/net.d/10-loadwise-lab.conflist <<'EOF'\n{conf}\nEOF\n"
    sh(name, script + _route_script(routes))


def _route_script(routes: dict[str, str]) -> str:
    """The commands that route each pod subnet in `routes` via its node's address."""
    return "".join(f"ip route replace {subnet} via {via}\n" for subnet, via in routes.items())


def pod_routes(name: str, ips: dict[str, str]) -> dict[str, str]:
    """Node `name`'s routes to the other nodes' pod subnets: subnet -> that node's address."""
    return {node_subnet(i): ips[o] for i, o in enumerate(nodes()) if o != name}


def stop_node(name: str) -> None:
    """Stop a node's container at once, as a power cut does (SIGKILL to its init; nothing
    inside shuts down); the cluster keeps its Node object, which goes NotReady once the
    kubelet's heartbeats stop for the node controller's grace period. Not `podman stop`: here
    (podman 4.3, cgroup v1, no systemd on the machine) the node's systemd, shutting down,
    removes every node's directory under /sys/fs/cgroup/systemd/libpod_parent, after which
    `podman exec` into the other nodes fails ("error adding pid ... to cgroups") and the
    control plane's API server stopped answering (2026-11-27)."""
    podman("kill", "--signal", "KILL", name)
    podman("wait", name, timeout=60)


def start_node(name: str) -> None:
    """Start a stopped node's container again. Its systemd starts containerd and the kubelet
    (both enabled in the image) on the state kept in its volumes, but its network namespace
    is new: the routes to the other nodes' pod subnets are gone, and podman may hand it
    another address, so every node's routes are written again from the current addresses."""
    podman("start", name)
    ips = {n: address(n) for n in nodes()}
    for node in nodes():
        sh(node, _route_script(pod_routes(node, ips)))


def import_image(node: str, archive: Path, *, platform: str | None = None) -> str:
    """Import a docker or OCI image archive from this machine into a node's containerd (the
    k8s.io namespace the kubelet uses), as the control-plane images are; what `ctr` printed.
    platform: import (and unpack) that platform's content instead of the node's own."""
    target = f"/tmp/{archive.name}"
    podman("cp", str(archive), f"{node}:{target}")
    flag = f" --platform {platform}" if platform else ""
    return sh(node, f"ctr -n k8s.io images import{flag} {target} 2>&1; rc=$?; rm -f {target}; "
              "exit $rc", timeout=300)  # fmt: skip


def up(
    *,
    out: Any = None,
    previous: bool = False,
    worker_memory: WorkerMemory | None = None,
    control_planes: int = 1,
) -> UpResult:
    """Bring the cluster up from scratch; raises LabError naming the step that failed.
    previous: its control plane and kube-proxy at previous_version() (the kubelets stay at
    K8S_VERSION, a patch apart, which Kubernetes' version skew policy allows), every image of
    K8S_VERSION present too, so `kubeadm upgrade apply K8S_VERSION` finds what it needs.
    worker_memory: each worker a node of that much memory (a quantity, "2Gi"; or one per
    worker, worker_limits): its container's cgroup limit, its /proc/meminfo (so its
    capacity) and the kubelets' memory eviction (MEMORY_EVICTION); by default the workers have
    the machine's memory, unlimited.
    control_planes: 2 for two control planes, CONTROL_PLANE and CONTROL_PLANE_2 (stacked
    etcd: the second joins with `kubeadm join --control-plane`), and the worker WORKERS[0]."""
    global _layout
    if control_planes not in (1, 2):
        raise LabError(f"control_planes must be 1 or 2, not {control_planes!r}")
    if shutil.which("podman") is None:
        raise LabError("podman is not installed (see docs/lab.md)")
    _layout = (
        (CONTROL_PLANE, *WORKERS)
        if control_planes == 1
        else (CONTROL_PLANE, CONTROL_PLANE_2, WORKERS[0])
    )
    joining = tuple(n for n in nodes() if n != CONTROL_PLANE)
    # before anything is built or removed: a wrong size is the caller's mistake
    workers = tuple(n for n in nodes() if n in WORKERS)
    limits = worker_limits(worker_memory, workers) if worker_memory else {}
    # 32 random bytes, hex: the AES-256 key kubeadm wants (cmd/kubeadm/app/phases/copycerts)
    certificate_key = secrets.token_hex(32) if control_planes == 2 else None
    image = build_image()
    older = previous_images() if previous else None
    version = previous_version() if previous else K8S_VERSION
    run = _run_dir()
    run.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    down()
    with ThreadPoolExecutor(len(nodes())) as pool:
        ips = dict(zip(nodes(), pool.map(
            lambda n: _start_node(n, image, limits.get(n)), nodes()
        ), strict=True))  # fmt: skip

        def prepare(index: int, name: str) -> None:
            _prepare_node(name, index, pod_routes(name, ips))
            if older is not None:
                import_image(name, older)

        # list(): map is lazy, and a node's error must surface here
        list(pool.map(prepare, range(len(nodes())), nodes()))
    token = f"{secrets.token_hex(3)}.{secrets.token_hex(8)}"
    config = kubeadm_config(ips[CONTROL_PLANE], token, version, memory_eviction=bool(limits),
                            certificate_key=certificate_key)  # fmt: skip
    sh(CONTROL_PLANE, f"cat > /etc/kubernetes/loadwise-kubeadm.yaml <<'EOF'\n{config}EOF\n")
    sh(
        CONTROL_PLANE,
        "kubeadm init --config /etc/kubernetes/loadwise-kubeadm.yaml "
        + ("--upload-certs " if certificate_key else "")
        + "> /var/log/kubeadm-init.log 2>&1 "
        "|| { tail -15 /var/log/kubeadm-init.log; " + KUBELET_TAIL + "; exit 1; }",
        timeout=600,
    )
    ca_hash = sh(
        CONTROL_PLANE,
        "openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | "
        "openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1",
    ).strip()
    ignore = ",".join(IGNORED_PREFLIGHT)

    def join(name: str) -> None:
        # a control plane also needs its own advertised address (its API server's and etcd
        # member's) and the key to the certificates init uploaded
        as_control_plane = (
            f"--control-plane --certificate-key {certificate_key} "
            f"--apiserver-advertise-address {ips[name]} "
            if name == CONTROL_PLANE_2
            else ""
        )
        sh(
            name,
            f"kubeadm join {ips[CONTROL_PLANE]}:6443 --token {token} "
            f"--discovery-token-ca-cert-hash sha256:{ca_hash} --node-name {name} "
            f"--cri-socket {CRI_SOCKET} --ignore-preflight-errors={ignore} "
            + as_control_plane
            + "> /var/log/kubeadm-join.log 2>&1 "
            "|| { tail -15 /var/log/kubeadm-join.log; " + KUBELET_TAIL + "; exit 1; }",
            timeout=600,
        )

    with ThreadPoolExecutor(len(joining)) as pool:
        list(pool.map(join, joining))
    kubeconfig = run / "admin.conf"
    kubeconfig.write_text(sh(CONTROL_PLANE, "cat /etc/kubernetes/admin.conf"))
    kubeconfig.chmod(0o600)
    wait_for("every node Ready, kube-scheduler's static pod Running, kube-proxy on every node",
          lambda: ready(kubeconfig), 240, 2)  # fmt: skip
    seconds = time.monotonic() - t0
    (run / "up.json").write_text(json.dumps({"image": image, "seconds": round(seconds, 1)}))
    return UpResult(kubeconfig, seconds, image)


def upgrade_control_plane(version: str = K8S_VERSION) -> None:
    """The real `kubeadm upgrade apply` on the control-plane node, to `version` (its images
    are in containerd: every cluster has K8S_VERSION's); a failure carries its log's tail."""
    sh(
        CONTROL_PLANE,
        f"kubeadm upgrade apply {version} --yes "
        f"--ignore-preflight-errors={','.join(UPGRADE_IGNORED_PREFLIGHT)} "
        "> /var/log/kubeadm-upgrade.log 2>&1 || { tail -30 /var/log/kubeadm-upgrade.log; exit 1; }",
        timeout=600,
    )


def _get(kubeconfig: Path, namespace: str | None = None) -> dict[str, Any]:
    """Nodes (no namespace) or a namespace's pods as JSON, with the admin kubeconfig (the
    official client; there is no kubectl here)."""
    from kubernetes import client, config

    api = config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core = client.CoreV1Api(api)
        # _preload_content=False: the raw urllib3 response, read as plain JSON
        raw: Any = (
            core.list_node(_preload_content=False, _request_timeout=10)
            if namespace is None
            else core.list_namespaced_pod(namespace, _preload_content=False, _request_timeout=10)
        )
        data = json.loads(raw.data)
    finally:
        api.close()
    if not isinstance(data, dict):
        raise LabError("the API answered something other than a JSON object")
    return data


def node_ready(kubeconfig: Path) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for node in _get(kubeconfig)["items"]:
        conds = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
        out[node["metadata"]["name"]] = conds.get("Ready") == "True"
    return out


def system_pods(kubeconfig: Path) -> list[dict[str, Any]]:
    """kube-system's pods, read once for the checks below."""
    return list(_get(kubeconfig, "kube-system")["items"])


def scheduler_phase(pods: list[dict[str, Any]], node: str = CONTROL_PLANE) -> str | None:
    """The phase of a control plane's kube-scheduler static pod among kube-system's pods."""
    for pod in pods:
        if pod["metadata"]["name"] == f"kube-scheduler-{node}":
            return str(pod["status"].get("phase"))
    return None


def kube_proxy_nodes(pods: list[dict[str, Any]]) -> set[str]:
    """Nodes whose kube-proxy pod runs with every container ready."""
    out: set[str] = set()
    for pod in pods:
        if pod["metadata"].get("labels", {}).get("k8s-app") != "kube-proxy":
            continue
        statuses = pod["status"].get("containerStatuses", [])
        if statuses and all(c.get("ready") for c in statuses):
            out.add(str(pod["spec"].get("nodeName")))
    return out


def ready(kubeconfig: Path) -> bool:
    try:
        nodes_ready = node_ready(kubeconfig)
        pods = system_pods(kubeconfig)
    except Exception:  # the API server is still coming up: connection refused, 5xx
        return False
    return (
        set(nodes_ready) == set(nodes())
        and all(nodes_ready.values())
        and scheduler_phase(pods) == "Running"
        and kube_proxy_nodes(pods) == set(nodes())
        and all(scheduler_phase(pods, cp) == "Running" for cp in control_planes()[1:])
    )


def down() -> None:
    """Remove the node containers and their containerd volumes; fine if there are none."""
    if shutil.which("podman") is None:
        return
    for name in ALL_NODES:  # one at a time: podman 4 removes none when one name is missing
        podman("rm", "--force", "--ignore", "--volumes", "--time", "10", name, timeout=180)
    (_run_dir() / "admin.conf").unlink(missing_ok=True)


def status() -> dict[str, Any]:
    """What runs: each container's state, and from the API the nodes and the scheduler pod."""
    st: dict[str, Any] = {"containers": {}, "kubeconfig": None}
    for name in nodes():
        state = podman("inspect", "--format", "{{.State.Status}}", name, check=False).strip()
        st["containers"][name] = state or "absent"
    kubeconfig = _run_dir() / "admin.conf"
    if kubeconfig.exists():
        st["kubeconfig"] = str(kubeconfig)
        try:
            st["nodes_ready"] = node_ready(kubeconfig)
            st["kube_scheduler"] = scheduler_phase(system_pods(kubeconfig))
        except Exception as e:  # reported, not raised: status must work on a broken cluster
            st["api_error"] = str(e)[:300]
    return st


def address(node: str) -> str:
    """A node container's address on podman's network."""
    info = json.loads(podman("inspect", node))
    return str(info[0]["NetworkSettings"]["Networks"]["podman"]["IPAddress"])


def control_plane_host(workdir: Path, kubeconfig: Path) -> AnsibleHost:
    """The control-plane node as Ansible reaches an operator's: sshd on its own address,
    port 22, and a controller holding the cluster's admin kubeconfig."""
    host = AnsibleHost(
        CONTROL_PLANE,
        "kubeadm",
        workdir,
        address=address(CONTROL_PLANE),
        ssh_port=22,
        kubeconfig=str(kubeconfig),
        site_vars=SITE_VARS,
    )
    host.start_sshd()
    return host


def control_plane_hosts(workdir: Path, kubeconfig: Path) -> list[AnsibleHost]:
    """Every control-plane node of the cluster (control_planes()) as Ansible reaches it, as
    control_plane_host does for one, all in one inventory: each host's playbook() runs on
    all of them, as an operator's inventory of an HA cluster lists them, and `--limit`
    picks some. Each host object still reads and runs commands on its own node."""
    hosts = [
        AnsibleHost(
            name,
            "kubeadm",
            workdir,
            address=address(name),
            ssh_port=22,
            kubeconfig=str(kubeconfig),
            site_vars=SITE_VARS,
        )
        for name in control_planes()
    ]
    for host in hosts:  # one after the other: the first makes the key the others are given
        host.start_sshd()
    parent, group = GROUPS["kubeadm"]
    first = hosts[0]
    inventory = workdir / "inventory-control-planes.yml"
    inventory.write_text(yaml.safe_dump({
        "all": {
            "vars": {
                "ansible_port": 22,
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(first.ssh_key),
                "ansible_ssh_common_args": SSH_OPTIONS,
                "ansible_python_interpreter": "/usr/bin/python3",
                **SITE_VARS,
            },
            "children": {parent: {"children": {group: {
                "hosts": {h.name: {"ansible_host": h.address} for h in hosts}
            }}}},
        }
    }, sort_keys=False))  # fmt: skip
    for host in hosts:
        host.inventory = inventory
    return hosts


class Cluster(AdminClient):
    """The real-node cluster through its admin kubeconfig, for lab.workloads' helpers."""

    def __init__(self, kubeconfig: Path) -> None:
        self._kubeconfig = str(kubeconfig)

    @property
    def kubeconfig(self) -> str:
        return self._kubeconfig


def ready_scheduler_image(kube: Cluster, node: str = CONTROL_PLANE) -> str | None:
    """The image of a control plane's kube-scheduler static pod while it is Running with
    every container ready (at least one); None otherwise."""
    pod = kube.core().read_namespaced_pod(f"kube-scheduler-{node}", "kube-system")
    statuses = pod.status.container_statuses or []
    if pod.status.phase != "Running" or not statuses or not all(c.ready for c in statuses):
        return None
    return str(statuses[0].image)


def workload(
    *,
    cpu: str = "10m",
    memory: str = "16Mi",
    burn_cpu: int = 0,
    hold_memory: int = 0,
    node: str | None = None,
) -> dict[str, Any]:
    """A pod template for the workers: the pause container requesting cpu/memory, or, when
    asked to burn CPU (millicores) or hold memory (MiB), the lab's burner doing it for real
    while requesting the same small amounts (load nobody requested, as on the issue's hog
    node). node: pin it there (kubernetes.io/hostname), as an operator's nodeSelector would."""
    if burn_cpu or hold_memory:
        image, extra = (
            ADDON_IMAGES["BURNER_IMAGE"],
            {"args": ["-cpu", str(burn_cpu), "-memory", str(hold_memory)]},
        )
    else:
        image, extra = PAUSE_IMAGE, {}
    return pod_template(
        containers=[
            container(
                "app",
                image=image,
                requests={"cpu": cpu, "memory": memory},
                extra={"imagePullPolicy": "Never", **extra},  # imported; no registry here
            )
        ],
        node_selector={"kubernetes.io/hostname": node} if node else None,
        # the kubelet's default 30 s would slow every delete; neither program needs it
        extra={"terminationGracePeriodSeconds": 1},
    )


def working_set_bytes(node: str) -> int:
    """The node container's memory working set read on this machine from its cgroup, as
    cAdvisor defines it (usage less inactive file pages). The kubelet inside sees this cgroup
    as its root (`--cgroupns=private`), so its `node_memory_working_set_bytes` is this figure.
    cgroup v1 (this machine's memory controller) or v2."""
    path = Container(node).cgroup.lstrip("/")
    v1 = Path("/sys/fs/cgroup/memory") / path
    group, usage_file, inactive_key = (
        (v1, "memory.usage_in_bytes", "total_inactive_file")
        if v1.is_dir()
        else (Path("/sys/fs/cgroup") / path, "memory.current", "inactive_file")
    )
    stat = dict(ln.split() for ln in (group / "memory.stat").read_text().splitlines())
    usage = int((group / usage_file).read_text())
    inactive = int(stat[inactive_key])
    return max(usage - inactive, 0)


def node_get(node: str, url: str) -> tuple[int, str]:
    """GET `url` from inside a node (the extender and kube-scheduler listen on the node's
    loopback only), with the node's python3; TLS is not verified (the serving certificates
    there are self-signed). (0, the error) when nothing answered."""
    script = f"""
import ssl, urllib.error, urllib.request
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
try:
    r = urllib.request.urlopen({url!r}, context=ctx, timeout=5)
    print(r.status); print(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); print(e.read().decode())
except OSError as e:
    print(0); print(e)
"""
    out = sh(node, f"python3 - <<'LOADWISE_EOF'\n{script}\nLOADWISE_EOF")
    status, _, body = out.partition("\n")
    return int(status), body


def extender_metric(node: str, url: str, name: str) -> float | None:
    """One sample of the extender's /metrics (summed over its labels), read inside the node;
    None when the extender does not export it (yet)."""
    _, text = node_get(node, f"{url}/metrics")
    values = [
        float(ln.rsplit(None, 1)[-1])
        for ln in text.splitlines()
        if ln.startswith(name) and ln[len(name) : len(name) + 1] in (" ", "{")
    ]
    return sum(values) if values else None


def node_cpu_millicores(cluster: Cluster, node: str) -> float:
    """The node's CPU use as metrics-server measures it (metrics.k8s.io NodeMetrics)."""
    from kubernetes import client

    doc: Any = client.CustomObjectsApi(cluster.api_client()).get_cluster_custom_object(
        "metrics.k8s.io", "v1beta1", "nodes", node
    )
    return 1000 * parse_quantity(doc["usage"]["cpu"])


def make_hot(cluster: Cluster, node: str, millicores: int, extender_url: str) -> float:
    """Run the burner on `node` (Deployment `burner`), burning `millicores` while requesting
    10m, and wait until the extender on the control plane holds a load measured after
    metrics-server first saw it: metrics-server scrapes every 15 s, load-watcher collects once
    a minute, the extender reads it every 15 s (site.yml's defaults). The node's measured
    CPU then (millicores); `delete(cluster, "burner")` ends it."""
    from lab.workloads import create_deployment

    create_deployment(cluster, "burner", 1, workload(burn_cpu=millicores, node=node))

    def measured() -> bool:
        try:
            return node_cpu_millicores(cluster, node) >= 0.75 * millicores
        except Exception:  # the metrics API has no sample for the node yet: ask again
            return False

    wait_for(f"metrics-server to measure the burner on {node}", measured, 180, 3)
    wait_load_after(time.time(), extender_url, "that")
    return node_cpu_millicores(cluster, node)


def wait_load_after(seen: float, extender_url: str, what: str, timeout: float = 180) -> None:
    """Wait until the extender on the control plane holds a load measured after `seen` (epoch
    seconds): its loadwise_extender_load_age_seconds dates the snapshot's window end. `what`
    names the moment for the timeout's message."""

    def extender_caught_up() -> bool:
        age = extender_metric(CONTROL_PLANE, extender_url, "loadwise_extender_load_age_seconds")
        return age is not None and age >= 0 and time.time() - age > seen

    wait_for(f"the extender to hold a load measured after {what}", extender_caught_up, timeout, 3)


# The hog: the lab's burner as a service of the node's own systemd, outside Kubernetes (no
# pod, no request: the kubelet can neither see it as a pod nor evict it), as a backup agent
# or a media server on a homelab node would be.
HOG_UNIT = "loadwise-hog"
HOG_BINARY = "/usr/local/bin/loadwise-burner"


def start_hog(node: str, *, cpu: int, memory: int) -> None:
    """Burn `cpu` millicores and hold `memory` MiB on `node` in a transient systemd unit
    (HOG_UNIT), the binary copied from lab/build's cache; returns once it holds the memory
    (its MemoryCurrent, which counts what it has touched, reaches 90 % of it)."""
    from lab.components import build_binaries

    podman("cp", build_binaries(["burner"])["burner"], f"{node}:{HOG_BINARY}")
    sh(node, f"systemctl reset-failed {HOG_UNIT} 2>/dev/null; systemd-run --unit {HOG_UNIT} "
       f"--collect {HOG_BINARY} -cpu {cpu} -memory {memory}")  # fmt: skip

    def holding() -> bool:
        out = sh(node, f"systemctl show {HOG_UNIT} -p MemoryCurrent --value", check=False)
        return out.strip().isdigit() and int(out) >= 0.9 * memory * 2**20

    wait_for(f"the hog on {node} to hold {memory} MiB", holding, 60, 1)


def stop_hog(node: str) -> None:
    """End the hog on `node` (nothing when none runs)."""
    sh(node, f"systemctl stop {HOG_UNIT} 2>/dev/null; true")


def memory_limit(node: str) -> int | None:
    """The node container's memory limit in bytes, read on this machine from its cgroup;
    None when unlimited (a cgroup v1 "unlimited" is a page-rounded 2**63 - 1)."""
    path = Container(node).cgroup.lstrip("/")
    v1 = Path("/sys/fs/cgroup/memory") / path / "memory.limit_in_bytes"
    text = (v1 if v1.exists() else Path("/sys/fs/cgroup") / path / "memory.max").read_text()
    return None if text.strip() == "max" or int(text) >= 2**62 else int(text)
