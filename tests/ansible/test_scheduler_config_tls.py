"""The extender entry roles/loadwise_scheduler_config writes, with and without TLS, checked by
the REAL kube-scheduler (built from its Go module by lab/build).

``tasks/extender_entry.yml`` runs as main.yml includes it and the KubeSchedulerConfiguration is
rendered from the role's template, by ansible-playbook over the local connection, with the
scheduler's certificate files in a directory of the test's (made with the lab's PKI, the
openssl command line). ``kube-scheduler --config FILE --write-config-to /dev/null`` then
decodes the file strictly (an unknown field name is an error) and builds the extender's HTTP
client from it, reading caFile, certFile and keyFile (k8s.io/kubernetes
pkg/scheduler/extender.go makeTransport), with no API server.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import lab
from lab.pki import make_ca, make_cert
from tests.ansible.playbook import ansible_playbook

ROOT = Path(__file__).resolve().parents[2]

PLAY = """\
- name: Render the scheduler configuration as node.yml does
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Include the extender entry as main.yml does
      ansible.builtin.include_role:
        name: loadwise_scheduler_config
        tasks_from: extender_entry
        public: true
    - name: Render the KubeSchedulerConfiguration
      ansible.builtin.copy:
        content: "{{ lookup('ansible.builtin.template', _template) }}"
        dest: "%(dest)s"
        mode: "0600"
      vars:
        _template: "%(templates)s/kube-scheduler-config.yaml.j2"
