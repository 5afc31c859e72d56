"""The loadwise_scheduler_config role's filter plugin, run as plain Python (no Ansible, no host).

The kubeadm manifest is lab/nodes/kube-scheduler.yaml, the shape `kubeadm init`
writes (the molecule nodes run it); the ClusterConfigurations are the shapes kubeadm stores
in kube-system/kubeadm-config (v1beta3: extraArgs a map, v1beta4: a list of name/value).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.plugins import filter_module

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "lab/nodes/kube-scheduler.yaml"
CONFIG = "/etc/kubernetes/loadwise-scheduler-config.yaml"
SHA = "0" * 63 + "1"
VOLUME = "loadwise-scheduler-config"
# The directory of the scheduler's extender certificates (loadwise_extender_tls_dir/scheduler).
TLS_DIR = "/etc/loadwise/tls/scheduler"
TLS_VOLUME = "loadwise-scheduler-tls"
ANNOTATION = "loadwise.dev/scheduler-config-sha256"


plugin = filter_module("loadwise_manifest")


@pytest.fixture
def manifest() -> dict[str, Any]:
    text = MANIFEST.read_text().replace("@VERSION@", "v1.31.2")
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def _scheduler(pod: dict[str, Any]) -> dict[str, Any]:
    containers = [c for c in pod["spec"]["containers"] if c["name"] == "kube-scheduler"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def _edit(pod: dict[str, Any], **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = plugin.loadwise_scheduler_manifest(pod, CONFIG, SHA, **kw)
    return out


def test_the_filters_ansible_sees() -> None:
    filters = plugin.FilterModule().filters()
    assert filters == {
        "loadwise_scheduler_manifest": plugin.loadwise_scheduler_manifest,
        "loadwise_cluster_configuration": plugin.loadwise_cluster_configuration,
        "loadwise_rollback_manifest": plugin.loadwise_rollback_manifest,
        "loadwise_rollback_cluster_configuration": plugin.loadwise_rollback_cluster_configuration,
        "loadwise_foreign_scheduler_config": plugin.loadwise_foreign_scheduler_config,
        "loadwise_k3s_scheduler_args": plugin.loadwise_k3s_scheduler_args,
    }


# --- the static pod manifest ---


def test_manifest_gets_the_flag_mount_volume_and_annotation(manifest: dict[str, Any]) -> None:
    out = _edit(manifest)
    container = _scheduler(out)
    assert container["command"] == [
        "kube-scheduler",
        "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
        "--authorization-kubeconfig=/etc/kubernetes/scheduler.conf",
        "--bind-address=127.0.0.1",
        f"--config={CONFIG}",
        "--kubeconfig=/etc/kubernetes/scheduler.conf",
        "--leader-elect=true",
    ]
    assert container["volumeMounts"] == [
        {"mountPath": "/etc/kubernetes/scheduler.conf", "name": "kubeconfig", "readOnly": True},
        {"mountPath": CONFIG, "name": VOLUME, "readOnly": True},
    ]
    assert out["spec"]["volumes"] == [
        {
            "hostPath": {"path": "/etc/kubernetes/scheduler.conf", "type": "FileOrCreate"},
            "name": "kubeconfig",
        },
        {"hostPath": {"path": CONFIG, "type": "File"}, "name": VOLUME},
    ]
    assert out["metadata"]["annotations"] == {ANNOTATION: SHA}


def test_manifest_with_tls_also_mounts_the_certificates_directory(
    manifest: dict[str, Any],
) -> None:
    """kube-scheduler reads its caFile, certFile and keyFile inside the static pod, so the
    directory holding them is mounted read-only, at the host's path (the config names it)."""
    out = _edit(manifest, tls_dir=TLS_DIR)
    container = _scheduler(out)
    assert container["volumeMounts"] == [
        {"mountPath": "/etc/kubernetes/scheduler.conf", "name": "kubeconfig", "readOnly": True},
        {"mountPath": CONFIG, "name": VOLUME, "readOnly": True},
        {"mountPath": TLS_DIR, "name": TLS_VOLUME, "readOnly": True},
    ]
    assert out["spec"]["volumes"][1:] == [
        {"hostPath": {"path": CONFIG, "type": "File"}, "name": VOLUME},
        {"hostPath": {"path": TLS_DIR, "type": "Directory"}, "name": TLS_VOLUME},
    ]
    assert _edit(out, tls_dir=TLS_DIR) == out
    # present=False takes both out; turning TLS off takes the certificates' mount out
    assert _edit(out, present=False) == manifest
    assert _edit(out) == _edit(manifest)


