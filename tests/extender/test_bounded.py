"""Every cache in the extender stays bounded whatever the load source does."""

import json
import time

from loadwise.extender import service
from loadwise.extender.config import load_settings
from loadwise.extender.ledger import Ledger
from loadwise.extender.model import LoadSnapshot, NodeLoad, PodLoad, ResourceLoad, Usage
from loadwise.extender.service import Extender, ledger_horizon
from loadwise.extender.wire import decode_args

from .helpers import StaticSource, container, node_json, pod_json


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _static_extender(clock, **extra):
    settings = load_settings(None, {"source.kind": "file", "source.file": "/dev/null", **extra})
    snap = LoadSnapshot(
        "static",
        clock.now,
        clock.now,
        {n: NodeLoad(ResourceLoad(20.0), ResourceLoad(30.0)) for n in ("a", "b", "c")},
    )
    ext = Extender(settings, StaticSource(snap), clock=clock)
    ext.refresher.snapshot = snap  # and it never changes: the window does not move
    return ext


def _names(pod):
    return decode_args(json.dumps({"Pod": pod, "NodeNames": ["a", "b", "c"]}).encode())


def _full(pod, names):
    nodes = [node_json(n) for n in names]
    return decode_args(json.dumps({"Pod": pod, "Nodes": {"items": nodes}}).encode())


def test_ledger_stays_bounded_when_the_window_never_moves():
    # 10 pods/s for 2,000 simulated seconds (three horizons) against a source whose window never
    # moves (stale_after 0: never stale, so every request reads the same window).
    clock = FakeClock(5_000_000.0)
    ext = _static_extender(clock, **{"source.stale_after_seconds": 0})
    rate, seconds = 10, 2000
    horizon = ledger_horizon(ext.settings)
    bound = int(horizon * rate) + 5 * rate + rate  # the horizon, plus one housekeeping period
    peak = peak_heap = 0
    pod = pod_json(container({"cpu": "10m", "memory": "16Mi"}))
    for second in range(seconds):
        for i in range(rate):
            pod["metadata"]["uid"] = f"{second}-{i}"
            ext.prioritize(_names(pod))
        clock.now += 1
        if second % 5 == 0:
            ext.housekeep()
        peak = max(peak, len(ext.ledger))
        peak_heap = max(peak_heap, ext.ledger.heap_size)
    assert peak <= bound, (peak, bound)
    assert peak_heap <= 2 * bound + 64, (peak_heap, bound)
    ext.housekeep()
    metrics = ext.metrics.render().decode()
    assert f"loadwise_extender_ledger_entries {float(len(ext.ledger))}" in metrics
    assert "loadwise_extender_ledger_heap_entries" in metrics


def test_ledger_hard_cap_evicts_the_oldest_first():
    ledger = Ledger(horizon=1e9, max_entries=100)
    for i in range(1000):
        ledger.assume(f"p{i}", f"n{i % 3}", PodLoad(Usage(10, 10), Usage(10, 10), 10), at=float(i))
        ledger.recent(-1.0)
    assert len(ledger) == 100
    assert sum(p.pods for p in ledger.everything().values()) == 100
    assert sum(p.pods for p in ledger.recent(899.5).values()) == 100  # p900..p999 kept
    assert sum(p.pods for p in ledger.recent(949.5).values()) == 50
    ledger.prune(now=0.0)
    assert ledger.heap_size <= 2 * 100 + 64


def test_node_size_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(service, "SEEN_NODES_MAX", 50)
    clock = FakeClock(time.time())
    ext = _static_extender(clock)
    pod = pod_json(container())
    for batch in range(40):  # 400 node names, as a cluster replacing its nodes would
        ext.prioritize(_full(pod, [f"node-{batch}-{i}" for i in range(10)]))
    assert len(ext.seen_nodes) == 50
    assert len(ext.node_sizes) == 50 and ext.node_sizes.version("node-0-0") is None
    assert "node-39-9" in ext.seen_nodes and "node-0-0" not in ext.seen_nodes
    ext.update_gauges()
    assert b"loadwise_extender_node_cache_entries 50.0" in ext.metrics.render()
