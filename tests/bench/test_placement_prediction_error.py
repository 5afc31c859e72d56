"""The extender's prediction error (steady_measures.prediction_error): decision records
joined with a small trace's bindings, compared by hand; and the table made of them."""

from __future__ import annotations

import json

import pytest

from benchmarks.placement.scenario import Node, Resources
from benchmarks.placement.steady_measures import Timeline, prediction_error, read_decisions
from benchmarks.placement.steady_tables import error_table
from benchmarks.placement.timeline import Stay

GI = 2.0**30

# Two 2-core / 4 GiB nodes; each pod uses 1 core and 1 GiB. p1 on a for 0-100 s, p2 on a
# for 20-60 s, p3 on b for 40-100 s.
TL = Timeline(
    (
        Node("a", Resources(2, 4 * GI), Resources(0, 0)),
        Node("b", Resources(2, 4 * GI), Resources(0, 1 * GI)),
    ),
    (
        Stay("p1", "web", "a", 0, 100),
        Stay("p2", "web", "a", 20, 60),
        Stay("p3", "web", "b", 40, 100),
    ),
    {"web": Resources(1, 1 * GI)},
    (),
    100,
)


def _record(pod, **nodes):
    return {"at": 0, "pod": f"lab/{pod}", "nodes": nodes}


def test_each_prediction_is_compared_with_its_nodes_true_use_at_the_binding_and_later():
    records = [
        _record("p1", a=[40.0, 20.0], b=[0.0, 0.0]),  # truth at 0 s on a: 50 %, 25 %
        _record("p2", a=[90.0, None]),  # truth at 20 s on a: 100 %, 50 %
        _record("p3", b=[50.0, 50.0]),  # truth at 40 s on b: 50 %, 50 % (1 GiB background)
        _record("never-bound", a=[0.0, 0.0]),
    ]
    at = prediction_error(TL, records, warmup=0.0)
    assert at.decisions == 3
    assert at.cpu == pytest.approx((10 + 10 + 0) / 3)
    assert at.memory == pytest.approx((5 + 0) / 2)  # p2 has no memory figure
    # 30 s later: a at 30 s is 100 %, a at 50 s 100 %, b at 70 s 50 %
    later = prediction_error(TL, records, lag=30.0, warmup=0.0)
    assert later.cpu == pytest.approx((60 + 10 + 0) / 3)
    # after a 30 s warm-up only p3's decision counts; past the end nothing is compared
    assert prediction_error(TL, records, warmup=30.0).decisions == 1
    assert prediction_error(TL, records, lag=90.0, warmup=0.0).decisions == 1


def test_the_last_record_of_a_pod_counts():
    retried = [_record("p1", a=[0.0, 0.0]), _record("p1", a=[50.0, 25.0])]
    got = prediction_error(TL, retried, warmup=0.0)
    assert (got.decisions, got.cpu, got.memory) == (1, 0.0, 0.0)


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([{"pod": "lab/p1"}], "decision record 0: needs"),
        ([_record("p1", a=[1.0])], "needs \\[cpu, memory\\]"),
        ([_record("p1", a=["1", 2.0])], "is not a number"),
    ],
)
def test_a_malformed_record_is_an_error_naming_it(records, message):
    with pytest.raises(ValueError, match=message):
        prediction_error(TL, records, warmup=0.0)


def test_read_decisions_names_a_bad_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(_record("p1", a=[1.0, 2.0])) + "\n\n[1]\n")
    with pytest.raises(ValueError, match=r"d.jsonl:3: not a JSON object"):
        read_decisions(str(path))
    path.write_text(json.dumps(_record("p1", a=[1.0, 2.0])) + "\n")
    assert read_decisions(str(path)) == [_record("p1", a=[1.0, 2.0])]


