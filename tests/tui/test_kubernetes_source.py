"""The real source against a loopback API server that replays recorded lists and watch streams.

This runs `tui.sources.kubernetes.KubernetesSource` (on `extender.reflector.Reflector`)
through an unmodified `kubernetes.client.ApiClient` and urllib3: paging, resourceVersion
bookkeeping, BOOKMARKs, 410 Gone → relist, field selectors for Events, metrics 404 and
401 handling. The lab later runs the same class against a real kube-apiserver.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from conftest import DATA
from kubernetes.client import ApiClient, Configuration

from loadwise.tui.model import ClusterModel
from loadwise.tui.objects import Decision
from loadwise.tui.sources import changes as ch
from loadwise.tui.sources.kubernetes import KubernetesSource, Stream
from loadwise.tui.status import banner_text, summary

CLUSTER = DATA / "cluster"
WATCH = DATA / "watch"


class FakeApiServer:
    """Serves /api/v1/{nodes,pods,events} lists (paged) and watches from recorded files."""

    def __init__(self, *, status: int = 200, metrics: bool = True) -> None:
        self.status = status
        self.metrics = metrics
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self.watch_counts: dict[str, int] = {}
        self.docs: dict[str, Any] = {
            "/api/v1/nodes": json.loads((CLUSTER / "nodes.json").read_text()),
            "/api/v1/pods": json.loads((CLUSTER / "pods.json").read_text()),
            "/api/v1/events": json.loads((CLUSTER / "events.json").read_text()),
            "/apis/metrics.k8s.io/v1beta1/nodes": json.loads(
                (CLUSTER / "nodemetrics.json").read_text()
            )[-1],
            "/apis/metrics.k8s.io/v1beta1/pods": json.loads(
                (CLUSTER / "podmetrics.json").read_text()
            ),
        }
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                server.handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def _send(self, handler: BaseHTTPRequestHandler, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlparse(handler.path)
        query = parse_qs(url.query)
        self.requests.append((url.path, query))
        if self.status != 200:
            self._send(
                handler,
                self.status,
                {"kind": "Status", "code": self.status, "message": "Unauthorized"},
            )
            return
        if url.path.startswith("/apis/metrics.k8s.io") and not self.metrics:
            self._send(
                handler,
                404,
                {
                    "kind": "Status",
                    "code": 404,
                    "message": "the server could not find the requested resource",
                },
            )
            return
        doc = self.docs.get(url.path)
        if doc is None:
            self._send(handler, 404, {"kind": "Status", "code": 404})
            return
        if query.get("watch") == ["true"]:
            self._watch(handler, url.path)
            return
        items = doc["items"]
        selector = query.get("fieldSelector", [""])[0]
        if selector:
            field, _, value = selector.partition("=")
            items = [i for i in items if _field(i, field) == value]
        start = int(query.get("continue", ["0"])[0])
        limit = int(query.get("limit", [str(len(items) or 1)])[0])
        page = items[start : start + limit]
        meta = {"resourceVersion": doc.get("metadata", {}).get("resourceVersion", "1")}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        self._send(handler, 200, {**doc, "metadata": meta, "items": page})

    def _watch(self, handler: BaseHTTPRequestHandler, path: str) -> None:
        count = self.watch_counts.get(path, 0)
        self.watch_counts[path] = count + 1
        lines: list[str] = []
        if path == "/api/v1/pods":
            name = {0: "pods.jsonl", 1: "pods-gone.jsonl"}.get(count)
            if name:
                lines = (WATCH / name).read_text().splitlines()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for line in lines:
            chunk = (line + "\n").encode()
            handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            handler.wfile.flush()
        if not lines:
            time.sleep(0.3)  # an idle watch: the server ends it after a while
        handler.wfile.write(b"0\r\n\r\n")

    def __enter__(self) -> FakeApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _field(obj: dict[str, Any], path: str) -> str:
    if path == "source":
        return str((obj.get("source") or {}).get("component", ""))
    value: Any = obj
    for part in path.split("."):
        value = (value or {}).get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


def _client(url: str) -> ApiClient:
    config = Configuration()
    config.host = url
    return ApiClient(config)


def _wait_for(condition: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_pods_list_is_paged_then_watch_applies_events(api: FakeApiServer) -> None:
    source = KubernetesSource(_client(api.url), page_size=25)
    changes: list[ch.Change] = []
    pods = Stream("pods", "/api/v1/pods")
    # One reflector: list, watch (pods.jsonl), watch again (410 Expired), list again.
    thread = threading.Thread(target=source.reflector(pods, changes.append).run, daemon=True)
    thread.start()
    try:
        _wait_for(lambda: sum(isinstance(c, ch.PodsListed) for c in changes) >= 2, 15)
    finally:
        source.stop()
        thread.join(timeout=5)
    assert isinstance(changes[0], ch.ApiReachable)
    assert isinstance(changes[1], ch.PodsListed) and len(changes[1].pods) == 60
    first_watch = next(i for i, (_p, q) in enumerate(api.requests) if q.get("watch") == ["true"])
    pages = [q for p, q in api.requests[:first_watch] if p == "/api/v1/pods"]
    assert len(pages) == 3 and pages[1]["continue"] == ["25"]
    kinds = [type(c) for c in changes[2:5]]
    assert kinds == [ch.PodUpserted, ch.PodUpserted, ch.PodDeleted]
    assert changes[2].pod.phase == "Succeeded"  # type: ignore[union-attr]
    assert changes[3].pod.node == "worker-02"  # type: ignore[union-attr]
    watches = [q for p, q in api.requests if q.get("watch") == ["true"]]
    listed_rv = json.loads((CLUSTER / "pods.json").read_text())["metadata"]["resourceVersion"]
    assert watches[0]["resourceVersion"] == [listed_rv]
    assert watches[0]["allowWatchBookmarks"] == ["true"]
    # The second watch resumes from the version advanced through BOOKMARK and events.
    assert watches[1]["resourceVersion"] == [str(int(listed_rv) + 4)]
    # That watch is answered with 410 Expired: the reflector must relist.
    assert isinstance(changes[5], ch.ApiReachable) and isinstance(changes[6], ch.PodsListed)


def test_threaded_source_feeds_the_model(api: FakeApiServer) -> None:
    source = KubernetesSource(_client(api.url), refresh=0.2, watch_timeout=1)
    inbox: list[ch.Change] = []
    source.start(inbox.append)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            # wait for everything asserted below, the relist after the 410 included
            if (
                ch.MetricsPolled in {type(c) for c in inbox}
                and sum(isinstance(c, ch.EventsSeen) for c in inbox) >= 3
                and sum(isinstance(c, ch.PodsListed) for c in inbox) >= 2
            ):
                break
            time.sleep(0.05)
    finally:
        source.stop()
    assert all(not t.is_alive() for t in source.threads)
    model = ClusterModel()
    model.apply_all(list(inbox))
    assert len(model.nodes) == 8 and model.metrics_available and model.has_decisions
    assert model.evictions
    selectors = {q.get("fieldSelector", [""])[0] for p, q in api.requests if p == "/api/v1/events"}
    assert selectors == {
        "reason=LoadwiseScored",
        "reportingComponent=sigs.k8s.io.descheduler",
        "source=sigs.k8s.io.descheduler",
    }
    # relisted after the 410: more than one pods list
    assert sum(isinstance(c, ch.PodsListed) for c in inbox) >= 2


def test_metrics_server_missing_is_reported() -> None:
    with FakeApiServer(metrics=False) as server:
        source = KubernetesSource(_client(server.url))
        changes: list[ch.Change] = []
        source.poll_metrics_once(changes.append, with_pods=True)
    assert isinstance(changes[0], ch.MetricsUnavailable) and "404" in changes[0].reason


def test_expired_credentials_are_reported_and_retried() -> None:
    reloads: list[int] = []
    with FakeApiServer(status=401) as server:

        def reload() -> ApiClient:
            reloads.append(1)
            return _client(server.url)

        source = KubernetesSource(_client(server.url), reload=reload, event_selectors=())
        changes: list[ch.Change] = []
        source.start(changes.append)
        deadline = time.monotonic() + 10
        while (
            not any(isinstance(c, ch.ApiUnreachable) for c in changes)
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        source.stop()
    failure = next(c for c in changes if isinstance(c, ch.ApiUnreachable))
    assert "401" in failure.reason and failure.retry_in > 0
    assert reloads


def test_unreachable_server_is_reported(tmp_path: Path) -> None:
    source = KubernetesSource(_client("http://127.0.0.1:9"), event_selectors=())
    changes: list[ch.Change] = []
    source.start(changes.append)
    deadline = time.monotonic() + 15
    while (
        not any(isinstance(c, ch.ApiUnreachable) for c in changes) and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    source.stop()
    assert any(isinstance(c, ch.ApiUnreachable) for c in changes)


def _collect(source: KubernetesSource, stream: Stream, until: Any) -> list[ch.Change]:
    """Run one stream's reflector in a thread until `until(changes)` or 15 s."""
    changes: list[ch.Change] = []
    thread = threading.Thread(target=source.reflector(stream, changes.append).run, daemon=True)
    thread.start()
    try:
        _wait_for(lambda: until(changes), 15)
    finally:
        source.stop()
        thread.join(timeout=5)
    return changes


