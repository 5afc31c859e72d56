"""Each load source against recorded documents."""

import json
import math
import os
import time

import pytest

from loadwise.extender.config import load_settings
from loadwise.extender.inflight import held_share
from loadwise.extender.model import LoadSnapshot
from loadwise.extender.service import ledger_horizon
from loadwise.extender.sources import (
    LoadFileSource,
    Refresher,
    SourceError,
    parse_node_metrics,
    parse_vector,
    parse_vectors,
    parse_watcher,
)
from loadwise.extender.sources.watcher import WATCHER_WINDOW_SECONDS

from .helpers import node_info

# load-watcher v0.2.4 /watcher with the Prometheus provider (reference §4.4)
WATCHER_PROMETHEUS = json.dumps(
    {
        "timestamp": 1735689600,
        "window": {"duration": "15m", "start": 1735688700, "end": 1735689600},
        "source": "Prometheus",
        "data": {
            "NodeMetricsMap": {
                "worker-1": {
                    "metrics": [
                        {
                            "name": "instance:node_cpu:ratio",
                            "type": "CPU",
                            "operator": "AVG",
                            "rollup": "15m",
                            "value": 26.4,
                        },
                        {
                            "name": "instance:node_memory_utilisation:ratio",
                            "type": "Memory",
                            "operator": "AVG",
                            "rollup": "15m",
                            "value": 48.1,
                        },
                        {
                            "name": "instance:node_cpu:ratio",
                            "type": "CPU",
                            "operator": "STD",
                            "rollup": "15m",
                            "value": 7.9,
                        },
                        {
                            "name": "instance:node_memory_utilisation:ratio",
                            "type": "Memory",
                            "operator": "STD",
                            "rollup": "15m",
                            "value": 1.2,
                        },
                    ],
                    "tags": {},
                    "metadata": {"dataCenter": ""},
                },
                "worker-2": {
                    "metrics": [
                        {
                            "name": "instance:node_cpu:ratio",
                            "type": "CPU",
                            "operator": "AVG",
                            "rollup": "15m",
                            "value": 60.0,
                        },
                        {
                            "name": "instance:node_cpu:ratio",
                            "type": "CPU",
                            "operator": "STD",
                            "rollup": "15m",
                            "value": 12.5,
                        },
                    ],
                    "tags": {},
                    "metadata": {"dataCenter": ""},
                },
            }
        },
    }
).encode()

# metrics-server provider entry shape: operator Latest, empty name and rollup
WATCHER_METRICS_SERVER = json.dumps(
    {
        "timestamp": 1735689600,
        "window": {"duration": "15m", "start": 1735688700, "end": 1735689600},
        "source": "KubernetesMetricsServer",
        "data": {
            "NodeMetricsMap": {
                "n1": {
                    "metrics": [
                        {
                            "name": "",
                            "type": "CPU",
                            "operator": "Latest",
                            "rollup": "",
                            "value": 26.4,
                        },
                        {
                            "name": "",
                            "type": "Memory",
                            "operator": "Latest",
                            "rollup": "",
                            "value": 70.0,
                        },
                    ],
                    "tags": {},
                    "metadata": {"dataCenter": ""},
                }
            }
        },
    }
).encode()


def test_watcher_prometheus_document():
    snap = parse_watcher(WATCHER_PROMETHEUS, fetched_at=1735689605.0)
    assert snap.window_end == 1735689600 and snap.source == "load-watcher/Prometheus"
    w1 = snap.nodes["worker-1"]
    assert (w1.cpu.avg, w1.cpu.std, w1.memory.avg, w1.memory.std) == (26.4, 7.9, 48.1, 1.2)
    w2 = snap.nodes["worker-2"]
    assert w2.cpu.avg == 60.0 and w2.memory.avg is None


def test_watcher_metrics_server_document_latest_operator():
    n1 = parse_watcher(WATCHER_METRICS_SERVER).nodes["n1"]
    assert (n1.cpu.avg, n1.cpu.std, n1.memory.avg) == (26.4, None, 70.0)


def test_how_long_a_placed_pod_may_be_missing_depends_on_the_document():
    # Latest values (load-watcher's metrics-server provider) show a pod sooner than a
    # 15-minute average does; the ledger stops counting a pod on top of them sooner.
    assert parse_watcher(WATCHER_METRICS_SERVER).settle_seconds == 45.0
    # an averaged document's means run over its window: 15 minutes here, so a pod placed
    # 2 minutes before its end is held at 2/15 and counted at the other 13/15
    prom = parse_watcher(WATCHER_PROMETHEUS)
    assert prom.settle_seconds == 900.0
    assert held_share(prom.window_end - 120, math.inf, prom) == pytest.approx(120 / 900)
    doc = json.loads(WATCHER_PROMETHEUS)
    for window, settle in [
        ({"duration": "5m", "start": 1735689300, "end": 1735689600}, 300.0),  # the fallback
        ({"duration": "15m", "start": 0, "end": 1735689600}, 60.0),  # no start: Trimaran's
        ({"duration": "15m", "start": 1735689600, "end": 1735689600}, 60.0),  # none before end
        ({"duration": "2h", "start": 1735682400, "end": 1735689600}, 900.0),  # at most 15m
        ({"duration": "10s", "start": 1735689590, "end": 1735689600}, 60.0),  # at least 60 s
        (None, 60.0),
    ]:
        doc["window"] = window
        assert parse_watcher(json.dumps(doc).encode()).settle_seconds == settle, window


