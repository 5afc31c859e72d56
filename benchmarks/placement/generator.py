"""Seeded homelab scenarios for the placement benchmark: pure functions of (seed, index).

The shipped scenarios are each built around one effect (a hog, a swing, a mix); a
generated one is a draw from the kind of cluster the project is for, so that a contender
is judged over many clusters it was not tuned on. Scenario `gen-<seed>-<index>` is:

* a cluster: two times in three a mini PC (8 cores, 16 or 32 GiB) beside two to four
  Raspberry Pi-sized nodes (4 cores, 4 or 8 GiB), else three to five equal nodes
  (4 cores / 8 GiB or 8 cores / 16 GiB);
* on each node a background nobody requests (its system daemons, a NAS, a media server):
  CPU fixed, memory that on about a third of the nodes ramps, drifts or steps during the
  stream (steady.changes: memory only, scenario._Change says why CPU cannot change);
* two to four workloads, each with requests, a usage/request ratio per resource drawn
  log-uniformly from 0.2 to 6 (a fifth of the request up to six times it), limits on
  about half of them (usage then at most the limits), a lifetime range and a ramp rate;
  replicas sized so that the pods and the backgrounds use 45-80 % of the cluster's scarcer
  resource;
* its load read from metrics-server, or one time in four from the lab's Prometheus (the
  window's average and deviation, which LoadVariationRiskBalancing and loadwise-lvrb read).

A draw that is not feasible is redrawn (`problems`): the pods' requests, all replicas at
once, must pack onto the nodes with headroom (a replaced pod's requests count until it is
gone), and the best placement of their usage, with every node at its highest background
of the stream, must keep every node under its capacity (optimum.instant; if even the
optimum overloads a node, every contender does and the scenario tells nothing apart).

Every choice comes from random.Random keyed by the seed, the index and the attempt, so a
name always means the same scenario (since usage is capped at the limits: a report drawn
earlier keeps its scenarios' YAML beside its results, under placement/generated/). The
scenario is written as YAML and read back by scenario.loads, the loader of the shipped
files, so a generated scenario is one the loader accepts. A node joining mid-stream is not
drawn: a steady scenario has no `events:` (the loader refuses them; the steady runner, the
timeline and the optima assume a fixed set of nodes).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchmarks.placement import optimum
from benchmarks.placement.exceptions import ScenarioError
from benchmarks.placement.scenario import SCENARIOS_DIR, Scenario, loads

DEV_DIR = SCENARIOS_DIR / "generated-dev"
DEV_SEEDS = range(1, 7)  # the development set: gen-1-1 .. gen-6-1
DURATION = 360.0  # seconds, as the shipped steady scenarios; --duration draws longer ones
MAX_ATTEMPTS = 200
GiB, MiB = 2**30, 2**20
# Requests of all replicas at once, packed onto nodes filled at most to this fraction: the
# steady runner replaces an expired pod while the old one may still hold its requests.
REQUEST_HEADROOM = 0.9
# The optimum of the usage, at the backgrounds' peaks, stays below this on every node.
USAGE_LIMIT = 1.0
RATIO_MIN, RATIO_MAX = 0.2, 6.0
MAX_PODS = 60  # pods at a time: a 2-core lab replaces them every 30-300 s
# Fewer pods than this per node leave most placements equal (a few 6x pods on three nodes).
MIN_PODS_PER_NODE = 2
# The contenders a steady scenario is for: stock, the descheduler beside it, the three
# loadwise policies and Trimaran at upstream's weight 1 and at the fair weight 10
# (contenders.py FAIR_TRIMARAN_WEIGHT).
CONTENDERS = (
    "stock",
    "stock+descheduler",
    "loadwise-least-used",
    "loadwise-tlp",
    "loadwise-lvrb",
    "trimaran-tlp",
    "trimaran-lvrb",
    "trimaran-tlp-w10",
    "trimaran-lvrb-w10",
)
_NAME = re.compile(r"gen-(\d+)-(\d+)")


@dataclass(frozen=True)
class Generated:
    """A generated scenario, its YAML text (what the loader read it from) and the attempt
    that was feasible (0: the first draw)."""

    scenario: Scenario
    text: str
    attempt: int


def scenario_name(seed: int, index: int) -> str:
    return f"gen-{seed}-{index}"


def parse_name(name: str) -> tuple[int, int] | None:
    """(seed, index) of a generated scenario's name; None for any other name."""
    m = _NAME.fullmatch(name)
    return (int(m[1]), int(m[2])) if m else None


