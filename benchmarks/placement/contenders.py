"""The schedulers the placement benchmark compares, each run against the lab in turn.

Every contender is a real kube-scheduler process with ONE profile whose ``schedulerName`` is
the contender's name, so a scenario's pods pick the contender by ``spec.schedulerName`` and a
pod meant for another contender is never bound by this one:

- ``stock``: the lab's kube-scheduler (k8s.io/kubernetes v1.36.4, lab/build) with its default
  plugins;
- ``loadwise-<policy>``: the same binary plus the real loadwise-extender process on loopback
  HTTP, configured as docs/contracts.md describes, with the ``extenders:`` entry the Ansible
  role writes (tests/lab/e2e.py builds the same one), reading load where the role's defaults
  point it: metrics.k8s.io (``loadwise_extender_source: metrics-server``); in a scenario whose
  load source is Prometheus, the lab's load-watcher over it, the source that gives the
  standard deviation the variance-aware policies read;
- ``loadwise-least-used-lw``: least-used reading the lab's load-watcher in every scenario, as
  Trimaran does: load-watcher collects once a minute, metrics-server scrapes every 15 s;
- ``trimaran-tlp`` / ``trimaran-lvrb``: kube-scheduler built from sigs.k8s.io/scheduler-plugins
  v0.34.7 (``lab/build trimaran-scheduler``) with TargetLoadPacking or
  LoadVariationRiskBalancing at their default arguments, reading the same load-watcher, at
  plugin weight 1, as the plugins' READMEs configure them;
- ``trimaran-tlp-w<N>`` / ``trimaran-lvrb-w<N>``: the same at score weight N. kube-scheduler
  multiplies an extender's 0..10 priority by its weight and by MaxNodeScore /
  MaxExtenderPriority = 10 (pkg/scheduler/schedule_one.go), so loadwise at the role's weight
  10 moves a node by up to 1,000 points, where a plugin's 0..100 at weight 1 moves it by 100
  beside the default plugins' own scores. At ``FAIR_TRIMARAN_WEIGHT`` (= the extender's
  weight) the two have the same say; w3 sits between, for the sweep;
- ``null-extender``: the lab's kube-scheduler with the same ``extenders:`` entry as loadwise
  (verbs, nodeCacheCapable, weight, timeout), pointing at a server on loopback that answers
  at once: filter keeps every candidate, prioritize scores every node 0. What a backlog costs
  with the extender protocol alone, the floor any extender's figures stand on;
- ``loadwise-prioritize-only`` / ``null-prioritize-only``: loadwise's least-used and the null
  extender with no ``filterVerb`` (loadwise with ``filter.enabled: false``: nodes over their
  thresholds are scored lowest instead of rejected, docs/contracts.md "Prioritize-only"), one
  HTTP call per pod instead of two;
- ``stock-nobatch``: stock with ``--feature-gates=OpportunisticBatching=false``. The gate
  is BETA and on by default in v1.36 (the lab's kube-scheduler ``--help``:
  ``OpportunisticBatching=true|false (BETA - default=true)``). KEP-5598 "Opportunistic
  batching" (beta since v1.35): a mechanism "to improve performance of scheduling many
  compatible pods at once". Stock with and without it shows how much of stock's backlog
  speed batching gives;
- ``stock+descheduler``: stock with the upstream descheduler (lab/build, v0.36.0) running
  beside it, with the policy the Ansible role renders (LowNodeUtilization on actual usage
  from metrics-server), in steady scenarios only: a descheduler needs pods that live long
  enough to be moved (benchmarks/placement/steady.py starts and stops it).

Each scheduler's client QPS and burst are raised (``clientConnection.qps``/``burst``; the
defaults, 50 and 100 in KubeSchedulerConfiguration v1, would cap every contender's throughput
at the same API rate limit and hide the difference). Only one contender runs at a time: the
lab has one kube-scheduler port (lab/components.py ``PORTS``), and ``start`` stops whatever
kube-scheduler runs before starting its own.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec
import yaml

from benchmarks.placement.runner import Launched
from lab import Lab
from lab.components import build_binaries
from lab.processes import Child, LabError, NotReady, ProcessExited, http_probe, start

__all__ = [
    "CONTENDERS",
    "EXTENDER_PORT",
    "FAIR_TRIMARAN_WEIGHT",
    "SCHEDULER_BURST",
    "SCHEDULER_QPS",
    "Contender",
    "ContenderError",
    "available",
    "extender_settings",
    "null_filter",
    "null_prioritize",
    "scheduler_config",
]

REPO = Path(__file__).resolve().parents[2]
SCHEDULER_QPS = 500
SCHEDULER_BURST = 1000
EXTENDER_HOST = "127.0.0.1"
# Not tests/lab/e2e.py's 18888, so a benchmark never talks to an extender a test left behind.
EXTENDER_PORT = 18890
# The extender's weight in the scheduler config: what the Ansible role writes by default.
_ROLE_DEFAULTS = REPO / "roles/loadwise_scheduler_config/defaults/main.yml"
TRIMARAN_BINARY = "trimaran-scheduler"
# A Trimaran plugin's weight at which its 0..100 score moves a node as far as the extender's
# 0..10 priority at the role's weight does (x10, see the module's docstring); a test keeps it
# equal to extender_weight().
FAIR_TRIMARAN_WEIGHT = 10
# The first load document can take a minute: load-watcher collects once a minute (docs/lab.md).
EXTENDER_READY_SECONDS = 150.0

Kind = Literal["stock", "loadwise", "trimaran", "null"]


class ContenderError(LabError):
    """A contender cannot be built or started; the message says which and why."""


def extender_weight() -> int:
    """The role's default ``loadwise_scheduler_config_weight``."""
    return int(yaml.safe_load(_ROLE_DEFAULTS.read_text())["loadwise_scheduler_config_weight"])


