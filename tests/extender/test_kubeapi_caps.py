"""What a read through the Kubernetes API client may cost: every body is read in chunks
up to a cap and the read stops there; the metrics.k8s.io sources count a list's items
before building any of them.

A plain HTTP server on 127.0.0.1 plays the API server (the kubeconfig names it), so the
real client (``extender.kubeapi.KubeAPI``, on the official Kubernetes client and
urllib3) does the reading. The endless answers never end on their own: a test that
passes proves the client stopped reading, and the server counts what it could send.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from loadwise.extender import kubeapi
from loadwise.extender.exceptions import KubeError, SourceError
from loadwise.extender.kubeapi import KubeAPI
from loadwise.extender.model import NodeInfo
from loadwise.extender.sources.base import count_items, count_results
from loadwise.extender.sources.metrics_server import MetricsServerSource, parse_node_metrics
from loadwise.extender.sources.pod_metrics import PodMetricsSource

from .test_cluster import kubeconfig

KIB = 1024
NODES_PATH = "/apis/metrics.k8s.io/v1beta1/nodes"
PODS_PATH = "/apis/metrics.k8s.io/v1beta1/pods"
PAD = b'{"padding": "' + b"x" * (64 * KIB - 20) + b'"}\n'

Answer = Callable[[http.server.BaseHTTPRequestHandler], None]


class Served:
    """What the loopback server answers per path, and how many bytes it got out."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {}
        self.sent = 0
        self.lock = threading.Lock()


