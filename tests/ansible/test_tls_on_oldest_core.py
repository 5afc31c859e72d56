"""The extender's TLS keys on the oldest ansible-core the collection supports.

community.crypto 3.x declares ansible-core >= 2.17 (its meta/runtime.yml), so on 2.16 the
collection takes community.crypto 2.x, which `ansible` 9.x bundles for ansible-core 2.16
(scripts/setup installs ansible 9.13.0 into .venv-ansible-oldest: community.crypto 2.22.3). Its
ansible-playbook runs roles/loadwise_extender/tasks/tls.yml here as
tests/ansible/test_extender_tls.py runs it with .venv's (ansible-core 2.19.14, community.crypto
3.0.5): on the controller over the local connection, into a directory of the test's, a
systemctl stand-in recording restarts. What it makes is then checked with openssl: both
certificates chain to the node's CA, each for its own purpose. The other tests keep the promise
consistent: galaxy.yml's community.crypto range starts at the version tested here and takes the
one .venv tests, and docs/ansible.md names both.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.fake_kubernetes_core import install
from tests.ansible.fakes import path_with
from tests.ansible.playbook import ansible_playbook
from tests.ansible.test_ansible_core_versions import OLDEST, PYTHONS, _version

ROOT = Path(__file__).resolve().parents[2]
SHOW = "Id=loadwise-extender.service\\nLoadState=loaded\\nActiveState=active\\nSubState=running\\n"


def _crypto_version(python: Path) -> str:
    """The community.crypto that python's own `ansible` package bundles."""
    _version(python)
    found = subprocess.run(
        [str(python), "-c", "import ansible_collections as c; print(c.__path__[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    manifest = Path(found) / "community" / "crypto" / "MANIFEST.json"
    assert manifest.exists(), f"{manifest} is missing: scripts/setup installs it"
    return str(json.loads(manifest.read_text())["collection_info"]["version"])


def _tls(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """tasks/tls.yml with the oldest ansible-core; the run and the restarts it asked for."""
    calls = tmp_path / "systemctl.calls"
    calls.touch()
    before = calls.read_text().count("restart")
    env = path_with(
        tmp_path / "bin",
        {"systemctl": f'echo "$*" >> {calls}\ncase "$*" in *show*) printf "{SHOW}";; esac'},
    )
    playbook = tmp_path / "play.yml"
    variables: dict[str, Any] = {
        "loadwise_extender_tls_dir": str(tmp_path / "tls"),
        # a group every Debian/Ubuntu machine has, standing in for the service's own account
        "loadwise_extender_user": "daemon",
    }
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Include the task file as the role does",
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Include",
                            "ansible.builtin.include_role": {
                                "name": "loadwise_extender",
                                "tasks_from": "tls.yml",
                            },
                            "vars": variables,
                        }
                    ],
                }
            ]
        )
    )
    # only the kubernetes.core stand-in on the path: community.crypto comes from the oldest
    # venv's own `ansible` package, as an operator's `pip install ansible~=9.0` gives it
    env["ANSIBLE_COLLECTIONS_PATH"] = str(install(tmp_path))
    env["ANSIBLE_LOCAL_TEMP"] = str(tmp_path / "ansible-tmp")
    run = ansible_playbook(playbook, *extra, env=env, timeout=300, python=OLDEST)
    return run, calls.read_text().count("restart") - before


def _openssl(*args: str) -> str:
    return subprocess.run(
        ["openssl", *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_keys_are_made_and_kept_on_the_oldest_ansible_core(tmp_path: Path) -> None:
    assert _version(OLDEST).startswith("2.16.")
    assert _crypto_version(OLDEST).startswith("2.")
    run, restarts = _tls(tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert restarts == 1, out
    tls = tmp_path / "tls"
    ca = str(tls / "ca.crt")
    for leaf, purpose in (("server.crt", "sslserver"), ("scheduler/client.crt", "sslclient")):
        said = _openssl("verify", "-CAfile", ca, "-purpose", purpose, str(tls / leaf))
        assert said.endswith(": OK"), said
    # each only for its own purpose
    client = str(tls / "scheduler/client.crt")
    wrong = subprocess.run(
        ["openssl", "verify", "-CAfile", ca, "-purpose", "sslserver", client],
        capture_output=True,
        text=True,
    )
    assert wrong.returncode != 0, wrong.stdout
    text = _openssl("x509", "-noout", "-text", "-in", str(tls / "server.crt"))
    assert "IP Address:127.0.0.1" in text and "DNS:localhost" in text
    assert "ASN1 OID: prime256v1" in _openssl("x509", "-noout", "-text", "-in", str(tls / "ca.crt"))
    assert (tls / "ca.crt").read_bytes() == (tls / "scheduler/ca.crt").read_bytes()
    assert oct((tls / "ca.key").stat().st_mode & 0o777) == "0o600"

    files = {p: p.read_bytes() for p in tls.rglob("*") if p.is_file()}
    again, restarts = _tls(tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    found = re.search(r"localhost\s*:\s*ok=\d+\s+changed=(\d+)", again.stdout)
    assert found and found[1] == "0", again.stdout
    assert restarts == 0
    assert {p: p.read_bytes() for p in tls.rglob("*") if p.is_file()} == files


def _range(text: str) -> tuple[str, str]:
    found = re.fullmatch(r">=(\d+\.\d+\.\d+),<(\d+\.\d+\.\d+)", text.replace(" ", ""))
    assert found, text
    return found[1], found[2]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_galaxy_yml_takes_the_community_crypto_each_ansible_core_is_tested_with() -> None:
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    floor, ceiling = _range(galaxy["dependencies"]["community.crypto"])
    oldest, pinned = _crypto_version(OLDEST), _crypto_version(PYTHONS["pinned"])
    assert floor == oldest, (floor, oldest)
    assert _key(floor) <= _key(pinned) < _key(ceiling), (floor, pinned, ceiling)
    said = " ".join((ROOT / "docs" / "ansible.md").read_text().split())
    assert f"community.crypto {oldest}" in said and f"community.crypto {pinned}" in said
    setup = (ROOT / "scripts" / "setup").read_text()
    bundle = re.search(r"^ANSIBLE_OLDEST_BUNDLE=(\S+)$", setup, re.MULTILINE)
    assert bundle, "scripts/setup names the ansible package the oldest venv gets"
    installed = subprocess.run(
        [str(OLDEST), "-c", "import importlib.metadata as m; print(m.version('ansible'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert installed == bundle[1], (installed, bundle[1])


@pytest.mark.parametrize("which", PYTHONS)
def test_each_venv_bundles_a_community_crypto_in_range(which: str) -> None:
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    floor, ceiling = _range(galaxy["dependencies"]["community.crypto"])
    assert _key(floor) <= _key(_crypto_version(PYTHONS[which])) < _key(ceiling)
