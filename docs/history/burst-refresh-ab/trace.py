"""Per run of a burst A/B: how long the burst took to bind, where its pods went, what the
extender saw of burst-small when the first reading taken during the burst reached it, and
how its decisions estimated the pod they placed.

    .venv/bin/python docs/history/burst-refresh-ab/trace.py [ARM_DIR ...]

Each ARM_DIR holds a ``placement/`` of run records and ``decisions/SEED.jsonl.gz``, the
extender's decision records of each run; by default this folder's r15 and r30.

"Would hold" is the node's memory once every pod bound to it so far uses what the scenario
gives it (benchmarks/scenarios/burst.yaml: 140 MiB each, beside the node's background); "saw"
is the extender's figure for the node in its decision record (its reading plus the pods it
counts in flight, at their estimate).
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path

import yaml

HERE = Path(__file__).parent
REPO = HERE.parents[2]
SMALL = "burst-small"


def _mebibytes(text: str) -> float:
    units = {"Mi": 1.0, "Gi": 1024.0}
    return float(text[:-2]) * units[text[-2:]]


def _nodes() -> tuple[dict[str, float], dict[str, float], float]:
    """Capacity and background per node, in MiB, and one pod's use."""
    spec = yaml.safe_load((REPO / "benchmarks/scenarios/burst.yaml").read_text())
    capacity, background = {}, {}
    for node in spec["nodes"]:
        count = node.get("count", 1)
        names = (
            [node["name"]]
            if count == 1
            else [f"{node['name']}-{i:03d}" for i in range(1, count + 1)]
        )
        for name in names:
            capacity[name] = _mebibytes(node["memory"])
            background[name] = _mebibytes(node["background"]["memory"])
    (workload,) = spec["workloads"]
    return capacity, background, _mebibytes(workload["usage"]["memory"])


def main(argv: list[str]) -> None:
    capacity, background, use = _nodes()
    arms = [Path(a) for a in argv] or [HERE / "r15", HERE / "r30"]
    print(
        "| arm | seed | bound in, s | pods on burst-small | hottest node would hold, % "
        "| first reading during the burst, s | burst-small then: saw / would hold, % "
        "| pods it took before the next reading | estimates: implied / learned / request rule |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for arm in arms:
        for run in sorted((arm / "placement/runs/burst").glob("*.json.gz")):
            record = json.loads(gzip.decompress(run.read_bytes()))
            seed = record["seed"]
            bound = record["bound_at"].values()
            per_node = Counter(record["bindings"].values())
            hottest = max((background[n] + per_node[n] * use) / capacity[n] * 100 for n in capacity)
            lines = gzip.decompress((arm / f"decisions/{seed}.jsonl.gz").read_bytes())
            decisions = [
                d for d in map(json.loads, lines.splitlines()) if d["verb"] == "prioritize"
            ]
            node_of = record["bindings"]
            ages = [min(d["age"].values()) for d in decisions]
            # a decision whose reading is younger than the one before came after a new reading
            arrivals = [i for i in range(1, len(ages)) if ages[i] < ages[i - 1]] + [len(ages)]
            first = "none | - | -"
            if len(arrivals) > 1:
                i, following = arrivals[0], arrivals[1]
                before = Counter(node_of[d["pod"].split("/", 1)[1]] for d in decisions[:i])
                saw = decisions[i]["nodes"][SMALL][1]
                holds = (background[SMALL] + before[SMALL] * use) / capacity[SMALL] * 100
                took = sum(
                    node_of[d["pod"].split("/", 1)[1]] == SMALL for d in decisions[i:following]
                )
                after = decisions[i]["at"] - decisions[0]["at"]
                first = f"{after:.0f} | {saw:.1f} / {holds:.1f} | {took}"
            how = Counter(d["estimate"] for d in decisions)
            kinds = " / ".join(str(how[k]) for k in ("implied", "learned", "request rule"))
            print(
                f"| {arm.name} | {seed} | {max(bound) - min(bound):.0f} | {per_node[SMALL]} "
                f"| {hottest:.1f} | {first} | {kinds} |"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
