"""Where cluster state comes from: one protocol, three sources, one vocabulary of changes.

A `ClusterSource` is started with a sink and calls it with `changes.Change` values, from
any thread, until stopped. The app only ever sees these values; whether they came from
list+watch against a live API server (`tui.sources.kubernetes.KubernetesSource`), from
recorded JSON (`tui.sources.recorded.RecordedSource`) or from a generated cluster
(`tui.sources.synthetic.synthetic_cluster`, replayed by the recorded source) is
invisible above this line. That is what lets the tests drive the real screens and the
lab run the same code against a real cluster.

This module imports no source, so importing the protocol never loads the `kubernetes`
client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .changes import Change

__all__ = ["ClusterSource", "Sink"]

Sink = Callable[[Change], None]
"""Receives changes; sources may call it from any thread (the app's sink is a deque append)."""


class ClusterSource(Protocol):
    """Where cluster state comes from. Implementations must tolerate `stop()` at any time."""

    @property
    def description(self) -> str:
        """Shown in the header: the kubeconfig context, or "demo", or a file name."""
        ...

    def start(self, sink: Sink) -> None:
        """Begin delivering changes to `sink` (which is thread-safe) and return promptly."""
        ...

    def stop(self) -> None:
        """Stop delivering changes and release connections and threads."""
        ...
