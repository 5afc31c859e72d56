"""Scenarios as data: benchmarks/scenarios/<name>.yaml, loaded and validated.

A scenario file says what the cluster is (nodes with capacity, background usage nobody
requests, and `hot: true` on the nodes a load-aware scheduler should avoid), what is placed
on it (workloads: replicas, requests, limits, and the *actual* usage each pod has, which the
lab's kwok nodes report through metrics-server), when (all at once or at a rate), and what
happens meanwhile (a node joining after N pods are bound). A `steady:` scenario is a stream
instead (docs/placement.md, "Steady state"): each workload's pods live for a while, are
deleted and replaced, for `duration_seconds`, while nodes' background memory may change.
The schema is the `_*` structs
below; every key is checked, and an unknown or mistyped key is refused with the file and
its path in the message (msgspec's `- at $.nodes[0].cpu`).

Example::

    name: hog
    title: a memory hog nobody requests
    nodes:
      - {name: hog-a, cpu: "4", memory: 8Gi, background: {cpu: 100m, memory: 256Mi}}
      - {name: hog-b, cpu: "4", memory: 8Gi, background: {cpu: 500m, memory: 6Gi}, hot: true}
    workloads:
      - name: web
        replicas: 30
        requests: {cpu: 100m, memory: 128Mi}
        limits: {cpu: 200m, memory: 256Mi}
        usage: {cpu: 100m, memory: 160Mi}
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec
import yaml

from benchmarks.placement.exceptions import ScenarioError
from loadwise.extender.exceptions import QuantityError
from loadwise.extender.quantity import parse_quantity

SCENARIOS_DIR = Path(__file__).resolve().parent.parent / "scenarios"

Quantity = str | int | float


class _Resources(msgspec.Struct, forbid_unknown_fields=True):
    cpu: Quantity
    memory: Quantity


class _Node(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    cpu: Quantity
    memory: Quantity
    background: _Resources | None = None
    hot: bool = False
    # `count: N` stands for N identical nodes named <name>-001 .. <name>-N.
    count: int = 1
    pods: int = 110


class _Lifetime(msgspec.Struct, forbid_unknown_fields=True):
    min: float
    max: float


class _Workload(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    replicas: int
    requests: _Resources
    usage: _Resources
    limits: _Resources | None = None
    # Pods created per second; omitted: all at once (as fast as the client creates them).
    rate: float | None = None
    # Steady scenarios only: each pod is deleted this long after it was bound (drawn
    # uniformly between the two), and its ReplicaSet replaces it.
    lifetime_seconds: _Lifetime | None = None


class _Change(msgspec.Struct, forbid_unknown_fields=True):
    """A node's background memory set to `memory` at `at_seconds` into a steady run. Memory
    only, and refused for CPU by the schema: the lab's node CPU counter is the background
    cores x the seconds since the node was created (lab/components.py metric_doc), so a
    change of background CPU rewrites the whole counter and one metrics-server window reads
    a rate that never was (lab/cluster.py Lab.set_background)."""

    at_seconds: float
    node: str
    memory: Quantity
    # The node counts as hot (the "pods on hot" measure) from this change on; omitted:
    # as it was.
    hot: bool | None = None


class _Steady(msgspec.Struct, forbid_unknown_fields=True):
    # How long the stream runs, from its first pod; the measures are over this span.
    duration_seconds: float
    # The stock+descheduler contender's --descheduling-interval (the role's is 5m, a run
    # would see one pass).
    descheduler_interval_seconds: float = 60
    changes: list[_Change] = []
    # Where load-watcher reads load (and so loadwise and Trimaran through it): metrics.k8s.io,
    # the latest values, or the lab's Prometheus, the average and the standard deviation of
    # each node's use over load-watcher's window (what variance-aware policies need).
    source: Literal["metrics-server", "prometheus"] = "metrics-server"


class _Event(msgspec.Struct, forbid_unknown_fields=True):
    after_pods: int
    join: _Node


class _Descheduler(msgspec.Struct, forbid_unknown_fields=True):
    # How long the descheduler keeps running once every pod is bound (its replacements
    # are then waited for until the scenario's timeout).
    seconds: float = 60
    # Its --descheduling-interval (the role's default is 5m; a benchmark cannot wait that).
    interval_seconds: float = 10


class _Goals(msgspec.Struct, forbid_unknown_fields=True):
    beat_stock: bool = False
    no_worse_than_trimaran: bool = False
    no_pods_on_hot: bool = False
    within_bound: float | None = None
    throughput_vs_stock: float | None = None
    p99_vs_stock: float | None = None


class _Scenario(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    title: str
    nodes: list[_Node]
    workloads: list[_Workload]
    description: str = ""
    events: list[_Event] = []
    # Run the lab's descheduler (the Ansible role's policy) while the scenario runs; its
    # pods are then created by one ReplicaSet per workload, so evicted pods are replaced.
    descheduler: _Descheduler | None = None
    # Create every pod before the contender's scheduler starts, so that pods/s measures
    # the scheduler draining a queue rather than the benchmark's pod creation.
    backlog: bool = False
    contenders: list[str] | None = None
    goals: _Goals = msgspec.field(default_factory=_Goals)
    timeout_seconds: float = 300
    steady: _Steady | None = None


@dataclass(frozen=True)
class Resources:
    """CPU in cores, memory in bytes."""

    cpu: float
    memory: float


@dataclass(frozen=True)
class Node:
    name: str
    capacity: Resources
    background: Resources
    hot: bool = False
    pods: int = 110


@dataclass(frozen=True)
class Workload:
    name: str
    replicas: int
    requests: Resources
    limits: Resources | None
    usage: Resources
    rate: float | None
    lifetime: tuple[float, float] | None = None  # (min, max) seconds, steady scenarios

    def pod_names(self) -> list[str]:
        return [f"{self.name}-{i:04d}" for i in range(1, self.replicas + 1)]


@dataclass(frozen=True)
class Join:
    """A node that joins once `after_pods` pods of the scenario are bound."""

    after_pods: int
    node: Node


@dataclass(frozen=True)
class Descheduler:
    """The descheduler's part in a scenario: running from the start of placement until
    `seconds` after every pod is bound, every `interval_seconds`."""

    seconds: float
    interval_seconds: float


@dataclass(frozen=True)
class Change:
    """A node's background memory (bytes) from `at_seconds` into a steady run on, and
    whether it counts as hot from then (None: unchanged)."""

    at_seconds: float
    node: str
    memory: float
    hot: bool | None = None


@dataclass(frozen=True)
class Steady:
    """A steady scenario's stream: how long it runs, the descheduler contender's interval,
    the background changes, in time order, and where load-watcher reads load
    ("metrics-server" or "prometheus", _Steady.source)."""

    duration_seconds: float
    descheduler_interval_seconds: float
    changes: tuple[Change, ...] = ()
    source: str = "metrics-server"


@dataclass(frozen=True)
class Goals:
    """The issue's goals a scenario is judged on (docs/placement.md says which passed)."""

    beat_stock: bool = False
    no_worse_than_trimaran: bool = False
    no_pods_on_hot: bool = False
    within_bound: float | None = None
    throughput_vs_stock: float | None = None
    p99_vs_stock: float | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    description: str
    nodes: tuple[Node, ...]
    workloads: tuple[Workload, ...]
    joins: tuple[Join, ...]
    descheduler: Descheduler | None
    contenders: tuple[str, ...] | None
    goals: Goals
    timeout_seconds: float
    backlog: bool = False
    steady: Steady | None = None

    @property
    def owned(self) -> bool:
        """Pods are created by ReplicaSets (evictable, replaced), not as bare pods."""
        return self.descheduler is not None or self.steady is not None

    def workload(self, name: str) -> Workload:
        return next(w for w in self.workloads if w.name == name)

    def all_nodes(self) -> tuple[Node, ...]:
        """Every node the scenario ends with: the initial ones and those that join."""
        return self.nodes + tuple(j.node for j in self.joins)

    def pod_usage(self) -> dict[str, Resources]:
        """Each pod's actual usage (the ground truth), by pod name."""
        return {p: w.usage for w in self.workloads for p in w.pod_names()}

    @property
    def pod_count(self) -> int:
        return sum(w.replicas for w in self.workloads)

    def with_duration(self, seconds: float) -> Scenario:
        """The same steady scenario, its stream `seconds` long (``--duration``): the file
        stays as it is. Changes scheduled after the end are dropped; past the last change
        its state holds to the end."""
        if self.steady is None:
            raise ScenarioError(f"{self.name}: --duration is for steady scenarios only")
        if not (seconds > 0 and math.isfinite(seconds)):
            raise ScenarioError(f"--duration must be > 0 seconds, got {seconds}")
        st = self.steady
        changes = tuple(c for c in st.changes if c.at_seconds <= seconds)
        return dataclasses.replace(
            self,
            steady=dataclasses.replace(st, duration_seconds=seconds, changes=changes),
        )


