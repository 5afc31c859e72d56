"""The lab: a real Kubernetes control plane on 127.0.0.1, built from Go modules, with kwok
fake nodes whose load is declared, podman control-plane hosts the playbooks manage, and
the workloads placed on it. `python -m lab up|down|status|scheduler|kubeconfig|build|demo`
(scripts/lab); docs/lab.md.

Not part of the loadwise wheel: it drives the product (`make demo`) and its end-to-end
tests (tests/lab/), which import it from here.
"""

from lab.cluster import Lab, session
from lab.components import BUILD, COMPONENTS, PORTS, build_binaries
from lab.fakenodes import DEFAULT_NODES, USAGE_CPU, USAGE_MEMORY, NodeSpec, parse_quantity
from lab.hosts import EXTENDER_URL, ControlPlaneHost, PlaybookRun, destroy, node_image
from lab.processes import HOST, LabError, port_open
from lab.workloads import (
    delete,
    deploy,
    http_get,
    place,
    placements,
    scored_events,
    wait_ready,
)

__all__ = [
    "BUILD",
    "COMPONENTS",
    "DEFAULT_NODES",
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
