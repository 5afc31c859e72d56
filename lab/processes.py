"""Child processes, one lifecycle for the lab, the benchmarks and the tests: start a program
with its output in a log file, wait until a readiness probe says yes (failing early, with
the log's last lines, when the program exits first), stop it (SIGTERM, a grace period,
SIGKILL, reaped). `start`/`Child` hold a `subprocess.Popen`; `start_async`/`AsyncChild` an
`asyncio.subprocess.Process`, for callers that run an event loop.

The lab's long-lived programs (`Processes`) are started detached, with a pid file, so that a
later `scripts/lab` call finds and stops them. A pid file holds "<pid> <start time>" (field
22 of /proc/<pid>/stat), so a pid reused by another program after the lab's process died is
not mistaken for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

T = TypeVar("T")

# Every lab program listens on this address, load-watcher excepted (lab/components.py).
HOST = "127.0.0.1"

# load-watcher v0.2.4 catches SIGTERM/SIGINT, shuts its HTTP server down and then blocks
# forever in main (`select {}`), so it never exits on a signal; it holds no state: kill it.
STOP_TIMEOUT = {"load-watcher": 0.0}

# How long a process may take to go after SIGKILL. The kernel ends it at once unless it sits
# in uninterruptible sleep (state D, e.g. on a hung disk); past this it is reported, not
# waited for forever.
KILL_WAIT = 10.0

# How many of a log's last lines an error shows.
TAIL_LINES = 25


class LabError(RuntimeError):
    pass


class ProcessExited(LabError):
    """A child exited while something waited for it to get ready."""

    def __init__(self, name: str, returncode: int, log: Path | None, tail: str) -> None:
        where = f"last lines of {log}" if log is not None else "its output was not kept"
        super().__init__(f"{name} exited with status {returncode}; {where}:\n{tail}")
        self.name = name
        self.returncode = returncode
        self.tail = tail


class NotReady(LabError, TimeoutError):
    """A wait timed out. Also a TimeoutError, for callers that catch that."""


class StillRunning(LabError):
    """A process outlived SIGKILL by KILL_WAIT seconds (state D: see KILL_WAIT)."""


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


def log_tail(log: Path | None, lines: int = TAIL_LINES) -> str:
    """The last `lines` lines of a log file; "(no log)" when there is none to read."""
    if log is None:
        return "(no log)"
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# --------------------------------------------------------------------------- probes
# A probe returns something truthy once the program is ready; a falsy value or an exception
# means "not yet", and the last one seen goes into the time-out's message.


def port_open(port: int, host: str = HOST) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def port_probe(port: int, host: str = HOST) -> Callable[[], bool]:
    """Ready once something accepts a TCP connection on host:port."""
    return lambda: port_open(port, host)


def http_get(url: str, timeout: float = 2) -> tuple[int, str]:
    """(status, body) of a GET; status 0 and the error's text when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            status: int = r.status
            return status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError as exc:
        return 0, str(exc)


def http_probe(url: str, timeout: float = 2) -> Callable[[], tuple[int, str]]:
    """Ready once a GET of `url` answers 200; returns (200, body). Another answer is raised
    as "<status> <body>" (0: nothing answered), so a time-out names the last one."""

    def probe() -> tuple[int, str]:
        status, body = http_get(url, timeout)
        if status != 200:
            raise LabError(f"{status} {body.strip()[:500]}")
        return status, body

    return probe


def log_probe(log: Path, needle: str, offset: int = 0) -> Callable[[], str | None]:
    """Ready once a line of the log file from byte `offset` on contains `needle`; returns
    that line. Child.log_probe starts after the child's header, so neither an earlier run's
    lines in the same log nor the command line can answer for it. Only whole lines count:
    an unbuffered writer (PYTHONUNBUFFERED, or print with several arguments) writes a line
    in pieces, and a probe that read "grandchild" before " 4242\n" arrived answered with
    half a line."""

    def probe() -> str | None:
        try:
            with log.open("rb") as f:
                f.seek(offset)
                text = f.read().decode(errors="replace")
        except FileNotFoundError:
            return None
        whole = text.split("\n")[:-1]  # the last piece has no newline yet, or is empty
        return next((line.rstrip("\r") for line in whole if needle in line), None)

    return probe


