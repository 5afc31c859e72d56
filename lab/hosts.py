"""Control-plane hosts for the lab: podman containers the playbooks treat as k3s or
kubeadm servers, running the REAL kube-scheduler against the lab's API server.

Each host is the node image (lab/nodes/build-node-image, the molecule scenarios boot it too)
turned into a kubeadm- or k3s-flavoured server by lab/nodes/prepare-node.yml. It shares the
machine's network namespace (podman --network host), so everything stays on loopback:
its scheduler reaches the lab API on 127.0.0.1:16443, the extender the role installs
reads the lab's load-watcher on 127.0.0.1:2020, and the tests reach the extender on
127.0.0.1:8888. Hosts therefore share ports: run one at a time.

Ansible reaches a host the way it reaches an operator's server: over SSH (sshd on a
loopback port of its own, key login as root), with the pipelining ansible.cfg turns on.
The podman connection would work too, but it cannot pipeline and costs every task
several `podman exec` calls: a 22-task playbook took 33-36 s over podman and 15 s over
SSH, measured side by side on this machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from lab.cluster import Lab
from lab.peek import Container, schedulers
from lab.processes import LabError, port_open

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# The node image's build script and the playbook that makes an image a control-plane host.
BUILD_NODE_IMAGE = HERE / "nodes" / "build-node-image"
PREPARE_NODE = HERE / "nodes" / "prepare-node.yml"
VENV_BIN = Path(sys.executable).parent
_DEFAULTS = yaml.safe_load((REPO / "roles/loadwise/defaults/main.yml").read_text())
_EXTENDER_DEFAULTS = yaml.safe_load(
    (REPO / "roles/loadwise_extender/defaults/main.yml").read_text()
)
# Where the playbooks' extender serves kube-scheduler on each host (roles/loadwise/defaults):
# HTTPS for the scheduler's client certificate only, by default (loadwise_extender_tls_enabled).
_SCHEME = "https://" if _DEFAULTS["loadwise_extender_tls_enabled"] else "http://"
EXTENDER_URL = _SCHEME + _DEFAULTS["loadwise_listen"]
# Its plain-HTTP listener for /healthz, /readyz and /metrics (roles/loadwise_extender/defaults),
# which is where the tests and the demo read its state: no client certificate needed.
EXTENDER_HEALTH_URL = "http://" + _EXTENDER_DEFAULTS["loadwise_extender_health_listen"]
# Inventory groups per flavour, as operators' own inventories have them:
# k3s-ansible's server group under k3s_cluster, kubespray's kube_control_plane under
# k8s_cluster. The playbooks find both with no loadwise variable; loadwise's own default
# name, control_plane, is what molecule and the tests/ansible inventories use.
GROUPS = {"k3s": ("k3s_cluster", "server"), "kubeadm": ("k8s_cluster", "kube_control_plane")}
# Each host's sshd, on loopback only (the host shares the machine's network).
SSH_PORTS = {"kubeadm": 22601, "k3s": 22602}
SSH_OPTIONS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o IdentitiesOnly=yes"
# The operator's own k3s config.yaml already passing kube-scheduler-arg; bind-address stays
# on loopback because this host shares the machine's network.
K3S_CONFIG = """\
# the operator's own k3s config
write-kubeconfig-mode: "0600"
kube-scheduler-arg:
  - bind-address=127.0.0.1
  - v=2
