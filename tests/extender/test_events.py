import asyncio
import json

import msgspec
from msgspec.structs import replace

from loadwise.extender.events import (
    ANNOTATION,
    REASON,
    Decision,
    EventRecorder,
    Scored,
    build_event,
    encode_decision,
    format_message,
    parse_decision,
    with_candidates,
)
from loadwise.extender.exceptions import KubeError


def test_message_and_annotation_round_trip():
    d = Decision(
        policy="least-used",
        source="load-watcher",
        scores={"b": 7, "a": 9, "c": 0},
        failed={"d": "memory 93% > 90% threshold"},
        best="a",
        why="cpu 12%, memory 30% after placement",
    )
    assert format_message(d) == (
        "scores a=9 b=7 c=0; best a: cpu 12%, memory 30% after placement; "
        "filtered d: memory 93% > 90% threshold"
    )
    event = build_event("web-1", "shop", "uid-1", d, now=0, instance="cp1")
    assert event["reason"] == REASON and event["involvedObject"]["uid"] == "uid-1"
    assert event["metadata"]["namespace"] == "shop"
    assert parse_decision(event["metadata"]["annotations"][ANNOTATION]) == d
    assert event["firstTimestamp"] == "1970-01-01T00:00:00Z"


def test_long_messages_are_truncated_to_the_api_limit():
    d = Decision(policy="p", source="s", failed={f"node-{i:04d}": "x" * 200 for i in range(50)})
    assert len(format_message(d)) <= 1024


async def test_recorder_merges_filter_and_prioritize_and_rate_limits():
    posted = []
    outcomes = []
    rec = EventRecorder(
        lambda ns, ev: posted.append((ns, ev)),
        per_minute=1,
        merge_seconds=0.05,
        on_result=outcomes.append,
    )
    rec.start()
    base = Decision(policy="least-used", source="file")
    rec.note(
        "u1", "p1", "ns", "u1", lambda d: msgspec.structs.replace(d, failed={"x": "hot"}), base
    )
    rec.note(
        "u1",
        "p1",
        "ns",
        "u1",
        lambda d: msgspec.structs.replace(d, scores={"y": 8}, best="y"),
        base,
    )
    rec.note("u2", "p2", "ns", "u2", lambda d: d, base)
    for _ in range(50):
        if len(outcomes) == 2:
            break
        await asyncio.sleep(0.02)
    await rec.stop()
    assert len(posted) == 1 and outcomes == ["sent", "rate_limited"]
    decision = json.loads(posted[0][1]["metadata"]["annotations"][ANNOTATION])
    assert decision["failed"] == {"x": "hot"} and decision["scores"] == {"y": 8}


async def test_recorder_survives_post_failures():
    outcomes = []

    def boom(ns, ev):
        raise KubeError("POST /api/v1/namespaces/ns/events: HTTP 403", 403)

    rec = EventRecorder(boom, per_minute=10, merge_seconds=0.01, on_result=outcomes.append)
    rec.start()
    rec.note("u", "p", "ns", "u", lambda d: d, Decision(policy="p", source="s"))
    for _ in range(50):
        if outcomes:
            break
        await asyncio.sleep(0.02)
    await rec.stop()
    assert outcomes == ["error"]


# -- decision format v2 (docs/contracts.md) ------------------------------------


def _scored(n: int, fine, priorities, cpu=None):
    names = [f"node-{i:02d}" for i in range(n)]
    cpu = cpu or (lambda i: (i, 100 - i, i % 5 == 0))
    return Scored(names, priorities, fine, cpu)


