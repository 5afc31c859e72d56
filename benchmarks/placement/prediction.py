"""The extender's prediction error per scenario, from a placement run's results and the
decision logs its loadwise contenders wrote (extender/decisionlog.py).

    python -m benchmarks.placement.prediction --results OUT/results.json --workdir WORK

``WORK`` is the ``--workdir`` the runs were given: each run's loadwise extender appends its
decisions to ``<contender>.decisions.jsonl`` in that run's directory under it (contenders.py);
a contender's records are read from all of them (pods are joined by name, unique per run).
Prints how fresh the load readings behind each run's decisions were (a run that read stalled
metrics is flagged and left out of the rest), then, per steady scenario, the mean absolute
error of the predicted use of the node each pod went to, at its binding and one reading
interval later (steady_tables.error_table), and how often kube-scheduler bound a pod elsewhere
than the extender's favourite (steady_tables.override_table).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchmarks.placement import scenario as scenarios
from benchmarks.placement import store
from benchmarks.placement.steady_measures import (
    STALLED_SECONDS,
    Settings,
    freshness,
    read_decisions,
)
from benchmarks.placement.steady_tables import (
    error_table,
    override_counts,
    override_table,
    prediction_errors,
)

__all__ = ["decision_logs", "freshness_table", "main"]


def decision_logs(workdir: Path, contender: str) -> list[Path]:
    """``contender``'s decision logs anywhere under ``workdir`` (one per run directory)."""
    return sorted(workdir.rglob(f"{contender}.decisions.jsonl"))


def freshness_table(
    logs: Mapping[str, Mapping[Path, Sequence[Mapping[str, object]]]], workdir: Path
) -> list[str]:
    """Per contender and run (decision log), how old the load readings its decisions read
    were (``steady_measures.freshness``); a stalled run is marked, and left out of the error
    tables that follow."""
    lines = [
        "Freshness of the load readings at each decision (per decision the oldest reading among",
        f"its candidates; a run is stalled past {STALLED_SECONDS:.0f} s, and left out below):",
        "",
        "| contender | run | decisions | median age, s | oldest, s | stalled |",
        "|---|---|---|---|---|---|",
    ]
    for contender, by_log in sorted(logs.items()):
        for path, records in sorted(by_log.items()):
            f = freshness(records)
            median = "not recorded" if f.median is None else f"{f.median:.1f}"
            worst = "not recorded" if f.worst is None else f"{f.worst:.1f}"
            run = path.parent.relative_to(workdir).as_posix()
            lines.append(
                f"| {contender} | {run} | {f.decisions} | {median} | {worst} | "
                f"{'**yes**' if f.stalled else 'no'} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.placement.prediction")
    ap.add_argument("--results", type=Path, required=True, help="the runs' results.json")
    ap.add_argument("--workdir", type=Path, required=True, help="the runs' --workdir")
    ap.add_argument("--warmup", type=float, default=Settings().warmup)
    a = ap.parse_args(argv)
    _, _, runs = store.load(a.results)
    settings = Settings(warmup=a.warmup)
    contenders = sorted({r.contender for r in runs})
    logs = {c: {p: read_decisions(str(p)) for p in decision_logs(a.workdir, c)} for c in contenders}
    if not any(logs.values()):
        print(f"no decision log under {a.workdir} for {', '.join(contenders)}")
        return 1
    print("\n".join(freshness_table(logs, a.workdir)) + "\n")
    # a run whose decisions read stalled metrics is flagged above and not averaged in
    decisions = {
        c: [rec for records in by_log.values() if not freshness(records).stalled for rec in records]
        for c, by_log in logs.items()
        if by_log
    }
    known = scenarios.available()
    for name in sorted({r.scenario for r in runs}):
        path = known.get(name) or next(a.results.parent.rglob(f"{name}.yaml"), None)
        if path is None:
            print(f"## {name}: its scenario file is not found; skipped\n")
            continue
        sc = scenarios.load(path)
        if sc.steady is None:
            continue
        mine = [r for r in runs if r.scenario == name]
        errors = prediction_errors(sc, mine, decisions, settings)
        print(f"## {name}\n")
        print("\n".join(error_table(errors)) + "\n")
        print("\n".join(override_table(override_counts(mine, decisions))) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
