"""Running the real ansible-playbook from the tests in this directory.

Every run uses the project's ansible.cfg and roles, no colour, captured text output, and the
repository root as its working directory, as an operator's run from a checkout does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")


def ansible_playbook(
    playbook: Path,
    *args: str,
    inventory: Path | None = None,
    env: Mapping[str, str] | None = None,
    roles_path: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``ansible-playbook [args] playbook``.

    inventory: a file; None runs on localhost over the local connection with this Python.
    env: the environment to start from (default: this process's); the Ansible settings above
    are set on top of it. roles_path: ANSIBLE_ROLES_PATH (default: the project's roles/).
    """
    if inventory is None:
        where = [
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
        ]
    else:
        where = ["-i", str(inventory)]
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), *where, *args, str(playbook)],
        cwd=ROOT,
        env={
            **(os.environ if env is None else env),
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "ANSIBLE_ROLES_PATH": roles_path or str(ROOT / "roles"),
            "ANSIBLE_NOCOLOR": "1",
        },
        capture_output=True,
        text=True,
        timeout=timeout,
    )
