"""The extender's systemd unit as the role renders it (the real template module, the role's
defaults), checked by systemd's own parser (``systemd-analyze verify``): Type=notify with a
watchdog, and the memory, task and file bounds."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from tests.ansible.playbook import ROOT, ansible_playbook

ROLE = ROOT / "roles/loadwise_extender"


def _render(tmp_path: Path, **variables: object) -> str:
    prefix = tmp_path / "prefix"
    (prefix / "venv/bin").mkdir(parents=True)
    program = prefix / "venv/bin/loadwise-extender"  # verify wants ExecStart to exist
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    unit = tmp_path / "loadwise-extender.service"
    playbook = tmp_path / "render.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Render the unit as the role does",
                    "hosts": "localhost",
                    "gather_facts": False,
                    "vars_files": [str(ROLE / "defaults/main.yml")],
                    "tasks": [
                        {
                            "name": "Render",
                            "ansible.builtin.template": {
                                "src": str(ROLE / "templates/loadwise-extender.service.j2"),
                                "dest": str(unit),
                                "mode": "0644",
                            },
                        }
                    ],
                }
            ]
        )
    )
    extra = {"loadwise_cluster_objects": True, "loadwise_extender_prefix": str(prefix)}
    run = ansible_playbook(playbook, "-e", json.dumps({**extra, **variables}))
    assert run.returncode == 0, run.stdout + run.stderr
    verify = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert verify.returncode == 0 and not verify.stderr.strip(), verify.stderr
    return unit.read_text()


def _service(text: str) -> dict[str, list[str]]:
    section, out = "", {}
    for line in text.splitlines():
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def test_the_unit_notifies_systemd_and_is_bounded(tmp_path):
    service = _service(_render(tmp_path))
    assert service["Type"] == ["notify"] and service["NotifyAccess"] == ["main"]
    assert service["WatchdogSec"] == ["30s"] and service["Restart"] == ["on-failure"]
    assert service["MemoryHigh"] == ["192M"] and service["MemoryMax"] == ["256M"]
    assert service["TasksMax"] == ["64"] and service["LimitNOFILE"] == ["512"]
    assert service["TimeoutStopSec"] == ["15s"]


def test_the_bounds_are_role_variables(tmp_path):
    service = _service(
        _render(
            tmp_path,
            loadwise_extender_memory_high="300M",
            loadwise_extender_memory_max="400M",
            loadwise_extender_tasks_max=128,
            loadwise_extender_limit_nofile=2048,
            loadwise_extender_watchdog_seconds=60,
        )
    )
    assert (service["MemoryHigh"], service["MemoryMax"]) == (["300M"], ["400M"])
    assert (service["TasksMax"], service["LimitNOFILE"]) == (["128"], ["2048"])
    assert service["WatchdogSec"] == ["60s"]
