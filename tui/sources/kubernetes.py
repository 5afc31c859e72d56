"""The real `ClusterSource`: list+watch against the API server, plus metrics.k8s.io polls.

One worker thread per stream, each doing what client-go's reflector does:

1. list (paged, `limit=500`) and remember the list's `resourceVersion`;
2. watch from that `resourceVersion` with `allowWatchBookmarks=true`, applying ADDED /
   MODIFIED / DELETED and advancing the version on every event and BOOKMARK;
3. when the server ends the watch (its `timeoutSeconds`), watch again from the last
   version; on `410 Gone` (version too old) list again; on any other failure report
   `ApiUnreachable`, wait with capped exponential backoff plus jitter, and retry.

Streams: nodes, pods (all namespaces), and Events selected on the server by field
selector (the extender's reason, the descheduler's reporting component), so the TUI never
downloads the cluster's whole event stream. A further thread polls NodeMetrics every
`refresh` seconds and PodMetrics every `pod_metrics_every` polls.

Raw JSON is read with `_preload_content`-style streaming and parsed by `tui.objects`,
skipping the generated client models: deserialising 10,000 V1Pod objects through them
costs seconds, and the TUI needs a dozen fields of each.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from ..exceptions import ApiError, KubeconfigError
from ..objects import parse_event, parse_node, parse_node_metrics, parse_pod, parse_pod_metrics
from . import Sink
from . import changes as ch

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

__all__ = ["ApiError", "Backoff", "KubernetesSource", "Stream", "load_api_client"]

JSON = dict[str, Any]

EVENT_SELECTORS = (
    "reason=LoadwiseScored",
    "reportingComponent=sigs.k8s.io.descheduler",
    "source=sigs.k8s.io.descheduler",
)


class _Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410 or a watch ERROR event): relist."""


@dataclass(slots=True)
class Backoff:
    """Capped exponential backoff with jitter: 1 s, 2 s, 4 s … 30 s, each ±20 %."""

    initial: float = 1.0
    cap: float = 30.0
    _next: float = 0.0

    def next(self) -> float:
        self._next = self.initial if not self._next else min(self.cap, self._next * 2)
        return self._next * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self._next = 0.0


@dataclass(frozen=True, slots=True)
class Stream:
    """One list+watch stream: a path, an optional field selector, and how its items
    turn into changes."""

    name: str
    path: str
    field_selector: str = ""


def load_api_client(kubeconfig: str | None, context: str | None) -> tuple[ApiClient, str]:
    """Build an ApiClient from a kubeconfig the way kubectl picks one; returns (client, context).

    Raises `KubeconfigError` when the file is missing or malformed or lacks the context.
    """
    import yaml
    from kubernetes import config
    from kubernetes.config.config_exception import ConfigException

    try:
        _contexts, current = config.list_kube_config_contexts(config_file=kubeconfig)
        name = context or (current or {}).get("name", "")
        api_client = config.new_client_from_config(config_file=kubeconfig, context=name or None)
    except (ConfigException, yaml.YAMLError, OSError) as exc:
        where = kubeconfig or "$KUBECONFIG or ~/.kube/config"
        raise KubeconfigError(f"cannot load kubeconfig ({where}): {exc}") from exc
    return api_client, name or "in-cluster"


def _now() -> datetime:
    return datetime.now(UTC)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        if exc.status == 401:
            return "credentials rejected (401 Unauthorized): refresh the kubeconfig credentials"
        if exc.status == 403:
            return f"forbidden (403): {exc.reason}"
        return f"API error {exc.status}: {exc.reason}"
    text = str(exc) or type(exc).__name__
    if "Connection refused" in text or "NewConnectionError" in text:
        return "connection refused"
    if "timed out" in text.lower():
        return "timed out"
    return text.splitlines()[0][:160]


