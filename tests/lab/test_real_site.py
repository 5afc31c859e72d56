"""End to end on a real kubeadm cluster: playbooks/site.yml and rollback.yml on the control-plane
node of `python -m lab realnodes` (lab/realnodes.py), exactly as on an operator's cluster.

Nothing here is a stand-in: kubeadm wrote the scheduler's static pod manifest and
kube-system/kubeadm-config; the real kubelet restarts kube-scheduler from the manifest the role
edits (its mounts and probes included); site.yml's add-ons run from local images on the real
kubelets (metrics-server scraping them, load-watcher reading metrics-server, the descheduler,
the second scheduler's Deployment); and the load the extender sees is real: a node made hot by
the lab's burner, measured from its cgroups. Ansible reaches the node over SSH on its own
address, the controller holds the cluster's admin kubeconfig, the inventory has kubespray's
layout and the variables an operator of this cluster sets (lab/realnodes.py SITE_VARS).

The tests run in order against one cluster: check mode -> another cluster's kubeconfig
refused -> bad variables refused -> rollback before any site.yml -> a site.yml killed before
its proof, proven by the next -> site.yml (at -vvv, nothing secret printed) -> only the
scheduler's certificate reaches the extender -> second run -> a hung extender restarted by its
watchdog -> a rejected config restored -> real load steers placement -> rollback (and the
stock scheduler's control) -> second-scheduler mode, reading Prometheus ->
`kubeadm upgrade apply` re-renders loadwise's flag, and rollback
after it leaves what kubeadm renders without loadwise (that last one only in `make test-full`).

Ansible's strategy (tests/ansible_strategy.py): the runs that are an operator's own path run
on ansible-core's linear strategy, as an operator's do: the killed first run, the -vvv run whose
output is searched for secrets, and the rollback back to kubeadm's files. The others ask what
the roles do and go through Mitogen's, as the rest of `make test` does.

Marked `lab`, but in the xdist group "realnodes" with the other real-node tests, not the lab's
(its nodes use no lab port or process; tests/conftest.py). Alone:
`flock /tmp/loadwise-lab.lock .venv/bin/python -m pytest tests/lab/test_real_site.py -n0`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lab import EXTENDER_HEALTH_URL, realnodes
from lab import prometheus as lab_prometheus
from lab.hosts import REPO
from lab.processes import wait_for
from lab.workloads import create_deployment, delete, placements, scored_events
from tests import ansible_strategy
from tests.lab import leaks
from tests.lab.e2e import another_clusters_kubeconfig, cluster_objects
from tests.lab.kubeadm_render import render_scheduler, scheduler_container

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("realnodes")]

CP = realnodes.CONTROL_PLANE
HOT, COOL = realnodes.WORKERS
CONFIG = "/etc/kubernetes/loadwise-scheduler-config.yaml"
CONFIG_FLAG = f"--config={CONFIG}"
MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"
SCHEDULER_POD = f"kube-scheduler-{CP}"
# Every file kubeadm, the kubelet's unit and loadwise keep on the node, with its checksum:
# rollback must give these back byte for byte.
FILES = "find /etc/kubernetes /etc/systemd/system -type f | LC_ALL=C sort | xargs sha256sum"
# The real load: the burner on HOT spends 800m of CPU (67% of the node's 1.2 cores
# allocatable, lab/realnodes.py) while requesting 10m, a load nobody requested.
BURN_MILLICORES = 800
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


@pytest.fixture(scope="module")
def pristine(real_host, real_without_loadwise):
    """What kubeadm left, before any playbook of this module: the node's files and
    kubeadm-config's text (the shared cluster's fixture has proven no loadwise is there)."""
    real_kube = real_without_loadwise
    return {"files": real_host.sh(FILES), "kubeadm_config": kubeadm_config(real_kube)}


def kubeadm_config(real_kube) -> str:
    cm = real_kube.core().read_namespaced_config_map("kubeadm-config", "kube-system")
    return str(cm.data["ClusterConfiguration"])


def scheduler_ready(real_kube) -> bool:
    return realnodes.ready_scheduler_image(real_kube) is not None


def assert_untouched(real_host, real_kube, pristine) -> None:
    assert real_host.sh(FILES) == pristine["files"]
    assert kubeadm_config(real_kube) == pristine["kubeadm_config"]
    assert cluster_objects(real_kube) == []
    cmdlines = real_host.scheduler_cmdlines()
    assert len(cmdlines) == 1 and "loadwise" not in cmdlines[0], cmdlines


def test_check_mode_shows_the_edit_and_changes_nothing(real_host, real_kube, pristine):
    run = real_host.playbook("playbooks/site.yml", "--check", "--diff")
    assert run.rc == 0, run.tail()
    assert re.search(rf"^\+\s*- {re.escape(CONFIG_FLAG)}", run.stdout, re.M), run.tail(200)
    assert_untouched(real_host, real_kube, pristine)
    assert real_host.sh("ls -d /etc/loadwise /opt/loadwise 2>/dev/null || true") == ""


def test_a_controller_pointed_at_another_cluster_is_refused(
    real_host, real_kube, pristine, tmp_path
):
    other = another_clusters_kubeconfig(real_host.kubeconfig, tmp_path)
    run = real_host.playbook("playbooks/site.yml", extra={"loadwise_kubeconfig": other})
    assert run.rc != 0, run.tail()
    assert f"{CP} is not in the cluster the controller would change" in run.said, run.tail()
    assert "PLAY [Cluster add-ons" not in run.stdout, run.tail()
    assert_untouched(real_host, real_kube, pristine)


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"loadwise_scheduler_config_weight": -5}, "loadwise_scheduler_config_weight"),
        ({"loadwise_extender_polcy": "least-used"}, "did you mean loadwise_extender_policy?"),
    ],
    ids=["negative-weight", "misspelled"],
)
def test_a_bad_variable_is_refused_before_any_change(real_host, real_kube, pristine, bad, named):
    run = real_host.playbook("playbooks/site.yml", extra=bad)
    assert run.rc != 0, run.tail()
    assert named in run.said, run.tail()
    assert "PLAY [Cluster add-ons" not in run.stdout, run.tail()
    assert_untouched(real_host, real_kube, pristine)


def test_rollback_where_site_never_ran_changes_nothing(real_host, real_kube, pristine):
    run = real_host.playbook("playbooks/rollback.yml")
    assert run.rc == 0, run.tail()
    assert run.changed == {CP: 0}, run.tail(120)
    assert_untouched(real_host, real_kube, pristine)


PROOF = f"/var/lib/loadwise/backup/written{MANIFEST}.sha256"


def pids_of(real_host, comm: str) -> str:
    """The pids of the node's processes named `comm`, read from /proc."""
    return real_host.sh(
        "for p in /proc/[0-9]*; do read -r c < $p/comm 2>/dev/null || continue;"
        f' [ "$c" = {comm} ] && echo ${{p#/proc/}}; done; true'
    ).strip()