def _trimaran_profile(plugin: str, load_watcher_url: str, weight: int = 1) -> dict[str, Any]:
    """A profile enabling one Trimaran score plugin at ``weight`` with only ``watcherAddress``
    set, so every other argument is scheduler-plugins' default (apis/config/v1/defaults.go:
    TargetLoadPacking targetUtilization 40, defaultRequests 1 CPU, defaultRequestsMultiplier
    1.5; LoadVariationRiskBalancing safeVarianceMargin 1, safeVarianceSensitivity 1)."""
    score: dict[str, Any] = {"enabled": [{"name": plugin, "weight": weight}]}
    if plugin == "TargetLoadPacking":
        # The plugin's README (pkg/trimaran/targetloadpacking) disables the request-based
        # spreading scores, which pull against packing: NodeResourcesBalancedAllocation and
        # NodeResourcesLeastAllocated, whose v1 successor is NodeResourcesFit's score
        # (LeastAllocated strategy). NodeResourcesFit's filter stays on. The
        # LoadVariationRiskBalancing README only enables its plugin.
        score["disabled"] = [
            {"name": "NodeResourcesBalancedAllocation"},
            {"name": "NodeResourcesFit"},
        ]
    return {
        "plugins": {"score": score},
        "pluginConfig": [{"name": plugin, "args": {"watcherAddress": load_watcher_url}}],
    }


