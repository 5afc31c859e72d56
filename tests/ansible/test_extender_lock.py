"""The extender's hash-pinned dependency lock, and how the loadwise_extender role uses it.

The lock (roles/loadwise_extender/files/requirements.lock, `make lock`) is what the
controller downloads and the only set of files the node installs (pip --require-hashes
--no-deps). These tests keep it equal to pyproject.toml's pins, check the per-target
entries the controller downloads (files/locked_requirements.py), and run the role's
install task file against a wheelhouse holding a tampered wheel.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.ansible.fakes import path_with
from tests.ansible.playbook import ansible_playbook

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles/loadwise_extender"
LOCK = ROLE / "files/requirements.lock"
# The node Pythons the role supports (README.md, "Install on your cluster"), on the two
# 64-bit architectures.
TARGETS = [f"cp3{minor}-{arch}" for minor in (10, 11, 12, 13) for arch in ("x86_64", "aarch64")]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "locked_requirements", ROLE / "files/locked_requirements.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _direct() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [Requirement(d) for d in project["project"]["dependencies"]]


@pytest.mark.parametrize("target", TARGETS)
def test_the_lock_pins_pyprojects_versions_for_every_node_target(target: str) -> None:
    script = _script()
    env = script.environment(target)
    chosen = {
        canonicalize_name(r.name): r
        for r, _hashes in script.entries(LOCK.read_text())
        if r.marker is None or r.marker.evaluate(env)
    }
    picked = [
        canonicalize_name(r.name)
        for r, _h in script.entries(LOCK.read_text())
        if r.marker is None or r.marker.evaluate(env)
    ]
    assert len(picked) == len(set(picked)), f"{target}: a package pinned twice"
    for direct in _direct():
        name = canonicalize_name(direct.name)
        if direct.marker is not None and not direct.marker.evaluate(env):
            continue
        assert name in chosen, f"{target}: {direct} is not in the lock; run make lock"
        assert str(chosen[name].specifier) == str(direct.specifier), (
            f"{target}: pyproject.toml pins {direct}, the lock {chosen[name]}; run make lock"
        )


def test_the_targets_entries_follow_the_markers_and_keep_the_hashes() -> None:
    script = _script()
    text = LOCK.read_text()
    old = script.for_target(text, "cp310-aarch64")
    new = script.for_target(text, "cp312-x86_64")
    # async-timeout backs asyncio.timeout before 3.11 (pyproject.toml)
    assert re.search(r"(?m)^async-timeout==5\.0\.1 --hash=sha256:[0-9a-f]{64}", old)
    assert "async-timeout" not in new
    for entries in (old, new):
        assert ";" not in entries  # markers decided here, not by the controller's pip
        lines = entries.splitlines()
        assert all(re.match(r"^[a-z0-9._-]+==\S+( --hash=sha256:[0-9a-f]{64})+$", x) for x in lines)


@pytest.mark.parametrize(
    ("text", "target", "message"),
    [
        ("aiohttp==3.14.5\n", "cp311-x86_64", "is not pinned with == and hashed"),
        ("aiohttp>=3 --hash=sha256:" + "0" * 64 + "\n", "cp311-x86_64", "is not pinned"),
        ("# only a comment\n", "cp311-x86_64", "holds no requirement"),
        ("six==1 --hash=sha256:" + "0" * 64 + "\n", "py3-x86_64", "is not a node target"),
    ],
)
def test_the_script_refuses_what_pip_would_refuse_later(
    text: str, target: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        _script().for_target(text, target)


def test_make_lock_writes_this_lock_with_the_pinned_tool() -> None:
    """`make lock` runs the command the lock's header records, with uv as pinned."""
    header = LOCK.read_text().splitlines()[1].lstrip("# ").split()
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"(?m)^lock:.*\n((?:\t.*\n)+)", makefile)
    assert recipe is not None, "Makefile has no lock target"
    command = recipe[1].split()
    uv = next(i for i, word in enumerate(command) if word.endswith("/uv"))
    assert [w for w in command[uv + 1 :] if w != "--quiet"] == header[1:]
    assert re.search(r"(?m)^uv==\d+\.\d+\.\d+$", (ROOT / "requirements-dev.txt").read_text())


