"""Faults on the real-node kubeadm cluster (lab/realnodes.py) while the scheduler places pods,
with loadwise installed by site.yml and one worker (HOT) made hot by the lab's burner.

Each test breaks one part of the chain (kubelet -> metrics-server -> load-watcher -> extender
-> kube-scheduler) during a burst of BURST pods and proves: every pod is bound within
BIND_SECONDS (none lost or stuck Pending), what the extender's /readyz and /metrics or the
cluster's Events say meanwhile, how long the recovery took (printed as
`fault <name>: recovered in N.N s`), and that once the load data is back no new pod goes to
HOT. The faults: the extender killed (SIGKILL), load-watcher scaled to zero, metrics-server
scaled to zero, kube-scheduler's process ended, kube-apiserver's process ended, a worker's
container killed and started.

full (about 15 min here, most of it site.yml, the burner's first measurement and the waits
for a stale snapshot and a NotReady node): the default run has scheduling going on with the
extender down on the lab's stand-in nodes (test_e2e_scheduling.py), stale data in /readyz and
in the scores on the extender's own tests (tests/extender/test_server.py, test_herding.py), and
a hung extender restarted by its watchdog on the real node (test_real_site.py). After the
other real-node modules (the installer's ends rolled back; tests/conftest.py REALNODE_ORDER)
and before test_real_upgrade.py, which replaces the cluster. Alone: `flock
/tmp/loadwise-lab.lock .venv/bin/python -m pytest tests/lab/test_real_faults.py -n0 -m full -s`.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from kubernetes.client.exceptions import ApiException

from lab import EXTENDER_HEALTH_URL, realnodes
from lab.processes import wait_for
from lab.workloads import apps, create_deployment, delete, placements, scored_events
from tests.lab import test_real_site
from tests.lab.test_real_site import CONFIG_FLAG, pids_of, scheduler_pid, scheduler_ready

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("realnodes"), pytest.mark.full]

CP = realnodes.CONTROL_PLANE
HOT, COOL = realnodes.WORKERS
BURST = 8
# Every pod of a burst bound within this: a pod the scheduler could not place waits its
# backoff (at most 10 s, podMaxBackoffSeconds' default), a restarted kube-scheduler first takes
# the lease (leaseDuration, 15 s by default); the rest is this machine's 2 busy cores.
BIND_SECONDS = 180
# site.yml's settings for the extender (roles/loadwise_extender/defaults/main.yml): it reads
# its source every 15 s and calls the load stale past 180 s; load-watcher collects once a
# minute. A snapshot goes stale at most 180 + 60 + 15 s after its source stopped (a minute
# more for this machine).
STALE_SECONDS = 180 + 60 + 15 + 60
SOURCE = "3 nodes from load-watcher"
LOAD_STALE = "loadwise_extender_load_stale"
SOURCE_ERRORS = "loadwise_extender_source_errors_total"


def readyz() -> tuple[int, str]:
    return realnodes.node_get(CP, f"{EXTENDER_HEALTH_URL}/readyz")


def metric(name: str) -> float | None:
    return realnodes.extender_metric(CP, EXTENDER_HEALTH_URL, name)


def extender_ready() -> bool:
    status, body = readyz()
    return status == 200 and SOURCE in body


def not_installed(real_host, kube) -> list[str]:
    """What of site.yml's end state is missing on the shared cluster: the kubelet's scheduler
    ready with loadwise's config, metrics-server and load-watcher available, the extender
    ready from load-watcher. (The extender alone does not tell: test_real_site.py's last test
    rolls back the scheduler's config only.)"""
    missing = []
    if CONFIG_FLAG not in " ".join(real_host.scheduler_cmdlines()):
        missing.append("the kubelet's scheduler runs without loadwise's config")
    if not scheduler_ready(kube):
        missing.append("the kubelet's scheduler is not ready")
    for name in ("metrics-server", "load-watcher"):
        try:
            dep = apps(kube).read_namespaced_deployment(name, "kube-system")
        except ApiException as e:
            missing.append(f"{name}: {e.status} {e.reason}")
            continue
        if dep.status.available_replicas != 1:
            missing.append(f"{name} not available: {dep.status}")
    status, body = readyz()
    if not (status == 200 and SOURCE in body):
        missing.append(f"the extender's /readyz: {status} {body.strip()}")
    return missing


@pytest.fixture(scope="module")
def installed(real_host, real_kube):
    """loadwise as site.yml leaves it: site.yml runs when anything of it is missing (the
    modules before this one end rolled back), then all of it is proven."""
    if not_installed(real_host, real_kube):
        run = real_host.playbook("playbooks/site.yml")
        assert run.rc == 0, run.tail()
    missing = not_installed(real_host, real_kube)
    assert not missing, missing
    return real_kube


# HOT burning from when the extender's load shows it (module-scoped, stopped at the module's
# end): test_real_site.py's fixture, here by its name. The tests ask for it after `installed`.
hot_node = test_real_site.hot_node


def recovered(fault: str, t0: float) -> float:
    """Print the recovery time since `t0` (time.monotonic()): the fault for what comes back by
    itself (the extender, the scheduler), the repair for what the test puts back (a Deployment
    scaled to zero, a stopped node), whose outage the test itself makes as long as it needs."""
    took = time.monotonic() - t0
    print(f"\nfault {fault}: recovered in {took:.1f} s")
    return took


def all_running(kube, name: str) -> bool:
    pods = kube.core().list_namespaced_pod("default", label_selector=f"app={name}").items
    return len(pods) == BURST and all(p.status.phase == "Running" for p in pods)


@contextlib.contextmanager
def burst(
    kube, name: str, fault: Callable[[], object] = lambda: None
) -> Iterator[tuple[Counter[str], float]]:
    """Inject `fault`, then create a burst of BURST pods, Deployment `name`, at once (the
    scheduler places them within a second or two, sooner than what the fault broke comes
    back). Yields where they were bound, every one within BIND_SECONDS of its creation, and
    the fault's time.monotonic(); on leaving, every pod runs (none stuck Pending) and the
    Deployment is deleted."""
    t0 = time.monotonic()
    fault()
    create_deployment(kube, name, BURST, realnodes.workload())
    try:
        yield placements(kube, name, BURST, timeout=BIND_SECONDS), t0
        wait_for(f"every pod of {name} running", lambda: all_running(kube, name), BIND_SECONDS, 2)
    finally:
        delete(kube, name)


def assert_hot_avoided(kube, name: str) -> None:
    """A burst after the recovery: every pod on COOL, each one scored by the extender."""
    since = time.time()
    with burst(kube, name) as (where, _):
        pass
    why = [e.message for e in scored_events(kube, name, since=since, at_least=BURST)]
    assert where == {COOL: BURST}, f"placed {dict(where)} after the recovery; why: {why}"
    assert len(why) == BURST and all(f"bound to {COOL}" in m for m in why), why


def scale(kube, name: str, replicas: int) -> None:
    """Scale kube-system's Deployment `name`; wait until that many of its pods run ready (none
    left at zero, a terminating one included)."""
    apps(kube).patch_namespaced_deployment_scale(
        name, "kube-system", {"spec": {"replicas": replicas}}
    )

    def settled() -> bool:
        dep = apps(kube).read_namespaced_deployment(name, "kube-system")
        selector = ",".join(f"{k}={v}" for k, v in dep.spec.selector.match_labels.items())
        pods = kube.core().list_namespaced_pod("kube-system", label_selector=selector).items
        if replicas == 0:
            return not pods
        return (dep.status.available_replicas or 0) == replicas and len(pods) == replicas

    wait_for(f"{name} at {replicas} replicas", settled, BIND_SECONDS, 2)


def unit(real_host) -> dict[str, str]:
    props = "MainPID,NRestarts,ActiveState"
    out = real_host.sh(f"systemctl show loadwise-extender -p {props}")
    return dict(line.split("=", 1) for line in out.split())


def test_extender_killed_mid_burst(real_host, installed, hot_node):
    """SIGKILL to the extender, and at once a burst: the scheduler's extender entry is
    ignorable (site.yml's default, loadwise_scheduler_config_ignorable), so the pods the
    scheduler tries while nothing listens are bound without it (no LoadwiseScored Event for
    them); systemd starts it again (Restart=on-failure, RestartSec=2s), and it is ready from
    load-watcher's data as soon as it has read it."""
    kube, before = installed, unit(real_host)
    since = time.time()

    def kill() -> None:
        real_host.sh("systemctl kill -s KILL loadwise-extender")

    with burst(kube, "killed", kill) as (where, t0):
        after = wait_for(
            "systemd to start the killed extender again",
            lambda: (
                (u := unit(real_host))["ActiveState"] == "active"
                and u["MainPID"] not in ("0", before["MainPID"])
                and u
            ),
            120,
            1,
        )
        wait_for("the new extender ready from load-watcher", extender_ready, 120, 1)
        took = recovered("extender-killed", t0)
    scored = scored_events(kube, "killed", since=since, at_least=BURST, timeout=10)
    print(f"bound {dict(where)}; {len(scored)} of {BURST} scored by the extender ({took:.1f} s)")
    assert int(after["NRestarts"]) == int(before["NRestarts"]) + 1, (before, after)
    journal = real_host.sh("journalctl -u loadwise-extender --no-pager -n 50")
    assert "status=9/KILL" in journal, journal[-3000:]
    # some were bound while it was gone: fail-open, not a lost pod
    assert len(scored) < BURST, [e.message for e in scored]
    assert_hot_avoided(kube, "after-kill")


def test_load_watcher_gone_mid_burst(installed, hot_node):
    """load-watcher (a Deployment here, realnodes.SITE_VARS) scaled to zero: the extender's
    reads of its Service fail and it counts them (loadwise_extender_source_errors_total) while
    it keeps scoring on the snapshot it holds; every pod is bound. Back at one replica, the
    extender holds a load measured after it returned."""
    kube = installed
    errors = metric(SOURCE_ERRORS) or 0.0
    try:
        with burst(kube, "no-watcher", lambda: scale(kube, "load-watcher", 0)) as (where, _):
            # read every 15 s, then every 5 s while failing (extender/sources/refresh.py)
            failed = wait_for(
                "the extender to count failed reads of load-watcher",
                lambda: (m := metric(SOURCE_ERRORS) or 0.0) > errors and m,
                60,
                2,
            )
    finally:
        t1, back = time.monotonic(), time.time()
        scale(kube, "load-watcher", 1)
    realnodes.wait_load_after(back, EXTENDER_HEALTH_URL, "load-watcher's return")
    wait_for("the extender ready from load-watcher", extender_ready, 60, 2)
    recovered("load-watcher-gone", t1)
    print(f"bound {dict(where)}; source errors {errors:.0f} -> {failed:.0f}")
    assert_hot_avoided(kube, "after-watcher")


def test_metrics_server_gone_until_stale(installed, hot_node):
    """metrics-server scaled to zero: load-watcher's fetches fail and it serves its last
    document (it only logs the error; paypal/load-watcher v0.2.4 pkg/watcher/watcher.go), whose
    window ages in the extender until it is stale, and /readyz says so (503, "stale") with
    loadwise_extender_load_stale at 1. A burst then is still bound: stale data blocks no
    scheduling. Back at one replica, the extender holds a load measured after it returned."""
    kube = installed
    assert metric(LOAD_STALE) == 0
    scale(kube, "metrics-server", 0)
    t0 = time.monotonic()
    try:
        status, why = wait_for(
            "the extender to call its load stale",
            lambda: (r := readyz())[0] == 503 and "stale" in r[1] and r,
            STALE_SECONDS,
            5,
        )
        assert metric(LOAD_STALE) == 1
        print(f"\nstale after {time.monotonic() - t0:.0f} s: {status} {why.strip()}")
        with burst(kube, "stale") as (where, _):
            pass
    finally:
        back = time.time()
        t1 = time.monotonic()
        scale(kube, "metrics-server", 1)
    realnodes.wait_load_after(back, EXTENDER_HEALTH_URL, "metrics-server's return", 240)
    wait_for("the extender ready from load-watcher", extender_ready, 60, 2)
    assert metric(LOAD_STALE) == 0
    recovered("metrics-server-gone", t1)
    print(f"bound while stale: {dict(where)}")
    assert_hot_avoided(kube, "after-metrics")


def test_scheduler_restarted_mid_burst(real_host, installed, hot_node):
    """kube-scheduler's process ended (SIGTERM, what a runtime's stop sends), and at once a
    burst: the kubelet starts the container again (the static pod's restartPolicy Always), the
    new scheduler takes the lease and binds what was left Pending, through the extender: the
    whole burst avoids HOT."""
    kube = installed
    pod = f"kube-scheduler-{CP}"
    restarts = kube.core().read_namespaced_pod(pod, "kube-system").status.container_statuses
    before, old = restarts[0].restart_count, scheduler_pid(real_host)
    assert old.isdigit(), f"not one kube-scheduler process: {old!r}"
    since = time.time()
    with burst(kube, "restarted", lambda: real_host.sh(f"kill -TERM {old}")) as (where, t0):
        wait_for("the kubelet's scheduler ready again", lambda: scheduler_ready(kube), 120, 1)
        recovered("scheduler-restarted", t0)
    why = [e.message for e in scored_events(kube, "restarted", since=since, at_least=BURST)]
    now = kube.core().read_namespaced_pod(pod, "kube-system").status.container_statuses
    assert now[0].restart_count > before, (before, now[0])
    assert scheduler_pid(real_host) not in ("", old)
    assert CONFIG_FLAG in " ".join(real_host.scheduler_cmdlines())
    assert where == {COOL: BURST}, f"placed {dict(where)}; why: {why}"


def test_api_server_restarted_mid_burst(real_host, installed, hot_node):
    """kube-apiserver's process ended (SIGTERM) right after a burst's Deployment is created:
    nothing can be bound, listed or watched until the kubelet starts the static pod again.
    The extender's pod and node watches fail and it says so (its journal; it lists again
    after each failure, extender/reflector.py), kube-scheduler reconnects (or, its lease
    lost, is restarted by the kubelet), and every pod of the burst is bound and runs, none on
    HOT; a burst after it goes to COOL with the extender's Events."""
    kube = installed
    old = pids_of(real_host, "kube-apiserver")
    assert old.isdigit(), f"not one kube-apiserver process: {old!r}"
    since = time.time()
    create_deployment(kube, "api-restarted", BURST, realnodes.workload())
    try:
        t0 = time.monotonic()
        real_host.sh(f"kill -TERM {old}")
        wait_for(
            "the API server back: every node Ready, the scheduler Running",
            lambda: realnodes.ready(kube.kubeconfig),
            BIND_SECONDS,
            2,
        )
        where = placements(kube, "api-restarted", BURST, timeout=BIND_SECONDS)
        wait_for(
            "every pod of the burst running",
            lambda: all_running(kube, "api-restarted"),
            BIND_SECONDS,
            2,
        )
        wait_for("the extender ready from load-watcher", extender_ready, 120, 2)
        took = recovered("api-server-restarted", t0)
    finally:
        delete(kube, "api-restarted")
    assert pids_of(real_host, "kube-apiserver") not in ("", old)
    journal = real_host.sh(
        f"journalctl -u loadwise-extender --no-pager --since @{int(since)} | grep -c 'watching' "
        "|| true"
    ).strip()
    print(f"bound {dict(where)} ({took:.1f} s); extender log lines about its watches: {journal}")
    assert journal.isdigit() and int(journal) > 0, "the extender logged no failed watch"
    assert HOT not in where, f"placed {dict(where)}"
    assert_hot_avoided(kube, "after-api")


def node_events(kube, reason: str, node: str, since: float) -> list[str]:
    """Messages of the Events with `reason` about Node `node` since `since` (epoch)."""
    events = kube.core().list_namespaced_event("default", field_selector=f"reason={reason}")
    return [
        e.message
        for e in events.items
        if e.involved_object.kind == "Node"
        and e.involved_object.name == node
        and (e.last_timestamp or e.event_time or e.metadata.creation_timestamp).timestamp()
        >= since - 1
    ]


def test_worker_stopped_and_started(installed, hot_node):
    """COOL's container stopped as by a power cut (realnodes.stop_node says why not `podman
    stop`): once the node controller calls it NotReady (a NodeNotReady Event) a burst is
    bound to HOT, the one worker left (the extender's filter never leaves a pod without a
    node: with every candidate over its threshold it lets the least loaded through,
    extender/decide.py filter_nodes), and runs there. COOL started again
    (realnodes.start_node: the pod routes written anew, its address may change) comes back
    Ready, the extender holds a load of all three nodes again, and new pods go to COOL."""
    kube = installed
    since = time.time()
    realnodes.stop_node(COOL)
    t0 = time.monotonic()
    try:
        wait_for(
            f"{COOL} NotReady",
            lambda: not realnodes.node_ready(kube.kubeconfig)[COOL],
            180,
            2,
        )
        print(f"\n{COOL} NotReady {time.monotonic() - t0:.0f} s after its stop")
        assert node_events(kube, "NodeNotReady", COOL, since), "no NodeNotReady Event"
        with burst(kube, "one-worker") as (where, _):
            pass
    finally:
        t1, back = time.monotonic(), time.time()
        realnodes.start_node(COOL)
    wait_for(f"{COOL} Ready", lambda: realnodes.node_ready(kube.kubeconfig)[COOL], 240, 2)
    wait_for(
        "every node Ready, the scheduler Running, kube-proxy on every node",
        lambda: realnodes.ready(kube.kubeconfig),
        240,
        2,
    )
    realnodes.wait_load_after(back, EXTENDER_HEALTH_URL, f"{COOL}'s return", 240)
    wait_for("the extender ready from load-watcher", extender_ready, 60, 2)
    recovered("worker-stopped", t1)
    assert where == {HOT: BURST}, dict(where)
    assert_hot_avoided(kube, "after-worker")
