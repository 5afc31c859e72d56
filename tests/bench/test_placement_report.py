"""The placement report: goals judged from hand-made results, tables and plots written."""

from __future__ import annotations

from benchmarks.placement import report
from benchmarks.placement.runner import RunResult
from benchmarks.placement.scenario import select


def result(contender: str, where: dict[str, int], *, t: float = 0.01) -> RunResult:
    """`where`: pods per node; pods created 10 ms apart, each bound `t` s after creation."""
    r = RunResult("hog", contender)
    names = iter(f"web-{i:04d}" for i in range(1, 31))
    k = 0
    for node, n in where.items():
        for _ in range(n):
            p = next(names)
            r.bindings[p] = node
            r.created[p] = k * 0.01
            r.bound_at[p] = k * 0.01 + t
            k += 1
    return r


def test_goals_of_the_hog_scenario_from_hand_made_placements():
    (sc,) = select(["hog"])
    stock = result("stock", {"hog-a": 10, "hog-b": 10, "hog-c": 10})
    good = result("loadwise-least-used", {"hog-a": 15, "hog-b": 15})
    bad = result("loadwise-tlp", {"hog-a": 14, "hog-b": 14, "hog-c": 2})
    trimaran = result("trimaran-tlp", {"hog-a": 15, "hog-b": 15})
    rows = [report.row(sc, r) for r in (stock, good, bad, trimaran)]
    got = {(v.contender, v.goal): v for v in report.goals(sc, rows, report.bound_of(sc))}
    # stock: the hog's 6 GiB + 10 x 200 MiB of 8 GiB (8144/8192 MiB);
    # loadwise-least-used: only the hog's own 6 GiB.
    beat = got[("loadwise-least-used", "max below stock's")]
    assert beat.passed is True
    assert "75.0 % vs stock 99.4 %" in beat.detail
    assert got[("loadwise-least-used", "no pod on a hot node")].passed is True
    assert got[("loadwise-least-used", "max <= trimaran-tlp's")].passed is True
    # Two pods on the hog: still below stock, but on the hot node and above Trimaran.
    assert got[("loadwise-tlp", "max below stock's")].passed is True
    hot = got[("loadwise-tlp", "no pod on a hot node")]
    assert hot.passed is False and hot.detail == "2 on hog-c"
    worse = got[("loadwise-tlp", "max <= trimaran-tlp's")]
    assert (
        worse.passed is False
        and "hottest hog-c (memory 79.9 %, 2 pods, marked hot)" in worse.detail
    )
    # Stock and Trimaran are judged against nothing.
    assert not [v for v in got.values() if not v.contender.startswith("loadwise")]


def test_an_incomplete_run_misses_and_the_report_says_so(tmp_path):
    (sc,) = select(["hog"])
    stock = result("stock", {"hog-a": 10, "hog-b": 10, "hog-c": 10})
    short = result("loadwise-least-used", {"hog-a": 5})
    short.error = "25 of 30 pods not bound after 180s"
    md = report.write(tmp_path, [sc], [stock, short], started="test").read_text()
    assert "| stock | 30/30 | 50.0 | 99.4 |" in md, md
    assert "| loadwise-least-used | 5/30 |" in md
    assert "all pods bound: **MISSED** (25 of 30 pods not bound after 180s)" in md
    assert "| *offline lower bound* | | 43.3 | 75.0 |" in md
    assert (tmp_path / "placement" / "hog.png").stat().st_size > 0


def test_cost_goals_and_plot_for_the_scale_scenarios(tmp_path):
    (sc,) = select(["scale-100"])

    def timed(contender: str, lat: float) -> RunResult:
        r = RunResult("scale-100", contender)
        for i in range(2000):
            p = f"many-{i + 1:04d}"
            r.bindings[p] = f"s100-{i % 100 + 1:03d}"
            r.created[p] = i * 0.001
            r.bound_at[p] = i * 0.001 + lat
        return r

    rows = [report.row(sc, timed("stock", 0.1)), report.row(sc, timed("loadwise-least-used", 0.3))]
    got = {v.goal: v for v in report.goals(sc, rows, report.bound_of(sc))}
    # throughput: 2000 pods / (1.999 + latency) s; p99 = the latency itself.
    assert got["throughput >= 0.9x stock"].passed is True
    assert got["p99 <= 1.2x stock"].passed is False
    assert "(3.00x)" in got["p99 <= 1.2x stock"].detail
    report.write(
        tmp_path, [sc], [timed("stock", 0.1), timed("loadwise-least-used", 0.3)], started="t"
    )
    assert (tmp_path / "placement" / "cost.png").stat().st_size > 0
