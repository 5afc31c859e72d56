"""The least-used fast path answers exactly what the general path answers."""

import json
import random
import time

import pytest

from extender.config import load_settings
from extender.model import LoadSnapshot, NodeLoad, ResourceLoad, Usage
from extender.service import Extender
from extender.wire import decode_args

from .helpers import MI, StaticSource, container, node_json, pod_json


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
        n: NodeLoad(ResourceLoad(rng.uniform(0, 110)), ResourceLoad(rng.uniform(0, 110)))
        for n in names[:-3]
    }  # the last three have no metrics: general path
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
    for i in range(200):
        subset = rng.sample(names[:-3], 25) if i % 4 else rng.sample(names, 25)
        pod = pod_json(
            container(
                {"cpu": f"{rng.randrange(1, 3000)}m", "memory": f"{rng.randrange(1, 4000)}Mi"}
            ),
            uid=f"u{i}",
        )
        body = json.dumps({"Pod": pod, "NodeNames": subset}).encode()
        a = fast.prioritize_json(decode_args(body, raw_nodes=False))
        b = general.prioritize_json(decode_args(body, raw_nodes=False))
        assert bytes(a) == bytes(b), f"request {i}"
        if i % 7 == 3:
            # the watch says where an earlier pod really went, or that it is gone:
            # pending totals move between nodes and leave the ledger
            for ext in (fast, general):
                ext.ledger.bind(f"u{i - 1}", names[i % 37], Usage(500, MI), 0, now)
                ext.ledger.forget(f"u{i - 2}")
    assert len(fast.ledger) == len(general.ledger)
    assert sum(taken) >= 140 and not all(taken)  # both paths were exercised
