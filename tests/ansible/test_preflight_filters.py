"""The loadwise_preflight role's filter plugin, run as plain Python (no Ansible, no host)."""

from __future__ import annotations

import base64

import pytest

from tests.ansible.plugins import filter_module

PEM = "-----BEGIN CERTIFICATE-----\nQUJD\nREVG\n-----END CERTIFICATE-----\n"


plugin = filter_module("loadwise_preflight")


def test_unknown_names_come_with_the_closest_declared_one() -> None:
    declared = ["loadwise_extender_policy", "loadwise_scheduler_config_weight", "loadwise_listen"]
    names = [
        "loadwise_extender_polcy",
        "loadwise_listen",
        "ansible_host",
        "loadwise_zzz_qqq",
        "loadwise_test_x",
    ]
    found = plugin.loadwise_unknown_names(names, declared, ignore_prefixes=["loadwise_test_"])
    assert found == [
        {"name": "loadwise_extender_polcy", "suggestion": "loadwise_extender_policy"},
        {"name": "loadwise_zzz_qqq", "suggestion": ""},
    ]


def _doc(current: str) -> dict[str, object]:
    return {
        "current-context": current,
        "contexts": [
            {"name": "a", "context": {"cluster": "ca"}},
            {"name": "b", "context": {"cluster": "cb"}},
        ],
        "clusters": [
            {
                "name": "ca",
                "cluster": {
                    "server": "https://a:6443",
                    "certificate-authority-data": base64.b64encode(PEM.encode()).decode(),
                },
            },
            {
                "name": "cb",
                "cluster": {"server": "https://b:6443", "certificate-authority": "/etc/b-ca.crt"},
            },
        ],
    }


def test_the_named_context_wins_over_the_current_one() -> None:
    assert plugin.loadwise_kubeconfig_cluster(_doc("a"), "b") == {
        "context": "b",
        "cluster": "cb",
        "server": "https://b:6443",
        "ca_data": "",
        "ca_file": "/etc/b-ca.crt",
    }
    current = plugin.loadwise_kubeconfig_cluster(_doc("a"))
    assert (current["server"], current["ca_data"]) == ("https://a:6443", PEM)


@pytest.mark.parametrize(
    ("doc", "context", "says"),
    [
        (_doc(""), "", "no current-context"),
        (_doc("a"), "zz", "no context named 'zz'"),
        ("text", "", "not a YAML mapping"),
    ],
)
def test_a_kubeconfig_without_that_context_is_a_clear_error(
    doc: object, context: str, says: str
) -> None:
    with pytest.raises(plugin.KubeconfigError, match=says):
        plugin.loadwise_kubeconfig_cluster(doc, context)


def test_certificates_compare_regardless_of_line_wrapping() -> None:
    rewrapped = "-----BEGIN CERTIFICATE-----\nQUJDREVG\n-----END CERTIFICATE-----"
    assert (
        plugin.loadwise_pem_certificates(PEM)
        == plugin.loadwise_pem_certificates(rewrapped)
        == ["QUJDREVG"]
    )
    assert plugin.loadwise_pem_certificates("no pem here") == []


CONFIG = "/etc/kubernetes/loadwise-scheduler-config.yaml"


def _scheduler_pod(node: str, *, loadwise: bool, ready: bool) -> dict:
    """A kube-scheduler mirror pod as the API server returns it (kubeadm's manifest: the
    binary, its flags; the kubelet's Ready condition)."""
    command = ["kube-scheduler", "--kubeconfig=/etc/kubernetes/scheduler.conf"]
    if loadwise:
        command.append(f"--config={CONFIG}")
    return {
        "metadata": {"name": f"kube-scheduler-{node}", "namespace": "kube-system",
                     "labels": {"component": "kube-scheduler", "tier": "control-plane"}},
        "spec": {"nodeName": node, "containers": [{"name": "kube-scheduler", "command": command}]},
        "status": {"conditions": [{"type": "Ready", "status": str(ready)}]},
    }  # fmt: skip


def test_schedulers_naming_loadwise_on_nodes_outside_the_run_are_named() -> None:
    pods = [
        _scheduler_pod("cp-1", loadwise=True, ready=True),  # in the run
        _scheduler_pod("CP-2", loadwise=True, ready=True),  # in the run, by its hostname
        _scheduler_pod("cp-3", loadwise=True, ready=False),  # joined: the kubelet holds it
        _scheduler_pod("cp-4", loadwise=True, ready=True),  # left out by --limit
        _scheduler_pod("cp-5", loadwise=False, ready=True),  # stock: nothing to say
        _scheduler_pod("cp-3", loadwise=True, ready=False),  # the same node twice: one entry
    ]
    names = ["cp-1", "cp-2.lan", "cp-2", "cp-2.lan"]
    assert plugin.loadwise_schedulers_outside(pods, CONFIG, names) == [
        {"node": "cp-3", "ready": False},
        {"node": "cp-4", "ready": True},
    ]
    # another config path is not loadwise's
    assert plugin.loadwise_schedulers_outside(pods, "/etc/kubernetes/other.yaml", names) == []
    assert plugin.loadwise_schedulers_outside(None, CONFIG, names) == []
