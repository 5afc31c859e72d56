"""plugins/filter/loadwise_kubeconfig.py: which kubeconfig and context a run uses, each branch.

The files are real files under the test's directory (the filter looks at the controller's
file system), and ~ is the test's HOME. The last test renders the filter by its full name
through ansible-core's Templar, as playbooks/control_plane.yml uses it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.ansible.plugins import filter_module

ROOT = Path(__file__).resolve().parents[2]

choice = filter_module("loadwise_kubeconfig").loadwise_kubeconfig_choice


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HOME: ~/.kube/config exists only when a test writes it."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


def _file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("apiVersion: v1\nkind: Config\n")
    return path


def _kubeconfig(host_vars: dict[str, Any], env: dict[str, str] | None = None) -> tuple[str, str]:
    got = choice(host_vars, env)
    return got["kubeconfig"], got["kubeconfig_from"]


def test_loadwise_kubeconfig_comes_first(tmp_path: Path, home: Path) -> None:
    ours, theirs = _file(tmp_path / "ours"), _file(tmp_path / "theirs")
    env = {"K8S_AUTH_KUBECONFIG": str(theirs), "KUBECONFIG": str(theirs)}
    got = _kubeconfig({"loadwise_kubeconfig": str(ours), "kubeconfig": str(theirs)}, env)
    assert got == (str(ours), "loadwise_kubeconfig")


@pytest.mark.parametrize("unset", [None, "", False])
def test_k3s_ansibles_kubeconfig_when_loadwise_kubeconfig_is_unset(
    tmp_path: Path, home: Path, unset: Any
) -> None:
    k3s = _file(tmp_path / "k3s.yaml")
    got = _kubeconfig({"loadwise_kubeconfig": unset, "kubeconfig": str(k3s)})
    assert got == (str(k3s), "kubeconfig (the k3s-ansible inventory variable)")


def test_k8s_auth_kubeconfig_before_kubeconfig(tmp_path: Path, home: Path) -> None:
    a, b = _file(tmp_path / "a"), _file(tmp_path / "b")
    got = _kubeconfig({}, {"K8S_AUTH_KUBECONFIG": str(a), "KUBECONFIG": str(b)})
    assert got == (str(a), "$K8S_AUTH_KUBECONFIG")


def test_kubeconfig_env(tmp_path: Path, home: Path) -> None:
    b = _file(tmp_path / "b")
    got = _kubeconfig({}, {"K8S_AUTH_KUBECONFIG": "", "KUBECONFIG": str(b)})
    assert got == (str(b), "$KUBECONFIG")


def test_the_default_file_when_nothing_is_set(home: Path) -> None:
    default = _file(home / ".kube" / "config")
    assert _kubeconfig({}) == (str(default), "the default, no variable set")


def test_no_kubeconfig_at_all_when_the_default_file_is_missing(home: Path) -> None:
    # kubernetes.core then uses in-cluster credentials or K8S_AUTH_HOST/K8S_AUTH_API_KEY
    assert _kubeconfig({}, {}) == ("", "the default, no variable set")


def test_a_list_takes_its_first_existing_file(tmp_path: Path, home: Path) -> None:
    second, third = _file(tmp_path / "second"), _file(tmp_path / "third")
    listed = f"{tmp_path / 'missing'}:{second}::{third}"
    got = _kubeconfig({}, {"KUBECONFIG": listed})
    assert got == (str(second), "$KUBECONFIG, first existing of 3 paths")


def test_a_list_of_which_nothing_exists_names_its_first_entry(tmp_path: Path, home: Path) -> None:
    listed = f"{tmp_path / 'one'}:{tmp_path / 'two'}"
    got = _kubeconfig({"loadwise_kubeconfig": listed})
    assert got == (str(tmp_path / "one"), "loadwise_kubeconfig, first existing of 2 paths")


def test_a_named_file_that_does_not_exist_is_still_named(tmp_path: Path, home: Path) -> None:
    # the identity check then fails naming it, rather than falling back to another cluster
    _file(home / ".kube" / "config")
    got = _kubeconfig({"loadwise_kubeconfig": str(tmp_path / "typo.yaml")})
    assert got == (str(tmp_path / "typo.yaml"), "loadwise_kubeconfig")


def test_tilde_and_links_are_resolved(home: Path) -> None:
    real = _file(home / "clusters" / "b.yaml")
    (home / "link.yaml").symlink_to(real)
    assert _kubeconfig({"loadwise_kubeconfig": "~/link.yaml"}) == (str(real), "loadwise_kubeconfig")


@pytest.mark.parametrize(
    ("host_vars", "env", "expected"),
    [
        (
            {"loadwise_context": "ours", "cluster_context": "k3s"},
            {"K8S_AUTH_CONTEXT": "env"},
            ("ours", "loadwise_context"),
        ),
        (
            {"loadwise_context": "", "cluster_context": "k3s"},
            {"K8S_AUTH_CONTEXT": "env"},
            ("k3s", "cluster_context (k3s-ansible)"),
        ),
        ({"cluster_context": None}, {"K8S_AUTH_CONTEXT": "env"}, ("env", "$K8S_AUTH_CONTEXT")),
        ({}, {"K8S_AUTH_CONTEXT": ""}, ("", "the file's current-context")),
    ],
    ids=["loadwise_context", "cluster_context", "env", "current-context"],
)
def test_the_context(
    home: Path, host_vars: dict[str, Any], env: dict[str, str], expected: tuple[str, str]
) -> None:
    got = choice(host_vars, env)
    assert (got["context"], got["context_from"]) == expected


@pytest.mark.parametrize(
    ("host_vars", "env", "named"),
    [
        ("cp-1", {}, "a host's variables (a mapping), not str"),
        ({}, ["KUBECONFIG=/x"], "the environment as a mapping, not list"),
    ],
)
def test_bad_input_is_named(host_vars: Any, env: Any, named: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"loadwise_kubeconfig_choice needs {named}")):
        choice(host_vars, env)


def test_by_its_full_name_through_ansibles_templar(tmp_path: Path, home: Path) -> None:
    """In a fresh interpreter: Ansible's plugin loader is set up once per process, and a test
    before this one in the same worker may have set it up without this collection."""
    k3s = _file(tmp_path / "k3s.yaml")
    program = (
        "import json, sys\n"
        "from tests.ansible.plugins import render\n"
        "print(json.dumps(render(sys.argv[1], json.loads(sys.argv[2]))))\n"
    )
    variables = {
        "host": {"kubeconfig": str(k3s), "cluster_context": "lab"},
        "env": {"KUBECONFIG": ""},
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            program,
            "{{ host | loadwise.loadwise.loadwise_kubeconfig_choice(env) }}",
            json.dumps(variables),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {
        "kubeconfig": str(k3s),
        "kubeconfig_from": "kubeconfig (the k3s-ansible inventory variable)",
        "context": "lab",
        "context_from": "cluster_context (k3s-ansible)",
    }
