"""The load-watcher binary cached on the controller is checked against the sha256 recorded
when it was built, before the role copies it to any node.

Runs the role's own tasks/build.yml through ansible-playbook on localhost, with
`loadwise_load_watcher_build: false` so that no Go build runs: the cache holds a stand-in
binary and the record files/build-load-watcher writes beside it (sha256sum's format).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.ansible.playbook import ansible_playbook

VERSION = "v0.2.4"
NAME = f"load-watcher-{VERSION}-linux-amd64"


def _play(tmp_path: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    variables = {
        "ansible_architecture": "x86_64",
        "loadwise_load_watcher_build": False,
        "loadwise_load_watcher_version": VERSION,
        "loadwise_load_watcher_binary_dir": str(cache),
    }
    include = {"name": "loadwise_load_watcher", "tasks_from": "build.yml"}
    play = {
        "name": "Check the cached load-watcher as the role does",
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [{"name": "Include", "ansible.builtin.include_role": include, "vars": variables}],
    }
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([play]))
    return ansible_playbook(playbook, timeout=300)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    directory = tmp_path / "cache"
    directory.mkdir()
    binary = directory / NAME
    binary.write_bytes(b"\x7fELF stand-in for load-watcher\n")
    digest = hashlib.sha256(binary.read_bytes()).hexdigest()
    (directory / f"{NAME}.sha256").write_text(f"{digest}  {NAME}\n")
    return directory


def test_a_binary_matching_its_record_passes(tmp_path: Path, cache: Path) -> None:
    run = _play(tmp_path, cache)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


def test_a_binary_changed_since_it_was_built_is_refused_naming_both_digests(
    tmp_path: Path, cache: Path
) -> None:
    binary = cache / NAME
    recorded = (cache / f"{NAME}.sha256").read_text().split()[0]
    binary.write_bytes(binary.read_bytes() + b"appended\n")
    actual = hashlib.sha256(binary.read_bytes()).hexdigest()
    run = _play(tmp_path, cache)
    output = run.stdout + run.stderr
    assert run.returncode != 0
    assert str(binary) in output and actual in output and recorded in output, output[-3000:]


def test_a_binary_without_a_record_is_refused(tmp_path: Path, cache: Path) -> None:
    (cache / f"{NAME}.sha256").unlink()
    run = _play(tmp_path, cache)
    output = run.stdout + run.stderr
    assert run.returncode != 0
    assert "records nothing (missing or empty)" in " ".join(output.split()), output[-3000:]
