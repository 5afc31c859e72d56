"""The estimator on a stream where pods come and go and use more or less than they
request (``steady_sim``: the steady-mix shape, in-process, on a fake clock).

Measured when written (seeds 11-15, mean of the hottest node's mean CPU after the
first 2 minutes): the request-counting placer 96 %, the extender with the request
rule alone (no per-pod use, departures at the estimate, no spreading) 101 %, with
per-pod use, learned estimates, delta accounting and spreading 80 %; the largest share
of one workload on one node 0.39, 0.42 and 0.33. Seeds 1-6 were the ones looked at
while building it; these are others.
"""

from __future__ import annotations

import statistics

from . import steady_sim as sim

SEEDS = (11, 12, 13, 14, 15)


def test_learned_and_delta_estimates_place_better_than_requests_and_the_old_rule():
    results = {
        name: [sim.run(make(seed), seed) for seed in SEEDS]
        for name, make in (
            ("requests", sim.request_placer),
            ("old", sim.old_extender),
            ("new", sim.new_extender),
        )
    }
    hottest = {name: [r.hottest_cpu for r in rs] for name, rs in results.items()}
    mean = {name: statistics.mean(v) for name, v in hottest.items()}
    assert all(r.placed > 150 for rs in results.values() for r in rs)
    # no worse than counting requests, better than the request rule it replaces
    assert mean["new"] <= mean["requests"], mean
    assert mean["new"] < mean["old"] - 5.0, mean
    # and not by one lucky seed: better than the old rule on most of them
    wins = sum(n < o for n, o in zip(hottest["new"], hottest["old"], strict=True))
    assert wins >= len(SEEDS) - 1, hottest
    # spreading kept: one workload's largest share of a node no larger than by requests
    share = {name: statistics.mean(r.largest_share for r in rs) for name, rs in results.items()}
    assert share["new"] <= share["requests"], share


def test_the_stream_is_reproducible_from_its_seed():
    first = sim.run(sim.new_extender(21), 21, duration=200.0)
    again = sim.run(sim.new_extender(21), 21, duration=200.0)
    assert first == again
