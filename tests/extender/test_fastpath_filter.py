"""The filter's fast path answers exactly what the general path answers.

Two extenders, one with the fast path and one without, get the same requests over
many generated snapshots, node lists and pods; their answers and the Events they
record must be equal to the byte. The generated cases cover what the general path
handles: exempt and ignored pods, every candidate over its threshold, per-node
thresholds, observe mode, nodes without data or with refused readings, nodes of
unknown size or unknown to everyone, node names and full Node objects.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import pytest

from loadwise.extender.config import load_settings
from loadwise.extender.decide import filter_nodes
from loadwise.extender.estimate import PodFacts
from loadwise.extender.events import ANNOTATION, EventRecorder
from loadwise.extender.exemptions import (
    CONFIG_MIRROR_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    IGNORE_ANNOTATION,
)
from loadwise.extender.fastpath import LeastUsedFastPath
from loadwise.extender.ledger import Ledger
from loadwise.extender.model import (
    CPU_THRESHOLD_KEY,
    MEMORY_THRESHOLD_KEY,
    LoadSnapshot,
    NodeInfo,
    NodeLoad,
    PodLoad,
    ResourceLoad,
    Usage,
)
from loadwise.extender.nodestate import build_states
from loadwise.extender.policies import LeastUsed
from loadwise.extender.service import Extender
from loadwise.extender.wire import decode_args, encode

from .helpers import GI, MI, StaticSource, container, node_json, pod_json

CONFIGS: list[dict[str, Any]] = [
    {},
    {"filter.thresholds": {"cpu": 60, "memory": 70}},
    {"filter.thresholds": {"cpu": 45}, "policy_args": {"resources": {"memory": 1}}},
    {"mode": "observe", "filter.thresholds": {"cpu": 55, "memory": 55}},
]


def _own(doc: dict[str, Any], own: dict[str, str], as_label: bool) -> dict[str, Any]:
    meta = doc["metadata"]
    where = "labels" if as_label else "annotations"
    meta[where] = {**(meta.get(where) or {}), **own}
    return doc


def _nodes(rng: random.Random, names: list[str]) -> list[dict[str, Any]]:
    docs = []
    for name in names:
        own: dict[str, str] = {}
        if rng.random() < 0.2:
            own[CPU_THRESHOLD_KEY] = str(rng.choice([40, 75, 95, 100]))
        if rng.random() < 0.15:
            own[MEMORY_THRESHOLD_KEY] = f"{rng.choice([50, 80])}%"
        allocatable = None
        if rng.random() < 0.15:  # "0": that resource is never judged (demand_after)
            allocatable = {"cpu": rng.choice(["900m", "0"]), "memory": rng.choice(["1500Mi", "0"])}
        doc = node_json(
            name,
            cpu=str(rng.choice([1, 2, 4, 8])),
            memory=rng.choice(["2Gi", "8Gi", "32Gi"]),
            allocatable=allocatable,
        )
        docs.append(_own(doc, own, rng.random() < 0.5))
    return docs


def _reading(rng: random.Random) -> ResourceLoad:
    # quiet, any, or busy; 44.5 rounds (half away from zero) onto a 45 % threshold; a
    # standard deviation now and then (load-watcher over Prometheus), which the default
    # settings count once above the mean
    return ResourceLoad(
        rng.choice([rng.uniform(0, 60), rng.uniform(0, 100), rng.uniform(35, 99), 44.5]),
        rng.choice([None, None, 0.0, 0.5, rng.uniform(0, 20)]),
    )


def _loads(rng: random.Random, names: list[str], common: float) -> dict[str, NodeLoad]:
    """Per node: both readings (``common``: how likely), one of them, none, or a
    refused one (over 101 %, ``readings``); some nodes are not in the snapshot."""
    loads: dict[str, NodeLoad] = {}
    for name in names:
        roll = rng.random()
        if roll < common:
            loads[name] = NodeLoad(_reading(rng), _reading(rng))
        elif roll < common + 0.05:
            loads[name] = NodeLoad(ResourceLoad(None), _reading(rng))
        elif roll < common + 0.1:
            loads[name] = NodeLoad(_reading(rng), ResourceLoad(None))
        elif roll < common + 0.13:
            loads[name] = NodeLoad(ResourceLoad(250.0), _reading(rng))
        # else: not measured (a node that just joined)
    return loads


def _pod(rng: random.Random, i: int, shapes: list[dict[str, str]]) -> dict[str, Any]:
    """A pod of one of a few shapes; now and then exempt or opted out."""
    doc = pod_json(
        container(rng.choice(shapes), rng.choice([None, {"cpu": "2", "memory": "1Gi"}])),
        uid=f"u{i}",
        name=f"p{i}",
        namespace=rng.choice(["default"] * 8 + ["skipped"]),
    )
    meta, spec = doc["metadata"], doc["spec"]
    kind = rng.randrange(24)
    if kind == 0:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": "d",
                "uid": "d",
                "controller": True,
            }
        ]
    elif kind == 1:
        spec["priority"] = 2_000_001_000
    elif kind == 2:
        spec["priorityClassName"] = "system-cluster-critical"
    elif kind == 3:
        meta["annotations"] = {CONFIG_MIRROR_ANNOTATION: "x", CONFIG_SOURCE_ANNOTATION: "file"}
    elif kind == 4:
        meta["annotations"] = {CONFIG_SOURCE_ANNOTATION: "file"}
    elif kind == 5:
        meta["annotations"] = {IGNORE_ANNOTATION: rng.choice(["true", "false"])}
    return doc


def _pair(settings: Any, snap: LoadSnapshot, posted: dict[str, list[Any]]) -> dict[str, Extender]:
    exts = {}
    for kind in posted:
        rec = EventRecorder(
            lambda ns, ev, kind=kind: posted[kind].append(ev), per_minute=100_000, merge_seconds=60
        )
        ext = Extender(settings, StaticSource(snap), recorder=rec, use_fast_path=kind == "fast")
        ext.refresher.snapshot = snap
        exts[kind] = ext
    return exts


@pytest.mark.parametrize("config", range(len(CONFIGS)))
async def test_fast_and_general_filters_agree(config):
    rng = random.Random(100 + config)
    settings = load_settings(
        None,
        {"source.kind": "file", "source.file": "/dev/null", "ignore_namespaces": ["skipped"]}
        | CONFIGS[config],
    )
    now = time.time()
    posted: dict[str, list[Any]] = {"fast": [], "general": []}
    exts = _pair(settings, LoadSnapshot("s", now - 5, now, {}), posted)
    fast, general = exts["fast"], exts["general"]
    assert fast.fast_path is not None and general.fast_path is None
    taken: list[bool] = []
    real_filter = fast.fast_path.filter

    def counting(*args: Any, **kw: Any) -> Any:
        result = real_filter(*args, **kw)
        taken.append(result is not None)
        return result

    fast.fast_path.filter = counting  # type: ignore[method-assign]
    shapes = [
        {"cpu": f"{rng.randrange(1, 1500)}m", "memory": f"{rng.randrange(1, 3000)}Mi"}
        for _ in range(3)
    ] + [{}]
    uid = 0
    for round_ in range(12):
        names = [f"n{k:02d}" for k in range(rng.choice([1, 2, 5, 30]))]
        # mostly every node measured (the fast path's case), sometimes not
        common = 1.0 if round_ % 3 else 0.75
        snap = LoadSnapshot("s", now - 5, now, _loads(rng, names, common))
        nodes = _nodes(rng, names)
        for ext in exts.values():
            ext.refresher.snapshot = snap
        for i in range(30):
            if i == 15:  # the same nodes, new Node objects: sizes and own thresholds change
                nodes = _nodes(rng, names)
            uid += 1
            pod = _pod(rng, uid, shapes)
            listed = rng.sample(nodes, rng.randint(1, len(nodes)))
            if i % 2:  # full Node objects
                body: dict[str, Any] = {"Pod": pod, "Nodes": {"items": listed}}
            else:  # names: sizes from earlier full-Node requests, or unknown
                body = {"Pod": pod, "NodeNames": [n["metadata"]["name"] for n in listed]}
                if i % 10 == 4:
                    body["NodeNames"].append("ghost")  # no size, no reading
            raw = json.dumps(body).encode()
            answers = [
                encode(ext.filter(decode_args(raw, raw_nodes=False))) for ext in exts.values()
            ]
            assert answers[0] == answers[1], (round_, i, answers)
            if i % 3 == 0:  # a placement: the ledger's pending totals move
                for ext in exts.values():
                    ext.prioritize(decode_args(raw, raw_nodes=False))
            if i % 7 == 6:  # the watch says where an earlier pod went, or that it is gone
                where = rng.choice(names)
                for ext in exts.values():
                    ext.ledger.bind(
                        f"u{uid - 3}", where, PodLoad(Usage(300, MI), Usage(200, MI), 0), now
                    )
                    ext.ledger.forget(f"u{uid - 5}")
                    # a pod the reading holds left: its request comes off, floored at 0
                    big = PodLoad(Usage(), Usage(900, GI), 0)
                    ext.ledger.depart(f"gone{uid}", names[uid % len(names)], big, now)
    for ext in exts.values():
        assert ext.recorder is not None
        await ext.recorder.stop()
    assert sum(taken) >= 100 and not all(taken), (sum(taken), len(taken))  # both paths taken
    marks = [json.loads(e["metadata"]["annotations"][ANNOTATION]) for e in posted["fast"]]
    general_marks = [
        json.loads(e["metadata"]["annotations"][ANNOTATION]) for e in posted["general"]
    ]
    assert marks == general_marks
    assert [e["message"] for e in posted["fast"]] == [e["message"] for e in posted["general"]]
    # the generated cases reached what the rules are about: nodes rejected beside nodes
    # that pass, some let through, per-node thresholds
    assert sum(bool(m.get("failed")) and not m.get("let_through") for m in marks) >= 20
    assert sum(bool(m.get("let_through")) for m in marks) >= 20
    assert any(m.get("thresholds") for m in marks)


DEFAULT = {"cpu": 90.0, "memory": 90.0}


def _both(
    fast: LeastUsedFastPath,
    pod: PodFacts,
    names: list[str],
    infos: dict[str, NodeInfo],
    snap: LoadSnapshot,
    ledger: Ledger,
    *,
    exempt: bool = False,
) -> Any:
    """The fast filter's outcome, checked against ``decide.filter_nodes`` over the
    general path's node states."""
    recent = ledger.recent(snap.window_end - snap.settle_seconds)
    got = fast.filter(pod, names, infos, snap, recent, DEFAULT, exempt=exempt)
    if got is not None:
        states = build_states(names, infos, snap, fresh=True, ledger=ledger, cluster=None)
        assert got == filter_nodes(
            pod,
            states,
            DEFAULT,
            exempt=exempt,
            sigmas=fast.policy.peak_sigmas,
            band=fast.policy.spread_band,
        )
    return got


