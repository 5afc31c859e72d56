import asyncio
import json

import msgspec

from extender.events import (
    ANNOTATION,
    REASON,
    Decision,
    EventRecorder,
    build_event,
    format_message,
    parse_decision,
)
from extender.exceptions import KubeError


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
