"""The placement report's figures: a fixed width for the many-node line plots,
the 80 % line and the exact optimum labelled, cost as ranges over repeats, not lines."""

from __future__ import annotations

# pyplot picks its backend when the first figure is made, after report chose Agg.
import matplotlib.pyplot as plt
from matplotlib.container import ErrorbarContainer

from benchmarks.placement import report
from benchmarks.placement.runner import RunResult
from benchmarks.placement.scenario import Scenario, select
from tests.bench.test_placement_report import result, timed


def spread_over(sc: Scenario, contender: str) -> RunResult:
    """Every pod of `sc` round-robin over its nodes."""
    r = RunResult(sc.name, contender)
    names = [n.name for n in sc.all_nodes()]
    for i, p in enumerate(sc.pod_usage()):
        r.bindings[p] = names[i % len(names)]
        r.created[p] = i * 0.001
        r.bound_at[p] = i * 0.001 + 0.01
    return r


def legend_texts(fig) -> list[str]:
    return [t.get_text() for lg in fig.legends for t in lg.get_texts()]


def test_line_plots_have_one_width_whatever_the_node_count():
    sizes = []
    for name in ("scale-100", "scale-500"):
        (sc,) = select([name])
        fig = report.utilisation_figure(sc, [report.row(sc, spread_over(sc, "stock"))])
        sizes.append(tuple(fig.get_size_inches()))
        plt.close(fig)
    # 500 nodes used to make 40,770 px at 90 dpi (0.9 in a node); now both are the same.
    assert sizes[0] == sizes[1] == report.LINE_FIGSIZE


def test_the_80_percent_line_the_bound_and_the_optimum_are_labelled():
    (sc,) = select(["hog"])
    runs = [result("stock", {"hog-a": 10, "hog-b": 10, "hog-c": 10}) for _ in range(2)]
    fig = report.utilisation_figure(sc, [report.row(sc, r) for r in runs])
    texts = legend_texts(fig)
    assert "80 % (the 'nodes > 80 %' column)" in texts
    assert "lower bound on max" in texts and report.OPTIMUM_LABEL in texts
    assert "stock (n=2)" in texts
    plt.close(fig)


def test_cost_is_drawn_as_ranges_over_repeats_not_as_lines():
    runs = []
    for name in ("scale-100", "scale-500"):
        for lat in (0.1, 0.2, 0.4):
            r = timed("stock", lat)
            r.scenario = name
            runs.append(r)
    for r in runs[3:]:  # scale-500's nodes
        r.bindings = {p: f"s500-{int(p[-4:]) % 500 + 1:03d}" for p in r.bindings}
    scs = select(["scale-100", "scale-500"])
    fig = report.cost_figure(report.cost_groups(scs, runs))
    a, b = fig.axes
    bars = [c for c in a.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 2  # one per node count, stock only
    # No line joins the node counts: every plotted line is a single marker.
    assert all(len(line.get_xdata()) == 1 for ax in (a, b) for line in ax.get_lines())
    # The range bar spans the throughputs of the three runs.
    lo, hi = sorted(bars[0].lines[2][0].get_segments()[0][:, 1])
    t = sorted(x.throughput for x in (report.row(scs[0], r).timing for r in runs[:3]) if x)
    assert (lo, hi) == (t[0], t[-1])
    assert [x.get_text() for x in a.get_legend().get_texts()] == ["stock (n=3)"]
    plt.close(fig)