def test_decision_lists_16_best_plus_favourite_and_bound():
    # 40 nodes; the fine score falls with the index, in pairs, so priorities tie in steps
    fine = [95 - (i // 2) * 2 for i in range(40)]
    priorities = [min(10, (s + 5) // 10) for s in fine]
    scored = _scored(40, fine, priorities)
    base = Decision(policy="least-used", source="file", best="node-00", bound="node-37")
    d = with_candidates(base, scored)
    listed = [f"node-{i:02d}" for i in range(16)] + ["node-37"]
    assert sorted(d.scores) == listed and sorted(d.use) == listed
    assert d.omitted == 40 - 17
    assert d.scores["node-37"] == priorities[37] and d.use["node-37"] == [37, 63]
    assert d.estimated == ["node-00", "node-05", "node-10", "node-15"]
    assert d.tied == ["node-00", "node-01"]  # fine 95 and 95: the only priority 10s
    annotation = json.loads(encode_decision(d))
    assert annotation["bound"] == "node-37" and annotation["omitted"] == 23
    assert parse_decision(encode_decision(d)) == d


def test_small_decision_lists_every_node_and_no_tie_or_bound():
    scored = _scored(3, [90, 40, 10], [9, 4, 1], lambda i: (10 * i, None, False))
    d = with_candidates(Decision(policy="p", source="s", best="node-00"), scored)
    assert d.scores == {"node-00": 9, "node-01": 4, "node-02": 1} and d.omitted == 0
    assert d.use["node-02"] == [20, None] and d.tied is None
    annotation = json.loads(encode_decision(d))
    assert "tied" not in annotation and "bound" not in annotation
    assert "went" not in format_message(d) and "best node-00" in format_message(d)


def _bound_decision(bound, tied):
    scored = _scored(
        3, [93, 91, 60], [9, 9, 6], lambda i: ([12, 13, 50][i], [30, 29, 40][i], False)
    )
    base = Decision(
        policy="p", source="s", best="node-00", why="cpu 12%, memory 30% after placement"
    )
    d = with_candidates(msgspec.structs.replace(base, bound=bound), scored)
    assert d.tied == tied
    return d


def test_message_says_where_the_pod_went_and_why_not_the_favourite():
    tie = _bound_decision("node-01", ["node-00", "node-01"])
    assert format_message(tie).startswith(
        "scheduler chose node-01 (9; cpu 13%; mem 29%) over favourite node-00 "
        "(9; cpu 12%; mem 30%): tie at the top priority, the scheduler picks at random"
    )
    plugins = _bound_decision("node-02", ["node-00", "node-01"])
    assert format_message(plugins).startswith(
        "scheduler chose node-02 (6; cpu 50%; mem 40%) over favourite node-00"
    )
    assert "the scheduler's own plugin scores outweighed" in format_message(plugins)
    same = _bound_decision("node-00", ["node-00", "node-01"])
    assert format_message(same).startswith(
        "bound to node-00 (9; cpu 12%; mem 30%), the favourite: cpu 12%, memory 30%"
    )


def _pod(uid, node):
    from loadwise.extender.wire import Pod

    from .helpers import container, pod_json

    raw = pod_json(container({"cpu": "100m"}), name=f"web-{uid}", namespace="shop", uid=uid)
    raw["spec"]["nodeName"] = node
    return msgspec.convert(raw, type=Pod)


async def test_bound_comes_from_the_pod_watch_and_does_not_wait_longer():
    from loadwise.extender.cluster import ClusterWatch
    from loadwise.extender.estimate import EstimatorArgs, TLPArgs
    from loadwise.extender.ledger import Ledger
    from loadwise.extender.wiring import RecordedPlacements

    posted = []
    rec = EventRecorder(
        lambda ns, ev: posted.append(ev), per_minute=60, merge_seconds=0.02, bind_wait_seconds=30
    )
    ledger = Ledger()
    watch = ClusterWatch(
        None, estimator=EstimatorArgs(), tlp=TLPArgs(), placements=RecordedPlacements(ledger, rec)
    )
    rec.start()
    scored = _scored(3, [93, 91, 60], [9, 9, 6], lambda i: (i, i, False))
    best = Decision(policy="p", source="s")
    rec.note("w1", "web-w1", "shop", "w1", lambda d: replace(d, best="node-00"), best, scored)
    await asyncio.sleep(0.1)
    assert not posted  # merged, but waiting for the binding (up to 30 s)
    watch._pod_event("MODIFIED", _pod("w1", "node-01"))  # what the reflector applies
    for _ in range(50):
        if posted:
            break
        await asyncio.sleep(0.02)
    await rec.stop()
    assert len(posted) == 1 and ledger.everything()["node-01"].pods == 1
    decision = json.loads(posted[0]["metadata"]["annotations"][ANNOTATION])
    assert decision["bound"] == "node-01" and decision["best"] == "node-00"
    assert posted[0]["message"].startswith("scheduler chose node-01 (9; cpu 1%; mem 1%)")


async def test_without_a_binding_no_event_goes_after_the_bounded_wait():
    """With a pod watch, a pod it has not seen bound within the wait gets no Event: the
    request may have named a pod that does not exist (anyone who can reach the port can
    send one), and an Event would be written into its namespace all the same."""
    posted, outcomes = [], []
    rec = EventRecorder(
        lambda ns, ev: posted.append(ev),
        per_minute=60,
        merge_seconds=0.02,
        bind_wait_seconds=0.2,
        on_result=outcomes.append,
    )
    rec.start()
    rec.note("u", "p", "ns", "u", lambda d: d, Decision(policy="p", source="s"))
    for _ in range(50):
        if outcomes:
            break
        await asyncio.sleep(0.02)
    await rec.stop()
    assert outcomes == ["unbound"] and not posted


def test_pending_pods_are_capped_and_counted_and_shown_as_a_gauge():
    from loadwise.extender.metrics import Metrics

    outcomes = []
    rec = EventRecorder(
        lambda ns, ev: None, per_minute=60, max_pending=2, on_result=outcomes.append
    )
    metrics = Metrics()
    metrics.events_pending.set_function(rec.__len__)
    for uid in ("a", "b", "c"):
        rec.note(uid, uid, "ns", uid, lambda d: d, Decision(policy="p", source="s"))
    rec.note("a", "a", "ns", "a", lambda d: d, Decision(policy="p", source="s"))  # known: kept
    assert len(rec) == 2 and outcomes == ["dropped"]
    assert b"loadwise_extender_events_pending 2.0" in metrics.render()
    assert rec.wants("a") and not rec.wants("c")  # what note keeps and drops


def test_a_full_recorder_changes_no_answer_and_counts_each_note_it_could_not_take():
    # The extender asks before it builds a note (figures, reasons): once the recorder is
    # full, each verb's note about a new pod is counted as dropped, as note() would.
    import time

    from loadwise.extender.config import load_settings
    from loadwise.extender.model import LoadSnapshot, NodeLoad, ResourceLoad
    from loadwise.extender.service import Extender
    from loadwise.extender.wire import decode_args

    from .helpers import StaticSource, container, node_json, pod_json

    settings = load_settings(None, {"source.kind": "file", "source.file": "/dev/null"})
    now = time.time()
    names = [f"n{i}" for i in range(5)]
    loads = {n: NodeLoad(ResourceLoad(10.0 * i), ResourceLoad(20.0)) for i, n in enumerate(names)}
    snap = LoadSnapshot("s", now - 5, now, loads)
    outcomes: list[str] = []
    full = EventRecorder(
        lambda ns, ev: None, per_minute=60, max_pending=1, on_result=outcomes.append
    )
    exts = [Extender(settings, StaticSource(snap), recorder=r) for r in (full, None)]
    nodes = [node_json(n) for n in names]
    for ext in exts:
        ext.refresher.snapshot = snap
    assert exts[0].fast_path is not None
    real_answer, asked = exts[0].fast_path.answer, []

    def answer(*args, figures=False, **kw):  # type: ignore[no-untyped-def]
        asked.append(figures)
        return real_answer(*args, figures=figures, **kw)

    exts[0].fast_path.answer = answer  # type: ignore[method-assign]
    for i in range(3):
        pod = pod_json(container({"cpu": "300m", "memory": "256Mi"}), name=f"p{i}", uid=f"u{i}")
        raw = json.dumps({"Pod": pod, "Nodes": {"items": nodes}}).encode()
        answers = []
        for ext in exts:
            filtered = ext.filter(decode_args(raw, raw_nodes=False))
            answers.append(
                (
                    msgspec.json.encode(filtered),
                    bytes(ext.prioritize_json(decode_args(raw, raw_nodes=False))),
                )
            )
        assert answers[0] == answers[1], i
    assert len(full) == 1 and outcomes == ["dropped"] * 4
    assert asked == [True, False, False]  # no figures gathered for a note not taken


def test_message_when_only_the_filter_ran():
    d = Decision(policy="p", source="s", failed={"b": "cpu 95% > 90% threshold"}, bound="a")
    assert format_message(d) == "bound to a; filtered b: cpu 95% > 90% threshold"