def test_the_ledger_keeps_placements_for_load_watcher_s_whole_window():
    settings = load_settings(None, {"source.kind": "load-watcher", "source.url": "http://x"})
    assert ledger_horizon(settings) >= settings.source.max_stale + WATCHER_WINDOW_SECONDS
    other = load_settings(None, {"source.kind": "file", "source.file": "/dev/null"})
    assert ledger_horizon(other) < ledger_horizon(settings)


def test_avg_wins_over_latest():
    doc = {
        "timestamp": 5,
        "data": {
            "NodeMetricsMap": {
                "n": {
                    "metrics": [
                        {"type": "CPU", "operator": "AVG", "value": 10},
                        {"type": "CPU", "operator": "Latest", "value": 90},
                    ]
                }
            }
        },
    }
    assert parse_watcher(json.dumps(doc).encode()).nodes["n"].cpu.avg == 10


def test_stale_repository_example_shape_is_rejected():
    # load-watcher's watcher-example.json: no NodeMetricsMap level
    stale = b'{"timestamp":1,"window":{},"source":"","data":{"node-1":{"metrics":[]}}}'
    with pytest.raises(SourceError, match="no data.NodeMetricsMap"):
        parse_watcher(stale)


def test_watcher_garbage():
    with pytest.raises(SourceError, match="not a load-watcher"):
        parse_watcher(b"<html>")


def test_metrics_server_node_metrics_quantities():
    body = json.dumps(
        {
            "kind": "NodeMetricsList",
            "apiVersion": "metrics.k8s.io/v1beta1",
            "metadata": {},
            "items": [
                {
                    "metadata": {"name": "n1"},
                    "timestamp": "2026-11-22T10:00:00Z",
                    "window": "20.05s",
                    "usage": {"cpu": "1500000000n", "memory": "4194304Ki"},
                },
                {
                    "metadata": {"name": "unknown"},
                    "timestamp": "2026-11-22T10:00:00Z",
                    "window": "20s",
                    "usage": {"cpu": "1", "memory": "1Gi"},
                },
            ],
        }
    ).encode()
    snap = parse_node_metrics(body, {"n1": node_info("n1", cpu="4", memory="8Gi")})
    assert snap.nodes["n1"].cpu.avg == pytest.approx(37.5)
    assert snap.nodes["n1"].memory.avg == pytest.approx(50.0)
    assert "unknown" not in snap.nodes
    assert snap.window_end == pytest.approx(1795341600.0)  # 2026-11-22T10:00:00Z


def test_metrics_server_bad_quantity_refuses_that_node_only():
    body = (
        b'{"items":[{"metadata":{"name":"n1"},"usage":{"cpu":"lots"}},'
        b'{"metadata":{"name":"n2"},"usage":{"cpu":"2","memory":"2Gi"}}]}'
    )
    snap = parse_node_metrics(body, {"n1": node_info("n1"), "n2": node_info("n2")})
    assert set(snap.nodes) == {"n2"} and snap.nodes["n2"].cpu.avg == pytest.approx(50.0)
    assert snap.invalid["n1"].reason == "malformed"
    assert snap.invalid["n1"].detail == 'usage: "lots" is not a quantity'


def test_prometheus_vector():
    body = json.dumps(
        {
            "status": "success",
            "data": {
                "resultType": "vector",
                "result": [
                    {
                        "metric": {"node": "a", "instance": "10.0.0.1:9100"},
                        "value": [1700000000.5, "0.42"],
                    },
                    {"metric": {"node": "b"}, "value": [1700000001, "0.1"]},
                    {"metric": {"instance": "x"}, "value": [1700000001, "0.9"]},
                ],
            },
        }
    ).encode()
    vector = parse_vector(body, "node")
    assert vector.values == {"a": pytest.approx(42.0), "b": pytest.approx(10.0)}
    assert vector.newest == 1700000001 and vector.malformed == {}


def test_prometheus_errors():
    with pytest.raises(SourceError, match="bad_data: parse error"):
        parse_vector(
            b'{"status":"error","errorType":"bad_data","error":"bad_data: parse error"}', "i"
        )
    with pytest.raises(SourceError, match="returned matrix"):
        parse_vector(b'{"status":"success","data":{"resultType":"matrix","result":[]}}', "i")