def scheduler_pid(real_host) -> str:
    """The pid of the node's kube-scheduler process(es), read from /proc."""
    return pids_of(real_host, "kube-scheduler")


def test_a_site_run_killed_before_its_proof_is_proven_by_the_next(real_host, real_kube):
    """The first site.yml is killed (SIGKILL to ansible-playbook and its workers, as a lost
    controller leaves a node) once the kubelet's manifest names loadwise's config and before
    the run proved that scheduler healthy and recorded it in written/. The next run finds
    the files right but unproven: it says so, restarts the scheduler, proves it and records
    it, instead of seeing nothing to change."""
    proc = subprocess.Popen(
        real_host.playbook_argv("playbooks/site.yml"),
        cwd=REPO,
        env=ansible_strategy.stock(real_host.env()),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(
            "site.yml to write the scheduler's manifest",
            lambda: proc.poll() is not None or CONFIG_FLAG in real_host.read_text(MANIFEST),
            600,
            interval=0.5,
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, f"site.yml ended by itself: rc {proc.returncode}"
    assert real_host.sh(f"ls {PROOF} 2>/dev/null || true") == "", "killed after its proof"

    before = scheduler_pid(real_host)
    # check mode tells the change a real run will make, and makes none
    run = real_host.playbook("playbooks/site.yml", "--check", "--tags", "loadwise_scheduler_config")
    assert run.rc == 0, run.tail()
    assert "a run without --check restarts and proves it" in run.said, run.tail()
    assert run.changed[CP] > 0, run.tail()
    assert real_host.sh(f"ls {PROOF} 2>/dev/null || true") == ""

    run = real_host.playbook("playbooks/site.yml", "--tags", "loadwise_scheduler_config")
    assert run.rc == 0, run.tail()
    assert "no run proved the scheduler healthy with it" in run.said, run.tail()
    # the killed run's marker, said loudly before this run finishes the change
    assert "STOPPED HALF WAY THROUGH A SCHEDULER CHANGE" in run.said, run.tail()
    assert real_host.sh("ls /var/lib/loadwise/backup/IN-PROGRESS 2>/dev/null || true") == ""
    assert run.changed[CP] > 0, run.tail()
    after = scheduler_pid(real_host)
    assert after and after != before, (before, after)
    assert CONFIG_FLAG in " ".join(real_host.scheduler_cmdlines())
    assert scheduler_ready(real_kube)
    assert real_host.sh(f"ls {PROOF}").strip() == PROOF


def test_site_rewires_the_kubelets_scheduler_and_the_add_ons_run(real_host, real_kube):
    # At -vvv, where Ansible prints every task's result: none may show a key of the node's
    # (scheduler.conf, admin.conf, pki, loadwise's TLS) or a token loadwise's run made.
    before = leaks.secrets_on_node(real_host)
    assert "/etc/kubernetes/scheduler.conf" in before and "/etc/kubernetes/admin.conf" in before
    run = real_host.playbook("playbooks/site.yml", "-vvv", env=ansible_strategy.STOCK)
    assert run.rc == 0, run.tail()
    out = run.stdout + run.stderr
    # the tasks that read the credentials ran (and said so, censored)
    assert "Preflight | Read the node's scheduler kubeconfig" in out
    assert "the output has been hidden due to the fact that" in out
    tokens = leaks.loadwise_tokens(real_kube)
    assert "loadwise-extender-token" in tokens, tokens
    printed = leaks.printed(out, {**before, **leaks.secrets_on_node(real_host)}, tokens)
    assert not printed, f"printed at -vvv: {printed} (log: {real_host.workdir})"
    # its own scheduler, under the node's own name, is not taken for a joined node's
    assert JOINED_WARNING not in run.stdout, run.tail(80)

    # The kubelet restarted kube-scheduler from the edited manifest: the mirror pod shows the
    # flag and the hostPath of loadwise's file, and the process runs with the flag.
    cmdlines = real_host.scheduler_cmdlines()
    assert len(cmdlines) == 1 and CONFIG_FLAG in cmdlines[0].split(), cmdlines
    pod = real_kube.core().read_namespaced_pod(SCHEDULER_POD, "kube-system")
    assert CONFIG_FLAG in pod.spec.containers[0].command
    paths = {v.host_path.path for v in pod.spec.volumes if v.host_path}
    assert CONFIG in paths, paths
    assert scheduler_ready(real_kube)
    status, body = realnodes.node_get(CP, "https://127.0.0.1:10259/healthz")
    assert (status, body.strip()) == (200, "ok")

    # kubeadm-config names the file, so a join or upgrade renders it (the last test runs one)
    cc = yaml.safe_load(kubeadm_config(real_kube))
    args = {a["name"]: a["value"] for a in cc["scheduler"]["extraArgs"]}
    assert args["config"] == CONFIG, cc["scheduler"]

    # The add-ons run on the real kubelets from the images in containerd.
    apps = client.AppsV1Api(real_kube.api_client())
    for name in ("metrics-server", "load-watcher", "loadwise-descheduler"):
        dep = apps.read_namespaced_deployment(name, "kube-system")
        assert dep.status.available_replicas == 1, (name, dep.status)
    # metrics-server scraped every real kubelet and serves the metrics API through the
    # aggregator (the API server reaches its pod through kube-proxy's Service rules)
    metrics = client.CustomObjectsApi(real_kube.api_client())

    def node_metrics():
        try:
            items = metrics.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes")
        except ApiException:
            return None
        return {n["metadata"]["name"] for n in items["items"]} == set(realnodes.nodes())

    wait_for("NodeMetrics for every node", node_metrics, timeout=120)
    # The extender (systemd on the node) reads load-watcher through its Service.
    status, body = realnodes.node_get(CP, f"{EXTENDER_HEALTH_URL}/readyz")
    assert status == 200 and "3 nodes from load-watcher" in body, body
    assert real_host.sh("stat -c '%U %a' /etc/loadwise/extender.kubeconfig").split() == [
        "loadwise-extender", "600"]  # fmt: skip


# Calls to the extender's port from inside the control-plane node, where any local process (and
# any hostNetwork pod) would make them: each prints the HTTP status, or "refused: <why>".
CALLER = r"""
import http.client, json, ssl, sys
TLS = "/etc/loadwise/tls"
BODY = json.dumps({"Pod": {"metadata": {"name": "not-a-pod", "namespace": "default"}},
                   "NodeNames": sys.argv[2:]})
def call(cert, key):
    try:
        if cert == "plain":
            conn = http.client.HTTPConnection("127.0.0.1", 8888, timeout=10)
        else:
            ctx = ssl.create_default_context(cafile=f"{TLS}/scheduler/ca.crt")
            if cert:
                ctx.load_cert_chain(cert, key)
            conn = http.client.HTTPSConnection("127.0.0.1", 8888, context=ctx, timeout=10)
        conn.request("POST", "/scheduler/filter", BODY, {"Content-Type": "application/json"})
        return str(conn.getresponse().status)
    except (OSError, http.client.HTTPException) as e:
        return f"refused: {type(e).__name__}: {e}"
cert, _, key = sys.argv[1].partition(",")
print(call(cert, key))
"""


def test_only_the_schedulers_certificate_reaches_the_extender(real_host, real_kube):
    """Mutual TLS on the real node, as site.yml left it: from the control-plane node a call in
    plain HTTP, with no certificate, with a self-signed one, or with the extender's own (its CA
    signed it, but for serving) gets no answer from the extender's port; the scheduler's own
    certificate does. That the scheduler's real calls get through is the next test's placement
    under real load."""
    nodes = " ".join(realnodes.nodes())
    real_host.sh(
        "set -e; d=/tmp/loadwise-impostor; rm -rf $d; mkdir $d; cd $d;"
        " openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1"
        " -subj /CN=kube-scheduler -addext extendedKeyUsage=clientAuth"
        " -keyout self.key -out self.crt 2>/dev/null;"
        f" cat > caller.py <<'LOADWISE_EOF'\n{CALLER}\nLOADWISE_EOF"
    )
    tls = "/etc/loadwise/tls"
    said = {
        who: real_host.sh(f"python3 /tmp/loadwise-impostor/caller.py {arg} {nodes}").strip()
        for who, arg in {
            "plain HTTP": "plain",
            "no certificate": "''",
            "self-signed": "/tmp/loadwise-impostor/self.crt,/tmp/loadwise-impostor/self.key",
            "the extender's own": f"{tls}/server.crt,{tls}/server.key",
            "the scheduler's": f"{tls}/scheduler/client.crt,{tls}/scheduler/client.key",
        }.items()
    }
    real_host.sh("rm -rf /tmp/loadwise-impostor")
    print(f"\ncalls to 127.0.0.1:8888 from {CP}: {said}")
    assert said.pop("the scheduler's") == "200", said
    assert all(answer.startswith("refused: ") for answer in said.values()), said
    # and the scheduler itself was given exactly that: the CA, its certificate, https
    config = yaml.safe_load(real_host.read_text(CONFIG))["extenders"][0]
    assert config["urlPrefix"] == "https://127.0.0.1:8888/scheduler" and config["enableHTTPS"]
    assert config["tlsConfig"] == {
        "caFile": f"{tls}/scheduler/ca.crt",
        "certFile": f"{tls}/scheduler/client.crt",
        "keyFile": f"{tls}/scheduler/client.key",
    }
    pod = real_kube.core().read_namespaced_pod(SCHEDULER_POD, "kube-system")
    mounts = {m.mount_path: m.read_only for m in pod.spec.containers[0].volume_mounts}
    assert mounts.get(f"{tls}/scheduler") is True, mounts


JOINED_WARNING = "WARNING: the kube-scheduler on"


def joined_scheduler_pod(node: str) -> dict:
    """What the kubelet of a control-plane node joined after site.yml runs: kubeadm's
    scheduler rendered from the patched kubeadm-config (loadwise's flag and its hostPath File
    mount), on a node where no site.yml wrote that file. As a plain pod with kubeadm's label on
    a worker of this cluster, which no run covers: its kubelet holds it just the same."""
    image = f"registry.k8s.io/kube-scheduler:{realnodes.K8S_VERSION}"
    mount = {"name": "loadwise-config", "mountPath": CONFIG, "readOnly": True}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"kube-scheduler-{node}", "namespace": "kube-system",
                     "labels": {"component": "kube-scheduler", "tier": "control-plane"}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "kube-scheduler", "image": image,
                            "command": ["kube-scheduler", CONFIG_FLAG], "volumeMounts": [mount]}],
            "volumes": [{"name": "loadwise-config",
                         "hostPath": {"path": CONFIG, "type": "File"}}],
        },
    }  # fmt: skip


