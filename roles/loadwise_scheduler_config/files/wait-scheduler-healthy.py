#!/usr/bin/env python3
"""Wait until a *new* kube-scheduler process has answered its health URL for a while.

Run on the control-plane node by the loadwise_scheduler_config role after it changed the
scheduler's configuration. "Healthy" means all of:

- a process whose program name (argv[0] without its directory) is --process, or the MainPID of
  --unit, started at or after --since (so the old scheduler, still serving until the
  kubelet or systemd replaces it, does not count);
- the health URL answered 200 on every poll for --stable seconds, with that same PID
  (a scheduler that crash-loops, or exits after a few seconds, never gets there).

With --expect-arg/--refuse-arg it then proves which configuration that scheduler runs: the
argument must (or must not) be in its command line, read from /proc/<pid>/cmdline for
--process, and for --unit (k3s runs the scheduler inside its own process) from the last
"Running kube-scheduler ..." line k3s logs since --since (k3s-io/k3s pkg/daemons/executor
logs each embedded component's arguments that way).

With --restart (--process only) it first stops the scheduler it found with SIGTERM, for the
kubelet to start it again (restartPolicy Always): the proof for files already in place that
no run proved, as an interrupted run leaves them.

On timeout it prints the reason and the scheduler's own last error lines, taken from the
newest file matching --log-glob or from the journal of --unit, and exits 1.
Standard library only: it runs on the node's system Python.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request


def boot_time() -> float:
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return float(line.split()[1])
    return 0.0


def start_time(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return boot_time() + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def find_pid(pattern: str | None, exclude: str | None, unit: str | None) -> int | None:
    if unit:
        out = subprocess.run(
            ["systemctl", "show", "-p", "MainPID", "--value", unit], capture_output=True, text=True
        ).stdout.strip()
        return int(out) if out.isdigit() and int(out) > 0 else None
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if cmd and os.path.basename(cmd.split()[0]) == pattern and not (exclude and exclude in cmd):
            found.append(int(entry))
    return max(found, key=start_time) if found else None


def probe(url: str, timeout: float) -> str:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the scheduler serves a self-signed certificate
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as resp:
            return str(resp.status)
    except urllib.error.HTTPError as e:
        return f"{e.code} {e.read(200).decode(errors='replace').strip()}"
    except (OSError, urllib.error.URLError) as e:
        return f"unreachable ({getattr(e, 'reason', e)})"


def scheduler_log(
    log_glob: str | None, unit: str | None, since: float, tail: int | None = 200
) -> list[str]:
    lines: list[str] = []
    if log_glob:
        files = sorted(glob.glob(log_glob), key=os.path.getmtime)
        if files and os.path.getmtime(files[-1]) >= since:
            with open(files[-1], errors="replace") as f:
                lines = f.read().splitlines()[-(tail or 0) :]
    elif unit:
        out = subprocess.run(
            ["journalctl", "-u", unit, "--no-pager", "-o", "cat", "--since", f"@{int(since)}"],
            capture_output=True,
            text=True,
        )
        lines = out.stdout.splitlines()[-(tail or 0) :]
    return lines


RUNNING = re.compile(r"Running kube-scheduler (.*?)\"?$")


def running_args(pid: int, unit: str | None, since: float) -> list[str] | None:
    """The arguments of the scheduler found healthy, or None when they cannot be read.
    The whole journal since the restart: the scheduler's own lines follow k3s's line,
    hundreds of them within the stable period (seen in the lab)."""
    if not unit:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            return None
    hits = [
        m.group(1)
        for ln in scheduler_log(None, unit, since, tail=None)
        for m in [RUNNING.search(ln)]
        if m
    ]
    return hits[-1].split() if hits else None


def config_problem(a: argparse.Namespace, pid: int) -> str:
    """Why the healthy scheduler does not run the configuration asked for ("" if it does)."""
    if not (a.expect_arg or a.refuse_arg):
        return ""
    args = running_args(pid, a.unit, a.since)
    if args is None:
        where = (
            f"no 'Running kube-scheduler' line in the journal of {a.unit}"
            if a.unit
            else "no command line"
        )
        return f"cannot tell which configuration pid {pid} runs: {where}"
    missing = [x for x in a.expect_arg if x not in args]
    unwanted = [x for x in a.refuse_arg if x in args]
    if not (missing or unwanted):
        return ""
    return (
        f"the running kube-scheduler (pid {pid}) "
        + "; ".join(
            ([f"lacks {' '.join(missing)}"] if missing else [])
            + ([f"still has {' '.join(unwanted)}"] if unwanted else [])
        )
        + f". Its arguments: {' '.join(args)}"
    )


FATAL = re.compile(r'"command failed"|^Error:|scheduler exited')


def scheduler_errors(log_glob: str | None, unit: str | None, since: float) -> str:
    lines = scheduler_log(log_glob, unit, since)
    fatal = [ln for ln in lines if FATAL.search(ln)]
    errors = [ln for ln in lines if re.search(r"^E\d{4} ", ln)]
    picked = fatal[-3:] or errors[-5:] or lines[-8:]
    return "\n".join(picked) if picked else "(no scheduler log found)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--since", type=float, required=True)
    ap.add_argument("--process")
    ap.add_argument("--exclude")
    ap.add_argument("--unit")
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--stable", type=float, default=20)
    ap.add_argument("--interval", type=float, default=2)
    ap.add_argument(
        "--fatal-grace",
        type=float,
        default=15,
        help="after this long without health, a fatal line in the log ends the wait early",
    )
    ap.add_argument("--log-glob")
    ap.add_argument("--log-unit")
    ap.add_argument("--expect-arg", action="append", default=[], help="must be in its arguments")
    ap.add_argument("--refuse-arg", action="append", default=[], help="must not be in them")
    ap.add_argument("--restart", action="store_true", help="stop the running one first")
    a = ap.parse_args()
    if not (a.process or a.unit):
        ap.error("give --process or --unit")
    if a.restart:
        if not a.process:
            ap.error("--restart needs --process (a unit is restarted by systemd)")
        old = find_pid(a.process, a.exclude, None)
        if old is not None:
            os.kill(old, signal.SIGTERM)
            print(f"restarted: stopped pid {old} for the kubelet to start it again")

    t0 = time.monotonic()
    deadline = t0 + a.timeout
    streak_pid, streak_start, last = None, None, "no scheduler process yet"
    while time.monotonic() < deadline:
        pid = find_pid(a.process, a.exclude, a.unit)
        try:
            new_enough = pid is not None and start_time(pid) >= a.since - 1
        except OSError:
            new_enough = False
        if (
            streak_pid is None
            and time.monotonic() - t0 > a.fatal_grace
            and any(
                FATAL.search(ln) for ln in scheduler_log(a.log_glob, a.log_unit or a.unit, a.since)
            )
        ):
            # The scheduler started after the change and already died of its config:
            # no point waiting for the timeout.
            print("kube-scheduler exited with a fatal error after the change")
            print("scheduler's own last errors:")
            print(scheduler_errors(a.log_glob, a.log_unit or a.unit, a.since))
            return 1
        if not new_enough:
            streak_pid, last = (
                None,
                "the scheduler has not been restarted yet" if pid else "no scheduler process",
            )
        else:
            status = probe(a.url, timeout=max(a.interval, 2))
            if status == "200":
                if streak_pid != pid:
                    streak_pid, streak_start = pid, time.monotonic()
                if time.monotonic() - streak_start >= a.stable:
                    problem = config_problem(a, pid)
                    if problem:
                        print(f"healthy but not configured as asked: {problem}")
                        return 1
                    print(f"healthy: pid {pid} answered 200 on {a.url} for {a.stable:.0f}s")
                    return 0
                last = f"pid {pid} healthy for {time.monotonic() - streak_start:.0f}s"
            else:
                streak_pid, last = None, f"pid {pid}: {a.url} -> {status}"
        time.sleep(a.interval)
    print(f"kube-scheduler not healthy after {a.timeout:.0f}s: {last}")
    print("scheduler's own last errors:")
    print(scheduler_errors(a.log_glob, a.log_unit or a.unit, a.since))
    return 1


if __name__ == "__main__":
    sys.exit(main())
