"""docs/placement.md and its plots, from run results: the measures per contender, the
offline bound, and the issue's goals judged PASS or MISSED with the figures behind it."""

from __future__ import annotations

import math
import os
import platform
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.placement import (
    generated_report,
    paired,
    steady_report,
    steady_section,
    versions,
)
from benchmarks.placement.exceptions import PlacementError
from benchmarks.placement.formatting import heading, median, num, spread
from benchmarks.placement.measures import (
    HOT_THRESHOLD,
    OPTIMUM_WORK,
    Bound,
    Decisions,
    NodeLoad,
    Optimum,
    Summary,
    Timing,
    decisions,
    exact_optimum,
    largest_share,
    lower_bound,
    moved_back,
    node_loads,
    optimum_work,
    replacements,
    summarise,
    timing,
)
from benchmarks.placement.runner import RunResult
from benchmarks.placement.scenario import Goals, Scenario
from benchmarks.placement.steady_measures import Settings

if TYPE_CHECKING:
    from matplotlib.figure import Figure

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Row:
    """One contender's figures in one scenario (or why there are none)."""

    contender: str
    loads: list[NodeLoad] | None
    summary: Summary | None
    timing: Timing | None
    bound_pods: int
    deleted: int
    error: str | None
    moved_back: int = 0  # replacements of evicted pods bound where the pod was evicted from
    pending: dict[str, int] = field(default_factory=dict)  # PodScheduled message -> pods
    decisions: Decisions | None = None  # the scheduler's own pace, from its metrics
    largest_share: float | None = None  # most of one workload's replicas on one node
    # the run's round (invocation seed, repeat, commit): runs of one round are paired
    round: tuple[int | None, int | None, str | None] | None = None


# The tables' order: the baseline, loadwise's policies, then Trimaran's plugins.
ORDER = (
    "stock",
    "stock+descheduler",
    "loadwise-least-used",
    "loadwise-least-used-lw",
    "loadwise-tlp",
    "loadwise-lvrb",
    "trimaran-tlp",
    "trimaran-tlp-w3",
    "trimaran-tlp-w10",
    "trimaran-lvrb",
    "trimaran-lvrb-w3",
    "trimaran-lvrb-w10",
)


def ordered(results: Sequence[RunResult], scenario: str) -> list[RunResult]:
    """The results of one scenario in ORDER (contenders not in it last, by name)."""
    mine = [r for r in results if r.scenario == scenario]

    def key(r: RunResult) -> tuple[int, str]:
        return (ORDER.index(r.contender) if r.contender in ORDER else len(ORDER), r.contender)

    return sorted(mine, key=key)


def row(scenario: Scenario, result: RunResult) -> Row:
    """The figures of one run. Pods a ReplicaSet named are matched to their workload by
    `result.workloads`; the replacements of evicted pods count in the final placement but
    not in the timing (they were created later, by the eviction)."""
    usage = scenario.pod_usage()
    names = {w.name for w in scenario.workloads}
    usage.update({p: scenario.workload(w).usage for p, w in result.workloads.items() if w in names})
    bindings = {p: n for p, n in result.bindings.items() if p in usage}
    loads = summary = None
    if bindings:
        loads = node_loads(scenario.all_nodes(), usage, bindings)
        summary = summarise(loads)
    replicas = {w.name: w.replicas for w in scenario.workloads}
    pairs = replacements(result.evictions, result.workloads, result.created, replicas)
    owner = {p: w.name for w in scenario.workloads for p in w.pod_names()}
    owner.update({p: w for p, w in result.workloads.items() if w in names})
    created = {p: t for p, t in result.created.items() if p not in pairs}
    bound = {p: t for p, t in result.bound_at.items() if p not in pairs}
    return Row(
        result.contender,
        loads,
        summary,
        # A backlog run is timed from its scheduler's launch; results from before backlog
        # mode existed have none and keep their creation-paced timing.
        timing(created, bound, result.scheduler_started if scenario.backlog else None),
        len(bindings),
        len(result.deleted),
        result.error,
        moved_back(pairs, result.placed),
        dict(result.pending),
        decisions(
            result.first_decided,
            result.decided_at,
            scenario.pod_count,
            result.algorithm_seconds,
            result.algorithm_pods,
            result.decide_cpu_seconds,
            result.extender_cpu_seconds,
        ),
        largest_share(bindings, owner, replicas),
        (result.seed, result.repeat, result.commit),
    )


def bound_of(scenario: Scenario) -> Bound:
    return lower_bound(scenario.all_nodes(), scenario.pod_usage().values())


def optimum_of(scenario: Scenario) -> Optimum | None:
    """The exact whole-pod optimum, or None where it is too large to compute."""
    return exact_optimum(scenario.all_nodes(), scenario.pod_usage().values())


