"""site.yml and rollback.yml run the way kubespray and k3s-ansible operators run them.

Each run is ansible-playbook on this machine over the local connection, as in
test_preflight_playbook.py (whose k3s stand-in and inventories these reuse), limited to what
changes nothing here: `--tags loadwise_preflight` runs only the always-tagged parts (host
selection, the cluster API, preflight), `--check` where a role's own tasks must run.

- `--limit cp-1` (a control-plane host) runs on it; a limit without control-plane hosts fails
  naming the form that works (it used to match no host and end rc=0).
- The kubeconfig the cluster tasks and the identity check use is the one the Kubernetes
  client would pick ($KUBECONFIG included), settled once and printed once.
- kubespray's documented route: its own --config calling loadwise's extender, with
  --skip-tags loadwise_scheduler_config.
- Smaller checks an operator meets: the node Python's refusal, load-watcher's service mode
  without cluster objects, the scheduler's HTTP timeout read as Go reads it, and the
  documentation sections the messages point at.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.fake_kubernetes_core import environment
from tests.ansible.plugins import filter_module
from tests.ansible.test_filter_plugin import MANIFEST
from tests.ansible.test_preflight_playbook import (
    INVENTORIES,
    REPORT,
    _cert,
    _node_vars,
    _reported_hosts,
    _run,
    k3s_scheduler_kubeconfig,
)

ROOT = Path(__file__).resolve().parents[2]
API_LINE = "Cluster objects and the identity check use the kubeconfig"


def _extra(tmp_path: Path, name: str, values: dict[str, Any]) -> list[str]:
    path = tmp_path / f"{name}.yml"
    path.write_text(yaml.safe_dump(values))
    return ["-e", f"@{path}"]


# -- --limit ---------------------------------------------------------------------------------


@pytest.mark.parametrize("playbook", ["site.yml", "rollback.yml"])
def test_limit_to_a_control_plane_host_runs_on_it(tmp_path: Path, playbook: str) -> None:
    run = _run(tmp_path, INVENTORIES / "plain.ini", "--limit", "cp-1", playbook=playbook)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    if playbook == "site.yml":
        assert _reported_hosts(run.stdout) == ["cp-1"], out
    else:  # rollback's detection (--tags loadwise_preflight in _run only for site.yml)
        assert "TASK [loadwise_preflight : Preflight | Record the flavour]" in out, out
        assert "ok: [cp-1]" in out
    assert "worker-1" not in out


@pytest.mark.parametrize("playbook", ["site.yml", "rollback.yml"])
def test_a_limit_without_control_plane_hosts_fails_naming_the_form_that_works(
    tmp_path: Path, playbook: str
) -> None:
    run = _run(tmp_path, INVENTORIES / "plain.ini", "--limit", "worker-1", playbook=playbook)
    said = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0, said
    assert "--limit worker-1 leaves none of the control-plane hosts (cp-1)" in said, said
    assert "e.g. --limit cp-1" in said
    assert "PLAY [Preflight]" not in run.stdout and "PLAY [Detect the cluster]" not in run.stdout


# -- the cluster API -------------------------------------------------------------------------


def _kubeconfig(path: Path, ca: str, server: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": server,
                            "certificate-authority-data": base64.b64encode(ca.encode()).decode(),
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": "x"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    return path


def _two_clusters(tmp_path: Path, kubeconfig_env: str | None) -> tuple[Any, Path, Path, Path]:
    """Cluster A in ~/.kube/config, cluster B (the nodes' cluster) in its own file;
    $KUBECONFIG as given. The node's scheduler kubeconfig trusts B's CA. Preflight and the
    metrics-server role (k3s: it reads the APIService with kubernetes.core) run; the API is
    tests/ansible/fake_kubernetes_core.py, which records the kubeconfig every call got."""
    home = tmp_path / "home"
    ca_b = _cert("cluster-b-ca")
    a = _kubeconfig(home / ".kube" / "config", _cert("cluster-a-ca"), "https://10.0.0.1:6443")
    b = _kubeconfig(tmp_path / "b" / "k3s.yaml", ca_b, "https://10.0.0.2:6443")
    node_kubeconfig = k3s_scheduler_kubeconfig(tmp_path, ca_b)
    api = tmp_path / "api.json"
    api.write_text(
        json.dumps(
            {
                "objects": [
                    {
                        "apiVersion": "apiregistration.k8s.io/v1",
                        "kind": "APIService",
                        "metadata": {"name": "v1beta1.metrics.k8s.io"},
                    }
                ]
            }
        )
    )
    calls = tmp_path / "calls.jsonl"
    env = {**environment(tmp_path, api), "HOME": str(home), "LOADWISE_FAKE_API_CALLS": str(calls)}
    for name in ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_CONTEXT", "KUBECONFIG"):
        env.pop(name, None)
    if kubeconfig_env is not None:
        env["KUBECONFIG"] = kubeconfig_env
    values = yaml.safe_load(_node_vars(tmp_path).read_text())
    values.update(
        {
            "loadwise_cluster_objects": True,
            "loadwise_extender_source": "metrics-server",
            "loadwise_preflight_scheduler_kubeconfigs": {
                "k3s": str(node_kubeconfig),
                "kubeadm": "/nonexistent",
            },
        }
    )
    from tests.ansible.playbook import ansible_playbook

    run = ansible_playbook(
        ROOT / "playbooks" / "site.yml",
        "--tags",
        "loadwise_preflight,loadwise_metrics_server",
        *_extra(tmp_path, "api-vars", values),
        inventory=INVENTORIES / "plain.ini",
        env=env,
        timeout=300,
    )
    return run, a, b, calls


def _calls(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("listed", [False, True], ids=["one-file", "a-list"])
def test_kubeconfig_env_is_used_for_the_identity_check_and_every_cluster_task(
    tmp_path: Path, listed: bool
) -> None:
    """KUBECONFIG names cluster B, ~/.kube/config is cluster A: both the identity check and
    the kubernetes.core tasks use B, as kubectl would. A list takes its first existing file."""
    b_path = tmp_path / "b" / "k3s.yaml"
    env = (
        f"{tmp_path / 'missing.yaml'}:{b_path}:{tmp_path / 'home/.kube/config'}"
        if listed
        else (str(b_path))
    )
    run, _, b, calls = _two_clusters(tmp_path, env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert _reported_hosts(run.stdout) == ["cp-1"], out
    said = " ".join(out.split())
    assert f"{API_LINE} {b} (from $KUBECONFIG" in said, said
    assert said.count(API_LINE) == 1  # said once, at the start
    recorded = _calls(calls)
    assert recorded, "no kubernetes.core task ran"
    assert {c["kubeconfig"] for c in recorded} == {str(b)}, recorded


def test_without_kubeconfig_env_the_default_file_is_checked_and_refused(tmp_path: Path) -> None:
    """The control: no $KUBECONFIG, so ~/.kube/config (cluster A) is the controller's API,
    and the identity check refuses it before any cluster task runs."""
    run, a, _, calls = _two_clusters(tmp_path, None)
    said = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0, said
    assert "cp-1 is not in the cluster the controller would change" in said, said
    assert f"{a} (the default, no variable set)" in said, said
    assert _calls(calls) == []


# -- kubespray -------------------------------------------------------------------------------


KUBESPRAY_EXTENDER = {
    "urlPrefix": "http://127.0.0.1:8888/scheduler",
    "filterVerb": "filter",
    "prioritizeVerb": "prioritize",
    "weight": 10,
    "enableHTTPS": False,
    "httpTimeout": "5s",
    "nodeCacheCapable": True,
    "ignorable": True,
}


def _said(run: Any) -> str:
    """Everything printed, whitespace folded, YAML's doubled quote ('') read back as one."""
    return " ".join((run.stdout + run.stderr).split()).replace("''", "'")


def _kubespray_node(tmp_path: Path, extenders: list[dict[str, Any]]) -> list[str]:
    """This machine as a kubespray control-plane node: kubeadm's manifest passing kubespray's
    --config, that file as kubespray renders it from kube_scheduler_extenders."""
    config = tmp_path / "kubescheduler-config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf"},
                "extenders": extenders,
            }
        )
    )
    pod = yaml.safe_load(MANIFEST.read_text().replace("@VERSION@", "v1.31.2"))
    pod["spec"]["containers"][0]["command"].append(f"--config={config}")
    manifest = tmp_path / "kube-scheduler.yaml"
    manifest.write_text(yaml.safe_dump(pod))
    scheduler_conf = tmp_path / "scheduler.conf"
    scheduler_conf.write_text("# kubeadm's scheduler kubeconfig\n")
    return _extra(
        tmp_path,
        "kubespray",
        {
            "loadwise_preflight_k3s_binary": str(tmp_path / "no-k3s"),
            "loadwise_preflight_kubeadm_manifest": str(manifest),
            "loadwise_scheduler_config_kubeadm_manifest": str(manifest),
            "loadwise_preflight_scheduler_kubeconfigs": {
                "k3s": "/nonexistent",
                "kubeadm": str(scheduler_conf),
            },
            # loadwise's extender as kubespray's own config calls it (plain HTTP)
            "loadwise_extender_tls_enabled": False,
        },
    )