# --------------------------------------------------------------------------- waiting


class _Waiting:
    """The state of one wait, shared by wait_for and wait_for_async (they differ only in
    how they call the check and sleep): the deadline, and the last error or falsy value."""

    def __init__(self, what: str, timeout: float, proc_check: Callable[[], None] | None):
        self.what, self.timeout, self.proc_check = what, timeout, proc_check
        self.deadline = time.monotonic() + timeout
        self.last: Exception | None = None
        self.seen: object = None

    def another_try(self) -> bool:
        """Whether there is time for another try; proc_check() raises to stop waiting."""
        if time.monotonic() >= self.deadline:
            return False
        if self.proc_check is not None:
            self.proc_check()
        return True

    def missed(self, value: object = None, error: Exception | None = None) -> None:
        self.seen, self.last = value, error

    def timed_out(self) -> NotReady:
        seen = "" if self.seen is None else f" (last seen: {self.seen!r})"
        why = f": {self.last}" if self.last else seen
        return NotReady(f"timed out after {self.timeout:.0f}s waiting for {self.what}{why}")


def wait_for(
    what: str,
    check: Callable[[], T],
    timeout: float,
    interval: float = 0.5,
    proc_check: Callable[[], None] | None = None,
) -> T:
    """Poll check() until it returns a truthy value; raise NotReady naming the last error, or
    the last falsy value check() returned (what was seen is usually the clue). proc_check()
    runs before each try and raises to stop waiting (a process exited: Child.check_running)."""
    waiting = _Waiting(what, timeout, proc_check)
    while waiting.another_try():
        try:
            v = check()
        except Exception as e:  # noqa: BLE001 - reported if the wait times out
            waiting.missed(error=e)
        else:
            if v:
                return v
            waiting.missed(v)
        time.sleep(interval)
    raise waiting.timed_out()


async def wait_for_async(
    what: str,
    check: Callable[[], Awaitable[T]],
    timeout: float,
    interval: float = 0.5,
    proc_check: Callable[[], None] | None = None,
) -> T:
    """wait_for with an awaitable check, sleeping without blocking the event loop."""
    waiting = _Waiting(what, timeout, proc_check)
    while waiting.another_try():
        try:
            v = await check()
        except Exception as e:  # noqa: BLE001 - reported if the wait times out
            waiting.missed(error=e)
        else:
            if v:
                return v
            waiting.missed(v)
        await asyncio.sleep(interval)
    raise waiting.timed_out()


# --------------------------------------------------------------------------- stopping


