"""Fixtures for tests against the lab (the `lab` package at the top of the repository).

`lab` is package-scoped, so it is down again before molecule runs. The first test that
asks for it builds what is missing (lab/build; never skipped, so CI pays for a cold
build instead of skipping) and brings the lab up; the end of tests/lab brings it down.
A lab that is already up (someone ran `scripts/lab up`) is reused and left running; a
control-plane host the demo left is removed first, since its scheduler would compete.
"""

from __future__ import annotations

import pytest

from lab import destroy, realnodes, session
from tests.lab.e2e import Extender


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


@pytest.fixture(scope="module")
def real_cluster():
    """A fresh real-node kubeadm cluster (lab/realnodes.py) for one test module, removed after
    it; a failed start is removed too, its error naming the step and its log's tail."""
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
    """That cluster through its admin kubeconfig (lab.realnodes.Cluster)."""
    kube = realnodes.Cluster(real_cluster.kubeconfig)
    yield kube
    kube.close()


@pytest.fixture(scope="module")
def real_host(real_cluster, tmp_path_factory):
    """Its control-plane node as Ansible reaches it (sshd started, inventory written)."""
    return realnodes.control_plane_host(
        tmp_path_factory.mktemp("real-host"), real_cluster.kubeconfig
    )
