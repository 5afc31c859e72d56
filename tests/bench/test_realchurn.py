"""The real-node churn benchmark's pure parts (benchmarks/realchurn.py), the counting it shares
with realplacement (benchmarks/realcount.py) and the per-worker memory sizes it brings the
cluster up with (lab/realnodes.py worker_limits). No cluster: the run itself is
`make bench-realchurn`."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks import realchurn, realcount
from benchmarks.realchurn import Churn, Pod, Run, Workload
from lab import realnodes

W1, W2 = realnodes.WORKERS
GI = 2**30


# --- the seeded stream ----------------------------------------------------------------------


def test_lifetimes_are_the_same_for_a_seed_and_differ_between_seeds() -> None:
    first = realchurn.lifetimes(realchurn.WORKLOADS, 300, "7/1")
    assert first == realchurn.lifetimes(realchurn.WORKLOADS, 300, "7/1")
    for other in ("7/2", "8/1"):
        again = realchurn.lifetimes(realchurn.WORKLOADS, 300, other)
        assert all(again[w.name] != first[w.name] for w in realchurn.WORKLOADS), other


def test_lifetimes_lie_in_each_workloads_range_and_last_the_duration() -> None:
    duration = 240.0
    drawn = realchurn.lifetimes(realchurn.WORKLOADS, duration, "3/1")
    assert set(drawn) == {w.name for w in realchurn.WORKLOADS}
    for w in realchurn.WORKLOADS:
        lo, hi = w.lifetime
        assert all(lo <= x <= hi for x in drawn[w.name]), w
        # more than every slot living its shortest life, back to back, could use
        assert len(drawn[w.name]) >= w.replicas * duration / lo, w
        assert len(set(drawn[w.name])) > 1, w  # drawn, not one constant


def test_a_workloads_lifetimes_do_not_depend_on_the_others() -> None:
    a = Workload("a", 2, request_mib=10, hold_mib=20, lifetime=(10, 20))
    b = Workload("b", 2, request_mib=10, hold_mib=20, lifetime=(10, 20))
    assert realchurn.lifetimes([a, b], 100, "1/1")["b"] == realchurn.lifetimes([b], 100, "1/1")["b"]
    # the same range under two names: two draws
    both = realchurn.lifetimes([a, b], 100, "1/1")
    assert both["a"] != both["b"]


@pytest.mark.parametrize("lifetime", [(0, 10), (20, 10), (-5, 5)])
def test_a_lifetime_range_must_be_positive_and_ordered(lifetime: tuple[float, float]) -> None:
    w = Workload("bad", 1, request_mib=1, hold_mib=1, lifetime=lifetime)
    with pytest.raises(ValueError, match="bad"):
        realchurn.lifetimes([w], 100, "1/1")


def test_runs_of_one_repeat_share_a_seed_across_contenders_and_repeats_differ() -> None:
    assert realchurn.run_seed(5, 1) == realchurn.run_seed(5, 1)
    assert len({realchurn.run_seed(5, k) for k in range(1, 6)}) == 5
    assert realchurn.run_seed(5, 1) != realchurn.run_seed(6, 1)


def pod(uid: str, workload: str, created: float) -> Pod:
    return Pod(uid, f"{workload}-{uid}", workload, created)


def test_each_pod_takes_its_workloads_next_lifetime_in_creation_order() -> None:
    churn = Churn({"a": [10.0, 20.0, 30.0], "b": [50.0]})
    # listed out of order: the one created first takes the first lifetime
    first = [pod("p2", "a", 101.0), pod("p1", "a", 100.0), pod("q1", "b", 100.0)]
    assert churn.due(first, 109.0) == []
    assert churn.lifetime == {"p1": 10.0, "p2": 20.0, "q1": 50.0}
    assert [p.uid for p in churn.due(first, 110.0)] == ["p1"]
    assert churn.due(first, 110.5) == []  # returned once: the caller deletes it
    # p1's replacement takes a's third lifetime; b's only lifetime is used again
    second = [first[0], first[2], pod("p3", "a", 111.0), pod("q2", "b", 112.0)]
    assert [p.uid for p in churn.due(second, 140.0)] == ["p2"]
    assert (churn.lifetime["p3"], churn.lifetime["q2"]) == (30.0, 50.0)
    assert churn.used == {"a": 3, "b": 2}
    assert {p.uid for p in churn.due(second, 162.0)} == {"q1", "p3", "q2"}


def test_pods_created_in_the_same_second_take_lifetimes_by_name() -> None:
    one, other = Churn({"a": [1.0, 2.0]}), Churn({"a": [1.0, 2.0]})
    pods = [pod("y", "a", 50.0), pod("x", "a", 50.0)]
    one.due(pods, 0.0)
    other.due(list(reversed(pods)), 0.0)
    assert one.lifetime == other.lifetime == {"x": 1.0, "y": 2.0}


# --- the workers' memory sizes --------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("2Gi", {W1: 2 * GI, W2: 2 * GI}),
        ("3Gi,2Gi", {W1: 3 * GI, W2: 2 * GI}),
        (" 3Gi , 1536Mi ", {W1: 3 * GI, W2: 1536 * 2**20}),
        (["1Gi", "2Gi"], {W1: GI, W2: 2 * GI}),
        ({W2: "1Gi", W1: "4Gi"}, {W1: 4 * GI, W2: GI}),
    ],
)
def test_worker_memory_is_one_size_for_all_or_one_each(spec: object, want: dict[str, int]) -> None:
    assert realnodes.worker_limits(spec) == want  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("1Gi,2Gi,3Gi", "3 worker memory sizes for 2 workers"),
        ([], "0 worker memory sizes for 2 workers"),
        ({W1: "1Gi"}, f"missing {W2}"),
        ({W1: "1Gi", W2: "1Gi", "loadwise-real-w3": "1Gi"}, "unknown loadwise-real-w3"),
        ("2Gi,lots", f"{W2}: 'lots' is not a memory quantity"),
        ("100Mi", "below 512 MiB"),
        ("2Gi,-1Gi", f"{W2}: '-1Gi' is below"),
    ],
)
def test_wrong_worker_memory_is_refused_saying_why(spec: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        realnodes.worker_limits(spec)  # type: ignore[arg-type]


def test_the_layout_with_one_worker_takes_one_size() -> None:
    assert realnodes.worker_limits("2Gi", (W1,)) == {W1: 2 * GI}
    with pytest.raises(ValueError, match="2 worker memory sizes for 1 workers"):
        realnodes.worker_limits("2Gi,3Gi", (W1,))


def test_the_benchmark_refuses_bad_sizes_and_a_hog_too_big_for_its_worker(capsys) -> None:
    args = realchurn.parser().parse_args(["--worker-memory", "4Gi,2Gi"])
    assert args.worker_memory == "4Gi,2Gi"
    for argv, message in [
        (["--worker-memory", "2Gi,2Gi,2Gi"], "3 worker memory sizes"),
        (["--worker-memory", "2Gi", "--hog-memory", "2048"], "does not fit on"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            realchurn.main(argv)
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err


# --- counting and the table -----------------------------------------------------------------


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def api_pod(**status: object) -> SimpleNamespace:
    """A pod as the Kubernetes client returns it, with what Seen.look reads."""
    terminated = status.pop("terminated", None)
    return SimpleNamespace(
        spec=SimpleNamespace(node_name=status.pop("node", W1)),
        metadata=SimpleNamespace(creation_timestamp=at(100)),
        status=SimpleNamespace(
            phase=status.pop("phase", "Running"),
            reason=status.pop("reason", None),
            conditions=status.pop("conditions", []),
            container_statuses=[
                SimpleNamespace(
                    restart_count=status.pop("restarts", 0),
                    last_state=SimpleNamespace(terminated=terminated),
                    state=SimpleNamespace(terminated=None),
                )
            ],
        ),
    )


def oom(container_id: str, exit_code: int = 137) -> SimpleNamespace:
    return SimpleNamespace(reason="OOMKilled", exit_code=exit_code, container_id=container_id,
                           finished_at=None)  # fmt: skip


def test_seen_counts_each_oom_killed_container_once_and_the_kubelets_evictions() -> None:
    ready = SimpleNamespace(type="Ready", status="True", reason=None, last_transition_time=at(103))
    seen = realcount.Seen("p")
    seen.look(api_pod(conditions=[ready], terminated=oom("c1"), restarts=1))
    seen.look(api_pod(conditions=[ready], terminated=oom("c1"), restarts=1))  # sampled again
    seen.look(api_pod(conditions=[ready], terminated=oom("c2"), restarts=2))
    assert (seen.startup, seen.oom_killed, seen.restarts) == (3.0, {"c1", "c2"}, 2)
    assert not seen.evicted
    # an OOMKilled reason without SIGKILL's 137 is not a kill
    other = realcount.Seen("q")
    other.look(api_pod(terminated=oom("c3", exit_code=0)))
    assert other.oom_killed == set() and other.startup is None
    by_kubelet, by_api = (
        SimpleNamespace(
            type="DisruptionTarget", status="True", reason=reason, last_transition_time=at(104)
        )  # fmt: skip
        for reason in ("TerminationByKubelet", "EvictionByEvictionAPI")
    )
    evicted, deleted = realcount.Seen("e"), realcount.Seen("d")
    evicted.look(api_pod(conditions=[by_kubelet], phase="Succeeded"))
    deleted.look(api_pod(conditions=[by_api]))
    assert evicted.evicted and not deleted.evicted
    assert deleted.api_evicted and not evicted.api_evicted


def test_tally_counts_per_node_and_takes_evicted_names_from_events() -> None:
    pods = [
        realcount.Seen("a", node=W1, startup=2.0, oom_killed={"x", "y"}, restarts=2),
        realcount.Seen("b", node=W1, startup=4.0, evicted=True),
        realcount.Seen("c", node=W2, startup=3.0, running=True),
        realcount.Seen("d", node=W2),  # bound, never Ready
        realcount.Seen("e"),  # never bound
        realcount.Seen("f", node=W2, startup=1.0, api_evicted=True),
    ]
    t = realcount.tally(pods, {"d", "not-ours"})
    assert t.bound == {W1: 2, W2: 3}
    assert t.oom_kills == {W1: 2}
    assert t.evicted_pods == {W1: 1, W2: 1}
    assert t.api_evicted == {W2: 1}
    assert t.running_at_end == {W2: 1}
    assert (t.restarts, sorted(t.startup_seconds), t.never_ready) == (2, [1.0, 2.0, 3.0, 4.0], 2)


def test_percentile_is_a_nearest_rank_value() -> None:
    values = [float(x) for x in range(100, 0, -1)]  # 100..1, unsorted
    assert realcount.percentile(values, 50) == 50.0
    assert realcount.percentile(values, 99) == 99.0
    assert realcount.percentile(values, 100) == 100.0
    assert realcount.percentile(values, 0) == 1.0
    assert realcount.percentile([7.0, 1.0, 3.0], 99) == 7.0
    assert realcount.percentile([], 50) is None
    with pytest.raises(ValueError):
        realcount.percentile([1.0], 101)


def run(contender: str, repeat: int, **kw: object) -> Run:
    r = Run(contender, repeat, f"1/{repeat}", "2026-11-28T17:00:00Z", (1.0, 1.0, 1.0), {})
    return dataclasses.replace(r, **kw)  # type: ignore[arg-type]


RUNS = [
    run("stock", 1, bound={W1: 9, W2: 5}, oom_kills={W1: 2}, evicted_pods={W1: 1},
        pressure_seconds={W1: 40.0, W2: 0.0}, startup_seconds=[1.0, 2.0, 9.0], deleted=10),
    run("stock", 2, bound={W1: 12, W2: 4}, kernel_oom={W1: {"burner": 3}},
        pressure_seconds={W1: 70.5, W2: 0.0}, startup_seconds=[2.0, 3.0, 4.0], deleted=12),
    run("stock", 3, bound={W1: 10, W2: 6}, evicted_pods={W1: 4, W2: 1},
        pressure_seconds={W1: 0.0, W2: 0.0}, startup_seconds=[], deleted=11, never_ready=16),
    run("loadwise", 1, bound={W2: 14}, pressure_seconds={W1: 0.0, W2: 0.0},
        startup_seconds=[2.0], deleted=10),
]  # fmt: skip


def test_the_summary_gives_each_contenders_median_and_range() -> None:
    s = realcount.summary(RUNS, realchurn.columns())
    assert list(s) == ["stock", "loadwise"]
    assert s["stock"]["pods on w1"] == {"n": 3, "median": 10.0, "min": 9.0, "max": 12.0}
    assert s["stock"]["pressure s w1"] == {"n": 3, "median": 40.0, "min": 0.0, "max": 70.5}
    assert s["stock"]["evicted"]["median"] == 1.0 and s["stock"]["evicted"]["max"] == 5.0
    assert s["stock"]["kernel OOM kills"]["max"] == 3.0
    # startup: the run without a Ready pod has no figure, not a zero
    assert s["stock"]["start p99 s"] == {"n": 2, "median": 6.5, "min": 4.0, "max": 9.0}
    assert s["loadwise"]["pods on w1"] == {"n": 1, "median": 0.0, "min": 0.0, "max": 0.0}
    assert s["loadwise"]["pods on w2"]["median"] == 14.0


def test_the_table_has_a_row_per_contender_with_median_and_range() -> None:
    lines = realcount.markdown_table(RUNS, realchurn.columns()).splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header[:4] == ["contender", "n", "pods on w1", "pods on w2"]
    assert len(lines) == 4 and set(lines[1]) == {"|", "-"}
    stock = dict(zip(header, (c.strip() for c in lines[2].strip("|").split("|")), strict=True))
    assert stock["n"] == "3"
    assert stock["pods on w1"] == "10 (9-12)"
    assert stock["pressure s w1"] == "40 (0-70.5)"
    loadwise = dict(zip(header, (c.strip() for c in lines[3].strip("|").split("|")), strict=True))
    assert loadwise["pods on w1"] == "0" and loadwise["start p50 s"] == "2"


def test_a_run_that_bound_nothing_or_deleted_nothing_is_broken() -> None:
    assert realchurn.broken(RUNS) == []
    problems = realchurn.broken([run("stock", 1), run("loadwise", 1, bound={W2: 12})])
    assert problems == ["stock run 1: no pod bound", "loadwise run 1: the churn deleted no pod"]


def test_runs_go_in_blocks_per_contender_and_each_is_kept_before_the_next(monkeypatch) -> None:
    switched: list[str] = []
    monkeypatch.setattr(realcount, "switch", lambda host, contender: switched.append(contender))
    runs: list[Run] = []
    saved: list[int] = []

    def one(kube: object, contender: str, repeat: int) -> Run:
        if (contender, repeat) == ("loadwise", 2):
            raise RuntimeError("the second loadwise run failed")
        return run(contender, repeat)

    with pytest.raises(RuntimeError, match="second loadwise"):
        realcount.in_blocks(
            "host", None, ["stock", "loadwise"], 2, one, runs,  # type: ignore[arg-type]
            lambda done: saved.append(len(done)),
        )  # fmt: skip
    assert switched == ["stock", "loadwise"]
    assert [(r.contender, r.repeat) for r in runs] == [("stock", 1), ("stock", 2), ("loadwise", 1)]
    assert saved == [1, 2, 3]


def test_runs_can_start_at_a_later_number_to_replay_one_trace(monkeypatch) -> None:
    monkeypatch.setattr(realcount, "switch", lambda host, contender: None)
    runs: list[Run] = []

    def one(kube: object, contender: str, repeat: int) -> Run:
        return run(contender, repeat, seed=realchurn.run_seed(3401, repeat))

    realcount.in_blocks(
        "host", None, ["loadwise"], 1, one, runs, None, 3,  # type: ignore[arg-type]
    )  # fmt: skip
    assert [(r.repeat, r.seed) for r in runs] == [(3, "3401/3")]
    assert realchurn.parser().parse_args(["--first-repeat", "3"]).first_repeat == 3


def test_the_table_is_printed_again_from_a_results_file(tmp_path, capsys) -> None:
    runs = [
        run("stock", 1, bound={W1: 9, W2: 5}, oom_kills={W1: 2}),
        run("loadwise", 1, bound={W2: 14}, pods=14, deleted=10),
    ]
    realchurn.write(tmp_path, {"commit": "abc1234"}, runs)
    assert realchurn.recorded(tmp_path / "results.json") == [
        dataclasses.replace(r, load_average=list(r.load_average)) for r in runs
    ]
    assert realchurn.main(["--table", str(tmp_path / "results.json")]) == 0
    assert (
        capsys.readouterr().out.strip()
        == realcount.markdown_table(runs, realchurn.columns()).strip()
    )


def test_a_run_keeps_its_events_and_the_extenders_journal_for_its_own_span(monkeypatch) -> None:
    def event(seconds: float, reason: str, name: str, message: str) -> SimpleNamespace:
        return SimpleNamespace(
            last_timestamp=at(seconds), event_time=None, metadata=None, reason=reason,
            involved_object=SimpleNamespace(kind="Pod", name=name), count=1, message=message,
        )  # fmt: skip

    items = [
        event(130, "Evicted", "api-2", "The node was low on resource: memory."),
        event(50, "Scheduled", "api-0", "before the run"),
        event(120, "LoadwiseScored", "api-1", "w1 scored 20: raises the hottest node"),
    ]
    scheduler = SimpleNamespace(metadata=SimpleNamespace(name="kube-scheduler-cp"))
    logs = "I1201 scheduled\nE1201 failed to run extender: context deadline exceeded\n"
    core = SimpleNamespace(
        list_namespaced_event=lambda ns: SimpleNamespace(items=items),
        list_namespaced_pod=lambda ns, label_selector: SimpleNamespace(items=[scheduler]),
        read_namespaced_pod_log=lambda name, ns, since_seconds: logs,
    )
    scripts: list[tuple[str, str]] = []

    def sh(node: str, script: str, check: bool = True) -> str:
        scripts.append((node, script))
        return "line one\nline two\n"

    monkeypatch.setattr(realnodes, "sh", sh)
    kept = realcount.evidence(SimpleNamespace(core=lambda: core), at(100).timestamp())  # type: ignore[arg-type]
    assert [(e["reason"], e["object"]) for e in kept["events"]] == [
        ("LoadwiseScored", "Pod/api-1"),
        ("Evicted", "Pod/api-2"),
    ]
    assert kept["journal"] == ["line one", "line two"]
    assert kept["scheduler"] == {
        "kube-scheduler-cp": ["E1201 failed to run extender: context deadline exceeded"]
    }
    assert scripts[0][0] == realnodes.CONTROL_PLANE
    assert f"--since @{int(at(100).timestamp())}" in scripts[0][1]
    assert realchurn.evidence_path("out", "loadwise", 3) == Path("out/evidence/loadwise-3.json.gz")