def optimum_lines(scenario: Scenario, bound: Bound, opt: Optimum | None) -> list[str]:
    """The exact optimum beside the bound: its value, how far the bound is below it, and
    for a few nodes a placement that reaches it."""
    if opt is None:
        work = optimum_work(scenario.all_nodes(), scenario.pod_usage().values())
        return [
            f"Exact optimum: not computed (a feasibility check would take {work:,} steps, "
            f"over the limit of {OPTIMUM_WORK:,}); the lower bound stands alone."
        ]
    nodes = scenario.all_nodes()
    line = (
        f"Exact optimum (whole pods, the maximum over CPU and memory): "
        f"**{100 * opt.value:.2f} %**, against the lower bound's {100 * bound.overall:.2f} %"
    )
    if len(nodes) <= 10:
        where = ", ".join(f"{n.name} {sum(c)}" for n, c in zip(nodes, opt.counts, strict=True))
        line += f"; a placement reaching it: {where} pods"
    return [line + "."]


# ------------------------------------------------------------------ goals


@dataclass(frozen=True)
class Verdict:
    contender: str
    goal: str
    passed: bool | None  # None: not decided (a contender missing, or the runs undecided)
    detail: str

    @property
    def word(self) -> str:
        if self.passed is None and self.detail.startswith(UNDECIDED):
            return "UNDECIDED"
        return {True: "PASS", False: "MISSED", None: "n/a"}[self.passed]


# The start of a verdict's detail when its paired rounds do not decide the goal.
UNDECIDED = "undecided"


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _complete(r: Row | None, total: int) -> bool:
    return r is not None and r.summary is not None and r.bound_pods == total


def _hottest(r: Row) -> str:
    assert r.loads is not None and r.summary is not None
    n = next(x for x in r.loads if x.name == r.summary.hottest)
    res = "memory" if n.memory >= n.cpu else "CPU"
    return (
        f"hottest {n.name} ({res} {_pct(n.peak)}, {n.pods} pods{', marked hot' if n.hot else ''})"
    )


@dataclass(frozen=True)
class Group:
    """One contender's runs of one scenario, one Row per repeat."""

    contender: str
    runs: tuple[Row, ...]

    @property
    def n(self) -> int:
        return len(self.runs)

    def complete(self, total: int) -> list[Row]:
        return [r for r in self.runs if _complete(r, total)]


def grouped(rows: Sequence[Row]) -> list[Group]:
    """The rows by contender, in the order the contenders first appear."""
    by: dict[str, list[Row]] = {}
    for r in rows:
        by.setdefault(r.contender, []).append(r)
    return [Group(c, tuple(rs)) for c, rs in by.items()]


def representative(done: Sequence[Row]) -> Row:
    """The complete run whose maximum utilisation is the median one."""
    peaks = sorted(done, key=lambda r: r.summary.max_util if r.summary else 0.0)
    return peaks[max(0, math.ceil(len(peaks) / 2) - 1)]


def _judged(values: Sequence[float], fmt: Callable[[float], str] = _pct) -> str:
    """A judged figure with how many runs it stands for."""
    if len(values) == 1:
        return f"{fmt(values[0])} (n=1)"
    lo, hi = fmt(min(values)), fmt(max(values))
    return f"{fmt(median(values))} (median of {len(values)}, range {lo}-{hi})"


def _peaks(rows: Sequence[Row]) -> list[float]:
    return [r.summary.max_util for r in rows if r.summary is not None]


def _cpu_peaks(rows: Sequence[Row]) -> list[float]:
    return [r.summary.max_cpu for r in rows if r.summary is not None]


def goals(scenario: Scenario, rows: Sequence[Row], bound: Bound) -> list[Verdict]:
    """The issue's goals for every loadwise contender of the scenario, judged on the median
    over its repeats (`rows` may hold several runs per contender); a contender with a run
    that left pods unbound misses "all pods bound" and is judged on its complete runs."""
    g, total = scenario.goals, scenario.pod_count
    groups = grouped(rows)
    by = {x.contender: x for x in groups}
    stock = by.get("stock")
    stock_done = stock.complete(total) if stock else []
    trimarans = [x for x in groups if x.contender.startswith("trimaran")]
    out: list[Verdict] = []
    for x in groups:
        if not x.contender.startswith("loadwise"):
            continue
        c = x.contender
        done = x.complete(total)
        if len(done) < x.n:
            bad = [r.error or f"{r.bound_pods}/{total}" for r in x.runs if not _complete(r, total)]
            why = "; ".join(bad) if x.n == 1 else f"{len(bad)} of {x.n} runs: {'; '.join(bad)}"
            out.append(Verdict(c, "all pods bound", False, why))
            if not done:
                continue
        rep = representative(done)
        m = median(_peaks(done))
        if g.beat_stock:
            if not stock_done:
                out.append(Verdict(c, "max below stock's", None, "stock did not complete"))
            else:
                sm = median(_peaks(stock_done))
                ok = m < sm
                why = f"{_judged(_peaks(done))} vs stock {_judged(_peaks(stock_done))}"
                if not ok:
                    why += f"; {_hottest(rep)}"
                    if sm <= bound.overall + 1e-9:
                        why += "; stock is already at the lower bound"
                out.append(Verdict(c, "max below stock's", ok, why))
        if g.no_worse_than_trimaran:
            for t in trimarans:
                # TargetLoadPacking packs by CPU alone (its one target, targetUtilization,
                # is a CPU utilisation %: scheduler-plugins pkg/trimaran/targetloadpacking
                # README), so against it the contest is the hottest node's CPU.
                cpu_only = t.contender.startswith("trimaran-tlp")
                peaks = _cpu_peaks if cpu_only else _peaks
                name = f"max {'CPU ' if cpu_only else ''}<= {t.contender}'s"
                tdone = t.complete(total)
                if not tdone:
                    out.append(Verdict(c, name, None, f"{t.contender} did not complete"))
                    continue
                ok = median(peaks(done)) <= median(peaks(tdone)) + 1e-9
                why = f"{_judged(peaks(done))} vs {_judged(peaks(tdone))}"
                out.append(Verdict(c, name, ok, why if ok else f"{why}; {_hottest(rep)}"))
        if g.no_pods_on_hot:
            # Every run, not the median: one pod on the hot node in any repeat is a miss.
            hot = Counter(
                f"{n.pods} on {n.name}" for r in done for n in r.loads or [] if n.hot and n.pods
            )
            why = ", ".join(k if x.n == 1 else f"{k} ({v} of {x.n} runs)" for k, v in hot.items())
            out.append(Verdict(c, "no pod on a hot node", not hot, why or "none"))
        if g.within_bound is not None:
            lim = (1 + g.within_bound) * bound.overall
            ok = m <= lim + 1e-9
            why = f"{_judged(_peaks(done))} vs bound {_pct(bound.overall)} (limit {_pct(lim)})"
            out.append(
                Verdict(
                    c,
                    f"within {g.within_bound:.0%} of the bound",
                    ok,
                    why if ok else f"{why}; {_hottest(rep)}",
                )
            )
        out += _cost_goals(c, g, x.runs, stock.runs if stock else ())
    return out


