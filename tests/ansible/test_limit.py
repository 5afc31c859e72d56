"""--limit means what it says: the run names the hosts it changes, and a rollback of some
control planes keeps the cluster-wide objects the others' extenders still need.

Three control-plane hosts, all this machine over the local connection; the cluster is
tests/ansible/fake_kubernetes_core.py with the enrolment ConfigMap of roles/loadwise/tasks/
enrolment.yml in it. A real three-control-plane cluster was not run here.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.fake_kubernetes_core import environment
from tests.ansible.playbook import ansible_playbook
from tests.ansible.test_preflight_playbook import _run

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ["cp-1", "cp-2", "cp-3"]


def _inventory(tmp_path: Path) -> Path:
    path = tmp_path / "three.ini"
    path.write_text(
        "[control_plane]\n"
        + "".join(
            f"{h} ansible_connection=local ansible_python_interpreter={sys.executable}\n"
            for h in HOSTS
        )
        + "\n[workers]\nworker-1 ansible_connection=local\n"
    )
    return path


def _record(*hosts: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "loadwise-enrolment", "namespace": "kube-system"},
        "data": {h: json.dumps({"host": h, "scheduler_config": "/etc/x.yaml"}) for h in hosts},
    }


def _scope(
    tmp_path: Path,
    objects: list[dict[str, Any]],
    *extra: str,
    action: str = "rollback_scope",
    hash_seed: str | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """A play on the control-plane group that includes roles/loadwise's task file `action`;
    hash_seed: PYTHONHASHSEED of the ansible-playbook process (default: this process's)."""
    state = tmp_path / "api.json"
    state.write_text(json.dumps({"objects": objects}))
    playbook = tmp_path / "play.yml"
    include: dict[str, Any] = {"name": "loadwise", "tasks_from": action}
    tasks: list[dict[str, Any]] = [
        {"name": "Include", "ansible.builtin.include_role": include},
        {
            "name": "Show",
            "ansible.builtin.debug": {
                "msg": "WIDE={{ loadwise_rollback_cluster_wide | default('unset') }}"
            },
            "run_once": True,
        },
    ]
    if action == "enrolment":
        tasks[0]["vars"] = {"loadwise_enrolment_action": "{{ loadwise_test_action }}"}
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Group",
                    "hosts": "localhost:all",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Group",
                            "ansible.builtin.add_host": {
                                "name": "{{ item }}",
                                "groups": ["loadwise_control_plane"],
                            },
                            "loop": "{{ groups['control_plane'] }}",
                            "run_once": True,
                        }
                    ],
                },
                {
                    "name": "Under test",
                    "hosts": "loadwise_control_plane",
                    "gather_facts": False,
                    "tasks": tasks,
                },
            ]
        )
    )
    env = {**environment(tmp_path, state), "LOADWISE_FAKE_API_STORE": "1"}
    if hash_seed is not None:
        env["PYTHONHASHSEED"] = hash_seed
    run = ansible_playbook(playbook, *extra, inventory=_inventory(tmp_path), env=env, timeout=300)
    out = " ".join((run.stdout + run.stderr).split()).replace("''", "'")
    assert run.returncode == 0, out
    return out, json.loads(state.read_text())["objects"]


@pytest.mark.parametrize(
    ("recorded", "extra", "wide", "said"),
    [
        # cp-2 and cp-3 still run loadwise: rolling back cp-1 keeps what their extenders need
        (
            HOSTS,
            ["--limit", "cp-1"],
            False,
            "The cluster-wide objects are KEPT: cp-2, cp-3 are outside this run and recorded",
        ),
        (["cp-1", "cp-3"], ["--limit", "cp-1"], False, "KEPT: cp-3 is outside this run"),
        # the others were rolled back already: cp-1 is the last one
        (["cp-1"], ["--limit", "cp-1"], True, "no other control-plane host runs loadwise"),
        (
            None,
            ["--limit", "cp-1"],
            False,
            "KEPT: cp-2, cp-3 are outside this run and may run loadwise (the cluster holds no"
            " record)",
        ),
        (
            HOSTS,
            ["--limit", "cp-1", "-e", "loadwise_rollback_cluster_objects=true"],
            True,
            "loadwise_rollback_cluster_objects is true, though cp-2, cp-3 still run loadwise",
        ),
        (HOSTS, [], True, "no other control-plane host runs loadwise"),
        (None, [], True, "Rolling back cp-1, cp-2, cp-3."),
        (HOSTS, ["-e", "loadwise_rollback_cluster_objects=false"], False, "is false"),
    ],
)
def test_rollback_under_limit_keeps_what_other_control_planes_need(
    tmp_path: Path, recorded: list[str] | None, extra: list[str], wide: bool, said: str
) -> None:
    objects = [_record(*recorded)] if recorded is not None else []
    out, _ = _scope(tmp_path, objects, *extra)
    assert f"WIDE={wide}" in out, out
    assert said in out, out


