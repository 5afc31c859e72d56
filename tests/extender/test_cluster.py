"""The kubeconfig path: list+watch of nodes and pods, NodeMetrics and Events,
through the real Kubernetes client against a small fake API server on loopback.
(The real API server runs in the lab tests.)"""

import asyncio
import json
import time

import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from loadwise.extender import kubeobjects
from loadwise.extender.config import load_settings
from loadwise.extender.wire import Pod
from loadwise.extender.wiring import build_extender

from .helpers import container, node_json, pod_json


class FakeAPI:
    def __init__(self):
        self.nodes = [node_json("a", cpu="4", memory="8Gi"), node_json("b", cpu="4", memory="8Gi")]
        self.pods = []
        self.pod_events: asyncio.Queue = asyncio.Queue()
        self.events = []
        self.watch_calls = 0
        self.closing = asyncio.Event()

    def app(self):
        app = web.Application()
        app.router.add_get("/api/v1/nodes", self.list_or_watch_nodes)
        app.router.add_get("/api/v1/pods", self.list_or_watch_pods)
        app.router.add_get("/apis/metrics.k8s.io/v1beta1/nodes", self.node_metrics)
        app.router.add_post("/api/v1/namespaces/{ns}/events", self.post_event)
        return app

    async def list_or_watch_nodes(self, request):
        if request.query.get("watch") == "true":
            return await self._hold(request)
        return web.json_response(
            {"kind": "NodeList", "metadata": {"resourceVersion": "10"}, "items": self.nodes}
        )

    async def list_or_watch_pods(self, request):
        # unbound pods too (they mark how far the watch has got), finished ones not
        assert request.query["fieldSelector"] == "status.phase!=Succeeded,status.phase!=Failed"
        if request.query.get("watch") != "true":
            return web.json_response(
                {"kind": "PodList", "metadata": {"resourceVersion": "10"}, "items": self.pods}
            )
        self.watch_calls += 1
        response = web.StreamResponse()
        await response.prepare(request)
        if self.watch_calls == 1:
            # the first watch expires at once: the client must list again
            await response.write(
                json.dumps(
                    {
                        "type": "ERROR",
                        "object": {
                            "kind": "Status",
                            "code": 410,
                            "message": "too old resource version",
                        },
                    }
                ).encode()
                + b"\n"
            )
            return response
        while not self.closing.is_set():
            try:
                event = await asyncio.wait_for(self.pod_events.get(), 0.1)
            except TimeoutError:
                continue
            await response.write(json.dumps(event).encode() + b"\n")
        return response

    async def _hold(self, request):
        response = web.StreamResponse()
        await response.prepare(request)
        await self.closing.wait()
        return response

    async def node_metrics(self, request):
        # as metrics-server stamps them: the end of the last scrape, a moment ago (a date
        # ahead of the extender's clock is refused, readings.CLOCK_SKEW_SECONDS)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
        return web.json_response(
            {
                "kind": "NodeMetricsList",
                "items": [
                    {
                        "metadata": {"name": "a"},
                        "timestamp": now,
                        "window": "15s",
                        "usage": {"cpu": "3000000000n", "memory": "1Gi"},
                    },
                    {
                        "metadata": {"name": "b"},
                        "timestamp": now,
                        "window": "15s",
                        "usage": {"cpu": "400m", "memory": "7680Mi"},
                    },
                ],
            }
        )

    async def post_event(self, request):
        assert request.headers["authorization"] == "Bearer t0ken"
        self.events.append(await request.json())
        return web.json_response({}, status=201)


def kubeconfig(tmp_path, url):
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [{"name": "fake", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {"token": "t0ken"}}],
                "contexts": [{"name": "c", "context": {"cluster": "fake", "user": "u"}}],
            }
        )
    )
    return path


async def wait_for(predicate, what, timeout=10.0):
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
async def fake(tmp_path):
    api = FakeAPI()
    srv = TestServer(api.app(), host="127.0.0.1")
    await srv.start_server()
    api.kubeconfig = kubeconfig(tmp_path, str(srv.make_url("")).rstrip("/"))
    yield api
    api.closing.set()
    await srv.close()


def _watching(fake):
    """An extender reading metrics-server and watching the fake API server."""
    settings = load_settings(
        None,
        {
            "kubeconfig": str(fake.kubeconfig),
            "source.kind": "metrics-server",
            "source.stale_after_seconds": 0,
        },
    )
    ext = build_extender(settings)
    ext.cluster.on_bound = ext.metrics.pods_bound.inc  # as lifecycle.serve wires it
    return ext


