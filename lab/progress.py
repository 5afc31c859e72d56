"""Progress for the lab's long first-run work: every Go program lab/build compiles, the node
images, each a step that is named when it starts and when it ends, with its time, a count
("3 of 14") and an estimate of what is left.

On a fresh machine that work takes about half an hour on 2 cores (docs/testing.md), and a
single Go build (kube-apiserver, Prometheus) runs for minutes without printing anything, so
nothing here stays silent for longer than `HEARTBEAT_SECONDS`: on a terminal a progress bar
(rich, already installed as Textual's renderer) redraws every second; elsewhere (CI logs,
pipes) a plain line says which step is running and for how long.

Estimates come from the durations this machine recorded for each step the last time it
really built it (`step-times.json` in the build cache); a step never built here is estimated
from `DEFAULT_SECONDS`, measured on a cold 2-core machine. The steps' own output (Go's, podman's,
debootstrap's) goes to one log file whose path is printed first; a failed step prints its tail
and raises `LabError` naming the step and the log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from lab.processes import LabError

__all__ = [
    "DEFAULT_SECONDS",
    "HEARTBEAT_SECONDS",
    "Step",
    "StepTimes",
    "cache_root",
    "clock",
    "run_steps",
]

HEARTBEAT_SECONDS = 30.0
TAIL_LINES = 40
KEEP_LOGS = 10

# Seconds each step took on a cold 2-core machine of this project's kind (an empty Go module
# and build cache), 2026-11-25: a program's time includes the module downloads it was first
# to need, so the first kubernetes program carries most of the k8s.io downloads.
DEFAULT_SECONDS: dict[str, float] = {
    "kube-apiserver": 330.0,
    "kube-controller-manager": 150.0,
    "kube-scheduler": 60.0,
    "etcd": 90.0,
    "kwok": 120.0,
    "metrics-server": 80.0,
    "load-watcher": 60.0,
    "descheduler": 90.0,
    "kubeadm": 60.0,
    "kubelet": 60.0,
    "containerd": 90.0,
    "containerd-shim-runc-v2": 15.0,
    "ctr": 15.0,
    "pause": 5.0,
    "kube-proxy": 20.0,
    "burner": 5.0,
    "prometheus": 300.0,
    "promtool": 60.0,
    "trimaran-scheduler": 290.0,
    # the release before the lab's: measured 2026-11-27 with the lab's own release already
    # built (most of the dependencies' packages in Go's build cache, a few modules to fetch)
    "kube-apiserver-previous": 160.0,
    "kube-controller-manager-previous": 52.0,
    "kube-scheduler-previous": 5.0,
    "kube-proxy-previous": 7.0,
    "node image": 150.0,
    "real-node image": 120.0,
}
_UNKNOWN_SECONDS = 60.0


def cache_root() -> Path:
    """lab/build's cache root (its LOADWISE_LAB_CACHE, by default ~/.cache/loadwise-lab)."""
    env = os.environ.get("LOADWISE_LAB_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "loadwise-lab"


@dataclass(frozen=True)
class Step:
    """One unit of long work: `argv` run to completion, its output to the log."""

    name: str
    argv: Sequence[str]


class StepTimes:
    """Each step's duration the last time it was really done on this machine (JSON file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            raw = {}
        self._seconds = {
            str(k): float(v)
            for k, v in (raw.items() if isinstance(raw, dict) else ())
            if isinstance(v, int | float) and v >= 0
        }

    def estimate(self, name: str) -> float:
        return self._seconds.get(name, DEFAULT_SECONDS.get(name, _UNKNOWN_SECONDS))

    def measured(self, name: str) -> bool:
        return name in self._seconds

    def record(self, name: str, seconds: float) -> None:
        self._seconds[name] = round(seconds, 1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._seconds, indent=1, sort_keys=True))
        tmp.replace(self.path)


def clock(seconds: float) -> str:
    """4s, 2m05s."""
    s = int(seconds + 0.5)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def _left(seconds: float) -> str:
    return f"~{max(1, round(seconds / 60))} min left" if seconds >= 60 else "under a minute left"


def _new_log(kind: str) -> Path:
    logs = cache_root() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for old in sorted(logs.glob("*.log"))[:-KEEP_LOGS]:
        old.unlink(missing_ok=True)
    return logs / f"{time.strftime('%Y%m%dT%H%M%S')}-{kind}.log"


def _tail(path: Path, start: int) -> str:
    with path.open("rb") as f:
        f.seek(start)
        lines = f.read().decode(errors="replace").splitlines()
    return "\n".join(lines[-TAIL_LINES:])


class _Report:
    """Where the progress goes: a rich bar on a terminal, plain lines otherwise."""

    def __init__(self, out: IO[str], total_estimate: float) -> None:
        self.out = out
        self.tty = out.isatty() and os.environ.get("TERM") != "dumb"
        self._bar = None
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TimeElapsedColumn(),
                console=Console(file=out),
                transient=True,
            )
            self._task = self._bar.add_task("", total=max(total_estimate, 1.0))
            self._bar.start()

    def line(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self.out, flush=True)

    def tick(self, description: str, done: float, total: float, plain: str | None) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=description, completed=done, total=total)
        elif plain is not None:
            self.line(plain)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def run_steps(
    title: str,
    steps: Sequence[Step],
    *,
    out: IO[str] | None = None,
    times: StepTimes | None = None,
    log: Path | None = None,
    heartbeat: float = HEARTBEAT_SECONDS,
) -> float:
    """Run `steps` in order, reporting progress on `out` (default stderr); the seconds taken.
    Raises LabError on the first failed step, after printing its output's tail."""
    if not steps:
        return 0.0
    out = out or sys.stderr
    times = times or StepTimes(cache_root() / "step-times.json")
    log = log or _new_log(re.sub(r"[^\w-]", "", title.split()[0]))
    estimates = [times.estimate(s.name) for s in steps]
    basis = (
        "this machine's last build"
        if all(times.measured(s.name) for s in steps)
        else (
            "the last build here and a cold 2-core machine's times"
            if any(times.measured(s.name) for s in steps)
            else "a cold 2-core machine's times"
        )
    )
    report = _Report(out, sum(estimates))
    report.line(
        f"lab: {title}: {len(steps)} step{'s' * (len(steps) != 1)}, "
        f"{_left(sum(estimates)).removesuffix(' left')} by {basis}; full log: {log}"
    )
    started = time.monotonic()
    done_estimate = 0.0
    try:
        for i, (step, est) in enumerate(zip(steps, estimates, strict=True), 1):
            count = f"[{i}/{len(steps)}]"
            rest = sum(estimates[i:])
            report.line(f"{count} {step.name}: started (~{clock(est)}; {_left(est + rest)})")
            t0 = time.monotonic()
            with log.open("ab") as f:
                f.write(f"\n===== {count} {step.name}: {' '.join(step.argv)}\n".encode())
                f.flush()
                start = f.tell()
                proc = subprocess.Popen(
                    list(step.argv), stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
            last_line = t0
            while True:
                try:
                    rc = proc.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    pass
                now = time.monotonic()
                spent = now - t0
                # past its estimate a step is "nearly done", never finished, on the bar
                part = min(spent, est * 0.95)
                plain = None
                if now - last_line >= heartbeat:
                    last_line = now
                    over = "" if spent < est else ", longer than last time"
                    plain = (
                        f"{count} {step.name}: {clock(spent)} so far (~{clock(est)}{over}); "
                        f"{_left(max(est - spent, 0) + rest)}"
                    )
                report.tick(
                    f"{count} {step.name} {clock(spent)}, {_left(max(est - spent, 0) + rest)}",
                    done_estimate + part,
                    sum(estimates),
                    plain,
                )
            spent = time.monotonic() - t0
            if rc != 0:
                report.close()
                print(_tail(log, start), file=out, flush=True)
                raise LabError(
                    f"{step.name} failed (exit {rc}) after {clock(spent)}; "
                    f"its output's tail is above, the full log is {log}"
                )
            times.record(step.name, spent)
            done_estimate += est
            report.line(f"{count} {step.name}: done in {clock(spent)}")
    finally:
        report.close()
    total = time.monotonic() - started
    report.line(f"lab: {title}: done in {clock(total)} (log: {log})")
    return total
