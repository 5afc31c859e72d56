"""A metrics-server that never gets ready on kubeadm: the run names the cause and takes the
unavailable APIService out again (it would break API discovery for the whole cluster).

roles/loadwise_metrics_server run by ansible-playbook on this machine against
tests/ansible/fake_kubernetes_core.py. The objects are the ones a kubeadm cluster whose
kubelets serve self-signed certificates shows (tests/lab/test_real_installer.py runs the same
on the real nodes): the Deployment with 0 of 1 replicas available, its pod Running with the
container up but not ready (metrics-server's /readyz fails until a scrape succeeds), and its
log as metrics-server v0.8 writes it for every node and scrape.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from tests.ansible.fake_kubernetes_core import environment
from tests.ansible.playbook import ansible_playbook

LABELS = {
    "app.kubernetes.io/part-of": "loadwise",
    "app.kubernetes.io/managed-by": "loadwise-ansible",
}
POD = "metrics-server-5d8f9c7b6-x2x7q"
X509 = (
    'E1125 17:40:03.512311       1 scraper.go:149] "Failed to scrape node" err="Get '
    '\\"https://10.88.0.4:10250/metrics/resource\\": tls: failed to verify certificate: x509: '
    "cannot validate certificate for 10.88.0.4 because it doesn't contain any IP SANs\" "
    'node="loadwise-real-cp"'
)
STARTING = "I1125 17:39:48.120004       1 serving.go:374] Generated self-signed cert in-memory"


def _objects() -> list[dict[str, Any]]:
    meta = {"namespace": "kube-system", "labels": {**LABELS, "k8s-app": "metrics-server"}}
    return [
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": "v1beta1.metrics.k8s.io", "labels": meta["labels"]},
            "status": {
                "conditions": [
                    {"type": "Available", "status": "False", "reason": "MissingEndpoints"}
                ]
            },
        },  # fmt: skip
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {**meta, "name": "metrics-server", "generation": 1},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"k8s-app": "metrics-server"}}},
            "status": {
                "observedGeneration": 1,
                "replicas": 1,
                "updatedReplicas": 1,
                "unavailableReplicas": 1,
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": POD,
                "namespace": "kube-system",
                "labels": {"k8s-app": "metrics-server"},
            },
            "spec": {"nodeName": "loadwise-real-w1"},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [
                    {
                        "name": "metrics-server",
                        "ready": False,
                        "started": True,
                        "restartCount": 0,
                        "containerID": "containerd://4f1c",
                        "image": "registry.k8s.io/metrics-server/metrics-server:v0.8.0",
                        "state": {"running": {"startedAt": "2026-11-25T17:39:47Z"}},
                    }
                ],
            },
        },  # fmt: skip
    ]


def _play(
    tmp_path: Path, tasks_from: str, variables: dict[str, Any], state: dict[str, Any]
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], float]:
    """The role's task file included as site.yml / rollback.yml include it, against the fake
    API holding `state`; the run, the objects afterwards and the seconds it took."""
    api = tmp_path / "api.json"
    api.write_text(json.dumps(state))
    playbook = tmp_path / "play.yml"
    include = {"name": "loadwise_metrics_server", "tasks_from": tasks_from}
    tasks = [{"name": "Include", "ansible.builtin.include_role": include, "vars": variables}]
    play = {"name": "metrics-server", "hosts": "localhost", "gather_facts": False, "tasks": tasks}
    playbook.write_text(yaml.safe_dump([play]))
    started = time.monotonic()
    run = ansible_playbook(
        playbook, "-e", "loadwise_rollout_delay=1", env=environment(tmp_path, api), timeout=300
    )
    return run, json.loads(api.read_text()), time.monotonic() - started


def _run(
    tmp_path: Path, log: list[str], *, timeout: int
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], float]:
    """site.yml's metrics-server on kubeadm, its pod logging `log`."""
    variables = {
        "loadwise_preflight_detected_flavour": "kubeadm",
        "loadwise_preflight_minor": 31,
        "loadwise_metrics_server_rollout_timeout": timeout,
    }
    logs = {f"kube-system/{POD}/metrics-server": log}
    return _play(tmp_path, "main", variables, {"objects": _objects(), "logs": logs})


def _kinds(stored: dict[str, Any]) -> set[str]:
    return {o["kind"] for o in stored["objects"]}


def test_self_signed_kubelet_certificates_fail_at_once_naming_the_variable(tmp_path: Path) -> None:
    run, stored, seconds = _run(tmp_path, [STARTING, X509, X509], timeout=120)
    out = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0, out
    assert "loadwise_metrics_server_kubelet_insecure_tls: true" in out, out
    assert "x509: cannot validate certificate for 10.88.0.4" in out, out
    assert "still not rolled out" not in out  # named from the log, not after the timeout
    assert seconds < 100, seconds
    # the unavailable APIService is gone, the pod stays for `kubectl logs`
    assert _kinds(stored) == {"Deployment", "Pod"}
    assert "The APIService v1beta1.metrics.k8s.io was removed again" in out


def test_any_failed_rollout_takes_the_apiservice_out(tmp_path: Path) -> None:
    """Not ready for another reason (nothing in its log names one): the timeout fails it,
    saying what it waited for, and the APIService goes too."""
    run, stored, _ = _run(tmp_path, [STARTING], timeout=8)
    out = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0, out
    assert "0 of 1 updated replicas available (still not rolled out after 8 s)" in out, out
    assert "loadwise_metrics_server_kubelet_insecure_tls" not in out
    assert _kinds(stored) == {"Deployment", "Pod"}


def test_rollback_removes_what_a_failed_rollout_left(tmp_path: Path) -> None:
    """After that, only the labelled Deployment (and what came with it) is left: rollback.yml
    still finds it as loadwise's and removes it."""
    left = [o for o in _objects() if o["kind"] == "Deployment"]
    run, stored, _ = _play(
        tmp_path, "rollback", {"loadwise_cluster_objects": True}, {"objects": left}
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert stored["objects"] == []
