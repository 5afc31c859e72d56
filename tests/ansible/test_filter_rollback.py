"""Rollback and foreign-config filters of roles/loadwise_scheduler_config, as plain Python.

The "upgraded" inputs model what `kubeadm upgrade apply` does to a node loadwise
configured: it renders the manifest again from kubeadm-config (which loadwise patched, so
--config and the hostPath volume come back, without loadwise's checksum annotation), with
the new image tag, sorted flags and its own layout, and it stores the new
kubernetesVersion in kubeadm-config. The operator's own flag arrives the same way.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import yaml

from tests.ansible.test_filter_plugin import (
    CONFIG,
    SHA,
    TLS_DIR,
    V1BETA3,
    V1BETA4,
    _scheduler,
    plugin,
)

OLD, NEW = "v1.31.2", "v1.32.0"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, indent=2, width=256, default_flow_style=False)


def _pristine_manifest() -> str:
    from tests.ansible.test_filter_plugin import MANIFEST

    return MANIFEST.read_text().replace("@VERSION@", OLD)


def _left_by_loadwise(pristine: str, tls_dir: str = "") -> str:
    """The manifest text loadwise writes (the role renders with to_nice_yaml)."""
    edited = plugin.loadwise_scheduler_manifest(
        yaml.safe_load(pristine), CONFIG, SHA, tls_dir=tls_dir
    )
    return _dump(edited)


def _upgraded(left: str) -> str:
    """What kubeadm upgrade apply to NEW writes, with the operator's --profiling=false added."""
    pod = yaml.safe_load(left)
    container = _scheduler(pod)
    container["image"] = f"registry.k8s.io/kube-scheduler:{NEW}"
    container["command"] = container["command"][:1] + sorted(
        container["command"][1:] + ["--profiling=false"]
    )
    pod["metadata"].pop("annotations", None)
    # kubeadm's own serialiser (sigs.k8s.io/yaml) indents lists differently from to_nice_yaml.
    return yaml.safe_dump(pod, indent=4, default_flow_style=False)


@pytest.mark.parametrize("tls_dir", ["", TLS_DIR], ids=["plain", "tls"])
def test_manifest_loadwise_left_alone_comes_back_byte_for_byte(tls_dir: str) -> None:
    pristine = _pristine_manifest()
    left = _left_by_loadwise(pristine, tls_dir)
    out = plugin.loadwise_rollback_manifest(left, CONFIG, _sha(left), pristine)
    assert out == {"content": pristine, "how": "pristine"}


@pytest.mark.parametrize("tls_dir", ["", TLS_DIR], ids=["plain", "tls"])
def test_manifest_after_an_upgrade_keeps_the_new_version_and_the_operators_flag(
    tls_dir: str,
) -> None:
    """With TLS kubeadm renders the certificates' mount back too (kubeadm-config has it);
    rollback takes it out with the config's."""
    pristine = _pristine_manifest()
    left = _left_by_loadwise(pristine, tls_dir)
    upgraded = _upgraded(left)
    out = plugin.loadwise_rollback_manifest(upgraded, CONFIG, _sha(left), pristine)
    assert out["how"] == "inverse"
    pod = yaml.safe_load(out["content"])
    container = _scheduler(pod)
    assert container["image"] == f"registry.k8s.io/kube-scheduler:{NEW}"
    assert "--profiling=false" in container["command"]
    assert not [a for a in container["command"] if a.startswith("--config")]
    assert [m["name"] for m in container["volumeMounts"]] == ["kubeconfig"]
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["kubeconfig"]
    # Everything else is the upgraded manifest: only loadwise's three things are gone.
    expected = yaml.safe_load(upgraded)
    exp_container = _scheduler(expected)
    exp_container["command"] = [
        a for a in exp_container["command"] if not a.startswith("--config=")
    ]
    exp_container["volumeMounts"] = [
        m for m in exp_container["volumeMounts"] if m["name"] == "kubeconfig"
    ]
    expected["spec"]["volumes"] = [
        v for v in expected["spec"]["volumes"] if v["name"] == "kubeconfig"
    ]
    assert pod == expected


@pytest.mark.parametrize("tls_dir", ["", TLS_DIR], ids=["plain", "tls"])
def test_manifest_after_an_upgrade_and_a_rerun_keeps_the_new_version(tls_dir: str) -> None:
    """kubeadm upgrade apply, then site.yml again: the re-run edits the upgraded manifest and
    records its sha256 as what loadwise left, while the pristine copy (taken once, never
    overwritten) still has the old tag. Rollback must not write those old bytes back."""
    pristine = _pristine_manifest()
    rerun = _dump(
        plugin.loadwise_scheduler_manifest(
            yaml.safe_load(_upgraded(_left_by_loadwise(pristine, tls_dir))),
            CONFIG,
            SHA,
            tls_dir=tls_dir,
        )
    )
    out = plugin.loadwise_rollback_manifest(rerun, CONFIG, _sha(rerun), pristine)
    assert out["how"] == "inverse", out
    container = _scheduler(yaml.safe_load(out["content"]))
    assert container["image"] == f"registry.k8s.io/kube-scheduler:{NEW}"
    assert "--profiling=false" in container["command"]
    assert not [a for a in container["command"] if a.startswith("--config")]
    assert OLD not in out["content"]