def test_manifest_edit_touches_nothing_else(manifest: dict[str, Any]) -> None:
    out = _edit(manifest)
    for pod in (out, manifest):
        container = _scheduler(pod)
        for key in ("command", "volumeMounts"):
            del container[key]
        del pod["spec"]["volumes"]
        pod["metadata"].pop("annotations", None)
    assert out == manifest


def test_manifest_input_is_not_modified(manifest: dict[str, Any]) -> None:
    before = copy.deepcopy(manifest)
    _edit(manifest)
    _edit(manifest, present=False)
    assert manifest == before


def test_manifest_edit_twice_is_the_edit_once(manifest: dict[str, Any]) -> None:
    once = _edit(manifest)
    assert _edit(once) == once


def test_manifest_edit_survives_the_yaml_round_trip_the_role_makes(
    manifest: dict[str, Any],
) -> None:
    # kubeadm_files.yml: from_yaml | loadwise_scheduler_manifest | to_nice_yaml, written to disk;
    # the next run reads that file back and must compute the same object.
    once = _edit(manifest)
    reread = yaml.safe_load(yaml.safe_dump(once, indent=2, width=256))
    assert _edit(reread) == once


def test_manifest_present_false_restores_the_original(manifest: dict[str, Any]) -> None:
    assert _edit(_edit(manifest), present=False) == manifest


def test_manifest_present_false_on_an_unedited_manifest_changes_nothing(
    manifest: dict[str, Any],
) -> None:
    assert _edit(manifest, present=False) == manifest


def test_manifest_new_checksum_replaces_the_old_annotation(manifest: dict[str, Any]) -> None:
    other = "f" * 64
    out = plugin.loadwise_scheduler_manifest(_edit(manifest), CONFIG, other)
    assert out["metadata"]["annotations"] == {ANNOTATION: other}


def test_manifest_without_checksum_gets_no_annotation(manifest: dict[str, Any]) -> None:
    out = plugin.loadwise_scheduler_manifest(manifest, CONFIG)
    assert "annotations" not in out["metadata"]
    assert f"--config={CONFIG}" in _scheduler(out)["command"]


def test_manifest_keeps_foreign_annotations(manifest: dict[str, Any]) -> None:
    manifest["metadata"]["annotations"] = {"kubeadm.kubernetes.io/etcd.advertise": "x"}
    out = _edit(manifest)
    assert out["metadata"]["annotations"] == {
        "kubeadm.kubernetes.io/etcd.advertise": "x",
        ANNOTATION: SHA,
    }
    assert _edit(out, present=False) == manifest


def test_manifest_replaces_a_foreign_config_flag(manifest: dict[str, Any]) -> None:
    # The operator's own --config is replaced (not kept next to ours: a second --config
    # would make the scheduler read only one of them). The pristine backup keeps it.
    _scheduler(manifest)["command"].append("--config=/etc/kubernetes/operator-scheduler.yaml")
    command = _scheduler(_edit(manifest))["command"]
    assert [a for a in command if a.startswith("--config")] == [f"--config={CONFIG}"]
    assert len(command) == 7