def test_a_second_site_run_changes_nothing(real_host, real_kube):
    """...and names a control-plane node whose scheduler waits for loadwise's config because
    no run covered it (a node joined after site.yml), without changing anything for it."""
    core = real_kube.core()
    core.create_namespaced_pod("kube-system", joined_scheduler_pod(COOL))
    try:
        run = real_host.playbook("playbooks/site.yml")
    finally:
        core.delete_namespaced_pod(f"kube-scheduler-{COOL}", "kube-system", grace_period_seconds=0)
    assert run.rc == 0, run.tail()
    assert run.changed == {CP: 0}, run.tail(120)
    assert run.said.count(JOINED_WARNING) == 1, run.tail(80)
    # (the YAML callback doubles the apostrophe of "loadwise's" inside its quotes)
    assert f"{JOINED_WARNING} {COOL} names loadwise" in run.said, run.tail(80)
    assert f"config ({CONFIG}) and is held by its kubelet" in run.said, run.tail(80)
    assert f"site.yml --limit {COOL}" in run.said, run.tail(80)
    run = real_host.playbook("playbooks/site.yml", "--check", "--diff")
    assert run.rc == 0, run.tail()
    assert run.changed == {CP: 0}, run.tail(120)


def test_a_hung_extender_is_restarted_by_its_watchdog(real_host):
    """The extender's unit is Type=notify with WatchdogSec (extender/sdnotify.py sends
    WATCHDOG=1 from its event loop). Frozen with SIGSTOP, as a deadlocked loop looks to
    systemd, it stops sending; the node's real systemd kills it and starts it again, and the
    new process is active only once it said READY=1 again."""

    def unit() -> dict[str, str]:
        props = "MainPID,NRestarts,Type,WatchdogUSec,ActiveState"
        out = real_host.sh(f"systemctl show loadwise-extender -p {props}")
        return dict(line.split("=", 1) for line in out.split())

    before = unit()
    assert (before["Type"], before["WatchdogUSec"], before["ActiveState"]) == (
        "notify", "30s", "active",
    ), before  # fmt: skip
    real_host.sh(f"kill -STOP {before['MainPID']}")
    t0 = time.monotonic()
    after = wait_for(
        "systemd to restart the frozen extender",
        lambda: (
            (u := unit())["NRestarts"] != before["NRestarts"]
            and u["ActiveState"] == "active"
            and u["MainPID"] not in ("0", before["MainPID"])
            and u
        ),
        120,
        interval=2,
    )
    took = time.monotonic() - t0
    journal = real_host.sh("journalctl -u loadwise-extender --no-pager -n 100")
    print(f"\nfrozen pid {before['MainPID']} replaced by {after['MainPID']} after {took:.0f}s")
    assert "Watchdog timeout" in journal, journal[-3000:]
    assert int(after["NRestarts"]) == int(before["NRestarts"]) + 1, after


