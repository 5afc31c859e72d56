"""Settings: a YAML file (``--config``) and flags on top of it.

Every key is checked on load, unknown keys included, and a bad value fails at
start with the key's path in the message, e.g.
``config error: Expected `number`, got `str` - at `$.source.refresh_seconds```.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Literal

import msgspec

from .decide import DEFAULT_THRESHOLDS
from .estimate import CPU_FACTOR, MEMORY_FACTOR, PEAK_SIGMAS, EstimatorArgs, TLPArgs
from .exceptions import ConfigError
from .policies import PolicyChoice, parse_policy
from .redact import has_credentials, redact_url
from .sources.base import (
    DEFAULT_MAX_NODES,
    DEFAULT_MAX_RESPONSE_BYTES,
    WATCHER_MAX_RESPONSE_BYTES,
)

__all__ = [
    "NAMES_BODY_BYTES",
    "BasicAuthConfig",
    "ConfigError",
    "EstimatorConfig",
    "EventsConfig",
    "FilterConfig",
    "Mode",
    "PrometheusConfig",
    "Settings",
    "SourceConfig",
    "TLSConfig",
    "host_port",
    "load_settings",
]

DEFAULT_MAX_STALE_SECONDS = 600.0

# Request body limits (docs/contracts.md, "Limits"). With node names only
# (nodeCacheCapable: true) a body is one Pod and the names: 1 MiB holds a Pod of
# several hundred KiB (annotations alone may take 256 KiB, apimachinery's
# TotalAnnotationSizeLimitB) and 5,000 names, the most nodes Kubernetes supports.
# With full Node objects, each node adds its JSON: a kubelet reports at most 50
# images (--node-status-max-images), about 15 KiB with its labels, conditions and
# annotations; 64 KiB a node leaves four times that.
NAMES_BODY_BYTES = 1024 * 1024
NODE_BODY_BYTES = 64 * 1024

SourceKind = Literal["load-watcher", "metrics-server", "prometheus", "file"]


class BasicAuthConfig(msgspec.Struct, forbid_unknown_fields=True):
    """HTTP basic authentication to the source: the password is read from a file (re-read
    when it changes), never written in the config file or on the command line."""

    username: str
    password_file: str


class PrometheusConfig(msgspec.Struct, forbid_unknown_fields=True):
    cpu_query: str = "instance:node_cpu:ratio"
    memory_query: str = "instance:node_memory_utilisation:ratio"
    node_label: str = "instance"


class SourceConfig(msgspec.Struct, forbid_unknown_fields=True):
    kind: SourceKind = "load-watcher"
    url: str | None = None
    file: str | None = None
    refresh_seconds: float = 15.0
    stale_after_seconds: float = 180.0
    max_stale_seconds: float | None = None
    """How long a stale snapshot is still read as the last known measurement (plus
    the placements since); older, the load is unknown. None: the larger of 600 and
    stale_after_seconds. Koordinator's LoadAware plugin stops trusting node metrics
    after 180 s (nodeMetricExpirationSeconds), the default of stale_after_seconds;
    this is how much longer the last reading still beats knowing nothing."""
    timeout_seconds: float = 10.0
    prometheus: PrometheusConfig = msgspec.field(default_factory=PrometheusConfig)
    bearer_token_file: str | None = None
    """A file holding a token sent as ``Authorization: Bearer`` (load-watcher, Prometheus);
    re-read whenever the file changes."""
    basic_auth: BasicAuthConfig | None = None
    max_response_bytes: int | None = None
    """The largest answer read from the source (after decompression); more is an error.
    None: the source's own default (``response_cap``)."""
    max_nodes: int = DEFAULT_MAX_NODES
    """The most nodes (series, items) one answer may hold; more is an error."""

    @property
    def response_cap(self) -> int:
        """``max_response_bytes``, or the default of this kind of source: 6 MiB for
        load-watcher (a document whose nodes cannot be counted before they are built),
        16 MiB for the others (sources/base.py says why each)."""
        if self.max_response_bytes is not None:
            return self.max_response_bytes
        if self.kind == "load-watcher":
            return WATCHER_MAX_RESPONSE_BYTES
        return DEFAULT_MAX_RESPONSE_BYTES

    @property
    def pod_metrics_cap(self) -> int:
        """The largest PodMetrics list read beside this source (estimator.pod_usage):
        ``max_response_bytes``, or 16 MiB whatever the kind; load-watcher's smaller default
        is for its own document, whose nodes cannot be counted before they are built."""
        if self.max_response_bytes is not None:
            return self.max_response_bytes
        return DEFAULT_MAX_RESPONSE_BYTES

    @property
    def max_stale(self) -> float:
        if self.max_stale_seconds is not None:
            return self.max_stale_seconds
        return max(DEFAULT_MAX_STALE_SECONDS, self.stale_after_seconds)


