"""docs/placement.md's per-resource tables of a steady scenario: the measures after the
warm-up (steady_measures.py) beside the optima over each run's own trace (optimum.py).

Every figure is the median over the contender's runs (min-max), as in the other tables.
A gap is taken per run, the contender's figure minus the optimum of that run's trace, and
then its median: a paired figure, the optimum differing from run to run as the traces do.

The no-migration search of a run starts from, among others, the placements of the other
contenders of its round (the runs that recorded the same trace key: trace.py; optimum.py),
so a contender's gap is also against what its peers did on its own trace.

The no-migration optimum costs seconds of solver time per run and resource, so its
answers are kept in a cache file beside the report (`OptimumCache`), keyed by the run
file's name (store.run_name), the resource, the warm-up and the peers' run files; a
render reuses them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.placement import optimum
from benchmarks.placement.formatting import num, spread
from benchmarks.placement.runner import RunResult
from benchmarks.placement.scenario import Scenario
from benchmarks.placement.steady_measures import (
    OVERRIDE_POINTS,
    READING_INTERVAL,
    RESOURCES,
    Overrides,
    PredictionError,
    Settings,
    SteadyMeasures,
    Timeline,
    hotter_mean,
    measure,
    overrides,
    prediction_error,
)
from benchmarks.placement.steady_report import timeline_of
from benchmarks.placement.store import run_name
from benchmarks.placement.trace import recorded_key


class OptimumCache:
    """Optima already computed, in a JSON file (None: kept in memory only)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.data: dict[str, dict[str, Any]] = {}
        if path is not None and path.exists():
            self.data = json.loads(path.read_text())

    def get(
        self,
        r: RunResult,
        tl: Timeline,
        resource: str,
        settings: Settings,
        peers: Mapping[str, Mapping[optimum.ArrivalKey, str]] | None = None,
        *,
        unforeseen: bool = False,
    ) -> tuple[float | None, optimum.NoMigration]:
        """The per-instant optimum (None for ``optimum.HOTTER``: not solved) and the
        no-migration one of `r`'s trace started from `peers` too (placements by run file
        name; ``unforeseen``: the pods bound before the first background change kept where
        the run put them), computed when the cache has none for this warm-up and these
        peers, or one unproven under a shorter time limit."""
        peers = peers or {}
        key = f"{run_name(r)}|{resource}|warmup={settings.warmup:g}"
        if peers:
            key += "|peers=" + ",".join(sorted(peers))
        if unforeseen:
            key += "|unforeseen"
        got = self.data.get(key)
        # an answer from before the start was recorded is solved again
        if (
            got is not None
            and "start" in got["no_migration"]
            and (got["no_migration"]["proven"] or got["time_limit"] >= settings.optimum_seconds)
        ):
            known = got["per_instant"]
            nm = optimum.NoMigration.from_json(got["no_migration"])
            return (None if known is None else float(known)), nm
        inst = None
        if resource != optimum.HOTTER and not unforeseen:
            inst = optimum.per_instant(tl, resource, settings.warmup)
        nm = optimum.no_migration(
            tl,
            resource,
            settings.warmup,
            time_limit=settings.optimum_seconds,
            peers=[peers[k] for k in sorted(peers)],
            unforeseen=unforeseen,
        )
        self.data[key] = {
            "per_instant": inst,
            "no_migration": nm.to_json(),
            "time_limit": settings.optimum_seconds,
        }
        if self.path is not None:  # after each: an interrupted render keeps what it solved
            self.path.write_text(json.dumps(self.data, indent=1, sort_keys=True) + "\n")
        return inst, nm


@dataclass(frozen=True)
class RunFigures:
    contender: str
    measures: SteadyMeasures
    per_instant: dict[str, float]
    no_migration: dict[str, optimum.NoMigration]  # per resource and optimum.HOTTER
    traced: bool  # the run's trace was drawn from its seed (False: the one legacy trace)
    hotter: float  # steady_measures.hotter_mean
    timeline: Timeline  # the run as measured, for a report's further measures
    unforeseen: optimum.NoMigration | None = None
    """The no-migration optimum of ``optimum.HOTTER`` with the pods bound before the first
    background change where the run put them; None without a change after the first pod."""


def _starts(nms: Sequence[optimum.NoMigration]) -> str:
    """Where the best placement of each no-migration programme came from, in a sentence."""
    n = Counter(nm.start for nm in nms)
    return (
        "Each search starts from the best of the run's own placement, a greedy one in "
        "hindsight and the placements of the other contenders of its round mapped onto its "
        f"trace (a workload's k-th pod to be placed is the same pod in every run); the value "
        f"shown is the run's own placement in {n['own']}, the greedy one in {n['greedy']}, "
        f"another contender's in {n['peer']} and the solver's improvement on the best of "
        f"them in {n['solver']}."
    )


