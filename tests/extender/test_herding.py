"""Herding protection and new nodes, the two things the peers get wrong."""

import json
import time

from extender.config import load_settings
from extender.ledger import Ledger
from extender.model import LoadSnapshot, NodeLoad, ResourceLoad, Usage
from extender.nodestate import ClusterFacts, build_states
from extender.service import Extender
from extender.wire import decode_args

from .helpers import StaticSource, container, node_info, node_json, pod_json


def snapshot(loads, age=5.0):
    now = time.time()
    return LoadSnapshot(
        "static",
        now - age,
        now,
        {n: NodeLoad(ResourceLoad(c), ResourceLoad(m)) for n, (c, m) in loads.items()},
    )


def test_ledger_counts_only_placements_after_the_window():
    ledger = Ledger()
    ledger.assume("a", "n1", Usage(100, 10), 150, at=1000)
    ledger.assume("b", "n1", Usage(200, 20), 300, at=2000)
    ledger.bind("c", "n2", Usage(50, 5), 75, at=2000)
    pending = ledger.pending(since=1500)
    assert pending["n1"].usage == Usage(200, 20) and pending["n1"].pods == 1
    assert pending["n2"].tlp_cpu_millis == 75
    # a bind moves an assumption; an assumption never overrides a bind
    ledger.bind("b", "n2", Usage(200, 20), 300, at=2001)
    ledger.assume("b", "n1", Usage(200, 20), 300, at=2002)
    assert ledger.pending(since=1500)["n2"].pods == 2 and "n1" not in ledger.pending(since=1500)
    assert ledger.pending(unconfirmed_only=True)["n1"].pods == 1
    ledger.prune(now=1000 + 301)
    assert len(ledger) == 2
    ledger.forget("b")
    assert len(ledger) == 1


def test_new_node_is_estimated_not_zero():
    snap = snapshot({"old": (60.0, 70.0), "idle": (10.0, 20.0)})
    infos = {n: node_info(n) for n in ("old", "idle", "new")}
    states = build_states(
        ["old", "idle", "new"], infos, snap, fresh=True, ledger=Ledger(), cluster=None
    )
    new = states[2]
    assert new.estimated and new.load.cpu.avg == 10.0 and new.load.memory.avg == 20.0
    assert not states[0].estimated


def test_new_node_estimate_includes_its_known_pods():
    snap = snapshot({"old": (50.0, 50.0)})
    infos = {"old": node_info("old"), "new": node_info("new", cpu="4", memory="8Gi")}
    facts = ClusterFacts({"new": 2}, {"new": Usage(1000, 2 * 1024**3)}, {"new": 1500})
    new = build_states(["new"], infos, snap, fresh=True, ledger=Ledger(), cluster=facts)[0]
    assert new.load.cpu.avg == 50.0 + 25.0 and new.load.memory.avg == 50.0 + 25.0
    assert new.pod_count == 2


def test_stale_snapshot_is_unknown_not_zero():
    snap = snapshot({"hot": (95.0, 95.0)}, age=3600)
    state = build_states(
        ["hot"], {"hot": node_info("hot")}, snap, fresh=False, ledger=Ledger(), cluster=None
    )[0]
    assert state.estimated  # the 95 % is not trusted, and not read as 0 % either


def _extender(loads, policy="least-used", **extra):
    settings = load_settings(
        None, {"source.kind": "file", "source.file": "/dev/null", "policy": policy, **extra}
    )
    ext = Extender(settings, StaticSource(snapshot(loads)))
    ext.refresher.snapshot = ext.refresher.source.snapshot
    return ext


