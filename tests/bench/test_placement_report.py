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


def timed(contender: str, lat: float, repeat: int = 0) -> RunResult:
    """2000 pods of scale-100 created 1 ms apart, each bound `lat` s after creation, in
    round `repeat` of seed 1."""
    r = RunResult("scale-100", contender, seed=1, repeat=repeat)
    for i in range(2000):
        p = f"many-{i + 1:04d}"
        r.bindings[p] = f"s100-{i % 100 + 1:03d}"
        r.created[p] = i * 0.001
        r.bound_at[p] = i * 0.001 + lat
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
    assert "75.0 % (n=1) vs stock 99.4 % (n=1)" in beat.detail
    assert got[("loadwise-least-used", "no pod on a hot node")].passed is True
    assert got[("loadwise-least-used", "max CPU <= trimaran-tlp's")].passed is True
    # Two pods on the hog: still below stock, but on the hot node; against TargetLoadPacking
    # it is judged on CPU, where 14 pods on the busiest node beat Trimaran's 15
    # (100m + 14 x 150m = 55.0 % of 4 CPU against 58.75 %, printed 58.7), not on the hog's memory.
    assert got[("loadwise-tlp", "max below stock's")].passed is True
    hot = got[("loadwise-tlp", "no pod on a hot node")]
    assert hot.passed is False and hot.detail == "2 on hog-c"
    cpu = got[("loadwise-tlp", "max CPU <= trimaran-tlp's")]
    assert cpu.passed is True and "55.0 % (n=1) vs 58.7 % (n=1)" in cpu.detail
    # Against a plugin that balances both resources the hog's memory counts.
    lvrb = result("trimaran-lvrb", {"hog-a": 15, "hog-b": 15})
    rows.append(report.row(sc, lvrb))
    got = {(v.contender, v.goal): v for v in report.goals(sc, rows, report.bound_of(sc))}
    worse = got[("loadwise-tlp", "max <= trimaran-lvrb's")]
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
    md = report.write(tmp_path, [sc], [stock, short]).read_text()
    assert "| stock | 30/30 | 1 | 50.0 | 99.4 |" in md, md
    assert "| loadwise-least-used | 5/30 | 1 |" in md
    assert "all pods bound: **MISSED** (25 of 30 pods not bound after 180s)" in md
    assert "| *offline lower bound* | | | 43.3 | 75.0 |" in md
    assert (tmp_path / "placement" / "hog.png").stat().st_size > 0


def test_cost_goals_and_plot_for_the_scale_scenarios(tmp_path):
    (sc,) = select(["scale-100"])

    # Three rounds, paired: stock and loadwise of one round are compared with each other.
    runs = [timed("stock", 0.1, i) for i in range(3)]
    runs += [timed("loadwise-least-used", lat, i) for i, lat in enumerate((0.3, 0.29, 0.31))]
    rows = [report.row(sc, r) for r in runs]
    got = {v.goal: v for v in report.goals(sc, rows, report.bound_of(sc))}
    # throughput: 2000 pods / (1.999 + latency) s; p99 = the latency itself, 3x stock's in
    # every round.
    assert got["throughput >= 0.8x stock"].passed is True
    assert got["p99 <= 1.2x stock"].passed is False
    assert "per round 3.00x, 2.90x, 3.10x" in got["p99 <= 1.2x stock"].detail
    # one round only: no interval, so undecided, and said so
    few = [report.row(sc, timed("stock", 0.1)), report.row(sc, timed("loadwise-least-used", 0.3))]
    one = {v.goal: v for v in report.goals(sc, few, report.bound_of(sc))}
    assert one["p99 <= 1.2x stock"].passed is None
    assert one["p99 <= 1.2x stock"].word == "UNDECIDED"
    assert "fewer than 3 rounds" in one["p99 <= 1.2x stock"].detail
    # rounds whose interval straddles the goal: undecided
    mixed = [timed("stock", 0.1, i) for i in range(3)]
    mixed += [timed("loadwise-least-used", lat, i) for i, lat in enumerate((0.05, 0.2, 0.11))]
    rows = [report.row(sc, r) for r in mixed]
    got = {v.goal: v for v in report.goals(sc, rows, report.bound_of(sc))}
    assert got["p99 <= 1.2x stock"].word == "UNDECIDED"
    report.write(tmp_path, [sc], [timed("stock", 0.1), timed("loadwise-least-used", 0.3)])
    assert (tmp_path / "placement" / "cost.png").stat().st_size > 0