def _cores(m: int) -> str:
    return f"{m}m"


def _mib(b: int) -> str:
    return f"{b}Mi"


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _nodes(rng: random.Random, prefix: str) -> tuple[str, list[dict[str, Any]]]:
    """The cluster's shape and its nodes (cpu in cores, memory in MiB, background in m/Mi)."""
    if rng.random() < 2 / 3:
        shape = "mixed"
        sizes = [("mini", 8, rng.choice([16, 32]) * 1024)]
        sizes += [(f"pi{i}", 4, rng.choice([4, 8]) * 1024) for i in range(1, rng.randint(2, 4) + 1)]
    else:
        shape = "equal"
        cpu, mem = rng.choice([(4, 8), (8, 16)])
        sizes = [(f"n{i}", cpu, mem * 1024) for i in range(1, rng.randint(3, 5) + 1)]
    nodes = []
    for name, cpu, mem in sizes:
        bg_cpu = round(1000 * cpu * rng.uniform(0.02, 0.15))
        bg_mem = round(mem * rng.uniform(0.05, 0.30))
        nodes.append(
            {"name": f"{prefix}-{name}", "cpu": cpu, "memory": mem, "bg": (bg_cpu, bg_mem)}
        )
    return shape, nodes


def _changes(
    rng: random.Random, nodes: Sequence[dict[str, Any]], duration: float
) -> list[dict[str, Any]]:
    """Memory backgrounds that move: about one node in three ramps up, drifts every 60 s or
    steps up and back, between 2 % and 55 % of the node's memory."""
    out: list[dict[str, Any]] = []
    for n in nodes:
        if rng.random() >= 1 / 3:
            continue
        cap, level = n["memory"], n["bg"][1]
        lo, hi = round(0.02 * cap), round(0.55 * cap)
        kind = rng.choice(["ramp", "drift", "step"])
        steps: list[tuple[float, int]] = []
        if kind == "ramp":
            start = rng.uniform(0.1, 0.5) * duration
            k = rng.randint(3, 6)
            rise = rng.uniform(0.1, 0.3) * cap / k
            steps = [(start + 30 * i, round(level + rise * (i + 1))) for i in range(k)]
        elif kind == "drift":
            t = 60.0
            while t < duration:
                level = min(max(round(level + rng.uniform(-0.06, 0.06) * cap), lo), hi)
                steps.append((t, level))
                t += 60
        else:
            up = rng.uniform(0.2, 0.6) * duration
            steps = [(up, round(level + rng.uniform(0.15, 0.3) * cap))]
            if rng.random() < 0.5:
                steps.append((up + rng.uniform(0.2, 0.4) * duration, n["bg"][1]))
        for at, mem in steps:
            if at <= duration:
                mem = min(max(mem, lo), hi)
                out.append({"at_seconds": float(round(at)), "node": n["name"], "memory": mem})
    return out


def _workloads(
    rng: random.Random, nodes: Sequence[dict[str, Any]], peak_bg: dict[str, int]
) -> list[dict[str, Any]]:
    """Two to four workloads, replicas scaled to a drawn use of the scarcer resource."""
    out: list[dict[str, Any]] = []
    for i in range(rng.randint(2, 4)):
        req_cpu = rng.choice([50, 100, 150, 200, 250, 300, 400, 500])
        req_mem = rng.choice([64, 128, 192, 256, 384, 512])
        use_cpu = max(1, round(req_cpu * _log_uniform(rng, RATIO_MIN, RATIO_MAX)))
        use_mem = max(1, round(req_mem * _log_uniform(rng, RATIO_MIN, RATIO_MAX)))
        limits = None
        if rng.random() < 0.5:
            limits = (
                round(req_cpu * rng.choice([1, 1.5, 2, 4])),
                round(req_mem * rng.choice([1, 1.5, 2])),
            )
            # A container uses no more CPU than its limit (the CFS quota throttles it) and is
            # OOM-killed past its memory limit; kwok reports whatever usage it is given, so
            # a draw above the limits was a workload no real node runs (24 of the 37 limited
            # workloads of seeds 1301-1322, drawn before this cap).
            use_cpu, use_mem = min(use_cpu, limits[0]), min(use_mem, limits[1])
        life_min = rng.randint(30, 120)
        out.append(
            {
                "name": f"w{i + 1}",
                "weight": rng.uniform(1, 4),
                "requests": (req_cpu, req_mem),
                "usage": (use_cpu, use_mem),
                "limits": limits,
                "rate": round(rng.uniform(0.1, 0.5), 2),
                "lifetime": (life_min, life_min + rng.randint(30, 180)),
            }
        )
    cap_cpu = sum(1000 * n["cpu"] for n in nodes)
    cap_mem = sum(n["memory"] for n in nodes)
    bg_cpu = sum(n["bg"][0] for n in nodes)
    bg_mem = sum(peak_bg.values())
    target = rng.uniform(0.45, 0.80)
    # pods' use per unit of scale, per resource; the scale puts the scarcer one at target
    per_cpu = sum(w["weight"] * w["usage"][0] for w in out)
    per_mem = sum(w["weight"] * w["usage"][1] for w in out)
    scale = min(
        max(target * cap_cpu - bg_cpu, 0) / per_cpu, max(target * cap_mem - bg_mem, 0) / per_mem
    )
    pods = sum(w["weight"] * scale for w in out)
    if pods > MAX_PODS:
        scale *= MAX_PODS / pods
    for w in out:
        w["replicas"] = max(1, round(w["weight"] * scale))
    return out


