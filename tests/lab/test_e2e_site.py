"""End to end: playbooks/site.yml and rollback.yml on kubeadm- and k3s-flavoured
control-plane hosts (lab/hosts.py) whose REAL kube-scheduler is the lab's scheduler.

Everything the playbooks talk to is real: the kube-scheduler restarted by the static-pod
stand-in or the k3s stand-in, the lab's API server (cluster objects through
kubernetes.core: load-watcher, the extender's ServiceAccount/RBAC/token, the descheduler,
kubeadm-config), the lab's load-watcher feeding the extender the role installs as a
systemd service. The tests of one flavour run in order against one host:
check mode -> a controller kubeconfig of another cluster refused -> bad variables refused ->
rollback.yml before any site.yml -> site.yml -> placement through the
scheduler -> second run -> rollback.yml -> second-scheduler mode ->
a cluster without a metrics API (metrics-server installed on kubeadm, refused on k3s) ->
what changed after site.yml survives rollback (kubeadm: an upgrade rendered by the real
kubeadm; k3s: an operator's drop-in that drops loadwise, refused by the next site.yml).

Not repeated here: a scheduler config the scheduler rejects is restored automatically, and a
second rollback changes nothing. The molecule scenarios of both flavours run exactly that
(molecule/shared/side_effect.yml and verify.yml: the same roles, the same real kube-scheduler
under the same static-pod and k3s stand-ins, the scheduler's own error in the message,
byte-identical files after); the cluster objects this suite adds play no part in it, and
each playbook run here costs 1-2 minutes of the suite's longest worker.
"""

from __future__ import annotations

import contextlib
import re
import ssl
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from lab import EXTENDER_URL, ControlPlaneHost, NodeSpec, node_image, place, wait_ready
from tests.lab.e2e import COOL, HOT, request_count

pytestmark = pytest.mark.lab

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
LABEL = "app.kubernetes.io/part-of=loadwise"
CONFIG_FLAG = {"kubeadm": "--config=/etc/kubernetes/loadwise-scheduler-config.yaml",
               "k3s": "--config=/etc/rancher/k3s/loadwise-scheduler-config.yaml"}  # fmt: skip


@pytest.fixture(scope="module", params=["kubeadm", "k3s"])
def host(request, lab, workdir):
    lab.stop("kube-scheduler")  # the host's scheduler is the lab's scheduler now
    kube_scheduler = lab.binaries(["kube-scheduler"])["kube-scheduler"]
    h = ControlPlaneHost(request.param, node_image(), lab, workdir)
    if h.flavour == "kubeadm":
        _put_kubeadm_config(lab)
    h.create()
    try:
        run = h.prepare(kube_scheduler)
        assert run.rc == 0, run.tail()
        yield h
    finally:
        h.destroy()
        _delete_kubeadm_config(lab)


def _put_kubeadm_config(lab) -> None:
    _delete_kubeadm_config(lab)
    lab.core().create_namespaced_config_map(
        "kube-system",
        {
            "metadata": {"name": "kubeadm-config"},
            "data": {"ClusterConfiguration": CLUSTER_CONFIGURATION},
        },
    )


def _delete_if_there(delete, *args) -> None:
    """Call a client's delete, fine if the object is already gone."""
    from kubernetes.client.exceptions import ApiException

    try:
        delete(*args)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _delete_kubeadm_config(lab) -> None:
    _delete_if_there(lab.core().delete_namespaced_config_map, "kubeadm-config", "kube-system")


