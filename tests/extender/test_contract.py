"""The Event contract (docs/contracts.md) holds between the two ends: what the
extender records is what the dashboard reads."""

from loadwise.extender.events import Decision, build_event
from loadwise.tui.objects import parse_event


def test_dashboard_reads_the_extenders_event():
    decision = Decision(
        policy="least-used",
        source="load-watcher/KubernetesMetricsServer",
        stale=True,
        scores={"a": 9, "b": 4},
        failed={"c": "memory 93% > 90% threshold"},
        best="a",
        why="cpu 12%, memory 30% after placement",
    )
    event = build_event("web-1", "shop", "uid-1", decision, now=1_800_000_000, instance="cp1")
    seen = parse_event(event)
    assert seen is not None
    assert (seen.pod, seen.namespace, seen.pod_uid) == ("web-1", "shop", "uid-1")
    assert (seen.policy, seen.source, seen.stale) == (decision.policy, decision.source, True)
    assert seen.scores == {"a": 9.0, "b": 4.0}
    assert seen.failed == decision.failed
    assert (seen.best, seen.why) == ("a", decision.why)
    assert seen.at is not None and seen.at.timestamp() == 1_800_000_000