def _amount(q: Quantity, where: str) -> float:
    try:
        v = float(parse_quantity(q))
    except QuantityError as exc:
        raise ScenarioError(f"{where}: {exc}") from None
    if not math.isfinite(v) or v < 0:
        raise ScenarioError(f"{where}: {q!r} is not a finite amount >= 0")
    return v


def _resources(r: _Resources, where: str, *, positive: bool = False) -> Resources:
    out = Resources(_amount(r.cpu, f"{where}.cpu"), _amount(r.memory, f"{where}.memory"))
    if positive and (out.cpu <= 0 or out.memory <= 0):
        raise ScenarioError(f"{where}: capacity must be > 0, got cpu={r.cpu} memory={r.memory}")
    return out


def _nodes(raw: _Node, where: str) -> list[Node]:
    if raw.count < 1:
        raise ScenarioError(f"{where}.count: must be >= 1, got {raw.count}")
    cap = _resources(_Resources(raw.cpu, raw.memory), where, positive=True)
    bg = _resources(raw.background, f"{where}.background") if raw.background else Resources(0, 0)
    names = (
        [raw.name] if raw.count == 1 else [f"{raw.name}-{i:03d}" for i in range(1, raw.count + 1)]
    )
    return [Node(n, cap, bg, raw.hot, raw.pods) for n in names]


