"""Several labs at once: each (round, contender) run in a lab of its own, in a network
namespace of its own, then the runs gathered into one index and rendered.

The lab needs only loopback, so one lab per network namespace can run beside others
(docs/lab.md, "Fully isolated run"). A round's contenders share its trace (drawn from the
seed and the round: trace.py), so running them in separate labs at the same time keeps the
comparison paired, and the machine's load lands on both sides of a pair alike.

    python -m benchmarks.placement.parallel --labs 4 --seeds 301 302 303 \\
        --contenders stock loadwise-least-used --out /tmp/steady-report -- \\
        --scenarios steady-mix --duration 600

Rounds of one freshly drawn scenario (each round its own trace, all the same nodes and
workloads): `-- --generated 1 --generated-seed 1201 --duration 1800` runs gen-1201-1 in
every round.

Everything after `--` goes to every `python -m benchmarks.placement` run as it is (each
run adds `--contenders C --repeats 1 --seed S --out DIR --workdir DIR/work`). Needs root
(`ip netns`). The exit status is non-zero when a run failed; the others are still gathered
and rendered.
"""

from __future__ import annotations

import argparse
import queue
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks.placement import store

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "lwpar"  # network namespaces lwpar0.. and run directories /tmp/loadwise-lab-lwpar0..


@dataclass(frozen=True)
class Job:
    seed: int
    contender: str

    @property
    def name(self) -> str:
        return f"{self.seed}-{self.contender}"


def command(
    job: Job, slot: int, out: Path, passthrough: Sequence[str], prefix: str = PREFIX
) -> list[str]:
    """The run of `job` in namespace `slot`, writing its own index under `out` and keeping
    its configs and logs (the extender's decision records among them) beside it."""
    ns = f"{prefix}{slot}"
    return [
        "ip", "netns", "exec", ns,
        "env", f"LOADWISE_LAB_RUN=/tmp/loadwise-lab-{ns}",
        sys.executable, "-m", "benchmarks.placement",
        *passthrough,
        "--contenders", job.contender, "--repeats", "1", "--seed", str(job.seed),
        "--out", str(out / job.name),
        "--workdir", str(out / job.name / "work"),
    ]  # fmt: skip


# What the runs were told about measuring, not running: the gathered report is measured
# the same way (a run's own report at --optimum-seconds 3 and the gathered one at the
# default 20 s took over 14 min for 44 generated runs).
REPORT_SETTINGS = ("--warmup", "--optimum-seconds")


def report_settings(passthrough: Sequence[str]) -> list[str]:
    """The options of ``passthrough`` that say how to measure (REPORT_SETTINGS), with
    their values, for rendering the gathered index."""
    out: list[str] = []
    for i, arg in enumerate(passthrough):
        name = arg.split("=", 1)[0]
        if name in REPORT_SETTINGS:
            out += [arg] if "=" in arg else [arg, *passthrough[i + 1 : i + 2]]
    return out


def _namespace(slot: int, prefix: str) -> None:
    ns = f"{prefix}{slot}"
    have = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    if ns not in have.stdout.split():
        subprocess.run(["ip", "netns", "add", ns], check=True)
    subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)


def run_all(
    jobs: Sequence[Job],
    labs: int,
    work: Path,
    passthrough: Sequence[str],
    timeout: float,
    prefix: str = PREFIX,
) -> dict[str, int]:
    """Run every job, at most `labs` at once; the exit status of each, by job name."""
    slots: queue.Queue[int] = queue.Queue()
    for i in range(labs):
        _namespace(i, prefix)
        slots.put(i)
    work.mkdir(parents=True, exist_ok=True)

    def one(job: Job) -> tuple[str, int]:
        slot = slots.get()
        try:
            log = work / f"{job.name}.log"
            t0 = time.monotonic()
            with log.open("w") as f:
                try:
                    rc = subprocess.run(
                        command(job, slot, work, passthrough, prefix),
                        cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                    ).returncode  # fmt: skip
                except subprocess.TimeoutExpired:
                    rc = 124
            print(f"{job.name}: exit {rc} after {time.monotonic() - t0:.0f} s ({log})", flush=True)
            return job.name, rc
        finally:
            slots.put(slot)

    with ThreadPoolExecutor(labs) as pool:
        return dict(pool.map(one, jobs))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, passthrough = args[:cut], args[cut + 1 :]
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.placement.parallel",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--labs", type=int, default=2, help="labs at once (default 2)")
    parser.add_argument("--seeds", type=int, nargs="+", required=True, help="one per round")
    parser.add_argument("--contenders", nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True, help="where placement.md goes")
    parser.add_argument("--work", type=Path, help="the runs' own indexes and logs")
    parser.add_argument("--note", action="append", default=[], help="a line for the notes")
    parser.add_argument("--timeout", type=float, default=7200, help="seconds per run")
    parser.add_argument(
        "--prefix",
        default=PREFIX,
        help=f"network namespaces PREFIX0.. (default {PREFIX}): another at once needs another",
    )
    ns = parser.parse_args(args)
    if ns.labs < 1:
        parser.error("--labs must be at least 1")
    work = ns.work or Path(f"/tmp/{ns.prefix}-{time.strftime('%Y%m%dT%H%M%S')}")
    jobs = [Job(s, c) for s in ns.seeds for c in ns.contenders]
    codes = run_all(jobs, ns.labs, work, passthrough, ns.timeout, ns.prefix)
    indexes = [p for j in jobs if (p := work / j.name / "placement" / "results.json").exists()]
    if not indexes:
        print("placement: no run wrote results", file=sys.stderr)
        return 1
    index = ns.out / "placement" / "results.json"
    note = (
        f"{len(jobs)} runs, {ns.labs} labs at once in network namespaces: "
        f"python -m benchmarks.placement.parallel --labs {ns.labs} "
        f"--seeds {' '.join(map(str, ns.seeds))} --contenders {' '.join(ns.contenders)} "
        f"-- {' '.join(passthrough)}"
    )
    store.merge(index, indexes, [*ns.note, note])
    render = [sys.executable, "-m", "benchmarks.placement", "--from-results", str(index)]
    render += report_settings(passthrough)
    subprocess.run([*render, "--out", str(ns.out)], cwd=ROOT, check=True)
    failed = {k: v for k, v in codes.items() if v != 0}
    if failed:
        print(f"placement: runs that failed: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
