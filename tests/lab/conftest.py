"""Fixtures for tests against the lab (the `lab` package at the top of the repository).

`lab` is package-scoped, so it is down again before molecule runs. The first test that
asks for it builds what is missing (lab/build; never skipped, so CI pays for a cold
build instead of skipping) and brings the lab up; the end of tests/lab brings it down.
A lab that is already up (someone ran `scripts/lab up`) is reused and left running; a
control-plane host the demo left is removed first, since its scheduler would compete.
"""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from lab import destroy, realnodes, session
from lab import prometheus as lab_prometheus
from lab.processes import wait_for
from tests.lab.e2e import Extender, cluster_objects


@pytest.fixture(scope="package")
def lab():
    destroy()  # a host left by `scripts/lab demo` would hold the scheduler lease
    with session() as running:
        yield running


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="module")
def extender(lab, workdir):
    """loadwise-extender on loopback, fed by the lab's load-watcher, watching the lab's API."""
    ext = Extender(lab, workdir)
    ext.start()
    yield ext
    ext.stop()
    lab.stop("kube-scheduler")


@pytest.fixture(scope="package")
def real_cluster():
    """One real-node kubeadm cluster (lab/realnodes.py) for every real-node test module: they
    all run on one xdist worker (group "realnodes", tests/conftest.py), one module after the
    other, and each proves the state it needs with the fixtures below instead of paying for a
    cluster of its own (about 70 s each). A failed start is removed too, its error naming the
    step and its log's tail. Package-scoped, not session-scoped: the cluster is removed as
    soon as that worker's next test is outside tests/lab, instead of idling (about a quarter
    of a core, three kubelets, an API server and etcd) through the worker's remaining suites
    until the session's end."""
    try:
        res = realnodes.up()
    except BaseException:
        realnodes.down()
        raise
    try:
        yield res
    finally:
        realnodes.down()


@pytest.fixture(scope="module")
def real_kube(real_cluster):
    """That cluster through its admin kubeconfig (lab.realnodes.Cluster), with no Deployment
    an earlier module left in the default namespace, and every node Ready."""
    gone = {n: st for n, st in realnodes.status()["containers"].items() if st != "running"}
    # test_real_upgrade.py brings up a cluster of its own under the same node names
    assert not gone, f"the shared real-node cluster is gone ({gone}): a module replaced it"
    kube = realnodes.Cluster(real_cluster.kubeconfig)
    apps = client.AppsV1Api(kube.api_client())
    for dep in apps.list_namespaced_deployment("default").items:
        apps.delete_namespaced_deployment(
            dep.metadata.name, "default", propagation_policy="Foreground", grace_period_seconds=0
        )
    kube.core().delete_collection_namespaced_pod("default", grace_period_seconds=0)
    wait_for(
        "the default namespace's pods of earlier modules gone",
        lambda: not kube.core().list_namespaced_pod("default").items,
        120,
        interval=2,
    )
    wait_for(
        "every node Ready", lambda: all(realnodes.node_ready(real_cluster.kubeconfig).values()), 120
    )
    yield kube
    kube.close()


@pytest.fixture(scope="package")
def real_prometheus(real_cluster, tmp_path_factory):
    """A Prometheus server (lab/prometheus.py) scraping that cluster's kubelets, for every
    real-node module: test_real_site.py's second-scheduler run points the extender at it and
    test_real_prometheus.py checks its rules, so it starts once (its rules need a minute of
    samples before they answer). Package-scoped with the cluster it scrapes."""
    t0 = time.monotonic()
    prom = lab_prometheus.start(real_cluster.kubeconfig, tmp_path_factory.mktemp("prometheus"))
    print(f"\nPrometheus ready at {prom.url} in {time.monotonic() - t0:.1f}s (log {prom.log})")
    try:
        yield prom
    finally:
        prom.stop()


@pytest.fixture(scope="package")
def real_host(real_cluster, tmp_path_factory):
    """Its control-plane node as Ansible reaches it (sshd started, inventory written)."""
    return realnodes.control_plane_host(
        tmp_path_factory.mktemp("real-host"), real_cluster.kubeconfig
    )


# What loadwise leaves on a control-plane node (roles/*: its directories, the services' units,
# the scheduler's config and the manifest naming it); each line printed is a leftover. (The
# lab's own files say "loadwise" too: its cluster is named loadwise-lab, its node image has
# loadwise-rshared.service.)
LOADWISE_ON_NODE = (
    "ls -d /etc/loadwise /opt/loadwise /var/lib/loadwise"
    " /etc/systemd/system/loadwise-extender.service"
    " /etc/systemd/system/loadwise-load-watcher.service"
    " /etc/kubernetes/loadwise-scheduler-config.yaml 2>/dev/null;"
    " grep -l loadwise-scheduler-config /etc/kubernetes/manifests/*.yaml 2>/dev/null; true"
)


@pytest.fixture(scope="module")
def real_without_loadwise(real_host, real_kube):
    """The shared cluster with no trace of loadwise, as a module that starts from kubeadm's
    own cluster needs it: what an earlier module's site.yml left is undone by the product's
    own rollback.yml (the reset), then proven: nothing on the node, nothing in kubeadm-config
    or among the cluster's objects, and the kubelet's stock scheduler ready."""
    if real_host.sh(LOADWISE_ON_NODE).strip() or cluster_objects(real_kube):
        run = real_host.playbook("playbooks/rollback.yml")
        assert run.rc == 0, f"resetting the shared cluster failed:\n{run.tail()}"
    assert real_host.sh(LOADWISE_ON_NODE).strip() == ""
    assert cluster_objects(real_kube) == []
    cm = real_kube.core().read_namespaced_config_map("kubeadm-config", "kube-system")
    # (not "loadwise": the lab names its cluster loadwise-lab)
    assert "loadwise-scheduler-config" not in cm.data["ClusterConfiguration"]

    wait_for(
        "the kubelet's stock scheduler ready",
        lambda: realnodes.ready_scheduler_image(real_kube) is not None,
        120,
        interval=2,
    )
    return real_kube
