"""The installer on the real kubeadm node (lab/realnodes.py) where an operator meets its edges:
metrics-server on kubelets that serve self-signed certificates, as kubeadm's kubelets do
unless serverTLSBootstrap is on. (What its output shows at -vvv is checked on the first
site.yml run of tests/lab/test_real_site.py, which runs at -vvv; tests/lab/leaks.py.)

The cluster is the shared real-node cluster (tests/lab/conftest.py); each test starts from it
with no loadwise (real_without_loadwise, rollback.yml when an earlier module left some) and
leaves it so, by rollback.yml, proven.

Marked `lab`, in the xdist group "realnodes" with the other real-node modules. Alone:
`flock /tmp/loadwise-lab.lock .venv/bin/python -m pytest tests/lab/test_real_installer.py
-n0`.
"""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lab import realnodes
from tests.lab.conftest import LOADWISE_ON_NODE
from tests.lab.e2e import cluster_objects

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("realnodes")]

CP = realnodes.CONTROL_PLANE
METRICS_API = "v1beta1.metrics.k8s.io"


def _rolled_back(real_host, real_kube) -> None:
    run = real_host.playbook("playbooks/rollback.yml")
    assert run.rc == 0, run.tail()
    assert real_host.sh(LOADWISE_ON_NODE).strip() == ""
    assert cluster_objects(real_kube) == []


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
