"""What roles/loadwise/tasks/plan.yml says of each component, from the results the roles
register, run by ansible-playbook on this machine (local connection, --check).

The registered results are given as the roles leave them (a skipped task registers
{skipped: true}; kubernetes.core.k8s with a list of definitions returns one result per
object, with its method); the one API read of the plan (an earlier run's descheduler, when it
is disabled) goes to tests/ansible/fake_kubernetes_core.py. test_plan.py runs the plan at the
end of site.yml itself.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.fake_kubernetes_core import environment
from tests.ansible.playbook import ansible_playbook

SKIPPED = {"skipped": True, "changed": False}
LABELS = {"app.kubernetes.io/managed-by": "loadwise-ansible"}


def _applied(*methods: str, changed: bool = True) -> dict[str, Any]:
    return {
        "changed": changed,
        "result": {"results": [{"changed": changed, "method": m} for m in methods]},
    }


def _slurped(text: str) -> dict[str, Any]:
    return {"content": base64.b64encode(text.encode()).decode(), "failed": False}


EXTENDER_SAME = {
    "loadwise_extender_target": {"stdout": "cp312-x86_64"},
    "loadwise_extender_installed": _slurped("wheel-a\n"),
    "loadwise_extender_wheel_sha256": "wheel-a",
    "loadwise_extender_installed_lock": _slurped("lock-a\n"),
    "loadwise_extender_lock_sha256": "lock-a",
}


def _plan(
    tmp_path: Path, facts: dict[str, Any], objects: list[dict[str, Any]] | None = None
) -> dict[str, str]:
    state = tmp_path / "api.json"
    state.write_text(json.dumps({"objects": objects or []}))
    out = tmp_path / "plan.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Plan",
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Plan",
                            "ansible.builtin.include_role": {
                                "name": "loadwise",
                                "tasks_from": "plan",
                            },
                        },
                        {
                            "name": "Record it",
                            "ansible.builtin.copy": {
                                "content": "{{ loadwise_plan | to_json }}",
                                "dest": str(out),
                                "mode": "0600",
                            },
                            "check_mode": False,
                        },
                    ],
                }
            ]
        )
    )
    extra = tmp_path / "facts.json"
    extra.write_text(json.dumps(facts))
    run = ansible_playbook(
        playbook, "--check", "-e", f"@{extra}", env=environment(tmp_path, state), timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    plan: dict[str, str] = json.loads(out.read_text())
    return plan


def test_installs_updates_and_a_new_wheel(tmp_path: Path) -> None:
    plan = _plan(
        tmp_path,
        {
            "loadwise_metrics_server_applied": _applied("create", "create"),
            "loadwise_descheduler_applied": _applied("update", "create"),
            "loadwise_load_watcher_left_unit": {"stat": {"exists": False}},
            "loadwise_load_watcher_left_objects": {
                "resources": [{"metadata": {"name": "load-watcher", "labels": LABELS}}]
            },
            **EXTENDER_SAME,
            "loadwise_extender_wheel_sha256": "wheel-b",
            "loadwise_scheduler_config_changed": [],
        },
    )
    assert plan == {
        "scheduler config": "no change",
        "extender": "would be restarted (a new wheel)",
        "metrics-server": "would be installed",
        "load-watcher": "would be removed (disabled)",
        "descheduler": "would be updated",
    }


def test_first_install_and_removals(tmp_path: Path) -> None:
    descheduler = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "loadwise-descheduler", "namespace": "kube-system", "labels": LABELS},
    }
    plan = _plan(
        tmp_path,
        {
            # metrics-server disabled: its rollback found only a metrics API of the operator's
            "loadwise_metrics_server_found": {
                "results": [{"resources": [{"metadata": {"name": "v1beta1.metrics.k8s.io"}}]}]
            },
            "loadwise_descheduler_applied": SKIPPED,
            "loadwise_descheduler_enabled": False,
            "loadwise_load_watcher_left_unit": SKIPPED,
            "loadwise_plan_load_watcher_restart": True,
            "loadwise_extender_target": {"stdout": "cp312-x86_64"},
            "loadwise_extender_installed": {"failed": True, "msg": "file not found"},
            "loadwise_scheduler_config_changed": ["/etc/kubernetes/loadwise-scheduler-config.yaml"],
        },
        [descheduler],
    )
    assert plan == {
        "scheduler config": "would change: /etc/kubernetes/loadwise-scheduler-config.yaml;"
        " the scheduler is restarted and must prove healthy",
        "extender": "would be installed and started",
        "metrics-server": "disabled, none of loadwise's to remove",
        "load-watcher": "would be installed or updated, and (re)started",
        "descheduler": "would be removed (disabled)",
    }


@pytest.mark.parametrize("restart", [False, True])
def test_nothing_to_do_is_said_as_no_change(tmp_path: Path, restart: bool) -> None:
    plan = _plan(
        tmp_path,
        {
            "loadwise_metrics_server_applied": _applied("patch", changed=False),
            "loadwise_descheduler_applied": _applied("patch", "patch", changed=False),
            "loadwise_load_watcher_left_unit": {"stat": {"exists": False}},
            "loadwise_load_watcher_left_objects": {"resources": []},
            **EXTENDER_SAME,
            **({"loadwise_plan_extender_restart": True} if restart else {}),
            "loadwise_scheduler_config_changed": [],
        },
    )
    assert plan == {
        "scheduler config": "no change",
        "extender": "would be restarted (changed files)" if restart else "no change, not restarted",
        "metrics-server": "no change",
        "load-watcher": "disabled, nothing to remove",
        "descheduler": "no change",
    }


def test_a_k3s_cluster_keeps_its_bundled_metrics_server(tmp_path: Path) -> None:
    plan = _plan(
        tmp_path,
        {
            "loadwise_preflight_detected_flavour": "k3s",
            "loadwise_metrics_server_api": {"resources": [{"metadata": {}}], "changed": False},
            "loadwise_metrics_server_applied": SKIPPED,
        },
    )
    assert plan["metrics-server"] == "k3s's bundled one, left as it is"
    assert plan["extender"].startswith("not checked")