def test_a_config_the_scheduler_rejects_is_restored(real_host, real_kube):
    """On the converged node: a config the real kube-scheduler refuses (an unknown score
    plugin). The kubelet restarts the scheduler from the edited manifest, the scheduler exits;
    the role sees it, puts the previous files back, and the kubelet runs the scheduler with
    them again. The run fails naming the scheduler's own error. (Only the scheduler config's
    tag, as an operator re-runs one part: the add-ons before it are converged already.)"""
    converged = real_host.sh(FILES)
    # By default the node's own kube-scheduler refuses it before any file changes:
    refused = real_host.playbook(
        "playbooks/site.yml", "--tags", "loadwise_scheduler_config", extra=BROKEN
    )
    assert refused.rc != 0, refused.tail()
    assert "The scheduler rejects the generated configuration" in refused.said, refused.tail()
    assert "LoadwiseNoSuchPlugin" in refused.said, refused.tail()
    assert real_host.sh(FILES) == converged
    # Without that validation the restart finds it, and the previous files come back:
    run = real_host.playbook(
        "playbooks/site.yml",
        "--tags",
        "loadwise_scheduler_config",
        extra={**BROKEN, "loadwise_scheduler_config_validate_command": ""},
    )
    assert run.rc != 0, run.tail()
    assert "restored the previous files" in run.said, run.tail()
    assert "LoadwiseNoSuchPlugin" in run.said, run.tail()
    assert real_host.sh(FILES) == converged
    wait_for(
        "the kubelet's scheduler with loadwise's config again, ready",
        lambda: (
            CONFIG_FLAG in " ".join(real_host.scheduler_cmdlines()) and scheduler_ready(real_kube)
        ),
        120,
    )


