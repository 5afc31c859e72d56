"""The real aiohttp server over loopback: wire format, bad input, fail-open."""

import json
import time

import httpx
import pytest
from aiohttp.test_utils import TestServer

from loadwise.extender.config import load_settings
from loadwise.extender.decide import prioritize
from loadwise.extender.estimate import pod_facts
from loadwise.extender.policies import LeastUsed
from loadwise.extender.server import BODY_READS, make_app
from loadwise.extender.service import Extender
from loadwise.extender.sources import LoadFileSource

from .helpers import container, node_info, node_json, pod, pod_json, state
from .test_sources import WATCHER_METRICS_SERVER


@pytest.fixture
def load_file(tmp_path):
    path = tmp_path / "watcher.json"
    doc = json.loads(WATCHER_METRICS_SERVER)
    doc["data"]["NodeMetricsMap"]["n2"] = {
        "metrics": [
            {"type": "CPU", "operator": "Latest", "value": 5.0},
            {"type": "Memory", "operator": "Latest", "value": 95.0},
        ]
    }
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
async def server(load_file):
    settings = load_settings(
        None, {"source.kind": "file", "source.file": str(load_file), "max_body_bytes": 64 * 1024}
    )
    ext = Extender(settings, LoadFileSource(load_file))
    srv = TestServer(make_app(ext), host="127.0.0.1")
    await srv.start_server()
    async with httpx.AsyncClient(base_url=str(srv.make_url(""))) as client:
        for _ in range(100):  # wait for the first snapshot
            if (await client.get("/readyz")).status_code == 200:
                break
            await _sleep()
        client.ext = ext
        yield client
    await srv.close()


async def _sleep():
    import asyncio

    await asyncio.sleep(0.02)


def _body(names=None, nodes=None, the_pod=None):
    return json.dumps(
        {
            "Pod": the_pod or pod_json(container({"cpu": "100m", "memory": "64Mi"})),
            "Nodes": None if nodes is None else {"metadata": {}, "items": nodes},
            "NodeNames": names,
        }
    )