def _per_round(rows: Sequence[Row], value: Callable[[Row], float | None]) -> dict[Hashable, float]:
    """`value` of each row that has one, keyed by the row's round."""
    out: dict[Hashable, float] = {}
    for r in rows:
        v = value(r)
        if v is not None and r.round is not None:
            out[r.round] = v
    return out


def _cost_goals(c: str, g: Goals, mine: Sequence[Row], stock: Sequence[Row]) -> list[Verdict]:
    """Throughput and p99 against stock's, paired within rounds (paired.py): decided only
    when the rounds' 95 % interval is on one side of the goal."""
    out: list[Verdict] = []
    for goal, factor in (("throughput", g.throughput_vs_stock), ("p99", g.p99_vs_stock)):
        if factor is None:
            continue
        name = (
            f"throughput >= {factor}x stock"
            if goal == "throughput"
            else (f"p99 <= {factor}x stock")
        )
        if goal == "throughput":

            def value(r: Row) -> float | None:
                return r.timing.throughput if r.timing else None
        else:

            def value(r: Row) -> float | None:
                return r.timing.p99 if r.timing else None

        p = paired.paired(_per_round(mine, value), _per_round(stock, value))
        if p is None:
            out.append(Verdict(c, name, None, "no round with timings of both"))
            continue
        ok = p.at_least(factor) if goal == "throughput" else p.at_most(factor)
        why = (
            f"per round {', '.join(f'{x:.2f}x' for x in p.ratios)}, median {p.median:.2f}x, "
            f"95 % interval {p.interval_text()}"
        )
        if ok is None and p.low is None:
            why = f"{UNDECIDED}: fewer than 3 rounds give no interval; {why}"
        elif ok is None:
            why = f"{UNDECIDED}: {why}"
        out.append(Verdict(c, name, ok, why))
    return out


def paired_cost_table(scenarios: Sequence[Scenario], results: Sequence[RunResult]) -> list[str]:
    """CPU per pod of loadwise over an extender that answers at once, paired within rounds,
    for every cost scenario that has both (empty when none has)."""
    out: list[str] = []
    for sc in scenarios:
        if sc.goals.throughput_vs_stock is None:
            continue
        rows = [row(sc, r) for r in ordered(results, sc.name)]
        for contender, baseline in paired.CPU_PAIRS:

            def cpu(r: Row) -> float | None:
                return r.decisions.cpu if r.decisions and r.decisions.cpu else None

            p = paired.paired(
                _per_round([r for r in rows if r.contender == contender], cpu),
                _per_round([r for r in rows if r.contender == baseline], cpu),
            )
            if p is None:
                continue
            verdict = {True: "PASS", False: "MISSED", None: "UNDECIDED"}[p.at_most(paired.CPU_GOAL)]
            commits = sorted({(r.round[2] or "unknown")[:7] for r in rows if r.round})
            out.append(
                f"| {sc.name} | {contender} / {baseline} | {len(p.ratios)} "
                f"| {', '.join(f'{x:.2f}' for x in p.ratios)} | {p.median:.2f} "
                f"| {p.interval_text()} | {verdict} | {', '.join(commits)} |"
            )
    if not out:
        return []
    return [
        "| scenario | ratio of CPU per pod | rounds | per round | median | 95 % interval "
        f"| goal <= {paired.CPU_GOAL:g}x | commits |",
        "|---|---|---|---|---|---|---|---|",
        *out,
    ]


def _rate(x: float) -> str:
    return f"{x:.1f} pods/s"


def _ms(x: float) -> str:
    return f"{1000 * x:.0f} ms"


