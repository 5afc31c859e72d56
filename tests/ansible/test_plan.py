"""The plan a `site.yml --check` run prints at its end (roles/loadwise/tasks/plan.yml).

ansible-playbook on this machine over the local connection, with the k3s stand-in of
test_preflight_playbook.py and the k3s files of test_ansible_core_versions.py under the test's
directory: `--check --tags loadwise_preflight,loadwise_scheduler_config` renders and compares
the scheduler's files and writes nothing. The second run finds the files as a real run would
have left them (their content and the record of the proof, taken from the first run's --diff)
and must say "no change". Three control-plane hosts (test_limit.py's inventory, all this
machine) show that the plan names the hosts of the run, --limit applied.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

from tests.ansible.playbook import ansible_playbook
from tests.ansible.test_ansible_core_versions import _k3s_files
from tests.ansible.test_limit import _inventory
from tests.ansible.test_preflight_playbook import INVENTORIES, _node_vars

ROOT = Path(__file__).resolve().parents[2]
PLAN = "TASK [loadwise : Plan | Say what a real run would change on each host]"
NOT_CHECKED = "not checked (left out of this run by --tags or --skip-tags)"


def _check(tmp_path: Path, inventory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp")}
    for name in ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_CONTEXT", "KUBECONFIG"):
        env.pop(name, None)
    return ansible_playbook(
        ROOT / "playbooks" / "site.yml",
        "-e",
        f"@{_node_vars(tmp_path)}",
        "--check",
        *args,
        inventory=inventory,
        env=env,
        timeout=600,
    )


def _folded(run: subprocess.CompletedProcess[str]) -> str:
    return " ".join((run.stdout + run.stderr).split()).replace("''", "'")


def _plan_hosts(out: str) -> list[str]:
    """The hosts the per-host plan task reported on, sorted: Ansible's forks report them in
    whichever order they finish."""
    section = out.split(PLAN, 1)[1].split("\nTASK [", 1)[0]
    return sorted(re.findall(r"(?m)^ok: \[([^\]]+)\]", section))


def _written_by_diff(out: str) -> dict[str, str]:
    """The files the --diff of a check run shows as written whole: path -> content."""
    files = {}
    for m in re.finditer(r"(?m)^\+\+\+ after: (\S+)\n@@ -0,0 \+1,(\d+) @@\n", out):
        lines = out[m.end() :].split("\n")[: int(m[2])]
        assert all(line.startswith("+") for line in lines), lines
        files[m[1]] = "".join(line[1:] + "\n" for line in lines)
    return files


def test_the_plan_says_a_changed_scheduler_config_would_change_then_no_change(
    tmp_path: Path,
) -> None:
    files = _k3s_files(tmp_path)
    etc = tmp_path / "rancher-k3s"
    config = etc / "loadwise.yaml"
    dropin = etc / "config.yaml.d" / "90-loadwise.yaml"

    first = _check(tmp_path, INVENTORIES / "plain.ini", "--diff", "--tags",
                   "loadwise_preflight,loadwise_scheduler_config", *files)  # fmt: skip
    said = _folded(first)
    assert first.returncode == 0, said
    assert _plan_hosts(first.stdout) == ["cp-1"], said
    assert f"scheduler config: would change: {config}, {dropin};" in said, said
    assert "the scheduler is restarted and must prove healthy" in said
    # roles this run left out are not reported as unchanged
    assert f"extender: {NOT_CHECKED}" in said and f"descheduler: {NOT_CHECKED}" in said
    assert (
        "a real run with the same options works on the control-plane hosts cp-1 and on no other"
        " host. Scheduler config: would change on cp-1." in said
    ), said
    assert not config.exists() and not dropin.exists()

    # the node as a real run leaves it: the files, and the record of the proven change
    written = _written_by_diff(first.stdout)
    assert sorted(written) == sorted([str(config), str(dropin)]), written
    for path, content in written.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
        proof = tmp_path / "backup" / "written" / f"{path.lstrip('/')}.sha256"
        proof.parent.mkdir(parents=True, exist_ok=True)
        proof.write_text(f"{hashlib.sha256(content.encode()).hexdigest()}  {path}\n")

    second = _check(tmp_path, INVENTORIES / "plain.ini", "--tags",
                    "loadwise_preflight,loadwise_scheduler_config", *files)  # fmt: skip
    said = _folded(second)
    assert second.returncode == 0, said
    assert "scheduler config: no change" in said, said
    assert "would change: " not in said, said
    assert "Scheduler config: no change on cp-1." in said, said


def test_the_plan_names_exactly_the_hosts_of_the_run(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path)
    run = _check(tmp_path, inventory, "--tags", "loadwise_preflight", "--limit", "cp-2,cp-3")
    said = _folded(run)
    assert run.returncode == 0, said
    assert _plan_hosts(run.stdout) == ["cp-2", "cp-3"], said
    assert (
        "a real run with the same options works on the control-plane hosts cp-2, cp-3 and on no"
        " other host. Scheduler config: not checked on cp-2, cp-3." in said
    ), said
    # preflight alone: nothing is claimed about the scheduler either way
    assert f"scheduler config: {NOT_CHECKED}" in said, said
    assert "no change on" not in said


def test_without_check_there_is_no_plan(tmp_path: Path) -> None:
    env = {**os.environ, "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp")}
    run = ansible_playbook(
        ROOT / "playbooks" / "site.yml",
        "-e",
        f"@{_node_vars(tmp_path)}",
        "--tags",
        "loadwise_preflight",
        inventory=INVENTORIES / "plain.ini",
        env=env,
        timeout=600,
    )
    said = _folded(run)
    assert run.returncode == 0, said
    assert "PLAY [Plan of this check run]" in said
    assert "Plan | Say which hosts" not in said, said
