"""loadwise extender: a kube-scheduler HTTP extender that scores nodes by real load.

Modules, by what they hold:

- ``wire``       the extender v1 JSON the kube-scheduler sends and expects
- ``quantity``   Kubernetes resource quantities ("250m", "1Gi", "1e3")
- ``model``      load snapshots and per-node state the policies score
- ``estimate``   what a pod will use before the metrics can show it
- ``policies``   the scoring policies (pure functions, Trimaran-compatible)
- ``decide``     filter and prioritize over a list of nodes
- ``ledger``     pods placed since the last load window (herding protection)
- ``sources``    where load comes from: load-watcher, metrics-server, Prometheus, a file
- ``reflector``  the one Kubernetes list+watch loop (also used by the TUI)
- ``cluster``    the extender's own watch of nodes and pods, on two reflectors
- ``kubeobjects`` Node and Pod documents for tests, benchmarks, the demo and the lab
- ``events``     the Event recorded on each pod, saying why
- ``server``     the aiohttp application, fail-open
- ``listener``   its listening sockets: a cap on connections, mutual TLS
- ``sdnotify``   systemd's notifications: READY=1, the watchdog's keep-alives
- ``exceptions`` every error loadwise raises, in one tree
- ``config``/``cli``  settings and the ``loadwise-extender`` command
- ``wiring``     the composition root: ``build_extender(settings)``

The names below are the public API. Only the exceptions are imported eagerly: the
rest load on first use, so ``import loadwise.extender.quantity`` (the TUI does) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .exceptions import (
    ConfigError,
    KubeError,
    LoadwiseError,
    PolicyError,
    QuantityError,
    SourceError,
    WireError,
)

if TYPE_CHECKING:
    from .config import Settings, load_settings
    from .policies import POLICY_NAMES, Policy, make_policy
    from .reflector import Backoff, ListWatchClient, Reflector
    from .service import Extender
    from .wiring import build_extender

# The one place the release number is written for Python: pyproject.toml reads it from here
# ([tool.hatch.version]). galaxy.yml must hold it literally (ansible-galaxy reads no other
# file); tests/ansible/test_release.py keeps the two, and CHANGELOG.md, equal.
__version__ = "0.2.0"

_LAZY = {
    "Backoff": "reflector",
    "Extender": "service",
    "ListWatchClient": "reflector",
    "POLICY_NAMES": "policies",
    "Policy": "policies",
    "Reflector": "reflector",
    "Settings": "config",
    "build_extender": "wiring",
    "load_settings": "config",
    "make_policy": "policies",
}

__all__ = [
    "POLICY_NAMES",
    "Backoff",
    "ConfigError",
    "Extender",
    "KubeError",
    "ListWatchClient",
    "LoadwiseError",
    "Policy",
    "PolicyError",
    "QuantityError",
    "Reflector",
    "Settings",
    "SourceError",
    "WireError",
    "__version__",
    "build_extender",
    "load_settings",
    "make_policy",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'loadwise.extender' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