# Under seed 0 a Python set of these three names iterates cp-2 before cp-3, under seed 1 the
# other way round (CPython's string hashing), so a list that went through a set (Ansible's
# difference filter) shows up under one of them. It did: this test's first case failed in
# about half of the runs, with "cp-3, cp-2" in the message.
@pytest.mark.parametrize("seed", ["0", "1"])
def test_the_hosts_outside_the_run_are_named_in_inventory_order(tmp_path: Path, seed: str) -> None:
    out, _ = _scope(tmp_path, [_record(*HOSTS)], "--limit", "cp-1", hash_seed=seed)
    assert "KEPT: cp-2, cp-3 are outside this run" in out, out


def test_a_bad_rollback_cluster_objects_value_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "api.json"
    state.write_text(json.dumps({"objects": []}))
    with pytest.raises(AssertionError, match="must be auto, true or false"):
        _scope(tmp_path, [], "-e", "loadwise_rollback_cluster_objects=sometimes")


def test_site_records_the_hosts_and_rollback_takes_them_out(tmp_path: Path) -> None:
    _, objects = _scope(tmp_path, [], "-e", "loadwise_test_action=enrol", action="enrolment")
    (record,) = objects
    assert {json.loads(v)["host"] for v in record["data"].values()} == set(HOSTS)

    _, objects = _scope(
        tmp_path, objects, "-e", "loadwise_test_action=leave", "--limit", "cp-2", action="enrolment"
    )
    assert sorted(objects[0]["data"]) == ["cp-1", "cp-3"]

    # a later install of cp-2 alone keeps the others' entries
    _, objects = _scope(
        tmp_path, objects, "-e", "loadwise_test_action=enrol", "--limit", "cp-2", action="enrolment"
    )
    assert sorted(objects[0]["data"]) == HOSTS

    _, objects = _scope(tmp_path, objects, "-e", "loadwise_test_action=leave", action="enrolment")
    assert objects == []


def test_the_run_names_the_hosts_it_changes_under_limit(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path)
    run = _run(tmp_path, inventory, "--limit", "cp-2")
    said = " ".join(run.stdout.split())
    assert run.returncode == 0, said
    assert (
        "This run changes the control-plane hosts cp-2 only"
        " (--limit cp-2; not contacted: cp-1, cp-3)" in said
    ), said
    assert "ok: [cp-1]" not in run.stdout and "ok: [cp-3]" not in run.stdout

    everyone = _run(tmp_path, inventory)
    said = " ".join(everyone.stdout.split())
    assert "This run changes the control-plane hosts cp-1, cp-2, cp-3. Cluster objects" in said


def test_kubeadm_config_contacts_only_the_hosts_of_the_run() -> None:
    """The convergence check delegates to ansible_play_hosts_all (the run's hosts, --limit
    applied), never to the whole control-plane group; hosts outside come from the record."""
    text = (ROOT / "roles/loadwise_scheduler_config/tasks/kubeadm_config.yml").read_text()
    tasks = yaml.safe_load(text)
    delegated = [t for t in tasks if "delegate_to" in t and t["delegate_to"] == "{{ item }}"]
    assert len(delegated) == 3
    for task in delegated:
        assert task["vars"]["_loadwise_nodes"] == "{{ ansible_play_hosts_all }}", task["name"]
    assert "loadwise_enrolment[h]" in text
    assert os.path.basename("enrolment") in text
