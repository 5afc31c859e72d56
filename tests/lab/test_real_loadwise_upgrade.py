"""Upgrading loadwise itself on the real kubeadm node (lab/realnodes.py): the release before,
installed with its own site.yml, replaced by this checkout's site.yml while pods keep arriving,
then this checkout's rollback.yml.

The release before is 0.1.0, commit a4ce428 (CHANGELOG.md: "Not tagged; the commit that
introduced galaxy.yml"). Its tree is taken with `git archive` and built with `ansible-galaxy
collection build`; the tarball is installed with `ansible-galaxy collection install` (its
roles name its filters loadwise.loadwise.*) and unpacked into a plain directory, where its
playbooks/site.yml runs as 0.1.0's docs/ansible.md told operators to run it, with its roles
on roles_path. Not as the playbook `loadwise.loadwise.site`: 0.1.0 kept the manifest filters
in a role's filter_plugins, which a role inside an installed collection does not get, so that
form stops on this cluster's default scheduler with "No filter named
'loadwise_foreign_scheduler_config'" (seen here; CHANGELOG 0.2.0, Fixed).

Checked: the extender running after the upgrade is a new process and says this checkout's
version; the scheduler runs this checkout's scheduler config (a second run of that part
changes nothing); every pod created during the upgrade is bound (none left Pending by the
scheduler's restart); and rollback.yml leaves kubeadm's files and kubeadm-config byte for
byte as before 0.1.0 was installed, with no object or file of either release left.

The shared real-node cluster (tests/lab/conftest.py), from no loadwise (real_without_loadwise)
and left so. full: 10 min 15 s here (2026-11-28, the machine shared with other test runs: the
cluster and the reset 139 s, 0.1.0's site.yml 196 s, the upgrade 154 s, rollback 82 s); the
default run covers site.yml over a converged node (test_real_site.py, its second run) and
rollback byte for byte (test_real_site.py). Alone: `flock /tmp/loadwise-lab.lock
.venv/bin/python -m pytest tests/lab/test_real_loadwise_upgrade.py -n0 -m full`.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from lab import EXTENDER_HEALTH_URL, realnodes
from lab.hosts import REPO, VENV_BIN, PlaybookRun
from lab.processes import wait_for
from loadwise.extender import __version__
from tests.lab.conftest import LOADWISE_ON_NODE
from tests.lab.e2e import cluster_objects

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("realnodes"), pytest.mark.full]

CP = realnodes.CONTROL_PLANE
# 0.1.0: the commit CHANGELOG.md names for it (the one that introduced galaxy.yml)
OLD_COMMIT = "a4ce428"
OLD_VERSION = "0.1.0"
CONFIG = "/etc/kubernetes/loadwise-scheduler-config.yaml"
CONFIG_FLAG = f"--config={CONFIG}"
FILES = "find /etc/kubernetes /etc/systemd/system -type f | LC_ALL=C sort | xargs sha256sum"
# The operator's ansible.cfg for the old tree: 0.1.0's own settings, its roles on roles_path.
OLD_ANSIBLE_CFG = """\
[defaults]
roles_path = {roles}
stdout_callback = ansible.builtin.default
callback_result_format = yaml
interpreter_python = auto_silent
retry_files_enabled = false
forks = 10

[inventory]
host_pattern_mismatch = warning

