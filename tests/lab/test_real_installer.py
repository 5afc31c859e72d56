"""The installer on the real kubeadm node (lab/realnodes.py) where an operator meets its edges:
what its output shows at -vvv, and metrics-server on kubelets that serve self-signed
certificates, as kubeadm's kubelets do unless serverTLSBootstrap is on.

The cluster is the shared real-node cluster (tests/lab/conftest.py); each test starts from it
with no loadwise (real_without_loadwise, rollback.yml when an earlier module left some) and
leaves it so, by rollback.yml, proven.

Marked `lab`, in the xdist group "realnodes" with the other real-node modules. Alone:
`flock /tmp/loadwise-realnodes.lock .venv/bin/python -m pytest tests/lab/test_real_installer.py
-n0`.
"""

from __future__ import annotations

import base64
import re

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lab import realnodes
from tests.lab.conftest import LOADWISE_ON_NODE
from tests.lab.e2e import cluster_objects

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("realnodes")]

CP = realnodes.CONTROL_PLANE
METRICS_API = "v1beta1.metrics.k8s.io"
# Files on the node whose keys no run may print: the scheduler's kubeconfig (slurped by
# preflight, the extender and load-watcher roles for its server and CA), the admin's, the
# cluster's own keys, and the extender's TLS keys (when the role made them).
KEY_FILES = (
    "/etc/kubernetes/scheduler.conf /etc/kubernetes/admin.conf "
    "/etc/kubernetes/pki/*.key /etc/loadwise/tls/*.key /etc/loadwise/tls/scheduler/*.key"
)


def _rolled_back(real_host, real_kube) -> None:
    run = real_host.playbook("playbooks/rollback.yml")
    assert run.rc == 0, run.tail()
    assert real_host.sh(LOADWISE_ON_NODE).strip() == ""
    assert cluster_objects(real_kube) == []


def _secrets_on_node(real_host) -> dict[str, str]:
    """name -> the text of each file above that exists, read inside the node."""
    out = real_host.sh(
        f'for f in {KEY_FILES}; do [ -f "$f" ] || continue; '
        'printf "== %s\\n" "$f"; base64 -w0 "$f"; echo; done'
    )
    files: dict[str, str] = {}
    for name, blob in re.findall(r"^== (\S+)\n(\S*)$", out, re.M):
        files[name] = base64.b64decode(blob).decode()
    return files


def _needles(name: str, text: str) -> list[str]:
    """Strings that would show `text` (or its keys) in a run's output: slurp's base64 of the
    whole file, the keys' base64 as a kubeconfig holds them, and their PEM lines."""
    whole = base64.b64encode(text.encode()).decode()
    needles = [whole[len(whole) // 2 : len(whole) // 2 + 48]]
    keys = []
    if name.endswith(".key"):
        keys.append(text)
    else:
        for user in (yaml.safe_load(text) or {}).get("users") or []:
            data = (user.get("user") or {}).get("client-key-data")
            if data:
                needles.append(data[40:100])
                keys.append(base64.b64decode(data).decode())
    for key in keys:
        body = [ln for ln in key.splitlines() if ln and not ln.startswith("-----")]
        needles += [ln for ln in body if len(ln) >= 40][:3]
    return needles


def _tokens(real_kube) -> dict[str, str]:
    """The service-account tokens loadwise's run made (its labelled token Secrets)."""
    core = real_kube.core()
    found = {}
    for secret in core.list_secret_for_all_namespaces(
        label_selector="app.kubernetes.io/part-of=loadwise"
    ).items:
        if secret.type == "kubernetes.io/service-account-token" and (secret.data or {}).get(
            "token"
        ):
            found[secret.metadata.name] = secret.data["token"]
    return found


def test_site_at_vvv_prints_no_key_and_no_token(real_host, real_kube, real_without_loadwise):
    before = _secrets_on_node(real_host)
    assert "/etc/kubernetes/scheduler.conf" in before and "/etc/kubernetes/admin.conf" in before
    run = real_host.playbook("playbooks/site.yml", "-vvv")
    try:
        assert run.rc == 0, run.tail()
        out = run.stdout + run.stderr
        # the tasks that read the credentials ran (and said so, censored)
        assert "Preflight | Read the node's scheduler kubeconfig" in out
        assert "the output has been hidden due to the fact that" in out
        secrets = {**before, **_secrets_on_node(real_host)}
        tokens = _tokens(real_kube)
        assert "loadwise-extender-token" in tokens, tokens
        leaks = [
            f"{name}: {needle[:12]}..."
            for name, text in secrets.items()
            for needle in _needles(name, text)
            if needle in out
        ] + [
            f"Secret {name}"
            for name, data in tokens.items()
            for needle in (data[10:70], base64.b64decode(data).decode()[20:80])
            if needle in out
        ]
        assert not leaks, f"printed at -vvv: {leaks} (log: {real_host.workdir})"
    finally:
        _rolled_back(real_host, real_kube)


def test_metrics_server_on_self_signed_kubelet_certificates(
    real_host, real_kube, real_without_loadwise
):
    """kubeadm's kubelets here serve self-signed certificates (lab/realnodes.py: no
    serverTLSBootstrap); with loadwise_metrics_server_kubelet_insecure_tls false, metrics-server
    cannot verify them. The run fails naming the variable, takes the APIService out again (API
    discovery works), and changes nothing after the add-ons; rollback removes the rest."""
    apireg = client.ApiregistrationV1Api(real_kube.api_client())
    with pytest.raises(ApiException) as none_before:
        apireg.read_api_service(METRICS_API)
    assert none_before.value.status == 404
    try:
        run = real_host.playbook(
            "playbooks/site.yml", extra={"loadwise_metrics_server_kubelet_insecure_tls": False}
        )
        assert run.rc != 0, run.tail()
        said = run.said
        assert "loadwise_metrics_server_kubelet_insecure_tls: true" in said, run.tail()
        assert "x509" in said, run.tail()
        assert f"The APIService {METRICS_API} was removed again" in said, run.tail()
        assert "still not rolled out" not in said, run.tail()  # from the log, not the timeout
        with pytest.raises(ApiException) as gone:
            apireg.read_api_service(METRICS_API)
        assert gone.value.status == 404
        # discovery of every API group answers (an unavailable aggregated API fails it)
        groups = client.ApisApi(real_kube.api_client()).get_api_versions()
        assert "metrics.k8s.io" not in {g.name for g in groups.groups}
        assert "PLAY [Extender on every control-plane node]" not in run.stdout
        cmdlines = real_host.scheduler_cmdlines()
        assert len(cmdlines) == 1 and "loadwise" not in cmdlines[0], cmdlines
    finally:
        _rolled_back(real_host, real_kube)
    apps = client.AppsV1Api(real_kube.api_client())
    with pytest.raises(ApiException) as deployment:
        apps.read_namespaced_deployment("metrics-server", "kube-system")
    assert deployment.value.status == 404