def parse(raw: _Scenario, source: str) -> Scenario:
    """Check what the schema cannot (positive amounts, unique names, sane events)."""

    def fail(where: str, msg: str) -> ScenarioError:
        return ScenarioError(f"{source}: {where}: {msg}")

    try:
        nodes = [n for i, rn in enumerate(raw.nodes) for n in _nodes(rn, f"$.nodes[{i}]")]
        joins = []
        for i, ev in enumerate(raw.events):
            if ev.join.count != 1:
                raise fail(f"$.events[{i}].join.count", "a joining node is one node")
            joins.append(Join(ev.after_pods, _nodes(ev.join, f"$.events[{i}].join")[0]))
        workloads = []
        for i, w in enumerate(raw.workloads):
            where = f"$.workloads[{i}]"
            if w.replicas < 1:
                raise fail(f"{where}.replicas", f"must be >= 1, got {w.replicas}")
            if w.rate is not None and not (w.rate > 0 and math.isfinite(w.rate)):
                raise fail(f"{where}.rate", f"pods per second must be > 0, got {w.rate}")
            life = w.lifetime_seconds
            if life is not None and not (0 < life.min <= life.max < math.inf):
                raise fail(
                    f"{where}.lifetime_seconds", f"needs 0 < min <= max, got {life.min}..{life.max}"
                )
            if (life is None) != (raw.steady is None):
                raise fail(
                    f"{where}.lifetime_seconds",
                    "every workload of a steady scenario has one, and only they do",
                )
            workloads.append(
                Workload(
                    w.name,
                    w.replicas,
                    _resources(w.requests, f"{where}.requests"),
                    _resources(w.limits, f"{where}.limits") if w.limits else None,
                    _resources(w.usage, f"{where}.usage"),
                    w.rate,
                    (life.min, life.max) if life is not None else None,
                )
            )
    except ScenarioError as exc:
        if str(exc).startswith(source):
            raise
        raise ScenarioError(f"{source}: {exc}") from None
    if not nodes:
        raise fail("$.nodes", "a scenario needs at least one node")
    if not workloads:
        raise fail("$.workloads", "a scenario needs at least one workload")
    _unique([n.name for n in nodes] + [j.node.name for j in joins], "node name", source)
    _unique([w.name for w in workloads], "workload name", source)
    total = sum(w.replicas for w in workloads)
    for i, j in enumerate(joins):
        if not 0 <= j.after_pods < total:
            raise fail(
                f"$.events[{i}].after_pods", f"must be in 0..{total - 1} (pods), got {j.after_pods}"
            )
    if raw.timeout_seconds <= 0:
        raise fail("$.timeout_seconds", f"must be > 0, got {raw.timeout_seconds}")
    d = raw.descheduler
    if d is not None:
        for key, v in (("seconds", d.seconds), ("interval_seconds", d.interval_seconds)):
            if not (v > 0 and math.isfinite(v)):
                raise fail(f"$.descheduler.{key}", f"must be > 0 seconds, got {v}")
        if raw.backlog:
            raise fail("$.backlog", "a backlog of bare pods and the descheduler exclude each other")
    steady = _steady(raw, [n.name for n in nodes], source)
    g = raw.goals
    return Scenario(
        name=raw.name,
        title=raw.title,
        description=raw.description.strip(),
        nodes=tuple(nodes),
        workloads=tuple(workloads),
        joins=tuple(sorted(joins, key=lambda j: j.after_pods)),
        descheduler=Descheduler(d.seconds, d.interval_seconds) if d is not None else None,
        contenders=tuple(raw.contenders) if raw.contenders is not None else None,
        goals=Goals(
            g.beat_stock,
            g.no_worse_than_trimaran,
            g.no_pods_on_hot,
            g.within_bound,
            g.throughput_vs_stock,
            g.p99_vs_stock,
        ),
        timeout_seconds=raw.timeout_seconds,
        backlog=raw.backlog,
        steady=steady,
    )


