"""Preflight refuses a controller that could not build the extender, before anything changes.

The loadwise_extender role (play 4 of site.yml) builds the extender's wheel with the pip of the
Python running Ansible, fetching the build backend and the locked dependencies from pip's
index, or installs from a wheelhouse prepared by hand (loadwise_extender_build false). Each
way's prerequisites are checked in the preflight play, so a missing one stops the run before
play 3 applies metrics-server. pip's index is a closed port on 127.0.0.1: nothing leaves this
machine.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from tests.ansible.playbook import ansible_playbook
from tests.ansible.test_preflight_playbook import INVENTORIES, _node_vars

ROOT = Path(__file__).resolve().parents[2]
FETCH = "Fetch the wheel's build backend from pip's index, as the build will"


def _closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pip_env(tmp_path: Path) -> dict[str, str]:
    """This environment without the pip settings of this machine, pip's index a closed port."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        {
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_INDEX_URL": f"http://127.0.0.1:{_closed_port()}/simple",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        }
    )
    for name in ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_CONTEXT"):
        env.pop(name, None)
    return env


def _site(tmp_path: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    """site.yml as far as preflight would let it go; --tags names the extender, so the checks
    of what its build needs apply (and, were they missing, only the extender would run)."""
    return ansible_playbook(
        ROOT / "playbooks/site.yml",
        "--tags",
        "loadwise_preflight,loadwise_extender",
        "-e",
        f"@{_node_vars(tmp_path)}",
        *extra,
        inventory=INVENTORIES / "plain.ini",
        env=env,
        timeout=300,
    )


def _result(out: str, task: str) -> str:
    """What the run printed for the task named `task` (its lines up to the next task)."""
    after = out.split(f"Preflight | {task}]", 1)[1]
    return after.split("\n", 1)[1].split("\nTASK [", 1)[0]


def _stopped_in_preflight(run: subprocess.CompletedProcess[str]) -> str:
    said = " ".join(run.stdout.split())
    assert run.returncode != 0, run.stdout
    failed = run.stdout.split("fatal: [", 1)[0].rsplit("TASK [", 1)[1]
    assert failed.startswith("loadwise_preflight : Preflight | Refuse"), run.stdout
    assert "Nothing was changed" in said
    assert "PLAY [Cluster add-ons" not in run.stdout
    assert "PLAY [Extender" not in run.stdout
    return said


def test_a_controller_python_without_pip_is_refused_in_preflight(tmp_path: Path) -> None:
    """A pip that cannot be imported, as in a Python built or packaged without it (Debian's
    python3 without python3-pip): `python -m pip` fails with "No module named pip"."""
    shadow = tmp_path / "no-pip" / "pip"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'pip'\")\n")
    env = {**_pip_env(tmp_path), "PYTHONPATH": str(shadow.parent)}
    said = _stopped_in_preflight(_site(tmp_path, env))
    assert "has no pip" in said, said
    assert "No module named 'pip'" in said
    assert "-m ensurepip" in said
    assert "loadwise_extender_build false" in said and "Air-gapped controller" in said


def test_a_controller_whose_pip_cannot_reach_its_index_is_refused_in_preflight(
    tmp_path: Path,
) -> None:
    env = _pip_env(tmp_path)
    said = _stopped_in_preflight(_site(tmp_path, env))
    assert "could not fetch hatchling==" in said, said
    # pip's own last word, and the three ways out
    assert env["PIP_INDEX_URL"].split("//", 1)[1].split("/", 1)[0] in said or "ERROR" in said
    assert "PIP_INDEX_URL" in said
    assert "loadwise_extender_build false" in said


def test_the_controller_checks_skip_a_run_without_the_extender(tmp_path: Path) -> None:
    """--tags loadwise_preflight alone (or --skip-tags loadwise_extender) builds nothing: the
    same unreachable index is then no reason to refuse."""
    env = _pip_env(tmp_path)
    run = ansible_playbook(
        ROOT / "playbooks/site.yml",
        "--tags",
        "loadwise_preflight",
        "-e",
        f"@{_node_vars(tmp_path)}",
        inventory=INVENTORIES / "plain.ini",
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    fetch = _result(
        run.stdout, "Fetch the wheel's build backend from pip's index, as the build will"
    )
    assert fetch.strip().startswith("skipping: [cp-1]"), fetch
    assert "could not fetch" not in run.stdout


def test_a_prepared_wheelhouse_without_the_locked_wheels_is_refused_in_preflight(
    tmp_path: Path,
) -> None:
    """loadwise_extender_build false: the wheelhouse must hold one loadwise wheel and, for
    every lock entry the node's Python installs, a file with a sha256 the lock records."""
    wheelhouse = tmp_path / "wheelhouse"
    target = subprocess.run(
        [os.environ.get("PYTHON", str(Path(__import__("sys").executable))),
         str(ROOT / "roles/loadwise_extender/files/wheel_target.py")],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (wheelhouse / target).mkdir(parents=True)
    (wheelhouse / target / "loadwise-0.2.0-py3-none-any.whl").write_bytes(b"not the lock's")
    (wheelhouse / target / "msgspec-0.22.0-cp311-cp311-manylinux_2_17_x86_64.whl").write_bytes(
        b"a wheel whose sha256 the lock does not record"
    )
    run = _site(
        tmp_path,
        _pip_env(tmp_path),
        "-e",
        "loadwise_extender_build=false",
        "-e",
        f"loadwise_extender_wheelhouse={wheelhouse}",
    )
    said = _stopped_in_preflight(run)
    assert f"{wheelhouse}/{target} has no wheel with a locked sha256 for" in said, said
    assert "msgspec==0.22.0" in said and "aiohttp==3.14.5" in said
    assert "holds 0 loadwise-*.whl" not in said
    # the pip checks are for a build on the controller only
    fetch = _result(
        run.stdout, "Fetch the wheel's build backend from pip's index, as the build will"
    )
    assert fetch.strip().startswith("skipping: [cp-1]"), fetch