def test_rounding_at_the_threshold_is_go_round_half_away_from_zero():
    """89.5 % rounds to 90 (passes a 90 % threshold), 90.5 % to 91 (rejected)."""
    fast = LeastUsedFastPath(LeastUsed(weights={"cpu": 1, "memory": 1}))
    infos = {n: NodeInfo(n, 1000, GI, 1000, GI) for n in ("a", "b")}
    snap = LoadSnapshot(
        "s",
        0,
        0,
        {
            "a": NodeLoad(ResourceLoad(89.5), ResourceLoad(10.0)),
            "b": NodeLoad(ResourceLoad(90.5), ResourceLoad(10.0)),
        },
    )
    pod = PodFacts("p", "p", "ns", Usage(), 0, 0, 0)
    ledger = Ledger()
    got = _both(fast, pod, ["a", "b"], infos, snap, ledger)
    assert got.passed == ["a"] and got.failed == {"b": "cpu 91% > 90% threshold"}


def test_every_candidate_over_keeps_the_least_over_and_exempt_pods_pass_everywhere():
    names = ["a", "b", "c", "d"]
    infos = {n: NodeInfo(n, 1000, GI, 1000, GI) for n in names}
    # b and c share the least excess (3 points), a is 2 more, d 6 more
    cpu = {"a": 95.0, "b": 93.0, "c": 93.0, "d": 99.0}
    snap = LoadSnapshot(
        "s", 0, 0, {n: NodeLoad(ResourceLoad(c), ResourceLoad(10.0)) for n, c in cpu.items()}
    )
    pod = PodFacts("p", "p", "ns", Usage(), 0, 0, 0)
    ledger = Ledger()
    alone = LeastUsedFastPath(LeastUsed(weights={"cpu": 1, "memory": 1}, spread_band=0))
    got = _both(alone, pod, names, infos, snap, ledger)
    assert got.passed == ["b", "c"] and list(got.failed) == ["a", "d"] and got.all_over
    # with the spreading band (least-used's default, 5 points) a passes too, d stays out
    banded = LeastUsedFastPath(LeastUsed(weights={"cpu": 1, "memory": 1}))
    got = _both(banded, pod, names, infos, snap, ledger)
    assert got.passed == ["a", "b", "c"] and list(got.failed) == ["d"] and got.all_over
    exempt = _both(banded, pod, names, infos, snap, ledger, exempt=True)
    assert exempt.passed == names and not exempt.failed and len(exempt.let_through) == 4