@dataclass(frozen=True)
class Contender:
    """One scheduler setup. ``policy``: the loadwise policy (extender ``policy:``) or the
    Trimaran plugin name; None for stock."""

    name: str
    scheduler_name: str
    kind: Kind = "stock"
    policy: str | None = None
    scheduler_args: tuple[str, ...] = ()
    """More kube-scheduler flags (``stock-nobatch``: a feature gate)."""
    filter_verb: bool = True
    """An extender contender's entry names the filter verb; False: prioritize-only."""
    plugin_weight: int = 1
    """A Trimaran contender's score weight for its plugin."""
    descheduler: bool = False
    """The lab's descheduler runs beside the scheduler (steady scenarios only)."""
    watcher_only: bool = False
    """A loadwise contender reads load-watcher whatever the scenario's source."""

    def fits(self, steady: bool) -> bool:
        """Whether this contender runs in a scenario (steady or not): the descheduler
        contender has nothing to move where no pod outlives the placement."""
        return steady or not self.descheduler

    @property
    def binary(self) -> str:
        """The lab/build name of the scheduler binary."""
        return TRIMARAN_BINARY if self.kind == "trimaran" else "kube-scheduler"

    @contextlib.contextmanager
    def start(
        self, lab: Lab, workdir: Path, *, verbosity: int = 0, source: str = "metrics-server"
    ) -> Iterator[Launched]:
        """Start this contender's scheduler (and extender) against ``lab``; stop both after.
        Yields when the scheduler process was launched (``time.monotonic()``, after the
        extender is ready), the start of a backlog run's drain, and the processes that
        decide (the scheduler's and the extender's), whose CPU the runner reads.

        Configs go to ``workdir``, and so do the logs when it stops:
        ``<name>.scheduler.log`` (this run's part of the lab's kube-scheduler log) and
        ``<name>.extender.log``. ``verbosity`` is kube-scheduler's ``-v`` (Trimaran's plugins
        log the metrics each score used at 6). ``source``: where the scenario's load is read
        (its ``steady.source``), which a loadwise contender follows (``extender_settings``).
        """
        workdir.mkdir(parents=True, exist_ok=True)
        binary = _binary(lab, self.binary)
        lab.stop("kube-scheduler")
        sched_log = lab.logs / "kube-scheduler.log"
        offset = sched_log.stat().st_size if sched_log.exists() else 0
        extender: Child | None = None
        try:
            if self.kind == "loadwise":
                extender = _start_extender(self, lab, workdir, source)
            elif self.kind == "null":
                extender = _start_null_extender(self, workdir)
            config = workdir / f"{self.name}.scheduler.yaml"
            cfg = scheduler_config(self, lab.load_watcher_url, lab.scheduler_kubeconfig)
            config.write_text(yaml.safe_dump(cfg, sort_keys=False))
            args = [*([f"-v={verbosity}"] if verbosity else []), *self.scheduler_args]
            launched = time.monotonic()
            try:
                pid = lab.start_scheduler(config, extra_args=args, binary=binary)
            except LabError as exc:
                raise ContenderError(f"{self.name}: kube-scheduler did not start: {exc}") from exc
            yield Launched(launched, (pid,) if extender is None else (pid, extender.pid))
        finally:
            lab.stop("kube-scheduler")
            if extender is not None:
                if self.kind == "loadwise":
                    _save_metrics(workdir / f"{self.name}.extender.metrics")
                extender.stop(10)
            if sched_log.exists():
                with sched_log.open("rb") as src:
                    src.seek(offset)
                    (workdir / f"{self.name}.scheduler.log").write_bytes(src.read())


def scheduler_config(
    contender: Contender, load_watcher_url: str, kubeconfig: str = ""
) -> dict[str, Any]:
    """The KubeSchedulerConfiguration (v1) for ``contender``. An empty ``kubeconfig`` is
    filled in by Lab.start_scheduler."""
    profile: dict[str, Any] = {"schedulerName": contender.scheduler_name}
    if contender.kind == "trimaran":
        if contender.policy is None:
            raise ContenderError(f"{contender.name}: a Trimaran contender needs its plugin name")
        profile.update(
            _trimaran_profile(contender.policy, load_watcher_url, contender.plugin_weight)
        )
    cfg: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {
            "kubeconfig": kubeconfig,
            "qps": SCHEDULER_QPS,
            "burst": SCHEDULER_BURST,
        },
        "leaderElection": {"leaderElect": False},
        "profiles": [profile],
    }
    if contender.kind in ("loadwise", "null"):
        # the null extender stands where loadwise's does, with the same entry
        verbs = {"filterVerb": "filter"} if contender.filter_verb else {}
        cfg["extenders"] = [
            {
                "urlPrefix": f"http://{EXTENDER_HOST}:{EXTENDER_PORT}/scheduler",
                **verbs,
                "prioritizeVerb": "prioritize",
                "weight": extender_weight(),
                "nodeCacheCapable": True,
                "httpTimeout": "2s",
                "ignorable": True,
            }
        ]
    return cfg


def extender_settings(
    contender: Contender, load_watcher_url: str, kubeconfig: str, source: str = "metrics-server"
) -> dict[str, Any]:
    """The extender's config file (docs/contracts.md) for a loadwise contender: its policy at
    default arguments, events at their defaults (on with a kubeconfig, 60 a minute), as an
    operator would run it; load read at the default refresh (15 s, metrics-server's
    resolution as the role installs it; Trimaran's collector reads every 30 s,
    pkg/trimaran/collector.go ``metricsUpdateIntervalSeconds``, its own default) from
    metrics.k8s.io, the role's default, or from the lab's load-watcher where the scenario's
    ``source`` is Prometheus (load-watcher then reports each node's mean and standard
    deviation) or the contender reads it always (``watcher_only``)."""
    if contender.kind != "loadwise" or contender.policy is None:
        raise ContenderError(f"{contender.name} has no extender")
    if contender.watcher_only or source == "prometheus":
        reads: dict[str, Any] = {"kind": "load-watcher", "url": load_watcher_url}
    else:
        reads = {"kind": "metrics-server"}
    return {
        "listen": f"{EXTENDER_HOST}:{EXTENDER_PORT}",
        "kubeconfig": kubeconfig,
        "policy": contender.policy,
        "source": reads,
        "filter": {"enabled": contender.filter_verb},
    }