def test_the_role_installs_only_what_the_lock_hashes() -> None:
    def argv(path: Path, name: str) -> list[str]:
        tasks = yaml.safe_load(path.read_text())
        task = next(t for t in tasks if t["name"].startswith(name))
        args: Any = task["ansible.builtin.command"]["argv"]
        return [a for a in args if isinstance(a, str)] if isinstance(args, list) else []

    deps = argv(ROLE / "tasks/dependencies.yml", "Extender | Install the locked dependencies")
    assert {"--require-hashes", "--no-deps", "--no-index"} <= set(deps)
    wheel = argv(ROLE / "tasks/node.yml", "Extender | Install the wheel")
    assert "--no-deps" in wheel  # nothing unhashed is resolved beside the wheel
    node = yaml.safe_load((ROLE / "tasks/node.yml").read_text())
    order = [t.get("ansible.builtin.include_tasks") or t["name"] for t in node]
    assert order.index("dependencies.yml") < order.index(
        next(n for n in order if n.startswith("Extender | Install the wheel"))
    )
    build = (ROLE / "tasks/build.yml").read_text()
    download = build[build.index("Download the locked dependencies") :]
    download = download[: download.index("- name:")]
    assert "--require-hashes" in download and "--no-deps" in download
    assert "requirements.lock" in download
    specs = yaml.safe_load((ROLE / "meta/argument_specs.yml").read_text())
    assert "loadwise_extender_lock" in specs["argument_specs"]["main"]["options"]
    assert "loadwise_extender_lock" in yaml.safe_load((ROLE / "defaults/main.yml").read_text())


def _wheel(directory: Path, name: str, version: str, payload: str) -> Path:
    """A minimal pure-Python wheel: a module `<name>` whose VALUE is `payload`."""
    dist = f"{name}-{version}"
    path = directory / f"{dist}-py3-none-any.whl"
    files = {
        f"{name}.py": f"VALUE = {payload!r}\n",
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{n},,\n" for n in files) + f"{dist}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for n, content in files.items():
            archive.writestr(zipfile.ZipInfo(n, (2020, 1, 1, 0, 0, 0)), content)
        archive.writestr(zipfile.ZipInfo(f"{dist}.dist-info/RECORD", (2020, 1, 1, 0, 0, 0)), record)
    return path


def _play(
    tmp_path: Path, variables: dict[str, Any], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    playbook = tmp_path / "play.yml"
    include = {"name": "loadwise_extender", "tasks_from": "dependencies.yml"}
    play = {
        "name": "Install the locked dependencies as the role does",
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [{"name": "Include", "ansible.builtin.include_role": include, "vars": variables}],
    }
    playbook.write_text(yaml.safe_dump([play]))
    env = {**env, "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp")}
    return ansible_playbook(playbook, env=env, timeout=300)


def test_the_node_refuses_a_wheel_whose_hash_the_lock_does_not_record(tmp_path: Path) -> None:
    """The role's own task file, run by ansible-playbook on a local "node": the locked wheel
    is installed; once it is swapped for other bytes under the same name, nothing is."""
    prefix = tmp_path / "prefix"
    wheelhouse = prefix / "wheelhouse"
    wheelhouse.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "venv", str(prefix / "venv")], check=True)
    good = _wheel(wheelhouse, "lockprobe", "1.0", "locked")
    digest = hashlib.sha256(good.read_bytes()).hexdigest()
    # a wheel the lock does not name: present in the wheelhouse, never installed
    _wheel(wheelhouse, "stowaway", "1.0", "unlocked")
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"lockprobe==1.0 \\\n    --hash=sha256:{digest}\n")
    calls = tmp_path / "systemctl.calls"
    # systemctl as on a node, recording the calls: new dependencies restart the extender.
    show = (
        "Id=loadwise-extender.service\\nLoadState=loaded\\nActiveState=active\\nSubState=running\\n"
    )
    fake = f'echo "$*" >> {calls}\ncase "$*" in *show*) printf "{show}";; esac'
    env = path_with(tmp_path / "bin", {"systemctl": fake})
    variables = {"loadwise_extender_prefix": str(prefix), "loadwise_extender_lock": str(lock)}
    python = str(prefix / "venv/bin/python")

    run = _play(tmp_path, variables, env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    shown = subprocess.run(
        [python, "-c", "import lockprobe; print(lockprobe.VALUE)"], capture_output=True, text=True
    )
    assert shown.stdout.strip() == "locked"
    assert "restart loadwise-extender" in calls.read_text()
    assert subprocess.run([python, "-c", "import stowaway"], capture_output=True).returncode != 0
    assert (prefix / "venv/loadwise-lock.sha256").read_text().strip() == hashlib.sha256(
        lock.read_text().rstrip("\n").encode()
    ).hexdigest()

    # Tampered: other bytes under the locked name, and the lock changed so it runs again.
    subprocess.run([python, "-m", "pip", "uninstall", "--quiet", "--yes", "lockprobe"], check=True)
    good.unlink()
    _wheel(wheelhouse, "lockprobe", "1.0", "tampered")
    lock.write_text(lock.read_text() + "# changed\n")
    run = _play(tmp_path, variables, env)
    assert run.returncode != 0
    assert "DO NOT MATCH THE HASHES" in run.stdout + run.stderr
    assert subprocess.run([python, "-c", "import lockprobe"], capture_output=True).returncode != 0
