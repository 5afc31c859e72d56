"""examples/kubespray/group_vars/k8s_cluster/loadwise.yml: kubespray's variables that make its
kube-scheduler call loadwise's extender, checked against loadwise itself.

- The extender entry is the one roles/loadwise_scheduler_config/tasks/extender_entry.yml
  writes with the roles' defaults (read from their defaults files, so a changed default fails
  here until the example follows).
- Every TLS file the entry names lies under a read-only volume of scheduler_extra_volumes,
  in kubespray's shape (name, hostPath, mountPath, readOnly: its
  templates/kubeadm-config.v1beta4.yaml.j2 renders each into scheduler.extraVolumes).
- Preflight, run by ansible-playbook on this machine with the kubespray stand-in of
  test_operator_runs.py (the scheduler's --config file rendered from the example's
  kube_scheduler_extenders), says the scheduler calls loadwise's extender.
- docs/ansible.md shows the file as it is (examples/ is not shipped in the collection).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from tests.ansible.test_operator_runs import _kubespray_node, _said
from tests.ansible.test_preflight_playbook import INVENTORIES, _reported_hosts, _run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "kubespray" / "group_vars" / "k8s_cluster" / "loadwise.yml"
CALLS = "node1: the kube-scheduler calls loadwise's extender through its own configuration"


def _example() -> dict[str, Any]:
    loaded = yaml.safe_load(EXAMPLE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _defaults(role: str) -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_the_entry_is_the_one_loadwise_writes_with_its_defaults() -> None:
    shared = _defaults("loadwise")
    scheduler = _defaults("loadwise_scheduler_config")
    assert shared["loadwise_extender_tls_enabled"] is True
    assert shared["loadwise_cluster_objects"] is True  # nodeCacheCapable's default
    tls = f"{shared['loadwise_extender_tls_dir']}/scheduler"
    expected = {
        "urlPrefix": f"https://{shared['loadwise_listen']}/scheduler",
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "weight": scheduler["loadwise_scheduler_config_weight"],
        "enableHTTPS": True,
        "tlsConfig": {
            "caFile": f"{tls}/ca.crt",
            "certFile": f"{tls}/client.crt",
            "keyFile": f"{tls}/client.key",
        },
        "httpTimeout": scheduler["loadwise_scheduler_config_http_timeout"],
        "nodeCacheCapable": True,
        "ignorable": scheduler["loadwise_scheduler_config_ignorable"],
    }
    assert shared["loadwise_filter_enabled"] is True  # filterVerb is there only then
    assert _example()["kube_scheduler_extenders"] == [expected]


def test_every_tls_file_is_mounted_read_only_into_the_scheduler() -> None:
    example = _example()
    volumes = example["scheduler_extra_volumes"]
    assert isinstance(volumes, list) and volumes
    for volume in volumes:
        assert set(volume) == {"name", "hostPath", "mountPath", "readOnly"}, volume
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", volume["name"]), volume
        assert volume["readOnly"] is True
        # the files are read where the extender role writes them on the host
        assert volume["hostPath"] == volume["mountPath"]
    (entry,) = example["kube_scheduler_extenders"]
    mounts = [PurePosixPath(v["mountPath"]) for v in volumes]
    for path in entry["tlsConfig"].values():
        assert any(PurePosixPath(path).is_relative_to(m) for m in mounts), path


def test_preflight_finds_the_scheduler_calling_the_extender(tmp_path: Path) -> None:
    extra = _kubespray_node(tmp_path, _example()["kube_scheduler_extenders"])
    # TLS as loadwise's default (the stand-in's own variables turn it off)
    tls = ["-e", "loadwise_extender_tls_enabled=true"]
    run = _run(
        tmp_path,
        INVENTORIES / "kubespray.ini",
        *extra,
        *tls,
        "--skip-tags",
        "loadwise_scheduler_config",
    )
    said = _said(run)
    assert run.returncode == 0, said
    assert _reported_hosts(run.stdout) == ["node1"], said
    assert CALLS in said, said

    # the control: the same file with the extender's TLS off is not loadwise's entry
    plain = _run(
        tmp_path,
        INVENTORIES / "kubespray.ini",
        *extra,
        "--skip-tags",
        "loadwise_scheduler_config",
    )
    said = _said(plain)
    assert plain.returncode == 0, said
    assert "WARNING: nothing makes the kube-scheduler call loadwise's extender" in said, said

    # and a default run, which would replace kubespray's file, is refused
    refused = _run(tmp_path, INVENTORIES / "kubespray.ini", *extra, *tls)
    said = _said(refused)
    assert refused.returncode != 0, said
    assert "already calls loadwise's extender" in said, said


def test_the_docs_show_the_example_as_it_is() -> None:
    docs = (ROOT / "docs" / "ansible.md").read_text()
    assert "examples/kubespray/group_vars/k8s_cluster/loadwise.yml" in docs
    blocks = re.findall(r"```yaml\n(.*?)```", docs, flags=re.S)
    assert EXAMPLE.read_text() in blocks