def _start_extender(contender: Contender, lab: Lab, workdir: Path, source: str) -> Child:
    """``python -m loadwise.extender`` from this checkout (not whatever ``loadwise-extender`` the
    virtualenv's install points at), waited for until ``/readyz`` answers 200."""
    config = workdir / f"{contender.name}.extender.yaml"
    settings = extender_settings(contender, lab.load_watcher_url, lab.kubeconfig, source)
    # each decision's predicted node use: benchmarks/placement/prediction.py reads it
    settings["estimator"] = {"decision_log": str(workdir / f"{contender.name}.decisions.jsonl")}
    config.write_text(yaml.safe_dump(settings))
    argv = [sys.executable, "-m", "loadwise.extender", "--config", str(config)]
    log = workdir / f"{contender.name}.extender.log"
    return _ready(contender, start(f"{contender.name}: the extender", argv, log=log, cwd=REPO))


def _save_metrics(path: Path) -> None:
    """The extender's /metrics as it stops: the run's requests, their latencies and the
    connections kube-scheduler opened for them (keep-alive: a few for thousands)."""
    try:
        with urllib.request.urlopen(
            f"http://{EXTENDER_HOST}:{EXTENDER_PORT}/metrics", timeout=5
        ) as r:
            path.write_bytes(r.read())
    except OSError as exc:  # evidence, not a measure: the run stands without it
        path.write_text(f"# not read: {exc}\n")


def _ready(contender: Contender, child: Child) -> Child:
    """``child``, once the extender on EXTENDER_PORT answers ``/readyz`` with 200; else it is
    stopped and ContenderError says why (its exit and log, or the last answer)."""
    url = f"http://{EXTENDER_HOST}:{EXTENDER_PORT}/readyz"
    try:
        child.wait_ready(http_probe(url), EXTENDER_READY_SECONDS, interval=1)
    except ProcessExited as exc:
        raise ContenderError(str(exc)) from None
    except NotReady as exc:
        child.stop(10)
        raise ContenderError(f"{exc}; log: {child.log}") from None
    return child


# --------------------------------------------------------------------------- null extender


class _Candidates(msgspec.Struct):
    """The part of ExtenderArgs the null extender reads: the candidates, kept as their JSON
    (``null`` when absent; msgspec takes no ``Raw | None``). The Pod is skipped unread."""

    Nodes: msgspec.Raw = msgspec.Raw(b"null")
    NodeNames: msgspec.Raw = msgspec.Raw(b"null")


_candidates = msgspec.json.Decoder(_Candidates)
_names = msgspec.json.Decoder(list[str] | None)
_node_list = msgspec.json.Decoder(dict[str, Any])


def null_filter(body: bytes) -> bytes:
    """ExtenderFilterResult keeping every candidate, as they came: the names
    (nodeCacheCapable) or the Node list, echoed without being decoded."""
    given = _candidates.decode(body)
    if bytes(given.Nodes) != b"null":
        return b'{"Nodes":' + bytes(given.Nodes) + b',"FailedNodes":{},"Error":""}'
    return b'{"NodeNames":' + bytes(given.NodeNames) + b',"FailedNodes":{},"Error":""}'


def null_prioritize(body: bytes) -> bytes:
    """HostPriorityList giving every candidate score 0, which adds nothing to any node's
    total (kube-scheduler multiplies it by the extender's weight)."""
    given = _candidates.decode(body)
    if bytes(given.Nodes) != b"null":
        items = _node_list.decode(bytes(given.Nodes)).get("items") or []
        names = [item["metadata"]["name"] for item in items]
    else:
        names = _names.decode(bytes(given.NodeNames)) or []
    return msgspec.json.encode([{"Host": name, "Score": 0} for name in names])


def null_app() -> Any:
    """The null extender's aiohttp app (aiohttp: the stack the real extender serves on, so
    the two differ by their work, not their HTTP server): the two verbs and ``/readyz``."""
    from aiohttp import web

    def verb(answer: Any) -> Any:
        async def handle(request: web.Request) -> web.Response:
            return web.Response(body=answer(await request.read()), content_type="application/json")

        return handle

    async def readyz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    # kube-scheduler's own limit on an extender answer is its concern; a request of full
    # Nodes (nodeCacheCapable false) can be megabytes
    app = web.Application(client_max_size=256 * 1024 * 1024)
    app.router.add_post("/scheduler/filter", verb(null_filter))
    app.router.add_post("/scheduler/prioritize", verb(null_prioritize))
    app.router.add_get("/readyz", readyz)
    return app