def _steady(raw: _Scenario, nodes: Sequence[str], source: str) -> Steady | None:
    """The steady stream, checked: a positive duration and interval, changes inside the run
    on the scenario's initial nodes; and none of the placement modes it replaces."""
    st = raw.steady
    if st is None:
        return None

    def fail(where: str, msg: str) -> ScenarioError:
        return ScenarioError(f"{source}: {where}: {msg}")

    for key, v in (
        ("duration_seconds", st.duration_seconds),
        ("descheduler_interval_seconds", st.descheduler_interval_seconds),
    ):
        if not (v > 0 and math.isfinite(v)):
            raise fail(f"$.steady.{key}", f"must be > 0 seconds, got {v}")
    # Each of these changes what a run is; a steady one is a stream of its own.
    for key, on in (
        ("backlog", raw.backlog),
        ("events", bool(raw.events)),
        ("descheduler", raw.descheduler is not None),
    ):
        if on:
            raise fail(f"$.{key}", "not with steady: (the stock+descheduler contender runs it)")
    changes = []
    for i, c in enumerate(st.changes):
        where = f"$.steady.changes[{i}]"
        if c.node not in nodes:
            raise fail(f"{where}.node", f"{c.node!r} is not one of the scenario's nodes")
        if not 0 <= c.at_seconds <= st.duration_seconds:
            raise fail(f"{where}.at_seconds", f"must be in 0..{st.duration_seconds:g}")
        try:
            memory = _amount(c.memory, f"{where}.memory")
        except ScenarioError as exc:
            raise ScenarioError(f"{source}: {exc}") from None
        changes.append(Change(c.at_seconds, c.node, memory, c.hot))
    return Steady(
        st.duration_seconds,
        st.descheduler_interval_seconds,
        tuple(sorted(changes, key=lambda c: c.at_seconds)),
        st.source,
    )


def _unique(names: Sequence[str], what: str, source: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ScenarioError(f"{source}: {what} {n!r} appears twice")
        seen.add(n)


def loads(text: str, source: str = "<string>") -> Scenario:
    """A scenario from YAML text; ScenarioError names `source` and the bad key."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{source}: not YAML: {exc}") from None
    try:
        raw = msgspec.convert(doc, _Scenario)
    except msgspec.ValidationError as exc:
        raise ScenarioError(f"{source}: {exc}") from None
    return parse(raw, source)


def load(path: Path) -> Scenario:
    return loads(path.read_text(), str(path))


def available(directory: Path = SCENARIOS_DIR) -> dict[str, Path]:
    """Scenario name (file stem) -> file, sorted by file name."""
    return {p.stem: p for p in sorted(directory.glob("*.yaml"))}


def select(
    names: Iterable[str] | None, directory: Path = SCENARIOS_DIR, also: Sequence[Path] = ()
) -> list[Scenario]:
    """The named scenarios (all of `directory`'s but the tests' `smoke*` when None), loaded;
    unknown names refused. A name `directory` lacks is looked up in each of `also` in turn
    (generated scenarios: benchmarks/scenarios/generated-dev, a report's own copies)."""
    files = available(directory)
    if names is None:
        names = [n for n in files if not n.startswith("smoke")]
    for d in also:
        files = {**available(d), **files}
    out = []
    for n in names:
        if n not in files:
            raise ScenarioError(f"no scenario {n!r} in {directory} (have: {', '.join(files)})")
        sc = load(files[n])
        if sc.name != n:
            raise ScenarioError(f"{files[n]}: $.name: {sc.name!r} differs from the file name")
        out.append(sc)
    return out
