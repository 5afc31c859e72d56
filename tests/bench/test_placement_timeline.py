"""A steady run's measures over time (benchmarks/placement/timeline.py) add up by hand and
agree with sampling, and the report's steady rows come from a run's result."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.placement import report
from benchmarks.placement.runner import RunResult
from benchmarks.placement.scenario import Change, Node, Resources, loads
from benchmarks.placement.steady_report import figure, stays, steady_row, table
from benchmarks.placement.timeline import OverTime, Stay, over_time, segments
from tests.bench.test_placement_steady import STEADY

if TYPE_CHECKING:
    from matplotlib.figure import Figure

GI = 2.0**30


def measured(*args, **kwargs) -> OverTime:
    """over_time of the segments of these arguments."""
    return over_time(list(segments(*args, **kwargs)))


NODES = [
    Node("a", Resources(2, 4 * GI), Resources(0, 0)),
    Node("b", Resources(2, 4 * GI), Resources(0, 1 * GI), hot=True),
]
USAGE = {"web": Resources(0.5, 1 * GI)}


def test_over_time_integrates_the_hottest_node_by_hand():
    # 0-10 s: a has one pod (25 % CPU, 25 % mem), b its 1 GiB background (25 %): 25 %.
    # 10-20 s: a second pod on b: b at 50 % memory. 20-30 s: b's background goes to 3 GiB
    # (100 %, demand over capacity: 3 + 1 = 4 GiB of 4) while a stays at 25 %.
    stays_ = [Stay("p1", "web", "a", 0, 30), Stay("p2", "web", "b", 10, 30)]
    over = measured(NODES, stays_, USAGE, {"web": 2}, (0, 30), [Change(20, "b", 3 * GI)])
    assert over.seconds == 30
    assert over.mean_hottest == pytest.approx((10 * 0.25 + 10 * 0.5 + 10 * 1.0) / 30)
    assert over.peak_hottest == pytest.approx(1.0)
    assert over.over_80_seconds == pytest.approx(10)
    assert over.over_capacity_seconds == 0  # exactly at capacity is not above it
    assert over.mean_pods_on_hot == pytest.approx(20 / 30)  # p2 on hot b for 20 of 30 s
    assert over.peak_share == pytest.approx(0.5)


def test_a_replacement_bound_as_its_predecessor_goes_is_never_counted_beside_it():
    stays_ = [Stay("p1", "web", "a", 0, 10), Stay("p2", "web", "a", 10, 20)]
    over = measured(NODES, stays_, USAGE, {"web": 1}, (0, 20))
    assert over.peak_hottest == pytest.approx(0.25)  # never two pods on a (50 %)
    assert over.peak_share == pytest.approx(1.0)


def test_a_change_can_make_a_node_hot_and_cool_again():
    change = [Change(5, "a", 0, hot=True), Change(15, "a", 0, hot=False)]
    nodes = [NODES[0], Node("b", NODES[1].capacity, NODES[1].background)]  # b not hot
    over = measured(nodes, [Stay("p1", "web", "a", 0, 20)], USAGE, {"web": 1}, (0, 20), change)
    assert over.mean_pods_on_hot == pytest.approx(10 / 20)


def test_only_the_part_of_a_stay_inside_the_span_counts():
    over = measured(NODES, [Stay("p1", "web", "a", -10, 5)], USAGE, {"web": 1}, (0, 10))
    assert over.mean_hottest == pytest.approx((5 * 0.25 + 5 * 0.25) / 10)  # b's 25 % after
    with pytest.raises(ValueError, match="not a node"):
        measured(NODES, [Stay("p", "web", "z", 0, 1)], USAGE, {"web": 1}, (0, 10))
    with pytest.raises(ValueError, match="empty span"):
        measured(NODES, [], USAGE, {"web": 1}, (5, 5))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("ab"), st.floats(0, 50), st.floats(0.1, 50)),
        max_size=12,
    )
)
def test_over_time_agrees_with_sampling_the_step_function(raw):
    """Against a plain reading of the same stays at the middle of every 0.02 s step."""
    stays_ = [Stay(f"p{i}", "web", n, s, s + d) for i, (n, s, d) in enumerate(raw)]
    over = measured(NODES, stays_, USAGE, {"web": 4}, (0, 60))
    step, total, peak, above = 0.02, 0.0, 0.0, 0.0
    for k in range(3000):
        t = (k + 0.5) * step
        here = [s for s in stays_ if s.start <= t < s.end]
        util = [
            max(
                sum(USAGE["web"].cpu for s in here if s.node == n.name) / n.capacity.cpu,
                (n.background.memory + sum(GI for s in here if s.node == n.name))
                / n.capacity.memory,
            )
            for n in NODES
        ]
        total += max(util) * step
        peak = max(peak, max(util))
        above += step if max(util) > 0.8 else 0
    assert over.mean_hottest == pytest.approx(total / 60, abs=0.01)
    assert over.peak_hottest >= peak - 1e-9  # sampling can only miss a short peak
    assert over.over_80_seconds == pytest.approx(above, abs=0.1 * (len(raw) + 1))


def result(contender: str = "stock+descheduler") -> RunResult:
    """A steady run of STEADY: web-1 on a for 20 s, web-2 on b from 10 s, b's background
    raised to 3 GiB at 15 s, one pod evicted."""
    r = RunResult("s", contender)
    r.stream = [100.0, 130.0]
    r.created = {"web-1": 99.0, "web-2": 109.0}
    r.bound_at = {"web-1": 100.0, "web-2": 110.0}
    r.placed = {"web-1": "a", "web-2": "b"}
    r.workloads = {"web-1": "web", "web-2": "web"}
    r.gone_at = {"web-1": 120.0}
    r.expired = ["web-1"]
    r.evictions = [{"pod": "web-9", "node": "a", "at": 125.0}]
    r.changes = [{"node": "b", "memory": 3 * GI, "hot": True, "at": 115.0}]
    return r


def test_a_steady_row_and_table_come_from_a_run_result():
    sc, r = loads(STEADY), result()
    assert [(s.pod, s.start, s.end) for s in stays(r, 100.0, 130.0)] == [
        ("web-1", 0.0, 20.0),
        ("web-2", 10.0, 30.0),
    ]
    row = steady_row(sc, r)
    assert (row.placed, row.expired, row.evicted) == (2, 1, 1)
    assert row.over is not None
    # b: 1 GiB until 115 s, then 3 GiB background + web-2's 1 GiB = 100 %
    assert row.over.peak_hottest == pytest.approx(1.0)
    assert row.over.mean_pods_on_hot == pytest.approx(15 / 30)
    assert row.p50 == pytest.approx(1.0)
    lines = table([row, row])
    assert lines[2].startswith("| stock+descheduler | 2 | 2 (2-2) | ")
    assert "| 1 (1-1) | 1 (1-1) | 0 (0-0) |" in lines[2]


def test_the_report_of_a_steady_scenario_has_its_table_and_plot_over_time(tmp_path):
    sc = loads(STEADY)
    runs = [result("stock"), result("stock+descheduler")]
    runs[0].stream = None  # a run that failed before its stream: a row, no line
    runs[0].error = "the lab broke"
    fig = figure(sc, runs)
    assert fig is not None
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()][:1] == [
        "stock+descheduler (n=1, the median run)"
    ]
    md = report.write(tmp_path, [sc], runs).read_text()
    assert "| stock | 1 | 2 | - | - |" in md, md  # no stream, no figures over it
    assert "| stock+descheduler | 1 | 2 | 66.7 | 100.0 | 15 | 0 | 0.5 | 25 | 1 | 1 | 0 |" in md
    assert "- stock: the lab broke" in md
    assert "![the hottest node over time, s](placement/s.png)" in md
    assert (tmp_path / "placement" / "s.png").stat().st_size > 0
    assert "**Steady** scenarios are a stream" in md
    assert figure(sc, runs[:1]) is None


def _annotations(fig: Figure) -> list[str]:
    from matplotlib.text import Annotation

    (ax,) = fig.axes
    return [t.get_text() for t in ax.texts if isinstance(t, Annotation)]


def test_changes_at_one_instant_share_a_label_and_many_instants_get_none():
    # two changes at 30 s: one line, one label naming both
    sc = loads(STEADY.replace("at_seconds: 60", "at_seconds: 30"))
    fig = figure(sc, [result()])
    assert fig is not None
    assert _annotations(fig) == ["b 3Gi, a 0.5Gi"]  # in the file's order
    assert "background changed" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    # a change every 10 s (steady-vary's kind of scenario): the labels would overprint
    many = "".join(
        f"    - {{at_seconds: {t}, node: {'ab'[i % 2]}, memory: {1 + i % 2}Gi}}\n"
        for i, t in enumerate(range(10, 300, 10))
    )
    head = STEADY.split("  changes:\n")[0]
    fig = figure(loads(head + "  changes:\n" + many), [result()])
    assert fig is not None
    assert _annotations(fig) == []
    assert len(fig.axes[0].get_lines()) == 2 + 29  # the 80 % and capacity lines, one per change
