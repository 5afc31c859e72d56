"""The installer on the oldest ansible-core the collection supports, on the newest, and on
the releases between them when their venvs exist.

meta/runtime.yml promises ansible-core >= 2.16 (Ubuntu 24.04's own ansible-core is 2.16), and
ansible-core 2.19 changed templating: before it a template whose value is None renders as '',
so a check written against 2.19 alone can refuse the defaults on 2.16-2.18 (it did: "got  and
180" for an unset loadwise_extender_max_stale_seconds). scripts/setup makes
.venv-ansible-oldest with the oldest supported ansible-core (and the `ansible` 9.x package for
its community.crypto 2.x: test_tls_on_oldest_core.py); .venv's pin
(requirements-dev.txt) is the newest on PyPI (`pip index versions ansible-core`, 2.19.14 when
this was written). scripts/setup-ansible-cores (`make test-ansible-cores`) adds the latest
2.17 and 2.18 in .venv-ansible-2.17 and .venv-ansible-2.18, only when asked: every test here
runs on each of them that exists, and the oldest and the pinned always. Each runs, on this
machine over the local connection with the k3s stand-in of test_preflight_playbook.py (nothing
needs a node or a cluster):

- the preflight with every role default,
- the preflight refusing a bad value of the variable that broke (the fix must not accept all),
- site.yml --check of the preflight and the scheduler configuration, which renders, checks
  and compares the scheduler's files and writes nothing,
- rollback.yml --check.

kubernetes.core comes from .venv's `ansible` package (6.2, whose meta/runtime.yml requires
ansible-core >= 2.16), as an operator's `ansible-galaxy collection install` would add it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.ansible.playbook import ansible_playbook
from tests.ansible.test_preflight_playbook import INVENTORIES, REPORT, _node_vars

ROOT = Path(__file__).resolve().parents[2]
OLDEST = ROOT / ".venv-ansible-oldest" / "bin" / "python"
# The releases between, by minor version: tested when scripts/setup-ansible-cores made them.
BETWEEN = {minor: ROOT / f".venv-ansible-{minor}" / "bin" / "python" for minor in ("2.17", "2.18")}
PYTHONS = {
    "oldest": OLDEST,
    **{minor: python for minor, python in BETWEEN.items() if python.exists()},
    "pinned": Path(sys.executable),
}
# where .venv's `ansible` package keeps the collections it bundles
BUNDLED = Path(__import__("ansible_collections").__path__[0]).parent


def _version(python: Path) -> str:
    assert python.exists(), f"{python} is missing: scripts/setup makes it"
    return subprocess.run(
        [str(python), "-c", "import ansible.release as r; print(r.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def _run(tmp_path: Path, which: str, playbook: str, *args: str) -> subprocess.CompletedProcess[str]:
    python = PYTHONS[which]
    _version(python)
    env = {
        **os.environ,
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_COLLECTIONS_PATH": str(BUNDLED),
    }
    for name in ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_CONTEXT", "KUBECONFIG"):
        env.pop(name, None)
    return ansible_playbook(
        ROOT / "playbooks" / playbook,
        "-e",
        f"@{_node_vars(tmp_path)}",
        "-e",
        f"ansible_python_interpreter={python}",
        *args,
        inventory=INVENTORIES / "plain.ini",
        env=env,
        timeout=300,
        python=python,
    )


def _k3s_files(tmp_path: Path) -> list[str]:
    """The k3s config file and loadwise's files, under tmp_path; plain HTTP, since the
    scheduler's certificates come from the extender role, which this run leaves out."""
    etc = tmp_path / "rancher-k3s"
    etc.mkdir()
    (etc / "config.yaml").write_text("write-kubeconfig-mode: '0644'\n")
    path = tmp_path / "k3s-files.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "loadwise_extender_tls_enabled": False,
                "loadwise_scheduler_config_k3s_config_file": str(etc / "config.yaml"),
                "loadwise_scheduler_config_k3s_config_path": str(etc / "loadwise.yaml"),
                "loadwise_backup_dir": str(tmp_path / "backup"),
                "loadwise_extender_config_dir": str(tmp_path / "etc-loadwise"),
                "loadwise_extender_prefix": str(tmp_path / "opt" / "loadwise" / "extender"),
                "loadwise_load_watcher_prefix": str(tmp_path / "opt" / "loadwise" / "lw"),
            }
        )
    )
    return ["-e", f"@{path}"]


