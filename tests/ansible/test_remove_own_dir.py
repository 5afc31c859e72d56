"""roles/loadwise/tasks/remove_own_dir.yml, run by ansible-playbook on this machine.

Included as loadwise_extender's rollback includes it (include_role from another role, the
directory computed from that role's defaults) and as loadwise's cleanup includes it
(include_tasks), over the local connection, on directories under pytest's tmp_path.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.ansible.playbook import ansible_playbook

ROOT = Path(__file__).resolve().parents[2]

CALLER_TASKS = """\
- name: Remove each candidate the way loadwise_extender's rollback does
  ansible.builtin.include_role:
    name: loadwise
    tasks_from: remove_own_dir
  vars:
    loadwise_remove_dir: "{{ item | dirname }}"
  loop: "{{ caller_prefixes }}"
"""

PLAYBOOK = """\
- name: Remove directories of loadwise's own name
  hosts: localhost
  gather_facts: false
  roles:
    - role: caller
"""


def test_only_empty_directories_named_loadwise_go(tmp_path: Path) -> None:
    if not Path(sys.executable).with_name("ansible-playbook").exists():
        pytest.skip("ansible-playbook is not installed next to this Python (scripts/setup)")
    empty = tmp_path / "opt-a/loadwise"
    full = tmp_path / "opt-b/loadwise"
    system = tmp_path / "opt-c/opt"
    for d in (empty, full, system):
        d.mkdir(parents=True)
    (full / "kept").write_text("someone else's file\n")
    prefixes = [
        empty / "extender",
        full / "extender",
        system / "extender",
        tmp_path / "gone/loadwise/extender",
    ]

    role = tmp_path / "roles/caller"
    (role / "tasks").mkdir(parents=True)
    (role / "defaults").mkdir()
    (role / "tasks/main.yml").write_text(CALLER_TASKS)
    (role / "defaults/main.yml").write_text(
        "caller_prefixes:\n" + "".join(f"  - {p}\n" for p in prefixes)
    )
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    run = ansible_playbook(
        tmp_path / "play.yml",
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)},
        roles_path=f"{ROOT / 'roles'}:{tmp_path / 'roles'}",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert not empty.exists()
    assert (full / "kept").read_text() == "someone else's file\n"
    assert system.is_dir()
    assert "changed=0" in run.stdout