# ------------------------------------------------------------------ markdown


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} cores ({model or platform.processor() or platform.machine()}), "
        f"Linux {platform.release()}, Python {platform.python_version()}; "
        f"load average when the report was written: {load}"
    )


def commit() -> str:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "extender", "benchmarks", "lab"],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return rev + (" (with uncommitted changes)" if dirty else "")


# ------------------------------------------------------------------ provenance


class MixedCommitsError(PlacementError):
    """Results measured at different commits were given to one report."""


def _short(c: str | None) -> str:
    return "unknown" if c is None else c[:7]


def by_commit(results: Sequence[RunResult]) -> dict[str | None, list[RunResult]]:
    """The results per commit they were measured at, in first-seen order; None for results
    from before the commit was recorded."""
    out: dict[str | None, list[RunResult]] = {}
    for r in results:
        out.setdefault(r.commit, []).append(r)
    return out


def check_commits(results: Sequence[RunResult], *, allow_mixed: bool = False) -> None:
    """Refuse results from more than one commit ("unknown" counts as one): a table that
    stitches them compares code that never ran side by side."""
    groups = by_commit(results)
    if len(groups) > 1 and not allow_mixed:
        which = "; ".join(
            f"{_short(c)}: {len(rs)} runs ({', '.join(sorted({r.scenario for r in rs}))})"
            for c, rs in groups.items()
        )
        raise MixedCommitsError(
            f"results from {len(groups)} commits ({which}); rerun them at one commit, or pass "
            "--allow-mixed-commits to report them together"
        )


def _loads(values: Sequence[Sequence[float] | None]) -> str:
    """The 1-minute load averages' range, or "unknown" when none was recorded."""
    ones = [v[0] for v in values if v]
    if not ones:
        return "unknown"
    lo, hi = min(ones), max(ones)
    return f"{lo:.1f}" if lo == hi else f"{lo:.1f}-{hi:.1f}"


def provenance_lines(results: Sequence[RunResult]) -> list[str]:
    """One line per commit: how many runs, whether the tree was dirty, when, and the
    1-minute load average at the runs' starts and ends."""
    out = []
    for c, rs in by_commit(results).items():
        dirty = sum(1 for r in rs if r.clean is False)
        unknown = sum(1 for r in rs if r.clean is None)
        tree = (
            f"**tree dirty** (uncommitted changes) in {dirty} of {len(rs)} runs"
            if dirty
            else ("tree state unknown" if unknown == len(rs) else "clean tree")
        )
        times = sorted(r.ran_at for r in rs if r.ran_at)
        when = f"{times[0]} to {times[-1]}" if times else "time unknown"
        what = (
            f"commit {_short(c)}"
            if c
            else "commit unknown (recorded before runs kept their commit; they may span commits)"
        )
        out.append(
            f"- {what}: {len(rs)} runs, {tree}, {when}; load average (1 min) "
            f"at start {_loads([r.load_start for r in rs])}, "
            f"at end {_loads([r.load_end for r in rs])}"
        )
    return out


def order_line(results: Sequence[RunResult]) -> list[str]:
    """The repeats and the seed(s) of their order, when recorded."""
    seeds = sorted({r.seed for r in results if r.seed is not None})
    rounds = {r.repeat for r in results if r.repeat is not None}
    if not seeds:
        return ["- order of the runs: not recorded (results from before repeats)"]
    return [
        f"- {len(rounds)} rounds of repeats, each in a shuffled order; seed "
        + ", ".join(str(x) for x in seeds)
        + " (`--seed` repeats the order)"
    ]


def _cells(values: Sequence[float | None], fmt: Callable[[float], str]) -> str:
    """A table cell over the repeats: median (min-max); "-" when no run has the figure."""
    return spread([v for v in values if v is not None], fmt)


def _bound_cell(g: Group, total: int) -> str:
    counts = [r.bound_pods for r in g.runs]
    if len(counts) == 1:
        return f"{counts[0]}/{total}"
    return f"{median(counts):.0f}/{total} ({min(counts)}-{max(counts)})"