def test_manifest_moves_to_a_new_config_path(manifest: dict[str, Any]) -> None:
    elsewhere = "/etc/kubernetes/elsewhere.yaml"
    out = plugin.loadwise_scheduler_manifest(_edit(manifest), elsewhere, SHA)
    container = _scheduler(out)
    assert [a for a in container["command"] if a.startswith("--config")] == [
        f"--config={elsewhere}"
    ]
    ours = [m for m in container["volumeMounts"] if m["name"] == VOLUME]
    assert ours == [{"mountPath": elsewhere, "name": VOLUME, "readOnly": True}]
    volumes = [v for v in out["spec"]["volumes"] if v["name"] == VOLUME]
    assert volumes == [{"hostPath": {"path": elsewhere, "type": "File"}, "name": VOLUME}]


def test_manifest_finds_the_scheduler_among_other_containers(manifest: dict[str, Any]) -> None:
    sidecar = {"name": "sidecar", "image": "busybox", "command": ["sleep", "inf"]}
    manifest["spec"]["containers"].insert(0, sidecar)
    out = _edit(manifest)
    assert out["spec"]["containers"][0] == sidecar
    assert f"--config={CONFIG}" in out["spec"]["containers"][1]["command"]


def test_manifest_without_mounts_volumes_or_metadata() -> None:
    pod: dict[str, Any] = {
        "spec": {
            "containers": [{"name": "kube-scheduler", "command": ["kube-scheduler", "--v=2"]}],
            "volumes": None,
        }
    }
    out = _edit(pod)
    assert _scheduler(out)["command"] == ["kube-scheduler", f"--config={CONFIG}", "--v=2"]
    assert _scheduler(out)["volumeMounts"] == [
        {"mountPath": CONFIG, "name": VOLUME, "readOnly": True}
    ]
    assert out["spec"]["volumes"] == [
        {"hostPath": {"path": CONFIG, "type": "File"}, "name": VOLUME}
    ]
    assert out["metadata"] == {"annotations": {ANNOTATION: SHA}}


def test_manifest_without_a_kube_scheduler_container_is_refused(
    manifest: dict[str, Any],
) -> None:
    manifest["spec"]["containers"][0]["name"] = "scheduler"
    with pytest.raises(ValueError, match="no container named kube-scheduler"):
        _edit(manifest)


# --- kubeadm-config's ClusterConfiguration ---

V1BETA3 = """\
apiServer:
  extraArgs:
    authorization-mode: Node,RBAC
apiVersion: kubeadm.k8s.io/v1beta3
certificatesDir: /etc/kubernetes/pki
clusterName: kubernetes
controllerManager: {}
dns: {}
etcd:
  local:
    dataDir: /var/lib/etcd
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: v1.29.4
networking:
  dnsDomain: cluster.local
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/12
scheduler: {}
"""

V1BETA4 = V1BETA3.replace("v1beta3", "v1beta4").replace(
    "  extraArgs:\n    authorization-mode: Node,RBAC\n",
    "  extraArgs:\n  - name: authorization-mode\n    value: Node,RBAC\n",
)

OUR_VOLUME = {
    "name": VOLUME,
    "hostPath": CONFIG,
    "mountPath": CONFIG,
    "readOnly": True,
    "pathType": "File",
}


