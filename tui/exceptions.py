"""Every error the TUI raises on purpose, as one tree.

    LoadwiseTuiError               anything below; `loadwise-tui` prints it and exits non-zero
    ├── KubeconfigError            the kubeconfig cannot be read or names no usable context
    ├── RecordedClusterError       `--demo DIR` is not a readable recorded-cluster directory
    └── ApiError                   a request to the API server failed (also an
                                   `extender.kubeapi.KubeError`, so the shared
                                   `extender.reflector.Reflector` retries it)

The first two stop `loadwise-tui` before the dashboard opens: `loadwise.tui.cli` prints the message
and returns `exit_code` (2, like a usage error: the fix is in the command line or the
kubeconfig). `ApiError` normally never leaves the Kubernetes source: it becomes an
`ApiUnreachable` change (a red banner, and a retry with backoff) or, from metrics.k8s.io,
a `MetricsUnavailable` notice.
"""

from __future__ import annotations

from loadwise.extender.kubeapi import KubeError

__all__ = ["ApiError", "KubeconfigError", "LoadwiseTuiError", "RecordedClusterError"]


class LoadwiseTuiError(Exception):
    """The TUI cannot do what was asked; the message says why in the user's terms."""

    exit_code = 1
    """What `loadwise-tui` exits with when this error ends it."""


class KubeconfigError(LoadwiseTuiError):
    """The kubeconfig file is missing or malformed, or the requested context is not in it.

    Nothing was sent to any cluster; fix `--kubeconfig`/`--context` or `$KUBECONFIG`.
    """

    exit_code = 2


class RecordedClusterError(LoadwiseTuiError):
    """The `--demo` directory does not exist or holds a file that is not valid JSON.

    The layout a recorded cluster needs is described in `tui.sources.recorded`.
    """

    exit_code = 2


class ApiError(LoadwiseTuiError, KubeError):
    """The API server answered with HTTP `status`; `reason` is its Status message.

    Status 0 means no answer came at all (connection refused, timeout, a dropped watch);
    `reason` is then the transport's message.

    401 means the kubeconfig's credentials were rejected (renew them), 403 that they lack
    RBAC permission to list/watch what the TUI shows, 404/503 from metrics.k8s.io that no
    metrics-server serves it. The dashboard shows each and keeps retrying.
    """

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status} {reason}" if status else reason, status)
        self.reason = reason
