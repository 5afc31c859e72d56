"""`--limit` on a real kubeadm cluster with two control planes (lab/realnodes.py,
`up(control_planes=2)`: stacked etcd, the second control plane joined with `kubeadm join
--control-plane`, one worker), the inventory listing both as an operator's HA inventory does.

In order: site.yml on both; `site.yml --limit` the first, after a drift there, contacts and
changes only that node and names it alone; `rollback.yml --limit` the first puts its kubeadm
files back byte for byte and keeps the cluster-wide objects, and the second control plane's
extender still works: with the first node's scheduler stopped, the second's holds the leader
Lease and the pods it schedules go through the extender on the second node (the filter calls
it served rise, and the Events it writes with its ServiceAccount's token name it); then a
full rollback removes everything from both. tests/ansible/test_limit.py has the same choices
against a fake API with three hosts.

full: 12 min 5 s here (2026-11-28, the machine shared with other test runs: the cluster 152 s,
site.yml on both 302 s, the limited site.yml 77 s, the limited rollback and the second node's
extender 90 s, the full rollback 77 s); the default run covers the choices on the fake API
(tests/ansible/test_limit.py) and site/rollback on one real control plane
(test_real_site.py). The cluster has the shared cluster's node names, so this module runs
after the shared cluster's modules (tests/conftest.py, REALNODE_OWN_CLUSTER). Alone: `flock
/tmp/loadwise-lab.lock .venv/bin/python -m pytest tests/lab/test_real_limit.py -n0 -m full`.
"""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client

from lab import EXTENDER_HEALTH_URL, realnodes
from lab.processes import wait_for
from lab.workloads import create_deployment, delete, placements, scored_events
from tests.lab.conftest import LOADWISE_ON_NODE
from tests.lab.e2e import cluster_objects

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("realnodes"), pytest.mark.full]

CP1, CP2 = realnodes.CONTROL_PLANE, realnodes.CONTROL_PLANE_2
WORKER = realnodes.WORKERS[0]
CONFIG = "/etc/kubernetes/loadwise-scheduler-config.yaml"
CONFIG_FLAG = f"--config={CONFIG}"
MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"
# Where the first node's scheduler manifest waits while that scheduler is stopped: outside
# the kubelet's staticPodPath, which then removes the pod.
PARKED = "/etc/kubernetes/kube-scheduler.yaml.parked"
# kubeadm's files, the kubelet's units and loadwise's, each with its checksum.
FILES = "find /etc/kubernetes /etc/systemd/system -type f | LC_ALL=C sort | xargs sha256sum"
# ...and what loadwise itself keeps on a node, for "the run did not touch it".
LOADWISE_FILES = (
    "find /etc/kubernetes /etc/systemd/system /etc/loadwise /var/lib/loadwise -type f"
    " | LC_ALL=C sort | xargs sha256sum"
)
ENROLMENT = "loadwise-enrolment"


@pytest.fixture(scope="module")
def ha(tmp_path_factory):
    """The two-control-plane cluster: (hosts by name, Cluster client, each node's kubeadm
    files before any playbook)."""
    t0 = time.monotonic()
    try:
        res = realnodes.up(control_planes=2)
    except BaseException:
        realnodes.down()
        raise
    print(f"\ntwo control planes and a worker up in {time.monotonic() - t0:.0f}s")
    kube = realnodes.Cluster(res.kubeconfig)
    try:
        hosts = {
            h.name: h
            for h in realnodes.control_plane_hosts(
                tmp_path_factory.mktemp("ha-hosts"), res.kubeconfig
            )
        }
        pristine = {name: h.sh(FILES) for name, h in hosts.items()}
        yield hosts, kube, pristine
    finally:
        kube.close()
        realnodes.down()


def enrolled(kube) -> set[str]:
    """The hosts the enrolment ConfigMap names; empty when there is none."""
    found = kube.core().list_namespaced_config_map(
        "kube-system", field_selector=f"metadata.name={ENROLMENT}"
    )
    if not found.items:
        return set()
    return {json.loads(v)["host"] for v in (found.items[0].data or {}).values()}


def unit(host, name: str) -> dict[str, str]:
    out = host.sh(f"systemctl show {name} -p MainPID,ActiveState,NRestarts")
    return dict(line.split("=", 1) for line in out.split())


def lease_holder(kube) -> str:
    lease = client.CoordinationV1Api(kube.api_client()).read_namespaced_lease(
        "kube-scheduler", "kube-system"
    )
    return str(lease.spec.holder_identity or "")


def filtered_on(node: str) -> float:
    """The filter calls the extender on `node` served. Filter, not prioritize: with one
    worker a pod has one feasible node, and kube-scheduler then skips scoring (and so the
    extender's prioritize) altogether."""
    name = 'loadwise_extender_request_duration_seconds_count{verb="filter"}'
    return realnodes.extender_metric(node, EXTENDER_HEALTH_URL, name) or 0.0


def test_site_on_both_control_planes(ha):
    hosts, kube, _ = ha
    run = hosts[CP1].playbook("playbooks/site.yml")
    assert run.rc == 0, run.tail()
    assert set(run.changed) == {CP1, CP2}, run.tail(40)
    assert run.changed[CP1] > 0 and run.changed[CP2] > 0, run.tail(40)
    assert f"This run changes the control-plane hosts {CP1}, {CP2}." in run.said, run.tail()
    assert enrolled(kube) == {CP1, CP2}
    for name, host in hosts.items():
        cmdlines = host.scheduler_cmdlines()
        assert len(cmdlines) == 1 and CONFIG_FLAG in cmdlines[0].split(), (name, cmdlines)
        status, body = realnodes.node_get(name, f"{EXTENDER_HEALTH_URL}/readyz")
        assert status == 200 and "3 nodes from load-watcher" in body, (name, body)
        wait_for(
            f"the scheduler on {name} ready",
            lambda n=name: realnodes.ready_scheduler_image(kube, n) is not None,
            120,
        )


