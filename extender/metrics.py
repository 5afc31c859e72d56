"""The extender's own Prometheus metrics (``GET /metrics``)."""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .model import InvalidReading

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST

# Most answers take well under a millisecond; kube-scheduler's default timeout is 5 s.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# Nodes named in loadwise_extender_invalid_reading (the first by name): one series per
# node, so a source refusing a whole large cluster cannot add thousands.
_INVALID_LISTED = 16


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.request_seconds = Histogram(
            "loadwise_extender_request_duration_seconds",
            "Time to answer a scheduler request, by verb.",
            ["verb"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "loadwise_extender_errors_total",
            "Requests answered with an error or a fail-open fallback, by verb and kind.",
            ["verb", "kind"],
            registry=r,
        )
        self.decisions = Counter(
            "loadwise_extender_decisions_total",
            "Node decisions: filter passed/failed per node, prioritize scored per node.",
            ["verb", "outcome"],
            registry=r,
        )
        self.load_age = Gauge(
            "loadwise_extender_load_age_seconds",
            "Age of the load data held, from the end of its measurement window (-1: none yet).",
            registry=r,
        )
        self.load_stale = Gauge(
            "loadwise_extender_load_stale", "1 when the load data is missing or stale.", registry=r
        )
        self.source_errors = Counter(
            "loadwise_extender_source_errors_total", "Failed reads of the load source.", registry=r
        )
        self.nodes_with_load = Gauge(
            "loadwise_extender_nodes_with_load", "Nodes in the latest load snapshot.", registry=r
        )
        self.pending_placements = Gauge(
            "loadwise_extender_pending_placements",
            "Placements tracked for herding protection.",
            registry=r,
        )
        self.ledger_entries = Gauge(
            "loadwise_extender_ledger_entries",
            "Placements and departures in the herding ledger (bounded by its horizon and a hard "
            "cap).",
            registry=r,
        )
        self.ledger_heap_entries = Gauge(
            "loadwise_extender_ledger_heap_entries",
            "Entries in the ledger's time-ordered heap, live or not (compacted on prune).",
            registry=r,
        )
        self.node_cache_entries = Gauge(
            "loadwise_extender_node_cache_entries",
            "Node sizes remembered from full-Node requests.",
            registry=r,
        )
        self.watched_nodes = Gauge(
            "loadwise_extender_watched_nodes",
            "Nodes held by the node watch (with a kubeconfig).",
            registry=r,
        )
        self.sizes_unknown = Gauge(
            "loadwise_extender_node_sizes_unknown",
            "1 when names-only requests name nodes whose size is unknown (no kubeconfig).",
            registry=r,
        )
        self.events = Counter(
            "loadwise_extender_events_total",
            "Pod Events recorded, by outcome.",
            ["outcome"],
            registry=r,
        )
        self.events_pending = Gauge(
            "loadwise_extender_events_pending",
            "Pods whose Event waits for its merge or its binding (capped).",
            registry=r,
        )
        self.all_over_threshold = Counter(
            "loadwise_extender_filter_all_over_threshold_total",
            "Filter calls where every candidate node was over its load threshold, so the "
            "least loaded were let through (a Warning Event says so; in observe mode: would "
            "have been).",
            registry=r,
        )
        self.placements_refused = Counter(
            "loadwise_extender_placements_refused_total",
            "Assumed placements not counted: the pod requests more than the node's allocatable, "
            "which kube-scheduler's own fit check never lets through to the extender.",
            registry=r,
        )
        self.load_age.set(-1)
        self.load_stale.set(1)
        self.client_errors = Counter(
            "loadwise_extender_client_errors_total",
            "Requests refused as the caller's mistake (4xx), by verb, status and reason.",
            ["verb", "status", "reason"],
            registry=r,
        )
        self.connections = Counter(
            "loadwise_extender_connections_total",
            "Connections served (past their TLS handshake), by listener (scheduler, health). "
            "kube-scheduler keeps its "
            "connections alive, so this stays far below the requests served.",
            ["listener"],
            registry=r,
        )
        self.connections_refused = Counter(
            "loadwise_extender_connections_refused_total",
            "Connections closed unserved: max_connections were open on that listener.",
            registry=r,
        )
        self.handshake_failures = Counter(
            "loadwise_extender_handshake_failures_total",
            "Connections closed before a request could be read, by listener and reason: a "
            "failed TLS handshake (no_certificate, untrusted, expired, wrong_purpose, "
            "name_not_allowed, not_tls, protocol, closed), none within the handshake timeout "
            "(timeout), or closed to make room for a new one (evicted).",
            ["listener", "reason"],
            registry=r,
        )
        self.accept_errors = Counter(
            "loadwise_extender_accept_errors_total",
            "accept() failures for want of file descriptors or memory, by listener.",
            ["listener"],
            registry=r,
        )
        self.loop_errors = Counter(
            "loadwise_extender_loop_errors_total",
            "Errors reported to the event loop's exception handler (logged at most once a "
            "minute per message).",
            registry=r,
        )
        self.certificate_expiry = Gauge(
            "loadwise_extender_certificate_expiry_timestamp_seconds",
            "When a certificate the extender serves with stops being valid (notAfter, unix "
            "time), read at start: certificate=serving (its own) or client_ca (the CA its "
            "callers' certificates must come from; the earliest if several).",
            ["certificate"],
            registry=r,
        )
        self.pods_bound = Counter(
            "loadwise_extender_pods_bound_total",
            "Pods the pod watch saw bound to a node (with a kubeconfig): beside the requests "
            "answered, shows pods scheduled without a call to the extender.",
            registry=r,
        )
        self.catch_up = Counter(
            "loadwise_extender_watch_catch_up_total",
            "Requests that first waited for the pod watch to deliver their pod (with a "
            "kubeconfig), by outcome: delivered (at once or after a wait), timed_out "
            "(answered on the watch as it stood), not_synced (answered without waiting).",
            ["outcome"],
            registry=r,
        )
        self.invalid_readings = Counter(
            "loadwise_extender_invalid_readings_total",
            "Node readings refused by the load-source check, by reason (not_finite, "
            "negative, over_capacity, malformed); the node is scored as unknown.",
            ["reason"],
            registry=r,
        )
        self.invalid_reading_nodes = Gauge(
            "loadwise_extender_invalid_reading_nodes",
            "Nodes scored as unknown because their latest reading was refused.",
            registry=r,
        )
        self.invalid_reading = Gauge(
            "loadwise_extender_invalid_reading",
            f"1 for a node whose latest reading was refused, by node and reason "
            f"(at most {_INVALID_LISTED} nodes, the first by name).",
            ["node", "reason"],
            registry=r,
        )

    def count_invalid(self, invalid: Mapping[str, InvalidReading]) -> None:
        """Count one fetch's refused readings."""
        for reading in invalid.values():
            self.invalid_readings.labels(reading.reason).inc()

    def show_invalid(self, invalid: Mapping[str, InvalidReading]) -> None:
        """Set the gauges to the nodes refused in the snapshot held."""
        self.invalid_reading_nodes.set(len(invalid))
        self.invalid_reading.clear()
        for node in heapq.nsmallest(_INVALID_LISTED, invalid):
            self.invalid_reading.labels(node, invalid[node].reason).set(1)

    def render(self) -> bytes:
        return generate_latest(self.registry)
