"""roles/loadwise_scheduler_config/tasks/wait_healthy.yml, run by ansible-playbook on this machine.

The file the role includes after a change, after an automatic restore and after a rollback,
included here as playbooks/rollback.yml includes the role (`apply: tags:`) and run with
--tags loadwise_scheduler_config, over the local connection (no host). The node is a k3s
flavour whose systemctl is a stand-in on PATH naming a process made for the test as the
unit's MainPID; its health URL is a local HTTP server (tests/ansible/fakes.py). The module's
own cases are tests/ansible/test_scheduler_health_module.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.ansible.fakes import HealthServer, NamedProcess, path_with
from tests.ansible.playbook import ansible_playbook

ROOT = Path(__file__).resolve().parents[2]

PLAYBOOK = """\
- name: Include wait_healthy.yml as the role does
  hosts: localhost
  gather_facts: true
  gather_subset: [min]
  tasks:
    - name: Wait
      ansible.builtin.include_role:
        name: loadwise_scheduler_config
        tasks_from: wait_healthy
        apply:
          tags: [loadwise_scheduler_config]
      vars:
        loadwise_preflight_detected_flavour: k3s
        loadwise_scheduler_config_health_url: "{url}"
        loadwise_scheduler_config_health_timeout: 3
        loadwise_scheduler_config_health_stable_seconds: 1
        loadwise_scheduler_config_health_interval: 0.2
        loadwise_scheduler_config_wait_since: "{since}"
        loadwise_scheduler_config_wait_must_pass: {must_pass}
      tags: [loadwise_scheduler_config]

    - name: Show what was registered
      ansible.builtin.copy:
        content: "{{{{ loadwise_scheduler_config_wait | to_json }}}}"
        dest: "{result}"
        mode: "0600"
      tags: [loadwise_scheduler_config]
"""


def _play(
    tmp_path: Path, env: dict[str, str], url: str, *extra: str, must_pass: bool = True
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    result = tmp_path / "registered.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        PLAYBOOK.format(
            url=url,
            since=int(time.time() - 5),
            must_pass=str(must_pass).lower(),
            result=result,
        )
    )
    proc = ansible_playbook(playbook, "--tags", "loadwise_scheduler_config", *extra, env=env)
    registered = json.loads(result.read_text()) if result.exists() else None
    return proc, registered


TASK = (
    "TASK [loadwise_scheduler_config : "
    "Scheduler config | Wait until the new kube-scheduler is healthy]"
)


@pytest.fixture(autouse=True)
def _ansible_playbook() -> None:
    if not Path(sys.executable).with_name("ansible-playbook").exists():
        pytest.skip("ansible-playbook is not installed next to this Python (scripts/setup)")


def _node(
    tmp_path: Path, health: HealthServer, scheduler: NamedProcess, *extra: str, **kw: Any
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    """Run the play on a k3s stand-in whose MainPID is the `scheduler` fixture's process."""
    _, url = health
    _, proc = scheduler
    tools = {"systemctl": f"echo {proc.pid}", "journalctl": "echo 'Error: boom'"}
    return _play(tmp_path, path_with(tmp_path / "bin", tools), url, *extra, **kw)


def test_healthy_passes_under_the_role_tag(
    tmp_path: Path, health: HealthServer, scheduler: NamedProcess
) -> None:
    run, registered = _node(tmp_path, health, scheduler)
    assert run.returncode == 0, run.stdout + run.stderr
    assert TASK in run.stdout
    assert registered is not None
    assert registered["healthy"] is True
    url, pid = health[1], scheduler[1].pid
    assert registered["msg"] == f"healthy: pid {pid} answered 200 on {url} for 1s"
    assert registered["pid"] == pid
    assert registered["changed"] is False


def test_unhealthy_fails_the_play(
    tmp_path: Path, health: HealthServer, scheduler: NamedProcess
) -> None:
    health[0].status = 500
    run, registered = _node(tmp_path, health, scheduler)
    assert run.returncode == 2, run.stdout + run.stderr
    assert registered is None
    assert "kube-scheduler not healthy after 3s" in run.stdout
    assert "Error: boom" in run.stdout


def test_unhealthy_is_recorded_when_it_need_not_pass(
    tmp_path: Path, health: HealthServer, scheduler: NamedProcess
) -> None:
    health[0].status = 500
    run, registered = _node(tmp_path, health, scheduler, must_pass=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert registered is not None
    assert registered["healthy"] is False
    assert registered["failed"] is False
    url, pid = health[1], scheduler[1].pid
    assert registered["scheduler_errors"] == ["Error: boom"]
    assert registered["msg"].splitlines() == [
        f"kube-scheduler not healthy after 3s: pid {pid}: {url} -> 500 ok",
        "scheduler's own last errors:",
        "Error: boom",
    ]


def test_check_mode_waits_for_nothing(
    tmp_path: Path, health: HealthServer, scheduler: NamedProcess
) -> None:
    run, registered = _node(tmp_path, health, scheduler, "--check")
    assert run.returncode == 0, run.stdout + run.stderr
    assert registered is None  # the copy that records it does not write in --check
    assert health[0].requests == 0
    # the wait task's own result: ok, not changed (the copy after it would write, so the
    # play's recap counts one change)
    assert run.stdout.split(TASK, 1)[1].split("TASK [", 1)[0].strip().endswith("ok: [localhost]")


def test_other_tags_skip_it(tmp_path: Path, health: HealthServer, scheduler: NamedProcess) -> None:
    run, registered = _node(tmp_path, health, scheduler, "--skip-tags", "loadwise_scheduler_config")
    assert run.returncode == 0, run.stdout + run.stderr
    assert registered is None
    assert health[0].requests == 0
