"""python -m benchmarks.placement [--scenarios A B] [--contenders X Y] [--out docs]
    [--repeats N] [--seed S] [--duration SECONDS] [--warmup SECONDS] [--allow-mixed-commits]
    [--generated N]

Runs every selected scenario against every selected contender on the lab N times (default
5; one run at a time, from freshly reset node state, in rounds shuffled by the seed; a
steady run's trace drawn from the seed and its round), then writes <out>/placement.md,
<out>/placement/*.png, one file per run under <out>/placement/runs/ (the raw timings and
bindings) and <out>/placement/results.json, the index naming them (store.py);
`--from-results` renders the report again from such an index without a lab.
`--generated N` adds N scenarios drawn from the seed (benchmarks/placement/generator.py,
gen-<seed>-1 .. gen-<seed>-N; their files are written to <out>/placement/generated/ so the
report can be rendered again), and the report sums them up against stock. It is a
measurement: the exit status is 0
when goals are missed (the report says so), non-zero only when something broke.

Use the lab lock: `flock /tmp/loadwise-lab.lock python -m benchmarks.placement`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.placement import (
    generator,
    optimum,
    report,
    scenario,
    steady_measures,
    store,
)
from benchmarks.placement.exceptions import PlacementError
from benchmarks.placement.one_run import run
from benchmarks.placement.runner import (
    RunResult,
    cleanup,
    log_line,
    provenance,
    run_order,
)
from lab import session


def _load(path: Path) -> tuple[str, list[str], list[RunResult]]:
    return store.load(path)


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
    contender not run again (e.g. a contender whose build came later). Each run is written
    to a file of its own as it ends and `results_file`, the index, names it (store.py)."""
    from benchmarks.placement.contenders import CONTENDERS, available

    started = f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} (commit {report.commit()})"
    names = wanted or list(CONTENDERS)
    unknown = [n for n in names if n not in CONTENDERS]
    if unknown:
        raise PlacementError(f"unknown contenders {unknown} (have: {', '.join(CONTENDERS)})")
    notes: list[str] = []
    results: list[RunResult] = []
    idx = store.Index(started, notes, [], [])
    if append and results_file.exists():
        old_idx = store.read_index(results_file)
        started = f"{old_idx.started}, then {started}"
        rerun = [(s.name, n) for s in scenarios for n in names]
        idx = store.keep(old_idx, results_file.parent, rerun)
        idx.started = started
        _, _, results = store.load_index(results_file, idx)
        notes = [n for n in idx.notes if not any(n.startswith(f"{c} not run") for c in names)]
        idx.notes = notes
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
                store.append(results_file, idx, results[-1])
        finally:
            cleanup(lab)
    return started, notes, results


def _generated(
    count: int | None, seed: int, duration: float | None, directory: Path
) -> list[scenario.Scenario]:
    """gen-<seed>-1 .. gen-<seed>-<count>, drawn for `duration` (the generator's default
    without one), each written to `directory` as the report's copy; [] without a count."""
    if not count:
        return []
    drawn = generator.generate_many(count, seed, duration=duration or generator.DURATION)
    generator.write(drawn, directory)
    return [g.scenario for g in drawn]


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
        help="seed of the run order, the steady traces and the --generated scenarios "
        "(default: from the clock; recorded in results.json)",
    )
    ap.add_argument(
        "--allow-mixed-commits",
        action="store_true",
        help="report results measured at different commits together (refused otherwise)",
    )
    ap.add_argument(
        "--duration",
        type=float,
        help="seconds of every selected steady scenario's stream, instead of its file's "
        "steady.duration_seconds (recorded in each run)",
    )
    ap.add_argument(
        "--warmup",
        type=float,
        default=steady_measures.WARMUP,
        help="seconds at the start of a steady stream left out of its measures "
        f"(default {steady_measures.WARMUP:g}; stated in the report)",
    )
    ap.add_argument(
        "--optimum-seconds",
        type=float,
        default=optimum.TIME_LIMIT,
        help="the no-migration optimum's time limit per run and resource "
        f"(default {optimum.TIME_LIMIT:g}; the gap is reported when not proven)",
    )
    ap.add_argument(
        "--generated",
        type=_positive,
        metavar="N",
        help="also run N scenarios drawn from --seed (gen-<seed>-1 .. gen-<seed>-N; only "
        "those unless --scenarios is given)",
    )
    ap.add_argument(
        "--generated-seed",
        type=int,
        metavar="S",
        help="draw the --generated scenarios from S instead of --seed: rounds with seeds of "
        "their own (run order, traces) of the same drawn scenarios",
    )
    a = ap.parse_args(argv)
    try:
        if a.warmup < 0 or a.optimum_seconds <= 0:
            raise PlacementError("--warmup must be >= 0 and --optimum-seconds > 0")
        if a.generated_seed is not None and not a.generated:
            raise PlacementError("--generated-seed needs --generated N")
        gen_dir = a.out / "placement" / "generated"
        # generated scenarios: the report's own copies first, then the development set
        found = [gen_dir, generator.DEV_DIR]
        seed = a.seed if a.seed is not None else time.time_ns() % 2**31
        if a.from_results:
            _, notes, results = _load(a.from_results)
            names = list(dict.fromkeys(r.scenario for r in results))
            found.insert(0, a.from_results.parent / "generated")
            scenarios = scenario.select(a.scenarios or names, also=found)
        else:
            scenarios = []
            if a.scenarios or not a.generated:
                scenarios = scenario.select(a.scenarios, also=found)
            if a.duration is not None:
                scenarios = [s.with_duration(a.duration) if s.steady else s for s in scenarios]
            drawn_from = seed if a.generated_seed is None else a.generated_seed
            scenarios += _generated(a.generated, drawn_from, a.duration, gen_dir)
            _, notes, results = measure(
                scenarios,
                a.contenders,
                a.out / "placement" / "results.json",
                append=a.append,
                workdir=a.workdir,
                allow_mixed_commits=a.allow_mixed_commits,
                repeats=a.repeats,
                seed=seed,
            )
            order = [s.name for s in scenarios]
            scenarios += [
                s
                for s in scenario.select(dict.fromkeys(r.scenario for r in results), also=found)
                if s.name not in order
            ]
        md = report.write(
            a.out,
            scenarios,
            results,
            notes=notes + a.note,
            allow_mixed_commits=a.allow_mixed_commits,
            steady=steady_measures.Settings(a.warmup, a.optimum_seconds),
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