@pytest.fixture(scope="module")
def hot_node(real_host, real_kube):
    """The burner on HOT from when the extender's load shows it; what metrics-server measured
    on each worker then. It burns 800m of this machine's 2 cores, which slows everything else
    running beside it, so it is started by the last tests that need it (the hot-node test and
    its control after rollback, which stops it when done) rather than earlier in the module."""
    try:
        hot = realnodes.make_hot(real_kube, HOT, BURN_MILLICORES, EXTENDER_HEALTH_URL)
        yield {HOT: hot, COOL: realnodes.node_cpu_millicores(real_kube, COOL)}
    finally:
        delete(real_kube, "burner")


def test_a_node_hot_with_real_load_gets_no_new_pods(real_host, real_kube, hot_node):
    """The issue's point: load measured from real cgroups (kubelet -> metrics-server ->
    load-watcher -> extender) keeps new pods off the hot node while the cool one takes them,
    but for the one replica that keeps the Deployment on two nodes; by requests alone the
    two workers are the same."""
    before = request_count_on(real_host, "prioritize"), request_count_on(real_host, "filter")
    since = time.time()
    create_deployment(real_kube, "steered", 10, realnodes.workload())
    try:
        where = placements(real_kube, "steered", 10, timeout=120)
    finally:
        delete(real_kube, "steered")
    after = request_count_on(real_host, "prioritize"), request_count_on(real_host, "filter")
    assert after[0] > before[0] and after[1] > before[1], f"extender requests {before} -> {after}"
    why = [e.message for e in scored_events(real_kube, "steered", since=since, at_least=10)]
    # All but one: the hot node is under its threshold (the filter passes it), so one
    # replica goes there rather than leave the whole Deployment on one node
    # (docs/contracts.md, "Estimating pods in flight": spreading never puts every pod of a
    # set on one node while another has room).
    assert where.get(COOL, 0) == 9 and where.get(HOT, 0) == 1, (
        f"measured {hot_node}; placed {dict(where)}; why: {why}"
    )
    assert why and sum(f"bound to {COOL}" in m for m in why) >= 9, why


