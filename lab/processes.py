"""The lab's processes: started detached with a log file and a pid file, found again by a
later `scripts/lab` call, stopped by process group.

A pid file holds "<pid> <start time>" (field 22 of /proc/<pid>/stat), so a pid reused by
another program after the lab's process died is not mistaken for it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# Every lab program listens on this address, load-watcher excepted (lab/components.py).
HOST = "127.0.0.1"

# load-watcher v0.2.4 catches SIGTERM/SIGINT, shuts its HTTP server down and then blocks
# forever in main (`select {}`), so it never exits on a signal; it holds no state: kill it.
STOP_TIMEOUT = {"load-watcher": 0.0}


class LabError(RuntimeError):
    pass


def proc_start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22 (starttime); the command name in field 2 may contain spaces, so split after ')'.
    return stat.rsplit(")", 1)[1].split()[19]


def alive(pid: int, start: str | None) -> bool:
    st = proc_start_time(pid)
    if st is None or (start is not None and st != start):
        return False
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def port_open(port: int, host: str = HOST) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def wait_for(
    what: str,
    check: Callable[[], T],
    timeout: float,
    interval: float = 0.5,
    proc_check: Callable[[], None] | None = None,
) -> T:
    """Poll check() until it returns a truthy value; raise LabError naming the last error, or
    the last falsy value check() returned (what was seen is usually the clue)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    seen: object = None
    while time.monotonic() < deadline:
        if proc_check is not None:
            proc_check()
        try:
            v = check()
            if v:
                return v
            seen, last = v, None
        except Exception as e:  # noqa: BLE001 - reported if the wait times out
            last = e
        time.sleep(interval)
    why = f": {last}" if last else ("" if seen is None else f" (last seen: {seen!r})")
    raise LabError(f"timed out after {timeout:.0f}s waiting for {what}{why}")


def stop_child(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """Stop a child this process started and holds (not one found by pid file: see
    Processes.stop): SIGTERM, SIGKILL after `timeout`; returns once it is gone."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


class Processes:
    """The lab's programs under one run directory: logs/<name>.log, pids/<name>.pid."""

    def __init__(self, run: Path, log: Callable[[str], None]) -> None:
        self.run = run
        self.logs = run / "logs"
        self.pids = run / "pids"
        self.log = log
        # The processes this Python process started, to notice one exiting while waiting.
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def _pidfile(self, name: str) -> Path:
        return self.pids / f"{name}.pid"

    def pid(self, name: str) -> int | None:
        """The pid of a running lab program, or None."""
        try:
            pid_s, start = self._pidfile(name).read_text().split()
        except (OSError, ValueError):
            return None
        pid = int(pid_s)
        return pid if alive(pid, start) else None

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> int:
        if self.pid(name):
            raise LabError(f"{name} already runs (pid {self.pid(name)})")
        self.logs.mkdir(parents=True, exist_ok=True)
        self.pids.mkdir(parents=True, exist_ok=True)
        logf = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
        logf.write(f"--- {time.strftime('%FT%T')} {' '.join(argv)}\n".encode())
        logf.flush()
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            cwd=self.run,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        logf.close()
        start = None
        for _ in range(50):
            start = proc_start_time(p.pid)
            if start:
                break
            time.sleep(0.01)
        self._pidfile(name).write_text(f"{p.pid} {start}\n")
        self._children[name] = p
        return p.pid

    def check_running(self, name: str) -> Callable[[], None]:
        """A check for wait_for(): raises LabError, with the log's tail, once `name` exited."""

        def check() -> None:
            p = self._children.get(name)
            if p is not None and p.poll() is not None:
                raise LabError(
                    f"{name} exited with status {p.returncode}; "
                    f"last lines of {self.logs / (name + '.log')}:\n{self.tail(name)}"
                )

        return check

    def tail(self, name: str, lines: int = 25) -> str:
        try:
            return "\n".join(
                (self.logs / f"{name}.log").read_text(errors="replace").splitlines()[-lines:]
            )
        except OSError:
            return "(no log)"

    def stop(self, name: str, timeout: float | None = None) -> bool:
        """SIGTERM a program (its whole process group), SIGKILL after timeout."""
        timeout = STOP_TIMEOUT.get(name, 15.0) if timeout is None else timeout
        pid = self.pid(name)
        pf = self._pidfile(name)
        if pid is None:
            pf.unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        p = self._children.pop(name, None)
        while time.monotonic() < deadline:
            if p is not None:
                p.poll()
            if self.pid(name) is None:
                break
            time.sleep(0.1)
        else:
            if timeout:
                self.log(f"{name} (pid {pid}) ignored SIGTERM for {timeout:.0f}s; killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            for _ in range(100):
                if p is not None:
                    p.poll()
                if self.pid(name) is None:
                    break
                time.sleep(0.05)
        pf.unlink(missing_ok=True)
        return True
