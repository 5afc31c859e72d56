"""Running the real ansible-playbook from the tests in this directory.

Every run uses the project's ansible.cfg and roles, no colour, captured text output, and the
repository root as its working directory, as an operator's run from a checkout does.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
# The repository as the collection loadwise.loadwise (a link back to ROOT, ansible.cfg says
# why), where the roles' filters are found by their full names. ansible-playbook finds it by
# itself next to playbooks/*.yml; the tests' own playbooks elsewhere need it on the path.
REPO_COLLECTIONS = ROOT / "playbooks" / "collections"
_CFG = configparser.ConfigParser()
_CFG.read(ROOT / "ansible.cfg")
CONFIGURED_COLLECTIONS = _CFG["defaults"]["collections_path"]


def ansible_playbook(
    playbook: Path,
    *args: str,
    inventory: Path | None = None,
    env: Mapping[str, str] | None = None,
    roles_path: str | None = None,
    timeout: float = 120,
    python: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``ansible-playbook [args] playbook``.

    inventory: a file; None runs on localhost over the local connection with this Python.
    env: the environment to start from (default: this process's); the Ansible settings above
    are set on top of it. roles_path: ANSIBLE_ROLES_PATH (default: the project's roles/).
    The repository's collection path comes first, then env's ANSIBLE_COLLECTIONS_PATH
    (stand-in collections) or else ansible.cfg's paths. python: the interpreter of another
    ansible-core's venv, whose ansible-playbook runs instead of this venv's.
    """
    python = python or Path(sys.executable)
    playbook_cli = python.with_name(ANSIBLE_PLAYBOOK.name)
    base = dict(os.environ if env is None else env)
    rest = base.get("ANSIBLE_COLLECTIONS_PATH") or CONFIGURED_COLLECTIONS
    base["ANSIBLE_COLLECTIONS_PATH"] = str(REPO_COLLECTIONS) + os.pathsep + rest
    if inventory is None:
        where = [
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={python}",
        ]
    else:
        where = ["-i", str(inventory)]
    return subprocess.run(
        [str(playbook_cli), *where, *args, str(playbook)],
        cwd=ROOT,
        env={
            **base,
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "ANSIBLE_ROLES_PATH": roles_path or str(ROOT / "roles"),
            "ANSIBLE_NOCOLOR": "1",
        },
        capture_output=True,
        text=True,
        timeout=timeout,
    )
