"""The summary over generated scenarios: wins against stock, the distribution of the
differences, the time above TargetLoadPacking's target; and the contender table with each
scheduler's release."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.placement import generated_report as gr
from benchmarks.placement import generator, scenario, steady_measures, versions
from benchmarks.placement.__main__ import _generated
from benchmarks.placement.contenders import CONTENDERS, FAIR_TRIMARAN_WEIGHT, scheduler_config
from benchmarks.placement.exceptions import PlacementError
from benchmarks.placement.runner import RunResult
from benchmarks.placement.scenario import Node, Resources, select
from benchmarks.placement.steady_measures import Settings, Timeline
from benchmarks.placement.timeline import Stay

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_distribution_is_of_observed_values():
    d = gr.Distribution.of([0.05, -0.02, 0.01, -0.10, 0.00])
    assert (d.n, d.minimum, d.q1, d.median, d.q3, d.maximum) == (5, -0.10, -0.02, 0.0, 0.01, 0.05)
    assert d.cells() == "-10.0 / -2.0 / +0.0 / +1.0 / +5.0"
    one = gr.Distribution.of([0.3])
    assert one.minimum == one.q1 == one.median == one.q3 == one.maximum == 0.3
    with pytest.raises(ValueError, match="no values"):
        gr.Distribution.of([])


def test_a_contender_is_compared_with_stock_scenario_by_scenario():
    figs = {
        "gen-1-1": {"stock": [0.70, 0.80], "a": [0.60, 0.65], "b": [0.90]},
        "gen-1-2": {"stock": [0.50], "a": [0.55], "b": [0.50]},
        "gen-1-3": {"stock": [0.40], "a": [0.30]},  # b did not run here
        "gen-1-4": {"a": [0.10]},  # stock did not run: nothing to pair
    }
    a, b = gr.versus(figs, "cpu")
    assert (a.contender, a.compared, a.beats) == ("a", 3, 2)
    assert a.diffs is not None
    # medians are the lower ones: stock 0.70 on gen-1-1, a 0.60
    assert [round(x, 9) for x in (a.diffs.minimum, a.diffs.median, a.diffs.maximum)] == [
        -0.1,
        -0.1,
        0.05,
    ]
    assert (b.compared, b.beats) == (2, 0)  # a tie is not a win
    assert (a.worse, b.worse) == (1, 1)  # a +5 on gen-1-2, b +20 on gen-1-1
    assert gr.versus(figs, "cpu", worse_by=0.05)[0].worse == 0  # +5 is not more than 5
    assert b.diffs is not None and round(b.diffs.maximum, 9) == 0.2
    (c,) = gr.versus({"gen-1-1": {"c": [0.5]}}, "memory")
    assert (c.compared, c.beats, c.diffs) == (0, 0, None)


GiB = 2**30


def _timeline() -> Timeline:
    nodes = tuple(
        Node(n, Resources(4, 8 * GiB), Resources(0.4, GiB)) for n in ("a", "b")
    )  # 10 % CPU background each
    usage = {"w": Resources(1.0, GiB)}  # 25 % of a node's CPU
    stays = (
        Stay("w-1", "w", "a", 0, 100),
        Stay("w-2", "w", "a", 50, 100),  # a: 35 % from 0, 60 % from 50
        Stay("w-3", "w", "b", 0, 100),
    )
    return Timeline(nodes, stays, usage, (), 100.0)


def test_time_above_the_target_is_of_the_hottest_node_after_the_warm_up():
    tl = _timeline()
    assert gr.above(tl, 0, 0.40) == (50.0, 0.5)
    assert gr.above(tl, 20, 0.40) == (50.0, 50 / 80)
    assert gr.above(tl, 0, 0.30) == (100.0, 1.0)
    assert gr.above(tl, 0, 0.60) == (0.0, 0.0)  # above, not at
    assert gr.TLP_TARGET == 0.40


def test_the_hotter_resource_is_taken_at_each_instant_not_per_resource_mean():
    # CPU is the hotter resource on node a while two pods run there; memory elsewhere
    nodes = tuple(Node(n, Resources(4, 8 * GiB), Resources(0.4, 6 * GiB)) for n in ("a", "b"))
    usage = {"w": Resources(2.0, GiB)}
    stays = (Stay("w-1", "w", "a", 0, 100), Stay("w-2", "w", "a", 50, 100))
    tl = Timeline(nodes, stays, usage, (), 100.0)
    # 0-50: CPU 60 %, memory 87.5 %; 50-100: CPU 110 %, memory 100 %
    assert steady_measures.hotter_mean(tl, 0) == pytest.approx((0.875 + 1.10) / 2)
    assert steady_measures.hotter_mean(tl, 50) == pytest.approx(1.10)
    with pytest.raises(ValueError, match="nothing to measure"):
        steady_measures.hotter_mean(tl, 100)


def test_the_section_reads_like_the_numbers():
    runs = [
        gr.RunSummary("gen-1-1", "stock", {"cpu": 0.8, "memory": 0.5}, {"cpu": 0.2, "memory": 0},
                      (30.0, 0.25), hotter=0.8, hotter_gap=0.18),
        gr.RunSummary("gen-1-1", "loadwise-least-used", {"cpu": 0.6, "memory": 0.55},
                      {"cpu": 0.0, "memory": 0.05}, (12.0, 0.1), hotter=0.62, hotter_gap=0.0),
    ]  # fmt: skip
    text = "\n".join(gr.lines(runs, 120))
    assert "## Generated scenarios: 1 (gen-1-1)" in text
    cpu, memory = "-20.0 / -20.0 / -20.0 / -20.0 / -20.0", "+5.0 / +5.0 / +5.0 / +5.0 / +5.0"
    assert f"| loadwise-least-used | cpu | 1 of 1 | 0 | {cpu} |" in text
    assert f"| loadwise-least-used | memory | 0 of 1 | 1 | {memory} |" in text
    assert "| stock | cpu | | | | 20.0 |" in text
    hotter = "-18.0 / -18.0 / -18.0 / -18.0 / -18.0"
    assert f"| loadwise-least-used | the hotter of the two | 1 of 1 | 0 | {hotter} | 0.0 |" in text
    assert "| stock | the hotter of the two | | | | 18.0 |" in text
    assert "| loadwise-least-used | 1 | 10.0 |" in text and "| stock | 1 | 25.0 |" in text
    assert gr.lines([], 120) == []


def test_spreading_is_judged_against_stock_on_equal_nodes_only():
    def run(scenario: str, contender: str, share: float, piled: float, equal: bool):
        cpu = {"cpu": 0.5, "memory": 0.5}
        return gr.RunSummary(scenario, contender, cpu, cpu, (0.0, 0.0), share, piled, equal)

    runs = [
        run("gen-1-1", "stock", 0.30, 0, True),
        run("gen-1-1", "loadwise-least-used", 0.45, 12, True),  # +15 on equal nodes
        run("gen-1-2", "stock", 0.30, 0, True),
        run("gen-1-2", "loadwise-least-used", 0.40, 0, True),  # +10: within
        run("gen-1-3", "stock", 0.30, 0, False),
        run("gen-1-3", "loadwise-least-used", 0.60, 30, False),  # a mini PC: not judged
    ]
    text = "\n".join(gr.spreading(runs))
    assert "| loadwise-least-used | 3 | 45.0 (40.0-60.0) | 1 of 2 | 12 (30) |" in text
    assert "| stock | 3 | 30.0 (30.0-30.0) |  | 0 (0) |" in text


def test_the_section_is_empty_without_generated_runs():
    sc = generator.generate(2, 1).scenario
    other = RunResult("steady-mix", "stock")
    assert gr.section([sc], [other], Settings(), None) == []


def test_the_cli_draws_and_writes_the_generated_scenarios(tmp_path: Path):
    scs = _generated(2, 9, 600, tmp_path)
    assert [s.name for s in scs] == ["gen-9-1", "gen-9-2"]
    assert all(s.steady is not None and s.steady.duration_seconds == 600 for s in scs)
    assert (tmp_path / "gen-9-2.yaml").read_text() == generator.generate(9, 2, duration=600).text
    assert _generated(None, 9, None, tmp_path / "none") == []
    assert not (tmp_path / "none").exists()


def test_the_contender_table_gives_each_scheduler_its_release():
    kube = versions.scheduler_version("kube-scheduler")
    trimaran = versions.scheduler_version("trimaran-scheduler")
    assert kube.startswith("v1.") and "scheduler-plugins v0." in trimaran
    assert kube == versions.required(versions.GO_MODS["kube-scheduler"], "k8s.io/kubernetes")
    # the skew the table exists to show: the two are different releases
    assert not trimaran.startswith(kube)
    names = ["stock", "trimaran-tlp-w10", "loadwise-lvrb", "stock+descheduler", "gone"]
    table = "\n".join(versions.contender_table(names))
    assert f"| stock | default plugins |  | {kube} |" in table
    assert f"| trimaran-tlp-w10 | Trimaran TargetLoadPacking plugin | 10 | {trimaran} |" in table
    assert "| loadwise-lvrb | loadwise extender, load-variation-risk-balancing | 10 |" in table
    assert "descheduler v0." in table and "| gone | (no longer defined) | | |" in table
    assert versions.contender_table([]) == []
    with pytest.raises(PlacementError, match="no version known"):
        versions.scheduler_version("kubelet")


def test_a_go_mod_without_the_module_is_an_error(tmp_path: Path):
    mod = tmp_path / "go.mod"
    mod.write_text("module x\n\nrequire (\n\tk8s.io/api v0.36.4\n)\n"
                   "replace k8s.io/kubernetes => k8s.io/kubernetes v1.30.0\n")  # fmt: skip
    assert versions.required(mod, "k8s.io/api") == "v0.36.4"
    with pytest.raises(PlacementError, match="no require of k8s.io/kubernetes"):
        versions.required(mod, "k8s.io/kubernetes")


@pytest.mark.parametrize(
    ("name", "plugin"),
    [
        ("trimaran-tlp-w10", "TargetLoadPacking"),
        ("trimaran-lvrb-w10", "LoadVariationRiskBalancing"),
    ],
)
def test_the_fair_peers_render_their_plugin_at_the_fair_weight(name: str, plugin: str):
    cfg = scheduler_config(CONTENDERS[name], "http://127.0.0.1:2020")
    (profile,) = cfg["profiles"]
    assert profile["schedulerName"] == name
    assert profile["plugins"]["score"]["enabled"] == [
        {"name": plugin, "weight": FAIR_TRIMARAN_WEIGHT}
    ]
    assert "extenders" not in cfg


def test_every_steady_scenario_runs_the_three_loadwise_policies_and_both_peer_weights():
    wanted = {"loadwise-least-used", "loadwise-tlp", "loadwise-lvrb"}
    for sc in [*select(None), *(g.scenario for g in generator.dev_set())]:
        if sc.steady is None:
            continue
        have = set(sc.contenders) if sc.contenders is not None else set(CONTENDERS)
        assert wanted <= have, sc.name
        peers = {c for c in have if c.startswith("trimaran-")}
        assert {CONTENDERS[c].plugin_weight for c in peers} >= {1, FAIR_TRIMARAN_WEIGHT}, sc.name


def test_a_generated_scenario_s_heading_names_where_its_file_is():
    from benchmarks.placement.formatting import heading

    gen = "\n".join(heading(generator.generate(3, 1).scenario, "facts"))
    assert "`placement/generated/gen-3-1.yaml` beside this report" in gen
    (mix,) = select(["steady-mix"])
    assert "facts; file `benchmarks/scenarios/steady-mix.yaml`." in heading(mix, "facts")


def test_rounds_of_one_drawn_scenario_each_with_a_seed_of_its_own(tmp_path: Path, monkeypatch):
    """--generated-seed fixes the drawn scenarios, --seed the round (run order, traces)."""
    import benchmarks.placement.__main__ as cli

    seen: list[tuple[list[str], int]] = []

    def measure(scenarios, contenders, index, **kw):
        seen.append(([s.name for s in scenarios], kw["seed"]))
        return None, [], []

    monkeypatch.setattr(cli, "measure", measure)
    monkeypatch.setattr(cli.report, "write", lambda out, *a, **kw: out / "placement.md")
    monkeypatch.setattr(cli.report, "cost_table", lambda *a: [])
    for round_seed in (11, 12):
        out = tmp_path / str(round_seed)
        argv = ["--generated", "1", "--generated-seed", "77", "--seed", str(round_seed)]
        assert cli.main([*argv, "--out", str(out), "--duration", "600"]) == 0
        drawn = (out / "placement" / "generated" / "gen-77-1.yaml").read_text()
        assert drawn == generator.generate(77, 1, duration=600).text
    assert seen == [(["gen-77-1"], 11), (["gen-77-1"], 12)]
    assert cli.main(["--generated-seed", "77", "--out", str(tmp_path / "x")]) == 2


def test_workloads_given_more_than_their_limits_are_counted_by_scenario():
    drawn = [generator.generate(seed, 1).scenario for seed in range(1, 13)]
    limited = [(i, w) for i, sc in enumerate(drawn) for w in sc.workloads if w.limits]
    assert limited, "no draw with limits among twelve"
    assert gr.over_limits(drawn) == (len(limited), [])  # the generator caps usage
    assert gr.limits_line(drawn)[0].startswith("No generated workload uses more than its limits")
    i, w = limited[0]
    assert w.limits is not None
    over = replace(w, usage=Resources(w.usage.cpu, w.limits.memory + 1))
    drawn[i] = replace(drawn[i], workloads=tuple(over if x is w else x for x in drawn[i].workloads))
    assert gr.over_limits(drawn) == (len(limited), [(drawn[i].name, w.name)])
    assert f"1 of the {len(limited)} workloads with limits" in gr.limits_line(drawn)[0]
    assert gr.over_limits(select(["steady-mix"])) == (0, [])  # not generated: not counted


@pytest.mark.parametrize(
    ("report", "counted"),
    [("generated-001a13a", (32, 15, 12)), ("generated-dac55ad", (37, 24, 15))],
)
def test_the_docs_over_limit_counts_are_the_reports_own(report: str, counted: tuple[int, int, int]):
    """The two older generated sets drawn while usage could exceed limits: docs/README.md
    says how many of their workloads did, counted here from the files they ran."""
    files = sorted((DOCS / "history" / report / "placement" / "generated").glob("gen-*.yaml"))
    limited, over = gr.over_limits([scenario.load(f) for f in files])
    assert (limited, len(over), len({s for s, _ in over})) == counted
    readme = " ".join((DOCS / "README.md").read_text().split())
    assert f"{counted[1]} of {counted[0]} " in readme
    assert f"(in {counted[2]}" in readme
