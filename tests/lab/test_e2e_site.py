"""End to end: playbooks/site.yml and rollback.yml on a k3s-flavoured control-plane host
(lab/hosts.py) whose REAL kube-scheduler is the lab's scheduler.

The kubeadm flavour runs on real kubeadm nodes instead (tests/lab/test_real_site.py: the
real kubelet, kubeadm and add-ons). k3s cannot be built here (docs/lab.md), so its flavour
keeps the k3s stand-in, which merges config.yaml and config.yaml.d/ with k3s's rules and runs
the real kube-scheduler with the flags k3s passes. Everything the playbooks talk to is real:
that scheduler, the lab's API server (cluster objects through kubernetes.core: load-watcher,
the extender's ServiceAccount/RBAC/token, the descheduler), the lab's load-watcher feeding the
extender the role installs as a systemd service. The tests run in order against one host:
check mode -> a controller kubeconfig of another cluster refused -> bad variables refused ->
rollback.yml before any site.yml -> site.yml -> placement through the
scheduler -> second run -> a config the scheduler rejects, restored -> rollback.yml, twice ->
second-scheduler mode ->
a cluster without a metrics API (refused on k3s, which bundles metrics-server) ->
an operator's later drop-in that drops loadwise, refused by the next site.yml.

Only `make test-full` runs the tests marked `full` here: the steps that are the same on both
flavours (refusals, second-scheduler mode, a rollback before any site run); each says where the
default run has it.

This module is the default run's k3s flavour: molecule's k3s scenario (the same roles and
stand-in, node-side only) is in `make test-full`, and its steps are here on the same host
with the cluster side installed too: converge, a second run and check mode changing nothing
(its idempotence), a rejected config restored with the scheduler's own error, rollback
byte-exact and a second rollback changing nothing (its side effect), the operator's
kube-scheduler-arg kept (its verify). Its TLS, key and unit checks are flavour-independent and
run on the real kubeadm node (tests/lab/test_real_site.py).
"""

from __future__ import annotations

import contextlib
import re
import ssl
import time
import urllib.request

import pytest
import yaml

from lab import (
    EXTENDER_HEALTH_URL,
    EXTENDER_URL,
    ControlPlaneHost,
    NodeSpec,
    node_image,
    place,
    wait_ready,
)
from tests.lab.e2e import (
    COOL,
    HOT,
    another_clusters_kubeconfig,
    cluster_objects,
    request_count,
)

pytestmark = pytest.mark.lab

CONFIG_FLAG = "--config=/etc/rancher/k3s/loadwise-scheduler-config.yaml"


@pytest.fixture(scope="module")
def host(lab, workdir):
    lab.stop("kube-scheduler")  # the host's scheduler is the lab's scheduler now
    kube_scheduler = lab.binaries(["kube-scheduler"])["kube-scheduler"]
    h = ControlPlaneHost("k3s", node_image(), lab, workdir)
    h.create()
    try:
        run = h.prepare(kube_scheduler)
        assert run.rc == 0, run.tail()
        yield h
    finally:
        h.destroy()