def _cluster_objects(lab) -> list[str]:
    """Every object carrying loadwise's part-of label, as kind/name."""
    from kubernetes import client

    api = lab.api_client()
    core, apps, rbac = (
        client.CoreV1Api(api),
        client.AppsV1Api(api),
        client.RbacAuthorizationV1Api(api),
    )
    listings = {
        "ServiceAccount": core.list_service_account_for_all_namespaces,
        "Secret": core.list_secret_for_all_namespaces,
        "ConfigMap": core.list_config_map_for_all_namespaces,
        "Service": core.list_service_for_all_namespaces,
        "Deployment": apps.list_deployment_for_all_namespaces,
        "Role": rbac.list_role_for_all_namespaces,
        "RoleBinding": rbac.list_role_binding_for_all_namespaces,
        "ClusterRole": rbac.list_cluster_role,
        "ClusterRoleBinding": rbac.list_cluster_role_binding,
    }
    return sorted(
        f"{kind}/{item.metadata.name}"
        for kind, listing in listings.items()
        for item in listing(label_selector=LABEL).items
    )


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
    edit = {"kubeadm": r"^\+\s*- --config=/etc/kubernetes/loadwise-scheduler-config\.yaml",
            "k3s": r"^\+\s*kube-scheduler-arg\+:"}[host.flavour]  # fmt: skip
    assert re.search(edit, run.stdout, re.M), run.tail(200)
    host.sh("sha256sum -c /root/loadwise-test-pristine.sha256")
    assert host.sh("ls /etc/loadwise /opt/loadwise 2>&1 || true").count("No such file") == 2
    assert _cluster_objects(lab) == [], "--check created cluster objects"
    assert all(CONFIG_FLAG[host.flavour] not in c for c in host.scheduler_cmdlines())


def _another_clusters_kubeconfig(lab, workdir) -> str:
    """The lab's admin kubeconfig with its CA swapped for a fresh one: what an operator's
    controller holds for a cluster rebuilt at the same address, or a stale context."""
    import base64
    import subprocess

    key, cert = workdir / "other-ca.key", workdir / "other-ca.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", "/CN=another-cluster-ca"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    doc = yaml.safe_load(Path(lab.kubeconfig).read_text())
    for entry in doc["clusters"]:
        entry["cluster"]["certificate-authority-data"] = base64.b64encode(
            cert.read_bytes()
        ).decode()
    path = workdir / f"another-cluster-{time.monotonic_ns()}.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_a_controller_pointed_at_another_cluster_is_refused_before_any_change(host, lab, workdir):
    """Issue #11 point 3 on a real host: the node's scheduler kubeconfig trusts the lab's
    CA, the controller's kubeconfig another one; site.yml stops in preflight, naming both."""
    other = _another_clusters_kubeconfig(lab, workdir)
    run = host.playbook("playbooks/site.yml", extra={"loadwise_kubeconfig": other})
    assert run.rc != 0, run.tail()
    assert f"{host.name} is not in the cluster the controller would change" in run.said, run.tail()
    assert other in run.said
    assert "PLAY [Cluster add-ons" not in run.stdout, run.tail()
    host.sh("sha256sum -c /root/loadwise-test-pristine.sha256")
    assert _cluster_objects(lab) == []


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"loadwise_scheduler_config_weight": -5}, "loadwise_scheduler_config_weight"),
        ({"loadwise_extender_polcy": "least-used"}, "did you mean loadwise_extender_policy?"),
    ],
    ids=["negative-weight", "misspelled"],
)
def test_a_bad_variable_is_refused_before_any_change(host, lab, bad, named):
    """Issue #11 point 7 on a real host: preflight, the first play, refuses; no file, unit or
    object has changed (the same checks as check mode's)."""
    run = host.playbook("playbooks/site.yml", extra=bad)
    assert run.rc != 0, run.tail()
    assert named in run.said, run.tail()
    assert "PLAY [Cluster add-ons" not in run.stdout, run.tail()
    host.sh("sha256sum -c /root/loadwise-test-pristine.sha256")
    assert host.sh("ls /etc/loadwise /opt/loadwise 2>&1 || true").count("No such file") == 2
    assert _cluster_objects(lab) == []


def test_rollback_where_site_never_ran_changes_nothing(host, lab):
    """An operator may run rollback.yml first (or twice): it must succeed and touch nothing."""
    run = host.playbook("playbooks/rollback.yml")
    assert run.rc == 0, run.tail()
    assert run.changed == {host.name: 0}, run.tail(120)
    host.sh("sha256sum -c /root/loadwise-test-pristine.sha256")
    assert _cluster_objects(lab) == []