[ssh_connection]
pipelining = true
"""


@pytest.fixture(scope="module")
def old_release(tmp_path_factory) -> Path:
    """0.1.0's collection built from its commit, installed (for the loadwise.loadwise.* filters
    its roles name) and unpacked as an operator's tree (for its playbooks and roles); the tree."""
    tmp = tmp_path_factory.mktemp("loadwise-0.1.0")
    src = tmp / "src"
    src.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", OLD_COMMIT], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    galaxy = str(VENV_BIN / "ansible-galaxy")
    subprocess.run(
        [galaxy, "collection", "build", str(src), "--output-path", str(tmp / "dist")],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    tarball = tmp / "dist" / f"loadwise-loadwise-{OLD_VERSION}.tar.gz"
    assert tarball.is_file(), sorted(p.name for p in (tmp / "dist").iterdir())
    # kubernetes.core and community.crypto come with the pip "ansible" package, as 0.1.0's
    # docs say; nothing is fetched
    subprocess.run(
        [galaxy, "collection", "install", str(tarball), "--no-deps",
         "-p", str(tmp / "collections")],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    installed = tmp / "collections" / "ansible_collections" / "loadwise" / "loadwise"
    manifest = json.loads((installed / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["version"] == OLD_VERSION, manifest["collection_info"]
    # Its playbooks run from a plain directory: inside ansible_collections/<ns>/<name> they
    # are the collection's own, whose roles get no role-level filter_plugins.
    tree = tmp / "tree"
    tree.mkdir()
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(tree)], check=True)
    (tmp / "ansible.cfg").write_text(OLD_ANSIBLE_CFG.format(roles=tree / "roles"))
    return tree


def old_playbook(host, tree: Path, playbook: str, timeout: float = 900) -> PlaybookRun:
    """Run 0.1.0's `playbook` on the host's inventory, from its tree."""
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(host.inventory), playbook]
    env = {
        **host.env(),
        "ANSIBLE_CONFIG": str(tree.parent / "ansible.cfg"),
        # the installed 0.1.0 only: a loadwise.loadwise elsewhere must not answer
        "ANSIBLE_COLLECTIONS_PATH": str(tree.parent / "collections"),
    }
    proc = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    run = PlaybookRun(argv, proc.returncode, proc.stdout, proc.stderr)
    log = host.workdir / f"{host.name}-0.1.0-{Path(playbook).stem}.log"
    log.write_text(" ".join(argv) + "\n\n" + proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    return run


def kubeadm_config(kube) -> str:
    cm = kube.core().read_namespaced_config_map("kubeadm-config", "kube-system")
    return str(cm.data["ClusterConfiguration"])


def extender_says(host) -> tuple[str, list[str]]:
    """The extender's MainPID and the versions its "serving on" lines name, oldest first."""
    pid = host.sh("systemctl show loadwise-extender -p MainPID --value").strip()
    journal = host.sh("journalctl -u loadwise-extender -o cat --no-pager")
    return pid, re.findall(r"loadwise-extender (\S+) serving on ", journal)


@pytest.fixture(scope="module")
def pristine(real_host, real_without_loadwise):
    return {"files": real_host.sh(FILES), "kubeadm_config": kubeadm_config(real_without_loadwise)}


class PodStream:
    """Bare pods created one every `every` seconds until stopped, as a stream of work that
    goes on while the scheduler is replaced."""

    def __init__(self, kube, prefix: str, every: float = 2.0) -> None:
        self.kube, self.prefix, self.every = kube, prefix, every
        self.names: list[str] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        spec = realnodes.workload()["spec"]
        while not self._stop.is_set():
            name = f"{self.prefix}-{len(self.names):03d}"
            try:
                self.kube.core().create_namespaced_pod(
                    "default",
                    {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "labels": {"stream": self.prefix}}, "spec": spec},
                )  # fmt: skip
                self.names.append(name)
            except Exception as e:  # the API server answers throughout; say it if not
                self.errors.append(f"{name}: {e}")
            self._stop.wait(self.every)

    def __enter__(self) -> PodStream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def unbound(self) -> list[str]:
        pods = self.kube.core().list_namespaced_pod(
            "default", label_selector=f"stream={self.prefix}"
        )
        return sorted(p.metadata.name for p in pods.items if not p.spec.node_name)

    def delete(self) -> None:
        self.kube.core().delete_collection_namespaced_pod(
            "default", label_selector=f"stream={self.prefix}", grace_period_seconds=0
        )


def test_the_release_before_installs(real_host, real_kube, pristine, old_release):
    run = old_playbook(real_host, old_release, "playbooks/site.yml")
    assert run.rc == 0, run.tail()
    assert run.changed[CP] > 0, run.tail(40)
    # (the role may restart it once its files are all in place: a line per start)
    _, versions = extender_says(real_host)
    assert versions and set(versions) == {OLD_VERSION}, versions
    cmdlines = real_host.scheduler_cmdlines()
    assert len(cmdlines) == 1 and CONFIG_FLAG in cmdlines[0].split(), cmdlines
    wait_for(
        "the scheduler with 0.1.0's config ready",
        lambda: realnodes.ready_scheduler_image(real_kube) is not None,
        120,
    )


def test_site_upgrades_loadwise_while_pods_arrive(real_host, real_kube, old_release):
    old_pid, _ = extender_says(real_host)
    old_config = real_host.read_text(CONFIG)
    with PodStream(real_kube, "upgrade-stream") as stream:
        time.sleep(4)  # a few pods before the run, the rest during it
        run = real_host.playbook("playbooks/site.yml")
        t_end = time.monotonic()
    try:
        assert run.rc == 0, run.tail()
        assert run.changed[CP] > 0, run.tail(40)
        assert not stream.errors, stream.errors
        assert len(stream.names) >= 10, stream.names
        # every pod of the stream bound: none left Pending by the scheduler's restart
        wait_for(
            f"the {len(stream.names)} pods of the stream bound",
            lambda: not stream.unbound(),
            120,
            interval=2,
        )
        print(
            f"\n{len(stream.names)} pods created over the upgrade, all bound"
            f" {time.monotonic() - t_end:.0f}s after the run"
        )
    finally:
        stream.delete()

    # the extender: a new process, this checkout's version
    new_pid, versions = extender_says(real_host)
    assert new_pid not in ("0", old_pid), (old_pid, new_pid)
    assert versions[0] == OLD_VERSION and versions[-1] == __version__, versions
    status, body = realnodes.node_get(CP, f"{EXTENDER_HEALTH_URL}/readyz")
    assert status == 200, body

    # the scheduler runs this checkout's config, and a second run finds nothing to change
    new_config = real_host.read_text(CONFIG)
    print(f"scheduler config {'changed' if new_config != old_config else 'unchanged'} by it")
    cmdlines = real_host.scheduler_cmdlines()
    assert len(cmdlines) == 1 and CONFIG_FLAG in cmdlines[0].split(), cmdlines
    # (the scheduler config's part only: the extender's wheel is built from this checkout's
    # working tree, which may change between two runs while this test runs)
    again = real_host.playbook("playbooks/site.yml", "--tags", "loadwise_scheduler_config")
    assert again.rc == 0, again.tail()
    assert again.changed == {CP: 0}, again.tail(120)
    assert real_host.read_text(CONFIG) == new_config
    extender = yaml.safe_load(new_config)["extenders"][0]
    assert extender["urlPrefix"] == "https://127.0.0.1:8888/scheduler", extender


def test_rollback_after_the_upgrade_is_byte_exact(real_host, real_kube, pristine):
    run = real_host.playbook("playbooks/rollback.yml")
    assert run.rc == 0, run.tail()
    wait_for(
        "the kubelet's stock scheduler ready",
        lambda: realnodes.ready_scheduler_image(real_kube) is not None,
        120,
    )
    assert real_host.sh(FILES) == pristine["files"]
    assert kubeadm_config(real_kube) == pristine["kubeadm_config"]
    assert real_host.sh(LOADWISE_ON_NODE).strip() == ""
    assert cluster_objects(real_kube) == []
    cmdlines = real_host.scheduler_cmdlines()
    assert len(cmdlines) == 1 and "loadwise" not in cmdlines[0], cmdlines