def _cc(cfg: dict[str, Any], **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = plugin.loadwise_cluster_configuration(cfg, CONFIG, **kw)
    return out


@pytest.mark.parametrize(
    ("text", "args"),
    [
        (V1BETA3, {"config": CONFIG}),
        (V1BETA4, [{"name": "config", "value": CONFIG}]),
    ],
    ids=["v1beta3", "v1beta4"],
)
def test_cluster_configuration_gets_the_flag_and_volume(text: str, args: object) -> None:
    cfg = yaml.safe_load(text)
    out = _cc(cfg)
    assert out["scheduler"] == {"extraArgs": args, "extraVolumes": [OUR_VOLUME]}
    del out["scheduler"], cfg["scheduler"]
    assert out == cfg


@pytest.mark.parametrize("text", [V1BETA3, V1BETA4], ids=["v1beta3", "v1beta4"])
def test_cluster_configuration_edit_is_idempotent_and_reversible(text: str) -> None:
    cfg = yaml.safe_load(text)
    before = copy.deepcopy(cfg)
    once = _cc(cfg)
    assert cfg == before, "the input was modified"
    assert _cc(once) == once
    reread = yaml.safe_load(yaml.safe_dump(once, indent=2, width=256))
    assert _cc(reread) == once
    assert _cc(once, present=False) == before


@pytest.mark.parametrize("text", [V1BETA3, V1BETA4], ids=["v1beta3", "v1beta4"])
def test_cluster_configuration_with_tls_carries_the_certificates_mount(text: str) -> None:
    """kubeadm upgrade and join render the manifest from here: without the certificates'
    volume the scheduler they start could not read its caFile and would not start."""
    cfg = yaml.safe_load(text)
    out = _cc(cfg, tls_dir=TLS_DIR)
    assert out["scheduler"]["extraVolumes"] == [
        OUR_VOLUME,
        {
            "name": TLS_VOLUME,
            "hostPath": TLS_DIR,
            "mountPath": TLS_DIR,
            "readOnly": True,
            "pathType": "Directory",
        },
    ]
    assert _cc(out, tls_dir=TLS_DIR) == out
    assert _cc(out, present=False) == cfg
    assert _cc(out) == _cc(cfg)


def test_cluster_configuration_v1beta3_keeps_other_scheduler_settings() -> None:
    cfg = yaml.safe_load(V1BETA3)
    other_volume = {"name": "tz", "hostPath": "/etc/localtime", "mountPath": "/etc/localtime"}
    cfg["scheduler"] = {
        "extraArgs": {"v": "2", "config": "/etc/kubernetes/operator-scheduler.yaml"},
        "extraVolumes": [other_volume],
    }
    out = _cc(cfg)
    assert out["scheduler"] == {
        "extraArgs": {"v": "2", "config": CONFIG},
        "extraVolumes": [other_volume, OUR_VOLUME],
    }
    # The foreign config flag is replaced, so present=False cannot bring it back.
    assert _cc(out, present=False)["scheduler"] == {
        "extraArgs": {"v": "2"},
        "extraVolumes": [other_volume],
    }


def test_cluster_configuration_v1beta4_keeps_other_args_in_order() -> None:
    cfg = yaml.safe_load(V1BETA4)
    cfg["scheduler"] = {
        "extraArgs": [
            {"name": "v", "value": "2"},
            {"name": "config", "value": "/etc/kubernetes/operator-scheduler.yaml"},
            {"name": "profiling", "value": "false"},
        ]
    }
    out = _cc(cfg)
    assert out["scheduler"]["extraArgs"] == [
        {"name": "v", "value": "2"},
        {"name": "profiling", "value": "false"},
        {"name": "config", "value": CONFIG},
    ]
    assert out["scheduler"]["extraVolumes"] == [OUR_VOLUME]


def test_cluster_configuration_v1beta4_empty_args_become_a_list() -> None:
    cfg = yaml.safe_load(V1BETA4)
    cfg["scheduler"] = {"extraArgs": None}
    assert _cc(cfg)["scheduler"]["extraArgs"] == [{"name": "config", "value": CONFIG}]


@pytest.mark.parametrize("scheduler", ["absent", None], ids=["no-key", "null"])
def test_cluster_configuration_without_a_scheduler_section(scheduler: object) -> None:
    cfg = yaml.safe_load(V1BETA3)
    if scheduler == "absent":
        del cfg["scheduler"]
    else:
        cfg["scheduler"] = scheduler
    out = _cc(cfg)
    assert out["scheduler"] == {"extraArgs": {"config": CONFIG}, "extraVolumes": [OUR_VOLUME]}


def test_cluster_configuration_present_false_adds_no_scheduler_section() -> None:
    cfg = yaml.safe_load(V1BETA3)
    del cfg["scheduler"]
    assert _cc(cfg, present=False) == cfg