def _round(r: RunResult) -> str | None:
    """The trace a run ran: its recorded key (scenario, seed, round: trace.py), the same for
    every contender of a round; None for a run from before per-run traces (they all
    replayed one stream, but their rounds are not known)."""
    return recorded_key(r.trace)


def figures(
    scenario: Scenario, results: Sequence[RunResult], settings: Settings, cache: OptimumCache
) -> list[RunFigures]:
    """Each run with a stream longer than the warm-up, measured, with its optima (each
    run's no-migration search started from its round's other runs too)."""
    timelines = []
    rounds: dict[str, dict[str, dict[optimum.ArrivalKey, str]]] = {}
    for r in results:
        tl = timeline_of(scenario, r)
        if tl is None or not tl.end > settings.warmup or not tl.stays:
            continue
        timelines.append((r, tl))
        if (key := _round(r)) is not None:
            rounds.setdefault(key, {})[run_name(r)] = optimum.placement_of(tl.stays)
    out = []
    for r, tl in timelines:
        key = _round(r)
        peers = {n: p for n, p in rounds.get(key, {}).items() if n != run_name(r)} if key else {}
        opts = {res: cache.get(r, tl, res, settings, peers) for res in (*RESOURCES, optimum.HOTTER)}
        unforeseen = None
        if optimum.first_change(tl) is not None:  # a change after the first pod
            unforeseen = cache.get(r, tl, optimum.HOTTER, settings, peers, unforeseen=True)[1]
        out.append(
            RunFigures(
                r.contender,
                measure(tl, settings.warmup),
                {res: inst for res, (inst, _) in opts.items() if inst is not None},
                {res: o[1] for res, o in opts.items()},
                r.trace is not None,
                hotter_mean(tl, settings.warmup),
                tl,
                unforeseen,
            )
        )
    return out


HEADER = [
    "| contender | n | resource | hottest node, mean % | hottest node, p99 % "
    "| drift, points | s > 80 % | s > 100 % | optimum per instant, mean % | gap, points "
    "| optimum without migration, mean % | gap, points |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
]


def _by(runs: Sequence[RunFigures]) -> dict[str, list[RunFigures]]:
    by: dict[str, list[RunFigures]] = {}
    for f in runs:
        by.setdefault(f.contender, []).append(f)
    return by


def gap(figure: float, best: float) -> float:
    """The contender's figure above the optimum; 0 where they differ by rounding alone (a
    contender at the optimum otherwise shows -0.0). A real negative stays visible: it
    would be a wrong optimum."""
    return 0.0 if abs(figure - best) < 1e-9 else figure - best


def _row(name: str, mine: Sequence[RunFigures], res: str) -> str:
    pct, one, pts = num(), num(1, "{:.0f}"), num(100, "{:.1f}")

    def cell(values: Sequence[float], fmt: Callable[[float], str]) -> str:
        return spread(values, fmt)

    hot = [f.measures.of(res) for f in mine]
    inst = [f.per_instant[res] for f in mine]
    nm = [f.no_migration[res].value for f in mine]
    return (
        f"| {name} | {len(mine)} | {'CPU' if res == 'cpu' else 'memory'} | "
        + " | ".join(
            [
                cell([h.mean for h in hot], pct),
                cell([h.p99 for h in hot], pct),
                cell([h.drift for h in hot], pts),
                cell([h.over_80_seconds for h in hot], one),
                cell([h.over_100_seconds for h in hot], one),
                cell(inst, pct),
                cell([gap(h.mean, o) for h, o in zip(hot, inst, strict=True)], pts),
                cell(nm, pct),
                cell([gap(h.mean, o) for h, o in zip(hot, nm, strict=True)], pts),
            ]
        )
        + " |"
    )


HOTTER_LABEL = "the hotter of the two"


def _hotter_row(name: str, mine: Sequence[RunFigures]) -> str:
    """The higher of the hottest CPU and memory at each instant, time-averaged, beside the
    one placement best on it (``optimum.HOTTER``); the other columns are per resource."""
    pct, pts = num(), num(100, "{:.1f}")
    nm = [f.no_migration[optimum.HOTTER].value for f in mine]
    gaps = [gap(f.hotter, o) for f, o in zip(mine, nm, strict=True)]
    cells = [spread([f.hotter for f in mine], pct), *["-"] * 6, spread(nm, pct), spread(gaps, pts)]
    return f"| {name} | {len(mine)} | {HOTTER_LABEL} | " + " | ".join(cells) + " |"


def table(runs: Sequence[RunFigures]) -> list[str]:
    """Per contender and resource: the hottest node after the warm-up, the optima, the gaps;
    and the hotter of the two resources beside the one placement best on it."""
    out = list(HEADER)
    for name, mine in _by(runs).items():
        out += [_row(name, mine, res) for res in RESOURCES]
        out.append(_hotter_row(name, mine))
    return out


