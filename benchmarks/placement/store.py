"""Where the benchmark's results live: an index and one compressed file per run.

``docs/placement/results.json`` is the index: when the runs started, the report's notes,
the seeds, and ``runs``, the run files the report is made of (paths relative to the
index's directory). Each run is ``runs/<scenario>/<contender>-<seed>-<round>-<start>.json.gz``
(gzip of the run's JSON), written once when the run ends: a run adds a file and rewrites
only the small index, where the single file of every run's bindings and timings had
grown to 13 MB and was rewritten whole after every run. A run file left out of the index
(a pair measured again without ``--append``) stays on disk as history.

Indexes written before the layout hold the runs inline under ``results``; both are read
(`load`), inline runs first, and `migrate` moves inline runs into files.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.placement.exceptions import PlacementError
from benchmarks.placement.runner import RunResult

RUNS = "runs"
GENERATED = "generated"  # beside an index: the scenario files its --generated runs drew


@dataclass
class Index:
    started: str
    notes: list[str]
    runs: list[str]  # run files, relative to the index's directory
    inline: list[RunResult]  # runs held in the index itself (before the layout)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", text)


def run_name(r: RunResult) -> str:
    """The run's file, relative to the index's directory: unique per start second, so a
    run never overwrites another."""
    start = _safe((r.ran_at or "unknown").replace(":", "").replace("-", ""))
    seed = "none" if r.seed is None else str(r.seed)
    rnd = "none" if r.repeat is None else str(r.repeat)
    return f"{RUNS}/{_safe(r.scenario)}/{_safe(r.contender)}-{seed}-{rnd}-{start}.json.gz"


def write_run(directory: Path, r: RunResult) -> str:
    """Write `r` under `directory` (the index's); return its name for the index. A name
    taken already (two runs of a pair started in one second) gets a counter."""
    name = run_name(r)
    path = directory / name
    k = 1
    while path.exists():
        k += 1
        name = run_name(r).removesuffix(".json.gz") + f"-{k}.json.gz"
        path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same run gives the same bytes, so a migration run twice changes nothing
    data = json.dumps(r.to_json(), sort_keys=True, separators=(",", ":")).encode()
    path.write_bytes(gzip.compress(data, mtime=0))
    return name


def read_run(path: Path) -> RunResult:
    try:
        doc = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, ValueError) as exc:
        raise PlacementError(f"{path}: not a gzip of a run's JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise PlacementError(f"{path}: a run is a JSON object")
    return RunResult.from_json(doc)


def read_index(path: Path) -> Index:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PlacementError(f"{path}: cannot read the results index: {exc}") from None
    return Index(
        str(doc["started"]),
        [str(n) for n in doc.get("notes", [])],
        [str(n) for n in doc.get("runs", [])],
        [RunResult.from_json(r) for r in doc.get("results", [])],
    )


def load(path: Path) -> tuple[str, list[str], list[RunResult]]:
    """The index at `path` as (started, notes, runs): its inline runs, then its run files
    in the order it lists them. A listed file that is missing is an error naming it."""
    return load_index(path, read_index(path))


def load_index(path: Path, idx: Index) -> tuple[str, list[str], list[RunResult]]:
    """`idx` (read from `path`, perhaps trimmed) as (started, notes, runs)."""
    runs = list(idx.inline)
    for name in idx.runs:
        f = path.parent / name
        if not f.exists():
            raise PlacementError(f"{path} lists {name}, which does not exist")
        runs.append(read_run(f))
    return idx.started, idx.notes, runs


def write_index(path: Path, idx: Index) -> None:
    """The index, with the seeds of its runs for a reader of the file. Inline runs stay
    inline (an index from before the layout is migrated only by `migrate`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    seeds = sorted({r.seed for r in idx.inline if r.seed is not None})
    seeds = sorted(set(seeds) | {s for n in idx.runs if (s := _seed_of(n)) is not None})
    doc: dict[str, Any] = {"started": idx.started, "notes": idx.notes, "seeds": seeds}
    if idx.inline:
        doc["results"] = [r.to_json() for r in idx.inline]
    doc["runs"] = idx.runs
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def _seed_of(name: str) -> int | None:
    m = re.search(r"-(\d+)-(?:\d+|none)-[^/]*\.json\.gz$", name)
    return int(m.group(1)) if m else None


def append(path: Path, idx: Index, r: RunResult) -> None:
    """Record one finished run: its own file, then the index naming it."""
    idx.runs.append(write_run(path.parent, r))
    write_index(path, idx)


def migrate(path: Path) -> int:
    """Move the index's inline runs into run files; return how many moved."""
    idx = read_index(path)
    names = [write_run(path.parent, r) for r in idx.inline]
    moved = len(names)
    idx.runs = names + idx.runs
    idx.inline = []
    write_index(path, idx)
    return moved


def keep(idx: Index, directory: Path, drop: Sequence[tuple[str, str]]) -> Index:
    """The index without the runs of the (scenario, contender) pairs in `drop` (measured
    again with ``--append``); their files stay on disk."""
    gone = set(drop)
    runs = [n for n in idx.runs if _pair(read_run(directory / n)) not in gone]
    inline = [r for r in idx.inline if _pair(r) not in gone]
    return Index(idx.started, idx.notes, runs, inline)


def _pair(r: RunResult) -> tuple[str, str]:
    return (r.scenario, r.contender)


def merge(out: Path, sources: Sequence[Path], notes: Sequence[str] = ()) -> int:
    """Gather the runs of several indexes (labs run side by side, one index each) into the
    index `out`, copying each run file and each drawn scenario file under `out`'s
    directory; return how many runs `out` names. The notes are `notes` followed by each
    source's own; `started` spans the sources'. Refuses a file name that two sources hold
    with different contents."""
    runs: list[str] = []
    all_notes = list(notes)
    started: list[str] = []
    for src in sources:
        idx = read_index(src)
        if idx.inline:
            raise PlacementError(f"{src}: holds runs inline; run `migrate` on it first")
        started.append(idx.started)
        all_notes += [n for n in idx.notes if n not in all_notes]
        for name in idx.runs:
            data = (src.parent / name).read_bytes()
            target = out.parent / name
            if target.exists() and target.read_bytes() != data:
                raise PlacementError(f"{name}: differs between {src} and {target}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            if name not in runs:
                runs.append(name)
        # the scenarios a run drew (--generated) live beside its index; the report reads
        # them from beside the merged one
        for scenario in sorted((src.parent / GENERATED).glob("*.yaml")):
            target = out.parent / GENERATED / scenario.name
            data = scenario.read_bytes()
            if target.exists() and target.read_bytes() != data:
                raise PlacementError(f"{scenario.name}: differs between {src} and {target}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    span = " / ".join(s for s in started if s)
    write_index(out, Index(span, all_notes, sorted(runs), []))
    return len(runs)


def main(argv: list[str] | None = None) -> int:
    """python -m benchmarks.placement.store INDEX: move INDEX's inline runs into files;
    python -m benchmarks.placement.store merge OUT SOURCE... [--note TEXT]: gather the runs
    of several indexes into OUT."""
    import argparse
    import sys

    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["merge"]:
        parser = argparse.ArgumentParser(prog="python -m benchmarks.placement.store merge")
        parser.add_argument("out", type=Path)
        parser.add_argument("sources", type=Path, nargs="+")
        parser.add_argument("--note", action="append", default=[])
        ns = parser.parse_args(args[1:])
        try:
            n = merge(ns.out, ns.sources, ns.note)
        except PlacementError as exc:
            print(f"placement: {exc}", file=sys.stderr)
            return 1
        print(f"placement: {ns.out} names {n} runs")
        return 0
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m benchmarks.placement.store docs/placement/results.json")
        print("       python -m benchmarks.placement.store merge OUT SOURCE... [--note TEXT]")
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    try:
        moved = migrate(Path(args[0]))
    except PlacementError as exc:
        print(f"placement: {exc}", file=sys.stderr)
        return 1
    print(f"placement: {moved} runs moved into {Path(args[0]).parent / RUNS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
