"""The live `ClusterSource`: list+watch against the API server, plus metrics.k8s.io polls.

One worker thread per stream, each running the extender's `extender.reflector.Reflector`
(paged list, watch with bookmarks from the list's resourceVersion, relist on 410 Gone,
capped jittered backoff on any other failure). This module adds what the dashboard
needs on top: each list becomes `ApiReachable` plus a `NodesListed`/`PodsListed`/
`EventsSeen` change, each watch event a single change, each failure an `ApiUnreachable`
with the reason in the user's terms and the delay before the retry. An object the
parsers cannot read is skipped alone (`tui.sources.skipped`) and counted in an
`ObjectsSkipped` change; it never fails its list, its watch or its metrics poll.

Streams: nodes, pods (all namespaces), and Events selected on the server by field
selector (the extender's reason, the descheduler's reporting component), so the TUI never
downloads the cluster's whole event stream. A further thread polls NodeMetrics every
`refresh` seconds and PodMetrics every `pod_metrics_every` polls.

HTTP goes through `ApiClientTransport`, an `extender.reflector.ListWatchClient` over a
`kubernetes.client.ApiClient`: bodies are read raw and parsed by `tui.objects`, skipping
the generated client models (deserialising 10,000 V1Pod objects through them costs
seconds, and the TUI needs a dozen fields of each).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import msgspec

from loadwise.extender.reflector import Backoff, Reflector

from ..exceptions import ApiError, KubeconfigError
from ..objects import (
    Decision,
    Eviction,
    parse_event,
    parse_node,
    parse_node_metrics,
    parse_pod,
    parse_pod_metrics,
    parse_ref,
)
from . import Sink
from . import changes as ch
from .skipped import Read, SkipLedger, read_each, read_one

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

__all__ = ["ApiClientTransport", "KubernetesSource", "Stream", "describe", "load_api_client"]

log = logging.getLogger("loadwise.tui.kubernetes")

JSON = dict[str, Any]

EVENT_SELECTORS = (
    "reason=LoadwiseScored",
    "reportingComponent=sigs.k8s.io.descheduler",
    "source=sigs.k8s.io.descheduler",
)
METRICS = "/apis/metrics.k8s.io/v1beta1"


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

    # The client's loaders carry no annotations; these are the types they return.
    list_contexts: Callable[..., tuple[list[JSON], JSON | None]] = config.list_kube_config_contexts
    new_client: Callable[..., ApiClient] = config.new_client_from_config
    try:
        _contexts, current = list_contexts(config_file=kubeconfig)
        name = context or (current or {}).get("name", "")
        api_client = new_client(config_file=kubeconfig, context=name or None)
    except (ConfigException, yaml.YAMLError, OSError) as exc:
        where = kubeconfig or "$KUBECONFIG or ~/.kube/config"
        raise KubeconfigError(f"cannot load kubeconfig ({where}): {exc}") from exc
    return api_client, name or "in-cluster"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def describe(exc: BaseException) -> str:
    """A failed request in the user's terms, for the "API server unreachable" banner."""
    if isinstance(exc, ApiError) and exc.status:
        if exc.status == 401:
            return "credentials rejected (401 Unauthorized): refresh the kubeconfig credentials"
        if exc.status == 403:
            return f"forbidden (403): {exc.reason}"
        return f"API error {exc.status}: {exc.reason}"
    text = (exc.reason if isinstance(exc, ApiError) else str(exc)) or type(exc).__name__
    if "Connection refused" in text or "NewConnectionError" in text:
        return "connection refused"
    if "timed out" in text.lower():
        return "timed out"
    return text.splitlines()[0][:160]


def _node_upserted(obj: JSON) -> ch.Change:
    return ch.NodeUpserted(parse_node(obj))


def _pod_upserted(obj: JSON) -> ch.Change:
    return ch.PodUpserted(parse_pod(obj))


def _event_seen(obj: JSON) -> ch.Change | None:
    record = parse_event(obj)
    return ch.EventsSeen((record,)) if record is not None else None


def _items(document: Any) -> list[Any]:
    """The `items` of a list document; none if the document is not one (a metrics API
    answering 200 with something else is not a reason to stop polling)."""
    items = document.get("items") if isinstance(document, Mapping) else None
    return items if isinstance(items, list) else []