def _args(pod, nodes):
    return decode_args(
        json.dumps(
            {"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}
        ).encode()
    )


def test_burst_without_kubeconfig_spreads_over_cool_nodes():
    # Three equal cool nodes, one hot; 30 pods arrive before any new measurement.
    ext = _extender({"a": (10, 10), "b": (10, 10), "c": (10, 10), "hot": (85, 85)})
    nodes = [node_json(n, cpu="8", memory="16Gi") for n in ("a", "b", "c", "hot")]
    placed: dict[str, int] = {}
    for i in range(30):
        pod = pod_json(container({"cpu": "500m", "memory": "1Gi"}), name=f"p{i}", uid=f"u{i}")
        scores = ext.prioritize(_args(pod, nodes))
        best = max(scores, key=lambda h: (h.score, -ord(h.host[0])))
        placed[best.host] = placed.get(best.host, 0) + 1
    assert "hot" not in placed
    assert set(placed) == {"a", "b", "c"} and max(placed.values()) - min(placed.values()) <= 2


def test_without_ledger_the_same_burst_would_herd():
    ext = _extender({"a": (10, 10), "b": (12, 12)})
    nodes = [node_json(n, cpu="8", memory="16Gi") for n in ("a", "b")]
    pod = pod_json(container({"cpu": "1", "memory": "2Gi"}), uid="x")
    first = {h.host: h.score for h in ext.prioritize(_args(pod, nodes))}
    ext.ledger = type(ext.ledger)()  # forget: every pod sees the same picture
    again = {h.host: h.score for h in ext.prioritize(_args(pod, nodes))}
    assert first == again and first["a"] >= first["b"]


def test_filter_rejects_hot_node_with_reason():
    ext = _extender({"ok": (20, 40), "hog": (10, 93)})
    nodes = [node_json("ok"), node_json("hog")]
    result = ext.filter(_args(pod_json(container({"memory": "64Mi"})), nodes))
    names = [json.loads(bytes(raw))["metadata"]["name"] for raw in result.nodes.items]
    assert names == ["ok"]
    assert result.failed_nodes["hog"].startswith("memory 94% > 90% threshold")


def test_new_node_receives_pods():
    ext = _extender({"a": (30, 40), "b": (35, 45)})
    nodes = [node_json(n) for n in ("a", "b", "fresh")]
    scores = {h.host: h.score for h in ext.prioritize(_args(pod_json(container()), nodes))}
    assert scores["fresh"] >= max(scores["a"], scores["b"]) and scores["fresh"] > 0


def test_single_node_left_by_filter_is_counted_as_placed():
    ext = _extender({"a": (10, 10), "b": (10, 95)})
    nodes = [node_json("a"), node_json("b")]
    pod = pod_json(container({"cpu": "1", "memory": "1Gi"}), uid="only")
    result = ext.filter(_args(pod, nodes))
    assert len(result.nodes.items) == 1
    assert ext.ledger.pending()["a"].pods == 1


def test_ledger_running_totals_match_a_full_recount():
    import random

    rng = random.Random(7)
    ledger = Ledger()
    truth: dict[str, tuple[str, float, bool]] = {}
    since = 0.0
    for step in range(3000):
        key = f"p{rng.randrange(400)}"
        node = f"n{rng.randrange(5)}"
        at = step + rng.uniform(-50, 0)
        op = rng.random()
        if op < 0.45:
            ledger.assume(key, node, Usage(100, 10), 150, at)
            if key not in truth or not truth[key][2]:
                truth[key] = (node, at, False)
        elif op < 0.8:
            prev = truth.get(key)
            ledger.bind(key, node, Usage(100, 10), 150, at)
            if not (prev and prev[2] and prev[0] == node):
                at2 = min(at, prev[1]) if prev and prev[0] == node else at
                truth[key] = (node, at2, True)
        elif op < 0.9:
            ledger.forget(key)
            truth.pop(key, None)
        if step % 97 == 0:
            since = step - rng.uniform(0, 200) if rng.random() < 0.2 else max(since, step - 100)
            got = {n: p.pods for n, p in ledger.recent(since).items()}
            want: dict[str, int] = {}
            for n, t, _ in truth.values():
                if t > since:
                    want[n] = want.get(n, 0) + 1
            assert got == want
            unconf: dict[str, int] = {}
            for n, _, confirmed in truth.values():
                if not confirmed:
                    unconf[n] = unconf.get(n, 0) + 1
            assert {n: p.pods for n, p in ledger.unconfirmed().items()} == unconf
            assert ledger.recent(since).get("n0") is None or ledger.recent(since)[
                "n0"
            ].cpu_millis == (100 * ledger.recent(since)["n0"].pods)