def _document(
    seed: int, index: int, attempt: int, rng: random.Random, duration: float
) -> dict[str, Any]:
    name = scenario_name(seed, index)
    shape, nodes = _nodes(rng, f"g{seed}-{index}")
    changes = _changes(rng, nodes, duration)
    peak = {n["name"]: n["bg"][1] for n in nodes}
    for c in changes:
        peak[c["node"]] = max(peak[c["node"]], c["memory"])
    workloads = _workloads(rng, nodes, peak)
    source = "prometheus" if rng.random() < 0.25 else "metrics-server"
    pods = sum(w["replicas"] for w in workloads)
    moving = sorted({c["node"] for c in changes})
    title = (
        f"generated: {'a mini PC beside ' if shape == 'mixed' else ''}"
        f"{len(nodes) - (shape == 'mixed')} {'small' if shape == 'mixed' else 'equal'} "
        f"nodes, {pods} pods at a time"
    )
    description = (
        f"Drawn by benchmarks/placement/generator.py from seed {seed}, index {index} "
        f"(attempt {attempt}). "
        + (
            f"Memory backgrounds that change during the stream: {', '.join(moving)}. "
            if moving
            else "Backgrounds hold for the whole stream. "
        )
        + f"Load read from {source}."
    )
    doc: dict[str, Any] = {
        "name": name,
        "title": title,
        "description": description,
        "nodes": [
            {
                "name": n["name"],
                "cpu": str(n["cpu"]),
                "memory": _mib(n["memory"]),
                "background": {"cpu": _cores(n["bg"][0]), "memory": _mib(n["bg"][1])},
            }
            for n in nodes
        ],
        "workloads": [],
        "steady": {"duration_seconds": float(duration), "source": source},
        "contenders": list(CONTENDERS),
    }
    if changes:
        doc["steady"]["changes"] = [{**c, "memory": _mib(c["memory"])} for c in changes]
    for w in workloads:
        entry: dict[str, Any] = {
            "name": w["name"],
            "replicas": w["replicas"],
            "requests": {"cpu": _cores(w["requests"][0]), "memory": _mib(w["requests"][1])},
            "usage": {"cpu": _cores(w["usage"][0]), "memory": _mib(w["usage"][1])},
        }
        if w["limits"] is not None:
            entry["limits"] = {"cpu": _cores(w["limits"][0]), "memory": _mib(w["limits"][1])}
        entry["rate"] = w["rate"]
        entry["lifetime_seconds"] = {"min": w["lifetime"][0], "max": w["lifetime"][1]}
        doc["workloads"].append(entry)
    return doc


def _packs(sc: Scenario) -> bool:
    """First-fit decreasing of every pod's requests onto the nodes, each filled to at most
    REQUEST_HEADROOM of its capacity and its pod count: a placement the scheduler's
    NodeResourcesFit admits (sufficient, not necessary: a miss is redrawn)."""
    nodes = sc.nodes
    free = [
        [REQUEST_HEADROOM * n.capacity.cpu, REQUEST_HEADROOM * n.capacity.memory, n.pods]
        for n in nodes
    ]
    cap_cpu = sum(n.capacity.cpu for n in nodes)
    cap_mem = sum(n.capacity.memory for n in nodes)
    pods = sorted(
        (w.requests for w in sc.workloads for _ in range(w.replicas)),
        key=lambda r: -max(r.cpu / cap_cpu, r.memory / cap_mem),
    )
    for r in pods:
        for f in free:
            if r.cpu <= f[0] + 1e-9 and r.memory <= f[1] + 1e-9 and f[2] >= 1:
                f[0] -= r.cpu
                f[1] -= r.memory
                f[2] -= 1
                break
        else:
            return False
    return True