def test_site_limited_to_one_control_plane_changes_only_it(ha):
    """A drift on the first node (the extender's unit stopped, as a node rebooted with it
    masked or an operator's mistake leaves it): `site.yml --limit` that node starts it again,
    says it changes that host only, and nothing on the second node moves: no task ran there
    (its sshd saw no login: it is stopped for the run, so a contact would fail the run), its
    files and its extender's process are the same."""
    hosts, kube, _ = ha
    h1, h2 = hosts[CP1], hosts[CP2]
    h1.sh("systemctl stop loadwise-extender")
    files2, extender2 = h2.sh(LOADWISE_FILES), unit(h2, "loadwise-extender")
    assert extender2["ActiveState"] == "active", extender2
    h2.sh("systemctl stop ssh.service")
    try:
        run = h1.playbook("playbooks/site.yml", "--limit", CP1)
    finally:
        h2.sh("systemctl start ssh.service")
    assert run.rc == 0, run.tail()
    assert (
        f"This run changes the control-plane hosts {CP1} only (--limit {CP1}; not contacted: {CP2})"
        in run.said
    ), run.tail()
    assert set(run.changed) == {CP1} and run.changed[CP1] > 0, run.tail(40)
    assert f"[{CP2}]" not in run.stdout, run.tail()
    assert unit(h1, "loadwise-extender")["ActiveState"] == "active"
    assert h2.sh(LOADWISE_FILES) == files2
    assert unit(h2, "loadwise-extender") == extender2
    assert enrolled(kube) == {CP1, CP2}


def test_rollback_of_one_control_plane_keeps_the_others_extender_working(ha):
    hosts, kube, pristine = ha
    h1, h2 = hosts[CP1], hosts[CP2]
    objects = cluster_objects(kube)
    assert objects, "site.yml left no cluster-wide objects"
    files2 = h2.sh(LOADWISE_FILES)
    run = h1.playbook("playbooks/rollback.yml", "--limit", CP1)
    assert run.rc == 0, run.tail()
    assert f"KEPT: {CP2} is outside this run and recorded" in run.said, run.tail()
    assert set(run.changed) == {CP1}, run.tail(40)
    # the first node: kubeadm's files byte for byte, no loadwise, the stock scheduler
    assert h1.sh(FILES) == pristine[CP1]
    assert h1.sh(LOADWISE_ON_NODE).strip() == ""
    wait_for(
        f"the stock scheduler on {CP1} ready",
        lambda: realnodes.ready_scheduler_image(kube, CP1) is not None,
        120,
    )
    cmdlines = h1.scheduler_cmdlines()
    assert len(cmdlines) == 1 and "loadwise" not in cmdlines[0], cmdlines
    # the cluster keeps what the second node's extender needs; the second node is untouched
    assert cluster_objects(kube) == objects
    assert enrolled(kube) == {CP2}
    assert h2.sh(LOADWISE_FILES) == files2

    # The second node's scheduler leads once the first's is stopped (its manifest moved out
    # of the kubelet's staticPodPath), and the pods it schedules go through its extender.
    h1.sh(f"mv {MANIFEST} {PARKED}")
    try:
        wait_for(
            f"no scheduler on {CP1}, the Lease held by {CP2}'s",
            lambda: not h1.scheduler_cmdlines() and lease_holder(kube).startswith(f"{CP2}_"),
            120,
            interval=2,
        )
        before = filtered_on(CP2)
        since = time.time()
        create_deployment(kube, "after-limit", 3, realnodes.workload())
        try:
            where = placements(kube, "after-limit", 3, timeout=120)
            events = scored_events(kube, "after-limit", since=since, at_least=3)
        finally:
            delete(kube, "after-limit")
        after = filtered_on(CP2)
    finally:
        h1.sh(f"mv {PARKED} {MANIFEST}")
    assert where == {WORKER: 3}, dict(where)
    assert after >= before + 3, f"{CP2}'s extender served filter {before} -> {after}"
    # the Events the extender writes through the API with its ServiceAccount's token, each
    # naming the node it runs on (reportingInstance: its host name)
    assert {e.reporting_instance for e in events} == {CP2}, events
    assert len(events) >= 3 and all(f"bound to {WORKER}" in e.message for e in events), [
        e.message for e in events
    ]
    wait_for(
        f"the stock scheduler on {CP1} back and ready",
        lambda: realnodes.ready_scheduler_image(kube, CP1) is not None,
        120,
    )
    assert h1.sh(FILES) == pristine[CP1]


def test_full_rollback_removes_everything(ha):
    hosts, kube, pristine = ha
    run = hosts[CP1].playbook("playbooks/rollback.yml")
    assert run.rc == 0, run.tail()
    assert cluster_objects(kube) == []
    assert enrolled(kube) == set()
    for name, host in hosts.items():
        assert host.sh(LOADWISE_ON_NODE).strip() == "", name
        assert host.sh(FILES) == pristine[name], name
        wait_for(
            f"the stock scheduler on {name} ready",
            lambda n=name: realnodes.ready_scheduler_image(kube, n) is not None,
            120,
        )
        cmdlines = host.scheduler_cmdlines()
        assert len(cmdlines) == 1 and "loadwise" not in cmdlines[0], (name, cmdlines)