async def test_watch_metrics_server_and_events(fake):
    bound = pod_json(container({"cpu": "1", "memory": "1Gi"}), name="old", uid="old")
    bound["spec"]["nodeName"] = "b"
    fake.pods = [bound]
    ext = _watching(fake)
    ext.recorder.merge_seconds = 0.05
    await ext.start()
    try:
        await wait_for(lambda: ext.readiness()[0], "readiness")
        assert set(ext.cluster.nodes) == {"a", "b"} and ext.cluster.facts().pod_counts == {"b": 1}
        snap = ext.refresher.snapshot
        assert snap.nodes["a"].cpu.avg == pytest.approx(75.0)
        assert snap.nodes["b"].memory.avg == pytest.approx(93.75)
        await wait_for(lambda: fake.watch_calls >= 2, "re-list after 410 Gone")

        # a pod bound elsewhere shows up through the watch and enters the ledger (small
        # enough that a stays under its threshold: the reading predates it, so it counts)
        new = pod_json(container({"cpu": "200m", "memory": "1Gi"}), name="new", uid="new")
        new["spec"]["nodeName"] = "a"
        await fake.pod_events.put({"type": "ADDED", "object": new})
        await wait_for(lambda: ext.cluster.facts().pod_counts.get("a") == 1, "watched pod")
        assert ext.ledger.pending()["a"].pods == 1

        from loadwise.extender.wire import decode_args

        args = decode_args(
            json.dumps(
                {
                    "Pod": pod_json(
                        container({"cpu": "100m"}), name="web", namespace="shop", uid="w1"
                    ),
                    "NodeNames": ["a", "b"],
                }
            ).encode()
        )
        result = ext.filter(args)
        assert result.node_names == ["a"] and "memory" in result.failed_and_unresolvable["b"]
        scores = ext.prioritize(args)
        assert [h.host for h in scores] == ["a", "b"]
        # the scheduler binds it and the watch sees that: only then is the Event written
        web = pod_json(container({"cpu": "100m"}), name="web", namespace="shop", uid="w1")
        web["spec"]["nodeName"] = "a"
        await fake.pod_events.put({"type": "ADDED", "object": web})
        await wait_for(lambda: fake.events, "Event posted")
        event = fake.events[0]
        assert event["reason"] == "LoadwiseScored" and event["involvedObject"]["name"] == "web"
        assert event["metadata"]["namespace"] == "shop"
        decision = json.loads(event["metadata"]["annotations"]["loadwise.dev/decision"])
        assert decision["source"] == "metrics-server" and "b" in decision["failed"]
        assert set(decision["scores"]) == {"a", "b"} and decision["bound"] == "a"

        await fake.pod_events.put({"type": "DELETED", "object": new})
        await fake.pod_events.put({"type": "DELETED", "object": web})
        await wait_for(lambda: "a" not in ext.cluster.facts().pod_counts, "pod deletion")
    finally:
        await ext.stop()


