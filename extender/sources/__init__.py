"""Where node load comes from. Each source turns its own wire format into a
:class:`~extender.model.LoadSnapshot`; :class:`Refresher` polls one in the
background so that the scheduling path never waits on I/O."""

from __future__ import annotations

from .base import LoadSource, SourceError
from .file import LoadFileSource
from .metrics_server import MetricsServerSource, parse_node_metrics
from .prometheus import PrometheusSource, Vector, parse_vector, parse_vectors
from .refresh import Refresher
from .watcher import LoadWatcherSource, parse_watcher

__all__ = [
    "LoadFileSource",
    "LoadSource",
    "LoadWatcherSource",
    "MetricsServerSource",
    "PrometheusSource",
    "Refresher",
    "SourceError",
    "Vector",
    "parse_node_metrics",
    "parse_vector",
    "parse_vectors",
    "parse_watcher",
]
