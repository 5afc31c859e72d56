#!/usr/bin/python
"""Wait until a *new* kube-scheduler process has answered its health URL for a while.

The module the loadwise_scheduler_config role runs on a control-plane node after a change of
the scheduler's configuration, after its automatic restore and after a rollback. The wait is
a loop of observations (which process, started when, what the health URL answers) fed to a
pure step function (`step`), which decides: keep waiting, healthy, or failed and why.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: loadwise_scheduler_health
short_description: Wait until a newly started kube-scheduler answers its health URL steadily
version_added: "0.2.0"
author: loadwise
description:
  - Healthy means a kube-scheduler process started at or after O(since) (the old scheduler,
    still serving until the kubelet or systemd replaces it, does not count) answered 200 on
    O(url) on every poll for O(stable) seconds, with the same PID. A scheduler that
    crash-loops, or exits after a few seconds, never gets there.
  - The process is found by its program name (argv[0] without its directory), or as the
    MainPID of a systemd unit (k3s runs the scheduler inside its own process).
  - With O(expect_args) / O(refuse_args) it then proves which configuration that scheduler
    runs. For O(process) the arguments come from /proc/<pid>/cmdline; for O(unit) from the
    last C(Running kube-scheduler ...) line the unit logged since O(since) (k3s logs each
    embedded component's arguments that way, k3s-io/k3s pkg/daemons/executor).
  - When no new process is healthy after O(fatal_grace) seconds and the scheduler's log has a
    fatal line, the wait ends early; on failure the message quotes the scheduler's own last
    error lines, from the newest file matching O(log_glob) or the journal of the unit.
  - Runs on the node with the standard library only.
options:
  url:
    description: The scheduler's health URL. Its certificate is not verified (kube-scheduler
      serves a self-signed one on 127.0.0.1:10259).
    type: str
    required: true
  since:
    description: The node's clock (seconds since the epoch) before the restart; a scheduler
      process started earlier does not count. 0 accepts the running one.
    type: float
    required: true
  process:
    description: The program name of the scheduler process (kubeadm's static pod).
    type: str
  exclude:
    description: A process whose command line contains this text is not the scheduler.
    type: str
  unit:
    description: The systemd unit whose MainPID is the scheduler (k3s).
    type: str
  timeout:
    description: Seconds to wait before giving up.
    type: float
    default: 180
  stable:
    description: Seconds the same process must answer 200 without a break.
    type: float
    default: 20
  interval:
    description: Seconds between polls; a poll gives up after max(interval, 2) seconds.
    type: float
    default: 2
  fatal_grace:
    description: After this many seconds without a healthy process, a fatal line in the
      scheduler's log ends the wait.
    type: float
    default: 15
  log_glob:
    description: Glob of the scheduler's log files (kubeadm's container logs); the newest one
      written since O(since) is quoted.
    type: str
  log_unit:
    description: The unit whose journal is the scheduler's log; defaults to O(unit).
    type: str
  expect_args:
    description: Arguments the healthy scheduler must run with.
    type: list
    elements: str
    default: []
  refuse_args:
    description: Arguments the healthy scheduler must not run with.
    type: list
    elements: str
    default: []
  restart:
    description:
      - Stop the running scheduler with SIGTERM first, for the kubelet to start it again
        (restartPolicy Always); only with O(process). The proof for files already in place
        that no run proved, as an interrupted run leaves them.
    type: bool
    default: false
attributes:
  check_mode:
    description: Whether the module can run under --check.
    support: full
    details:
      - In check mode nothing is stopped and nothing is waited for (a check run changed no
        file, so no new scheduler will start); the module only looks up the running process
        and reports what it would wait for. C(changed) says whether O(restart) would stop one.
notes:
  - The role includes it from tasks/wait_healthy.yml with the role's health variables.
"""