def test_site_rewires_the_real_scheduler_and_installs_the_cluster_side(host, lab):
    run = host.playbook("playbooks/site.yml")
    assert run.rc == 0, run.tail()
    assert run.changed[host.name] > 0
    cmdlines = host.scheduler_cmdlines()
    assert len(cmdlines) == 1 and CONFIG_FLAG[host.flavour] in cmdlines[0], cmdlines

    objects = _cluster_objects(lab)
    for expected in (
        "ServiceAccount/loadwise-extender",
        "Secret/loadwise-extender-token",
        "ClusterRole/loadwise-extender",
        "Deployment/load-watcher",
        "Service/load-watcher",
        "Deployment/loadwise-descheduler",
    ):
        assert expected in objects, objects
    if host.flavour == "kubeadm":
        cm = lab.core().read_namespaced_config_map("kubeadm-config", "kube-system")
        scheduler = yaml.safe_load(cm.data["ClusterConfiguration"])["scheduler"]
        args = {a["name"]: a["value"] for a in scheduler["extraArgs"]}
        assert args["config"] == "/etc/kubernetes/loadwise-scheduler-config.yaml", scheduler
        # and the real kubeadm renders loadwise's flag and mount from it (a join or upgrade)
        from tests.lab.kubeadm_render import render_scheduler, scheduler_container

        rendered = render_scheduler(cm.data["ClusterConfiguration"])
        assert CONFIG_FLAG["kubeadm"] in scheduler_container(rendered)["command"]
        assert "loadwise-scheduler-config" in [v["name"] for v in rendered["spec"]["volumes"]]
    # the extender's own kubeconfig: its ServiceAccount's token, readable by its account only
    assert host.sh("stat -c '%U %a' /etc/loadwise/extender.kubeconfig").split() == [
        "loadwise-extender", "600"]  # fmt: skip


def test_the_scheduler_calls_the_extender_and_avoids_the_hog(host, lab):
    """Through the playbook's wiring: a 30-replica Deployment, none on the node whose memory
    a hog no pod requests fills."""
    wait_ready(EXTENDER_URL)
    before = request_count(EXTENDER_URL, "prioritize"), request_count(EXTENDER_URL, "filter")
    where = place(lab, f"site-{host.flavour}", 30)
    after = request_count(EXTENDER_URL, "prioritize"), request_count(EXTENDER_URL, "filter")
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


def test_rollback_restores_every_file_and_the_stock_scheduler(host, lab, workdir):
    # First pointed at another cluster: rollback deletes objects and patches kubeadm-config,
    # so it refuses as site.yml does, and leaves everything here in place.
    objects = _cluster_objects(lab)
    other = _another_clusters_kubeconfig(lab, workdir)
    run = host.playbook("playbooks/rollback.yml", extra={"loadwise_kubeconfig": other})
    assert run.rc != 0, run.tail()
    assert f"{host.name} is not in the cluster the controller would change" in run.said, run.tail()
    assert _cluster_objects(lab) == objects
    assert all(CONFIG_FLAG[host.flavour] in c for c in host.scheduler_cmdlines())

    run = host.playbook("playbooks/rollback.yml")
    assert run.rc == 0, run.tail()
    host.sh("sha256sum -c /root/loadwise-test-pristine.sha256")
    files = host.sh(
        "{ find /etc/kubernetes /etc/rancher /etc/systemd/system -type f 2>/dev/null || true; }"
        " | sort"
    )
    assert files == host.sh("cat /root/loadwise-test-files.txt")
    assert host.sh("ls -d /etc/loadwise /opt/loadwise /var/lib/loadwise 2>/dev/null || true") == ""
    assert host.sh("getent passwd loadwise-extender || true") == ""
    assert _cluster_objects(lab) == []
    if host.flavour == "kubeadm":
        cm = lab.core().read_namespaced_config_map("kubeadm-config", "kube-system")
        assert cm.data["ClusterConfiguration"] == CLUSTER_CONFIGURATION  # byte for byte
    cmdlines = host.scheduler_cmdlines()
    assert len(cmdlines) == 1 and "loadwise" not in cmdlines[0], cmdlines
    assert _scheduler_healthz() == b"ok"

    # The stock scheduler is back in charge: pods are bound without the extender, and
    # (the control for the hog test above) by requests alone some land on the hog.
    where = place(lab, f"stock-{host.flavour}", 30)
    assert where[HOT] > 0, f"after rollback the scheduler still avoids the hog: {dict(where)}"


