"""Every error the extender raises on purpose, in one tree.

::

    LoadwiseError                  anything below; catch this to catch them all
    ├── ConfigError                the settings (file or flags) are not usable   exit 2
    │   └── PolicyError            an unknown policy or bad policy_args           exit 2
    ├── QuantityError              a string that is not a Kubernetes quantity
    ├── KubeError                  the Kubernetes API failed or refused (.status) exit 3
    ├── SourceError                the load source could not be read or made no sense
    └── WireError                  a request the extender cannot answer          HTTP 4xx
                                   (.status, .reason: the metrics label)

The exit codes are what ``loadwise-extender`` returns when the error stops it from
starting (see ``cli.EXIT_CODES`` and docs/contracts.md); at run time the same errors
are retried (KubeError, SourceError) or answered (WireError) and never stop it.

``ConfigError``, ``QuantityError`` and ``WireError`` are also ``ValueError`` (bad
input), so code that catches ``ValueError`` around parsing keeps working.
"""

from __future__ import annotations

from .redact import redact

__all__ = [
    "ConfigError",
    "KubeError",
    "LoadwiseError",
    "PolicyError",
    "QuantityError",
    "SourceError",
    "WireError",
]


class LoadwiseError(Exception):
    """Base of every error loadwise raises on purpose; the message is for the user."""


class ConfigError(LoadwiseError, ValueError):
    """The configuration (YAML file or flags) is not usable; the message names the key.

    Fix the key and start again: the extender does not start with a bad setting.
    """


class PolicyError(ConfigError):
    """The policy named in ``policy`` is unknown, or ``policy_args`` do not fit it."""


class QuantityError(LoadwiseError, ValueError):
    """A string that is not a Kubernetes resource quantity (``250m``, ``1Gi``)."""


class KubeError(LoadwiseError):
    """The Kubernetes API could not be reached, refused the request or answered an
    error (``status`` holds its HTTP status, 0 when there was no answer), or the
    kubeconfig could not be loaded.

    At start: check the kubeconfig and that the API server is reachable. At run time
    the node/pod watch retries with backoff and readiness reports the error.
    """

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class SourceError(LoadwiseError):
    """The load source (load-watcher, metrics-server, Prometheus, a file) could not be
    read or answered something unusable. The last good reading is kept until it is
    stale; readiness says why.

    The message goes to /readyz, the log and systemd's status line, so it is stored
    with every URL's credentials and query values masked (``redact``); ``secrets``
    are masked too (a token or password the raiser knows)."""

    def __init__(self, message: str, *, secrets: tuple[str, ...] = ()) -> None:
        super().__init__(redact(message, secrets))


class WireError(LoadwiseError, ValueError):
    """A request the extender cannot answer: a body that is not a valid ExtenderArgs
    document (not JSON, not UTF-8, nested too deep, a wrong type, an unusable
    quantity in the Pod), too large or too slow to arrive. Answered with HTTP
    ``status`` (400 unless said otherwise) and ``{"Error": message}``; ``reason`` is a
    short fixed word for the ``loadwise_extender_client_errors_total`` label and the
    rate-limited log line. kube-scheduler never reads the body of a non-200 answer
    (k8s.io/kubernetes pkg/scheduler/extender.go ``send``), so the log line is where
    an operator sees the message.
    """

    def __init__(self, message: str, *, reason: str = "invalid", status: int = 400) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status