def test_kubespray_config_calling_the_extender_is_accepted_with_skip_tags(tmp_path: Path) -> None:
    """The documented route: kube_scheduler_extenders, then --skip-tags
    loadwise_scheduler_config. Preflight passes and says the scheduler calls the extender."""
    extra = _kubespray_node(tmp_path, [KUBESPRAY_EXTENDER])
    run = _run(
        tmp_path, INVENTORIES / "kubespray.ini", *extra, "--skip-tags", "loadwise_scheduler_config"
    )
    said = _said(run)
    assert run.returncode == 0, said
    assert _reported_hosts(run.stdout) == ["node1"], said
    assert (
        "node1: the kube-scheduler calls loadwise's extender through its own configuration" in said
    )


def test_kubespray_config_calling_the_extender_is_refused_when_the_run_would_replace_it(
    tmp_path: Path,
) -> None:
    extra = _kubespray_node(tmp_path, [KUBESPRAY_EXTENDER])
    run = _run(tmp_path, INVENTORIES / "kubespray.ini", *extra)
    said = _said(run)
    assert run.returncode != 0, said
    assert "already calls loadwise's extender" in said, said
    assert "Run with --skip-tags loadwise_scheduler_config" in said
    assert REPORT not in run.stdout


def test_kubespray_config_without_the_extender_warns_under_skip_tags(tmp_path: Path) -> None:
    extra = _kubespray_node(tmp_path, [])
    run = _run(
        tmp_path, INVENTORIES / "kubespray.ini", *extra, "--skip-tags", "loadwise_scheduler_config"
    )
    said = _said(run)
    assert run.returncode == 0, said
    assert "WARNING: nothing makes the kube-scheduler call loadwise's extender" in said, said
    assert "kube_scheduler_extenders" in said