# How each flavour labels its control-plane nodes: kubeadm with an empty value, k3s "true".
CONTROL_PLANE_LABELS = {
    "kubeadm": {"node-role.kubernetes.io/control-plane": ""},
    "k3s": {
        "node-role.kubernetes.io/control-plane": "true",
        "node-role.kubernetes.io/master": "true",
    },
}


def test_second_scheduler_mode_leaves_the_control_plane_alone(host, lab):
    """The cautious mode: a second kube-scheduler Deployment, no file on the node touched.

    kwok only pretends to run its pod, so this proves the objects (accepted by the real API,
    placed on a control-plane node as the flavour labels it) and the clean removal, not the
    second scheduler's own scheduling.
    """
    from kubernetes import client

    cp = f"lab-cp-{host.flavour}"
    lab.add_node(NodeSpec(cp, cpu="2", memory="4Gi", labels=CONTROL_PLANE_LABELS[host.flavour]))
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
        assert _cluster_objects(lab) == []
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


def test_a_cluster_without_a_metrics_api(host, lab):
    """kubeadm: site.yml installs the pinned metrics-server (with the homelab TLS option),
    a second run changes nothing, rollback removes exactly that copy. k3s: site.yml refuses,
    since k3s bundles metrics-server and a second copy would collide with it.

    kwok only pretends to run the Deployment, so this proves the objects the real API server
    accepted and their removal; the lab's own metrics API is put back afterwards.
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    with _without_lab_metrics_api(lab):
        site = ("playbooks/site.yml", "--tags", "loadwise_metrics_server")
        extra = {"loadwise_metrics_server_kubelet_insecure_tls": True}
        run = host.playbook(*site, extra=extra)
        if host.flavour == "k3s":
            assert run.rc != 0, run.tail()
            assert "k3s ships metrics-server, but v1beta1.metrics.k8s.io is missing" in run.said
            return
        assert run.rc == 0, run.tail()
        api = lab.api_client()
        reg = client.ApiregistrationV1Api(api)
        labels = reg.read_api_service("v1beta1.metrics.k8s.io").metadata.labels
        assert labels["app.kubernetes.io/managed-by"] == "loadwise-ansible", labels
        dep = client.AppsV1Api(api).read_namespaced_deployment("metrics-server", "kube-system")
        container = dep.spec.template.spec.containers[0]
        # the release loadwise_metrics_server_versions gives the lab's minor (1.36: 1.34+)
        assert container.image == "registry.k8s.io/metrics-server/metrics-server:v0.9.0"
        assert "--kubelet-insecure-tls" in container.args, container.args
        assert "Deployment/metrics-server" in _cluster_objects(lab)

        again = host.playbook(*site, extra=extra)
        assert again.rc == 0 and again.changed == {host.name: 0}, again.tail(120)

        run = host.playbook("playbooks/rollback.yml", "--tags", "loadwise_metrics_server")
        assert run.rc == 0, run.tail()
        assert _cluster_objects(lab) == []
        with pytest.raises(ApiException) as gone:
            reg.read_api_service("v1beta1.metrics.k8s.io")
        assert gone.value.status == 404


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


KUBEADM_MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"


def test_what_changed_after_site_survives_rollback(host, lab):
    """Last in the module (it leaves the node as an upgrade would).

    kubeadm: site.yml, then `kubeadm upgrade apply` as it happens on a node: a new
    kubernetesVersion and the operator's own flag in kubeadm-config, and the manifest the
    real kubeadm renders from it (with loadwise's --config, from the patched kubeadm-config);
    then rollback: the new version and flag stay in both, loadwise is gone from both, and the
    manifest on the node is what kubeadm renders from the rolled-back kubeadm-config.
    k3s: site.yml, then a later drop-in without "+" that drops loadwise's entry: the running
    scheduler lost loadwise's --config, and the next site.yml refuses before any change and
    says which file did it. Rollback keeps the operator's files.
    """
    site = ("playbooks/site.yml", "--tags", "loadwise_scheduler_config")
    rollback = ("playbooks/rollback.yml", "--tags", "loadwise_scheduler_config")
    run = host.playbook(*site)
    assert run.rc == 0, run.tail()
    _wait_cmdline(host, CONFIG_FLAG[host.flavour])

    if host.flavour == "k3s":
        later = "/etc/rancher/k3s/config.yaml.d/99-operator.yaml"
        _put_file(host, later, "kube-scheduler-arg:\n  - v=3\n")
        host.sh("systemctl restart k3s")
        assert CONFIG_FLAG["k3s"] not in _wait_cmdline(host, "--v=3")[0]
        run = host.playbook(*site)
        assert run.rc != 0, run.tail()
        assert f'{later} sets kube-scheduler-arg without "+" after loadwise' in run.said, run.tail()
        assert host.sh(f"cat {later}") == "kube-scheduler-arg:\n  - v=3\n"
        run = host.playbook(*rollback)
        assert run.rc == 0, run.tail()
        assert host.sh(f"cat {later}") == "kube-scheduler-arg:\n  - v=3\n"
        assert host.sh("ls /etc/rancher/k3s/config.yaml.d") == "99-operator.yaml\n"
        return

    from tests.lab.kubeadm_render import render_scheduler, scheduler_container

    cm = lab.core().read_namespaced_config_map("kubeadm-config", "kube-system")
    patched = cm.data["ClusterConfiguration"]
    assert CONFIG_FLAG["kubeadm"] in scheduler_container(render_scheduler(patched))["command"]
    upgraded = yaml.safe_load(patched)
    upgraded["kubernetesVersion"] = "v1.36.3"
    upgraded["scheduler"]["extraArgs"].insert(0, {"name": "v", "value": "3"})
    upgraded_text = yaml.safe_dump(upgraded)
    lab.core().patch_namespaced_config_map(
        "kubeadm-config", "kube-system", {"data": {"ClusterConfiguration": upgraded_text}}
    )
    _put_file(host, KUBEADM_MANIFEST, yaml.safe_dump(render_scheduler(upgraded_text)))
    _wait_cmdline(host, "--v=3")

    run = host.playbook(*rollback)
    assert run.rc == 0, run.tail()
    cc = yaml.safe_load(
        lab.core()
        .read_namespaced_config_map("kubeadm-config", "kube-system")
        .data["ClusterConfiguration"]
    )
    assert cc["kubernetesVersion"] == "v1.36.3"
    assert cc["scheduler"] == {"extraArgs": [{"name": "v", "value": "3"}]}, cc["scheduler"]
    on_node = yaml.safe_load(host.sh(f"cat {KUBEADM_MANIFEST}"))
    assert on_node == render_scheduler(yaml.safe_dump(cc))
    container = scheduler_container(on_node)
    assert container["image"] == "registry.k8s.io/kube-scheduler:v1.36.3"
    assert "--v=3" in container["command"] and "loadwise" not in str(on_node)
    cmdlines = _wait_cmdline(host, "--v=3")
    assert "loadwise" not in cmdlines[0], cmdlines
    assert host.sh("ls /etc/kubernetes/loadwise-scheduler-config.yaml 2>/dev/null || true") == ""
    assert _scheduler_healthz() == b"ok"

    # Point 9: kubeadm-config already names loadwise's file (an earlier run on another
    # control-plane node), and this node's change fails: its restore removes the file here,
    # so kubeadm-config must stop naming it (a join or upgrade of this node would otherwise
    # render a scheduler whose hostPath File volume is missing).
    from tests.ansible.test_filter_plugin import plugin

    other_node = yaml.safe_dump(
        plugin.loadwise_cluster_configuration(cc, "/etc/kubernetes/loadwise-scheduler-config.yaml")
    )
    lab.core().patch_namespaced_config_map(
        "kubeadm-config", "kube-system", {"data": {"ClusterConfiguration": other_node}}
    )
    run = host.playbook(*site, extra=BROKEN)
    assert run.rc != 0 and "restored the previous files" in run.said, run.tail()
    assert host.sh("ls /etc/kubernetes/loadwise-scheduler-config.yaml 2>/dev/null || true") == ""
    after = yaml.safe_load(
        lab.core()
        .read_namespaced_config_map("kubeadm-config", "kube-system")
        .data["ClusterConfiguration"]
    )
    assert after == cc, after.get("scheduler")
