"""Placement benchmark: where do the stock kube-scheduler, the scheduler with
the loadwise extender, and Trimaran put pods, on identical simulated clusters, and at what
cost? `python -m benchmarks.placement` (or `make bench-placement`); docs/placement.md.

Modules: scenario (the data files under benchmarks/scenarios, loaded and validated),
measures (pure: utilisation from the scenario's ground truth, the offline lower bound,
latency percentiles), runner (the lab I/O), report (markdown and plots), contenders (the
schedulers compared).
"""
