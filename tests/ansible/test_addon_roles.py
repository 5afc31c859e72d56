"""The add-on roles' choices, run by ansible-playbook on this machine (local connection, no API).

metrics-server's release follows the cluster's minor (its README's compatibility matrix:
0.6.x for 1.25+, 0.7.x for 1.27+, 0.8.x for 1.31+, 0.9.x for 1.34+), and load-watcher's
providers are the ones v0.2.4 has (KubernetesMetricsServer, Prometheus, SignalFx in its
pkg/watcher/metricsprovider.go; Datadog came later). Each case includes the role as the
playbooks do, so the role's own defaults and argument_specs apply.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.playbook import ANSIBLE_PLAYBOOK, ansible_playbook

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _ansible_playbook() -> None:
    if not ANSIBLE_PLAYBOOK.exists():
        pytest.fail("ansible-playbook is not installed next to this Python (scripts/setup)")


def _play(tmp_path: Path, tasks: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    playbook = tmp_path / "play.yml"
    play = {"name": "Under test", "hosts": "localhost", "gather_facts": False, "tasks": tasks}
    playbook.write_text(yaml.safe_dump([play], sort_keys=False))
    env = {"PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    return ansible_playbook(playbook, env=env)


def _metrics_server_image(tmp_path: Path, minor: int, **extra: Any) -> tuple[int, str, str]:
    out = tmp_path / "image.json"
    tasks = [
        {
            "name": "Choose the image as the role does",
            "ansible.builtin.include_role": {
                "name": "loadwise_metrics_server",
                "tasks_from": "image",
            },
            "vars": {"loadwise_preflight_minor": str(minor), **extra},
        },
        {
            "name": "Record it",
            "ansible.builtin.copy": {
                "content": "{{ loadwise_metrics_server_effective_image | to_json }}",
                "dest": str(out),
                "mode": "0600",
            },
        },
    ]
    proc = _play(tmp_path, tasks)
    return proc.returncode, json.loads(out.read_text()) if out.exists() else "", proc.stdout


@pytest.mark.parametrize(
    ("minor", "version"),
    [
        (25, "v0.6.4"),
        (26, "v0.6.4"),
        (27, "v0.7.2"),
        (30, "v0.7.2"),
        (31, "v0.8.0"),
        (33, "v0.8.0"),
        (34, "v0.9.0"),
        (36, "v0.9.0"),
    ],  # fmt: skip
)
def test_metrics_server_release_follows_the_kubernetes_minor(
    tmp_path: Path, minor: int, version: str
) -> None:
    rc, image, out = _metrics_server_image(tmp_path, minor)
    assert rc == 0, out
    assert image == f"registry.k8s.io/metrics-server/metrics-server:{version}"


def test_metrics_server_image_given_by_the_operator_wins(tmp_path: Path) -> None:
    mirror = "registry.lan/metrics-server@sha256:" + "a" * 64
    rc, image, out = _metrics_server_image(tmp_path, 36, loadwise_metrics_server_image=mirror)
    assert rc == 0, out
    assert image == mirror


def test_metrics_server_refuses_a_minor_no_release_supports(tmp_path: Path) -> None:
    rc, image, out = _metrics_server_image(tmp_path, 24)
    assert rc == 2 and image == ""
    assert (
        "No metrics-server release in loadwise_metrics_server_versions supports Kubernetes 1.24"
        in out
    )
    assert "loadwise_metrics_server_image" in out


def _load_watcher(tmp_path: Path, **variables: Any) -> subprocess.CompletedProcess[str]:
    tasks = [
        {
            "name": "Include load-watcher as site.yml does",
            "ansible.builtin.include_role": {"name": "loadwise_load_watcher"},
            "vars": {"loadwise_cluster_objects": False, **variables},
        }
    ]
    return _play(tmp_path, tasks)


def test_load_watcher_refuses_datadog_which_v0_2_4_lacks(tmp_path: Path) -> None:
    proc = _load_watcher(tmp_path, loadwise_load_watcher_provider="Datadog")
    assert proc.returncode == 2, proc.stdout
    assert "loadwise_load_watcher_provider" in proc.stdout and "Datadog" in proc.stdout
    assert "KubernetesMetricsServer, Prometheus, SignalFx" in proc.stdout


@pytest.mark.parametrize("provider", ["KubernetesMetricsServer", "Prometheus", "SignalFx"])
def test_load_watcher_accepts_the_providers_v0_2_4_has(tmp_path: Path, provider: str) -> None:
    proc = _load_watcher(tmp_path, loadwise_load_watcher_provider=provider)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_default_install_pulls_no_load_watcher_image(tmp_path: Path) -> None:
    """Off by default: the extender reads metrics-server itself; nothing of load-watcher's runs.
    The role only looks for what an earlier run left (one read of the cluster, one stat on the
    node): in a cluster without it nothing is applied or deleted."""
    other = _obj("ConfigMap", "coredns")
    left = _with_api(
        tmp_path,
        "loadwise_load_watcher",
        [other],
        loadwise_load_watcher_service="loadwise-test-absent-unit",
    )
    assert left == [other]
    defaults = yaml.safe_load((ROOT / "roles/loadwise_extender/defaults/main.yml").read_text())
    assert defaults["loadwise_extender_source"] == "metrics-server"


# -- one registry for every default image, digests ---------------------------------------------

DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_metrics_server_image_comes_from_the_one_registry(tmp_path: Path) -> None:
    rc, image, out = _metrics_server_image(
        tmp_path, 31, loadwise_image_registry="mirror.lan:5000/k8s/"
    )
    assert rc == 0, out
    assert image == "mirror.lan:5000/k8s/metrics-server/metrics-server:v0.8.0"


def test_metrics_server_table_entry_may_carry_a_digest(tmp_path: Path) -> None:
    rc, image, out = _metrics_server_image(
        tmp_path,
        31,
        loadwise_image_registry="mirror.lan",
        loadwise_metrics_server_versions={"31": f"v0.8.0@{DIGEST}"},
    )
    assert rc == 0, out
    assert image == f"mirror.lan/metrics-server/metrics-server:v0.8.0@{DIGEST}"


def _render(tmp_path: Path, role: str, template: str, **variables: Any) -> list[dict[str, Any]]:
    """The role's manifest template rendered with the roles' defaults and `variables`."""
    out = tmp_path / "rendered.yaml"
    play = {
        "name": "Render",
        "hosts": "localhost",
        "gather_facts": False,
        "vars_files": [
            str(ROOT / "roles/loadwise/defaults/main.yml"),
            str(ROOT / f"roles/{role}/defaults/main.yml"),
        ],
        "tasks": [
            {
                "name": "The minor preflight found",
                "ansible.builtin.set_fact": {"loadwise_preflight_minor": "34"},
            },
            {
                "name": "Render it",
                "ansible.builtin.copy": {
                    "content": "{{ lookup('ansible.builtin.template', '"
                    + str(ROOT / f"roles/{role}/templates/{template}")
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


def _images(docs: list[dict[str, Any]]) -> list[str]:
    return [
        c["image"]
        for d in docs
        if d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
    ]


@pytest.mark.parametrize(
    ("variables", "image"),
    [
        ({}, "registry.k8s.io/descheduler/descheduler:v0.34.0"),
        (
            {"loadwise_image_registry": "harbor.lan/proxy-k8s"},
            "harbor.lan/proxy-k8s/descheduler/descheduler:v0.34.0",
        ),
        (
            {
                "loadwise_image_registry": "harbor.lan",
                "loadwise_descheduler_versions": {"34": f"v0.34.0@{DIGEST}"},
            },
            f"harbor.lan/descheduler/descheduler:v0.34.0@{DIGEST}",
        ),
        (
            {
                "loadwise_image_registry": "harbor.lan",
                "loadwise_descheduler_image": f"other.lan/descheduler@{DIGEST}",
            },
            f"other.lan/descheduler@{DIGEST}",
        ),
    ],
)
def test_descheduler_manifest_takes_the_registry_and_digests(
    tmp_path: Path, variables: dict[str, Any], image: str
) -> None:
    docs = _render(tmp_path, "loadwise_descheduler", "descheduler.yaml.j2", **variables)
    assert _images(docs) == [image]


def test_metrics_server_manifest_carries_the_chosen_image(tmp_path: Path) -> None:
    docs = _render(
        tmp_path,
        "loadwise_metrics_server",
        "metrics-server.yaml.j2",
        loadwise_metrics_server_effective_image=f"mirror.lan/metrics-server/metrics-server:v0.8.0@{DIGEST}",
    )
    assert _images(docs) == [f"mirror.lan/metrics-server/metrics-server:v0.8.0@{DIGEST}"]


# -- *_enabled false removes what an earlier run installed --------------------------------------


def _with_api(tmp_path: Path, role: str, objects: list[dict[str, Any]], **variables: Any) -> Any:
    """Include `role` as site.yml does, against tests/ansible/fake_kubernetes_core.py holding
    `objects`; the objects left afterwards."""
    from tests.ansible.fake_kubernetes_core import environment

    state = tmp_path / "api.json"
    state.write_text(json.dumps({"objects": objects}))
    play = {
        "name": "Under test",
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [
            {
                "name": "What preflight found",
                "ansible.builtin.set_fact": {"loadwise_preflight_minor": "34",
                                             "loadwise_preflight_detected_flavour": "kubeadm"},
            },
            {
                "name": "Include the role",
                "ansible.builtin.include_role": {"name": role},
                "vars": {"loadwise_cluster_objects": True, **variables},
            },
        ],
    }  # fmt: skip
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([play], sort_keys=False))
    base = {"PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = ansible_playbook(playbook, env=environment(tmp_path, state, base))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(state.read_text())["objects"]


OURS = {"app.kubernetes.io/managed-by": "loadwise-ansible"}


def _obj(kind: str, name: str, namespace: str = "kube-system", **labels: str) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": namespace, "labels": labels}}


def test_descheduler_disabled_removes_the_one_an_earlier_run_installed(tmp_path: Path) -> None:
    other = _obj("Deployment", "coredns")
    objects = [
        _obj("ServiceAccount", "loadwise-descheduler", **OURS),
        _obj("ConfigMap", "loadwise-descheduler-policy", **OURS),
        _obj("Deployment", "loadwise-descheduler", **OURS),
        other,
    ]
    left = _with_api(tmp_path, "loadwise_descheduler", objects, loadwise_descheduler_enabled=False)
    assert left == [other]


def test_metrics_server_disabled_removes_only_a_loadwise_installed_one(tmp_path: Path) -> None:
    ours = [
        {**_obj("APIService", "v1beta1.metrics.k8s.io", namespace="", **OURS)},
        _obj("Deployment", "metrics-server", **OURS),
    ]
    left = _with_api(
        tmp_path, "loadwise_metrics_server", ours, loadwise_metrics_server_enabled=False
    )
    assert [o["metadata"]["name"] for o in left] == []
    # the operator's own (k3s's bundled one, unlabelled) is left alone
    theirs = [
        _obj("APIService", "v1beta1.metrics.k8s.io", namespace=""),
        _obj("Deployment", "metrics-server"),
    ]
    left = _with_api(
        tmp_path, "loadwise_metrics_server", theirs, loadwise_metrics_server_enabled=False
    )
    assert left == theirs


def test_load_watcher_disabled_removes_its_cluster_objects_and_nothing_else(
    tmp_path: Path,
) -> None:
    other = _obj("ServiceAccount", "load-watcher", namespace="monitoring")
    objects = [
        _obj("ServiceAccount", "load-watcher", **OURS),
        _obj("Deployment", "load-watcher", **OURS),
        _obj("Service", "load-watcher", **OURS),
        other,
    ]
    left = _with_api(
        tmp_path,
        "loadwise_load_watcher",
        objects,
        loadwise_load_watcher_enabled=False,
        loadwise_load_watcher_prefix=str(tmp_path / "opt-load-watcher"),
        loadwise_load_watcher_service="loadwise-test-absent-unit",
    )
    assert left == [other]