def _start_null_extender(contender: Contender, workdir: Path) -> Child:
    """This module as ``--null-extender HOST:PORT``, a process of its own (as the real
    extender is), waited for until ``/readyz`` answers 200."""
    argv = [
        sys.executable,
        "-m",
        "benchmarks.placement.contenders",
        "--null-extender",
        f"{EXTENDER_HOST}:{EXTENDER_PORT}",
    ]
    log = workdir / f"{contender.name}.extender.log"
    return _ready(contender, start(f"{contender.name}: the null extender", argv, log=log, cwd=REPO))


def _build(name: str) -> str:
    """The binary's path, built first when missing (lab/prepare.py: its progress on stderr,
    the log's tail on a failure), or ContenderError naming what failed."""
    if shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists():
        raise ContenderError(f"cannot build {name}: Go is not installed (docs/lab.md)")
    try:
        return build_binaries([name])[name]
    except (LabError, subprocess.CalledProcessError, KeyError) as exc:
        raise ContenderError(f"lab/build {name} failed: {exc}") from exc


def _binary(lab: Lab, name: str) -> str:
    if name == "kube-scheduler":
        return lab.binaries([name])[name]
    return _build(name)


CONTENDERS: dict[str, Contender] = {
    c.name: c
    for c in (
        Contender("stock", "stock"),
        Contender("loadwise-least-used", "loadwise-least-used", "loadwise", "least-used"),
        Contender(
            "loadwise-least-used-lw",
            "loadwise-least-used-lw",
            "loadwise",
            "least-used",
            watcher_only=True,
        ),
        Contender("loadwise-tlp", "loadwise-tlp", "loadwise", "target-load-packing"),
        Contender("loadwise-lvrb", "loadwise-lvrb", "loadwise", "load-variation-risk-balancing"),
        Contender("trimaran-tlp", "trimaran-tlp", "trimaran", "TargetLoadPacking"),
        Contender("trimaran-lvrb", "trimaran-lvrb", "trimaran", "LoadVariationRiskBalancing"),
        *(
            Contender(f"{name}-w{w}", f"{name}-w{w}", "trimaran", plugin, plugin_weight=w)
            for name, plugin in (
                ("trimaran-tlp", "TargetLoadPacking"),
                ("trimaran-lvrb", "LoadVariationRiskBalancing"),
            )
            for w in (3, FAIR_TRIMARAN_WEIGHT)
        ),
        Contender("null-extender", "null-extender", "null"),
        Contender(
            "loadwise-prioritize-only",
            "loadwise-prioritize-only",
            "loadwise",
            "least-used",
            filter_verb=False,
        ),
        Contender("null-prioritize-only", "null-prioritize-only", "null", filter_verb=False),
        # A pod's schedulerName is a DNS subdomain: no "+".
        Contender("stock+descheduler", "stock-descheduler", descheduler=True),
        Contender(
            "stock-nobatch",
            "stock-nobatch",
            scheduler_args=("--feature-gates=OpportunisticBatching=false",),
        ),
    )
}


def available(lab: Lab) -> dict[str, Contender | str]:
    """Every contender, or the reason it cannot run here. Builds what is missing (the
    Trimaran scheduler takes ~15-25 min cold on 2 cores; cached after)."""
    out: dict[str, Contender | str] = {}
    reasons: dict[str, str] = {}
    for name, c in CONTENDERS.items():
        if c.binary not in reasons:
            try:
                _binary(lab, c.binary)
                reasons[c.binary] = ""
            except (ContenderError, LabError, subprocess.CalledProcessError, OSError) as exc:
                reasons[c.binary] = f"{c.binary}: {exc}"
        out[name] = reasons[c.binary] or c
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.placement.contenders --null-extender HOST:PORT``: serve the
    null extender until SIGTERM (``Contender.start`` stops it)."""
    p = argparse.ArgumentParser(description="the placement benchmark's null extender")
    p.add_argument("--null-extender", metavar="HOST:PORT", required=True)
    args = p.parse_args(argv)
    from aiohttp import web

    host, _, port = args.null_extender.rpartition(":")
    web.run_app(null_app(), host=host, port=int(port), access_log=None, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
