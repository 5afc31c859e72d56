"""python -m benchmarks.placement [--scenarios A B] [--contenders X Y] [--out docs]
    [--repeats N] [--seed S] [--allow-mixed-commits]

Runs every selected scenario against every selected contender on the lab N times (default
5; one run at a time, from freshly reset node state, in rounds shuffled by the seed),
then writes <out>/placement.md, <out>/placement/*.png and <out>/placement/results.json
(the raw timings and bindings; `--from-results` renders the report again from such a file
without a lab). It is a measurement: the exit status is 0
when goals are missed (the report says so), non-zero only when something broke.

Use the lab lock: `flock /tmp/loadwise-lab.lock python -m benchmarks.placement`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.placement import report, scenario
from benchmarks.placement.exceptions import PlacementError
from benchmarks.placement.runner import (
    RunResult,
    cleanup,
    log_line,
    provenance,
    run,
    run_order,
)
from lab import session


def _save(path: Path, started: str, notes: list[str], results: list[RunResult]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # The seeds are also in each result; here for a reader of the file.
    seeds = sorted({r.seed for r in results if r.seed is not None})
    doc = {
        "started": started,
        "notes": notes,
        "seeds": seeds,
        "results": [r.to_json() for r in results],
    }
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def _load(path: Path) -> tuple[str, list[str], list[RunResult]]:
    doc = json.loads(path.read_text())
    return doc["started"], list(doc["notes"]), [RunResult.from_json(r) for r in doc["results"]]


def measure(
    scenarios: list[scenario.Scenario],
    wanted: list[str] | None,
    results_file: Path,
    *,
    append: bool = False,
    workdir: Path | None = None,
    allow_mixed_commits: bool = False,
    repeats: int = 5,
    seed: int = 0,
) -> tuple[str, list[str], list[RunResult]]:
    """Run every pair `repeats` times in rounds shuffled by `seed` (runner.run_order); with
    `append`, keep the results already in `results_file` for the pairs of scenario and
    contender not run again (e.g. a contender whose build came later)."""
    from benchmarks.placement.contenders import CONTENDERS, available

    started = f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} (commit {report.commit()})"
    names = wanted or list(CONTENDERS)
    unknown = [n for n in names if n not in CONTENDERS]
    if unknown:
        raise PlacementError(f"unknown contenders {unknown} (have: {', '.join(CONTENDERS)})")
    notes: list[str] = []
    results: list[RunResult] = []
    if append and results_file.exists():
        first, notes, old = _load(results_file)
        started = f"{first}, then {started}"
        rerun = {(s.name, n) for s in scenarios for n in names}
        results = [r for r in old if (r.scenario, r.contender) not in rerun]
        notes = [n for n in notes if not any(n.startswith(f"{c} not run") for c in names)]
        # Refuse now rather than after the lab ran: the report would refuse the mixture.
        now = RunResult("", "", commit=provenance().commit)
        report.check_commits([*results, now], allow_mixed=allow_mixed_commits or not results)
    with (
        session(log_line) as lab,
        tempfile.TemporaryDirectory(prefix="placement-") as tmp,
    ):
        work = workdir or Path(tmp)
        can = available(lab)
        for name in names:
            if isinstance(can.get(name), str):
                notes.append(f"{name} not run: {can[name]}")
                print(f"placement: {notes[-1]}", flush=True)
        pairs = [
            (sc, c)
            for sc in scenarios
            for name in names
            if not isinstance(c := can.get(name), str) and c is not None
            if sc.contenders is None or name in sc.contenders
            if c.fits(sc.steady is not None)
        ]
        try:
            order = run_order(pairs, repeats, seed)
            for i, ((sc, c), k) in enumerate(order, 1):
                log_line(f"run {i} of {len(order)}: {sc.name} x {c.name}, round {k + 1}")
                results.append(run(lab, sc, c, work, repeat=k, seed=seed))
                _save(results_file, started, notes, results)
        finally:
            cleanup(lab)
    return started, notes, results


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.placement", description=__doc__)
    ap.add_argument("--scenarios", nargs="+", help="scenario names (default: all but smoke)")
    ap.add_argument("--contenders", nargs="+", help="contender names (default: all)")
    ap.add_argument("--out", type=Path, default=Path("docs"), help="where placement.md goes")
    ap.add_argument("--from-results", type=Path, help="render from a results.json, no lab")
    ap.add_argument(
        "--append", action="store_true", help="keep earlier results of pairs not run again"
    )
    ap.add_argument(
        "--workdir",
        type=Path,
        help="keep each run's configs and logs (scheduler, extender, descheduler) here",
    )
    ap.add_argument("--note", action="append", default=[], help="a line for the report's notes")
    ap.add_argument(
        "--repeats",
        type=_positive,
        default=5,
        help="runs of each (scenario, contender), in shuffled interleaved rounds (default 5)",
    )
    ap.add_argument(
        "--seed",
        type=int,
        help="seed of the run order (default: from the clock; recorded in results.json)",
    )
    ap.add_argument(
        "--allow-mixed-commits",
        action="store_true",
        help="report results measured at different commits together (refused otherwise)",
    )
    a = ap.parse_args(argv)
    try:
        if a.from_results:
            started, notes, results = _load(a.from_results)
            names = list(dict.fromkeys(r.scenario for r in results))
            scenarios = scenario.select(a.scenarios or names)
        else:
            scenarios = scenario.select(a.scenarios)
            started, notes, results = measure(
                scenarios,
                a.contenders,
                a.out / "placement" / "results.json",
                append=a.append,
                workdir=a.workdir,
                allow_mixed_commits=a.allow_mixed_commits,
                repeats=a.repeats,
                seed=a.seed if a.seed is not None else time.time_ns() % 2**31,
            )
            order = [s.name for s in scenarios]
            scenarios += [
                s
                for s in scenario.select(dict.fromkeys(r.scenario for r in results))
                if s.name not in order
            ]
        md = report.write(
            a.out,
            scenarios,
            results,
            started=started,
            notes=notes + a.note,
            allow_mixed_commits=a.allow_mixed_commits,
        )
    except PlacementError as exc:
        print(f"placement: {exc}", file=sys.stderr)
        return 2
    print(f"placement: wrote {md}")
    for line in report.cost_table(scenarios, results):  # the backlog scenarios' cost, if run
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