EXAMPLES = r"""
- name: Wait for the k3s scheduler restarted at since
  loadwise.loadwise.loadwise_scheduler_health:
    url: https://127.0.0.1:10259/healthz
    since: "{{ since.stdout }}"
    unit: k3s
    expect_args: ["--config=/etc/rancher/k3s/loadwise-scheduler-config.yaml"]

- name: Restart a kubeadm static-pod scheduler and prove the next one
  loadwise.loadwise.loadwise_scheduler_health:
    url: https://127.0.0.1:10259/healthz
    since: "{{ since.stdout }}"
    process: kube-scheduler
    log_glob: /var/log/containers/kube-scheduler-*_kube-system_kube-scheduler-*.log
    restart: true
"""

RETURN = r"""
healthy:
  description: Whether a new scheduler proved healthy (and configured as asked). False in
    check mode, which does not wait.
  returned: always
  type: bool
waited:
  description: Whether the module waited (false in check mode).
  returned: always
  type: bool
pid:
  description: The healthy scheduler's PID, or the running one found in check mode.
  returned: when one was found
  type: int
restarted_pid:
  description: The PID O(restart) stopped (or, in check mode, would stop).
  returned: when one was stopped
  type: int
reason:
  description: Why the scheduler is not healthy (its first line of C(msg)).
  returned: on failure
  type: str
scheduler_errors:
  description: The scheduler's own last error lines (fatal lines, else klog E lines, else the
    log's tail).
  returned: on failure
  type: list
  elements: str
msg:
  description: What happened, one line each; on failure the reason, then the scheduler's
    own last error lines.
  returned: always
  type: str
"""

import glob  # noqa: E402 (Ansible reads the documentation strings above first)
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.urls import open_url  # noqa: E402

RUNNING = re.compile(r"Running kube-scheduler (.*?)\"?$")
# klog's "command failed" (cmd/kube-scheduler's run exits with it), cobra's "Error:" and
# k3s's "scheduler exited": the scheduler will not come up with this configuration.
FATAL = re.compile(r'"command failed"|^Error:|scheduler exited')
KLOG_ERROR = re.compile(r"^E\d{4} ")


# --- the verdict: pure ---------------------------------------------------------------


@dataclass
class Streak:
    """The process answering 200 without a break, and since when (monotonic seconds)."""

    pid: int | None = None
    start: float = 0.0
    last: str = "no scheduler process yet"


@dataclass
class Look:
    """One observation: the scheduler process found (if any), whether it started after
    `since`, and what its health URL answered ("" when it was not asked)."""

    pid: int | None
    new_enough: bool
    status: str = ""


def step(streak: Streak, look: Look, now: float, stable: float, url: str) -> str | None:
    """Update `streak` with `look`; the healthy message once the streak is `stable` long,
    else None (keep waiting)."""
    if not look.new_enough:
        streak.pid = None
        streak.last = (
            "the scheduler has not been restarted yet" if look.pid else "no scheduler process"
        )
        return None
    if look.status != "200":
        streak.pid = None
        streak.last = f"pid {look.pid}: {url} -> {look.status}"
        return None
    if streak.pid != look.pid:
        streak.pid, streak.start = look.pid, now
    if now - streak.start >= stable:
        return f"healthy: pid {look.pid} answered 200 on {url} for {stable:.0f}s"
    streak.last = f"pid {look.pid} healthy for {now - streak.start:.0f}s"
    return None


def config_problem(
    pid: int, args: list[str] | None, expect: list[str], refuse: list[str], unit: str | None
) -> str:
    """Why the healthy scheduler does not run the configuration asked for ("" if it does)."""
    if not (expect or refuse):
        return ""
    if args is None:
        where = (
            f"no 'Running kube-scheduler' line in the journal of {unit}"
            if unit
            else "no command line"
        )
        return f"cannot tell which configuration pid {pid} runs: {where}"
    missing = [x for x in expect if x not in args]
    unwanted = [x for x in refuse if x in args]
    if not (missing or unwanted):
        return ""
    parts = ([f"lacks {' '.join(missing)}"] if missing else []) + (
        [f"still has {' '.join(unwanted)}"] if unwanted else []
    )
    running = " ".join(args)
    return f"the running kube-scheduler (pid {pid}) {'; '.join(parts)}. Its arguments: {running}"