def _delete_if_there(delete, *args) -> None:
    """Call a client's delete, fine if the object is already gone."""
    from kubernetes.client.exceptions import ApiException

    try:
        delete(*args)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _scheduler_healthz() -> bytes:
    """The host's scheduler health endpoint (the host shares the machine's loopback)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # its self-signed serving cert
    with urllib.request.urlopen("https://127.0.0.1:10259/healthz", context=ctx, timeout=5) as r:
        return r.read()


def _events(lab, reason: str) -> list:
    return [e for e in lab.core().list_namespaced_event("default").items if e.reason == reason]


def test_check_mode_shows_the_edit_and_changes_nothing(host, lab):
    run = host.playbook("playbooks/site.yml", "--check", "--diff")
    assert run.rc == 0, run.tail()
    assert re.search(r"^\+\s*kube-scheduler-arg\+:", run.stdout, re.M), run.tail(200)
    host.sh("sha256sum -c /root/loadwise-test-pristine.sha256")
    assert host.sh("ls /etc/loadwise /opt/loadwise 2>&1 || true").count("No such file") == 2
    assert cluster_objects(lab) == [], "--check created cluster objects"
    assert all(CONFIG_FLAG not in c for c in host.scheduler_cmdlines())


# full: preflight refuses it before any flavour-specific task; the default run proves it on the
# real kubeadm node (test_real_site.py, test_a_controller_pointed_at_another_cluster_is_refused).
@pytest.mark.full
def test_a_controller_pointed_at_another_cluster_is_refused_before_any_change(host, lab, workdir):
    """On a real host: the node's scheduler kubeconfig trusts the lab's
    CA, the controller's kubeconfig another one; site.yml stops in preflight, naming both."""
    other = another_clusters_kubeconfig(lab.kubeconfig, workdir)
    run = host.playbook("playbooks/site.yml", extra={"loadwise_kubeconfig": other})
    assert run.rc != 0, run.tail()
    assert f"{host.name} is not in the cluster the controller would change" in run.said, run.tail()
    assert other in run.said
    assert "PLAY [Cluster add-ons" not in run.stdout, run.tail()
    host.sh("sha256sum -c /root/loadwise-test-pristine.sha256")
    assert cluster_objects(lab) == []


# full: the arguments' validation is the same on both flavours; the default run has it on the
# real kubeadm node (test_real_site.py) and for every variable in tests/ansible.
@pytest.mark.full
@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"loadwise_scheduler_config_weight": -5}, "loadwise_scheduler_config_weight"),
        ({"loadwise_extender_polcy": "least-used"}, "did you mean loadwise_extender_policy?"),
    ],
    ids=["negative-weight", "misspelled"],
)
def test_a_bad_variable_is_refused_before_any_change(host, lab, bad, named):
    """On a real host: preflight, the first play, refuses; no file, unit or
    object has changed (the same checks as check mode's)."""
    run = host.playbook("playbooks/site.yml", extra=bad)
    assert run.rc != 0, run.tail()
    assert named in run.said, run.tail()
    assert "PLAY [Cluster add-ons" not in run.stdout, run.tail()
    host.sh("sha256sum -c /root/loadwise-test-pristine.sha256")
    assert host.sh("ls /etc/loadwise /opt/loadwise 2>&1 || true").count("No such file") == 2
    assert cluster_objects(lab) == []


# full: the default run has it on the real kubeadm node (test_real_site.py) and on the k3s
# stand-in in molecule's k3s scenario (its rollback runs twice, the second changing nothing).
@pytest.mark.full
def test_rollback_where_site_never_ran_changes_nothing(host, lab):
    """An operator may run rollback.yml first (or twice): it must succeed and touch nothing."""
    run = host.playbook("playbooks/rollback.yml")
    assert run.rc == 0, run.tail()
    assert run.changed == {host.name: 0}, run.tail(120)
    host.sh("sha256sum -c /root/loadwise-test-pristine.sha256")
    assert cluster_objects(lab) == []


def test_site_rewires_the_real_scheduler_and_installs_the_cluster_side(host, lab):
    run = host.playbook("playbooks/site.yml")
    assert run.rc == 0, run.tail()
    assert run.changed[host.name] > 0
    cmdlines = host.scheduler_cmdlines()
    assert len(cmdlines) == 1 and CONFIG_FLAG in cmdlines[0], cmdlines
    # the operator's own kube-scheduler-arg (lab/hosts.py K3S_CONFIG; k3s passes no -v of
    # its own) still reaches it
    assert "--v=2" in cmdlines[0].split(), cmdlines

    objects = cluster_objects(lab)
    for expected in (
        "ServiceAccount/loadwise-extender",
        "Secret/loadwise-extender-token",
        "ClusterRole/loadwise-extender",
        "Deployment/load-watcher",
        "Service/load-watcher",
        "Deployment/loadwise-descheduler",
    ):
        assert expected in objects, objects
    # the extender's own kubeconfig: its ServiceAccount's token, readable by its account only
    assert host.sh("stat -c '%U %a' /etc/loadwise/extender.kubeconfig").split() == [
        "loadwise-extender", "600"]  # fmt: skip


