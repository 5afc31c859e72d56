"""A steady scenario's run: a stream of pods that come and go for minutes, so that every
contender decides later pods on metrics that already hold its earlier ones.

What a contender reads lags: metrics-server resolves every 15 s (lab/components.py
``--metric-resolution=15s``), load-watcher collects from it once a minute and the loadwise
extender and Trimaran read load-watcher (contenders.py), and the descheduler's collector
reads metrics-server every 5 s and smooths it (descheduler v0.36.0
pkg/descheduler/metricscollector: 0.9 of the previous value, 0.1 of the new). A placement
that ends within a minute is decided on the starting state alone; a stream of several
minutes is not.

Each workload is a ReplicaSet scaled up at its rate. Every pod, once bound, gets a lifetime
drawn uniformly from its workload's range; when it ends the runner deletes the pod and the
ReplicaSet creates a replacement, which the contender places on what it knows then. The
ramp's arrivals and the lifetimes are the run's trace (benchmarks/placement/trace.py), drawn
from the invocation's seed and the round: every contender of a round gets the same trace,
its k-th pod of a workload living as long, and each round is another trace. The
scenario's background changes are applied at their times (node annotations, lab/fakenodes.py).
A contender that brings the descheduler gets it for the whole stream, with the role's policy.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kubernetes.client.exceptions import ApiException

from benchmarks.placement.exceptions import RunError
from benchmarks.placement.runner import (
    NAMESPACE,
    BindingWatch,
    RunResult,
    Starter,
    _scale,
    descheduler,
    finish,
)
from benchmarks.placement.scenario import Scenario
from benchmarks.placement.trace import Trace
from lab import Lab, LabError
from lab.fakenodes import background_annotations, plain_number

TICK = 0.5  # seconds between the stream's checks of lifetimes and changes


def expiries(
    live: dict[str, str],
    bound_at: dict[str, float],
    workload: dict[str, str],
    known: dict[str, float],
    lifetimes: Trace,
) -> None:
    """Give every newly bound pod of `live` its end (bound time + its lifetime) in `known`,
    in the order they were bound, so the draws follow the binding order."""
    new = sorted((bound_at[p], p) for p, n in live.items() if n and p not in known)
    for t, pod in new:
        w = workload.get(pod, "")
        if w:
            known[pod] = t + lifetimes.lifetime(w)


def _delete(lab: Lab, pod: str) -> bool:
    """Delete `pod` at once; False when it was gone already (evicted meanwhile)."""
    try:
        resp = lab.core().delete_namespaced_pod(
            pod, NAMESPACE, grace_period_seconds=0, _preload_content=False
        )
        # read to the end before the connection goes back to the pool: left unread, the
        # next request on it read this pod's JSON as its status line (urllib3 BadStatusLine),
        # was retried, and a retried DELETE's 404 counted a pod the runner deleted as evicted
        resp.read()
        resp.release_conn()
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def restore(lab: Lab, scenario: Scenario, names: set[str]) -> None:
    """Put the named nodes' background memory back as the scenario declares it: the next
    run keeps the nodes (runner.ensure_nodes) and waits for them at their background."""
    for n in scenario.nodes:
        if n.name in names:
            ann = background_annotations(memory=plain_number(n.background.memory))
            lab.core().patch_node(n.name, {"metadata": {"annotations": ann}})


def place(
    lab: Lab,
    scenario: Scenario,
    contender: Starter,
    log: Callable[[str], None],
    *,
    watch: BindingWatch,
    workdir: Path,
    trace: Trace,
) -> RunResult:
    """Run the stream for the scenario's duration with the contender's scheduler running,
    its ramp and lifetimes drawn from `trace`; `result.evictions` are the deletions the
    runner did not make."""
    st = scenario.steady
    if st is None:
        raise RunError(f"{scenario.name} is not a steady scenario")
    result = RunResult(scenario.name, contender.scheduler_name)
    result.trace, result.duration = trace.to_json(), st.duration_seconds
    lifetimes, ends = trace, dict[str, float]()
    changes = list(st.changes)
    core = lab.core()
    stop = threading.Event()
    failures: list[str] = []

    def ramp(w_index: int) -> None:
        try:
            w = scenario.workloads[w_index]
            _scale(lab, w, scenario.name, contender.scheduler_name, at=trace.arrivals[w.name])
        except Exception as exc:  # reported as the run's error
            failures.append(f"{scenario.workloads[w_index].name}: {exc}")

    t0 = time.monotonic()
    end = t0 + st.duration_seconds
    with contextlib.ExitStack() as stack:
        desched = None
        if contender.descheduler:
            desched = stack.enter_context(
                descheduler(lab, scenario.name, st.descheduler_interval_seconds, workdir)
            )
        ramps = [
            threading.Thread(target=ramp, args=(i,), daemon=True, name=f"ramp-{i}")
            for i in range(len(scenario.workloads))
        ]
        for r in ramps:
            r.start()
        try:
            while (now := time.monotonic()) < end and not failures:
                while changes and t0 + changes[0].at_seconds <= now:
                    c = changes.pop(0)
                    ann = background_annotations(memory=plain_number(c.memory))
                    core.patch_node(c.node, {"metadata": {"annotations": ann}})
                    result.changes.append(
                        {"node": c.node, "memory": c.memory, "hot": c.hot, "at": time.monotonic()}
                    )
                    log(f"{scenario.name}: {c.node} background memory now {c.memory / 2**30:g}Gi")
                live, bound_at, workload = watch.snapshot()
                expiries(live, bound_at, workload, ends, lifetimes)
                for pod in sorted(p for p in live if ends.get(p, end) <= now):
                    if pod not in result.expired and _delete(lab, pod):
                        result.expired.append(pod)
                if desched is not None and desched.poll() is not None:
                    raise RunError(f"the descheduler exited with {desched.returncode}")
                if watch.error:
                    raise RunError(watch.error)
                stop.wait(TICK)
            if failures:
                raise RunError("; ".join(failures))
        except (RunError, LabError, ApiException) as exc:
            result.error = str(exc)
        finally:
            stack.close()  # the descheduler stops with the stream
            for r in ramps:
                r.join(30)
            watch.stop()
            restore(lab, scenario, {c["node"] for c in result.changes})
    result.stream = [t0, min(time.monotonic(), end)]
    result.seconds = time.monotonic() - t0
    finish(lab, scenario, result, watch)
    mine = set(result.expired)
    result.evictions = [e for e in result.evictions if e["pod"] not in mine]
    log(
        f"{scenario.name}: {len(result.bound_at)} pods bound over {st.duration_seconds:g}s, "
        f"{len(result.expired)} ended their lifetime, {len(result.evictions)} evicted"
    )
    return result