def error_lines(lines: list[str]) -> list[str]:
    """The lines of a scheduler's log worth quoting: its last fatal lines, else its last
    klog errors, else its tail."""
    fatal = [ln for ln in lines if FATAL.search(ln)]
    errors = [ln for ln in lines if KLOG_ERROR.search(ln)]
    return fatal[-3:] or errors[-5:] or lines[-8:]


def args_from_journal(lines: list[str]) -> list[str] | None:
    """The arguments of the last "Running kube-scheduler" line k3s logged, if any."""
    hits = [m.group(1) for ln in lines for m in [RUNNING.search(ln)] if m]
    return hits[-1].split() if hits else None


# --- the node: I/O -------------------------------------------------------------------


class Node:
    """What the module reads (and, for `restart`, signals) on the node."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.p: dict[str, Any] = module.params

    def _run(self, argv: list[str]) -> str:
        _, out, _ = self.module.run_command(argv)
        return str(out)

    @staticmethod
    def boot_time() -> float:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
        return 0.0

    def start_time(self, pid: int) -> float:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return self.boot_time() + int(fields[19]) / os.sysconf("SC_CLK_TCK")

    def find_pid(self, unit: str | None) -> int | None:
        if unit:
            out = self._run(["systemctl", "show", "-p", "MainPID", "--value", unit]).strip()
            return int(out) if out.isdigit() and int(out) > 0 else None
        name, exclude = self.p["process"], self.p["exclude"]
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if (
                cmd
                and os.path.basename(cmd.split()[0]) == name
                and not (exclude and exclude in cmd)
            ):
                found.append(int(entry))
        return max(found, key=self.start_time) if found else None

    def look(self) -> Look:
        pid = self.find_pid(self.p["unit"])
        try:
            new_enough = pid is not None and self.start_time(pid) >= self.p["since"] - 1
        except OSError:  # the process ended between finding and reading it
            new_enough = False
        return Look(pid, new_enough)

    def probe(self) -> str:
        timeout = max(self.p["interval"], 2)
        try:
            # the scheduler serves a self-signed certificate
            with open_url(self.p["url"], timeout=timeout, validate_certs=False) as resp:
                return str(resp.status)
        except urllib.error.HTTPError as e:
            return f"{e.code} {e.read(200).decode(errors='replace').strip()}"
        except (OSError, urllib.error.URLError) as e:
            return f"unreachable ({getattr(e, 'reason', e)})"

    def log(self, log_glob: str | None, unit: str | None, tail: int | None = 200) -> list[str]:
        """The scheduler's log since `since`: the newest file matching `log_glob` if it was
        written since, else the journal of `unit`; its last `tail` lines (None: all)."""
        since = self.p["since"]
        lines: list[str] = []
        if log_glob:
            files = sorted(glob.glob(log_glob), key=os.path.getmtime)
            if files and os.path.getmtime(files[-1]) >= since:
                with open(files[-1], errors="replace") as f:
                    lines = f.read().splitlines()
        elif unit:
            argv = [
                "journalctl",
                "-u",
                unit,
                "--no-pager",
                "-o",
                "cat",
                "--since",
                f"@{int(since)}",
            ]
            lines = self._run(argv).splitlines()
        return lines[-tail:] if tail else lines

    def running_args(self, pid: int) -> list[str] | None:
        """The arguments of the scheduler found healthy, or None when they cannot be read.
        For a unit the whole journal since the restart: the scheduler's own lines follow
        k3s's line, hundreds of them within the stable period (seen in the lab)."""
        unit = self.p["unit"]
        if not unit:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            except OSError:
                return None
        return args_from_journal(self.log(None, unit, tail=None))