def terminate(
    what: str,
    send: Callable[[int], None],
    gone: Callable[[], bool],
    timeout: float,
    *,
    on_kill: Callable[[str], None] | None = None,
) -> None:
    """Stop a process through `send(signal)` until `gone()`: SIGTERM, up to `timeout` seconds
    for it to go, then SIGKILL (at once when `timeout` is 0: no SIGTERM then). `gone` must
    reap a child of ours (Popen.poll does), or a zombie would count as running. `on_kill`
    hears why a process that had a grace period was killed. Raises StillRunning if it
    outlives SIGKILL by KILL_WAIT seconds."""

    def wait(seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while not gone():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    if gone():
        return
    if timeout > 0:
        with contextlib.suppress(ProcessLookupError):
            send(signal.SIGTERM)
        if wait(timeout):
            return
        if on_kill is not None:
            on_kill(f"{what} ignored SIGTERM for {timeout:.0f}s; killing it")
    with contextlib.suppress(ProcessLookupError):
        send(signal.SIGKILL)
    if not wait(KILL_WAIT):
        raise StillRunning(f"{what} still runs {KILL_WAIT:.0f}s after SIGKILL")


def _sender(pid: int, group: bool) -> Callable[[int], None]:
    """Signals to one process, or to the process group it leads (start_new_session)."""
    return (lambda sig: os.killpg(pid, sig)) if group else (lambda sig: os.kill(pid, sig))


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """For Popen's preexec_fn: the child gets `sig` when the thread that started it ends (a
    test run killed, or a pytest worker that exits hard), so nothing it started outlives it
    holding a port. libc is loaded here, in the parent; the child only makes the system
    call (prctl(2), PR_SET_PDEATHSIG)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1  # <linux/prctl.h>

    def child() -> None:
        prctl(pr_set_pdeathsig, sig)

    return child


def stop_child(proc: subprocess.Popen[Any], timeout: float = 15.0, *, group: bool = False) -> int:
    """Stop a child this process started and holds (not one found by pid file: see
    Processes.stop): SIGTERM, SIGKILL after `timeout` (at once when 0); returns its exit
    status once it is gone and reaped. `group`: signal its whole process group."""
    if proc.poll() is None:
        send = _sender(proc.pid, True) if group else proc.send_signal
        terminate(f"pid {proc.pid}", send, lambda: proc.poll() is not None, timeout)
    return proc.wait()


async def stop_process(proc: asyncio.subprocess.Process, timeout: float = 15.0) -> int:
    """stop_child for an asyncio child: SIGTERM, SIGKILL after `timeout` (at once when 0);
    its exit status once the event loop has reaped it."""
    if proc.returncode is not None:
        return proc.returncode
    if timeout > 0:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(proc.wait(), timeout)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    try:
        return await asyncio.wait_for(proc.wait(), KILL_WAIT)
    except TimeoutError:
        raise StillRunning(f"pid {proc.pid} still runs {KILL_WAIT:.0f}s after SIGKILL") from None


# --------------------------------------------------------------------------- children


@contextlib.contextmanager
def _log_file(log: Path | None, argv: list[str], append: bool) -> Iterator[IO[bytes] | int]:
    """The child's stdout/stderr: the log file opened for it (closed in this process once the
    child has its copy), headed by the command line; DEVNULL without a log."""
    if log is None:
        yield subprocess.DEVNULL
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab" if append else "wb") as out:
        out.write(f"--- {time.strftime('%FT%T')} {' '.join(argv)}\n".encode())
        out.flush()
        yield out


@dataclass
class Child:
    """A program this process started and holds; its output goes to `log`."""

    name: str
    popen: subprocess.Popen[Any]
    log: Path | None = None
    group: bool = False  # it leads its own process group; signals go to the whole group
    log_start: int = 0  # where this child's output begins in `log` (after its header)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log_probe(self, needle: str) -> Callable[[], str | None]:
        """A probe for the first line of this child's output that contains `needle`."""
        return log_probe(self.log or Path(os.devnull), needle, self.log_start)

    def tail(self, lines: int = TAIL_LINES) -> str:
        return log_tail(self.log, lines)

    def check_running(self) -> None:
        """Raise ProcessExited, with the log's tail, once the program has exited."""
        code = self.popen.poll()
        if code is not None:
            raise ProcessExited(self.name, code, self.log, self.tail())

    def wait_ready(
        self, probe: Callable[[], T], timeout: float, *, interval: float = 0.5, what: str = ""
    ) -> T:
        """probe()'s first truthy answer; ProcessExited if the program exits first,
        NotReady after `timeout` seconds."""
        return wait_for(
            what or f"{self.name} to get ready", probe, timeout, interval, self.check_running
        )

    def stop(self, timeout: float = 15.0) -> int:
        return stop_child(self.popen, timeout, group=self.group)

    def __enter__(self) -> Child:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start(
    name: str,
    argv: list[str],
    *,
    log: Path | None = None,
    append: bool = True,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    new_session: bool = False,
) -> Child:
    """Start `argv` with stdin from /dev/null and stdout and stderr into `log` (appended to,
    or truncated when not `append`; discarded without a log). `new_session`: the child leads
    a session and process group of its own, which stop() signals as a whole, and a terminal's
    Ctrl-C does not reach it."""
    with _log_file(log, argv, append) as out:
        # before the child runs: it shares this file description, so once it writes, tell()
        # would count its first lines as header and a probe would never see them
        offset = 0 if isinstance(out, int) else out.tell()
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=new_session,
            close_fds=True,
        )
    return Child(name, popen, log, new_session, offset)