async def test_prioritize_cache_capable(server):
    r = await server.post(
        "/scheduler/prioritize",
        content=_body(["n1", "n2", "joined"]),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    scores = r.json()
    assert [h["Host"] for h in scores] == ["n1", "n2", "joined"]
    assert all(isinstance(h["Score"], int) and 0 <= h["Score"] <= 10 for h in scores)
    assert set(scores[0]) == {"Host", "Score"}


async def test_filter_full_nodes_returns_the_given_objects(server):
    nodes = [node_json("n1", images=5), node_json("n2", images=5)]
    r = await server.post("/scheduler/filter", content=_body(nodes=nodes))
    out = r.json()
    assert r.status_code == 200
    assert out["Nodes"]["items"] == [nodes[0]] and out["NodeNames"] is None
    # 95 % measured + the pod's estimate (64Mi x 0.7) on 8Gi rounds to 96 %
    assert out["FailedAndUnresolvableNodes"] == {"n2": "memory 96% > 90% threshold"}
    assert out["FailedNodes"] == {}
    assert out["Error"] == ""


async def test_filter_cache_capable_always_answers_node_names(server):
    out = (await server.post("/scheduler/filter", content=_body(["n1", "n2", "ghost"]))).json()
    # Without a kubeconfig n2's size is unknown, so only its measured 95 % counts;
    # "ghost" has no data at all and passes (estimated from the idlest node).
    assert out["NodeNames"] == ["n1", "ghost"] and out["Nodes"] is None
    assert out["FailedAndUnresolvableNodes"] == {"n2": "memory 95% > 90% threshold"}


def _pod_with(requests=None, limits=None, **kw):
    return pod_json(container(requests, limits), **kw)


# 30 000 nested arrays in an unknown field: msgspec gives up with a RecursionError
DEEP = b'{"Pod":{},"x":' + b"[" * 30_000 + b"]" * 30_000 + b"}"


BAD_INPUT = [
    ("not json", 400, "not_json", "body is not JSON"),
    ("", 400, "empty", "empty request body"),
    ('{"NodeNames":["a"]}', 400, "no_pod", "no Pod"),
    ('{"Pod":{},"NodeNames":7}', 400, "invalid", "$.NodeNames"),
    ('{"Pod":{},"Nodes":{"items":[{"metadata":{"name":1}}]}}', 400, "invalid", "metadata.name"),
    ("[]", 400, "invalid", "Expected `object`, got `array`"),
    ("null", 400, "invalid", "Expected `object`, got `null`"),
    ('"Pod"', 400, "invalid", "Expected `object`, got `str`"),
    ("7", 400, "invalid", "Expected `object`, got `int`"),
    (DEEP, 400, "too_deep", "nested too deeply"),
    (b'{"Pod":{"metadata":{"name":"\xff\xfe"}},"NodeNames":["n1"]}', 400, "not_utf8", "UTF-8"),
    (
        _body(["n1"], the_pod=_pod_with({"cpu": "1e400"})),
        400,
        "bad_quantity",
        'pod.spec.containers[0].resources.requests.cpu: "1e400" is out of range',
    ),
    (
        _body(["n1"], the_pod=_pod_with({"memory": "abc"})),
        400,
        "bad_quantity",
        'pod.spec.containers[0].resources.requests.memory: "abc" is not a quantity',
    ),
    (
        _body(["n1"], the_pod=_pod_with({"cpu": "-5"})),
        400,
        "bad_quantity",
        'pod.spec.containers[0].resources.requests.cpu: "-5" is negative',
    ),
    (
        _body(["n1"], the_pod=_pod_with(limits={"cpu": "1e999999999"})),
        400,
        "bad_quantity",
        'pod.spec.containers[0].resources.limits.cpu: "1e999999999" is not a finite',
    ),
    (
        _body(["n1"], the_pod=_pod_with(overhead={"memory": "-1Gi"})),
        400,
        "bad_quantity",
        'pod.spec.overhead.memory: "-1Gi" is negative',
    ),
    ("x" * (70 * 1024), 413, "too_large", "request body larger than 65536 bytes"),
]


@pytest.mark.parametrize(
    ("content", "status", "reason", "needle"),
    [pytest.param(*case, id=f"{case[2]}-{i}") for i, case in enumerate(BAD_INPUT)],
)
@pytest.mark.parametrize("verb", ["filter", "prioritize"])
async def test_bad_input_gets_a_json_4xx_naming_it_and_server_keeps_serving(
    server, verb, content, status, reason, needle
):
    if isinstance(content, str):
        content = content.encode()
    r = await server.post(f"/scheduler/{verb}", content=content)
    assert r.status_code == status
    assert r.headers["content-type"].startswith("application/json")
    assert needle in r.json()["Error"]
    metrics = (await server.get("/metrics")).text
    client = (
        f'loadwise_extender_client_errors_total{{reason="{reason}",status="{status}",'
        f'verb="{verb}"}} 1.0'
    )
    assert client in metrics
    assert 'kind="internal"' not in metrics  # not a bug of ours, and not answered fail-open
    ok = await server.post("/scheduler/prioritize", content=_body(["n1"]))
    assert ok.status_code == 200


async def test_unknown_path_and_wrong_method_answer_json(server):
    r = await server.get("/scheduler/filter")
    assert r.status_code == 405
    assert r.json() == {"Error": "method GET not allowed on /scheduler/filter; use POST"}
    r = await server.post("/scheduler/preempt", content="{}")
    assert r.status_code == 404
    assert r.json() == {"Error": "no such endpoint: POST /scheduler/preempt"}
    metrics = (await server.get("/metrics")).text
    assert 'client_errors_total{reason="method_not_allowed",status="405",verb="filter"} 1.0' in (
        metrics
    )
    assert 'client_errors_total{reason="not_found",status="404",verb="other"} 1.0' in metrics


async def test_client_errors_are_logged_once_per_reason_per_interval(server, caplog):
    caplog.set_level("WARNING", logger="loadwise.extender.server")
    for _ in range(5):
        assert (await server.post("/scheduler/filter", content="not json")).status_code == 400
    bad_cpu = _body(["n1"], the_pod=_pod_with({"cpu": "abc"}))
    assert (await server.post("/scheduler/filter", content=bad_cpu)).status_code == 400
    lines = [r.getMessage() for r in caplog.records if r.name == "loadwise.extender.server"]
    assert len(lines) == 2, lines
    assert "answered 400 (not_json): body is not JSON" in lines[0]
    assert 'requests.cpu: "abc" is not a quantity' in lines[1]
    assert all(r.levelname == "WARNING" for r in caplog.records)


async def test_one_node_with_unusable_size_does_not_neutralise_the_others(server, caplog):
    caplog.set_level("WARNING", logger="loadwise.extender.model")
    good = [node_json("n1", cpu="8", memory="32Gi"), node_json("n2", cpu="2", memory="4Gi")]
    alone = (await server.post("/scheduler/prioritize", content=_body(nodes=good))).json()
    bad = node_json("joined", cpu="1e400")
    r = await server.post("/scheduler/prioritize", content=_body(nodes=[*good, bad]))
    assert r.status_code == 200  # the Node objects are the cluster's data, not a bad request
    scores = {h["Host"]: h["Score"] for h in r.json()}
    # n1 (1 % cpu, 10 % memory used, large) and n2 (95 % memory) keep their own scores,
    # which differ: nothing was answered fail-open with equal scores
    assert {h["Host"]: h["Score"] for h in alone} == {"n1": scores["n1"], "n2": scores["n2"]}
    assert scores["n1"] > scores["n2"]
    assert "joined" in scores
    assert any(
        'node "joined": status.capacity.cpu: "1e400" is out of range' in rec.getMessage()
        for rec in caplog.records
    )
    out = (await server.post("/scheduler/filter", content=_body(nodes=[*good, bad]))).json()
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["n1", "joined"]
    metrics = (await server.get("/metrics")).text
    assert 'kind="internal"' not in metrics


async def test_internal_error_fails_open_and_is_counted(server, caplog):
    class Broken:
        name = "broken"

        def score(self, pod, node, explain=True):
            raise ZeroDivisionError("bug")

    server.ext.policy = Broken()
    scores = (await server.post("/scheduler/prioritize", content=_body(["n1", "n2"]))).json()
    assert scores == [{"Host": "n1", "Score": 5}, {"Host": "n2", "Score": 5}]
    # the policy's own error, not a TypeError from calling it with the wrong arguments
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [ZeroDivisionError]
    server.ext.thresholds = {"cpu": "not a number"}  # breaks the filter's comparison
    nodes = [node_json("n1"), node_json("n2")]
    out = (await server.post("/scheduler/filter", content=_body(nodes=nodes))).json()
    assert out["Nodes"]["items"] == nodes and out["FailedNodes"] == {}
    metrics = (await server.get("/metrics")).text
    assert 'loadwise_extender_errors_total{kind="internal",verb="prioritize"} 1.0' in metrics
    assert 'loadwise_extender_errors_total{kind="internal",verb="filter"} 1.0' in metrics
    assert "loadwise_extender_client_errors_total{" not in metrics


async def test_health_ready_and_metrics(server):
    assert (await server.get("/healthz")).text == "ok\n"
    ready = await server.get("/readyz")
    assert ready.status_code == 200 and "2 nodes from file:watcher.json" in ready.text
    await server.post("/scheduler/prioritize", content=_body(["n1"]))
    text = (await server.get("/metrics")).text
    assert 'loadwise_extender_request_duration_seconds_count{verb="prioritize"}' in text
    assert "loadwise_extender_load_age_seconds" in text
    assert "loadwise_extender_load_stale 0.0" in text


async def test_readyz_reports_stale_data(server, load_file):
    import os

    old = time.time() - 3600
    os.utime(load_file, (old, old))
    server.ext.refresher.poke()
    for _ in range(100):
        r = await server.get("/readyz")
        if r.status_code == 503:
            break
        await _sleep()
    assert r.status_code == 503 and "stale" in r.text


async def test_readyz_not_ready_without_source(tmp_path):
    settings = load_settings(None, {"source.kind": "file", "source.file": str(tmp_path / "none")})
    ext = Extender(settings, LoadFileSource(tmp_path / "none"))
    srv = TestServer(make_app(ext), host="127.0.0.1")
    await srv.start_server()
    try:
        async with httpx.AsyncClient(base_url=str(srv.make_url(""))) as client:
            await _sleep()
            assert (await client.get("/healthz")).status_code == 200
            r = await client.get("/readyz")
            assert r.status_code == 503 and "No such file" in r.text
            # not ready, but scheduling is never blocked: every node passes
            out = (await client.post("/scheduler/filter", content=_body(["a", "b"]))).json()
            assert out["NodeNames"] == ["a", "b"]
    finally:
        await srv.close()


def test_best_node_keeps_a_strict_lead_after_rounding():
    info = node_info()
    nodes = [
        state(node_info("a"), 10, 10),
        state(node_info("b"), 12, 12),
        state(node_info("c"), 10, 10),
        state(info, 90, 90),
    ]
    ranked = prioritize(pod_facts(pod()), nodes, LeastUsed())
    by = {r.node: r.priority for r in ranked}
    # a and c are truly equal: the first name leads (no tie at the top for the
    # scheduler to break at random), c and b drop out of a's step
    assert by["a"] > by["c"] == by["b"] > by["n"]


async def test_prioritize_full_nodes_decodes_and_sizes_them(server):
    nodes = [node_json("n1", cpu="8", memory="32Gi", images=20), node_json("n2", images=20)]
    r = await server.post("/scheduler/prioritize", content=_body(nodes=nodes))
    assert r.status_code == 200 and [h["Host"] for h in r.json()] == ["n1", "n2"]
    assert server.ext.seen_nodes["n1"].cpu_capacity_millis == 8000


async def _closed_within(reader, seconds):
    """Everything the server sends until it closes the connection (EOF), or None if it
    is still open after ``seconds``."""
    import asyncio

    async def read_all() -> bytes:
        data = b""
        while chunk := await reader.read(4096):
            data += chunk
        return data

    try:  # (wait_for, not asyncio.timeout: the extender's tests also run on Python 3.10)
        return await asyncio.wait_for(read_all(), seconds)
    except asyncio.TimeoutError:  # noqa: UP041 (not the builtin TimeoutError on 3.10)
        return None


async def test_a_checked_resources_spec_lets_only_its_equals_skip_the_check(server):
    """Specs that passed the quantity check are kept (a burst repeats one template);
    a pod that differs in any amount, or only in its pod-level resources, is checked."""
    from loadwise.extender import server as server_module

    good = _pod_with({"cpu": "250m", "memory": "64Mi"})
    assert (
        await server.post("/scheduler/prioritize", content=_body(["n1"], the_pod=good))
    ).status_code == 200
    bad = [
        _pod_with({"cpu": "-250m", "memory": "64Mi"}),
        _pod_with({"cpu": "250m", "memory": "64Mi"}, overhead={"cpu": "-1"}),
        {**good, "spec": {**good["spec"], "resources": {"limits": {"memory": "x"}}}},
    ]
    for the_pod in bad:
        for verb in ("filter", "prioritize"):
            r = await server.post(f"/scheduler/{verb}", content=_body(["n1"], the_pod=the_pod))
            assert r.status_code == 400 and "bad_quantity" not in r.text, r.text
            assert "is negative" in r.text or "is not a quantity" in r.text
    # bounded: a client inventing specs cannot grow the set without end
    for i in range(server_module._CHECKED_MAX + 10):
        the_pod = _pod_with({"cpu": f"{i + 1}m"})
        assert (
            await server.post("/scheduler/filter", content=_body(["n1"], the_pod=the_pod))
        ).status_code == 200
    assert 0 < len(server_module._checked_specs) <= server_module._CHECKED_MAX


async def test_slow_connections_are_closed_after_the_deadlines(load_file):
    import asyncio

    settings = load_settings(None, {"source.kind": "file", "source.file": str(load_file)})
    ext = Extender(settings, LoadFileSource(load_file))
    deadline = 2.0  # both deadlines, shortened from 10 s; margins below allow a busy machine
    srv = TestServer(make_app(ext, body_deadline=deadline), host="127.0.0.1")
    await srv.start_server(keepalive_timeout=deadline)  # what cli.serve gives AppRunner
    try:
        slow = []
        for i in range(40):
            reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            if i % 2:  # a header that never ends
                writer.write(b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            else:  # a whole header, then a body that stops short
                writer.write(
                    b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\n"
                    b'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"Pod":'
                )
            await writer.drain()
            slow.append((i, reader, writer))
        started = time.monotonic()
        # the server still answers a normal request while the slow ones hang
        async with httpx.AsyncClient(base_url=str(srv.make_url(""))) as client:
            ok = await client.post("/scheduler/prioritize", content=_body(["n1"]))
        assert ok.status_code == 200 and time.monotonic() - started < deadline
        for _, _, writer in slow:
            # keep dribbling: a byte now and then must not keep the connection open
            writer.write(b"a")
        got = await asyncio.gather(*(_closed_within(r, 4 * deadline) for _, r, _ in slow))
        elapsed = time.monotonic() - started
        answers = []
        for (i, _, writer), data in zip(slow, got, strict=True):
            writer.close()
            assert data is not None, f"connection {i} still open after {elapsed:.1f}s"
            if i % 2 == 0:
                answers.append(data[:12])
                if data.startswith(b"HTTP/1.1 408"):
                    assert data.endswith(b'{"Error":"request body not received within 2 s"}')
        # BODY_READS bodies are read at once (each until its deadline); the others found
        # every turn taken and were answered 503 after BODY_SLOT_SECONDS
        assert sorted(answers) == [b"HTTP/1.1 408"] * BODY_READS + [b"HTTP/1.1 503"] * (
            20 - BODY_READS
        )
        assert elapsed < 4 * deadline
        metrics = ext.metrics.render().decode()
        assert f'reason="body_timeout",status="408",verb="filter"}} {BODY_READS}.0' in metrics
        assert f'errors_total{{kind="busy",verb="filter"}} {20 - BODY_READS}.0' in metrics
    finally:
        await srv.close()


def test_log_throttle_holds_lines_back_and_counts_them():
    from loadwise.extender.throttle import LogThrottle

    now = [0.0]
    throttle = LogThrottle(60.0, clock=lambda: now[0], max_keys=3)
    assert throttle.allow("not_json") == 0  # first line: logged, nothing held
    now[0] = 59.0
    assert [throttle.allow("not_json") for _ in range(4)] == [None] * 4
    assert throttle.allow("too_deep") == 0  # another reason has its own budget
    now[0] = 60.0
    assert throttle.allow("not_json") == 4  # logged again, saying 4 were held back
    assert throttle.allow("not_json") is None
    for key in ("a", "b", "c"):  # a client inventing keys cannot grow the table forever
        throttle.allow(key)
    assert len(throttle._last) <= 3