def usage_optimum(sc: Scenario) -> dict[str, float]:
    """Per resource, the least hottest-node utilisation any placement of every replica's
    usage reaches, with each node at its highest background of the stream."""
    peak = {n.name: n.background.memory for n in sc.nodes}
    for c in sc.steady.changes if sc.steady else ():
        peak[c.node] = max(peak[c.node], c.memory)
    out = {}
    for res in ("cpu", "memory"):
        cap = [n.capacity.cpu if res == "cpu" else n.capacity.memory for n in sc.nodes]
        bg = [n.background.cpu if res == "cpu" else peak[n.name] for n in sc.nodes]
        shapes: dict[float, int] = {}
        for w in sc.workloads:
            u = w.usage.cpu if res == "cpu" else w.usage.memory
            shapes[u] = shapes.get(u, 0) + w.replicas
        out[res] = optimum.instant(cap, bg, shapes)
    return out


def problems(sc: Scenario) -> list[str]:
    """Why `sc` cannot be a generated scenario; [] when it can."""
    out = []
    for res in ("cpu", "memory"):
        req = sum(getattr(w.requests, res) * w.replicas for w in sc.workloads)
        cap = sum(getattr(n.capacity, res) for n in sc.nodes)
        if req > REQUEST_HEADROOM * cap:
            out.append(f"{res} requests {req / cap:.0%} of the capacity")
    if not out and not _packs(sc):
        out.append("no packing of the requests found")
    for res, v in usage_optimum(sc).items():
        if not v < USAGE_LIMIT:
            out.append(f"even the best placement puts a node's {res} at {v:.0%}")
    if sc.pod_count > MAX_PODS + 4:  # rounding of the replicas may add a few
        out.append(f"{sc.pod_count} pods at a time")
    if sc.pod_count < MIN_PODS_PER_NODE * len(sc.nodes):
        out.append(
            f"{sc.pod_count} pods on {len(sc.nodes)} nodes: too few to tell placements apart"
        )
    return out


def generate(seed: int, index: int, *, duration: float = DURATION) -> Generated:
    """Scenario gen-<seed>-<index>: the first feasible draw of its attempts."""
    if index < 1:
        raise ScenarioError(f"a generated scenario's index starts at 1, got {index}")
    if not (duration > 0 and math.isfinite(duration)):
        raise ScenarioError(f"a generated scenario's duration must be > 0 s, got {duration}")
    why: list[str] = []
    for attempt in range(MAX_ATTEMPTS):
        rng = random.Random(f"loadwise-generator/{seed}/{index}/{attempt}")
        doc = _document(seed, index, attempt, rng, duration)
        text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=100)
        sc = loads(text, f"generated {doc['name']} (attempt {attempt})")
        why = problems(sc)
        if not why:
            return Generated(sc, text, attempt)
    raise ScenarioError(
        f"{scenario_name(seed, index)}: no feasible draw in {MAX_ATTEMPTS} attempts "
        f"(the last: {'; '.join(why)})"
    )


def generate_many(count: int, seed: int, *, duration: float = DURATION) -> list[Generated]:
    """gen-<seed>-1 .. gen-<seed>-<count>."""
    return [generate(seed, i, duration=duration) for i in range(1, count + 1)]


def write(generated: Sequence[Generated], directory: Path) -> list[Path]:
    """Each scenario as <directory>/<name>.yaml; the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for g in generated:
        path = directory / f"{g.scenario.name}.yaml"
        path.write_text(g.text)
        out.append(path)
    return out


def dev_set() -> list[Generated]:
    """The development set kept in DEV_DIR: gen-<s>-1 for each seed s of DEV_SEEDS."""
    return [generate(s, 1) for s in DEV_SEEDS]


if __name__ == "__main__":  # python -m benchmarks.placement.generator: rewrite the dev set
    for p in write(dev_set(), DEV_DIR):
        print(p)
