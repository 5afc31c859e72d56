"""Prometheus for real: a Prometheus server built from its Go module
(lab/prometheus.py) scrapes the real kubelets of the real-node cluster (lab/realnodes.py), and
the extender that site.yml installs on the control-plane node runs its Prometheus source's
default queries (`instance:node_cpu:ratio`, `instance:node_memory_utilisation:ratio`, nodes by
`instance`) against the series it recorded. That last part runs in
tests/lab/test_real_site.py's second-scheduler test (one site.yml run for both claims, on the
same Prometheus: the session's `real_prometheus`, tests/lab/conftest.py).

Prometheus runs on this machine, listening only on the podman bridge's gateway address; the
extender on the node reaches it there. Its recording rules divide each node's own cgroup
usage (the kubelet's /metrics/resource) by the node's capacity (/metrics/cadvisor), so real
load on one worker (the lab's burner) shows in that node's CPU ratio alone.

Marked `lab`, in the xdist group "realnodes" with the other real-node tests. Alone:
`flock /tmp/loadwise-lab.lock .venv/bin/python -m pytest tests/lab/test_real_prometheus.py -n0`.
"""

from __future__ import annotations

import time

import pytest

from lab import prometheus as lab_prometheus
from lab import realnodes
from lab.processes import wait_for
from lab.workloads import create_deployment, delete

# One real-node cluster at a time (its container names are fixed): the group of the other
# real-node tests (tests/lab/test_real_nodes.py).
pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("realnodes")]

HOT, COOL = realnodes.WORKERS
RULES = (lab_prometheus.CPU_RULE, lab_prometheus.MEMORY_RULE)
# The lab's burner on HOT (lab/go-tools/burner), requesting 10m: 800m of real CPU.
BURN_MILLICORES = 800
MIB = 1 << 20


@pytest.fixture
def prometheus(real_prometheus):
    return real_prometheus


def test_recording_rules_have_a_sane_sample_per_node(prometheus):
    t0 = time.monotonic()
    found = lab_prometheus.ratios(prometheus, realnodes.nodes(), timeout=180)
    print(f"\nboth rules complete after {time.monotonic() - t0:.1f}s")
    for rule in RULES:
        print(f"{rule}: " + ", ".join(f"{n}={v:.4f}" for n, v in sorted(found[rule].items())))
    targets = prometheus.targets()
    assert len(targets) == 2 * len(realnodes.nodes()), targets
    assert all(health == "up" for health in targets.values()), targets
    for rule in RULES:
        values = found[rule]
        assert set(values) == set(realnodes.nodes()), (rule, values)
        assert all(0 < v < 1 for v in values.values()), (rule, values)
    # Each node's own cgroup, not the machine's: every node's working set is the one this
    # machine reads from that node container's cgroup. Which node uses most is not asserted: a
    # worker's working set includes the page cache of images imported into its containerd and
    # whatever pods earlier tests left, and can exceed the control plane's.
    cgroup_matches = wait_for(
        "each node's node_memory_working_set_bytes to match its container's cgroup",
        lambda: _working_sets_match(prometheus),
        60,
        3,
    )
    print(
        "working set, Prometheus vs cgroup (MiB): "
        + ", ".join(
            f"{n}={p / MIB:.0f}/{c / MIB:.0f}" for n, (p, c) in sorted(cgroup_matches.items())
        )
    )


def _working_sets_match(prometheus) -> dict[str, tuple[float, int]]:
    """{node: (Prometheus's sample, the cgroup's figure)} when every node's pair agrees within
    20 % or 32 MiB (the kubelet's cAdvisor samples every 10-15 s; the pages keep moving); the
    machine's own working set (GiBs) is far outside that band for every node. Raises naming
    the pairs otherwise (wait_for reports the last one)."""
    seen = prometheus.by_node("node_memory_working_set_bytes")
    pairs = {n: (seen.get(n, 0.0), realnodes.working_set_bytes(n)) for n in realnodes.nodes()}
    if all(abs(p - c) <= max(0.2 * c, 32 * MIB) for p, c in pairs.values()):
        return pairs
    raise ValueError(f"(Prometheus, cgroup) bytes apart: {pairs}")


def test_real_load_shows_in_the_cpu_rule_on_its_node_only(prometheus, real_kube):
    """The burner on HOT: the rule follows the node's own cgroup, so HOT's ratio rises by about
    800m of its cores (the rate window is 1m) while COOL's does not."""
    cores = prometheus.by_node("machine_cpu_cores")
    want = 0.75 * BURN_MILLICORES / 1000 / cores[HOT]
    t0 = time.monotonic()
    create_deployment(
        real_kube, "burner", 1, realnodes.workload(burn_cpu=BURN_MILLICORES, node=HOT)
    )
    try:

        def hot_seen() -> dict[str, float] | None:
            cpu = prometheus.by_node(lab_prometheus.CPU_RULE)
            return cpu if cpu.get(HOT, 0) >= want else None

        cpu = wait_for(f"{lab_prometheus.CPU_RULE} >= {want:.2f} on {HOT}", hot_seen, 180, 3)
    finally:
        delete(real_kube, "burner")
    print(
        f"\nburner {BURN_MILLICORES}m on {HOT} ({cores[HOT]:.0f} cores), seen after "
        f"{time.monotonic() - t0:.0f}s: "
        + ", ".join(f"{n}={v:.4f}" for n, v in sorted(cpu.items()))
    )
    assert cpu[COOL] < cpu[HOT] - 0.25, cpu