def test_every_docs_section_a_message_names_exists() -> None:
    """Messages and comments name sections of docs/ansible.md ("docs/ansible.md, "X""): each
    is a heading there (or a bold paragraph title, as the scheduler change's bullets are)."""
    docs = (ROOT / "docs" / "ansible.md").read_text()
    titles = set(re.findall(r"(?m)^#+\s+(.+?)\s*$", docs)) | set(
        re.findall(r"\*\*(.+?)\.?\*\*", docs)
    )
    named: set[str] = set()
    for path in [*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("playbooks/*.yml"),
                 *ROOT.glob("roles/*/defaults/main.yml")]:  # fmt: skip
        text = " ".join(path.read_text().replace("#", " ").split())
        named |= set(re.findall(r'docs/ansible\.md,? "([^"]+)"', text))
    assert "A scheduler config of your own" in named
    missing = {n for n in named if not any(n.lower() in t.lower() for t in titles)}
    assert not missing, f"named but not in docs/ansible.md: {sorted(missing)}"


# -- smaller points ----------------------------------------------------------------------------


def _python(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "node-python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _reporting(tmp_path: Path, version: tuple[int, int, int]) -> Path:
    """This Python, made to report `version` as that interpreter would."""
    return _python(
        tmp_path,
        f"exec {sys.executable} -c '"
        f'import sys; sys.version_info = ({", ".join(map(str, version))}, "final", 0); '
        "code = sys.argv[1]; "
        'sys.argv = sys.argv[:1]; exec(compile(code, "<c>", "exec"))\' "$2"',
    )


@pytest.mark.parametrize(
    ("interpreter", "found"),
    [
        ("missing", "found: no interpreter it could run at that path"),
        # Debian 11's python3
        ("3.9", "found: Python 3.9."),
    ],
)
def test_the_node_python_refusal_says_what_it_found(
    tmp_path: Path, interpreter: str, found: str
) -> None:
    if interpreter == "missing":
        python = tmp_path / "no-such-python3"
    else:
        python = _reporting(tmp_path, (3, 9, 2))
    run = _run(tmp_path, INVENTORIES / "plain.ini", "-e", f"loadwise_node_python={python}")
    said = " ".join(run.stdout.split())
    assert run.returncode != 0, said
    assert found in said, said
    assert "got: ." not in said
    assert "must be Python 3.10 or newer" in said and "set loadwise_node_python to it" in said


def test_ubuntu_2204s_python_310_is_accepted(tmp_path: Path) -> None:
    """Ubuntu 22.04's python3 (3.10.12) passes the check the 3.9 above fails."""
    python = _reporting(tmp_path, (3, 10, 12))
    run = _run(tmp_path, INVENTORIES / "plain.ini", "-e", f"loadwise_node_python={python}")
    said = " ".join(run.stdout.split())
    assert "Refuse a node without Python 3.10+ and its venv module" in said, said
    assert "must be Python 3.10 or newer" not in said, said


def test_load_watcher_service_mode_without_cluster_objects_needs_a_kubeconfig(
    tmp_path: Path,
) -> None:
    variables = {
        "loadwise_load_watcher_enabled": True,
        "loadwise_load_watcher_mode": "service",
        "loadwise_extender_source": "load-watcher",
    }
    run = _run(tmp_path, INVENTORIES / "plain.ini", *_extra(tmp_path, "lw", variables))
    said = " ".join(run.stdout.split())
    assert run.returncode != 0, said
    assert "set loadwise_load_watcher_kubeconfig to a kubeconfig on the nodes" in said, said


def test_load_watcher_service_mode_without_cluster_objects_is_installed(tmp_path: Path) -> None:
    """With the operator's kubeconfig the role runs (it used to be skipped, leaving the
    extender pointed at a load-watcher that was never installed). --check: nothing changes
    here, the tasks still show what they would do."""
    binaries = tmp_path / "load-watcher-binaries"
    binaries.mkdir()
    variables = {
        "loadwise_load_watcher_enabled": True,
        "loadwise_load_watcher_mode": "service",
        "loadwise_extender_source": "load-watcher",
        "loadwise_load_watcher_kubeconfig": "/etc/loadwise/operator-load-watcher.kubeconfig",
        "loadwise_load_watcher_build": False,
        "loadwise_load_watcher_binary_dir": str(binaries),
        "loadwise_load_watcher_prefix": str(tmp_path / "opt-load-watcher"),
    }
    run = _run(
        tmp_path,
        INVENTORIES / "plain.ini",
        *_extra(tmp_path, "lw", variables),
        "--tags",
        "loadwise_load_watcher",
        "--check",
        playbook="site.yml",
    )
    out = run.stdout + run.stderr
    assert "TASK [loadwise_load_watcher : Load-watcher | Write the hardened systemd unit]" in out, (
        out
    )
    assert not (tmp_path / "opt-load-watcher").exists()


def _duration() -> Any:
    return filter_module("loadwise_duration").loadwise_go_duration_seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        # what Go's time.ParseDuration accepts (go/src/time/time_test.go's parseDurationTests)
        ("5s", 5.0),
        ("1m30s", 90.0),
        ("1.5h", 5400.0),
        ("300ms", 0.3),
        (".5s", 0.5),
        ("1.s", 1.0),
        ("2us", 2e-6),
        ("2\u00b5s", 2e-6),
        ("2\u03bcs", 2e-6),
        ("0", 0.0),
        ("-1s", -1.0),
        # and what it refuses
        ("5", None),
        ("5 seconds", None),
        ("5S", None),
        (".s", None),
        ("1m30", None),
        ("", None),
    ],
)
def test_the_http_timeout_is_read_as_go_reads_it(text: str, seconds: float | None) -> None:
    got = _duration()(text)
    assert got == pytest.approx(seconds) if seconds is not None else got is None


@pytest.mark.parametrize(("timeout", "ok"), [("1m30s", True), ("500ms", True), ("0s", False)])
def test_preflight_takes_the_http_timeout_kube_scheduler_takes(
    tmp_path: Path, timeout: str, ok: bool
) -> None:
    run = _run(
        tmp_path,
        INVENTORIES / "plain.ini",
        *_extra(tmp_path, "timeout", {"loadwise_scheduler_config_http_timeout": timeout}),
    )
    said = " ".join(run.stdout.split())
    assert (run.returncode == 0) == ok, said
    assert ("loadwise_scheduler_config_http_timeout must be a positive Go duration" in said) != ok