"""


def _unavailable(reason: str) -> None:
    """Skip locally; under CI (CI=true) a missing prerequisite is a failure, never a skip."""
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def kube_scheduler() -> str:
    proc = subprocess.run(
        [str(lab.BUILD), "kube-scheduler"], capture_output=True, text=True, timeout=3600
    )
    if proc.returncode != 0:
        _unavailable(f"lab/build kube-scheduler failed: {proc.stderr[-2000:]}")
    return next(
        ln.split("=", 1)[1] for ln in proc.stdout.splitlines() if ln.startswith("kube-scheduler=")
    )


def _certificates(tls: Path, seed: str = "ca") -> None:
    """What the loadwise_extender role leaves in <tls>/scheduler, made with openssl."""
    scheduler = tls / "scheduler"
    scheduler.mkdir(parents=True, exist_ok=True)
    make_ca(scheduler, "ca", f"loadwise extender CA ({seed})")
    make_cert(scheduler, "client", "ca", "/CN=kube-scheduler")


def _render(tmp_path: Path, **variables: Any) -> tuple[subprocess.CompletedProcess[str], Path]:
    kubeconfig = tmp_path / "scheduler.conf"
    fixture = (ROOT / "lab/nodes/scheduler.kubeconfig").read_text()
    # nothing listens on port 1: the scheduler needs none to load its configuration
    kubeconfig.write_text(fixture.replace("@SERVER@", "https://127.0.0.1:1"))
    dest = tmp_path / "loadwise-scheduler-config.yaml"
    dest.unlink(missing_ok=True)
    playbook = tmp_path / "render.yml"
    templates = ROOT / "roles/loadwise_scheduler_config/templates"
    playbook.write_text(PLAY % {"templates": templates, "dest": dest})
    settings = {
        "loadwise_preflight_scheduler_api_version": "kubescheduler.config.k8s.io/v1",
        "loadwise_preflight_detected_flavour": "kubeadm",
        "loadwise_scheduler_config_kubeadm_kubeconfig": str(kubeconfig),
        "loadwise_extender_tls_dir": str(tmp_path / "tls"),
        **variables,
    }
    extra = tmp_path / "vars.yml"
    extra.write_text(yaml.safe_dump(settings))
    env = {**os.environ, "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp")}
    run = ansible_playbook(playbook, "-e", f"@{extra}", env=env, timeout=300)
    return run, dest


def _validate(kube_scheduler: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        # no serving port: the lab's k3s stand-in (host network, tests/lab/test_e2e_site.py)
        # may hold 10259 on another worker at the same time
        [
            kube_scheduler,
            "--config",
            str(config),
            "--write-config-to",
            os.devnull,
            "--secure-port=0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_with_tls_the_scheduler_is_given_https_the_ca_and_its_certificate(
    tmp_path: Path, kube_scheduler: str
) -> None:
    _certificates(tmp_path / "tls")
    run, config = _render(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    extender = yaml.safe_load(config.read_text())["extenders"][0]
    scheduler = tmp_path / "tls" / "scheduler"
    assert extender["urlPrefix"] == "https://127.0.0.1:8888/scheduler"
    assert extender["enableHTTPS"] is True
    assert extender["tlsConfig"] == {
        "caFile": str(scheduler / "ca.crt"),
        "certFile": str(scheduler / "client.crt"),
        "keyFile": str(scheduler / "client.key"),
    }
    checked = _validate(kube_scheduler, config)
    assert checked.returncode == 0, checked.stderr[-3000:]

    # the real scheduler reads those files: without them it does not start
    (scheduler / "client.key").rename(scheduler / "moved.key")
    refused = _validate(kube_scheduler, config)
    assert refused.returncode != 0
    assert str(scheduler / "client.key") in refused.stderr, refused.stderr[-3000:]


def test_a_renewed_certificate_changes_the_configuration_so_the_scheduler_restarts(
    tmp_path: Path,
) -> None:
    """kube-scheduler reads the files only when it starts: the configuration carries their
    checksum, so new ones are a configuration change (a new manifest annotation on kubeadm,
    a restart on k3s). Only that comment line differs."""
    _certificates(tmp_path / "tls", "first")
    first, config = _render(tmp_path)
    assert first.returncode == 0, first.stdout
    before = config.read_text()
    _certificates(tmp_path / "tls", "renewed")
    again, config = _render(tmp_path)
    assert again.returncode == 0, again.stdout
    after = config.read_text()
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    assert len(changed) == 1 and changed[0][0].startswith("# ones restart it: "), changed


def test_missing_certificates_stop_the_run_before_anything_is_written(tmp_path: Path) -> None:
    run, config = _render(tmp_path)
    assert run.returncode != 0
    said = " ".join(run.stdout.split())
    assert "The scheduler's client certificate is missing" in said, run.stdout
    assert f"{tmp_path}/tls/scheduler/client.crt" in said
    assert not config.exists()


def test_plain_http_when_tls_is_off(tmp_path: Path, kube_scheduler: str) -> None:
    run, config = _render(tmp_path, loadwise_extender_tls_enabled=False)
    assert run.returncode == 0, run.stdout + run.stderr
    text = config.read_text()
    extender = yaml.safe_load(text)["extenders"][0]
    assert extender["urlPrefix"] == "http://127.0.0.1:8888/scheduler"
    assert extender["enableHTTPS"] is False and "tlsConfig" not in extender
    assert "sha256" not in text
    checked = _validate(kube_scheduler, config)
    assert checked.returncode == 0, checked.stderr[-3000:]


def test_prioritize_only_has_no_filter_verb_and_the_scheduler_takes_it(
    tmp_path: Path, kube_scheduler: str
) -> None:
    """loadwise_filter_enabled false: the entry names prioritize alone, which kube-scheduler
    reads as an extender it never asks to filter (HTTPExtender.IsFilter: a verb is set)."""
    run, config = _render(
        tmp_path, loadwise_extender_tls_enabled=False, loadwise_filter_enabled=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    extender = yaml.safe_load(config.read_text())["extenders"][0]
    assert "filterVerb" not in extender and extender["prioritizeVerb"] == "prioritize"
    checked = _validate(kube_scheduler, config)
    assert checked.returncode == 0, checked.stderr[-3000:]
    run, config = _render(tmp_path, loadwise_extender_tls_enabled=False)
    assert yaml.safe_load(config.read_text())["extenders"][0]["filterVerb"] == "filter"