def burner(signal_name: str) -> None:
    """Send SIGSTOP or SIGCONT to the burner's process on HOT (its pod stays bound)."""
    realnodes.sh(HOT, f"pkill -{signal_name} -x burner")


def request_count_on(real_host, verb: str) -> float:
    """The extender's served requests of ``verb``, read inside the node."""
    name = f'loadwise_extender_request_duration_seconds_count{{verb="{verb}"}}'
    return realnodes.extender_metric(CP, EXTENDER_HEALTH_URL, name) or 0.0


def test_rollback_restores_every_file_and_the_stock_scheduler(
    real_host, real_kube, pristine, hot_node
):
    objects = cluster_objects(real_kube)
    # The burner is paused while the rollbacks run (800m of this machine's 2 cores otherwise
    # slows them) and burns again before the control below, which needs the load.
    burner("STOP")
    other = another_clusters_kubeconfig(real_host.kubeconfig, real_host.workdir)
    run = real_host.playbook("playbooks/rollback.yml", extra={"loadwise_kubeconfig": other})
    assert run.rc != 0 and f"{CP} is not in the cluster" in run.said, run.tail()
    assert cluster_objects(real_kube) == objects

    run = real_host.playbook("playbooks/rollback.yml", env=ansible_strategy.STOCK)
    assert run.rc == 0, run.tail()
    wait_for(
        "the kubelet's scheduler without loadwise, ready", lambda: scheduler_ready(real_kube), 120
    )
    assert_untouched(real_host, real_kube, pristine)
    assert (
        real_host.sh("ls -d /etc/loadwise /opt/loadwise /var/lib/loadwise 2>/dev/null || true")
        == ""
    )
    assert real_host.sh("getent passwd loadwise-extender || true") == ""
    with pytest.raises(ApiException) as gone:
        client.ApiregistrationV1Api(real_kube.api_client()).read_api_service(
            "v1beta1.metrics.k8s.io"
        )
    assert gone.value.status == 404
    status, body = realnodes.node_get(CP, "https://127.0.0.1:10259/healthz")
    assert (status, body.strip()) == (200, "ok")

    # The control for the test above: the burner runs again, and the stock scheduler, which
    # sees requests only, spreads the same Deployment over both workers.
    burner("CONT")
    create_deployment(real_kube, "stock", 10, realnodes.workload())
    try:
        where = placements(real_kube, "stock", 10, timeout=120)
    finally:
        delete(real_kube, "stock")
        delete(real_kube, "burner")  # its last user (the fixture's own delete then finds none)
    assert where[HOT] > 0, f"after rollback the scheduler still avoids {HOT}: {dict(where)}"