def test_the_scheduler_calls_the_extender_and_avoids_the_hog(host, lab):
    """Through the playbook's wiring: a 30-replica Deployment, none on the node whose memory
    a hog no pod requests fills."""
    wait_ready(EXTENDER_HEALTH_URL)
    before = (
        request_count(EXTENDER_HEALTH_URL, "prioritize"),
        request_count(EXTENDER_HEALTH_URL, "filter"),
    )
    where = place(lab, f"site-{host.flavour}", 30)
    after = (
        request_count(EXTENDER_HEALTH_URL, "prioritize"),
        request_count(EXTENDER_HEALTH_URL, "filter"),
    )
    assert after[0] > before[0] and after[1] > before[1], f"extender requests {before} -> {after}"
    assert where[HOT] == 0, f"pods landed on the memory hog: {dict(where)}"
    assert set(where) <= COOL
    # Events posted with the ServiceAccount's token: the role's RBAC lets it create them
    assert _events(lab, "LoadwiseScored"), "no LoadwiseScored Event: events RBAC or token broken"


def test_a_second_site_run_changes_nothing(host):
    run = host.playbook("playbooks/site.yml")
    assert run.rc == 0, run.tail()
    assert run.changed == {host.name: 0}, run.tail(120)
    # and check mode on the converged cluster agrees: nothing to change
    run = host.playbook("playbooks/site.yml", "--check", "--diff")
    assert run.rc == 0, run.tail()
    assert run.changed == {host.name: 0}, run.tail(120)


# A configuration the real kube-scheduler refuses at start-up (an unknown score plugin).
BROKEN = {
    "loadwise_scheduler_config_extra": {
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {"score": {"enabled": [{"name": "LoadwiseNoSuchPlugin"}]}},
            }
        ]
    }
}
NODE_FILES = (
    "find /etc/rancher /etc/loadwise /etc/systemd/system -type f | LC_ALL=C sort | xargs sha256sum"
)


def test_a_config_the_scheduler_rejects_is_restored(host):
    """On the converged host: k3s restarts with the drop-in naming the broken config, its
    scheduler exits; the role sees it, puts the previous files back and restarts k3s, whose
    scheduler runs loadwise's config again. The run fails naming the scheduler's own error.
    (Only the scheduler config's tag, as an operator re-runs one part.)"""
    converged = host.sh(NODE_FILES)
    run = host.playbook("playbooks/site.yml", "--tags", "loadwise_scheduler_config", extra=BROKEN)
    assert run.rc != 0, run.tail()
    said = ("restored the previous files", "scheduler is healthy again", "LoadwiseNoSuchPlugin")
    assert all(words in run.said for words in said), run.tail()
    assert host.sh(NODE_FILES) == converged
    _wait_cmdline(host, CONFIG_FLAG)
    assert _scheduler_healthz() == b"ok"


def test_rollback_restores_every_file_and_the_stock_scheduler(host, lab, workdir):
    # First pointed at another cluster: rollback deletes objects, so it refuses as site.yml
    # does, and leaves everything here in place.
    objects = cluster_objects(lab)
    other = another_clusters_kubeconfig(lab.kubeconfig, workdir)
    run = host.playbook("playbooks/rollback.yml", extra={"loadwise_kubeconfig": other})
    assert run.rc != 0, run.tail()
    assert f"{host.name} is not in the cluster the controller would change" in run.said, run.tail()
    assert cluster_objects(lab) == objects
    assert all(CONFIG_FLAG in c for c in host.scheduler_cmdlines())

    run = host.playbook("playbooks/rollback.yml")
    assert run.rc == 0, run.tail()
    host.sh("sha256sum -c /root/loadwise-test-pristine.sha256")
    files = host.sh(
        "{ find /etc/kubernetes /etc/rancher /etc/systemd/system -type f 2>/dev/null || true; }"
        " | sort"
    )
    assert files == host.read_text("/root/loadwise-test-files.txt")
    assert host.sh("ls -d /etc/loadwise /opt/loadwise /var/lib/loadwise 2>/dev/null || true") == ""
    assert host.sh("getent passwd loadwise-extender || true") == ""
    assert cluster_objects(lab) == []
    cmdlines = host.scheduler_cmdlines()
    assert len(cmdlines) == 1 and "loadwise" not in cmdlines[0], cmdlines
    assert _scheduler_healthz() == b"ok"

    # The stock scheduler is back in charge: pods are bound without the extender, and
    # (the control for the hog test above) by requests alone some land on the hog.
    where = place(lab, f"stock-{host.flavour}", 30)
    assert where[HOT] > 0, f"after rollback the scheduler still avoids the hog: {dict(where)}"

    # and an operator who runs it again (or after a failed run) changes nothing
    run = host.playbook("playbooks/rollback.yml")
    assert run.rc == 0, run.tail()
    assert run.changed == {host.name: 0}, run.tail(120)
    host.sh("sha256sum -c /root/loadwise-test-pristine.sha256")


