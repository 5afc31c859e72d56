"""The composition root: the one place that builds the extender from its settings.

It takes the policy config validation parsed (``Settings.scoring``) with the
estimator's arguments and the fast path (``service.build_scoring``), chooses the load
source, makes the ledger, and, with a kubeconfig, the API client, the node/pod watch
(which reports placements straight into the ledger) and the Event recorder; then hands
them all, typed, to ``Extender``. Nothing else constructs these parts, so each is built
once and no part looks another up later.
"""

from __future__ import annotations

from .cluster import ClusterWatch
from .config import Settings, SourceConfig
from .events import EventRecorder
from .kubeapi import KubeAPI
from .ledger import Ledger
from .metrics import Metrics
from .model import PodLoad
from .service import Extender, build_inflight, build_scoring, ledger_horizon
from .sources import (
    LoadFileSource,
    LoadSource,
    LoadWatcherSource,
    MetricsServerSource,
    PrometheusSource,
)
from .sources.credentials import Credentials
from .sources.pod_metrics import PodMetricsSource, PodUsageSource, PrometheusPodUsageSource

__all__ = [
    "BIND_WAIT_SECONDS",
    "RecordedPlacements",
    "build_extender",
    "build_pod_usage",
    "build_source",
]

# How long a pod's Event waits for the watch to show its binding. kube-scheduler
# binds in its own goroutine right after scoring (pkg/scheduler/schedule_one.go,
# bindingCycle), so the binding usually arrives well within this; a pod still
# unbound by then (waiting on a volume, a permit plugin) is recorded without it.
BIND_WAIT_SECONDS = 3.0


class RecordedPlacements:
    """The watch's placements go to the ledger, and tell the recorder where a pod went."""

    def __init__(self, ledger: Ledger, recorder: EventRecorder) -> None:
        self._ledger = ledger
        self._recorder = recorder

    def bind(self, pod_key: str, node: str, load: PodLoad, at: float) -> None:
        self._ledger.bind(pod_key, node, load, at)
        self._recorder.placed(pod_key, node)

    def forget(self, pod_key: str) -> None:
        self._ledger.forget(pod_key)

    def depart(self, pod_key: str, node: str, load: PodLoad, at: float) -> None:
        self._ledger.depart(pod_key, node, load, at)

    def started(self, pod_key: str, at: float) -> None:
        self._ledger.started(pod_key, at)


def _credentials(src: SourceConfig) -> Credentials:
    """The source's token or basic-auth files, for the load and the pod-usage readers."""
    return Credentials(
        bearer_token_file=src.bearer_token_file,
        username=src.basic_auth.username if src.basic_auth else None,
        password_file=src.basic_auth.password_file if src.basic_auth else None,
    )


def build_source(
    settings: Settings, *, api: KubeAPI | None, cluster: ClusterWatch | None
) -> LoadSource:
    """The load source ``settings.source`` names (metrics-server needs the API and
    the node sizes the watch keeps)."""
    src = settings.source
    auth = _credentials(src)
    if src.kind == "load-watcher":
        return LoadWatcherSource(
            src.url or "",
            timeout=src.timeout_seconds,
            credentials=auth,
            max_bytes=src.response_cap,
            max_nodes=src.max_nodes,
        )
    if src.kind == "file":
        return LoadFileSource(src.file or "")
    if src.kind == "prometheus":
        return PrometheusSource(
            src.url or "",
            cpu_query=src.prometheus.cpu_query,
            memory_query=src.prometheus.memory_query,
            node_label=src.prometheus.node_label,
            timeout=src.timeout_seconds,
            credentials=auth,
            max_bytes=src.response_cap,
            max_nodes=src.max_nodes,
        )
    # metrics-server: config validation guarantees a kubeconfig, hence a watch
    assert api is not None and cluster is not None, "metrics-server without a kubeconfig"
    watch = cluster
    return MetricsServerSource(
        api, lambda: watch.nodes, max_bytes=src.response_cap, max_nodes=src.max_nodes
    )


def build_pod_usage(settings: Settings, *, api: KubeAPI | None) -> PodUsageSource | None:
    """Where each pod's use is read: cAdvisor's series in the Prometheus the load comes
    from, else PodMetrics through the API (metrics-server, and with load-watcher, whose
    own reading holds no pods); None when turned off, or without an API to ask."""
    src = settings.source
    if not settings.estimator.pod_usage:
        return None
    if src.kind == "prometheus":
        return PrometheusPodUsageSource(
            src.url or "",
            timeout=src.timeout_seconds,
            credentials=_credentials(src),
            max_bytes=src.response_cap,
        )
    if src.kind in ("metrics-server", "load-watcher") and api is not None:
        return PodMetricsSource(api, max_bytes=src.pod_metrics_cap)
    return None


def build_extender(settings: Settings) -> Extender:
    """Build every part the settings ask for; raises ``KubeError`` when the
    kubeconfig cannot be loaded."""
    metrics = Metrics()
    scoring = build_scoring(settings)
    ledger = Ledger(horizon=ledger_horizon(settings))
    inflight = build_inflight(settings)
    api: KubeAPI | None = None
    cluster: ClusterWatch | None = None
    recorder: EventRecorder | None = None
    if settings.kubeconfig:
        api = kube = KubeAPI(settings.kubeconfig)
        if settings.events_enabled:
            recorder = EventRecorder(
                lambda ns, event: kube.post(f"/api/v1/namespaces/{ns}/events", event),
                per_minute=settings.events.per_minute,
                bind_wait_seconds=BIND_WAIT_SECONDS,
                on_result=lambda outcome: metrics.events.labels(outcome).inc(),
            )
            metrics.events_pending.set_function(recorder.__len__)
        cluster = ClusterWatch(
            api,
            estimator=scoring.estimator,
            tlp=scoring.tlp,
            placements=ledger if recorder is None else RecordedPlacements(ledger, recorder),
            inflight=inflight,
        )
    return Extender(
        settings,
        build_source(settings, api=api, cluster=cluster),
        metrics=metrics,
        ledger=ledger,
        cluster=cluster,
        recorder=recorder,
        inflight=inflight,
        pod_usage=build_pod_usage(settings, api=api),
        scoring=scoring,
    )
