"""The lab: real Kubernetes programs built from their Go modules, to run loadwise against.

Two clusters, each started on this machine alone:
- the loopback control plane (lab/cluster.py): etcd, kube-apiserver, kube-controller-manager,
  metrics-server and load-watcher on 127.0.0.1, kwok fake nodes whose load is declared, and
  podman control-plane hosts the playbooks manage (the k3s flavour's stand-in);
  `python -m lab up|down|status|scheduler|kubeconfig`;
- the real-node cluster (lab/realnodes.py): three podman containers running containerd, the
  kubelet and kube-proxy, joined by kubeadm, where site.yml runs over SSH as on an operator's
  nodes; `python -m lab realnodes up|down|status`.
`python -m lab prepare` builds what either needs, with progress (lab/prepare.py), and
`python -m lab demo` runs the product's demo on the real nodes, else on the loopback lab
(scripts/lab; docs/lab.md).

Not part of the loadwise wheel: it drives the product (`make demo`) and its end-to-end
tests (tests/lab/), which import it from here.
"""

from lab.cluster import Lab, session
from lab.components import BUILD, COMPONENTS, PORTS, build_binaries
from lab.fakenodes import DEFAULT_NODES, USAGE_CPU, USAGE_MEMORY, NodeSpec, parse_quantity
from lab.hosts import (
    EXTENDER_HEALTH_URL,
    EXTENDER_URL,
    ControlPlaneHost,
    PlaybookRun,
    destroy,
    node_image,
)
from lab.processes import HOST, LabError, http_get, port_open
from lab.workloads import (
    delete,
    deploy,
    place,
    placements,
    scored_events,
    wait_ready,
)

__all__ = [
    "BUILD",
    "COMPONENTS",
    "DEFAULT_NODES",
    "EXTENDER_HEALTH_URL",
    "EXTENDER_URL",
    "HOST",
    "PORTS",
    "USAGE_CPU",
    "USAGE_MEMORY",
    "ControlPlaneHost",
    "Lab",
    "LabError",
    "NodeSpec",
    "PlaybookRun",
    "build_binaries",
    "delete",
    "deploy",
    "destroy",
    "http_get",
    "node_image",
    "parse_quantity",
    "place",
    "placements",
    "port_open",
    "scored_events",
    "session",
    "wait_ready",
]
