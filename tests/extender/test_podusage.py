"""Per-pod use: PodMetrics and cAdvisor series parsed and checked per pod, the store
bounded, the sources' errors clear."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest

from loadwise.extender.exceptions import KubeError
from loadwise.extender.podusage import (
    PodUsage,
    PodUsageReading,
    PodUsageStore,
    parse_pod_metrics,
    parse_pod_vectors,
)
from loadwise.extender.sources.base import SourceError
from loadwise.extender.sources.pod_metrics import CPU_QUERY, MEMORY_QUERY, parse_container_vector

MI = 1024**2


def _item(name, containers, ns="default", ts="2026-11-28T05:00:00Z", window="15s"):
    return {
        "metadata": {"name": name, "namespace": ns},
        "timestamp": ts,
        "window": window,
        "containers": [{"name": f"c{i}", "usage": u} for i, u in enumerate(containers)],
    }


def test_pod_metrics_sum_containers_with_time_and_window():
    body = json.dumps(
        {
            "items": [
                _item(
                    "a",
                    [{"cpu": "150000000n", "memory": "100Mi"}, {"cpu": "50m", "memory": "28Mi"}],
                    window="1m0s",
                )
            ]
        }
    ).encode()
    reading = parse_pod_metrics(body, fetched_at=1_900_000_000.0)
    usage = reading.pods["default/a"]
    assert usage.cpu_millis == 200 and usage.memory_bytes == 128 * MI
    assert usage.at == datetime(2026, 11, 28, 5, 0, tzinfo=UTC).timestamp()
    assert usage.window == 60.0
    assert not reading.invalid


def test_a_bad_pod_is_refused_alone():
    body = json.dumps(
        {
            "items": [
                _item("good", [{"cpu": "100m", "memory": "10Mi"}]),
                _item("neg", [{"cpu": "-1", "memory": "10Mi"}]),
                _item("garbage", [{"cpu": "lots", "memory": "10Mi"}]),
                {"metadata": {"name": "shape", "namespace": "x"}, "containers": "nope"},
                {"not": "an item"},
            ]
        }
    ).encode()
    reading = parse_pod_metrics(body, fetched_at=1.0e9)
    assert set(reading.pods) == {"default/good"}
    assert set(reading.invalid) == {"default/neg", "default/garbage", "x/shape"}
    assert "containers[0].usage.cpu" in reading.invalid["default/neg"]


def test_a_timestamp_in_the_future_counts_as_the_fetch():
    body = json.dumps({"items": [_item("a", [{"cpu": "1m"}], ts="2999-01-01T00:00:00Z")]}).encode()
    assert parse_pod_metrics(body, fetched_at=1000.0).pods["default/a"].at == 1000.0


def test_not_a_list_raises():
    with pytest.raises(ValueError):
        parse_pod_metrics(b"[1, 2]")


def test_prometheus_series_sum_per_pod_and_refuse_nan():
    def vector(samples):
        return json.dumps(
            {
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [
                        {"metric": {"namespace": ns, "pod": pod, "container": c}, "value": [t, v]}
                        for ns, pod, c, t, v in samples
                    ],
                },
            }
        ).encode()

    cpu = parse_container_vector(
        vector(
            [
                ("ns", "a", "app", 100.0, "0.25"),
                ("ns", "a", "side", 101.0, "0.05"),
                ("ns", "a", "POD", 101.0, "9"),  # the sandbox: left out
                ("ns", "b", "app", 100.0, "NaN"),
            ]
        )
    )
    memory = parse_container_vector(
        vector([("ns", "a", "app", 100.0, str(64 * MI)), ("ns", "b", "app", 100.0, "1")])
    )
    reading = parse_pod_vectors(cpu, memory, fetched_at=200.0)
    assert reading.pods["ns/a"] == PodUsage(pytest.approx(300.0), 64 * MI, 101.0)
    assert "ns/b" in reading.invalid and "ns/b" not in reading.pods
    assert 'container!="POD"' in CPU_QUERY and 'container!=""' in MEMORY_QUERY


def test_prometheus_error_is_a_source_error():
    with pytest.raises(SourceError, match="failed: bad"):
        parse_container_vector(b'{"status": "error", "error": "bad"}')
    with pytest.raises(SourceError, match="matrix"):
        parse_container_vector(
            b'{"status": "success", "data": {"resultType": "matrix", "result": []}}'
        )


def test_store_is_bounded_and_keeps_the_latest():
    store = PodUsageStore(max_pods=2)
    changed = store.update(
        PodUsageReading({"a/1": PodUsage(1, 1, 1), "a/2": PodUsage(2, 2, 1)}, {}, 1.0)
    )
    assert changed == ["a/1", "a/2"]
    store.update(PodUsageReading({"a/3": PodUsage(3, 3, 2)}, {}, 2.0))
    assert len(store) == 2 and store.get("a/1") is None and store.get("a/3") is not None
    assert store.update(PodUsageReading({"a/3": PodUsage(3, 3, 2)}, {}, 3.0)) == []
    store.update(PodUsageReading({}, {"a/3": "bad"}, 4.0))
    assert store.get("a/3") is None and store.last_reading == 4.0
    with pytest.raises(ValueError):
        PodUsageStore(max_pods=0)
    assert math.isfinite(store.last_reading)


async def test_the_pod_metrics_source_refuses_a_body_over_the_cap():
    from loadwise.extender.sources.pod_metrics import PodMetricsSource

    class API:  # the cap as KubeAPI.get applies it (tests/extender/test_kubeapi_caps.py)
        def get(self, path, *, max_bytes, cap_name):
            assert path == "/apis/metrics.k8s.io/v1beta1/pods"
            body = json.dumps({"items": [_item("a", [{"cpu": "1m"}])] * 20}).encode()
            if len(body) > max_bytes:
                raise KubeError(f"GET {path}: response over {max_bytes} bytes ({cap_name})")
            return body

    with pytest.raises(SourceError, match=r"over 1024 bytes \(source.max_response_bytes\)"):
        await PodMetricsSource(API(), max_bytes=1024).fetch()  # type: ignore[arg-type]
    reading = await PodMetricsSource(API()).fetch()  # type: ignore[arg-type]
    assert set(reading.pods) == {"default/a"}


async def test_the_prometheus_pod_usage_source_asks_both_queries_on_loopback():
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from loadwise.extender.sources.pod_metrics import PrometheusPodUsageSource

    asked = []

    async def query(request):
        q = request.query["query"]
        asked.append(q)
        value = "0.2" if "cpu" in q else str(256 * MI)
        return web.json_response(
            {
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [
                        {
                            "metric": {"namespace": "ns", "pod": "p", "container": "app"},
                            "value": [100.0, value],
                        }
                    ],
                },
            }
        )

    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    source = PrometheusPodUsageSource(str(server.make_url("")))
    try:
        reading = await source.fetch()
    finally:
        await source.close()
        await server.close()
    assert asked == [CPU_QUERY, MEMORY_QUERY]
    assert reading.pods["ns/p"].cpu_millis == pytest.approx(200.0)
    assert reading.pods["ns/p"].memory_bytes == 256 * MI


class _Answers:
    """KubeAPI.get answering one body, within any cap."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def get(self, path, *, max_bytes, cap_name):
        return self.body