def test_manifest_without_a_record_is_never_replaced_by_the_old_bytes() -> None:
    """An install from before the record existed: the inverse edit, not the pristine copy."""
    pristine = _pristine_manifest()
    left = _left_by_loadwise(pristine)
    out = plugin.loadwise_rollback_manifest(_upgraded(left), CONFIG, "", pristine)
    assert out["how"] == "inverse"
    assert NEW in out["content"] and OLD not in out["content"]


def test_manifest_loadwise_is_no_longer_in_is_left_as_it_is() -> None:
    """The operator already removed loadwise (or ran kubeadm with a clean config): no rewrite."""
    pristine = _pristine_manifest().replace(OLD, NEW)
    out = plugin.loadwise_rollback_manifest(pristine, CONFIG, "0" * 64, _pristine_manifest())
    assert out == {"content": pristine, "how": "untouched"}


def test_manifest_that_is_not_yaml_mapping_is_refused() -> None:
    with pytest.raises(ValueError, match="not a YAML mapping"):
        plugin.loadwise_rollback_manifest("- a list\n", CONFIG, "", None)


@pytest.mark.parametrize("tls_dir", ["", TLS_DIR], ids=["plain", "tls"])
@pytest.mark.parametrize("text", [V1BETA3, V1BETA4], ids=["v1beta3", "v1beta4"])
def test_cluster_configuration_after_an_upgrade_keeps_the_new_version(
    text: str, tls_dir: str
) -> None:
    pristine = text
    left = _dump(
        plugin.loadwise_cluster_configuration(yaml.safe_load(pristine), CONFIG, tls_dir=tls_dir)
    )
    cfg = yaml.safe_load(left)
    cfg["kubernetesVersion"] = "v1.30.1"  # kubeadm upgrade apply stores the new version
    args = cfg["scheduler"]["extraArgs"]
    if isinstance(args, list):
        args.insert(0, {"name": "profiling", "value": "false"})
    else:
        args["profiling"] = "false"
    upgraded = _dump(cfg)
    out = plugin.loadwise_rollback_cluster_configuration(upgraded, CONFIG, _sha(left), pristine)
    assert out["how"] == "inverse"
    back = yaml.safe_load(out["content"])
    assert back["kubernetesVersion"] == "v1.30.1"
    want_args: Any = (
        [{"name": "profiling", "value": "false"}]
        if isinstance(args, list)
        else {"profiling": "false"}
    )
    assert back["scheduler"] == {"extraArgs": want_args}
    assert {k: v for k, v in back.items() if k not in ("kubernetesVersion", "scheduler")} == {
        k: v
        for k, v in yaml.safe_load(pristine).items()
        if k not in ("kubernetesVersion", "scheduler")
    }


@pytest.mark.parametrize("text", [V1BETA3, V1BETA4], ids=["v1beta3", "v1beta4"])
def test_cluster_configuration_after_an_upgrade_and_a_rerun_keeps_the_new_version(
    text: str,
) -> None:
    """The same for kubeadm-config: the upgrade stored the new kubernetesVersion, the re-run
    recorded its own patch of that as what loadwise left."""
    cfg = plugin.loadwise_cluster_configuration(yaml.safe_load(text), CONFIG)
    cfg["kubernetesVersion"] = "v1.30.1"
    rerun = _dump(plugin.loadwise_cluster_configuration(cfg, CONFIG))
    out = plugin.loadwise_rollback_cluster_configuration(rerun, CONFIG, _sha(rerun), text)
    assert out["how"] == "inverse", out
    back = yaml.safe_load(out["content"])
    assert back["kubernetesVersion"] == "v1.30.1"
    assert CONFIG not in out["content"]


@pytest.mark.parametrize("tls_dir", ["", TLS_DIR], ids=["plain", "tls"])
@pytest.mark.parametrize("text", [V1BETA3, V1BETA4], ids=["v1beta3", "v1beta4"])
def test_cluster_configuration_as_loadwise_left_it_comes_back_byte_for_byte(
    text: str, tls_dir: str
) -> None:
    edited = plugin.loadwise_cluster_configuration(yaml.safe_load(text), CONFIG, tls_dir=tls_dir)
    left = _dump(edited)
    out = plugin.loadwise_rollback_cluster_configuration(left, CONFIG, _sha(left), text)
    assert out == {"content": text, "how": "pristine"}


# --- a scheduler config that is not loadwise's ---

KUBESPRAY_CONFIG = "/etc/kubernetes/kubescheduler-config.yaml"