# How k3s labels its control-plane nodes ("true"; kubeadm leaves the value empty).
CONTROL_PLANE_LABELS = {
    "node-role.kubernetes.io/control-plane": "true",
    "node-role.kubernetes.io/master": "true",
}


# full: the mode touches no file of the flavour's; the default run proves it on the real kubeadm
# node, where a real kubelet runs the second scheduler and it binds pods (test_real_site.py).
@pytest.mark.full
def test_second_scheduler_mode_leaves_the_control_plane_alone(host, lab):
    """The cautious mode: a second kube-scheduler Deployment, no file on the node touched.

    kwok only pretends to run its pod, so this proves the objects (accepted by the real API,
    placed on a control-plane node as the flavour labels it) and the clean removal, not the
    second scheduler's own scheduling.
    """
    from kubernetes import client

    cp = f"lab-cp-{host.flavour}"
    lab.add_node(NodeSpec(cp, cpu="2", memory="4Gi", labels=CONTROL_PLANE_LABELS))
    try:
        run = host.playbook(
            "playbooks/site.yml", extra={"loadwise_scheduler_config_mode": "second-scheduler"}
        )
        assert run.rc == 0, run.tail()
        host.sh("sha256sum -c /root/loadwise-test-pristine.sha256")
        cmdlines = host.scheduler_cmdlines()
        assert len(cmdlines) == 1 and "loadwise" not in cmdlines[0], cmdlines

        apps = client.AppsV1Api(lab.api_client())
        dep = apps.read_namespaced_deployment("loadwise-scheduler", "kube-system")
        assert dep.status.ready_replicas == 1, dep.status
        assert (
            dep.spec.template.spec.containers[0].image == "registry.k8s.io/kube-scheduler:v1.36.4"
        )
        pods = lab.core().list_namespaced_pod(
            "kube-system", label_selector="app.kubernetes.io/name=loadwise-scheduler"
        )
        assert [p.spec.node_name for p in pods.items] == [cp]
        config = yaml.safe_load(
            lab.core()
            .read_namespaced_config_map("loadwise-scheduler-config", "kube-system")
            .data["config.yaml"]
        )
        assert config["profiles"][0]["schedulerName"] == "loadwise-scheduler"
        assert config["extenders"][0]["urlPrefix"] == f"{EXTENDER_URL}/scheduler"

        run = host.playbook("playbooks/rollback.yml")
        assert run.rc == 0, run.tail()
        assert cluster_objects(lab) == []
        host.sh("sha256sum -c /root/loadwise-test-pristine.sha256")
    finally:
        lab.remove_node(cp)