async def test_a_replacement_is_decided_after_the_deletion_its_watch_delivers_first(fake):
    """A ReplicaSet replaces a deleted pod within milliseconds, and the scheduler asks about
    the replacement while the extender's own watch may not have delivered the deletion yet.
    The answer must wait for the watch to deliver the replacement (and so the deletion that
    came before it): here node a reads 75 % CPU, 1 core of it the leaving pod's, so with the
    pod still counted the replacement (1 core requested, 850m estimated) would take a over
    its 90 % threshold, and once it has gone a fits."""
    import httpx

    from loadwise.extender.server import make_app

    old = kubeobjects.pod(
        "web-old",
        uid="old",
        containers=[container({"cpu": "1", "memory": "256Mi"})],
        node_name="a",
        scheduled_at="2026-01-01T00:00:00Z",
    )
    fake.pods = [old]
    ext = _watching(fake)
    srv = TestServer(make_app(ext), host="127.0.0.1")
    await srv.start_server()
    try:
        await wait_for(lambda: ext.readiness()[0], "readiness")
        await wait_for(lambda: fake.watch_calls >= 2, "re-list after 410 Gone")
        new = kubeobjects.pod(
            "web-new", uid="new", containers=[container({"cpu": "1", "memory": "256Mi"})]
        )
        body = json.dumps({"Pod": new, "NodeNames": ["a"]})
        async with httpx.AsyncClient(base_url=str(srv.make_url(""))) as client:
            asked = asyncio.ensure_future(client.post("/scheduler/filter", content=body))
            await asyncio.sleep(0.2)  # the scheduler asked; the watch is behind
            assert not asked.done()
            deleted = dict(old, metadata=dict(old["metadata"], resourceVersion="11"))
            await fake.pod_events.put({"type": "DELETED", "object": deleted})
            await fake.pod_events.put({"type": "ADDED", "object": new})
            answer = (await asked).json()
        assert answer["NodeNames"] == ["a"], answer
        text = ext.metrics.render().decode()
        assert 'loadwise_extender_watch_catch_up_total{outcome="delivered"} 1.0' in text

        # bound: counted once, however often the pod is updated after
        bound = kubeobjects.pod(
            "web-new", uid="new", containers=[container({"cpu": "1"})], node_name="a"
        )
        before = ext.metrics.pods_bound._value.get()
        for _ in range(3):
            await fake.pod_events.put({"type": "MODIFIED", "object": bound})
        await wait_for(lambda: ext.cluster.facts().pod_counts.get("a") == 1, "bound pod")
        await asyncio.sleep(0.2)
        assert ext.metrics.pods_bound._value.get() == before + 1
        # and so is a pod left out of the totals (a request that is not a quantity)
        bad = kubeobjects.pod("bad", uid="bad", containers=[container({"cpu": "lots"})])
        await fake.pod_events.put({"type": "ADDED", "object": bad})
        for _ in range(3):
            await fake.pod_events.put(
                {"type": "MODIFIED", "object": dict(bad, spec=dict(bad["spec"], nodeName="b"))}
            )
        await asyncio.sleep(0.5)
        assert ext.metrics.pods_bound._value.get() == before + 2

        # a pod the watch never delivers is answered on the watch as it stands, after the wait
        other = kubeobjects.pod("lost", uid="lost", containers=[container({"cpu": "1"})])
        started = time.monotonic()
        await ext.catch_up(msgspec.convert(other, Pod))
        assert 0.4 < time.monotonic() - started < 2.0
        text = ext.metrics.render().decode()
        assert 'loadwise_extender_watch_catch_up_total{outcome="timed_out"} 1.0' in text
    finally:
        await srv.close()


async def test_a_terminating_pod_counts_as_gone(fake):
    """Deletion with a grace period first sets deletionTimestamp; the replacement is created
    then, so the pod leaving must come off its node then, not when the kubelet is done."""
    leaving = kubeobjects.pod("db-0", uid="db", containers=[container({"cpu": "1"})], node_name="b")
    fake.pods = [leaving]
    ext = _watching(fake)
    await ext.start()
    try:
        await wait_for(lambda: ext.cluster.synced, "watch synced")
        await wait_for(lambda: fake.watch_calls >= 2, "re-list after 410 Gone")
        assert ext.cluster.facts().pod_counts == {"b": 1}
        terminating = dict(
            leaving, metadata=dict(leaving["metadata"], deletionTimestamp="2026-01-01T00:00:30Z")
        )
        await fake.pod_events.put({"type": "MODIFIED", "object": terminating})
        await wait_for(lambda: "b" not in ext.cluster.facts().pod_counts, "pod leaving")
        bound_before = ext.metrics.pods_bound._value.get()
        await fake.pod_events.put({"type": "MODIFIED", "object": terminating})
        await fake.pod_events.put({"type": "DELETED", "object": terminating})
        await asyncio.sleep(0.3)
        assert ext.cluster.facts().pod_counts == {}
        assert ext.metrics.pods_bound._value.get() == bound_before  # not "bound" again
    finally:
        await ext.stop()


async def test_unreachable_api_is_not_ready_but_serves(tmp_path):
    cfg = kubeconfig(tmp_path, "http://127.0.0.1:9")  # discard port: nothing listens
    settings = load_settings(None, {"kubeconfig": str(cfg), "source.kind": "metrics-server"})
    ext = build_extender(settings)
    await ext.start()
    try:
        await asyncio.sleep(0.3)
        ready, why = ext.readiness()
        assert not ready and "no load snapshot" in why and "watch not synced" in why
    finally:
        await ext.stop()


def test_a_watch_that_fails_after_the_loop_closed_stays_quiet():
    """At shutdown the watch threads (daemons) can still be in a request when the event loop
    closes; the failure they then report has nowhere to go and must not raise in the thread
    (it did: RuntimeError "Event loop is closed", as an unhandled thread exception)."""
    from loadwise.extender.cluster import ClusterWatch

    watch = ClusterWatch(None, estimator=None, tlp=None, placements=None)  # type: ignore[arg-type]
    loop = asyncio.new_event_loop()
    watch._loop = loop
    loop.close()
    watch._post(lambda: None)  # no RuntimeError
    running = asyncio.new_event_loop()
    try:
        watch._loop = running
        seen = []
        watch._post(seen.append, "applied")
        running.call_soon(running.stop)
        running.run_forever()
        assert seen == ["applied"]
    finally:
        running.close()
