"""A scheduler edit that never finished is impossible to miss on the next run.

roles/loadwise_scheduler_config/tasks/marker.yml writes a marker on the node (and the same as
an annotation on its Node object) before the first change to the scheduler's configuration
and takes both away once the scheduler is proven healthy; tasks/interrupted.yml finds a marker
left behind and says so, then finishes the edit (site.yml by default), refuses (site.yml with
loadwise_scheduler_config_resume false) or goes on (rollback.yml, a run that leaves the scheduler
alone). The task files run here by ansible-playbook over the local connection, the cluster is
tests/ansible/fake_kubernetes_core.py; site.yml's preflight and rollback.yml run as in
test_preflight_playbook.py (k3s stand-in, no host). Not run here: a real scheduler stopped
half way (the lab's business); where apply.yml and rollback.yml place the marker around the
change is read from their task lists below.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.fake_kubernetes_core import environment
from tests.ansible.playbook import ansible_playbook
from tests.ansible.test_ansible_core_versions import PYTHONS
from tests.ansible.test_preflight_playbook import INVENTORIES, _run

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "roles" / "loadwise_scheduler_config" / "tasks"
ANNOTATION = "loadwise.dev/scheduler-edit-interrupted"
LOUD = "A LOADWISE RUN STOPPED HALF WAY THROUGH A SCHEDULER CHANGE HERE."
FILES = ["/etc/rancher/k3s/loadwise-scheduler-config.yaml", "/etc/rancher/k3s/config.yaml.d/x"]


def _node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"kept.example/other": "yes"}},
    }


def _play(
    tmp_path: Path,
    tasks_from: str,
    objects: list[dict[str, Any]] | None = None,
    python: Path = PYTHONS["pinned"],
    **variables: Any,
) -> tuple[int, str, list[dict[str, Any]]]:
    """localhost includes the role's task file; rc, the output on one line, and the cluster
    afterwards. objects None: loadwise_cluster_objects false. python: whose ansible-core."""
    state = tmp_path / "api.json"
    if not state.exists():
        state.write_text(json.dumps({"objects": objects or []}))
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Include a task file of the role",
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Include",
                            "ansible.builtin.include_role": {
                                "name": "loadwise_scheduler_config",
                                "tasks_from": tasks_from,
                            },
                        }
                    ],
                }
            ]
        )
    )
    extra = tmp_path / "vars.yml"
    extra.write_text(
        yaml.safe_dump(
            {
                "ansible_python_interpreter": str(python),
                "loadwise_backup_dir": str(tmp_path / "backup"),
                "loadwise_cluster_objects": objects is not None,
                "loadwise_preflight_detected_flavour": "k3s",
                **variables,
            }
        )
    )
    env = {**environment(tmp_path, state), "LOADWISE_FAKE_API_STORE": "1"}
    run = ansible_playbook(playbook, "-e", f"@{extra}", env=env, timeout=300, python=python)
    said = " ".join((run.stdout + run.stderr).split())
    return run.returncode, said, json.loads(state.read_text())["objects"]


def _set(
    tmp_path: Path, objects: list[dict[str, Any]] | None, python: Path = PYTHONS["pinned"]
) -> tuple[int, str, list[Any]]:
    return _play(
        tmp_path,
        "marker",
        objects,
        python,
        loadwise_scheduler_config_marker_action="set",
        loadwise_scheduler_config_marker_about={"action": "install", "files": FILES},
    )


def _annotations(objects: list[dict[str, Any]]) -> dict[str, str]:
    (node,) = [o for o in objects if o["kind"] == "Node"]
    annotations: dict[str, str] = node["metadata"].get("annotations", {})
    return annotations


# ansible-core before 2.19 renders a template yielding None as '': the null that takes the
# annotation off must survive there too
@pytest.mark.parametrize("which", PYTHONS)
def test_the_marker_is_set_on_the_node_and_its_node_object_then_cleared(
    tmp_path: Path, which: str
) -> None:
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    rc, said, objects = _set(tmp_path, [_node("localhost")], PYTHONS[which])
    assert rc == 0, said
    marker = tmp_path / "backup" / "IN-PROGRESS"
    content = json.loads(marker.read_text())
    assert oct(marker.stat().st_mode & 0o777) == "0o600"
    assert content["host"] == "localhost"
    assert content["action"] == "install"
    assert content["files"] == FILES
    assert content["marker"] == str(marker)
    started = datetime.datetime.strptime(content["started_at"], "%Y-%m-%dT%H:%M:%SZ")
    started = started.replace(tzinfo=datetime.UTC)
    assert before <= started <= datetime.datetime.now(datetime.UTC)
    # the same on the Node, whose other annotations stay
    annotations = _annotations(objects)
    assert json.loads(annotations[ANNOTATION]) == content
    assert annotations["kept.example/other"] == "yes"

    rc, said, objects = _play(
        tmp_path, "marker", [], PYTHONS[which], loadwise_scheduler_config_marker_action="clear"
    )
    assert rc == 0, said
    assert not marker.exists()
    assert _annotations(objects) == {"kept.example/other": "yes"}


def test_without_a_node_object_of_its_name_the_marker_is_on_the_node_only(tmp_path: Path) -> None:
    rc, said, objects = _set(tmp_path, [_node("someone-else")])
    assert rc == 0, said
    assert (tmp_path / "backup" / "IN-PROGRESS").exists()
    assert _annotations(objects) == {"kept.example/other": "yes"}


def test_without_cluster_objects_the_marker_is_on_the_node_only(tmp_path: Path) -> None:
    rc, said, _ = _set(tmp_path, None)
    assert rc == 0, said
    assert json.loads((tmp_path / "backup" / "IN-PROGRESS").read_text())["files"] == FILES
    assert "k8s_info" not in said and "-> localhost" not in said, said


def test_no_marker_no_word(tmp_path: Path) -> None:
    rc, said, _ = _play(tmp_path, "interrupted")
    assert rc == 0, said
    assert "STOPPED HALF WAY" not in said, said


@pytest.mark.parametrize("which", PYTHONS)
def test_a_marker_left_behind_is_refused_naming_both_ways_out(tmp_path: Path, which: str) -> None:
    assert _set(tmp_path, None, PYTHONS[which])[0] == 0
    started = json.loads((tmp_path / "backup" / "IN-PROGRESS").read_text())["started_at"]
    rc, said, _ = _play(
        tmp_path, "interrupted", python=PYTHONS[which], loadwise_scheduler_config_resume=False
    )
    assert rc == 2, said
    assert LOUD in said, said
    assert f"A run that started at {started} (UTC) to install" in said
    assert ", ".join(FILES) in said, said
    assert "ansible-playbook playbooks/rollback.yml --limit localhost" in said
    assert "-e loadwise_scheduler_config_resume=true" in said, said
    assert "systemctl status k3s" in said
    assert "Nothing was changed by this run" in said, said


def test_by_default_a_run_resumes_and_says_so(tmp_path: Path) -> None:
    assert _set(tmp_path, None)[0] == 0
    rc, said, _ = _play(tmp_path, "interrupted")
    assert rc == 0, said
    assert LOUD in said, said
    assert "loadwise_scheduler_config_resume is true: this run finishes the change" in said


def test_a_marker_that_is_not_json_still_stops_the_run_and_is_shown(tmp_path: Path) -> None:
    (tmp_path / "backup").mkdir()
    (tmp_path / "backup" / "IN-PROGRESS").write_text("half a wri")
    rc, said, _ = _play(tmp_path, "interrupted", loadwise_scheduler_config_resume=False)
    assert rc == 2, said
    assert LOUD in said, said
    assert "(unreadable: half a wri)" in said


# -- the playbooks ----------------------------------------------------------------------------


def _left_behind(tmp_path: Path) -> list[str]:
    backup = tmp_path / "backup"
    backup.mkdir()
    (backup / "IN-PROGRESS").write_text(
        json.dumps(
            {
                "host": "cp-1",
                "action": "install",
                "files": FILES,
                "started_at": "2026-01-02T03:04:05Z",
                "marker": str(backup / "IN-PROGRESS"),
            }
        )
    )
    return ["-e", f"loadwise_backup_dir={backup}"]


def test_site_stops_in_preflight_before_any_change_when_told_not_to_resume(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        INVENTORIES / "plain.ini",
        "-e",
        "loadwise_scheduler_config_resume=false",
        *_left_behind(tmp_path),
    )
    said = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 2, said
    assert "cp-1: " + LOUD in said, said
    assert "A run that started at 2026-01-02T03:04:05Z (UTC) to install" in said
    # preflight's own report, its last task, never came
    assert "Preflight | Report what was found" not in said, said


def test_a_run_that_leaves_the_scheduler_alone_goes_on_and_says_so(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        INVENTORIES / "plain.ini",
        "--skip-tags",
        "loadwise_scheduler_config",
        *_left_behind(tmp_path),
    )
    said = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 0, said
    assert LOUD in said, said
    assert "This run leaves the scheduler alone, so it goes on; the marker stays" in said


def test_rollback_goes_on_and_says_it_is_the_way_back(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        INVENTORIES / "plain.ini",
        "--check",
        *_left_behind(tmp_path),
        playbook="rollback.yml",
    )
    said = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 0, said
    assert LOUD in said, said
    assert "This rollback puts the node back as it was before loadwise" in said
    # --check changes nothing, the marker included
    assert (tmp_path / "backup" / "IN-PROGRESS").exists()


# -- where the marker goes around the change -------------------------------------------------


def _names(tasks: list[dict[str, Any]]) -> list[str]:
    return [str(t["name"]).split(" | ", 1)[1] for t in tasks]


def _marker_action(task: dict[str, Any]) -> str | None:
    if task.get("ansible.builtin.include_tasks") != "marker.yml":
        return None
    return str(task["vars"]["loadwise_scheduler_config_marker_action"])


def test_apply_marks_before_the_first_write_and_clears_only_after_a_proof() -> None:
    tasks = yaml.safe_load((TASKS / "apply.yml").read_text())
    change = next(t for t in tasks if "block" in t)
    before = tasks[: tasks.index(change)]
    assert [_marker_action(t) for t in before if _marker_action(t)] == ["set"]
    assert _marker_action(before[-1]) == "set"
    block, rescue = change["block"], change["rescue"]
    assert "Write the new files" in _names(block)[0]
    assert "Wait until the new scheduler answers" in " ".join(_names(block))
    assert _marker_action(block[-1]) == "clear"
    assert [_marker_action(t) for t in block[:-1] if _marker_action(t)] == []
    (cleared,) = [t for t in rescue if _marker_action(t) == "clear"]
    assert cleared["when"] == "loadwise_scheduler_config_wait.healthy | default(false)"
    assert rescue.index(cleared) > _names(rescue).index(
        next(n for n in _names(rescue) if n.startswith("Wait for the restored scheduler"))
    )


def test_rollback_marks_before_restoring_and_clears_after_the_health_wait() -> None:
    tasks = yaml.safe_load((TASKS / "rollback.yml").read_text())
    names = _names(tasks)
    marks = [(i, _marker_action(t)) for i, t in enumerate(tasks) if _marker_action(t)]
    assert [m for _, m in marks] == ["set", "clear"]
    first_change = names.index(
        "Put the kubeadm manifest back (pristine bytes, or loadwise taken out of the current one)"
    )
    wait = names.index("Wait until the original scheduler answers its health check steadily")
    assert marks[0][0] < first_change < wait < marks[1][0]


def test_preflight_checks_for_the_marker_before_its_report() -> None:
    main = ROOT / "roles" / "loadwise_preflight" / "tasks" / "main.yml"
    tasks = yaml.safe_load(main.read_text())
    includes = [
        i
        for i, t in enumerate(tasks)
        if (t.get("ansible.builtin.include_role") or {}).get("tasks_from") == "interrupted"
    ]
    assert len(includes) == 1
    assert includes[0] < len(tasks) - 1
