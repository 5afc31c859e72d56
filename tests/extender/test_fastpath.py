"""The least-used fast path answers exactly what the general path answers."""

import json
import random
import time

import msgspec
import pytest

from loadwise.extender.config import load_settings
from loadwise.extender.decide import to_priorities
from loadwise.extender.estimate import PodFacts, pod_facts
from loadwise.extender.events import ANNOTATION, EventRecorder
from loadwise.extender.fastpath import LeastUsedFastPath
from loadwise.extender.fastpath import _priorities as fast_priorities
from loadwise.extender.fastpath import _winner as fast_winner
from loadwise.extender.ledger import Ledger, NodeTotals, Pending
from loadwise.extender.model import LoadSnapshot, NodeInfo, NodeLoad, PodLoad, ResourceLoad, Usage
from loadwise.extender.policies import LeastUsed
from loadwise.extender.service import Extender
from loadwise.extender.wire import decode_args

from .helpers import GI, MI, StaticSource, container, node_json, pod_json


def _deviation(rng: random.Random) -> float | None:
    """A standard deviation as load-watcher over Prometheus reports one, or none (the
    other sources): the default settings count it once above the mean (peak_sigmas)."""
    return rng.choice([None, 0.0, rng.uniform(0, 30)])


@pytest.mark.parametrize(
    "policy_args",
    [
        {},
        {"resources": {"memory": 1}},
        {"resources": {"cpu": 3, "memory": 1}, "dominantResourceWeight": 0},
        {"resources": {"cpu": 1}, "dominantResourceWeight": 2},
    ],
)
def test_fast_and_general_paths_agree_over_a_burst(policy_args):
    rng = random.Random(11)
    now = time.time()
    names = [f"n{i}" for i in range(40)]
    loads = {
        n: NodeLoad(
            ResourceLoad(rng.uniform(0, 101), _deviation(rng)),
            ResourceLoad(rng.uniform(0, 101), _deviation(rng)),
        )
        for n in names[:-3]
    }  # the last three have no metrics: general path (over 101 % is refused, readings.py)
    snap = LoadSnapshot("s", now - 5, now, loads)
    nodes = [
        node_json(n, cpu=str(rng.choice([1, 2, 4, 8])), memory=rng.choice(["2Gi", "8Gi", "32Gi"]))
        for n in names
    ]
    settings = load_settings(
        None, {"source.kind": "file", "source.file": "/dev/null", "policy_args": policy_args}
    )
    fast = Extender(settings, StaticSource(snap))
    general = Extender(settings, StaticSource(snap), use_fast_path=False)
    for ext in (fast, general):
        ext.refresher.snapshot = snap
    assert general.fast_path is None
    assert fast.fast_path is not None
    taken = []
    real_answer = fast.fast_path.answer

    def counting(*args, **kw):
        result = real_answer(*args, **kw)
        taken.append(result is not None)
        return result

    fast.fast_path.answer = counting
    warm = json.dumps({"Pod": pod_json(), "Nodes": {"items": nodes}}).encode()
    for ext in (fast, general):
        ext.prioritize(decode_args(warm, raw_nodes=False))
    # The scheduler sends the same node lists again and again, and a burst is mostly
    # pods of one shape: a few of each, so cached layouts and views are reused.
    # (in an order that varies: kube-scheduler's filter fills its list as parallel
    # checks finish), and windows that move over the nodes.
    lists = [rng.sample(names[:-3], 25) for _ in range(3)] + [names[:-3], names]
    lists += [lists[0][::-1], names[10:37] + names[:5]]
    shapes = [
        {"cpu": f"{rng.randrange(1, 3000)}m", "memory": f"{rng.randrange(1, 4000)}Mi"}
        for _ in range(4)
    ]
    for i in range(400):
        subset = lists[i % 7] if i % 9 else lists[4]
        requests = shapes[i % 3] if i % 11 else shapes[3]
        pod = pod_json(container(requests), uid=f"u{i}")
        body = json.dumps({"Pod": pod, "NodeNames": subset}).encode()
        a = fast.prioritize_json(decode_args(body, raw_nodes=False))
        b = general.prioritize_json(decode_args(body, raw_nodes=False))
        assert bytes(a) == bytes(b), f"request {i}"
        if i in (160, 300):
            # a node is resized (a new Node object), then a new load reading arrives
            nodes[5] = node_json(names[5], cpu=str(2 + i // 10), memory="64Gi")
            resized = json.dumps({"Pod": pod_json(uid=f"r{i}"), "Nodes": {"items": nodes}})
            for ext in (fast, general):
                ext.prioritize(decode_args(resized.encode(), raw_nodes=False))
                if i == 300:
                    ext.refresher.snapshot = LoadSnapshot("s", now - 4, now, loads)
        if i in (100, 101, 230):
            # the window moves past every placement on the busiest nodes: their
            # pending totals leave the ledger, their scores rise (maybe a step)
            for ext in (fast, general):
                for k in range(i + 1):
                    if k % 3 != 1 or i != 101:
                        ext.ledger.forget(f"u{k}")
        if i % 7 == 3:
            # the watch says where an earlier pod really went, or that it is gone:
            # pending totals move between nodes and leave the ledger
            for ext in (fast, general):
                ext.ledger.bind(
                    f"u{i - 1}", names[i % 37], PodLoad(Usage(500, MI), Usage(500, MI), 0), now
                )
                ext.ledger.forget(f"u{i - 2}")
                # and that a pod the reading holds has left: more than some small
                # nodes' reading comes off, so their use is floored at 0
                ext.ledger.depart(
                    f"gone{i}", names[3 * i % 37], PodLoad(Usage(3000, 6 * GI), Usage(), 0), now
                )
    assert len(fast.ledger) == len(general.ledger)
    # both paths were exercised (the general path takes the lists with the nodes that
    # have no metrics)
    assert sum(taken) >= 200 and not all(taken)


def _warmed_pair(snap: LoadSnapshot, nodes: list) -> tuple[Extender, Extender]:
    """An extender with the fast path and one without, on ``snap``, each told the nodes'
    sizes by one full-Node request whose pod is then forgotten."""
    settings = load_settings(None, {"source.kind": "file", "source.file": "/dev/null"})
    fast = Extender(settings, StaticSource(snap))
    general = Extender(settings, StaticSource(snap), use_fast_path=False)
    warm = json.dumps({"Pod": pod_json(uid="w"), "Nodes": {"items": nodes}}).encode()
    for ext in (fast, general):
        ext.refresher.snapshot = snap
        ext.prioritize(decode_args(warm, raw_nodes=False))
        ext.ledger.forget("w")
    return fast, general


def test_a_pending_total_that_moves_in_one_resource_only_is_rescored():
    """The ledger replaces a node's pending totals in place; a change of memory alone
    (or cpu alone) must reach the fast path's scores as it reaches the general path's."""
    now = time.time()
    names = ["n1", "n2", "n3"]
    loads = {n: NodeLoad(ResourceLoad(20.0), ResourceLoad(20.0)) for n in names}
    snap = LoadSnapshot("s", now - 5, now, loads)
    nodes = [node_json(n, cpu="4", memory="8Gi") for n in names]
    fast, general = _warmed_pair(snap, nodes)
    bodies = []
    for i, (cpu, memory) in enumerate([(100, GI), (100, 6 * GI), (3000, 6 * GI), (3000, GI)]):
        for ext in (fast, general):  # the same placement, its figures replaced
            ext.ledger.assume(
                "placed", "n1", PodLoad(Usage(cpu, memory), Usage(cpu, memory), 0), now
            )
        pod = pod_json(container({"cpu": "10m", "memory": "1Mi"}), uid=f"u{i}")
        body = json.dumps({"Pod": pod, "NodeNames": names}).encode()
        a = fast.prioritize_json(decode_args(body, raw_nodes=False))
        b = general.prioritize_json(decode_args(body, raw_nodes=False))
        assert bytes(a) == bytes(b), (i, bytes(a), bytes(b))
        bodies.append(json.loads(bytes(a))[0]["Score"])
        for ext in (fast, general):
            ext.ledger.forget(f"u{i}")
    assert len(set(bodies)) > 2, bodies  # n1's answer moved with each change


def test_raises_beyond_the_least_and_their_ceiling_are_the_general_paths():
    """Every node raises the hottest node (three lift the hottest CPU a little, the memory
    hog's node its memory by 6 points: steady-hog's case, ``least_used.beyond_least`` and
    ``RAISED_POINTS``): both paths take the least raise off and hold the hog's node at the
    ceiling, ``RAISED_GAP`` below the best of the rest, to the byte."""
    now = time.time()
    loads = {
        "sh-1": NodeLoad(ResourceLoad(40.0), ResourceLoad(66.0)),
        "sh-2": NodeLoad(ResourceLoad(39.0), ResourceLoad(63.0)),
        "sh-3": NodeLoad(ResourceLoad(38.0), ResourceLoad(63.0)),
        "sh-4": NodeLoad(ResourceLoad(2.0), ResourceLoad(75.0)),
    }
    snap = LoadSnapshot("s", now - 5, now, loads)
    fast, general = _warmed_pair(snap, [node_json(n, cpu="4", memory="8Gi") for n in loads])
    pod = pod_json(container({"cpu": "150m", "memory": "512Mi"}, {"memory": "512Mi"}), uid="p")
    body = json.dumps({"Pod": pod, "NodeNames": list(loads)}).encode()
    a = fast.prioritize_json(decode_args(body, raw_nodes=False))
    b = general.prioritize_json(decode_args(body, raw_nodes=False))
    assert bytes(a) == bytes(b)
    scores = {h["Host"]: h["Score"] for h in json.loads(bytes(a))}
    assert scores["sh-4"] == 0 and max(scores.values()) == 4, scores


def test_a_raise_of_the_hottest_level_of_all_counts_alike_on_both_paths():
    """The one-shot hog scenario's 29th pod (``least_used.OVERALL_WEIGHT``): two nodes at
    62 % CPU, the hog's at 75 % memory; a pod of 170m / 179 MiB by the request rule raises
    the hottest CPU on the two, the hottest of all on the hog's. Both paths answer the same
    bytes, and neither puts the pod beside the hog."""
    now = time.time()
    loads = {
        "hog-a": NodeLoad(ResourceLoad(62.0), ResourceLoad(33.75)),
        "hog-b": NodeLoad(ResourceLoad(62.0), ResourceLoad(33.75)),
        "hog-c": NodeLoad(ResourceLoad(12.5), ResourceLoad(75.0)),
    }
    snap = LoadSnapshot("s", now - 5, now, loads)
    fast, general = _warmed_pair(snap, [node_json(n, cpu="4", memory="8Gi") for n in loads])
    pod = pod_json(container({"cpu": "200m", "memory": "256Mi"}), uid="p")
    body = json.dumps({"Pod": pod, "NodeNames": list(loads)}).encode()
    a = fast.prioritize_json(decode_args(body, raw_nodes=False))
    b = general.prioritize_json(decode_args(body, raw_nodes=False))
    assert bytes(a) == bytes(b)
    scores = {h["Host"]: h["Score"] for h in json.loads(bytes(a))}
    assert scores["hog-c"] < max(scores["hog-a"], scores["hog-b"]), scores


async def test_event_figures_are_the_general_paths():
    """With a recorder the fast path also returns each node's use after placement;
    the Events it leads to are the general path's, to the byte."""
    rng = random.Random(5)
    now = time.time()
    names = [f"n{i:02d}" for i in range(30)]
    loads = {
        n: NodeLoad(
            ResourceLoad(rng.uniform(0, 95), _deviation(rng)),
            ResourceLoad(rng.uniform(0, 95), _deviation(rng)),
        )
        for n in names
    }
    snap = LoadSnapshot("s", now - 5, now, loads)
    nodes = [node_json(n, cpu=str(rng.choice([2, 4, 8])), memory="16Gi") for n in names]
    settings = load_settings(None, {"source.kind": "file", "source.file": "/dev/null"})
    posted = {"fast": [], "general": []}
    exts = {}
    for kind in posted:
        rec = EventRecorder(
            lambda ns, ev, kind=kind: posted[kind].append(ev), per_minute=10_000, merge_seconds=60
        )
        ext = Extender(settings, StaticSource(snap), recorder=rec, use_fast_path=kind == "fast")
        ext.refresher.snapshot = snap
        exts[kind] = ext
    taken = []
    real_answer = exts["fast"].fast_path.answer

    def counting(*args, **kw):
        result = real_answer(*args, **kw)
        taken.append(result is not None and result.figures is not None)
        return result

    exts["fast"].fast_path.answer = counting
    warm = json.dumps({"Pod": pod_json(uid="warm"), "Nodes": {"items": nodes}}).encode()
    for ext in exts.values():
        ext.prioritize(decode_args(warm, raw_nodes=False))
    first_body = b""
    for i in range(60):
        pod = pod_json(container({"cpu": "700m", "memory": "1Gi"}), uid=f"u{i}", name=f"p{i}")
        body = json.dumps({"Pod": pod, "NodeNames": rng.sample(names, 24)}).encode()
        first_body = first_body if i else body
        for ext in exts.values():
            ext.prioritize(decode_args(body, raw_nodes=False))
    for ext in exts.values():
        await ext.recorder.stop()
    assert all(taken) and len(taken) == 61
    fast = [e["metadata"]["annotations"][ANNOTATION] for e in posted["fast"]]
    general = [e["metadata"]["annotations"][ANNOTATION] for e in posted["general"]]
    assert len(fast) == 61 and fast == general
    assert [e["message"] for e in posted["fast"]] == [e["message"] for e in posted["general"]]
    # and by hand, for pod u0's favourite: measured use (its mean and one deviation, by
    # default) + the pod's estimated use
    event = next(e for e in posted["fast"] if e["involvedObject"]["uid"] == "u0")
    decision = json.loads(event["metadata"]["annotations"][ANNOTATION])
    best = decision["best"]
    info = exts["fast"].seen_nodes[best]
    usage = exts["fast"]._facts(decode_args(first_body, raw_nodes=False)).usage
    measured = loads[best].cpu.avg + (loads[best].cpu.std or 0.0)
    used = measured * info.cpu_capacity_millis / 100 + usage.cpu_millis
    assert decision["use"][best][0] == round(100 * used / info.cpu_allocatable_millis)
    assert len(decision["scores"]) == 16 and decision["omitted"] == 24 - 16  # no watch: no bound


def test_answer_body_follows_steps_through_ties_and_a_new_top():
    """A node enters the top step as a rival (its answer stays 8), then another node
    reaches step 10: the first must now answer its plain 9. Checked against the
    real kube-scheduler-facing mapping, decide.to_priorities over all nodes."""
    policy = LeastUsed(weights={"cpu": 1}, dominant_weight=0)
    fast = LeastUsedFastPath(policy)
    names = ["a", "k", "t", "b"]
    infos = {n: NodeInfo(n, 1000, GI, 1000, GI) for n in names}
    cpu = {"a": 7.0, "k": 15.0, "t": 12.0, "b": 4.0}  # percent: 70m, 150m, 120m, 40m used
    loads = {n: NodeLoad(ResourceLoad(c), ResourceLoad(10.0)) for n, c in cpu.items()}
    snap = LoadSnapshot("s", 0, 0, loads)
    pod = PodFacts("p", "p", "ns", Usage(), 0, 0, 0)

    def answer(recent):
        got = fast.answer(pod, names, infos, snap, recent)
        assert got is not None
        scores = fast.scores(pod, names, infos, snap, recent)
        expected, _ = to_priorities(names, scores)
        hosts = [{"Host": n, "Score": p} for n, p in zip(names, expected, strict=True)]
        assert json.loads(got.body) == hosts
        assert got.priorities == expected and got.win == to_priorities(names, scores)[1]
        return scores, expected

    pending = {"k": Pending(Usage(40, 0), 0, 1), "b": Pending(Usage(60, 0), 0, 1)}
    assert answer(dict(pending)) == ([93, 81, 88, 90], [9, 8, 8, 8])
    del pending["k"]  # k: 85, step 9 now, but a rival of a (93): still answers 8
    assert answer(dict(pending)) == ([93, 85, 88, 90], [9, 8, 8, 8])
    del pending["b"]  # b: 96, alone in step 10; a, k and t answer their plain 9
    assert answer(dict(pending)) == ([93, 85, 88, 96], [9, 9, 9, 10])


def test_lists_of_one_and_none_and_a_node_whose_size_is_gone():
    policy = LeastUsed(weights={"cpu": 1, "memory": 1})
    fast = LeastUsedFastPath(policy)
    infos = {n: NodeInfo(n, 2000, 4 * GI, 2000, 4 * GI) for n in "abc"}
    loads = {n: NodeLoad(ResourceLoad(10.0 * i), ResourceLoad(20.0)) for i, n in enumerate("abc")}
    snap = LoadSnapshot("s", 0, 0, loads)
    pod = PodFacts("p", "p", "ns", Usage(100, MI), 0, 0, 0)
    for names in (["a", "b", "c"], ["b"], [], ["c", "a"], ["c"]):
        got = fast.answer(pod, names, infos, snap, {}, figures=True)
        assert got is not None
        expected, win = to_priorities(names, list(got.fine))
        hosts = [{"Host": n, "Score": p} for n, p in zip(names, expected, strict=True)]
        assert json.loads(got.body) == hosts and got.win == win, names
        assert [got.figures(k)[0] for k in range(len(names))] == [
            round(100 * (200 * "abc".index(n) + 100) / 2000) for n in names
        ]
    del infos["a"]  # the table knows a, but its size is no longer known: general path
    assert fast.answer(pod, ["c", "a"], infos, snap, {}) is None
    assert fast.answer(pod, ["b", "c"], infos, snap, {}) is not None


def test_the_table_stands_while_the_readings_do():
    """The file source stamps its one reading anew every second: same ``nodes``, new
    snapshot. The table is kept then, and rebuilt for new readings."""
    policy = LeastUsed(weights={"cpu": 1, "memory": 1})
    fast = LeastUsedFastPath(policy)
    infos = {n: NodeInfo(n, 2000, 4 * GI, 2000, 4 * GI) for n in "abc"}
    loads = {n: NodeLoad(ResourceLoad(10.0 * i), ResourceLoad(20.0)) for i, n in enumerate("abc")}
    pod = PodFacts("p", "p", "ns", Usage(100, MI), 0, 0, 0)
    first = LoadSnapshot("s", 0, 0, loads)
    before = fast.answer(pod, list("abc"), infos, first, {})
    table = fast._table
    stamped = msgspec.structs.replace(first, window_end=5.0, fetched_at=5.0)
    assert fast.answer(pod, list("abc"), infos, stamped, {}) == before
    assert fast._table is table and table.snapshot is stamped
    busier = {**loads, "c": NodeLoad(ResourceLoad(90.0), ResourceLoad(90.0))}
    after = fast.answer(pod, list("abc"), infos, LoadSnapshot("s", 0, 6.0, busier), {})
    assert fast._table is not table and after.fine[2] < before.fine[2]


def test_views_kept_in_step_by_the_ledgers_log_score_as_fresh_ones(monkeypatch):
    """A view re-scores only the nodes the ledger's recent totals logged since it last
    read them; over random binds, assumptions, forgets, the window moving on and back and
    a log short enough to be cut, its scores equal those of a path that reads every total
    afresh, and the log names every node whose totals changed."""
    monkeypatch.setattr(NodeTotals, "LOG_MAX", 16)
    rng = random.Random(6)
    names = [f"n{i}" for i in range(30)]
    infos = {n: NodeInfo(n, 4000, 8 * GI, 4000, 8 * GI) for n in names}
    loads = {n: NodeLoad(ResourceLoad(rng.uniform(0, 90)), ResourceLoad(20.0)) for n in names}
    snap = LoadSnapshot("s", 0, 0, loads)
    pod = PodFacts("p", "p", "ns", Usage(100, 64 * MI), 0, 0, 0)
    kept = LeastUsedFastPath(LeastUsed(weights={"cpu": 1, "memory": 1}))
    ledger = Ledger(max_entries=40)
    since = 0.0
    recent = read = ledger.recent(since)
    seen, before = recent.seen(), {}
    for step in range(1500):
        roll = rng.random()
        key, node = f"p{rng.randint(0, 60)}", rng.choice(names)
        load = PodLoad(Usage(rng.randint(1, 900), rng.randint(1, 900) * MI), Usage(), 0)
        if roll < 0.4:
            ledger.assume(key, node, load, since + rng.uniform(0, 100))
        elif roll < 0.6:
            ledger.bind(key, node, load, since + rng.uniform(0, 100))
        elif roll < 0.75:
            ledger.forget(key)
        elif roll < 0.85:  # gone from its node, maybe before the reading, maybe after
            ledger.depart(key, node, load, since + rng.uniform(-50, 100))
        else:  # the window moves on, now and then back (a source restarted)
            since += rng.uniform(-30, 20)
        recent = ledger.recent(since)
        after = {n: (p.pods, p.departed, p.cpu_millis, p.memory_bytes) for n, p in recent.items()}
        if recent is read and seen >= recent.dropped and step % 3 == 0:
            logged = set(recent.since(seen) or ())
            assert {
                n for n in before.keys() | after.keys() if before.get(n) != after.get(n)
            } <= logged
        if step % 3 == 0:
            got = kept.scores(pod, names, infos, snap, recent)
            fresh = LeastUsedFastPath(kept.policy).scores(pod, names, infos, snap, dict(recent))
            assert got == fresh, step
            read, seen, before = recent, recent.seen(), after


def test_priorities_match_decide_to_priorities():
    """The fast path's C-level mapping against the function the general path calls,
    over ties, rivals in the top step, step 0 and repeated names."""
    rng = random.Random(3)
    for _ in range(5000):
        n = rng.randint(1, 30)
        high = rng.choice([3, 6, 12, 50, 100])
        scores = [rng.randint(0, high) for _ in range(n)]
        names = [f"n{rng.randint(0, 99):02d}" for _ in range(n)]
        assert fast_priorities(names, scores) == to_priorities(names, scores), (names, scores)
        # the ledger's pending counts break ties first (decide.to_priorities)
        counts = {name: rng.randint(0, 2) for name in names}
        assert fast_priorities(names, scores, counts.__getitem__) == to_priorities(
            names, scores, counts.__getitem__
        ), (names, scores, counts)


def test_priorities_match_over_many_nodes_and_ties():
    """The winner among many tied nodes: found by resumed index() scans when ties
    are at most an eighth of the nodes, by one compress() pass above that."""
    rng = random.Random(4)
    for ties in (2, 30, 125, 126, 400, 1000):
        scores = [rng.randint(0, 89) for _ in range(1000)]
        for i in rng.sample(range(1000), ties):
            scores[i] = 90
        ordered = [f"n{i:04d}" for i in range(1000)]  # the first or the last tied wins
        for names in (ordered, ordered[::-1], [f"n{rng.randint(0, 400):03d}" for _ in ordered]):
            counts = {name: rng.randint(0, 3) for name in names}
            assert fast_priorities(names, scores) == to_priorities(names, scores)
            assert fast_priorities(names, scores, counts.__getitem__) == to_priorities(
                names, scores, counts.__getitem__
            ), ties


def test_pod_facts_kept_per_resources_spec_are_each_pods_own():
    settings = load_settings(None, {"source.kind": "file", "source.file": "/dev/null"})
    ext = Extender(settings, StaticSource(LoadSnapshot("s", 0, 0, {})))
    rng = random.Random(2)
    for i in range(300):
        requests = {"cpu": f"{rng.choice([100, 250])}m", "memory": rng.choice(["64Mi", "1Gi"])}
        limits = rng.choice([None, {"cpu": "1"}, {"memory": "2Gi"}])
        raw = pod_json(
            container(requests, limits),
            uid=f"u{i}" if i % 5 else "",
            name=f"p{i}",
            namespace=rng.choice(["a", "b"]),
            overhead=rng.choice([None, {"cpu": "50m"}]),
        )
        args = decode_args(json.dumps({"Pod": raw, "NodeNames": []}).encode(), raw_nodes=False)
        assert ext._facts(args) == pod_facts(args.pod, ext.estimator, ext.tlp)


def test_the_winner_among_idle_ties_is_the_one_the_counts_give():
    """Told which nodes have pods pending, the winner among many tied nodes is found without
    counting each: it is the one the counts' tuples give, and to_priorities' winner, over
    ties with and without idle nodes, nodes listed with no pod pending, and repeated names."""
    rng = random.Random(8)
    for _ in range(2000):
        n = rng.choice([2, 5, 40, 230])
        names = [f"n{rng.randint(0, 2 * n):03d}" for _ in range(n)]
        scores = [rng.choice([70, 70, 70, rng.randint(0, 100)]) for _ in range(n)]
        # 0: a node the ledger holds only departures for
        busy = {name: rng.randint(0, 3) for name in names if rng.random() < rng.random()}
        top = max(scores)

        def counts(tied, busy=busy):
            return [busy.get(name, 0) for name in tied]

        expected = fast_winner(names, scores, top, counts)
        assert fast_winner(names, scores, top, counts, busy.keys()) == expected
        assert to_priorities(names, scores, lambda name, b=busy: b.get(name, 0))[1] == expected


@pytest.mark.parametrize("owned", [False, True])
def test_every_node_over_capacity_is_answered_by_the_fast_path_as_the_general_path(owned):
    """A burst larger than the cluster, before any reading shows it: the pods the ledger
    counts take every node over capacity, on CPU, then on memory too. The fast path answers
    each request (it handed them to the general path, 6.6x slower per request) and to the
    byte as the general path does, a ReplicaSet's pods (the spreading band among scores
    below 0) included."""
    rng = random.Random(5)
    now = time.time()
    names = [f"n{i}" for i in range(7)]
    loads = {
        n: NodeLoad(ResourceLoad(rng.uniform(40, 90)), ResourceLoad(rng.uniform(20, 60)))
        for n in names
    }
    snap = LoadSnapshot("s", now - 5, now, loads)
    nodes = [node_json(n, cpu=rng.choice(["1", "2"]), memory="4Gi") for n in names]
    fast, general = _warmed_pair(snap, nodes)
    assert fast.fast_path is not None
    answers = []
    real_answer = fast.fast_path.answer

    def keeping(*args, **kw):
        result = real_answer(*args, **kw)
        answers.append(result)
        return result

    fast.fast_path.answer = keeping
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "rs-1"}
    for i in range(80):
        spec = container({"cpu": f"{rng.choice([100, 250, 400])}m", "memory": "640Mi"})
        pod = pod_json(spec, uid=f"u{i}", name=f"web-1-{i}")
        if owned:
            pod["metadata"]["ownerReferences"] = [{**owner, "controller": True}]
        subset = rng.sample(names, rng.randrange(2, len(names) + 1))
        body = json.dumps({"Pod": pod, "NodeNames": subset}).encode()
        a = fast.prioritize_json(decode_args(body, raw_nodes=False))
        b = general.prioritize_json(decode_args(body, raw_nodes=False))
        assert bytes(a) == bytes(b), f"request {i}"
    assert len(answers) == 80 and None not in answers
    # the burst took every node over capacity, by amounts that order them (-100 is twice
    # the capacity or more): the first requests' best scored above 0, later ones below
    bests = [max(a.fine) for a in answers]
    assert bests[0] > 0 and any(-100 < b < 0 for b in bests) and bests[-1] < 0
    # every node over on the pods' guessed CPU, then on their memory too, with the readings
    # within (least_used.full_by_guess): both paths scored CPU at 0, then the mean of both
    softs = [a.soft for a in answers]
    assert {"cpu"} in softs and {"cpu", "memory"} in softs


def test_a_set_on_one_node_is_spread_only_onto_a_node_with_room_on_both_paths(monkeypatch):
    """``spread.near_best`` puts a node holding every pod of a set just below the best other
    node with room for the pod; a node that would end over the room bounds is passed by. The
    fast path works out the rooms only when one node holds the whole set, and must answer
    as the general path, with the nodes holding the rest of a set sometimes filtered out."""
    from loadwise.extender import fastpath
    from loadwise.extender.policies.spread import near_best

    roomless = []

    def keeping(scores, same, band=5, total=None, room=None):
        out = near_best(scores, same, band, total, room)
        if room is not None and out != near_best(scores, same, band, total):
            roomless.append(out)  # a node without room would have been spread onto
        return out

    monkeypatch.setattr(fastpath, "near_best", keeping)
    rng = random.Random(11)
    now = time.time()
    names = [f"n{i}" for i in range(5)]
    # n1 has no memory room for a 128 MiB pod (75.6 % with it) and, the hottest node being
    # n2 (no CPU room), is not held down by the hottest-node term; n3 has room and scores
    # below n1: spread onto a room-less node or not puts the holder above or below n3
    loads = {
        n: NodeLoad(ResourceLoad(cpu), ResourceLoad(memory))
        for n, (cpu, memory) in zip(
            names, ((20, 20), (40, 74), (88, 10), (70, 60), (20, 20)), strict=True
        )
    }
    snap = LoadSnapshot("s", now - 5, now, loads)
    nodes = [node_json(n, cpu="4", memory="8Gi") for n in names]
    fast, general = _warmed_pair(snap, nodes)
    for i in range(60):
        owner = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": f"web-{i % 6}",
            "uid": f"rs-{i % 6}",
            "controller": True,
        }
        spec = container({"cpu": f"{rng.choice([100, 250, 400])}m", "memory": "640Mi"})
        pod = pod_json(spec, uid=f"u{i}", name=f"web-{i % 6}-{i}")
        pod["metadata"]["ownerReferences"] = [owner]
        subset = rng.sample(names, rng.randrange(2, len(names) + 1))
        body = json.dumps({"Pod": pod, "NodeNames": subset}).encode()
        a = fast.prioritize_json(decode_args(body, raw_nodes=False))
        b = general.prioritize_json(decode_args(body, raw_nodes=False))
        assert bytes(a) == bytes(b), f"request {i}"
    assert roomless, "no request had a set on one node beside a node without room"