def table(
    scenario: Scenario, rows: Sequence[Row], bound: Bound, opt: Optimum | None = None
) -> list[str]:
    """The scenario's table, one line per contender: each figure the median over its n runs
    and, when n > 1, (min-max); a "moved back" column where the descheduler ran."""
    total = scenario.pod_count
    desched = scenario.descheduler is not None
    cols = 15 + desched
    out = [
        "| contender | bound | n | max CPU % | max mem % | sd CPU | sd mem | nodes > 80 % "
        "| pods on hot | largest share % | evicted | "
        + ("moved back | " if desched else "")
        + "pods/s | p50 ms | p99 ms | created/s |",
        "|" + "---|" * cols,
    ]
    pct, one, ms = num(), num(1, "{:.0f}"), num(1000, "{:.0f}")
    for g in grouped(rows):
        # n after the bound count: tests/lab/test_placement_smoke.py reads "| name | 10/10 |".
        head = f"| {g.contender} | {_bound_cell(g, total)} | {g.n} | "
        ss = [r.summary for r in g.runs if r.summary is not None]
        if not ss:
            out.append(head + " | ".join(["-"] * (cols - 3)) + " |")
            continue
        ts = [r.timing for r in g.runs if r.timing is not None]
        cells = [
            _cells([s.max_cpu for s in ss], pct),
            _cells([s.max_memory for s in ss], pct),
            _cells([s.std_cpu for s in ss], pct),
            _cells([s.std_memory for s in ss], pct),
            _cells([float(s.over_80) for s in ss], one),
            _cells([float(s.pods_on_hot) for s in ss], one),
            _cells([r.largest_share for r in g.runs], num(100, "{:.0f}")),
            _cells([float(r.deleted) for r in g.runs], one),
            *([_cells([float(r.moved_back) for r in g.runs], one)] if desched else []),
            _cells([t.throughput for t in ts], num(1)),
            _cells([t.p50 for t in ts], ms),
            _cells([t.p99 for t in ts], ms),
            _cells([t.create_rate for t in ts], num(1)),
        ]
        out.append(head + " | ".join(cells) + " |")
    out.append(
        f"| *offline lower bound* | | | {pct(bound.cpu)} | {pct(bound.memory)} |"
        + " |" * (cols - 5)
    )
    if opt is not None:
        # Only the resource the optimum is reached in: the other column's maximum is just
        # that of one optimal placement among many. Two decimals, as 76.25 % sits on a
        # rounding edge that the contenders' sums (different float order) fall either side of.
        best = f"{100 * opt.value:.2f}"
        cpu, mem = (best, "") if opt.max_cpu >= opt.max_memory else ("", best)
        out.append(f"| *exact optimum* | | | {cpu} | {mem} |" + " |" * (cols - 5))
    return out


def scenario_section(scenario: Scenario, rows: Sequence[Row], plots: dict[str, str]) -> list[str]:
    b = bound_of(scenario)
    opt = optimum_of(scenario)
    nodes = scenario.all_nodes()
    hot = [n.name for n in nodes if n.hot]
    out = heading(
        scenario,
        f"{len(scenario.nodes)} nodes"
        + (f" (+{len(scenario.joins)} joining)" if scenario.joins else "")
        + (f", hot: {', '.join(hot)}" if hot else "")
        + f"; {scenario.pod_count} pods",
    )
    out += [
        *table(scenario, rows, b, opt),
        "",
        *optimum_lines(scenario, b, opt),
        "",
    ]
    errs = []
    for r in rows:
        if r.error:
            errs.append(f"- {r.contender}: {r.error}")
        for why, n in sorted(r.pending.items(), key=lambda x: -x[1])[:3]:
            errs.append(f"  - {n} left pending with PodScheduled {' '.join(why.split())}")
    if errs:
        out += ["Runs that did not complete:", "", *errs, ""]
    verdicts = goals(scenario, rows, b)
    if verdicts:
        out += ["Goals:", ""]
        out += [f"- {v.contender}: {v.goal}: **{v.word}** ({v.detail})" for v in verdicts]
        out.append("")
    if scenario.name in plots:
        out += [f"![utilisation per node, {scenario.name}]({plots[scenario.name]})", ""]
    return out


INTRO = """\
Where each scheduler put the pods of each scenario, measured side by side on the lab's
simulated cluster (kwok nodes whose usage metrics-server and load-watcher report), and what
it cost. Generated by `make bench-placement` (`python -m benchmarks.placement`); do not edit.

- **max CPU % / max mem %**: the highest utilisation of any node after placement, computed
  from the scenario's ground truth (node background + the *actual* usage of the pods bound
  there, over capacity), not read from metrics-server; **sd**: population standard
  deviation over the nodes (percentage points); **nodes > 80 %**: in either resource;
  **pods on hot**: pods bound to nodes the scenario marks `hot`; **largest share %**: the
  most of one workload's replicas bound to a single node (availability: what losing that
  node takes from the workload; 100/n for a workload spread evenly over n nodes);
  **evicted**: benchmark pods deleted during the run; **moved back** (scenarios with the
  descheduler): evicted pods whose replacement (from the workload's ReplicaSet) was bound to
  the node the pod was evicted from. With the descheduler the utilisation columns are the
  final placement, replacements included; the timing columns leave the replacements out.
- **pods/s**: pods bound per second from the first pod's creation to the last binding;
  **p50/p99 ms**: creation to binding, both on the benchmark's clock (the pod watch);
  **created/s**: how fast the benchmark created the pods (8 concurrent requests for "all at
  once"; the scenario's rate otherwise): where pods/s is close to it, creation was the limit.
- **Backlog** scenarios (the scale ones) create every pod before the contender's scheduler
  starts: there **pods/s** is the scheduler draining the queue (first binding to last), and
  **p50/p99 ms** are from the scheduler's launch to each binding (how long a pod of the
  backlog waited); created/s is still the benchmark's creation rate, before the clock starts.
  The drain also waits on the API server writing the bindings on the same cores, so the
  cost table adds the scheduler's own figures: **decided/s** (pods whose scheduling
  algorithm had run, from kube-scheduler's `scheduler_scheduling_algorithm_duration_seconds`
  sampled every 0.2 s, first decision to last), **algorithm ms/pod** (that histogram's mean:
  filter and score, extenders included) and **CPU ms/pod** (user + system CPU of the
  scheduler and its extender together over the same span, per pod: the figure the machine's
  other load changes least), **of which extender** (the extender's process alone: with the
  null extender's beside it, what loadwise's own work costs over any extender's).
- **offline lower bound**: no placement of these pods on these nodes can have a lower
  maximum (water-filling, backgrounds, the largest pod; proof in
  `benchmarks/placement/measures.py`). **exact optimum**: the least maximum over CPU and
  memory that any placement of the whole pods reaches (the same relaxation otherwise: no
  request or pod-count limit, so no scheduler can do better either), in the column of the
  resource it is reached in. Computed by an exact feasibility test per level (pods grouped
  by identical usage) and bisection, in `measures.py`; where that would take too long, the
  report says so.
- **n**: how many runs (repeats) of the contender the line stands for. Every figure is the
  median over them (the lower median: an observed run's figure) and, when n > 1,
  (min-max); with n = 1 there is no spread to show. The goals compare medians; "no pod on
  a hot node" counts every run. The repeats ran in a shuffled, interleaved order: each
  round runs every (scenario, contender) once, in an order drawn from the recorded seed.
- Each run starts from the same observed state: the scenario's nodes with only their
  background, metrics-server and a freshly restarted load-watcher reporting exactly that.
  One contender runs at a time; kube-scheduler's client QPS/burst are raised to 500/1000.
"""