# More phases than this are a ramp (a generated background that grows step by step): one
# column each made a 30-column table no one reads; the drift column and the plot show the
# course instead.
MAX_PHASE_COLUMNS = 6


def phase_table(runs: Sequence[RunFigures]) -> list[str]:
    """Per contender: the replica share, and per phase the hottest node's mean CPU and
    memory (only where the scenario has from two to ``MAX_PHASE_COLUMNS`` phases; more
    are said in a line below the table)."""
    labels = list(dict.fromkeys(p.label for f in runs for p in f.measures.phases))
    ramp = len(labels) > MAX_PHASE_COLUMNS
    out = _phase_rows(runs, labels if 2 <= len(labels) <= MAX_PHASE_COLUMNS else [])
    if ramp:
        out += [
            "",
            f"The backgrounds change {len(labels) - 1} times (a ramp): {len(labels)} phases, "
            f"too many for a column each (at most {MAX_PHASE_COLUMNS}); the drift column "
            "above and the plot show the course over time.",
        ]
    return out


def _phase_rows(runs: Sequence[RunFigures], labels: list[str]) -> list[str]:
    """The table: a row per contender, a column per phase of ``labels``."""
    head = (
        "| contender | n | largest share of a workload on one node, time-averaged % "
        "| s all on one node, another with room |"
    )
    head += "".join(f" {lab}: hottest CPU / memory, mean % |" for lab in labels)
    out = [head, "|---|---|---|---|" + "---|" * len(labels)]
    pct = num()
    for name, mine in _by(runs).items():
        shares = [f.measures.share for f in mine if f.measures.share is not None]
        cells = [
            spread(shares, num(100, "{:.0f}")),
            spread([f.measures.piled_seconds for f in mine], num(1, "{:.0f}")),
        ]
        for lab in labels:
            ph = [p for f in mine for p in f.measures.phases if p.label == lab]
            cpu, mem = spread([p.cpu for p in ph], pct), spread([p.memory for p in ph], pct)
            cells.append(f"{cpu} / {mem}")
        out.append(f"| {name} | {len(mine)} | " + " | ".join(cells) + " |")
    return out


def _unforeseen_lines(runs: Sequence[RunFigures]) -> list[str]:
    """``unforeseen_table`` with what it means, and a blank line; [] without it."""
    table_ = unforeseen_table(runs)
    if not table_:
        return []
    first = min(
        (t for f in runs if (t := optimum.first_change(f.timeline)) is not None), default=0.0
    )
    return [
        "The optimum without migration above knows the whole trace in advance, the background "
        f"changes too: it can place the pods bound before the first change ({first:.0f} s) "
        "for a change no scheduler could see coming. Beside it, the best placement that never "
        "moves a pod and keeps those pods where the run put them, on the hotter of the two "
        "(a bound on what the run's later choices could have reached; each run's own, its "
        "start differing from run to run):",
        "",
        *table_,
        "",
    ]


def unforeseen_table(runs: Sequence[RunFigures]) -> list[str]:
    """Per contender: the hotter of the two beside the no-migration optimum that cannot see
    the first background change coming (``RunFigures.unforeseen``), and the gap; [] when no
    run has one."""
    if not any(f.unforeseen for f in runs):
        return []
    out = [
        f"| contender | n | {HOTTER_LABEL}, mean % | optimum without migration, the pods bound "
        "before the first change where the run put them, mean % | gap, points |",
        "|---|---|---|---|---|",
    ]
    pct, pts = num(), num(100, "{:.1f}")
    for name, mine in _by(runs).items():
        have = [(f.hotter, f.unforeseen.value) for f in mine if f.unforeseen is not None]
        if not have:
            continue
        cells = [
            spread([h for h, _ in have], pct),
            spread([u for _, u in have], pct),
            spread([gap(h, u) for h, u in have], pts),
        ]
        out.append(f"| {name} | {len(have)} | " + " | ".join(cells) + " |")
    return out