def test_load_file_rereads_on_change_and_ages_with_mtime(tmp_path):
    path = tmp_path / "load.json"
    path.write_bytes(WATCHER_METRICS_SERVER)
    source = LoadFileSource(path)
    first = source.read()
    assert first.nodes["n1"].cpu.avg == 26.4
    assert first.window_end == pytest.approx(path.stat().st_mtime)
    path.write_bytes(WATCHER_METRICS_SERVER.replace(b"26.4", b"99.0"))
    os.utime(path, (time.time() + 5, time.time() + 5))
    assert source.read().nodes["n1"].cpu.avg == 99.0


def test_load_file_missing_and_broken(tmp_path):
    with pytest.raises(SourceError, match="No such file"):
        LoadFileSource(tmp_path / "nope.json").read()
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(SourceError, match="bad.json"):
        LoadFileSource(bad).read()


class FlakySource:
    name = "flaky"

    def __init__(self, snapshots):
        self.snapshots = list(snapshots)

    async def fetch(self):
        item = self.snapshots.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    async def close(self):
        pass


async def test_refresher_keeps_previous_snapshot_on_error_and_goes_stale():
    now = time.time()
    good = LoadSnapshot("s", now - 10, now, {})
    errors = []
    r = Refresher(
        FlakySource([good, SourceError("down"), RuntimeError("bug")]),
        interval=60,
        stale_after=30,
        on_error=errors.append,
    )
    assert not r.fresh() and r.age() is None
    await r.refresh_once()
    assert r.fresh(now) and r.age(now) == pytest.approx(10)
    await r.refresh_once()
    await r.refresh_once()
    assert r.snapshot is good and errors == ["down", "RuntimeError: bug"]
    assert not r.fresh(now + 25)  # 35 s after the window end
    never = Refresher(FlakySource([]), interval=1, stale_after=0)
    never.snapshot = good
    assert never.fresh(now + 10**6)


def test_a_saturated_node_reading_just_over_full_stays_full():
    # A rate over a window reads a saturated CPU a little above capacity (and an idle
    # one a little below zero): within SLACK that is jitter, read as 100 % and 0 %, so
    # the busiest node is not mistaken for one of unknown load. A use up to SATURATED
    # (demand over capacity, as kwok's nodes report it) is kept as read, so a departure
    # comes off what the node really held; beyond it, refused.
    doc = json.loads(WATCHER_METRICS_SERVER)
    metrics = doc["data"]["NodeMetricsMap"]["n1"]["metrics"]
    metrics[0]["value"], metrics[1]["value"] = 100.6, -0.4
    n1 = parse_watcher(json.dumps(doc).encode(), fetched_at=2e9).nodes["n1"]
    assert (n1.cpu.avg, n1.memory.avg) == (100.0, 0.0)
    metrics[0]["value"] = 118.0
    n1 = parse_watcher(json.dumps(doc).encode(), fetched_at=2e9).nodes["n1"]
    assert n1.cpu.avg == 118.0
    metrics[0]["value"] = 200.0
    n1 = parse_watcher(json.dumps(doc).encode(), fetched_at=2e9).nodes["n1"]
    assert n1.cpu.avg == 200.0
    metrics[0]["value"] = 200.5
    snap = parse_watcher(json.dumps(doc).encode(), fetched_at=2e9)
    assert snap.nodes == {} and snap.invalid["n1"].reason == "over_capacity"
    assert snap.invalid["n1"].detail == "cpu use 200.5% is over 200% of capacity"


def test_load_file_touched_in_the_future_is_dated_at_the_read(tmp_path):
    path = tmp_path / "load.json"
    path.write_bytes(WATCHER_METRICS_SERVER)
    ahead = time.time() + 86400
    os.utime(path, (ahead, ahead))
    before = time.time()
    snap = LoadFileSource(path).read()
    assert before <= snap.window_end <= time.time()


def test_an_entry_of_the_wrong_shape_refuses_its_node_only():
    vector = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"instance": "a"}, "value": [1700000000, "0.25"]},
                {"metric": {"instance": "b"}, "value": "0.5"},
                [1, 2],  # no labels at all: nothing to refuse it under
            ],
        },
    }
    body = json.dumps(vector).encode()
    snap = parse_vectors(body, body, "instance", fetched_at=1700000005)
    assert snap.nodes["a"].cpu.avg == pytest.approx(25.0) and set(snap.nodes) == {"a"}
    assert snap.invalid["b"].detail == (
        "cpu sample unusable: Expected `array | null`, got `str` - at `$.value`"
    )
    items = [
        {"metadata": {"name": "n1"}, "usage": {"cpu": "1", "memory": "1Gi"}},
        {"metadata": {"name": "n2"}, "usage": {"cpu": None}},
    ]
    infos = {"n1": node_info("n1"), "n2": node_info("n2")}
    snap = parse_node_metrics(json.dumps({"items": items}).encode(), infos)
    assert set(snap.nodes) == {"n1"} and snap.invalid["n2"].reason == "malformed"
    with pytest.raises(SourceError, match="not a NodeMetricsList"):
        parse_node_metrics(b'{"items": 7}', infos)
