"""The role's load-source credentials: in files only the service's account reads, named
(never held) by the config file, which other users cannot read either."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.plugins import render_file, role_defaults

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles/loadwise_extender"
SECRET = "Zq7-s3cret-Vx"


def _render(**variables: Any) -> tuple[str, dict[str, Any]]:
    values = {
        **role_defaults("loadwise", "loadwise_extender"),
        "ansible_managed": "managed",
        "loadwise_extender_source": "prometheus",
        "loadwise_extender_source_url": "http://10.0.0.9:9090",
        **variables,
    }
    text = render_file(ROLE / "templates/extender.yaml.j2", values)
    return text, yaml.safe_load(text)["source"]


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        (
            {"loadwise_extender_source_bearer_token": SECRET},
            {"bearer_token_file": "/etc/loadwise/source-token"},
        ),
        (
            {
                "loadwise_extender_source_basic_auth_username": "reader",
                "loadwise_extender_source_basic_auth_password": SECRET,
            },
            {
                "basic_auth": {
                    "username": "reader",
                    "password_file": "/etc/loadwise/source-password",
                }
            },
        ),
        ({}, {}),
    ],
)
def test_the_config_names_the_credential_file_never_the_secret(
    variables: dict[str, str], expected: dict[str, Any]
) -> None:
    text, source = _render(**variables)
    assert SECRET not in text
    assert {k: source[k] for k in ("bearer_token_file", "basic_auth") if k in source} == expected


def _task(name: str) -> dict[str, Any]:
    tasks = yaml.safe_load((ROLE / "tasks/node.yml").read_text())
    (task,) = [t for t in tasks if t.get("name", "").startswith(name)]
    return dict(task)


def test_the_credential_files_and_the_config_are_not_for_every_user() -> None:
    written = _task("Extender | Write the load source's credentials")
    copy = written["ansible.builtin.copy"]
    assert copy["mode"] == "0600" and copy["owner"] == "{{ loadwise_extender_user }}"
    assert written["no_log"] is True and written["diff"] is False
    assert _task("Extender | Remove credential files")["no_log"] is True
    config = _task("Extender | Write its config file")["ansible.builtin.template"]
    assert config["mode"] == "0640" and config["group"] == "{{ loadwise_extender_user }}"


def test_every_secret_variable_is_no_log_in_the_argument_specs() -> None:
    specs = yaml.safe_load((ROLE / "meta/argument_specs.yml").read_text())
    options = specs["argument_specs"]["main"]["options"]
    for name in (
        "loadwise_extender_source_bearer_token",
        "loadwise_extender_source_basic_auth_password",
    ):
        assert options[name]["no_log"] is True, name
        assert options[name]["description"]
    assert "no_log" not in options["loadwise_extender_source_basic_auth_username"]
