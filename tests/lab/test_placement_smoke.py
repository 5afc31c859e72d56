"""The placement benchmark end to end on one small scenario, so that it cannot silently rot:
benchmarks/scenarios/smoke.yaml (three nodes, one a memory hog; ten pods) against the stock
scheduler and the extender's default policy, through the benchmark's own runner and report.

It lives under tests/lab, not tests/bench, to share the package-scoped `lab` fixture (and
its xdist group): a lab of its own would cost a second start-up of the control plane. The
scenario's nodes carry their own label and the pods select it, so the lab's nodes are
untouched; the runner deletes the scenario's pods and nodes at the end.
"""

from __future__ import annotations

import pytest

from benchmarks.placement import report
from benchmarks.placement.contenders import CONTENDERS
from benchmarks.placement.runner import cleanup, run
from benchmarks.placement.scenario import select

pytestmark = pytest.mark.lab

CONTENDED = ("stock", "loadwise-least-used")


def test_smoke_scenario_runs_end_to_end_and_the_extender_avoids_the_hot_node(lab, tmp_path):
    (sc,) = select(["smoke"])
    try:
        results = [run(lab, sc, CONTENDERS[name], tmp_path / "work") for name in CONTENDED]
    finally:
        cleanup(lab)
    md = report.write(tmp_path / "docs", [sc], results, started="smoke").read_text()
    for r in results:
        assert r.error is None, f"{r.contender}: {r.error}"
        assert f"| {r.contender} | {sc.pod_count}/{sc.pod_count} |" in md, md
    rows = {r.contender: report.row(sc, r) for r in results}
    loadwise = rows["loadwise-least-used"]
    assert loadwise.summary is not None and loadwise.timing is not None
    assert loadwise.summary.pods_on_hot == 0, f"loadwise used the hot node:\n{md}"
    assert "no pod on a hot node: **PASS**" in md, md
    assert (tmp_path / "docs" / "placement" / "smoke.png").stat().st_size > 0