class FilterConfig(msgspec.Struct, forbid_unknown_fields=True):
    enabled: bool = True
    thresholds: dict[str, float] = msgspec.field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))


class EventsConfig(msgspec.Struct, forbid_unknown_fields=True):
    enabled: bool | None = None
    per_minute: int = 60


ESTIMATOR_MODES = ("learned", "request")
MAX_PEAK_SIGMAS = 3.0
"""A normally distributed use stays below its mean + 3 deviations 99.87 % of the time; more
would reject nodes for swings they almost never make."""


class EstimatorConfig(msgspec.Struct, forbid_unknown_fields=True):
    cpu_factor: float = CPU_FACTOR
    memory_factor: float = MEMORY_FACTOR
    pod_usage: bool = True
    """Read each pod's use (PodMetrics, or cAdvisor series from Prometheus) for the
    learned estimates, delta accounting and departures (``inflight``)."""
    pod_usage_seconds: float = 15.0
    """How often pod use is read: metrics-server's default --metric-resolution."""
    learned_percentile: float = 90.0
    learned_window_seconds: float = 600.0
    learned_max_workloads: int = 10_000
    delta: bool = True
    mode: str = "learned"
    """``learned``: pods counted from measured use (``inflight``); ``request``: every pod at the
    request rule (``estimate``), per-pod readings unused: the baseline the learned estimates
    are measured against."""
    decision_log: str | None = None
    """A file each decision's predicted node use is appended to (``decisionlog``)."""
    peak_sigmas: float = PEAK_SIGMAS
    """A node's measured use counts its mean plus this many standard deviations where the
    source reports one (load-watcher over Prometheus or SignalFx), in least-used's scores and
    the filter (``estimate.peak_percent``); 0: the mean alone."""
    spread_weight: float = 0.0
    """least-used: a node's score times (1 - weight x its share of the pod's workload). Off by
    default: at 1.0 the lab's end-to-end tests put 3 of 30 pods on a node whose memory a hog
    no pod requests holds at 75 % (the emptier nodes already held shares of the workload, the
    hog none), where the filter alone, at 90 %, does not stop them."""


class TLSConfig(msgspec.Struct, forbid_unknown_fields=True):
    """Serve HTTPS and accept only clients whose certificate ``client_ca_file`` signed
    (mutual TLS: kube-scheduler's ``enableHTTPS`` and ``tlsConfig``)."""

    cert_file: str
    key_file: str
    client_ca_file: str
    client_names: list[str] | None = None
    """Names a client certificate must carry one of (its common name, or a DNS or URI
    subject alternative name), besides being signed by the CA. None: any certificate the
    CA signed (a warning at start says so)."""


def host_port(text: str, key: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) of the setting ``key``; ConfigError if not."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"{key}: expected HOST:PORT, got {text!r}")
    number = int(port)
    if not 0 < number < 65536:
        raise ConfigError(f"{key}: port {number} out of range")
    return host.strip("[]") or "127.0.0.1", number


Mode = Literal["enforce", "observe"]