def test_pending_placements_count_at_the_filters_figure_and_resizes_are_seen():
    """The ledger's request totals (not the estimate) move a node over; a new size or
    a threshold of the node's own is picked up without a new snapshot."""
    fast = LeastUsedFastPath(LeastUsed(weights={"cpu": 1, "memory": 1}))
    names = ["a", "b"]
    infos = {n: NodeInfo(n, 1000, GI, 1000, GI) for n in names}
    snap = LoadSnapshot(
        "s", 0, 0, {n: NodeLoad(ResourceLoad(50.0), ResourceLoad(10.0)) for n in names}
    )
    pod = PodFacts("p", "p", "ns", Usage(), 0, 0, 0)
    ledger = Ledger()
    assert _both(fast, pod, names, infos, snap, ledger).passed == names
    # counted at 450m by the filter (its request), 900m by the scores
    ledger.assume("q", "a", PodLoad(Usage(900, MI), Usage(450, MI), 0), 1.0)
    got = _both(fast, pod, names, infos, snap, ledger)
    assert got.failed == {"a": "cpu 95% > 90% threshold"}
    infos["a"] = NodeInfo("a", 1000, GI, 2000, GI)  # more allocatable: 48 %
    infos["b"] = NodeInfo("b", 1000, GI, 1000, GI, cpu_threshold=40.0)
    got = _both(fast, pod, names, infos, snap, ledger)
    assert got.failed == {"b": "cpu 50% > 40% threshold"} and got.thresholds == {
        "b": {"cpu": 40.0, "memory": 90.0}
    }
    ledger.forget("q")
    assert _both(fast, pod, names, infos, snap, ledger) is not None


def test_what_the_fast_filter_leaves_to_the_general_path():
    """A node without a reading of a weighted resource, one the snapshot does not hold,
    one of unknown size: None (the general path estimates or reads percentages)."""
    fast = LeastUsedFastPath(LeastUsed(weights={"cpu": 1, "memory": 1}))
    infos = {n: NodeInfo(n, 1000, GI, 1000, GI) for n in ("a", "b", "c")}
    snap = LoadSnapshot(
        "s",
        0,
        0,
        {
            "a": NodeLoad(ResourceLoad(10.0), ResourceLoad(10.0)),
            "b": NodeLoad(ResourceLoad(None), ResourceLoad(10.0)),
        },
    )
    pod = PodFacts("p", "p", "ns", Usage(), 0, 0, 0)
    ledger = Ledger()
    assert _both(fast, pod, ["a"], infos, snap, ledger) is not None
    assert _both(fast, pod, ["a", "b"], infos, snap, ledger) is None  # no cpu reading
    assert _both(fast, pod, ["a", "c"], infos, snap, ledger) is None  # not measured
    del infos["a"]
    assert _both(fast, pod, ["a"], infos, snap, ledger) is None  # size unknown