def render(
    scenarios: Sequence[Scenario],
    results: Sequence[RunResult],
    plots: dict[str, str],
    *,
    notes: Sequence[str] = (),
    steady: Settings | None = None,
    cache: Path | None = None,
) -> str:
    out = [
        "# Placement benchmark",
        "",
        INTRO,
        # when the runs ran is each run's own record (provenance below), not the index's
        # list of invocations, which keeps the starts of runs later measured again
        f"Report written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
        f"at commit {commit()}; "
        f"machine: {machine()}. "
        "Versions of the schedulers and the lab's components: lab/VERSIONS.md.",
        "",
    ]
    out += ["Provenance of the runs:", "", *provenance_lines(results), *order_line(results), ""]
    out += versions.contender_table(list(dict.fromkeys(r.contender for r in results)))
    if notes:
        out += [*("- " + " ".join(n.split()) for n in notes), ""]
    if any(sc.steady for sc in scenarios):
        out[2] += steady_report.INTRO
    for sc in scenarios:
        mine = ordered(results, sc.name)
        if mine and sc.steady is not None:
            out += steady_section.section(sc, mine, plots.get(sc.name), steady, cache)
        elif mine:
            out += scenario_section(sc, [row(sc, r) for r in mine], plots)
    out += generated_report.section(scenarios, results, steady or Settings(), cache)
    cost = cost_table(scenarios, results)
    if cost or "cost" in plots:
        out += ["## Cost against node count", ""]
        out += [*cost, ""] if cost else []
        paired_cost = paired_cost_table(scenarios, results)
        if paired_cost:
            out += [
                "Paired within rounds (benchmarks/placement/paired.py): the ratio of CPU per "
                "pod in each round, their median and its 95 % bootstrap interval; a goal is "
                "met only when the whole interval is within it.",
                "",
                *paired_cost,
                "",
            ]
        if "cost" in plots:
            out += [f"![throughput and latency]({plots['cost']})", ""]
    return "\n".join(out).rstrip() + "\n"


def cost_groups(
    scenarios: Sequence[Scenario], results: Sequence[RunResult]
) -> list[tuple[int, Group, Group | None]]:
    """For the cost scenarios (those with a throughput goal): node count, each contender's
    complete timed runs, and stock's at the same count (None when it has none)."""
    out: list[tuple[int, Group, Group | None]] = []
    for sc in scenarios:
        if sc.goals.throughput_vs_stock is None:
            continue
        rows = [row(sc, x) for x in ordered(results, sc.name)]
        groups = [
            Group(g.contender, tuple(r for r in g.complete(sc.pod_count) if r.timing))
            for g in grouped(rows)
        ]
        groups = [g for g in groups if g.runs]
        stock = next((g for g in groups if g.contender == "stock"), None)
        out += [(len(sc.all_nodes()), g, stock) for g in groups]
    return out


def _timings(g: Group) -> list[Timing]:
    return [r.timing for r in g.runs if r.timing is not None]