class Settings(msgspec.Struct, forbid_unknown_fields=True, dict=True):
    # (dict=True: room for ``scoring``, the policy parsed once and kept)
    listen: str = "127.0.0.1:8888"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    kubeconfig: str | None = None
    mode: Mode = "enforce"
    """``observe``: score and explain (Events say "would have"), but reject no node and
    answer equal priorities, so the scheduler places pods as without the extender."""
    ignore_namespaces: list[str] = msgspec.field(default_factory=list)
    """Namespaces whose pods the extender leaves alone (``exemptions.ignored``). Empty by
    default, kube-system included: what must run is exempt anyway (``exemptions.exemption``:
    DaemonSet, static and system-critical pods; loadwise's own add-ons there are
    system-cluster-critical), and an opted-out pod is not steered by load either."""
    policy: str = "least-used"
    policy_args: dict[str, Any] = msgspec.field(default_factory=dict)
    source: SourceConfig = msgspec.field(default_factory=SourceConfig)
    filter: FilterConfig = msgspec.field(default_factory=FilterConfig)
    events: EventsConfig = msgspec.field(default_factory=EventsConfig)
    estimator: EstimatorConfig = msgspec.field(default_factory=EstimatorConfig)
    max_body_bytes: int | None = None
    """None: sized for what the scheduler sends (``body_limit``)."""
    max_nodes: int = 50
    """The most Node objects a request carries when the scheduler sends them whole;
    sizes the body limit without a kubeconfig (a homelab's cluster, with room)."""
    max_connections: int = 64
    """Open connections per listener; more are closed at once (docs/contracts.md)."""
    shutdown_grace_seconds: float = 5.0
    """On SIGTERM/SIGINT, how long requests in flight may take to finish."""
    tls: TLSConfig | None = None
    health_listen: str | None = None
    """A second, plain-HTTP listener serving only /healthz, /readyz and /metrics."""

    @property
    def host_port(self) -> tuple[str, int]:
        return host_port(self.listen, "listen")

    @property
    def body_limit(self) -> int:
        """The largest request body read: ``max_body_bytes`` if set. Else, with a
        kubeconfig the scheduler is expected to send node names only (the Ansible
        role and docs/extender.md pair them: the extender sizes nodes from its watch);
        without one it must send full Nodes (the only way to learn their sizes)."""
        if self.max_body_bytes is not None:
            return self.max_body_bytes
        if self.kubeconfig:
            return NAMES_BODY_BYTES
        return NAMES_BODY_BYTES + NODE_BODY_BYTES * self.max_nodes

    @property
    def body_limit_why(self) -> str:
        """What ``body_limit`` is sized for, and what to change, for the 413 message."""
        if self.max_body_bytes is not None:
            return "max_body_bytes"
        if self.kubeconfig:
            return (
                "sized for node names only, as with a kubeconfig; if the scheduler sends "
                "full Nodes (nodeCacheCapable: false), set max_body_bytes"
            )
        return f"sized for full Nodes from up to max_nodes {self.max_nodes} nodes; raise max_nodes"

    @property
    def events_enabled(self) -> bool:
        return self.events.enabled if self.events.enabled is not None else bool(self.kubeconfig)

    def estimator_args(self) -> EstimatorArgs:
        return EstimatorArgs(self.estimator.cpu_factor, self.estimator.memory_factor)

    @functools.cached_property
    def scoring(self) -> PolicyChoice:
        """``policy``, ``policy_args`` and ``estimator.spread_weight`` parsed, on first use
        (config validation) and kept: the composition root hands this very policy to the
        service. PolicyError (a ConfigError) names a bad argument."""
        return parse_policy(
            self.policy,
            self.policy_args,
            spread_weight=self.estimator.spread_weight,
            peak_sigmas=self.estimator.peak_sigmas,
        )

    def tlp_args(self) -> TLPArgs:
        return self.scoring.tlp


# A namespace's name is an RFC 1123 label (k8s.io/apimachinery validation IsDNS1123Label);
# a name that cannot exist would silently match no pod.
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _validate_source_access(src: SourceConfig) -> None:
    """Credentials only from files, caps that let a reading through."""
    if src.url and has_credentials(src.url):
        # Refused rather than moved to a header: the config file and the command line
        # (/proc/PID/cmdline) are readable by other users, so the password would already
        # be out. The message shows the URL without it.
        raise ConfigError(
            f"source.url {redact_url(src.url)} carries credentials (user:password@); put the "
            "user name in source.basic_auth.username and the password in a file named by "
            "source.basic_auth.password_file (or a token in source.bearer_token_file)"
        )
    if src.bearer_token_file is not None and src.basic_auth is not None:
        raise ConfigError("source.bearer_token_file and source.basic_auth: set one, not both")
    if (src.bearer_token_file is not None or src.basic_auth is not None) and src.kind not in (
        "load-watcher",
        "prometheus",
    ):
        raise ConfigError(
            f"source.bearer_token_file and source.basic_auth apply to load-watcher and "
            f"prometheus only, not source.kind {src.kind} (metrics-server authenticates with "
            "the kubeconfig)"
        )
    if src.bearer_token_file is not None and not src.bearer_token_file:
        raise ConfigError("source.bearer_token_file: empty path")
    if src.basic_auth is not None:
        if not src.basic_auth.password_file:
            raise ConfigError("source.basic_auth.password_file: empty path")
        # RFC 7617: the user-id cannot contain a colon (it separates it from the password)
        if ":" in src.basic_auth.username or not src.basic_auth.username.isprintable():
            raise ConfigError("source.basic_auth.username: must not hold ':' or control characters")
    if src.max_response_bytes is not None and src.max_response_bytes < 1024:
        raise ConfigError("source.max_response_bytes must be >= 1024")
    if src.max_nodes < 1:
        raise ConfigError("source.max_nodes must be >= 1")