def test_the_table_shows_each_lag_per_contender():
    records = [_record("p1", a=[40.0, 20.0]), _record("p3", b=[50.0, 50.0])]
    errors = {
        "loadwise-least-used": [
            prediction_error(TL, records, warmup=0.0),
            prediction_error(TL, records, lag=30.0, warmup=0.0),
        ]
    }
    rows = error_table(errors)
    assert rows[2] == "| loadwise-least-used | at the binding | 2 | 5.0 | 2.5 |"
    assert rows[3].startswith("| loadwise-least-used | 30 s later | 2 | 30.0 |")


def test_the_decision_log_is_bounded_and_read_back_whole_across_its_rotation(tmp_path):
    """Past its size the log becomes <path>.1 (the one before dropped): a log left on holds
    at most twice the bound, and the reader joins both parts, the older first."""
    from loadwise.extender.decisionlog import DecisionLog

    path = tmp_path / "d.jsonl"
    log = DecisionLog(str(path), max_bytes=400)
    records = [_record(f"p{i}", a=[float(i), 1.0]) for i in range(40)]
    for record in records:
        log.write(record)
    log.close()
    assert path.stat().st_size <= 400 and (tmp_path / "d.jsonl.1").stat().st_size <= 400
    assert not (tmp_path / "d.jsonl.2").exists()
    kept = read_decisions(str(path))
    assert 0 < len(kept) < len(records)
    assert kept == records[-len(kept) :]  # the newest, in order, none twice


def test_freshness_takes_each_decisions_oldest_reading_and_flags_a_stalled_run(tmp_path):
    from benchmarks.placement.prediction import freshness_table
    from benchmarks.placement.steady_measures import STALLED_SECONDS, freshness

    fresh = [{"age": {"a": 10.0, "b": 40.0}}, {"age": {"a": 20.0}}, {"age": {"a": 30.0}}]
    f = freshness(fresh)
    assert (f.decisions, f.median, f.worst, f.stalled) == (3, 30.0, 40.0, False)
    stalled = freshness([{"age": {"a": 5.0}}, {"age": {"a": STALLED_SECONDS + 1}}])
    assert stalled.stalled
    unknown = freshness([{"nodes": {}}])  # a log from before ages were recorded
    assert (unknown.median, unknown.worst, unknown.stalled) == (None, None, False)
    logs = {"x": {tmp_path / "r1" / "x.decisions.jsonl": fresh}}
    table = freshness_table(logs, tmp_path)
    assert table[-1] == "| x | r1 | 3 | 30.0 | 40.0 | no |"


def test_a_binding_elsewhere_counts_as_overridden_onto_a_hotter_node_only_past_a_point():
    from benchmarks.placement.steady_measures import OVERRIDE_POINTS, overrides
    from benchmarks.placement.steady_tables import override_table

    def decided(pod, favourite, **nodes):
        return {**_record(pod, **nodes), "favourite": favourite}

    records = [
        decided("p1", "a", a=[40.0, 60.0], b=[40.0, 80.0]),  # a retry: the later record counts
        decided("p1", "a", a=[40.0, 60.0], b=[40.0, 81.25]),
        decided("p2", "a", a=[40.0, 60.0], b=[40.0, 60.0 + OVERRIDE_POINTS / 2]),  # a near tie
        decided("p3", "b", a=[90.0, 10.0], b=[20.0, 20.0]),  # as the extender chose
        decided("p4", "a", a=[50.0, None], b=[None, None]),  # no figure to compare
        _record("p5", a=[1.0, 1.0]),  # no favourite: left out
    ]
    placed = {"p1": "b", "p2": "b", "p3": "b", "p4": "b", "p5": "a", "p6": "a"}
    got = overrides(records, placed)
    assert (got.decisions, got.elsewhere, got.hotter) == (4, 3, 1)
    assert got.points == pytest.approx(21.25)
    none = overrides(records[3:4], {"p3": "b"})
    assert (none.elsewhere, none.hotter, none.points) == (0, 0, None)
    table = override_table({"least-used": [got, none, got]})
    assert table[-1] == "| least-used | 4 (1-4) | 3 (0-3) | 1 (0-1) | 21.2 (21.2-21.2) |"
