"""The second scheduler's image comes from loadwise_image_registry, as the add-on roles' do.

roles/loadwise_scheduler_config/templates/second-scheduler.yaml.j2 rendered by
ansible-playbook on this machine (local connection, no API) with the roles' defaults and the
facts preflight and the extender entry would have set; the kube-scheduler tag is the
cluster's version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.playbook import ANSIBLE_PLAYBOOK, ansible_playbook

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "loadwise_scheduler_config"
DIGEST = "sha256:" + "ab" * 32


def _render(tmp_path: Path, **variables: Any) -> list[dict[str, Any]]:
    out = tmp_path / "rendered.yaml"
    play = {
        "name": "Render",
        "hosts": "localhost",
        "gather_facts": False,
        "vars_files": [
            str(ROOT / "roles/loadwise/defaults/main.yml"),
            str(ROLE / "defaults/main.yml"),
        ],
        "tasks": [
            {
                "name": "What preflight and the extender entry would have set",
                "ansible.builtin.set_fact": {
                    "loadwise_preflight_version": "1.31.4",
                    "loadwise_preflight_scheduler_api_version": "kubescheduler.config.k8s.io/v1",
                    "loadwise_scheduler_config_extender": {
                        "urlPrefix": "http://127.0.0.1:8888/scheduler"
                    },
                },
            },
            {
                "name": "Render it",
                "ansible.builtin.copy": {
                    "content": "{{ lookup('ansible.builtin.template', '"
                    + str(ROLE / "templates/second-scheduler.yaml.j2")
                    + "') }}",
                    "dest": str(out),
                    "mode": "0600",
                },
            },
        ],
    }
    playbook = tmp_path / "render.yml"
    playbook.write_text(yaml.safe_dump([play], sort_keys=False))
    extra = tmp_path / "extra.yml"
    extra.write_text(yaml.safe_dump(variables))
    env = {"PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = ansible_playbook(playbook, "-e", f"@{extra}", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [d for d in yaml.safe_load_all(out.read_text()) if d]


@pytest.mark.parametrize(
    ("variables", "image"),
    [
        ({}, "registry.k8s.io/kube-scheduler:v1.31.4"),
        (
            {"loadwise_image_registry": "harbor.lan/proxy-k8s/"},
            "harbor.lan/proxy-k8s/kube-scheduler:v1.31.4",
        ),
        (
            {
                "loadwise_image_registry": "harbor.lan",
                "loadwise_scheduler_config_second_image": f"other.lan/kube-scheduler@{DIGEST}",
            },
            f"other.lan/kube-scheduler@{DIGEST}",
        ),
    ],
)
def test_second_scheduler_image_comes_from_the_one_registry(
    tmp_path: Path, variables: dict[str, Any], image: str
) -> None:
    docs = _render(tmp_path, **variables)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert [c["image"] for c in containers] == [image]


def test_the_role_declares_the_registry_it_reads() -> None:
    specs = yaml.safe_load((ROLE / "meta/argument_specs.yml").read_text())
    option = specs["argument_specs"]["main"]["options"]["loadwise_image_registry"]
    assert option["default"] == "registry.k8s.io"
    assert (
        "registry.k8s.io/kube-scheduler"
        not in (ROLE / "templates/second-scheduler.yaml.j2").read_text()
    )