@dataclass
class AsyncChild:
    """Child, for a caller that runs an event loop: the same start, wait and stop."""

    name: str
    process: asyncio.subprocess.Process
    log: Path | None = None
    log_start: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_probe(self, needle: str) -> Callable[[], Awaitable[str | None]]:
        probe = log_probe(self.log or Path(os.devnull), needle, self.log_start)

        async def check() -> str | None:
            return probe()

        return check

    def tail(self, lines: int = TAIL_LINES) -> str:
        return log_tail(self.log, lines)

    def check_running(self) -> None:
        code = self.process.returncode
        if code is not None:
            raise ProcessExited(self.name, code, self.log, self.tail())

    async def wait_ready(
        self,
        probe: Callable[[], Awaitable[T]],
        timeout: float,
        *,
        interval: float = 0.5,
        what: str = "",
    ) -> T:
        return await wait_for_async(
            what or f"{self.name} to get ready", probe, timeout, interval, self.check_running
        )

    async def stop(self, timeout: float = 15.0) -> int:
        return await stop_process(self.process, timeout)


async def start_async(
    name: str,
    argv: list[str],
    *,
    log: Path | None = None,
    append: bool = True,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
) -> AsyncChild:
    """start() for an event loop's caller (asyncio.create_subprocess_exec)."""
    with _log_file(log, argv, append) as out:
        offset = 0 if isinstance(out, int) else out.tell()  # before the child runs, as in start()
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
        )
    return AsyncChild(name, process, log, offset)


# --------------------------------------------------------------------------- the lab's


class Processes:
    """The lab's programs under one run directory: logs/<name>.log, pids/<name>.pid."""

    def __init__(self, run: Path, log: Callable[[str], None]) -> None:
        self.run = run
        self.logs = run / "logs"
        self.pids = run / "pids"
        self.log = log
        # The processes this Python process started, to notice one exiting while waiting.
        self._children: dict[str, Child] = {}

    def _pidfile(self, name: str) -> Path:
        return self.pids / f"{name}.pid"

    def pid(self, name: str) -> int | None:
        """The pid of a running lab program, or None."""
        try:
            pid_s, start_time = self._pidfile(name).read_text().split()
        except (OSError, ValueError):
            return None
        pid = int(pid_s)
        return pid if alive(pid, start_time) else None

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> int:
        if self.pid(name):
            raise LabError(f"{name} already runs (pid {self.pid(name)})")
        self.pids.mkdir(parents=True, exist_ok=True)
        child = start(
            name, argv, log=self.logs / f"{name}.log", cwd=self.run, env=env, new_session=True
        )
        start_time = None
        for _ in range(50):
            start_time = proc_start_time(child.pid)
            if start_time:
                break
            time.sleep(0.01)
        self._pidfile(name).write_text(f"{child.pid} {start_time}\n")
        self._children[name] = child
        return child.pid

    def check_running(self, name: str) -> Callable[[], None]:
        """A check for wait_for(): raises ProcessExited, with the log's tail, once `name`
        (started by this process) exited."""

        def check() -> None:
            child = self._children.get(name)
            if child is not None:
                child.check_running()

        return check

    def tail(self, name: str, lines: int = TAIL_LINES) -> str:
        return log_tail(self.logs / f"{name}.log", lines)

    def stop(self, name: str, timeout: float | None = None) -> bool:
        """SIGTERM a program (its whole process group), SIGKILL after timeout (at once when
        0); False when it was not running."""
        timeout = STOP_TIMEOUT.get(name, 15.0) if timeout is None else timeout
        pid = self.pid(name)
        pf = self._pidfile(name)
        child = self._children.pop(name, None)
        if pid is None:
            pf.unlink(missing_ok=True)
            return False

        def gone() -> bool:
            if child is not None:
                child.popen.poll()  # reap our own child, or it lingers as a zombie
            return self.pid(name) is None

        try:
            terminate(f"{name} (pid {pid})", _sender(pid, True), gone, timeout, on_kill=self.log)
        except StillRunning as exc:  # reported; `down` goes on with the other programs
            self.log(str(exc))
        pf.unlink(missing_ok=True)
        return True