def test_an_unreadable_event_is_skipped_and_the_feed_stays_live(api: FakeApiServer) -> None:
    """One Event that a parser cannot read no longer fails the list, and so no longer
    turns the dashboard to "API server unreachable" for as long as the Event lives."""
    events = api.docs["/api/v1/events"]["items"]
    decisions = [e for e in events if e.get("reason") == "LoadwiseScored"]
    huge_score = json.loads(json.dumps(decisions[0]))
    huge_score["metadata"]["uid"] = "huge-score"
    huge_score["involvedObject"]["uid"] = "huge-score-pod"
    huge_score["metadata"]["annotations"]["loadwise.dev/decision"] = (
        '{"scores": {"worker-01": 1' + "0" * 400 + "}}"
    )
    unreadable = {
        "metadata": {"name": "x.1", "namespace": "shop", "uid": "unreadable"},
        "reason": "LoadwiseScored",
        "involvedObject": ["not", "an", "object"],
    }
    events += [huge_score, unreadable]
    source = KubernetesSource(_client(api.url))
    stream = next(s for s in source.streams if s.name == "events[reason=LoadwiseScored]")
    changes = _collect(source, stream, lambda cs: any(isinstance(c, ch.EventsSeen) for c in cs))
    assert not [c for c in changes if isinstance(c, ch.ApiUnreachable)]
    seen = next(c for c in changes if isinstance(c, ch.EventsSeen))
    uids = {r.pod_uid for r in seen.records if isinstance(r, Decision)}
    assert len(uids) == len(decisions) + 1 and "huge-score-pod" in uids
    assert ch.ObjectsSkipped(stream.name, 1) in changes
    model = ClusterModel()
    model.apply_all(changes)
    assert model.connected is True and summary(model, "lab").endswith("· 1 object skipped")
    assert banner_text(model) == ""


def test_forbidden_still_shows_as_forbidden() -> None:
    """Skipping unreadable objects never hides a genuine API failure."""
    with FakeApiServer(status=403) as server:
        source = KubernetesSource(_client(server.url), event_selectors=())
        changes = _collect(
            source,
            source.streams[0],
            lambda cs: any(isinstance(c, ch.ApiUnreachable) for c in cs),
        )
    failure = next(c for c in changes if isinstance(c, ch.ApiUnreachable))
    assert failure.reason.startswith("forbidden (403)")
    model = ClusterModel()
    model.apply_all(changes)
    assert "API server unreachable" in banner_text(model) and model.skipped == {}
