"""Placement on real kubelets, where a pod sent to a full node is OOM-killed or evicted
(benchmarks/realplacement.py; docs/placement.md, "On real kubelets").

A real-node cluster of its own (lab/realnodes.py, `worker_memory`): each worker a node of
WORKER_MEMORY (its container's cgroup limit, its /proc/meminfo, the kubelet evicting at
memory.available < 100Mi). The first test proves the nodes are that size where the kubelet
looks; the second runs the benchmark's scenario once per contender, as the benchmark does: a
memory hog outside Kubernetes on HOT, then a burst of pods each holding more memory than it
requests, all of which fit on COOL alone. The stock scheduler, placing by requests, sends
some to HOT, where the kernel kills them or the kubelet evicts them (the control: the load is
real); with loadwise installed by site.yml, no pod goes to HOT and none is OOM-killed or
evicted.

full: 529 s here on 2026-11-27 (its own cluster, site.yml, a run of each contender). The
default run has the hot node avoided on real kubelets by CPU load (test_real_site.py) and the
hog scenario on kwok nodes (tests/lab/test_placement_smoke.py). The cluster has the shared
cluster's node names, so this module brings that one down: it runs after the modules that
share it (tests/conftest.py REALNODE_OWN_CLUSTER). Alone: `flock /tmp/loadwise-lab.lock
.venv/bin/python -m pytest tests/lab/test_real_placement.py -n0 -m full -s`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import realplacement
from lab import realnodes
from lab.fakenodes import parse_quantity

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("realnodes"), pytest.mark.full]

HOT, COOL = realnodes.WORKERS
ARGS = realplacement.parser().parse_args([])
WORKER_MEMORY = int(parse_quantity(ARGS.worker_memory))
EVICTION = int(parse_quantity(realnodes.MEMORY_EVICTION["evictionHard"]["memory.available"]))


@pytest.fixture(scope="module")
def small_workers(tmp_path_factory):
    """The cluster with workers of WORKER_MEMORY: its control-plane host and a client."""
    try:
        res = realnodes.up(worker_memory=ARGS.worker_memory)
    except BaseException:
        realnodes.down()
        raise
    kube = realnodes.Cluster(res.kubeconfig)
    try:
        host = realnodes.control_plane_host(
            tmp_path_factory.mktemp("realplace-host"), res.kubeconfig
        )
        yield host, kube
    finally:
        kube.close()
        realnodes.down()


def test_the_workers_are_nodes_of_their_memory(small_workers):
    """cAdvisor reads the node's capacity from /proc/meminfo and its memory use and limit
    from the root cgroup, which inside a node is its container's: each worker reports
    WORKER_MEMORY as capacity, that less the eviction threshold as allocatable, and the
    kubelet's own summary counts what is available against the same limit. The control plane,
    which has no limit, reports this machine's memory."""
    _, kube = small_workers
    nodes = {n.metadata.name: n for n in kube.core().list_node().items}
    machine_kib = int(Path("/proc/meminfo").read_text().split()[1])
    assert parse_quantity(nodes[realnodes.CONTROL_PLANE].status.capacity["memory"]) == (
        machine_kib * 1024
    )
    for name in realnodes.WORKERS:
        assert realnodes.memory_limit(name) == WORKER_MEMORY
        status = nodes[name].status
        assert parse_quantity(status.capacity["memory"]) == WORKER_MEMORY, status.capacity
        assert parse_quantity(status.allocatable["memory"]) == WORKER_MEMORY - EVICTION
        summary = json.loads(
            kube.core()
            .connect_get_node_proxy_with_path(name, "stats/summary", _preload_content=False)
            .data
        )["node"]["memory"]
        # the kubelet's eviction signal: available = the limit less the working set
        assert summary["availableBytes"] + summary["workingSetBytes"] == WORKER_MEMORY, summary


def test_loadwise_keeps_the_burst_off_the_hog_and_away_from_the_oom_killer(small_workers):
    host, kube = small_workers
    realplacement.switch(host, "stock")  # changes nothing: site.yml never ran here
    stock = realplacement.one_run(kube, "stock", 1, ARGS)
    realplacement.switch(host, "loadwise")
    loadwise = realplacement.one_run(kube, "loadwise", 1, ARGS)
    realplacement.quiet(kube)
    print("\n" + realplacement.table([stock, loadwise]))

    # The control: by requests the workers look alike, so the stock scheduler sends part of
    # the burst to HOT, and the load is real: the kernel or the kubelet takes pods there.
    assert stock.first_bound.get(HOT, 0) > 0, stock
    paid = sum(stock.oom_kills.values()) + sum(stock.evicted_pods.values())
    assert paid > 0, f"the stock run's pods on {HOT} were neither OOM-killed nor evicted: {stock}"

    # loadwise: every pod on COOL, all of them running, none killed or evicted, no pressure.
    assert loadwise.bound == {COOL: ARGS.pods}, loadwise
    assert loadwise.running_at_end == {COOL: ARGS.pods}, loadwise
    assert sum(loadwise.oom_kills.values()) == 0, loadwise
    assert loadwise.kernel_oom == {}, loadwise
    assert sum(loadwise.evicted_pods.values()) == 0, loadwise
    assert loadwise.pressure_seconds == dict.fromkeys(realnodes.WORKERS, 0.0), loadwise
