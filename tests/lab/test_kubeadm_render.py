"""The role's kubeadm-config edit and its rollback, as the real kubeadm renders them.

No cluster: kubeadm v1.36 (built from the lab's Kubernetes module) renders the scheduler's
static pod from the ClusterConfiguration the role writes into kube-system/kubeadm-config
(what `kubeadm upgrade apply` and a later `kubeadm join --control-plane` do), and from the
one rollback writes back after a simulated upgrade. tests/lab/test_real_site.py runs the real
`kubeadm upgrade apply` on a real control-plane node and compares the same way.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.ansible.test_filter_plugin import CONFIG, VOLUME, plugin
from tests.lab.kubeadm_render import CLUSTER_CONFIGURATION, render_scheduler, scheduler_container

pytestmark = pytest.mark.lab


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, indent=2, width=256, default_flow_style=False)


def _patched() -> str:
    """kubeadm-config's ClusterConfiguration as the role leaves it."""
    return _dump(
        plugin.loadwise_cluster_configuration(yaml.safe_load(CLUSTER_CONFIGURATION), CONFIG)
    )


def test_kubeadm_renders_loadwise_from_the_patched_cluster_configuration() -> None:
    pod = render_scheduler(_patched())
    container = scheduler_container(pod)
    assert f"--config={CONFIG}" in container["command"]
    assert {"mountPath": CONFIG, "name": VOLUME, "readOnly": True} in container["volumeMounts"]
    assert {"hostPath": {"path": CONFIG, "type": "File"}, "name": VOLUME} in pod["spec"]["volumes"]
    stock = render_scheduler(CLUSTER_CONFIGURATION)
    # Nothing else differs from what kubeadm renders without loadwise.
    assert plugin.loadwise_scheduler_manifest(pod, CONFIG, present=False) == stock


def test_rollback_after_an_upgrade_leaves_what_kubeadm_renders_without_loadwise() -> None:
    """site.yml, then an upgrade (new kubernetesVersion, the operator's own flag), then rollback."""
    patched = _patched()
    upgraded_cc = yaml.safe_load(patched)
    upgraded_cc["kubernetesVersion"] = (
        "v1.36.3"  # any version this kubeadm accepts, not the old one
    )
    upgraded_cc["scheduler"]["extraArgs"].insert(0, {"name": "profiling", "value": "false"})
    upgraded_text = _dump(upgraded_cc)
    # What `kubeadm upgrade apply` writes on the node: rendered from the upgraded kubeadm-config.
    upgraded_manifest = render_scheduler(upgraded_text)
    assert f"--config={CONFIG}" in scheduler_container(upgraded_manifest)["command"]

    cc_back = plugin.loadwise_rollback_cluster_configuration(
        upgraded_text, CONFIG, "0" * 64, CLUSTER_CONFIGURATION
    )
    manifest_back = plugin.loadwise_rollback_manifest(
        _dump(upgraded_manifest), CONFIG, "0" * 64, "pristine bytes that must not come back"
    )
    assert (cc_back["how"], manifest_back["how"]) == ("inverse", "inverse")

    # The rolled-back kubeadm-config keeps the new version and the flag, and kubeadm renders
    # from it exactly the manifest rollback left on the node.
    cc = yaml.safe_load(cc_back["content"])
    assert cc["kubernetesVersion"] == "v1.36.3"
    assert cc["scheduler"] == {"extraArgs": [{"name": "profiling", "value": "false"}]}
    rendered = render_scheduler(cc_back["content"])
    assert yaml.safe_load(manifest_back["content"]) == rendered
    container = scheduler_container(rendered)
    assert container["image"] == "registry.k8s.io/kube-scheduler:v1.36.3"
    assert "--profiling=false" in container["command"]
    assert not [a for a in container["command"] if a.startswith("--config")]
    assert VOLUME not in str(rendered)