def lines(
    scenario: Scenario, results: Sequence[RunResult], settings: Settings, cache: Path | None
) -> list[str]:
    """The per-resource section of a steady scenario, [] when no run outlasts the warm-up."""
    runs = figures(scenario, results, settings, OptimumCache(cache))
    if not runs:
        return []
    nms = [nm for f in runs for nm in f.no_migration.values()]
    proven = sum(1 for nm in nms if nm.proven)
    worst = max((nm.gap for nm in nms), default=0.0)
    legacy = sum(1 for f in runs if not f.traced)
    out = [
        f"Per resource, after a {settings.warmup:g} s warm-up (the measured span is the "
        "rest of the stream); the optima are over each run's own trace, gaps per run in "
        "percentage points:",
        "",
        *table(runs),
        "",
        *phase_table(runs),
        "",
        *_unforeseen_lines(runs),
        f"- Optimum without migration: proven optimal in {proven} of {len(nms)} programmes "
        f"(run x resource, and {HOTTER_LABEL}); the others stopped at the "
        f"{settings.optimum_seconds:g} s limit "
        f"with the best placement found, at most {100 * worst:.2f} % above the solver's "
        "lower bound: there the optimum lies between that bound and the value shown, so "
        "the gap to it is at least the gap shown. "
        f"{_starts(nms)}"
        if proven < len(nms)
        else f"- Optimum without migration: proven optimal in all {len(nms)} programmes "
        f"(run x resource, and {HOTTER_LABEL}). {_starts(nms)}",
        f"- {HOTTER_LABEL.capitalize()}: at each instant the higher of the hottest node's CPU "
        "and its memory; its optimum is one placement judged on both, which each "
        "resource's own optimum need not be (a lower CPU can cost memory).",
        "- Freshness of the load readings at the decisions: in the loadwise extender's "
        "decision logs (`python -m benchmarks.placement.prediction`), not in this report.",
    ]
    if legacy:
        out.append(
            f"- {legacy} of {len(runs)} runs predate per-run traces: they replay the one "
            "trace of the scenario (lifetimes seeded by scenario and workload name, a fixed "
            "ramp), so their spread is the lab's noise on that trace, not a spread over days."
        )
    return [*out, ""]


def prediction_errors(
    scenario: Scenario,
    results: Sequence[RunResult],
    decisions: Mapping[str, Sequence[Mapping[str, object]]],
    settings: Settings,
    lags: Sequence[float] = (0.0, READING_INTERVAL),
) -> dict[str, list[PredictionError]]:
    """Per contender with decision records (``decisions``: contender -> its records), the
    prediction error of each of its runs at each lag (steady_measures.prediction_error)."""
    out: dict[str, list[PredictionError]] = {}
    for r in results:
        records = decisions.get(r.contender)
        tl = timeline_of(scenario, r)
        if not records or tl is None or not tl.end > settings.warmup:
            continue
        for lag in lags:
            got = prediction_error(tl, records, lag=lag, warmup=settings.warmup)
            if got.decisions:
                out.setdefault(r.contender, []).append(got)
    return out


def error_table(errors: Mapping[str, Sequence[PredictionError]]) -> list[str]:
    """Per contender and lag: the mean absolute error of the predicted use of the node each
    pod went to, CPU and memory, in points of capacity (median over runs, min-max)."""
    out = [
        "| contender | compared | decisions | CPU error, points | memory error, points |",
        "|---|---|---|---|---|",
    ]
    pts = num(1, "{:.1f}")
    for name, errs in errors.items():
        for lag in sorted({e.lag for e in errs}):
            mine = [e for e in errs if e.lag == lag]
            when = "at the binding" if lag == 0 else f"{lag:g} s later"
            cells = [spread([e.decisions for e in mine], num(1, "{:.0f}"))]
            for res in RESOURCES:
                values = [v for e in mine if (v := e.of(res)) is not None]
                cells.append(spread(values, pts) if values else "-")
            out.append(f"| {name} | {when} | " + " | ".join(cells) + " |")
    return out


def override_counts(
    results: Sequence[RunResult], decisions: Mapping[str, Sequence[Mapping[str, object]]]
) -> dict[str, list[Overrides]]:
    """Per contender with decision records, each run's ``steady_measures.overrides``."""
    out: dict[str, list[Overrides]] = {}
    for r in results:
        records = decisions.get(r.contender)
        if not records:
            continue
        got = overrides(records, r.placed)
        if got.decisions:
            out.setdefault(r.contender, []).append(got)
    return out


def override_table(counts: Mapping[str, Sequence[Overrides]]) -> list[str]:
    """Per contender: decisions, how many pods kube-scheduler bound elsewhere than the
    extender's favourite, how many onto a node the extender predicted hotter, and by how
    much (medians over runs, min-max)."""
    out = [
        "| contender | decisions | bound elsewhere than the favourite | onto a node predicted"
        f" {OVERRIDE_POINTS:g}+ points hotter | by, points |",
        "|---|---|---|---|---|",
    ]
    whole = num(1, "{:.0f}")
    for name, runs in counts.items():
        points = [o.points for o in runs if o.points is not None]
        cells = [
            spread([o.decisions for o in runs], whole),
            spread([o.elsewhere for o in runs], whole),
            spread([o.hotter for o in runs], whole),
            spread(points, num(1, "{:.1f}")) if points else "-",
        ]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out
