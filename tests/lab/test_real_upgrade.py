"""A real `kubeadm upgrade apply` between two releases, with site.yml before and after it and
rollback.yml at the end, on a real-node cluster of its own (lab/realnodes.py, `previous=True`).

The cluster starts with its control plane and kube-proxy at the release one patch before the
lab's (lab/go-tools/kubernetes-previous, v1.36.3; the kubelets stay at v1.36.4, a skew
Kubernetes allows), so the sequence is an operator's day 2: loadwise installed on v1.36.3,
the cluster upgraded to v1.36.4 with kubeadm, site.yml run again, and later rollback.yml.
Rollback must leave the scheduler of the release the cluster now runs, without loadwise: the
manifest kubeadm renders from the restored kubeadm-config. Before the fix in
plugins/filter/loadwise_manifest.py (`_rollback`: the pristine bytes only when loadwise's edit
is all that separates them from the current text), it wrote back the manifest backed up
before the upgrade, image tag v1.36.3, under a v1.36.4 control plane.

full: 7 to 8 minutes here (its own cluster, site.yml twice, the upgrade, rollback), and the
first run also builds the previous release's four programs (3 min 43 s with the lab's own
release built and Go's caches warm). The
default run has the rollback's choice of bytes after an upgrade on the filter
(tests/ansible/test_filter_rollback.py) and kubeadm's re-render through an upgrade to the same
release on the shared cluster (test_real_site.py, also full).

The cluster has the shared cluster's node names, so this module brings it down and its own up:
it runs last of the real-node modules in group "realnodes" (pytest collects tests/lab in file
name order, and `real_kube` refuses a shared cluster that is gone). Alone: `flock
/tmp/loadwise-lab.lock .venv/bin/python -m pytest tests/lab/test_real_upgrade.py -n0 -m full`.
"""

from __future__ import annotations

import pytest
import yaml

from lab import realnodes
from lab.processes import wait_for
from lab.workloads import create_deployment, delete, placements
from tests.lab.e2e import cluster_objects
from tests.lab.kubeadm_render import render_scheduler, scheduler_container

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("realnodes"), pytest.mark.full]

CP = realnodes.CONTROL_PLANE
CONFIG = "/etc/kubernetes/loadwise-scheduler-config.yaml"
CONFIG_FLAG = f"--config={CONFIG}"
MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"
BACKUP = "/var/lib/loadwise/backup"  # loadwise_backup_dir's default (docs/ansible.md)
OLD = realnodes.previous_version()
NEW = realnodes.K8S_VERSION


@pytest.fixture(scope="module")
def older(tmp_path_factory):
    """The cluster at OLD, as an AnsibleHost for its control-plane node and a Cluster client."""
    try:
        res = realnodes.up(previous=True)
    except BaseException:
        realnodes.down()
        raise
    kube = realnodes.Cluster(res.kubeconfig)
    try:
        host = realnodes.control_plane_host(tmp_path_factory.mktemp("upgrade-host"), res.kubeconfig)
        yield host, kube
    finally:
        kube.close()
        realnodes.down()


def cluster_configuration(kube) -> dict:
    cm = kube.core().read_namespaced_config_map("kubeadm-config", "kube-system")
    return yaml.safe_load(cm.data["ClusterConfiguration"])


def on_node(host) -> dict:
    return scheduler_container(yaml.safe_load(host.read_text(MANIFEST)))


def test_site_on_the_older_release(older):
    host, kube = older
    assert cluster_configuration(kube)["kubernetesVersion"] == OLD
    run = host.playbook("playbooks/site.yml")
    assert run.rc == 0, run.tail()
    container = on_node(host)
    assert container["image"] == f"registry.k8s.io/kube-scheduler:{OLD}", container
    assert CONFIG_FLAG in container["command"], container


def test_kubeadm_upgrade_then_site_keeps_loadwise_on_the_new_release(older):
    host, kube = older
    realnodes.upgrade_control_plane(NEW)
    cc = cluster_configuration(kube)
    assert cc["kubernetesVersion"] == NEW
    # kubeadm renders the manifest again from kubeadm-config, which names loadwise's config
    container = on_node(host)
    assert container["image"] == f"registry.k8s.io/kube-scheduler:{NEW}", container
    assert CONFIG_FLAG in container["command"], container

    run = host.playbook("playbooks/site.yml")
    assert run.rc == 0, run.tail()
    container = on_node(host)
    assert container["image"] == f"registry.k8s.io/kube-scheduler:{NEW}", container
    assert CONFIG_FLAG in container["command"], container
    # The state the old rollback got wrong: this run recorded the manifest as what loadwise
    # left, and the pristine copy is still the one taken before the upgrade, at OLD; restoring
    # it because current == written would put the old release back.
    written = host.read_text(f"{BACKUP}/written{MANIFEST}.sha256").split()[0]
    assert host.sh(f"sha256sum {MANIFEST}").split()[0] == written
    pristine = scheduler_container(yaml.safe_load(host.read_text(f"{BACKUP}/pristine{MANIFEST}")))
    assert pristine["image"] == f"registry.k8s.io/kube-scheduler:{OLD}", pristine
    wait_for(
        f"the kubelet's {NEW} scheduler with loadwise's flag, ready",
        lambda: (
            realnodes.ready_scheduler_image(kube) == f"registry.k8s.io/kube-scheduler:{NEW}"
            and CONFIG_FLAG in " ".join(host.scheduler_cmdlines())
        ),
        120,
    )


def test_rollback_after_the_upgrade_leaves_the_new_release_without_loadwise(older):
    host, kube = older
    run = host.playbook("playbooks/rollback.yml")
    assert run.rc == 0, run.tail()

    cc = cluster_configuration(kube)
    assert cc["kubernetesVersion"] == NEW
    assert CONFIG not in yaml.safe_dump(cc)  # (the lab names its cluster "loadwise-lab")
    manifest = yaml.safe_load(host.read_text(MANIFEST))
    container = scheduler_container(manifest)
    assert container["image"] == f"registry.k8s.io/kube-scheduler:{NEW}", container
    # what kubeadm itself renders from the restored kubeadm-config: the new release's image
    # and none of loadwise's flag or mounts
    assert manifest == render_scheduler(yaml.safe_dump(cc))
    wait_for(
        f"the kubelet's stock {NEW} scheduler, ready",
        lambda: realnodes.ready_scheduler_image(kube) == f"registry.k8s.io/kube-scheduler:{NEW}",
        120,
    )
    cmdlines = host.scheduler_cmdlines()
    assert len(cmdlines) == 1 and "loadwise" not in cmdlines[0], cmdlines
    assert host.sh(f"ls {CONFIG} /etc/loadwise /opt/loadwise 2>/dev/null || true") == ""
    assert cluster_objects(kube) == []

    # and it schedules: the stock scheduler of the new release binds a Deployment's pods
    create_deployment(kube, "after-upgrade", 4, realnodes.workload())
    try:
        where = placements(kube, "after-upgrade", 4, timeout=120)
    finally:
        delete(kube, "after-upgrade")
    assert sum(where.values()) == 4 and set(where) <= set(realnodes.WORKERS), dict(where)