def endless(status: int = 200, announce: int | None = None) -> Answer:
    """An answer that never ends: no length, or a false ``announce``d one; written until
    the client hangs up (or 1 GiB, so a client that never stops fails the test instead
    of hanging it)."""

    def answer(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        if announce is not None:
            handler.send_header("Content-Length", str(announce))
        handler.end_headers()
        served: Served = handler.server.served  # type: ignore[attr-defined]
        try:
            for _ in range(2**30 // len(PAD)):
                handler.wfile.write(PAD)
                with served.lock:
                    served.sent += len(PAD)
        except OSError:
            pass  # the client hung up: what this file is about

    return answer


def document(doc: object) -> Answer:
    body = json.dumps(doc).encode()

    def answer(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return answer


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the body ends when the connection does

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        served: Served = self.server.served  # type: ignore[attr-defined]
        answer = served.answers.get(self.path.split("?")[0])
        if answer is None:
            self.send_error(404)
            return
        answer(self)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[KubeAPI, Served]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    served = Served()
    server.served = served  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    client = KubeAPI(str(kubeconfig(tmp_path, f"http://127.0.0.1:{server.server_port}")))
    try:
        yield client, served
    finally:
        client.close()
        server.shutdown()
        server.server_close()


def _infos(count: int) -> dict[str, NodeInfo]:
    return {f"n{i}": NodeInfo(f"n{i}", 4000, 8 * 2**30) for i in range(count)}


def _node_metrics(count: int) -> dict[str, object]:
    return {
        "kind": "NodeMetricsList",
        "items": [
            {"metadata": {"name": f"n{i}"}, "timestamp": "", "usage": {"cpu": "1", "memory": "1Gi"}}
            for i in range(count)
        ],
    }


def _pod_metrics(count: int) -> dict[str, object]:
    return {
        "kind": "PodMetricsList",
        "items": [
            {
                "metadata": {"name": f"p{i}", "namespace": "default"},
                "timestamp": "2026-11-28T05:00:00Z",
                "window": "15s",
                "containers": [{"name": "c", "usage": {"cpu": "10m", "memory": "10Mi"}}],
            }
            for i in range(count)
        ],
    }


async def test_metrics_server_read_stops_at_the_byte_cap(api: tuple[KubeAPI, Served]) -> None:
    client, served = api
    served.answers[NODES_PATH] = endless()
    source = MetricsServerSource(client, lambda: _infos(1), max_bytes=256 * KIB)
    with pytest.raises(SourceError) as caught:
        await source.fetch()
    message = str(caught.value)
    assert "over 262144 bytes (source.max_response_bytes)" in message
    assert message.startswith(f"metrics-server: GET {NODES_PATH}: response over")
    # the client hung up near the cap: the server got out little more than its socket
    # buffers hold, not the 1 GiB it had to send
    assert served.sent < 64 * 1024 * KIB


async def test_pod_metrics_read_stops_at_the_byte_cap(api: tuple[KubeAPI, Served]) -> None:
    client, served = api
    served.answers[PODS_PATH] = endless()
    with pytest.raises(SourceError, match=r"pod metrics: GET .*: response over 1 MiB \(source"):
        await PodMetricsSource(client, max_bytes=KIB * KIB).fetch()
    assert served.sent < 64 * 1024 * KIB


async def test_an_announced_length_over_the_cap_fails_before_the_body(
    api: tuple[KubeAPI, Served],
) -> None:
    client, served = api
    served.answers[NODES_PATH] = endless(announce=2**30)
    source = MetricsServerSource(client, lambda: _infos(1), max_bytes=16 * KIB * KIB)
    with pytest.raises(SourceError, match=r"response over 16 MiB \(source.max_response_bytes\)"):
        await source.fetch()


async def test_answers_under_the_caps_are_read_whole(api: tuple[KubeAPI, Served]) -> None:
    client, served = api
    served.answers[NODES_PATH] = document(_node_metrics(3))
    served.answers[PODS_PATH] = document(_pod_metrics(3))
    snapshot = await MetricsServerSource(client, lambda: _infos(3), max_nodes=3).fetch()
    assert sorted(snapshot.nodes) == ["n0", "n1", "n2"]
    reading = await PodMetricsSource(client, max_pods=3).fetch()
    assert sorted(reading.pods) == ["default/p0", "default/p1", "default/p2"]


async def test_a_list_over_the_node_or_pod_cap_is_refused(api: tuple[KubeAPI, Served]) -> None:
    client, served = api
    served.answers[NODES_PATH] = document(_node_metrics(4))
    served.answers[PODS_PATH] = document(_pod_metrics(4))
    with pytest.raises(SourceError, match=r"names 4 nodes, over 3 \(source.max_nodes\)"):
        await MetricsServerSource(client, lambda: _infos(4), max_nodes=3).fetch()
    with pytest.raises(SourceError, match=r"holds 4 items, over 3 \(the most pods"):
        await PodMetricsSource(client, max_pods=3).fetch()


async def test_near_empty_items_are_counted_before_they_are_built(
    api: tuple[KubeAPI, Served],
) -> None:
    """An answer of 100,000 ``{}`` items is 300 KB: refused on the count, whatever its
    items would have cost to build."""
    client, served = api
    body = {"items": [{}] * 100_000}
    served.answers[NODES_PATH] = document(body)
    served.answers[PODS_PATH] = document(body)
    with pytest.raises(SourceError, match=r"names 100000 nodes, over 10000"):
        await MetricsServerSource(client, lambda: _infos(1)).fetch()
    with pytest.raises(SourceError, match=r"holds 100000 items, over 50000"):
        await PodMetricsSource(client, max_pods=50_000).fetch()


def test_count_items_counts_cheap_entries_and_leaves_the_rest_to_the_decoding() -> None:
    cap = 10_000
    assert count_items(b'{"items": [{}, {"a": [1, {"b": 2}]}, 1, "x", null, 2.5]}', "a L", cap) == 6
    assert count_items(b'{"kind": "NodeMetricsList"}', "a L", cap) == 0
    assert count_items(b'{"items": [{}, [1]]}', "a L", cap) is None  # an array: not counted here
    assert count_items(b'{"items": "x"}', "a L", cap) is None  # the decoding names the problem
    with pytest.raises(SourceError, match=r"not a L: "):
        count_items(b"not json", "a L", cap)
    assert count_results(b'{"status": "success", "data": {"result": [{}, {}, 3]}}', "a R", cap) == 3
    assert count_results(b'{"status": "error", "error": "bad"}', "a R", cap) == 0
    assert count_results(b'{"data": {"result": [[]]}}', "a R", cap) is None


@pytest.mark.parametrize("entry", [b"[]", b"[1]", b'[{"a": 1}]'])
def test_array_entries_the_commas_could_put_over_the_cap_are_refused_unbuilt(entry: bytes) -> None:
    """An entry that is an array is left to the full decoding only while the body's commas
    (n entries take n - 1) keep the entries it could build within the cap: 16 MiB of
    ``[],`` took 400 MiB to decode entry by entry (benchmarks/source_decode_memory.py)."""
    body = b'{"items": [' + b",".join([entry] * 11) + b"]}"
    commas = body.count(b",")
    assert count_items(body, "a L", commas + 1) is None
    with pytest.raises(SourceError, match=rf"may hold up to {commas + 1} entries, over {commas}"):
        count_items(body, "a L", commas)
    vector = b'{"data": {"result": [' + b",".join([entry] * 11) + b"]}}"
    with pytest.raises(SourceError, match=r"a R does not have the expected shape"):
        count_results(vector, "a R", 10)


def test_a_list_with_an_array_entry_is_still_held_to_the_caps() -> None:
    """Its entries are built one by one only when the commas keep them within the cap; the
    other nodes of such a list are read, the array refused."""
    body = json.dumps({"items": [[1]] + _node_metrics(3)["items"]}).encode()  # type: ignore[operator]
    bound = body.count(b",") + 1
    with pytest.raises(SourceError, match=rf"may hold up to {bound} entries, over 3"):
        parse_node_metrics(body, _infos(3), max_nodes=3)
    assert sorted(parse_node_metrics(body, _infos(3), max_nodes=bound).nodes) == ["n0", "n1", "n2"]


def test_an_error_page_is_read_only_as_far_as_its_excerpt(api: tuple[KubeAPI, Served]) -> None:
    client, served = api
    served.answers[NODES_PATH] = endless(status=500)
    with pytest.raises(KubeError, match=r"HTTP 500: b'\{\"padding") as caught:
        client.get(NODES_PATH)
    assert caught.value.status == 500
    assert served.sent < 64 * 1024 * KIB


def test_a_read_without_a_named_cap_has_the_client_default(
    api: tuple[KubeAPI, Served],
) -> None:
    client, served = api
    served.answers[NODES_PATH] = endless()
    with pytest.raises(KubeError, match=r"over 64 MiB \(the API client's read cap\)"):
        client.get(NODES_PATH)
    assert served.sent < 2 * kubeapi.DEFAULT_MAX_READ_BYTES


def test_a_watch_event_over_the_cap_ends_the_watch(
    api: tuple[KubeAPI, Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, served = api

    def one_long_line(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.end_headers()
        try:
            for _ in range(2**30 // KIB):
                handler.wfile.write(b"x" * KIB)  # never a newline
        except OSError:
            pass

    served.answers["/api/v1/pods"] = one_long_line
    monkeypatch.setattr(kubeapi, "DEFAULT_MAX_READ_BYTES", 256 * KIB)
    with pytest.raises(KubeError, match=r"an event over 262144 bytes"):
        list(client.watch_lines("/api/v1/pods", {}, timeout_seconds=5))