def test_the_oldest_venv_holds_the_oldest_supported_ansible_core() -> None:
    """The floor tested is the floor promised, and docs/ansible.md names both ends."""
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
    floor = re.fullmatch(r">=(\d+\.\d+)\.0", runtime["requires_ansible"])
    assert floor, runtime["requires_ansible"]
    oldest = _version(OLDEST)
    assert oldest.startswith(floor.group(1) + "."), (oldest, floor.group(1))
    pinned = _version(PYTHONS["pinned"])
    assert re.search(
        rf"ansible-core=={re.escape(pinned)}\b", (ROOT / "requirements-dev.txt").read_text()
    )
    said = " ".join((ROOT / "docs" / "ansible.md").read_text().split())
    assert f"ansible-core {oldest} and {pinned}" in said
    assert f"ANSIBLE_OLDEST={oldest}" in (ROOT / "scripts" / "setup").read_text()


def test_the_releases_between_are_the_latest_patches_setup_names() -> None:
    """Each venv of a release between holds what scripts/setup-ansible-cores installs there,
    and the versions tested go up from the oldest to the pinned one."""
    named = re.search(
        r"for version in ([\d. ]+); do", (ROOT / "scripts" / "setup-ansible-cores").read_text()
    )
    assert named, "scripts/setup-ansible-cores names no versions"
    versions = {version.rsplit(".", 1)[0]: version for version in named.group(1).split()}
    assert sorted(versions) == sorted(BETWEEN)
    for minor, python in BETWEEN.items():
        if python.exists():
            assert _version(python) == versions[minor], python
    tested = [
        tuple(int(part) for part in _version(python).split(".")) for python in PYTHONS.values()
    ]
    assert tested == sorted(tested) and len(set(tested)) == len(tested), tested


@pytest.mark.parametrize("which", PYTHONS)
def test_the_defaults_pass_preflight(tmp_path: Path, which: str) -> None:
    run = _run(tmp_path, which, "site.yml", "--tags", "loadwise_preflight")
    said = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 0, said
    assert REPORT in run.stdout
    assert "loadwise_extender_max_stale_seconds" not in said


@pytest.mark.parametrize("which", PYTHONS)
@pytest.mark.parametrize(("value", "ok"), [(120, False), (0, False), (900, True)])
def test_max_stale_is_still_checked(tmp_path: Path, which: str, value: int, ok: bool) -> None:
    run = _run(
        tmp_path,
        which,
        "site.yml",
        "--tags",
        "loadwise_preflight",
        "-e",
        f"loadwise_extender_max_stale_seconds={value}",
    )
    said = " ".join(run.stdout.split())
    assert (run.returncode == 0) == ok, said
    refusal = (
        "loadwise_extender_max_stale_seconds must be a whole number of seconds, at least"
        f" loadwise_extender_stale_after_seconds (got {value} and 180)"
    )
    assert (refusal in said) != ok, said


@pytest.mark.parametrize("which", PYTHONS)
def test_a_check_mode_run_renders_and_compares_without_writing(tmp_path: Path, which: str) -> None:
    files = _k3s_files(tmp_path)
    etc = tmp_path / "rancher-k3s"
    before = {p: p.read_bytes() for p in etc.rglob("*") if p.is_file()}
    run = _run(
        tmp_path,
        which,
        "site.yml",
        "--check",
        "--diff",
        "--tags",
        "loadwise_preflight,loadwise_scheduler_config",
        *files,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    # the scheduler's configuration was rendered and found different from the node's (none)
    assert (
        "TASK [loadwise_scheduler_config : Scheduler config | Check the rendered configuration]"
        in out
    )
    written = re.search(r"changed: \[cp-1\] => \(item=([^)]*loadwise\.yaml)\)", out)
    assert written, out
    assert "urlPrefix: http://127.0.0.1:8888/scheduler" in out
    assert {p: p.read_bytes() for p in etc.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "backup").exists()


@pytest.mark.parametrize("which", PYTHONS)
def test_a_check_mode_rollback_runs_through(tmp_path: Path, which: str) -> None:
    run = _run(tmp_path, which, "rollback.yml", "--check", *_k3s_files(tmp_path))
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "PLAY [Remove the extender and the add-ons]" in out
    assert re.search(r"cp-1\s+: ok=\d+\s+changed=0\s+unreachable=0\s+failed=0", out), out