class ApiClientTransport:
    """`extender.reflector.ListWatchClient` over a `kubernetes.client.ApiClient`.

    Every failure is an `ApiError`: the server's status and Status message for a non-2xx
    answer, status 0 and the transport's message when no answer came. Open watch
    responses are tracked so that `close()` ends them at once instead of waiting for
    the server's `timeoutSeconds`. `use()` swaps the ApiClient (after a 401, for
    renewed credentials) without disturbing the reflectors holding this transport.
    """

    def __init__(self, api_client: ApiClient) -> None:
        self.api_client = api_client
        self._open: set[Any] = set()
        self._lock = threading.Lock()

    def use(self, api_client: ApiClient) -> None:
        self.api_client = api_client

    def _request(self, path: str, query: Mapping[str, str | int], read_timeout: float) -> Any:
        import urllib3

        url_path = f"{path}?{urlencode(query)}" if query else path
        client = self.api_client
        try:
            method, url, headers, _body, _post = client.param_serialize(
                "GET",
                url_path,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            # The client's RESTResponse is unannotated: read it as Any.
            response: Any = client.call_api(
                method, url, header_params=headers, _request_timeout=(10, read_timeout)
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(0, str(exc)) from exc
        if not 200 <= response.status < 300:
            body = response.read() or b""
            try:
                message = json.loads(body).get("message", response.reason)
            except (ValueError, AttributeError):
                message = response.reason
            raise ApiError(response.status, str(message))
        return response

    def get(self, path: str, query: Mapping[str, str], timeout: float = 10.0) -> bytes:
        response = self._request(path, query, timeout)
        return bytes(response.read())

    def watch_lines(
        self, path: str, query: Mapping[str, str], timeout_seconds: int
    ) -> Iterator[bytes]:
        """Yield the watch's newline-delimited events until the server closes the stream."""
        import urllib3

        full: dict[str, str | int] = {**query, "watch": "true", "timeoutSeconds": timeout_seconds}
        response = self._request(path, full, timeout_seconds * 1.2 + 30)
        with self._lock:
            self._open.add(response)
        try:
            # urllib3's response iterates by line as chunks arrive (watches are chunked).
            for line in response.response:
                if line.strip():
                    yield line
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(0, str(exc)) from exc
        finally:
            with self._lock:
                self._open.discard(response)
            response.response.release_conn()

    def close(self) -> None:
        """End every open watch; the reflectors see the stream fail and check their stop."""
        import urllib3

        with self._lock:
            responses = list(self._open)
        for response in responses:
            try:
                response.response.shutdown()
            except (urllib3.exceptions.HTTPError, OSError):
                pass  # already closed by the server: nothing left to end


class KubernetesSource:
    """List+watch nodes, pods and selected Events; poll metrics.k8s.io. Thread-based.

    `api_client` is a `kubernetes.client.ApiClient`; tests inject one pointed at a
    loopback server replaying recorded watch streams. `reload`, when given, builds a
    fresh ApiClient after a 401 (the user may have renewed credentials meanwhile).
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        description: str = "",
        refresh: float = 15.0,
        pod_metrics_every: int = 2,
        page_size: int = 500,
        watch_timeout: int = 300,
        event_selectors: tuple[str, ...] = EVENT_SELECTORS,
        reload: Callable[[], ApiClient] | None = None,
        now: Callable[[], datetime] = _now,
    ) -> None:
        self.transport = ApiClientTransport(api_client)
        self._description = description
        self.refresh = refresh
        self.pod_metrics_every = max(1, pod_metrics_every)
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.reload = reload
        self._now = now
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.streams = [Stream("nodes", "/api/v1/nodes"), Stream("pods", "/api/v1/pods")] + [
            Stream(f"events[{s}]", "/api/v1/events", s) for s in event_selectors
        ]
        # Per stream (and per metrics document): the objects skipped now. Each ledger is
        # used by one thread only, its stream's (or the metrics poller).
        self._ledgers = {
            name: SkipLedger()
            for name in [s.name for s in self.streams] + ["nodemetrics", "podmetrics"]
        }

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
        self.transport.close()
        for thread in self._threads:
            thread.join(timeout=2)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    @property
    def threads(self) -> tuple[threading.Thread, ...]:
        """The worker threads `start` began (one per stream, one for metrics)."""
        return tuple(self._threads)

    # -- streams --------------------------------------------------------------------------

    def reflector(self, stream: Stream, sink: Sink) -> Reflector:
        """The list+watch loop for one stream, delivering its changes to `sink`.

        Its `run()` blocks until `stop()`; `start` runs one per stream in a thread.
        """

        def on_list(items: list[msgspec.Raw]) -> None:
            sink(ch.ApiReachable(self._now()))
            for change in self.listed(stream, items):
                sink(change)

        def on_event(kind: str, raw: msgspec.Raw) -> None:
            for change in self.watched(stream, kind, raw):
                sink(change)

        def on_error(exc: Exception, delay: float) -> None:
            self._failed(exc, delay, sink)

        return Reflector(
            self.transport,
            stream.path,
            field_selector=stream.field_selector,
            on_list=on_list,
            on_event=on_event,
            on_error=on_error,
            stop=self._stop,
            page_limit=self.page_size,
            watch_timeout=self.watch_timeout,
        )

    def _failed(self, exc: BaseException, delay: float, sink: Sink) -> None:
        """Report a failed request (the reflector retries after `delay`); reload on 401."""
        if self._stop.is_set():
            return  # stop() ended the watches: that is not the API server failing
        sink(ch.ApiUnreachable(describe(exc), delay, self._now()))
        if isinstance(exc, ApiError) and exc.status == 401 and self.reload is not None:
            try:
                self.transport.use(self.reload())
            except KubeconfigError as reload_error:
                log.warning("kubeconfig reload after 401 failed: %s", reload_error)

    def _counted(self, name: str, changed: bool) -> list[ch.Change]:
        """An `ObjectsSkipped` for stream `name` if its count changed, else nothing."""
        return [ch.ObjectsSkipped(name, self._ledgers[name].count)] if changed else []

    def listed(self, stream: Stream, items: list[msgspec.Raw]) -> list[ch.Change]:
        """The changes one full list of `stream` makes: the list, minus what cannot be read."""
        decode = msgspec.json.decode
        listed: ch.Change
        if stream.name == "nodes":
            nodes = read_each(parse_node, items, decode=decode)
            listed, skipped = ch.NodesListed(nodes.parsed), nodes.skipped
        elif stream.name == "pods":
            pods = read_each(parse_pod, items, decode=decode)
            listed, skipped = ch.PodsListed(pods.parsed), pods.skipped
        else:
            events: Read[Decision | Eviction] = read_each(parse_event, items, decode=decode)
            listed, skipped = ch.EventsSeen(events.parsed), events.skipped
        return [listed, *self._counted(stream.name, self._ledgers[stream.name].listed(skipped))]

    def watched(self, stream: Stream, kind: str, raw: msgspec.Raw) -> list[ch.Change]:
        """The changes one watch event of `stream` makes (none for an unreadable object)."""
        ledger = self._ledgers[stream.name]
        if kind == "DELETED":
            ref, key, _readable = read_one(parse_ref, raw, decode=msgspec.json.decode)
            counted = self._counted(stream.name, ledger.deleted(key))
            if ref is None or stream.name.startswith("events"):
                # Events expire (1 h TTL); the feed keeps what it saw.
                return counted
            if stream.name == "nodes":
                return [ch.NodeDeleted(ref[1]), *counted]
            return [ch.PodDeleted(*ref), *counted]
        parse = {"nodes": _node_upserted, "pods": _pod_upserted}.get(stream.name, _event_seen)
        change, key, readable = read_one(parse, raw, decode=msgspec.json.decode)
        counted = self._counted(stream.name, ledger.watched(key, readable=readable))
        return [change, *counted] if change is not None else counted

    def _run_stream(self, stream: Stream, sink: Sink) -> None:
        reflector = self.reflector(stream, sink)
        backoff = Backoff()
        while not self._stop.is_set():
            try:
                reflector.run()
            # Thread boundary: the reflector retries API failures itself; anything else
            # (an object our parsers cannot read) would end this stream's thread for good
            # and freeze its table. Log it, show it as a failure, and run again.
            except Exception as exc:
                log.exception("stream %s failed", stream.name)
                delay = backoff.next()
                self._failed(exc, delay, sink)
                self._stop.wait(delay)

    # -- metrics --------------------------------------------------------------------------

    def poll_metrics_once(self, sink: Sink, *, with_pods: bool) -> None:
        try:
            nodes = _items(json.loads(self.transport.get(f"{METRICS}/nodes", {}, timeout=60)))
            pods = (
                _items(json.loads(self.transport.get(f"{METRICS}/pods", {}, timeout=60)))
                if with_pods
                else None
            )
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
        node_usage = read_each(parse_node_metrics, nodes)
        pod_usage = None if pods is None else read_each(parse_pod_metrics, pods)
        sink(
            ch.MetricsPolled(
                self._now(),
                node_usage.parsed,
                None if pod_usage is None else pod_usage.parsed,
            )
        )
        for name, read in (("nodemetrics", node_usage), ("podmetrics", pod_usage)):
            if read is not None:
                for change in self._counted(name, self._ledgers[name].listed(read.skipped)):
                    sink(change)

    def _run_metrics(self, sink: Sink) -> None:
        polls = 0
        while not self._stop.is_set():
            try:
                self.poll_metrics_once(sink, with_pods=polls % self.pod_metrics_every == 0)
                polls += 1
            except ApiError as exc:
                # The watch threads report connectivity; a failed poll is retried next time.
                log.debug("metrics poll failed: %s", exc)
            # Thread boundary: an unreadable metrics document must not end the polling.
            except Exception:
                log.exception("metrics poll failed")
            self._stop.wait(self.refresh)
