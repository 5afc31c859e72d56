"""One run: a scenario against a contender, from a freshly reset lab (runner.reset), with
its bindings and decisions watched; a one-shot scenario placed by runner.place, a steady
one by steady.place (its trace drawn from the invocation's seed and the round)."""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Callable
from pathlib import Path

from benchmarks.placement import steady
from benchmarks.placement.runner import (
    BindingWatch,
    DecisionWatch,
    Launched,
    RunResult,
    Starter,
    create_all,
    log_line,
    place,
    provenance,
    queue_scheduler_requests,
    reset,
    save_events,
    stamp,
)
from benchmarks.placement.scenario import Scenario
from benchmarks.placement.trace import Trace
from lab import Lab


def run(
    lab: Lab,
    scenario: Scenario,
    contender: Starter,
    workdir: Path,
    log: Callable[[str], None] = log_line,
    *,
    repeat: int = 0,
    seed: int | None = None,
) -> RunResult:
    """One scenario against one contender, from a freshly reset lab. In backlog mode the
    pods are created before the contender's scheduler starts."""
    prov, load_start = provenance(), list(os.getloadavg())
    queue_scheduler_requests(lab)
    reset(lab, scenario, log)
    # Event times have whole seconds: truncated, so that events of this run's first second count.
    since = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    wd = workdir / f"{scenario.name}-{contender.name}-{repeat}"
    wd.mkdir(parents=True, exist_ok=True)
    created: dict[str, float] | None = None
    started: float | None = None
    watch = BindingWatch(lab, scenario.name)
    watch.start()
    try:
        if scenario.backlog:
            created = {}
            create_all(lab, scenario, contender.scheduler_name, created)
            log(f"{scenario.name}: {len(created)} pods created before the scheduler starts")
        log(f"{scenario.name}: starting {contender.name}")
        source = scenario.steady.source if scenario.steady is not None else "metrics-server"
        with contender.start(lab, wd, source=source) as launched:
            started = launched.at if isinstance(launched, Launched) else None
            pids = launched.pids if isinstance(launched, Launched) else ()
            decisions = DecisionWatch(lab, scenario.pod_count, pids)
            decisions.start()
            try:
                if scenario.steady is not None:
                    result = steady.place(
                        lab,
                        scenario,
                        contender,
                        log,
                        watch=watch,
                        workdir=wd,
                        trace=Trace.draw(scenario, seed or 0, repeat),
                    )
                else:
                    result = place(
                        lab,
                        scenario,
                        contender.scheduler_name,
                        log,
                        watch=watch,
                        workdir=wd,
                        created=created,
                    )
            finally:
                decisions.stop()
            result.decided_at = decisions.decided_at
            result.first_decided = list(decisions.first) if decisions.first else None
            if decisions.cpu_first is not None and decisions.cpu_decided is not None:
                result.decide_cpu_seconds = decisions.cpu_decided - decisions.cpu_first
            first, last = decisions.extender_cpu_first, decisions.extender_cpu_decided
            if first is not None and last is not None:
                result.extender_cpu_seconds = last - first
            if decisions.count:
                result.algorithm_seconds = decisions.seconds
                result.algorithm_pods = int(decisions.count)
    except Exception as exc:  # a contender that fails is a result, not the end of the run
        result = RunResult(scenario.name, contender.name, error=f"{type(exc).__name__}: {exc}")
    finally:
        watch.stop()
    result.contender = contender.name
    result.scheduler_started = started if scenario.backlog else None
    stamp(result, prov, load_start)
    result.repeat, result.seed = repeat, seed
    with contextlib.suppress(Exception):  # evidence for the analysis, not a measure
        save_events(lab, scenario, wd / "events.txt", since)
    bound = len(result.bindings)
    log(
        f"{scenario.name} x {contender.name}: {bound}/{scenario.pod_count} bound in "
        f"{result.seconds:.1f}s"
        + (f"; {len(result.evictions)} evicted" if scenario.owned else "")
        + (f"; {result.error}" if result.error else "")
    )
    return result