def test_repeats_are_shown_as_median_and_range_and_judged_on_the_median(tmp_path):
    (sc,) = select(["hog"])
    stock = [result("stock", {"hog-a": 10, "hog-b": 10, "hog-c": 10}) for _ in range(3)]
    # Three runs: 0, 1 and 3 pods on the hog (75.0 %, 77.4 %, 82.3 % memory there).
    lw = [
        result("loadwise-least-used", {"hog-a": 15, "hog-b": 15}),
        result("loadwise-least-used", {"hog-a": 15, "hog-b": 14, "hog-c": 1}),
        result("loadwise-least-used", {"hog-a": 14, "hog-b": 13, "hog-c": 3}),
    ]
    rows = [report.row(sc, r) for r in (*stock, *lw)]
    got = {(v.contender, v.goal): v for v in report.goals(sc, rows, report.bound_of(sc))}
    beat = got[("loadwise-least-used", "max below stock's")]
    assert beat.passed is True
    assert beat.detail == (
        "77.4 % (median of 3, range 75.0 %-82.3 %) vs stock 99.4 % (median of 3, "
        "range 99.4 %-99.4 %)"
    )
    # The median run put one pod on the hog; "no pod on a hot node" counts every run.
    hot = got[("loadwise-least-used", "no pod on a hot node")]
    assert hot.passed is False
    assert hot.detail == "1 on hog-c (1 of 3 runs), 3 on hog-c (1 of 3 runs)"
    md = report.write(tmp_path, [sc], [*stock, *lw]).read_text()
    assert "| stock | 30/30 (30-30) | 3 | 50.0 (50.0-50.0) | 99.4 (99.4-99.4) |" in md, md
    assert "| loadwise-least-used | 30/30 (30-30) | 3 | " in md
    assert "| 77.4 (75.0-82.3) |" in md
    # nodes > 80 %: 0, 0, 1 (the hog at 82.3 %); pods on hot: 0, 1, 3.
    assert "| 0 (0-1) | 1 (0-3) |" in md
    assert (tmp_path / "placement" / "hog.png").stat().st_size > 0


def test_one_incomplete_run_of_three_misses_and_the_others_are_judged(tmp_path):
    (sc,) = select(["hog"])
    stock = result("stock", {"hog-a": 10, "hog-b": 10, "hog-c": 10})
    short = result("loadwise-least-used", {"hog-a": 5})
    short.error = "25 of 30 pods not bound after 180s"
    good = [result("loadwise-least-used", {"hog-a": 15, "hog-b": 15}) for _ in range(2)]
    rows = [report.row(sc, r) for r in (stock, short, *good)]
    got = {(v.contender, v.goal): v for v in report.goals(sc, rows, report.bound_of(sc))}
    miss = got[("loadwise-least-used", "all pods bound")]
    assert miss.passed is False
    assert miss.detail == "1 of 3 runs: 25 of 30 pods not bound after 180s"
    beat = got[("loadwise-least-used", "max below stock's")]
    assert beat.passed is True and beat.detail.startswith("75.0 % (median of 2,")


def test_cost_table_with_repeats_compares_medians(tmp_path):
    (sc,) = select(["scale-100"])

    runs = [timed("stock", x) for x in (0.1, 0.2, 0.3)]
    runs += [timed("loadwise-least-used", x) for x in (0.3, 0.4, 0.9)]
    lines = report.cost_table([sc], runs)
    # p99 = the latency: medians 200 and 400 ms, 2.00x.
    assert lines[2].startswith("| 100 | stock | 3 |"), lines
    assert "| 200 (100-300) | 1.00 |" in lines[2]
    assert "| 400 (300-900) | 2.00 |" in lines[3], lines[3]
    report.write(tmp_path, [sc], runs)
    assert (tmp_path / "placement" / "cost.png").stat().st_size > 0


