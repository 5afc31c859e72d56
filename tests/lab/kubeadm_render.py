"""Render the kube-scheduler static pod with the real kubeadm (lab/build kubeadm).

`kubeadm init phase control-plane scheduler --config <file> --dry-run` writes the manifest
into the directory named by KUBEADM_INIT_DRYRUN_DIR (kubeadm's cmd/kubeadm/app/constants
GetDryRunDir) and changes nothing on the machine: no cluster, no root files.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from lab.components import build_binaries

# What kubeadm v1.36 writes into kube-system/kubeadm-config (kubeadm init defaults, v1beta4).
CLUSTER_CONFIGURATION = """\
apiServer: {}
apiVersion: kubeadm.k8s.io/v1beta4
caCertificateValidityPeriod: 87600h0m0s
certificateValidityPeriod: 8760h0m0s
certificatesDir: /etc/kubernetes/pki
clusterName: kubernetes
controllerManager: {}
dns: {}
encryptionAlgorithm: RSA-2048
etcd:
  local:
    dataDir: /var/lib/etcd
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: v1.36.4
networking:
  dnsDomain: cluster.local
  serviceSubnet: 10.96.0.0/12
proxy: {}
scheduler: {}
"""


def kubeadm() -> str:
    return build_binaries(["kubeadm"])["kubeadm"]


def render_scheduler(cluster_configuration: str) -> dict[str, Any]:
    """The kube-scheduler.yaml kubeadm writes for this ClusterConfiguration text."""
    with tempfile.TemporaryDirectory(prefix="loadwise-kubeadm-") as tmp:
        config = Path(tmp, "cluster-configuration.yaml")
        config.write_text(cluster_configuration)
        out = Path(tmp, "out")
        out.mkdir()
        run = subprocess.run(
            [
                kubeadm(),
                "init",
                "phase",
                "control-plane",
                "scheduler",
                "--config",
                str(config),
                "--dry-run",
            ],
            env={**os.environ, "KUBEADM_INIT_DRYRUN_DIR": str(out)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        loaded: dict[str, Any] = yaml.safe_load((out / "kube-scheduler.yaml").read_text())
        return loaded


def scheduler_container(pod: dict[str, Any]) -> dict[str, Any]:
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "kube-scheduler"]
    return container