def cost_table(scenarios: Sequence[Scenario], results: Sequence[RunResult]) -> list[str]:
    """Throughput and latency of the cost scenarios by node count, medians (min-max) over
    the repeats, each against stock's median at the same count."""
    lines = cost_groups(scenarios, results)
    if not lines:
        return []
    out = [
        "| nodes | contender | n | pods/s | x stock | p50 ms | p99 ms | x stock "
        "| decided/s | x stock | algorithm ms/pod | CPU ms/pod | of which extender "
        "| created/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ms, cpu = num(1000, "{:.0f}"), num(1000, "{:.2f}")
    for n, g, stock in lines:
        ts = _timings(g)
        base = _timings(stock) if stock else []
        tput, p99 = [t.throughput for t in ts], [t.p99 for t in ts]
        tx = _ratio(tput, [t.throughput for t in base])
        px = _ratio(p99, [t.p99 for t in base])
        ds = [r.decisions for r in g.runs if r.decisions is not None]
        rates = [d.rate for d in ds if d.rate is not None]
        base_rates = [
            r.decisions.rate
            for r in (stock.runs if stock else ())
            if r.decisions is not None and r.decisions.rate is not None
        ]
        out.append(
            f"| {n} | {g.contender} | {g.n} | {spread(tput, num(1))} | {tx} "
            f"| {spread([t.p50 for t in ts], ms)} | {spread(p99, ms)} | {px} "
            f"| {spread(rates, num(1, '{:.0f}'))} | {_ratio(rates, base_rates)} "
            f"| {spread([d.algorithm for d in ds], num(1000, '{:.2f}'))} "
            f"| {spread([d.cpu for d in ds if d.cpu is not None], cpu)} "
            f"| {spread([d.extender_cpu for d in ds if d.extender_cpu is not None], cpu)} "
            f"| {spread([t.create_rate for t in ts], num(1))} |"
        )
    return out


def _ratio(mine: Sequence[float], stock: Sequence[float]) -> str:
    """Median over stock's median at the same node count; "-" without both."""
    return f"{median(mine) / median(stock):.2f}" if mine and stock else "-"


# ------------------------------------------------------------------ plots


def _band(runs: Sequence[Sequence[float]]) -> tuple[list[float], list[float], list[float]]:
    """Per position over the runs (equal lengths): median, min and max."""
    cols = list(zip(*runs, strict=True))
    return [median(c) for c in cols], [min(c) for c in cols], [max(c) for c in cols]


# A fixed size for the line plots (many nodes) and the cost plot, in inches at DPI: wide
# enough for a legend of six contenders, independent of the node count (the
# old width grew by 0.9 in a node, 40,770 px at 500 nodes).
LINE_FIGSIZE = (10.0, 7.0)
BAR_NODES = 20  # up to this many nodes, one bar per node; more, the sorted-line plot
DPI = 90


HOT_LABEL = f"{100 * HOT_THRESHOLD:.0f} % (the 'nodes > 80 %' column)"
OPTIMUM_LABEL = "exact optimum (max of CPU and memory)"
BOUND_LABEL = "lower bound on max"


def plot_utilisation(scenario: Scenario, rows: Sequence[Row], path: Path) -> None:
    _save(utilisation_figure(scenario, rows), path)


def _save(fig: Figure, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def utilisation_figure(scenario: Scenario, rows: Sequence[Row]) -> Figure:
    """Per resource: each contender's utilisation per node, the median over its runs with
    min-max bars (bars for a few nodes; for many, the nodes sorted most utilised first, the
    median line in a min-max band); the lower bound, the exact optimum on the resource it
    is reached in, and the 80 % line, each labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    b = bound_of(scenario)
    opt = optimum_of(scenario)
    groups = [g for g in grouped(rows) if any(r.loads for r in g.runs)]
    nodes = scenario.all_nodes()
    total = scenario.pod_count
    bars = len(nodes) <= BAR_NODES
    size = (max(7, 0.9 * len(nodes) + 3), 7.0) if bars else LINE_FIGSIZE
    fig, axes = plt.subplots(2, 1, figsize=size, squeeze=False, layout="constrained")
    for ax, res, lim in zip(axes[:, 0], ("cpu", "memory"), (b.cpu, b.memory), strict=True):
        top = 0.0
        for k, g in enumerate(groups):
            runs = [[100 * getattr(n, res) for n in r.loads] for r in g.runs if r.loads]
            if not bars:
                runs = [sorted(v, reverse=True) for v in runs]
            mid, lo, hi = _band(runs)
            top = max(top, *hi)
            label = _label(g, total)
            if bars:
                width = 0.8 / max(1, len(groups))
                xs = [i + (k - (len(groups) - 1) / 2) * width for i in range(len(nodes))]
                err = [
                    [m - x for m, x in zip(mid, lo, strict=True)],
                    [x - m for m, x in zip(mid, hi, strict=True)],
                ]
                ax.bar(xs, mid, width, label=label, yerr=err if len(runs) > 1 else None, capsize=2)
            else:
                xs = list(range(1, len(mid) + 1))
                (line,) = ax.plot(xs, mid, label=label)
                if len(runs) > 1:
                    ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2)
        if bars:
            ax.set_xticks(
                range(len(nodes)),
                [n.name + (" (hot)" if n.hot else "") for n in nodes],
                rotation=20,
            )
        else:
            ax.set_xlabel("nodes, most utilised first (band: min-max over the runs)")
        ax.axhline(100 * lim, color="black", linestyle="--", linewidth=1, label=BOUND_LABEL)
        if opt is not None and (opt.max_cpu >= opt.max_memory) == (res == "cpu"):
            ax.axhline(
                100 * opt.value, color="dimgray", linestyle="-.", linewidth=1, label=OPTIMUM_LABEL
            )
        ax.axhline(100 * HOT_THRESHOLD, color="red", linestyle=":", linewidth=1, label=HOT_LABEL)
        ax.set_ylabel(f"{'CPU' if res == 'cpu' else 'memory'} utilisation %")
        ax.set_ylim(0, max(105, top + 5))
    fig.suptitle(f"{scenario.name}: {scenario.title}", fontsize="medium", wrap=True)
    # One legend under both axes, outside them so that it hides no bar: each label once
    # (the bound and the 80 % line are drawn on both).
    seen: dict[str, Any] = {}
    for ax in axes[:, 0]:
        for h, t in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(t, h)
    fig.legend(
        list(seen.values()),
        list(seen),
        loc="outside lower center",
        # Three columns need about 9 in at this font (the longest label is 2.6 in).
        ncol=3 if size[0] >= 9 else 2,
        fontsize="small",
    )
    return fig


def _label(g: Group, total: int) -> str:
    """The contender, its run count, and how many of its runs left pods unbound."""
    short = sum(1 for r in g.runs if r.bound_pods != total)
    return g.contender + f" (n={g.n}" + (f", {short} incomplete)" if short else ")")


def plot_cost(lines: Sequence[tuple[int, Group, Group | None]], path: Path) -> None:
    _save(cost_figure(lines), path)


def _cost_label(name: str, lines: Sequence[tuple[int, Group, Group | None]]) -> str:
    """The contender with its run count (a range when node counts differ)."""
    ns = [g.n for _, g, _ in lines if g.contender == name]
    return f"{name} (n={min(ns)})" if min(ns) == max(ns) else f"{name} (n={min(ns)}-{max(ns)})"


def cost_figure(lines: Sequence[tuple[int, Group, Group | None]]) -> Figure:
    """Throughput and p50/p99 latency per node count and contender: the median as a marker,
    the min-max over the repeats as a bar; no line between node counts (two counts, each
    measured separately, are no curve)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = sorted({n for n, _, _ in lines})
    names = list(dict.fromkeys(g.contender for _, g, _ in lines))
    width = 0.8 / max(1, len(names))
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    labelled: set[str] = set()
    for n, g, _ in lines:
        k = names.index(g.contender)
        x = counts.index(n) + (k - (len(names) - 1) / 2) * width
        ts = _timings(g)
        color = colors[k % len(colors)]
        label = None if g.contender in labelled else _cost_label(g.contender, lines)
        labelled.add(g.contender)
        for ax, vals, marker, lab in (
            (a, [t.throughput for t in ts], "o", label),
            (b, [1000 * t.p99 for t in ts], "o", label),
            (b, [1000 * t.p50 for t in ts], "x", None),
        ):
            m = median(vals)
            ax.errorbar(
                [x],
                [m],
                yerr=[[m - min(vals)], [max(vals) - m]],
                fmt=marker,
                color=color,
                capsize=4,
                label=lab,
            )
    for ax in (a, b):
        ax.set_xticks(range(len(counts)), [str(c) for c in counts])
        ax.set_xlabel("nodes")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize="small")
    a.set(ylabel="pods bound per second", title="throughput (median, bar: min-max)")
    b.set(
        ylabel="ms",
        title="creation (backlog: scheduler launch) to binding\np99 (o), p50 (x); bar: min-max",
    )
    fig.tight_layout()
    return fig


def write(
    out: Path,
    scenarios: Sequence[Scenario],
    results: Sequence[RunResult],
    *,
    notes: Sequence[str] = (),
    allow_mixed_commits: bool = False,
    steady: Settings | None = None,
) -> Path:
    """Write out/placement.md and out/placement/*.png; return the markdown's path. Results
    from more than one commit are refused unless `allow_mixed_commits`. The steady runs'
    optima are kept in out/placement/optima.json (steady_tables.OptimumCache)."""
    check_commits(results, allow_mixed=allow_mixed_commits)
    pdir = out / "placement"
    pdir.mkdir(parents=True, exist_ok=True)
    plots: dict[str, str] = {}
    for sc in scenarios:
        if sc.steady is not None:
            # over time: a final placement's bars would show one instant of a stream
            fig = steady_report.figure(sc, ordered(results, sc.name))
            if fig is not None:
                _save(fig, pdir / f"{sc.name}.png")
                plots[sc.name] = f"placement/{sc.name}.png"
            continue
        rows = [row(sc, r) for r in ordered(results, sc.name)]
        if any(r.loads for r in rows):
            plot_utilisation(sc, rows, pdir / f"{sc.name}.png")
            plots[sc.name] = f"placement/{sc.name}.png"
    cost = cost_groups(scenarios, results)
    if cost:
        plot_cost(cost, pdir / "cost.png")
        plots["cost"] = "placement/cost.png"
    md = out / "placement.md"
    kept = kept_sections(md.read_text()) if md.exists() else ""
    text = render(
        scenarios,
        results,
        plots,
        notes=notes,
        steady=steady,
        cache=pdir / "optima.json",
    )
    md.write_text(text + kept)
    return md


# Sections of placement.md this report does not generate, kept as they are when it is written
# again: the real-node measurement (benchmarks/realplacement.py) runs on another cluster and
# its tables are that script's own (--table), the text around them written from its records.
KEPT_HEADINGS = ("## On real kubelets",)


def kept_sections(text: str) -> str:
    """What of `text` (the placement.md being replaced) starts at the first KEPT_HEADINGS
    line, to its end, with a blank line before it; "" when there is none."""
    starts = [i for heading in KEPT_HEADINGS if (i := text.find(f"\n{heading}\n")) >= 0]
    return "\n" + text[min(starts) + 1 :] if starts else ""