def wait(node: Node) -> tuple[bool, int | None, str, bool]:
    """Poll until healthy or the deadline: (healthy, pid, what happened, whether the
    scheduler's log says why)."""
    p = node.p
    log_glob, log_unit = p["log_glob"], p["log_unit"] or p["unit"]
    t0 = time.monotonic()
    deadline = t0 + p["timeout"]
    streak = Streak()
    while time.monotonic() < deadline:
        look = node.look()
        if (
            streak.pid is None
            and time.monotonic() - t0 > p["fatal_grace"]
            and any(FATAL.search(ln) for ln in node.log(log_glob, log_unit))
        ):
            # The scheduler started after the change and already died of its config:
            # no point waiting for the timeout.
            return (
                False,
                look.pid,
                "kube-scheduler exited with a fatal error after the change",
                True,
            )
        if look.new_enough:
            look.status = node.probe()
        healthy = step(streak, look, time.monotonic(), p["stable"], p["url"])
        if healthy is not None and look.pid is not None:
            problem = config_problem(
                look.pid, node.running_args(look.pid), p["expect_args"], p["refuse_args"], p["unit"]
            )
            if problem:
                return False, look.pid, f"healthy but not configured as asked: {problem}", False
            return True, look.pid, healthy, False
        time.sleep(p["interval"])
    return False, None, f"kube-scheduler not healthy after {p['timeout']:.0f}s: {streak.last}", True


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "since": {"type": "float", "required": True},
            "process": {"type": "str"},
            "exclude": {"type": "str"},
            "unit": {"type": "str"},
            "timeout": {"type": "float", "default": 180},
            "stable": {"type": "float", "default": 20},
            "interval": {"type": "float", "default": 2},
            "fatal_grace": {"type": "float", "default": 15},
            "log_glob": {"type": "str"},
            "log_unit": {"type": "str"},
            "expect_args": {"type": "list", "elements": "str", "default": []},
            "refuse_args": {"type": "list", "elements": "str", "default": []},
            "restart": {"type": "bool", "default": False},
        },
        required_one_of=[("process", "unit")],
        mutually_exclusive=[("process", "unit")],
        # a unit is restarted by systemd (the role restarts k3s itself)
        required_if=[("restart", True, ("process",))],
        supports_check_mode=True,
    )
    node = Node(module)
    p = node.p
    notes: list[str] = []
    stopped: int | None = None
    if p["restart"]:
        stopped = node.find_pid(None)
        if stopped is not None and not module.check_mode:
            os.kill(stopped, signal.SIGTERM)
            notes.append(f"restarted: stopped pid {stopped} for the kubelet to start it again")
    extra: dict[str, Any] = {} if stopped is None else {"restarted_pid": stopped}
    changed = stopped is not None

    if module.check_mode:
        running = node.find_pid(p["unit"])
        target = f"unit {p['unit']}" if p["unit"] else f"process {p['process']}"
        would = [
            f"check mode: not waited for a kube-scheduler ({target}) started after {p['since']:.0f}"
        ]
        if stopped is not None:
            would.insert(0, f"would restart: stop pid {stopped} for the kubelet to start it again")
        module.exit_json(
            changed=changed,
            healthy=False,
            waited=False,
            msg="\n".join(would),
            **extra,
            **({} if running is None else {"pid": running}),
        )

    healthy, pid, last, quote_log = wait(node)
    notes.append(last)
    found = {} if pid is None else {"pid": pid}
    if healthy:
        module.exit_json(
            changed=changed, healthy=True, waited=True, msg="\n".join(notes), **found, **extra
        )
    errors = error_lines(node.log(p["log_glob"], p["log_unit"] or p["unit"])) if quote_log else []
    if quote_log:
        notes += ["scheduler's own last errors:", *(errors or ["(no scheduler log found)"])]
    module.fail_json(
        msg="\n".join(notes),
        changed=changed,
        healthy=False,
        waited=True,
        reason=last,
        scheduler_errors=errors,
        **found,
        **extra,
    )


if __name__ == "__main__":
    main()