def _validate(settings: Settings) -> Settings:
    host, port = settings.host_port
    settings.scoring  # noqa: B018 (the one parse of the policy; PolicyError is a ConfigError)
    src = settings.source
    if src.kind in ("load-watcher", "prometheus") and not src.url:
        raise ConfigError(f"source.url is required for source.kind {src.kind}")
    if src.kind == "file" and not src.file:
        raise ConfigError("source.file is required for source.kind file")
    if src.kind == "metrics-server" and not settings.kubeconfig:
        raise ConfigError("source.kind metrics-server needs a kubeconfig (--kubeconfig)")
    _validate_source_access(src)
    if src.refresh_seconds <= 0:
        raise ConfigError("source.refresh_seconds must be > 0")
    if src.stale_after_seconds < 0:
        raise ConfigError("source.stale_after_seconds must be >= 0 (0 = never stale)")
    if src.max_stale_seconds is not None and src.max_stale_seconds < src.stale_after_seconds:
        raise ConfigError(
            f"source.max_stale_seconds ({src.max_stale_seconds:g}) must be >= "
            f"source.stale_after_seconds ({src.stale_after_seconds:g})"
        )
    for key, value in settings.filter.thresholds.items():
        if key not in ("cpu", "memory"):
            raise ConfigError(f"filter.thresholds: unknown resource {key!r}; use cpu, memory")
        if not 0 < value <= 100:
            raise ConfigError(f"filter.thresholds.{key}: must be in (0, 100], got {value}")
    for namespace in settings.ignore_namespaces:
        if not _NAMESPACE.fullmatch(namespace):
            raise ConfigError(
                f"ignore_namespaces: {namespace!r} is not a namespace name "
                "(lower-case letters, digits and '-', at most 63, RFC 1123 label)"
            )
    if settings.events.per_minute < 1:
        raise ConfigError("events.per_minute must be >= 1")
    est = settings.estimator
    if est.pod_usage_seconds <= 0:
        raise ConfigError("estimator.pod_usage_seconds must be > 0")
    if not 0 < est.learned_percentile <= 100:
        raise ConfigError("estimator.learned_percentile must be in (0, 100]")
    if est.learned_window_seconds <= 0:
        raise ConfigError("estimator.learned_window_seconds must be > 0")
    if est.learned_max_workloads < 1:
        raise ConfigError("estimator.learned_max_workloads must be >= 1")
    if not 0 <= est.spread_weight <= 1:
        raise ConfigError("estimator.spread_weight must be in [0, 1]")
    if not 0 <= est.peak_sigmas <= MAX_PEAK_SIGMAS:
        raise ConfigError(f"estimator.peak_sigmas must be in [0, {MAX_PEAK_SIGMAS:g}]")
    if est.mode not in ESTIMATOR_MODES:
        modes = ", ".join(ESTIMATOR_MODES)
        raise ConfigError(f"estimator.mode must be one of {modes}, got {est.mode!r}")
    if est.decision_log is not None and not est.decision_log.strip():
        raise ConfigError("estimator.decision_log must be a file path (or unset)")
    if settings.max_body_bytes is not None and settings.max_body_bytes < 1024:
        raise ConfigError("max_body_bytes must be >= 1024")
    if settings.max_nodes < 1:
        raise ConfigError("max_nodes must be >= 1")
    if settings.max_connections < 1:
        raise ConfigError("max_connections must be >= 1")
    if settings.shutdown_grace_seconds < 0:
        raise ConfigError("shutdown_grace_seconds must be >= 0")
    if settings.tls is not None and settings.tls.client_names is not None:
        names = settings.tls.client_names
        if not names or not all(name.strip() for name in names):
            raise ConfigError(
                "tls.client_names: list the names the scheduler's certificate carries "
                "(its CN or a DNS/URI SAN), or leave it unset; got an empty list or name"
            )
    if settings.health_listen is not None:
        if host_port(settings.health_listen, "health_listen") == (host, port):
            raise ConfigError("health_listen must differ from listen")
    return settings


def load_settings(
    path: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> Settings:
    """Read ``path`` (if any), apply ``overrides`` (dotted keys, from flags), validate."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
        try:
            loaded = msgspec.yaml.decode(raw) if raw.strip() else {}
        except msgspec.DecodeError as exc:
            raise ConfigError(f"config {path} is not YAML: {exc}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config {path}: expected a mapping at the top level")
        data = loaded
    for dotted, value in (overrides or {}).items():
        target = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            target = target.setdefault(key, {})
        target[leaf] = value
    try:
        settings = msgspec.convert(data, type=Settings)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"config error: {exc}") from None
    return _validate(settings)
