"""The extender's prediction error per scenario, from a placement run's results and the
decision logs its loadwise contenders wrote (extender/decisionlog.py).

    python -m benchmarks.placement.prediction --results OUT/results.json --workdir WORK

``WORK`` is the ``--workdir`` the runs were given: each run's loadwise extender appends its
decisions to ``<contender>.decisions.jsonl`` in that run's directory under it (contenders.py);
a contender's records are read from all of them (pods are joined by name, unique per run).
Prints, per steady scenario, the mean absolute error of the predicted use of the node each
pod went to, at its binding and one reading interval later (steady_tables.error_table).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.placement import scenario as scenarios
from benchmarks.placement import store
from benchmarks.placement.steady_measures import Settings, read_decisions
from benchmarks.placement.steady_tables import error_table, prediction_errors

__all__ = ["decision_logs", "main"]


def decision_logs(workdir: Path, contender: str) -> list[Path]:
    """``contender``'s decision logs anywhere under ``workdir`` (one per run directory)."""
    return sorted(workdir.rglob(f"{contender}.decisions.jsonl"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.placement.prediction")
    ap.add_argument("--results", type=Path, required=True, help="the runs' results.json")
    ap.add_argument("--workdir", type=Path, required=True, help="the runs' --workdir")
    ap.add_argument("--warmup", type=float, default=Settings().warmup)
    a = ap.parse_args(argv)
    _, _, runs = store.load(a.results)
    settings = Settings(warmup=a.warmup)
    contenders = sorted({r.contender for r in runs})
    decisions = {
        c: [rec for p in paths for rec in read_decisions(str(p))]
        for c in contenders
        if (paths := decision_logs(a.workdir, c))
    }
    if not decisions:
        print(f"no decision log under {a.workdir} for {', '.join(contenders)}")
        return 1
    known = scenarios.available()
    for name in sorted({r.scenario for r in runs}):
        path = known.get(name) or next(a.results.parent.rglob(f"{name}.yaml"), None)
        if path is None:
            print(f"## {name}: its scenario file is not found; skipped\n")
            continue
        sc = scenarios.load(path)
        if sc.steady is None:
            continue
        errors = prediction_errors(sc, [r for r in runs if r.scenario == name], decisions, settings)
        print(f"## {name}\n")
        print("\n".join(error_table(errors)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