def test_the_exact_optimum_is_reported_beside_the_bound(tmp_path):
    sw, hog = select(["strong-weak", "hog"])
    md = report.write(tmp_path, [hog], [result("stock", {"hog-a": 30})])
    text = md.read_text()
    assert "| *exact optimum* | | |  | 75.00 |" in text
    assert "**75.00 %**, against the lower bound's 75.00 %" in text
    # strong-weak: the 76.25 % (CPU of the strong node), above the bound's 74.22 %.
    lines = report.table(sw, [], report.bound_of(sw), report.optimum_of(sw))
    assert lines[-1].startswith("| *exact optimum* | | | 76.25 |  |")
    said = report.optimum_lines(sw, report.bound_of(sw), report.optimum_of(sw))
    assert said[0].startswith(
        "Exact optimum (whole pods, the maximum over CPU and memory): **76.25 %**, against "
        "the lower bound's 74.22 %; a placement reaching it: sw-strong 28, sw-weak-001 5"
    )
    # Where it is not computed the report says so and keeps the bound.
    (gone,) = report.optimum_lines(sw, report.bound_of(sw), None)
    assert gone.startswith("Exact optimum: not computed (a feasibility check would take 5 ")
    assert gone.endswith("the lower bound stands alone.")


def decided(contender: str, *, rate: float, algorithm_ms: float) -> RunResult:
    """A scale-100 run whose scheduler decided 100 pods by its first sample and the rest
    at `rate` pods/s, with `algorithm_ms` of scheduling algorithm per pod."""
    r = timed(contender, 0.1)
    r.first_decided = [10.0, 100.0]
    r.decided_at = 10.0 + 1900 / rate
    r.algorithm_seconds, r.algorithm_pods = 2000 * algorithm_ms / 1000, 2000
    r.decide_cpu_seconds = 1900 * 2 * algorithm_ms / 1000  # twice the algorithm time
    if contender != "stock":
        r.extender_cpu_seconds = r.decide_cpu_seconds / 4  # a quarter of it in the extender
    return r


def test_the_cost_table_gives_the_schedulers_own_pace_beside_the_drain():
    (sc,) = select(["scale-100"])
    runs = [decided("stock", rate=400, algorithm_ms=2.5) for _ in range(2)]
    runs += [decided("null-extender", rate=200, algorithm_ms=5.0)]
    runs += [timed("loadwise-least-used", 0.1)]  # recorded before the decisions were
    lines = report.cost_table([sc], runs)
    assert "| 400 (400-400) | 1.00 | 2.50 (2.50-2.50) | 5.00 (5.00-5.00) | - |" in lines[2]
    # The report's order: stock, loadwise's policies, then the others by name.
    assert "| - | - | - | - | - |" in lines[3], lines[3]
    assert "| 200 | 0.50 | 5.00 | 10.00 | 2.50 |" in lines[4], lines[4]


def test_results_without_decisions_load_and_round_trip():
    r = decided("stock", rate=400, algorithm_ms=2.5)
    back = RunResult.from_json(r.to_json())
    assert (back.first_decided, back.decided_at, back.algorithm_pods) == (
        [10.0, 100.0],
        r.decided_at,
        2000,
    )
    old = r.to_json()
    for k in (
        "first_decided",
        "decided_at",
        "algorithm_seconds",
        "algorithm_pods",
        "decide_cpu_seconds",
        "extender_cpu_seconds",
    ):
        del old[k]
    (sc,) = select(["scale-100"])
    assert report.row(sc, RunResult.from_json(old)).decisions is None


def test_the_largest_share_of_a_workload_on_one_node_is_shown_beside_the_utilisation(tmp_path):
    (sc,) = select(["hog"])
    spread = result("stock", {"hog-a": 10, "hog-b": 10, "hog-c": 10})
    packed = result("loadwise-least-used", {"hog-a": 15, "hog-b": 15})
    assert report.row(sc, spread).largest_share == 10 / 30
    assert report.row(sc, packed).largest_share == 15 / 30
    md = report.write(tmp_path, [sc], [spread, packed]).read_text()
    # nodes > 80 %, pods on hot, then the largest share: a third, then half, of the 30.
    assert "| 1 | 10 | 33 | 0 |" in md, md
    assert "| 0 | 0 | 50 | 0 |" in md, md


def test_the_hand_written_real_kubelet_section_survives_a_new_report(tmp_path):
    (sc,) = select(["hog"])
    first = report.write(tmp_path, [sc], [result("stock", {"hog-a": 30})])
    assert "## On real kubelets" not in first.read_text()
    real = "## On real kubelets\n\nMeasured by hand: 3 OOM kills.\n"
    first.write_text(first.read_text() + "\n" + real)
    again = report.write(tmp_path, [sc], [result("stock", {"hog-a": 10, "hog-b": 20})])
    text = again.read_text()
    assert text.endswith("\n\n" + real), text[-300:]
    assert text.count("## On real kubelets") == 1
    # the generated part is the new run's
    assert "| stock | 30/30 | 1 |" in text, text[:2000]