def test_foreign_config_in_a_kubespray_manifest_is_found() -> None:
    pod = yaml.safe_load(_pristine_manifest())
    _scheduler(pod)["command"].append(f"--config={KUBESPRAY_CONFIG}")
    assert plugin.loadwise_foreign_scheduler_config(pod, CONFIG) == [KUBESPRAY_CONFIG]


def test_foreign_config_as_two_arguments_is_found() -> None:
    pod = yaml.safe_load(_pristine_manifest())
    _scheduler(pod)["command"] += ["--config", KUBESPRAY_CONFIG]
    assert plugin.loadwise_foreign_scheduler_config(pod, CONFIG) == [KUBESPRAY_CONFIG]


def test_loadwise_own_config_is_not_foreign() -> None:
    left = yaml.safe_load(_left_by_loadwise(_pristine_manifest()))
    assert plugin.loadwise_foreign_scheduler_config(left, CONFIG) == []
    assert (
        plugin.loadwise_foreign_scheduler_config(yaml.safe_load(_pristine_manifest()), CONFIG) == []
    )


@pytest.mark.parametrize("text", [V1BETA3, V1BETA4], ids=["v1beta3", "v1beta4"])
def test_foreign_config_in_kubeadm_config_is_found(text: str) -> None:
    cfg = yaml.safe_load(text)
    assert plugin.loadwise_foreign_scheduler_config(cfg, CONFIG) == []
    cfg["scheduler"]["extraArgs"] = (
        [{"name": "config", "value": KUBESPRAY_CONFIG}]
        if cfg["apiVersion"].endswith("v1beta4")
        else {"config": KUBESPRAY_CONFIG}
    )
    assert plugin.loadwise_foreign_scheduler_config(cfg, CONFIG) == [KUBESPRAY_CONFIG]
    ours = plugin.loadwise_cluster_configuration(yaml.safe_load(text), CONFIG)
    assert plugin.loadwise_foreign_scheduler_config(ours, CONFIG) == []


# --- k3s: the kube-scheduler-arg list k3s ends up with ---

K3S_OURS = "config=/etc/rancher/k3s/loadwise-scheduler-config.yaml"
DROPIN = "/etc/rancher/k3s/config.yaml.d/90-loadwise.yaml"


def _files(*entries: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"path": p, "data": d} for p, d in entries]


def test_k3s_plus_appends_to_the_operators_args() -> None:
    out = plugin.loadwise_k3s_scheduler_args(
        _files(
            ("/etc/rancher/k3s/config.yaml", {"kube-scheduler-arg": ["bind-address=0.0.0.0"]}),
            (DROPIN, {"kube-scheduler-arg+": [K3S_OURS]}),
        )
    )
    assert out == {
        "args": ["bind-address=0.0.0.0", K3S_OURS],
        "replaced_by": "/etc/rancher/k3s/config.yaml",
        "cli": False,
        "origin": {"bind-address=0.0.0.0": "/etc/rancher/k3s/config.yaml", K3S_OURS: DROPIN},
    }


def test_k3s_later_dropin_without_plus_drops_loadwise() -> None:
    later = "/etc/rancher/k3s/config.yaml.d/99-metrics.yaml"
    out = plugin.loadwise_k3s_scheduler_args(
        _files(
            ("/etc/rancher/k3s/config.yaml", {}),
            (DROPIN, {"kube-scheduler-arg+": [K3S_OURS]}),
            (later, {"kube-scheduler-arg": ["bind-address=0.0.0.0"]}),
        )
    )
    assert K3S_OURS not in out["args"] and out["replaced_by"] == later


@pytest.mark.parametrize(
    "exec_start",
    [
        "{ path=/usr/local/bin/k3s ; argv[]=/usr/local/bin/k3s server"
        " --kube-scheduler-arg bind-address=0.0.0.0 ; ignore_errors=no ; start_time=[n/a] ;"
        " stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }",
        "/usr/local/bin/k3s server --kube-scheduler-arg=bind-address=0.0.0.0",
    ],
    ids=["systemctl-show", "plain"],
)
def test_k3s_unit_flag_replaces_the_config_files_list(exec_start: str) -> None:
    out = plugin.loadwise_k3s_scheduler_args(
        _files((DROPIN, {"kube-scheduler-arg+": [K3S_OURS]})), exec_start
    )
    assert out == {
        "args": ["bind-address=0.0.0.0"],
        "replaced_by": "",
        "cli": True,
        "origin": {"bind-address=0.0.0.0": "the unit's ExecStart"},
    }


def test_k3s_without_any_scheduler_arg() -> None:
    out = plugin.loadwise_k3s_scheduler_args(
        _files(("/etc/rancher/k3s/config.yaml", None), (DROPIN, {"write-kubeconfig-mode": "0644"})),
        "{ path=/usr/local/bin/k3s ; argv[]=/usr/local/bin/k3s server ; ignore_errors=no }",
    )
    assert out == {"args": [], "replaced_by": "", "cli": False, "origin": {}}