async def test_pod_metrics_containers_are_counted_before_any_is_built():
    """Kubernetes sets no limit of containers a pod: without a count, one PodMetrics with
    16 MiB of ``{}`` containers took 656 MiB to decode (benchmarks/source_decode_memory.py)."""
    from loadwise.extender.sources.pod_metrics import PodMetricsSource

    containers = [{"name": f"c{i}", "usage": {"cpu": "1m", "memory": "1Mi"}} for i in range(9)]
    pods = [
        {"metadata": {"name": f"p{i}", "namespace": "default"}, "containers": containers}
        for i in range(2)
    ]
    body = json.dumps({"items": pods}).encode()
    source = PodMetricsSource(_Answers(body), max_pods=2, max_containers=17)  # type: ignore[arg-type]
    with pytest.raises(SourceError, match=r"holds 18 containers, over 17"):
        await source.fetch()
    source.max_containers = 18
    assert set((await source.fetch()).pods) == {"default/p0", "default/p1"}
    arrays = (
        b'{"items": [{"metadata": {"name": "p"}, "containers": ['
        + b",".join([b"[]"] * 40)
        + b"]}]}"
    )
    with pytest.raises(SourceError, match=r"up to \d+ entries, over 18"):
        await PodMetricsSource(_Answers(arrays), max_containers=18).fetch()  # type: ignore[arg-type]


def test_prometheus_pod_usage_series_are_counted_before_any_is_built(monkeypatch):
    from loadwise.extender.sources import pod_metrics

    sample = {"metric": {"namespace": "d", "pod": "p", "container": "c"}, "value": [1, "1"]}
    body = json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": [sample] * 5}}
    ).encode()
    monkeypatch.setattr(pod_metrics, "DEFAULT_MAX_CONTAINERS", 4)
    with pytest.raises(SourceError, match=r"5 series, over 4"):
        parse_container_vector(body)
    monkeypatch.setattr(pod_metrics, "DEFAULT_MAX_CONTAINERS", 5)
    assert list(parse_container_vector(body)) == [("d/p", "c")]
