"""A steady run's random choices, drawn from the run's seed: pure functions.

A steady stream has two random parts: when each workload's first replicas arrive (the
ramp) and how long each bound pod lives. Both are drawn here from a key made of the
scenario's name, the invocation's ``--seed`` and the round (the repeat index), so

* the contenders of one round get the same trace: their figures are a paired comparison,
  the k-th pod of a workload living as long under each of them;
* another round, or another seed, is another day of the same kind: repeats measure how a
  contender fares across traces, not the lab's noise on one trace.

Arrivals of the ramp are a Poisson process at the workload's rate (exponential gaps of
mean 1/rate), so a ramp of n replicas takes n/rate seconds on average, as the fixed pace
did; a workload without a rate gets every replica at once. Lifetimes are uniform in the
workload's range, drawn in the order the workload's pods are bound (steady.expiries), so
what a contender does cannot change which lifetime its k-th pod gets.

Results written before traces were drawn per run carry no ``trace``: their lifetimes came
from a generator keyed by the scenario and workload names alone (every run of a scenario
replayed one stream), which ``Trace.legacy`` reproduces.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchmarks.placement.scenario import Scenario


def trace_key(scenario: str, seed: int, repeat: int) -> str:
    """The key every draw of a run is seeded from: the same for every contender of a round."""
    return f"{scenario}/seed={seed}/round={repeat}"


@dataclass
class Trace:
    """The draws of one steady run. `arrivals[w]` are the seconds after the stream's start
    at which workload w's replicas 1..n are asked for (non-decreasing)."""

    key: str
    arrivals: dict[str, tuple[float, ...]]
    ranges: dict[str, tuple[float, float]]
    _rngs: dict[str, random.Random] = field(default_factory=dict, repr=False)

    @classmethod
    def draw(cls, scenario: Scenario, seed: int, repeat: int) -> Trace:
        key = trace_key(scenario.name, seed, repeat)
        arrivals: dict[str, tuple[float, ...]] = {}
        for w in scenario.workloads:
            if w.rate is None:
                arrivals[w.name] = (0.0,) * w.replicas
                continue
            rng = random.Random(f"{key}/{w.name}/arrivals")
            t, out = 0.0, []
            for _ in range(w.replicas):
                out.append(t)  # the first replica at the start, as the fixed pace had it
                t += rng.expovariate(w.rate)
            arrivals[w.name] = tuple(out)
        return cls(key, arrivals, _ranges(scenario))

    @classmethod
    def legacy(cls, scenario: Scenario) -> Trace:
        """The one trace every run replayed before per-run traces: the fixed pace (replica
        n at (n-1)/rate) and lifetimes keyed by scenario and workload name."""
        arrivals = {
            w.name: tuple((n / w.rate) if w.rate else 0.0 for n in range(w.replicas))
            for w in scenario.workloads
        }
        ranges = _ranges(scenario)
        rngs = {w: random.Random(f"{scenario.name}/{w}") for w in ranges}
        return cls(f"{scenario.name} (legacy)", arrivals, ranges, rngs)

    def lifetime(self, workload: str) -> float:
        """The next lifetime of `workload`'s pods, in the order they are bound."""
        if workload not in self.ranges:
            raise KeyError(f"workload {workload!r} has no lifetime range")
        rng = self._rngs.get(workload)
        if rng is None:
            rng = self._rngs[workload] = random.Random(f"{self.key}/{workload}/lifetimes")
        lo, hi = self.ranges[workload]
        return rng.uniform(lo, hi)

    def to_json(self) -> dict[str, Any]:
        """What a result records: the key (from which every draw follows) and the ramp."""
        return {"key": self.key, "arrivals": {w: list(a) for w, a in self.arrivals.items()}}


def _ranges(scenario: Scenario) -> dict[str, tuple[float, float]]:
    return {w.name: w.lifetime for w in scenario.workloads if w.lifetime}


def recorded_key(trace: Mapping[str, Any] | None) -> str | None:
    """The key a result recorded, None for results from before per-run traces."""
    return None if trace is None else str(trace["key"])