"""
# The operator's inventory variables for a host driving the lab. load-watcher publishes no
# image and kwok only pretends to run its Deployment, so the extender reads the lab's real
# load-watcher instead (what an operator with an external load-watcher does).
SITE_VARS = {
    # load-watcher as a Deployment of the operator's image (kwok "runs" it; the rollout wait
    # sees it available), the extender reading the lab's load-watcher at the source URL.
    "loadwise_load_watcher_enabled": True,
    "loadwise_load_watcher_mode": "deployment",
    "loadwise_extender_source": "load-watcher",
    "loadwise_load_watcher_image": "registry.invalid/loadwise/load-watcher:v0.2.4",
    "loadwise_scheduler_config_health_stable_seconds": 10,
}
_RECAP = re.compile(
    r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M
)


@dataclass
class PlaybookRun:
    argv: list[str]
    rc: int
    stdout: str
    stderr: str

    @property
    def changed(self) -> dict[str, int]:
        """changed= per host from the PLAY RECAP. The controller's own play
        (playbooks/control_plane.yml on localhost, which only selects hosts) is listed
        only when it changed something, so a test comparing with {host: 0} still sees it."""
        return {
            m[1]: int(m[3])
            for m in _RECAP.finditer(self.stdout)
            if m[1] != "localhost" or int(m[3])
        }

    @property
    def said(self) -> str:
        """Everything printed, whitespace folded, for matching messages."""
        return re.sub(r"\s+", " ", self.stdout + " " + self.stderr)

    def tail(self, lines: int = 80) -> str:
        return "\n".join((self.stdout + "\n--- stderr ---\n" + self.stderr).splitlines()[-lines:])


def destroy(*names: str) -> None:
    """Remove host containers (all the lab's when no name is given); fine if there are none."""
    if shutil.which("podman") is None:
        return
    # one at a time: given several names, one of them missing, podman 4 removed none (rc 0)
    for name in names or tuple(f"loadwise-lab-{f}" for f in GROUPS):
        subprocess.run(["podman", "rm", "--force", "--ignore", "--time", "10", name],
                       capture_output=True, timeout=120)  # fmt: skip


def destroy_own(run: Path) -> None:
    """Remove the host containers this lab run made, by the IDs it recorded: another run's
    container of the same name (a test run beside a demo, a lab in another network
    namespace) has another ID and stays."""
    own = run / "hosts"
    if shutil.which("podman") is None or not own.is_dir():
        return
    for record in own.iterdir():
        container = record.read_text().strip()
        if container:
            subprocess.run(["podman", "rm", "--force", "--ignore", "--time", "10", container],
                           capture_output=True, timeout=120)  # fmt: skip
        record.unlink()


def node_image(env: dict[str, str] | None = None) -> str:
    """Build the node image unless it exists (needs root, podman, debootstrap); its tag.
    A build reports its progress on stderr (lab/prepare.py)."""
    from lab.prepare import prepare

    prepare("node-image")
    proc = subprocess.run(
        [str(BUILD_NODE_IMAGE)], capture_output=True, text=True, timeout=900, env=env
    )
    if proc.returncode != 0:
        raise LabError(f"{BUILD_NODE_IMAGE} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


class AnsibleHost:
    """A podman container that Ansible reaches over SSH as an operator's control-plane node
    (sshd on `address`:`ssh_port`, key login as root), with a controller whose kubernetes.core
    tasks use `kubeconfig` and an inventory in the flavour's operator layout (GROUPS)."""

    def __init__(
        self,
        name: str,
        flavour: str,
        workdir: Path,
        *,
        address: str,
        ssh_port: int,
        kubeconfig: str,
        site_vars: dict[str, object],
    ) -> None:
        self.name = name
        self.flavour = flavour
        self.workdir = workdir
        self.address = address
        self.ssh_port = ssh_port
        self.kubeconfig = kubeconfig
        self.site_vars = site_vars
        self.inventory = workdir / f"inventory-{name}.yml"
        self.ssh_key = workdir / "ssh" / "id_ed25519"
        self.runs = 0
        self._peek = Container(name)

    def start_sshd(self) -> None:
        """Host keys of its own, the lab's key for root, sshd on its address only; then the
        inventory that reaches it."""
        if not self.ssh_key.exists():
            self.ssh_key.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "loadwise-lab",
                            "-f", str(self.ssh_key)], check=True, timeout=30)  # fmt: skip
        listen = f"{self.address}:{self.ssh_port}"
        proc = subprocess.run(
            ["podman", "exec", "-i", self.name, "loadwise-test-sshd", listen],
            input=self.ssh_key.with_suffix(".pub").read_text(), text=True, capture_output=True,
            timeout=180,
        )  # fmt: skip
        if proc.returncode != 0:
            raise LabError(f"{self.name}: starting sshd failed:\n{proc.stderr}")
        deadline = time.monotonic() + 30
        while not port_open(self.ssh_port, self.address):
            if time.monotonic() > deadline:
                raise LabError(f"{self.name}: no sshd on {listen}")
            time.sleep(0.2)
        self._write_inventory()

    def sh(self, script: str, *, check: bool = True, timeout: float = 120) -> str:
        proc = subprocess.run(["podman", "exec", self.name, "bash", "-c", script],
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip
        if check:
            assert proc.returncode == 0, (
                f"{self.name}: {script!r} -> {proc.returncode}\n{proc.stderr}"
            )
        return proc.stdout

    def read_text(self, path: str) -> str:
        """A file inside this host, read from this machine (no `podman exec`: lab/peek.py)."""
        return self._peek.read_text(path)

    def scheduler_cmdlines(self) -> list[str]:
        """Command lines of kube-scheduler processes inside this host: started by path (the
        stand-ins) or by name on PATH (the kubelet, from kubeadm's manifest)."""
        return schedulers(self._peek.cmdlines())

    # -- ansible --------------------------------------------------------------------------

    def _write_inventory(self) -> None:
        parent, group = GROUPS[self.flavour]
        inv = {
            "all": {
                "vars": {
                    "ansible_host": self.address,
                    "ansible_port": self.ssh_port,
                    "ansible_user": "root",
                    "ansible_ssh_private_key_file": str(self.ssh_key),
                    "ansible_ssh_common_args": SSH_OPTIONS,
                    "ansible_python_interpreter": "/usr/bin/python3",
                    **self.site_vars,
                },
                "children": {parent: {"children": {group: {"hosts": {self.name: {}}}}}},
            }
        }
        self.inventory.write_text(yaml.safe_dump(inv, sort_keys=False))

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
        env["ANSIBLE_FORCE_COLOR"] = "0"
        # kubernetes.core's modules run on the controller (delegate_to: localhost)
        env["K8S_AUTH_KUBECONFIG"] = self.kubeconfig
        return env

    def playbook_argv(self, playbook: str, *args: str,
                      extra: dict[str, object] | None = None) -> list[str]:  # fmt: skip
        """ansible-playbook's command line for this host (run it in REPO with env())."""
        argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory), str(REPO / playbook),
                *args]  # fmt: skip
        if extra:
            argv += ["-e", yaml.safe_dump(extra, default_flow_style=True, width=10_000)]
        return argv

    def playbook(
        self,
        playbook: str,
        *args: str,
        extra: dict[str, object] | None = None,
        timeout: float = 900,
        env: Mapping[str, str] | None = None,
    ) -> PlaybookRun:
        """Run ``playbook`` on this host; ``env`` is set on top of env()."""
        argv = self.playbook_argv(playbook, *args, extra=extra)
        proc = subprocess.run(argv, cwd=REPO, env={**self.env(), **(env or {})},
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip
        self.runs += 1
        run = PlaybookRun(argv, proc.returncode, proc.stdout, proc.stderr)
        log = self.workdir / f"{self.name}-{self.runs:02d}-{Path(playbook).stem}.log"
        log.write_text(" ".join(argv) + "\n\n" + proc.stdout + "\n--- stderr ---\n" + proc.stderr)
        return run


class ControlPlaneHost(AnsibleHost):
    """One podman container playing a control-plane node of the given flavour: the node
    image made kubeadm- or k3s-flavoured by the stand-ins (prepare), sharing the machine's
    network, its scheduler the lab's scheduler."""

    def __init__(self, flavour: str, image: str, lab: Lab, workdir: Path) -> None:
        super().__init__(
            f"loadwise-lab-{flavour}",
            flavour,
            workdir,
            address="127.0.0.1",
            ssh_port=SSH_PORTS[flavour],
            kubeconfig=lab.kubeconfig,
            site_vars={**SITE_VARS, "loadwise_extender_source_url": lab.load_watcher_url},
        )
        self.image = image
        self.lab = lab

    def create(self) -> None:
        self.destroy()
        made = subprocess.run(
            ["podman", "run", "-d", "--name", self.name, "--hostname", self.name,
             "--network", "host", "--systemd=always", "--privileged", self.image, "/sbin/init"],
            check=True, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        own = self.lab.run / "hosts"
        own.mkdir(exist_ok=True)
        (own / self.name).write_text(made.stdout.strip() + "\n")  # the container's ID
        self.start_sshd()

    def destroy(self) -> None:
        destroy(self.name)

    def prepare(self, kube_scheduler: str) -> PlaybookRun:
        return self.playbook(
            str(PREPARE_NODE.relative_to(REPO)),
            extra={
                "loadwise_test_flavour": self.flavour,
                "loadwise_test_kube_scheduler": kube_scheduler,
                "loadwise_test_scheduler_kubeconfig": self.lab.scheduler_kubeconfig,
                "loadwise_test_k3s_config": K3S_CONFIG,
            },
        )
