"""docs/placement.md and its plots, from run results: the measures per contender, the
offline bound, and the issue's goals judged PASS or MISSED with the figures behind it."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.placement.exceptions import PlacementError
from benchmarks.placement.measures import (
    Bound,
    NodeLoad,
    Summary,
    Timing,
    lower_bound,
    moved_back,
    node_loads,
    replacements,
    summarise,
    timing,
)
from benchmarks.placement.runner import RunResult
from benchmarks.placement.scenario import Scenario

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


# The tables' order: the baseline, loadwise's policies, then Trimaran's plugins.
ORDER = (
    "stock",
    "loadwise-least-used",
    "loadwise-tlp",
    "loadwise-lvrb",
    "trimaran-tlp",
    "trimaran-lvrb",
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
    pairs = replacements(
        result.evictions,
        result.workloads,
        result.created,
        {w.name: w.replicas for w in scenario.workloads},
    )
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
    )


def bound_of(scenario: Scenario) -> Bound:
    return lower_bound(scenario.all_nodes(), scenario.pod_usage().values())


# ------------------------------------------------------------------ goals


@dataclass(frozen=True)
class Verdict:
    contender: str
    goal: str
    passed: bool | None  # None: could not be judged (a contender missing)
    detail: str

    @property
    def word(self) -> str:
        return {True: "PASS", False: "MISSED", None: "n/a"}[self.passed]


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


def goals(scenario: Scenario, rows: Sequence[Row], bound: Bound) -> list[Verdict]:
    """The issue's goals for every loadwise contender of the scenario."""
    g, total = scenario.goals, scenario.pod_count
    by = {r.contender: r for r in rows}
    stock = by.get("stock")
    trimarans = [r for r in rows if r.contender.startswith("trimaran")]
    out: list[Verdict] = []
    for r in rows:
        if not r.contender.startswith("loadwise"):
            continue
        c = r.contender
        if not _complete(r, total):
            out.append(Verdict(c, "all pods bound", False, r.error or f"{r.bound_pods}/{total}"))
            continue
        s = r.summary
        assert s is not None
        if g.beat_stock:
            if not _complete(stock, total):
                out.append(Verdict(c, "max below stock's", None, "stock did not complete"))
            else:
                assert stock is not None and stock.summary is not None
                ok = s.max_util < stock.summary.max_util
                why = f"{_pct(s.max_util)} vs stock {_pct(stock.summary.max_util)}"
                if not ok:
                    why += f"; {_hottest(r)}"
                    if stock.summary.max_util <= bound.overall + 1e-9:
                        why += "; stock is already at the lower bound"
                out.append(Verdict(c, "max below stock's", ok, why))
        if g.no_worse_than_trimaran:
            for t in trimarans:
                name = f"max <= {t.contender}'s"
                if not _complete(t, total):
                    out.append(Verdict(c, name, None, f"{t.contender} did not complete"))
                    continue
                assert t.summary is not None
                ok = s.max_util <= t.summary.max_util + 1e-9
                why = f"{_pct(s.max_util)} vs {_pct(t.summary.max_util)}"
                out.append(Verdict(c, name, ok, why if ok else f"{why}; {_hottest(r)}"))
        if g.no_pods_on_hot:
            hot = [x for x in r.loads or [] if x.hot and x.pods]
            why = ", ".join(f"{x.pods} on {x.name}" for x in hot) or "none"
            out.append(Verdict(c, "no pod on a hot node", not hot, why))
        if g.within_bound is not None:
            lim = (1 + g.within_bound) * bound.overall
            ok = s.max_util <= lim + 1e-9
            why = f"{_pct(s.max_util)} vs bound {_pct(bound.overall)} (limit {_pct(lim)})"
            out.append(
                Verdict(
                    c,
                    f"within {g.within_bound:.0%} of the bound",
                    ok,
                    why if ok else f"{why}; {_hottest(r)}",
                )
            )
        for goal, factor in (("throughput", g.throughput_vs_stock), ("p99", g.p99_vs_stock)):
            if factor is None:
                continue
            name = (
                f"throughput >= {factor}x stock"
                if goal == "throughput"
                else f"p99 <= {factor}x stock"
            )
            if stock is None or stock.timing is None or r.timing is None:
                out.append(Verdict(c, name, None, "no timing for stock or this contender"))
                continue
            if goal == "throughput":
                ratio = r.timing.throughput / stock.timing.throughput
                ok = ratio >= factor
                mine, theirs = r.timing.throughput, stock.timing.throughput
                why = f"{mine:.1f} vs {theirs:.1f} pods/s ({ratio:.2f}x)"
            else:
                ratio = r.timing.p99 / stock.timing.p99
                ok = ratio <= factor
                why = (
                    f"{1000 * r.timing.p99:.0f} vs {1000 * stock.timing.p99:.0f} ms ({ratio:.2f}x)"
                )
            out.append(Verdict(c, name, ok, why))
    return out


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
    stitches them compares code that never ran side by side (issue #24)."""
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
        out.append(
            f"- commit {_short(c)}: {len(rs)} runs, {tree}, {when}; load average (1 min) "
            f"at start {_loads([r.load_start for r in rs])}, "
            f"at end {_loads([r.load_end for r in rs])}"
        )
    return out


def _f(x: float | None, scale: float = 100, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(scale * x)


def table(scenario: Scenario, rows: Sequence[Row], bound: Bound) -> list[str]:
    """The scenario's table; a "moved back" column where the descheduler ran."""
    total = scenario.pod_count
    desched = scenario.descheduler is not None
    cols = 13 + desched
    out = [
        "| contender | bound | max CPU % | max mem % | sd CPU | sd mem | nodes > 80 % "
        "| pods on hot | evicted | "
        + ("moved back | " if desched else "")
        + "pods/s | p50 ms | p99 ms | created/s |",
        "|" + "---|" * cols,
    ]
    for r in rows:
        s, t = r.summary, r.timing
        if s is None:
            out.append(
                f"| {r.contender} | {r.bound_pods}/{total} | "
                + " | ".join(["-"] * (cols - 2))
                + " |"
            )
            continue
        out.append(
            f"| {r.contender} | {r.bound_pods}/{total} | {_f(s.max_cpu)} | {_f(s.max_memory)} "
            f"| {_f(s.std_cpu)} | {_f(s.std_memory)} | {s.over_80} | {s.pods_on_hot} "
            f"| {r.deleted} | "
            + (f"{r.moved_back} | " if desched else "")
            + f"{_f(t.throughput if t else None, 1)} "
            f"| {_f(t.p50 if t else None, 1000, '{:.0f}')} "
            f"| {_f(t.p99 if t else None, 1000, '{:.0f}')} "
            f"| {_f(t.create_rate if t else None, 1)} |"
        )
    out.append(
        f"| *offline lower bound* | | {_f(bound.cpu)} | {_f(bound.memory)} |" + " |" * (cols - 4)
    )
    return out


def scenario_section(scenario: Scenario, rows: Sequence[Row], plots: dict[str, str]) -> list[str]:
    b = bound_of(scenario)
    nodes = scenario.all_nodes()
    hot = [n.name for n in nodes if n.hot]
    out = [
        f"## {scenario.name}: {scenario.title}",
        "",
        scenario.description,
        "",
        f"{len(scenario.nodes)} nodes"
        + (f" (+{len(scenario.joins)} joining)" if scenario.joins else "")
        + (f", hot: {', '.join(hot)}" if hot else "")
        + f"; {scenario.pod_count} pods; file `benchmarks/scenarios/{scenario.name}.yaml`.",
        "",
        *table(scenario, rows, b),
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
  **pods on hot**: pods bound to nodes the scenario marks `hot`; **evicted**: benchmark
  pods deleted during the run; **moved back** (scenarios with the descheduler): evicted
  pods whose replacement (from the workload's ReplicaSet) was bound to the node the pod was
  evicted from. With the descheduler the utilisation columns are the final placement,
  replacements included; the timing columns leave the replacements out.
- **pods/s**: pods bound per second from the first pod's creation to the last binding;
  **p50/p99 ms**: creation to binding, both on the benchmark's clock (the pod watch);
  **created/s**: how fast the benchmark created the pods (8 concurrent requests for "all at
  once"; the scenario's rate otherwise): where pods/s is close to it, creation was the limit.
- **Backlog** scenarios (the scale ones) create every pod before the contender's scheduler
  starts: there **pods/s** is the scheduler draining the queue (first binding to last), and
  **p50/p99 ms** are from the scheduler's launch to each binding (how long a pod of the
  backlog waited); created/s is still the benchmark's creation rate, before the clock starts.
- **offline lower bound**: no placement of these pods on these nodes can have a lower
  maximum (water-filling, backgrounds, the largest pod; proof in
  `benchmarks/placement/measures.py`).
- Each run starts from the same observed state: the scenario's nodes with only their
  background, metrics-server and a freshly restarted load-watcher reporting exactly that.
  One contender runs at a time; kube-scheduler's client QPS/burst are raised to 500/1000.
"""


def render(
    scenarios: Sequence[Scenario],
    results: Sequence[RunResult],
    plots: dict[str, str],
    *,
    started: str,
    notes: Sequence[str] = (),
) -> str:
    out = [
        "# Placement benchmark",
        "",
        INTRO,
        f"Runs started {started}; report written "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit {commit()}; "
        f"machine: {machine()}. "
        "Versions of the schedulers and the lab's components: lab/VERSIONS.md.",
        "",
    ]
    out += ["Provenance of the runs:", "", *provenance_lines(results), ""]
    if notes:
        out += [*("- " + " ".join(n.split()) for n in notes), ""]
    for sc in scenarios:
        rows = [row(sc, r) for r in ordered(results, sc.name)]
        if rows:
            out += scenario_section(sc, rows, plots)
    cost = cost_table(scenarios, results)
    if cost or "cost" in plots:
        out += ["## Cost against node count", ""]
        out += [*cost, ""] if cost else []
        if "cost" in plots:
            out += [f"![throughput and latency]({plots['cost']})", ""]
    return "\n".join(out).rstrip() + "\n"


def cost_table(scenarios: Sequence[Scenario], results: Sequence[RunResult]) -> list[str]:
    """Throughput and latency of the cost scenarios (those with a throughput goal) by node
    count, each against stock's at the same count."""
    lines: list[tuple[int, str, str, Timing, Timing | None]] = []
    for sc in scenarios:
        if sc.goals.throughput_vs_stock is None:
            continue
        mine = [x for x in results if x.scenario == sc.name]
        rows = {x.contender: row(sc, x) for x in mine}
        backlog = {x.contender: x.scheduler_started is not None for x in mine}
        stock = rows.get("stock")
        base = stock.timing if stock and stock.bound_pods == sc.pod_count else None
        for name, r in rows.items():
            if r.timing is not None and r.bound_pods == sc.pod_count:
                mode = "backlog" if backlog[name] else "stream"
                lines.append((len(sc.all_nodes()), name, mode, r.timing, base))
    if not lines:
        return []
    out = [
        "| nodes | contender | mode | pods/s | x stock | p50 ms | p99 ms | x stock | created/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def key(x: tuple[int, str, str, Timing, Timing | None]) -> tuple[int, int, str]:
        return (x[0], ORDER.index(x[1]) if x[1] in ORDER else len(ORDER), x[1])

    for n, name, mode, t, base in sorted(lines, key=key):
        tx = f"{t.throughput / base.throughput:.2f}" if base else "-"
        px = f"{t.p99 / base.p99:.2f}" if base else "-"
        out.append(
            f"| {n} | {name} | {mode} | {t.throughput:.1f} | {tx} | {1000 * t.p50:.0f} "
            f"| {1000 * t.p99:.0f} | {px} | {t.create_rate:.1f} |"
        )
    return out


# ------------------------------------------------------------------ plots


def plot_utilisation(scenario: Scenario, rows: Sequence[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    b = bound_of(scenario)
    done = [r for r in rows if r.loads]
    nodes = scenario.all_nodes()
    total = scenario.pod_count
    fig, axes = plt.subplots(2, 1, figsize=(max(7, 0.9 * len(nodes) + 3), 7), squeeze=False)
    for ax, res, lim in zip(axes[:, 0], ("cpu", "memory"), (b.cpu, b.memory), strict=True):
        if len(nodes) <= 20:
            width = 0.8 / max(1, len(done))
            for k, r in enumerate(done):
                assert r.loads is not None
                xs = [i + (k - (len(done) - 1) / 2) * width for i in range(len(nodes))]
                ax.bar(xs, [100 * getattr(n, res) for n in r.loads], width, label=_label(r, total))
            ax.set_xticks(
                range(len(nodes)),
                [n.name + (" (hot)" if n.hot else "") for n in nodes],
                rotation=20,
            )
        else:
            for r in done:
                assert r.loads is not None
                ys = sorted((100 * getattr(n, res) for n in r.loads), reverse=True)
                ax.plot(range(1, len(ys) + 1), ys, label=_label(r, total))
            ax.set_xlabel("nodes, most utilised first")
        ax.axhline(
            100 * lim, color="black", linestyle="--", linewidth=1, label="lower bound on max"
        )
        ax.axhline(80, color="red", linestyle=":", linewidth=1)
        ax.set_ylabel(f"{'CPU' if res == 'cpu' else 'memory'} utilisation %")
        top = max((100 * getattr(n, res) for r in done for n in r.loads or []), default=0)
        ax.set_ylim(0, max(105, top + 5))
    axes[0, 0].set_title(f"{scenario.name}: {scenario.title}", fontsize="medium", wrap=True)
    axes[0, 0].legend(fontsize="small", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _label(r: Row, total: int) -> str:
    return r.contender if r.bound_pods == total else f"{r.contender} ({r.bound_pods}/{total} bound)"


def plot_cost(points: dict[str, list[tuple[int, Timing]]], path: Path) -> None:
    """Throughput and p99 latency against node count, one line per contender."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for name, pts in sorted(points.items()):
        pts = sorted(pts, key=lambda p: p[0])
        a.plot([n for n, _ in pts], [t.throughput for _, t in pts], marker="o", label=name)
        (line,) = b.plot(
            [n for n, _ in pts], [1000 * t.p99 for _, t in pts], marker="o", label=name
        )
        b.plot(
            [n for n, _ in pts],
            [1000 * t.p50 for _, t in pts],
            marker="x",
            linestyle=":",
            color=line.get_color(),
        )
    a.set(xlabel="nodes", ylabel="pods bound per second", title="throughput")
    b.set(
        xlabel="nodes",
        ylabel="ms",
        title="creation (backlog: scheduler launch) to binding\np99 (o, solid), p50 (x, dotted)",
    )
    a.set_ylim(bottom=0)
    b.set_ylim(bottom=0)
    a.legend(fontsize="small")
    b.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write(
    out: Path,
    scenarios: Sequence[Scenario],
    results: Sequence[RunResult],
    *,
    started: str,
    notes: Sequence[str] = (),
    allow_mixed_commits: bool = False,
) -> Path:
    """Write out/placement.md and out/placement/*.png; return the markdown's path. Results
    from more than one commit are refused unless `allow_mixed_commits`."""
    check_commits(results, allow_mixed=allow_mixed_commits)
    pdir = out / "placement"
    pdir.mkdir(parents=True, exist_ok=True)
    plots: dict[str, str] = {}
    cost: dict[str, list[tuple[int, Timing]]] = {}
    for sc in scenarios:
        rows = [row(sc, r) for r in ordered(results, sc.name)]
        if any(r.loads for r in rows):
            plot_utilisation(sc, rows, pdir / f"{sc.name}.png")
            plots[sc.name] = f"placement/{sc.name}.png"
        if sc.goals.throughput_vs_stock is not None:
            for r in rows:
                if r.timing is not None and r.bound_pods == sc.pod_count:
                    cost.setdefault(r.contender, []).append((len(sc.all_nodes()), r.timing))
    if cost:
        plot_cost(cost, pdir / "cost.png")
        plots["cost"] = "placement/cost.png"
    md = out / "placement.md"
    md.write_text(render(scenarios, results, plots, started=started, notes=notes))
    return md