def test_second_scheduler_mode_binds_pods_and_leaves_the_node_alone(
    real_host, real_kube, pristine, real_prometheus
):
    """The cautious mode: kube-scheduler as a Deployment on the control-plane node (the real
    kubelet runs the image kubeadm's own static pod uses), calling the extender on the
    node's loopback; pods that name it are bound by it. No file on the node changes.

    The same run reads the nodes' load from Prometheus instead of load-watcher (the source an
    operator who has Prometheus picks; lab/prometheus.py, whose rules
    tests/lab/test_real_prometheus.py checks): one site.yml run proves both."""
    # the rules answer for every node first (a minute of samples), as the extender's
    # readiness, which the role waits for, needs
    lab_prometheus.ratios(real_prometheus, realnodes.nodes(), timeout=180)
    run = real_host.playbook(
        "playbooks/site.yml",
        extra={
            "loadwise_scheduler_config_mode": "second-scheduler",
            "loadwise_extender_source": "prometheus",
            "loadwise_extender_source_url": real_prometheus.url,
            "loadwise_load_watcher_enabled": False,
        },
    )
    assert run.rc == 0, run.tail()
    source = yaml.safe_load(real_host.read_text("/etc/loadwise/extender.yaml"))["source"]
    # no query or node label configured: the extender's defaults, the rules' names
    assert (source["kind"], source["url"]) == ("prometheus", real_prometheus.url), source
    assert "prometheus" not in source, source
    status, body = realnodes.node_get(CP, f"{EXTENDER_HEALTH_URL}/readyz")
    assert status == 200 and "3 nodes from prometheus" in body, body
    # what the extender holds: a fresh snapshot of the three nodes
    held = {
        name: realnodes.extender_metric(CP, EXTENDER_HEALTH_URL, f"loadwise_extender_{name}")
        for name in ("nodes_with_load", "load_stale", "source_errors_total")
    }
    assert (held["nodes_with_load"], held["load_stale"]) == (3, 0), held
    assert real_host.sh(FILES + " | grep -v ' /etc/systemd/system/'") == "".join(
        ln + "\n" for ln in pristine["files"].splitlines() if " /etc/systemd/system/" not in ln
    )
    apps = client.AppsV1Api(real_kube.api_client())
    dep = apps.read_namespaced_deployment("loadwise-scheduler", "kube-system")
    assert dep.status.available_replicas == 1, dep.status
    # confined as the add-ons are (the kubelet runs it so: available above)
    container = dep.spec.template.spec.containers[0]
    assert container.resources.limits == {"memory": "512Mi"}, container.resources
    assert container.security_context.seccomp_profile.type == "RuntimeDefault"
    pods = real_kube.core().list_namespaced_pod(
        "kube-system", label_selector="app.kubernetes.io/name=loadwise-scheduler"
    )
    assert [p.spec.node_name for p in pods.items] == [CP]

    template = realnodes.workload()
    template["spec"]["schedulerName"] = "loadwise-scheduler"
    create_deployment(real_kube, "second", 3, template)
    try:
        where = placements(real_kube, "second", 3, timeout=120)
        events = real_kube.core().list_namespaced_event(
            "default", field_selector="reason=Scheduled"
        )
        by = {
            e.reporting_component
            for e in events.items
            if e.involved_object.name.startswith("second-")
        }
    finally:
        delete(real_kube, "second")
    assert set(where) <= set(realnodes.WORKERS) and sum(where.values()) == 3, where
    assert by == {"loadwise-scheduler"}, by

    run = real_host.playbook("playbooks/rollback.yml")
    assert run.rc == 0, run.tail()
    assert_untouched(real_host, real_kube, pristine)


