"""docs/collection-README.md, the README of the built collection: its commands are the ones an
operator runs from their own directory with the collection installed.

Every shell command of its ```sh blocks is checked: no `make`, no path into a checkout
(`playbooks/...`), the tarball it installs is the one `ansible-galaxy collection build` makes
of this release, and every playbook it names as loadwise.loadwise.X is playbooks/X.yml of the
collection. Each ansible-playbook command is then run with --syntax-check from a directory of
the test's own (no ansible.cfg, the README's inventory as inventory.ini), with this repository
as the installed collection: Ansible resolves the playbook and its roles from the collection.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.ansible.playbook import REPO_COLLECTIONS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "docs" / "collection-README.md"
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
TOOLS = {"ansible-galaxy", "ansible-playbook", "pip"}


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S)


def _commands() -> list[list[str]]:
    """Every command of the README's sh blocks, as argv (comments and line joins applied)."""
    commands = []
    for block in _blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv:
                commands.append(argv)
    return commands


def _playbook(argv: list[str]) -> str:
    named = [a for a in argv if a.startswith("loadwise.loadwise.")]
    assert len(named) == 1, argv
    return named[0].removeprefix("loadwise.loadwise.")


def test_the_readme_has_the_operators_commands() -> None:
    commands = _commands()
    assert {c[0] for c in commands} <= TOOLS, commands
    playbooks = {_playbook(c) for c in commands if c[0] == "ansible-playbook"}
    assert {"site", "rollback"} <= playbooks
    assert any(c[0] == "ansible-playbook" and "--check" in c for c in commands)


def test_no_command_needs_a_checkout() -> None:
    for argv in _commands():
        assert "make" not in argv, argv
        assert not any("playbooks/" in a or a.endswith(".yml") for a in argv), argv
    assert "make " not in README.read_text()


def test_the_tarball_is_the_one_of_this_release() -> None:
    tarball = f"{GALAXY['namespace']}-{GALAXY['name']}-{GALAXY['version']}.tar.gz"
    installs = [c for c in _commands() if c[:3] == ["ansible-galaxy", "collection", "install"]]
    assert installs and all(c[3:] == [tarball] for c in installs), installs


def test_every_playbook_named_is_in_the_collection() -> None:
    ignored = GALAXY["build_ignore"]
    for argv in _commands():
        if argv[0] != "ansible-playbook":
            continue
        path = f"playbooks/{_playbook(argv)}.yml"
        assert (ROOT / path).is_file(), argv
        assert not any(Path(path).match(p) or path.startswith(p + "/") for p in ignored), path


def _operator_dir(tmp_path: Path) -> Path:
    """A directory of the operator's own: the README's inventory, no ansible.cfg."""
    (inventory,) = _blocks("ini")
    (tmp_path / "inventory.ini").write_text(inventory)
    return tmp_path


@pytest.mark.parametrize(
    "argv",
    [c for c in _commands() if c[0] == "ansible-playbook"],
    ids=lambda argv: " ".join(argv[2:]),
)
def test_each_playbook_command_resolves_from_the_installed_collection(
    tmp_path: Path, argv: list[str]
) -> None:
    where = _operator_dir(tmp_path)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_") or k == "ANSIBLE_HOME"
    }
    env.update(
        {
            "ANSIBLE_COLLECTIONS_PATH": f"{REPO_COLLECTIONS}{os.pathsep}{env.get('HOME', '')}"
            "/.ansible/collections",
            "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
            "ANSIBLE_NOCOLOR": "1",
        }
    )
    cli = Path(sys.executable).with_name("ansible-playbook")
    run = subprocess.run(
        [str(cli), *argv[1:], "--syntax-check"],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    # found in the collection, not in the directory the command runs in
    found = f"/ansible_collections/loadwise/loadwise/playbooks/{_playbook(argv)}.yml"
    assert re.search(rf"(?m)^playbook: \S+{re.escape(found)}$", out), out