@contextlib.contextmanager
def _without_lab_metrics_api(lab):
    """Take the lab's own metrics API (its ExternalName Service and APIService) away for the
    block, so the role sees a cluster without one; put it back after, replacing whatever the
    block left under those names, and wait until it serves again."""
    from kubernetes import client

    api = lab.api_client()
    core, reg = client.CoreV1Api(api), client.ApiregistrationV1Api(api)
    name, namespace, apiservice = "metrics-server", "kube-system", "v1beta1.metrics.k8s.io"
    saved = {
        "service": api.sanitize_for_serialization(core.read_namespaced_service(name, namespace)),
        "apiservice": api.sanitize_for_serialization(reg.read_api_service(apiservice)),
    }
    reg.delete_api_service(apiservice)
    core.delete_namespaced_service(name, namespace)
    try:
        yield
    finally:
        _delete_if_there(reg.delete_api_service, apiservice)
        _delete_if_there(core.delete_namespaced_service, name, namespace)
        for body in saved.values():
            body.pop("status", None)
            body["metadata"] = {
                k: v for k, v in body["metadata"].items() if k in ("name", "namespace", "labels")
            }
        saved["service"]["spec"].pop("clusterIP", None)
        saved["service"]["spec"].pop("clusterIPs", None)
        core.create_namespaced_service(namespace, saved["service"])
        reg.create_api_service(saved["apiservice"])
        lab.wait_node_metrics(["lab-small", "lab-medium", "lab-large", "lab-hog"])


def test_a_cluster_without_a_metrics_api_is_refused_on_k3s(host, lab):
    """k3s bundles metrics-server, so a k3s cluster without the metrics API has switched it
    off (or it is broken): site.yml refuses rather than install a second copy that would
    collide with the bundled one. (On kubeadm, site.yml installs metrics-server; the real
    nodes run it: tests/lab/test_real_site.py.) The lab's own metrics API is put back after."""
    with _without_lab_metrics_api(lab):
        site = ("playbooks/site.yml", "--tags", "loadwise_metrics_server")
        run = host.playbook(*site, extra={"loadwise_metrics_server_kubelet_insecure_tls": True})
        assert run.rc != 0, run.tail()
        assert "k3s ships metrics-server, but v1beta1.metrics.k8s.io is missing" in run.said
        assert cluster_objects(lab) == []


def _put_file(host, path: str, text: str) -> None:
    host.sh(f"cat > {path} <<'LOADWISE_TEST_EOF'\n{text}LOADWISE_TEST_EOF\n")


def _wait_cmdline(host, want: str, timeout: float = 90) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        cmdlines = host.scheduler_cmdlines()
        if len(cmdlines) == 1 and want in cmdlines[0].split():
            return cmdlines
        assert time.monotonic() < deadline, f"no scheduler with {want}: {cmdlines}"
        time.sleep(1)


def test_what_changed_after_site_survives_rollback(host, lab):
    """Last in the module. site.yml, then a later drop-in without "+" that drops loadwise's
    entry: the running scheduler lost loadwise's --config, and the next site.yml refuses
    before any change and says which file did it. Rollback keeps the operator's files."""
    # with the extender's tag too: the scheduler's client certificate (TLS, on by default) is
    # the extender role's, which an earlier rollback in this module may have removed
    site = ("playbooks/site.yml", "--tags", "loadwise_extender,loadwise_scheduler_config")
    rollback = ("playbooks/rollback.yml", "--tags", "loadwise_scheduler_config")
    run = host.playbook(*site)
    assert run.rc == 0, run.tail()
    _wait_cmdline(host, CONFIG_FLAG)

    later = "/etc/rancher/k3s/config.yaml.d/99-operator.yaml"
    _put_file(host, later, "kube-scheduler-arg:\n  - v=3\n")
    host.sh("systemctl restart k3s")
    assert CONFIG_FLAG not in _wait_cmdline(host, "--v=3")[0]
    run = host.playbook(*site)
    assert run.rc != 0, run.tail()
    assert f'{later} sets kube-scheduler-arg without "+" after loadwise' in run.said, run.tail()
    assert host.read_text(later) == "kube-scheduler-arg:\n  - v=3\n"
    run = host.playbook(*rollback)
    assert run.rc == 0, run.tail()
    assert host.read_text(later) == "kube-scheduler-arg:\n  - v=3\n"
    assert host.sh("ls /etc/rancher/k3s/config.yaml.d") == "99-operator.yaml\n"