class KubernetesSource:
    """List+watch nodes, pods and selected Events; poll metrics.k8s.io. Thread-based.

    `api_client` is a `kubernetes.client.ApiClient`; tests inject one pointed at a
    loopback server replaying recorded watch streams. `reload`, when given, builds a
    fresh ApiClient after a 401 (the user may have renewed credentials meanwhile).
    """

    def __init__(
        self,
        api_client: Any,
        *,
        description: str = "",
        refresh: float = 15.0,
        pod_metrics_every: int = 2,
        page_size: int = 500,
        watch_timeout: int = 300,
        event_selectors: tuple[str, ...] = EVENT_SELECTORS,
        reload: Callable[[], Any] | None = None,
        now: Callable[[], datetime] = _now,
    ) -> None:
        self.api_client = api_client
        self._description = description
        self.refresh = refresh
        self.pod_metrics_every = max(1, pod_metrics_every)
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.reload = reload
        self._now = now
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._open: set[Any] = set()
        self._lock = threading.Lock()
        self.streams = [Stream("nodes", "/api/v1/nodes"), Stream("pods", "/api/v1/pods")] + [
            Stream(f"events[{s}]", "/api/v1/events", s) for s in event_selectors
        ]

    @property
    def description(self) -> str:
        return self._description

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, sink: Sink) -> None:
        for stream in self.streams:
            self._spawn(f"watch-{stream.name}", self._run_stream, stream, sink)
        self._spawn("metrics", self._run_metrics, sink)

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=f"loadwise-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            for response in list(self._open):
                try:
                    response.response.shutdown()
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass
        for thread in self._threads:
            thread.join(timeout=2)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # -- HTTP -----------------------------------------------------------------------------

    def _request(self, path: str, query: Mapping[str, Any], *, read_timeout: float) -> Any:
        url_path = f"{path}?{urlencode(query)}" if query else path
        method, url, headers, _body, _post = self.api_client.param_serialize(
            "GET",
            url_path,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        response = self.api_client.call_api(
            method, url, header_params=headers, _request_timeout=(10, read_timeout)
        )
        if response.status == 410:
            response.response.release_conn()
            raise _Gone()
        if not 200 <= response.status < 300:
            body = response.read() or b""
            try:
                message = json.loads(body).get("message", response.reason)
            except (ValueError, AttributeError):
                message = response.reason
            raise ApiError(response.status, str(message))
        return response

    def get_json(self, path: str, query: Mapping[str, Any] | None = None) -> JSON:
        response = self._request(path, query or {}, read_timeout=60)
        data: JSON = json.loads(response.read())
        return data

    def list_all(self, stream: Stream) -> tuple[list[JSON], str]:
        """Paged list; returns the items and the list's resourceVersion."""
        items: list[JSON] = []
        token = ""
        while True:
            query: dict[str, Any] = {"limit": self.page_size}
            if stream.field_selector:
                query["fieldSelector"] = stream.field_selector
            if token:
                query["continue"] = token
            page = self.get_json(stream.path, query)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return items, str(meta.get("resourceVersion", ""))

    def watch_lines(self, stream: Stream, resource_version: str) -> Iterator[JSON]:
        """Yield decoded watch events until the server closes the stream."""
        query: dict[str, Any] = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": int(self.watch_timeout * random.uniform(1.0, 1.2)),
        }
        if stream.field_selector:
            query["fieldSelector"] = stream.field_selector
        response = self._request(stream.path, query, read_timeout=self.watch_timeout * 1.2 + 30)
        with self._lock:
            self._open.add(response)
        try:
            buffer = b""
            for chunk in response.response.stream(4096, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
            if buffer.strip():
                yield json.loads(buffer)
        finally:
            with self._lock:
                self._open.discard(response)
            response.response.release_conn()

    # -- streams --------------------------------------------------------------------------

    def _listed(self, stream: Stream, items: list[JSON]) -> ch.Change:
        if stream.name == "nodes":
            return ch.NodesListed(tuple(parse_node(i) for i in items))
        if stream.name == "pods":
            return ch.PodsListed(tuple(parse_pod(i) for i in items))
        return ch.EventsSeen(tuple(r for i in items if (r := parse_event(i)) is not None))

    def _watched(self, stream: Stream, kind: str, obj: JSON) -> ch.Change | None:
        if stream.name == "nodes":
            if kind == "DELETED":
                return ch.NodeDeleted((obj.get("metadata") or {}).get("name", ""))
            return ch.NodeUpserted(parse_node(obj))
        if stream.name == "pods":
            if kind == "DELETED":
                meta = obj.get("metadata") or {}
                return ch.PodDeleted(meta.get("namespace", ""), meta.get("name", ""))
            return ch.PodUpserted(parse_pod(obj))
        if kind == "DELETED":
            return None  # Events expire (1 h TTL); the feed keeps what it saw.
        record = parse_event(obj)
        return ch.EventsSeen((record,)) if record is not None else None

    def run_stream_once(self, stream: Stream, sink: Sink, resource_version: str) -> str:
        """List if needed, then follow one watch; returns the version to resume from.

        Raises `_Gone` when the server says the version is too old.
        """
        if not resource_version:
            items, resource_version = self.list_all(stream)
            sink(ch.ApiReachable(self._now()))
            sink(self._listed(stream, items))
        for event in self.watch_lines(stream, resource_version):
            kind = event.get("type", "")
            obj = event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410 or obj.get("reason") in ("Expired", "Gone"):
                    raise _Gone()
                raise ApiError(int(obj.get("code") or 500), str(obj.get("message", "watch error")))
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if version:
                resource_version = str(version)
            if kind == "BOOKMARK":
                continue
            change = self._watched(stream, kind, obj)
            if change is not None:
                sink(change)
            if self._stop.is_set():
                break
        return resource_version

    def _run_stream(self, stream: Stream, sink: Sink) -> None:
        backoff = Backoff()
        version = ""
        while not self._stop.is_set():
            try:
                version = self.run_stream_once(stream, sink, version)
                backoff.reset()
            except _Gone:
                version = ""
            except Exception as exc:  # noqa: BLE001 - any failure means "retry later"
                if self._stop.is_set():
                    return
                delay = backoff.next()
                sink(ch.ApiUnreachable(_describe(exc), delay, self._now()))
                if isinstance(exc, ApiError) and exc.status == 401 and self.reload is not None:
                    try:
                        self.api_client = self.reload()
                    except Exception:  # noqa: BLE001 - keep the old client and retry
                        pass
                self._stop.wait(delay)

    # -- metrics --------------------------------------------------------------------------

    def poll_metrics_once(self, sink: Sink, *, with_pods: bool) -> None:
        base = "/apis/metrics.k8s.io/v1beta1"
        try:
            nodes = self.get_json(f"{base}/nodes")
            pods = self.get_json(f"{base}/pods") if with_pods else None
        except ApiError as exc:
            if exc.status in (404, 503):
                sink(
                    ch.MetricsUnavailable(
                        f"metrics.k8s.io answered {exc.status}: "
                        "is metrics-server installed and ready?"
                    )
                )
                return
            raise
        sink(
            ch.MetricsPolled(
                self._now(),
                tuple(parse_node_metrics(i) for i in nodes.get("items") or ()),
                None
                if pods is None
                else tuple(parse_pod_metrics(i) for i in pods.get("items") or ()),
            )
        )

    def _run_metrics(self, sink: Sink) -> None:
        polls = 0
        while not self._stop.is_set():
            try:
                self.poll_metrics_once(sink, with_pods=polls % self.pod_metrics_every == 0)
                polls += 1
            except Exception:  # noqa: BLE001 - the watch threads report connectivity
                pass
            self._stop.wait(self.refresh)