# full (about 10 min: all of site.yml, then the upgrade): the default run has kubeadm's own render
# of the edited and the restored kubeadm-config, upgrade included, with the real kubeadm
# binary (tests/lab/test_kubeadm_render.py), and the rollback's choice of bytes after an upgrade
# (tests/ansible/test_filter_rollback.py). An upgrade that changes the release, followed by
# site.yml and rollback.yml: tests/lab/test_real_upgrade.py.
@pytest.mark.full
def test_kubeadm_upgrade_keeps_loadwise_and_rollback_after_it_leaves_kubeadms_render(
    real_host, real_kube, pristine
):
    """Last in the module (the upgrade renews scheduler.conf and leaves kubeadm's backups).

    site.yml, then the real `kubeadm upgrade apply` on the node: it renders the scheduler's
    manifest again from kubeadm-config, which names loadwise's file and mount, so the kubelet's
    scheduler keeps loadwise. Rollback then leaves kubeadm-config without loadwise (the rest as
    the upgrade stored it) and on the node the manifest kubeadm renders from that."""
    # All of site.yml: the scheduler's client certificate (TLS, on by default) is the extender
    # role's, the extender needs its load source to be ready (load-watcher, which reads
    # metrics-server), and the rollbacks before this test removed all three.
    run = real_host.playbook("playbooks/site.yml")
    assert run.rc == 0, run.tail()
    written = real_host.read_text(MANIFEST)
    realnodes.upgrade_control_plane()  # to the release it runs: a render, no version change
    rendered = real_host.read_text(MANIFEST)
    assert rendered != written, "kubeadm did not write the scheduler's manifest again"
    container = scheduler_container(yaml.safe_load(rendered))
    assert CONFIG_FLAG in container["command"], container
    mounts = [m["mountPath"] for m in container["volumeMounts"]]
    # kubeadm-config carries the certificates' directory too, so its render keeps it
    assert CONFIG in mounts and "/etc/loadwise/tls/scheduler" in mounts, container
    wait_for(
        "the kubelet's scheduler after the upgrade, with loadwise's flag, ready",
        lambda: (
            CONFIG_FLAG in " ".join(real_host.scheduler_cmdlines()) and scheduler_ready(real_kube)
        ),
        120,
    )
    upgraded = yaml.safe_load(kubeadm_config(real_kube))

    run = real_host.playbook("playbooks/rollback.yml", "--tags", "loadwise_scheduler_config")
    assert run.rc == 0, run.tail()
    after = kubeadm_config(real_kube)
    assert CONFIG not in after  # (the lab names its cluster "loadwise-lab")
    cc = yaml.safe_load(after)
    assert cc["scheduler"] == yaml.safe_load(pristine["kubeadm_config"])["scheduler"]
    assert {k: v for k, v in cc.items() if k != "scheduler"} == {
        k: v for k, v in upgraded.items() if k != "scheduler"
    }
    on_node = yaml.safe_load(real_host.read_text(MANIFEST))
    assert on_node == render_scheduler(after)
    wait_for(
        "the kubelet's scheduler without loadwise, ready", lambda: scheduler_ready(real_kube), 120
    )
    cmdlines = real_host.scheduler_cmdlines()
    assert len(cmdlines) == 1 and "loadwise" not in cmdlines[0], cmdlines
    assert real_host.sh(f"ls {CONFIG} 2>/dev/null || true") == ""

    # On the real node: kubeadm-config already names loadwise's file (an
    # earlier run on another control-plane node) and this node's change fails. Its restore
    # removes the file here, so kubeadm-config must stop naming it: a join or upgrade of this
    # node would otherwise render a scheduler whose hostPath File volume is missing.
    from tests.ansible.test_filter_plugin import plugin

    other_node = yaml.safe_dump(plugin.loadwise_cluster_configuration(cc, CONFIG))
    real_kube.core().patch_namespaced_config_map(
        "kubeadm-config", "kube-system", {"data": {"ClusterConfiguration": other_node}}
    )
    # validation off: the node's own scheduler would refuse BROKEN before any change, and
    # this proves the restore after the restart (test_a_config_the_scheduler_rejects_is_restored
    # proves the refusal)
    run = real_host.playbook(
        "playbooks/site.yml",
        "--tags",
        "loadwise_scheduler_config",
        extra={**BROKEN, "loadwise_scheduler_config_validate_command": ""},
    )
    assert run.rc != 0 and "restored the previous files" in run.said, run.tail()
    assert real_host.sh(f"ls {CONFIG} 2>/dev/null || true") == ""
    assert yaml.safe_load(kubeadm_config(real_kube)) == cc
