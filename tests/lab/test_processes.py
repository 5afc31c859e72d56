"""lab/processes.py on real child processes (small `python -c` programs, on loopback only):
the readiness wait, its early failure when the child exits, and the stop's kill fallback.
No cluster: nothing here asks for the `lab` fixture."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lab.processes import (
    KILL_WAIT,
    Child,
    NotReady,
    Processes,
    ProcessExited,
    alive,
    http_probe,
    log_probe,
    port_probe,
    start,
    start_async,
    wait_for_async,
)

# A child that says so once its SIGTERM handler is in place: signalling it earlier would
# test Python's default handler instead.
IGNORES_TERM = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('armed', flush=True)\n"
    "time.sleep(60)\n"
)
EXITS_ON_TERM = (
    "import signal, sys, time\n"
    "def bye(*_):\n"
    "    print('got TERM', flush=True)\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, bye)\n"
    "print('armed', flush=True)\n"
    "time.sleep(60)\n"
)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def armed(child: Child) -> None:
    child.wait_ready(child.log_probe("armed"), 20, interval=0.05)


def test_waits_for_a_port_then_an_http_answer_and_stops(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "readyz").write_text("ok\n")
    argv = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]
    with start("web", argv, log=tmp_path / "web.log", cwd=tmp_path / "www") as child:
        assert child.wait_ready(port_probe(port), 20, interval=0.05) is True
        url = f"http://127.0.0.1:{port}/readyz"
        assert child.wait_ready(http_probe(url), 20, interval=0.05) == (200, "ok\n")
        # http.server does not catch SIGTERM: the default action ends it
        assert child.stop(5) == -15
    assert child.popen.returncode == -15
    assert not alive(child.pid, None)
    # the log is headed by the command line, so a log holding several runs tells them apart
    assert (tmp_path / "web.log").read_text().startswith("--- ")


def test_a_time_out_names_the_wait_and_the_last_answer(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]
    with start("web", argv, log=tmp_path / "web.log", cwd=tmp_path) as child:
        child.wait_ready(port_probe(port), 20, interval=0.05)
        with pytest.raises(NotReady) as caught:
            child.wait_ready(http_probe(f"http://127.0.0.1:{port}/missing"), 0.5, interval=0.1)
    assert "waiting for web to get ready: 404" in str(caught.value)
    assert isinstance(caught.value, TimeoutError)  # for callers that catch that


def test_a_child_that_exits_early_fails_the_wait_at_once(tmp_path: Path) -> None:
    code = "import sys\nfor i in range(40): print(f'line {i}')\nsys.exit(3)\n"
    child = start("quitter", python(code), log=tmp_path / "quitter.log")
    began = time.monotonic()
    with pytest.raises(ProcessExited) as caught:
        child.wait_ready(port_probe(free_port()), 60, interval=0.05)
    assert time.monotonic() - began < 20  # not the 60 s time-out
    message = str(caught.value)
    assert message.startswith("quitter exited with status 3; last lines of ")
    assert "line 39" in message and "line 14" not in message  # the last 25 lines only
    assert caught.value.returncode == 3
    assert child.stop() == 3


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    child = start("stubborn", python(IGNORES_TERM), log=tmp_path / "stubborn.log")
    armed(child)
    began = time.monotonic()
    assert child.stop(0.5) == -9
    took = time.monotonic() - began
    assert 0.5 <= took < 0.5 + KILL_WAIT


def test_sigterm_comes_first_and_a_zero_grace_period_kills_at_once(tmp_path: Path) -> None:
    polite = start("polite", python(EXITS_ON_TERM), log=tmp_path / "polite.log")
    armed(polite)
    assert polite.stop(10) == 0
    assert polite.log_probe("got TERM")() == "got TERM"

    killed = start("killed", python(EXITS_ON_TERM), log=tmp_path / "killed.log")
    armed(killed)
    assert killed.stop(0) == -9
    assert killed.log_probe("got TERM")() is None


def test_a_new_session_is_stopped_as_a_whole(tmp_path: Path) -> None:
    code = (
        "import subprocess, sys, time\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print('grandchild', g.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    child = start("parent", python(code), log=tmp_path / "parent.log", new_session=True)
    line = child.wait_ready(child.log_probe("grandchild"), 20, interval=0.05)
    assert line is not None
    grandchild = int(line.split()[1])
    assert alive(grandchild, None)
    assert child.stop(5) == -15
    # SIGTERM went to the group: the grandchild got it too (a zombie counts as gone)
    deadline = time.monotonic() + 10
    while alive(grandchild, None) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild, None)


def test_a_child_started_to_die_with_its_parent_goes_when_the_parent_exits_hard() -> None:
    # the parent ends without stopping anything (os._exit: no finally, no atexit), as a
    # pytest worker killed by faulthandler does
    code = (
        "import os, signal, subprocess, sys\n"
        "from lab.processes import die_with_parent\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
        "                     preexec_fn=die_with_parent(signal.SIGKILL))\n"
        "print('grandchild', g.pid, flush=True)\n"
        "sys.stdin.readline()\n"
        "os._exit(0)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None and parent.stdin is not None
    grandchild = int(parent.stdout.readline().split()[1])
    assert alive(grandchild, None)
    parent.stdin.write("\n")
    parent.stdin.flush()
    assert parent.wait(10) == 0
    deadline = time.monotonic() + 10
    while alive(grandchild, None) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild, None)


def test_the_labs_processes_stop_by_pid_file_with_the_kill_fallback(tmp_path: Path) -> None:
    said: list[str] = []
    procs = Processes(tmp_path, said.append)
    pid = procs.spawn("stubborn", python(IGNORES_TERM))
    assert procs.pid("stubborn") == pid
    procs.check_running("stubborn")()  # running: no error
    log = procs.logs / "stubborn.log"
    deadline = time.monotonic() + 20
    # a line of its own: the log's header, the command line, holds the word too
    while "armed" not in log.read_text().splitlines() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert procs.stop("stubborn", timeout=0.5) is True
    assert said == [f"stubborn (pid {pid}) ignored SIGTERM for 0s; killing it"]
    assert procs.pid("stubborn") is None
    assert not (tmp_path / "pids" / "stubborn.pid").exists()
    assert not alive(pid, None)
    assert procs.stop("stubborn") is False  # not running any more


def test_the_labs_processes_report_a_program_that_exited(tmp_path: Path) -> None:
    procs = Processes(tmp_path, print)
    procs.spawn("quitter", python("print('bad flag'); raise SystemExit(2)"))
    with pytest.raises(ProcessExited, match=r"quitter exited with status 2(.|\n)*bad flag"):
        for _ in range(400):
            procs.check_running("quitter")()
            time.sleep(0.05)
    procs.stop("quitter")


async def test_an_async_child_waits_and_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    log = tmp_path / "stubborn.log"
    child = await start_async("stubborn", python(IGNORES_TERM), log=log)

    assert await child.wait_ready(child.log_probe("armed"), 20, interval=0.05) == "armed"
    began = time.monotonic()
    assert await child.stop(0.5) == -9
    assert time.monotonic() - began >= 0.5


def test_output_written_before_start_returns_is_the_childs_not_the_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The child shares the log's file description: a child quicker than its parent moves the
    # parent's offset. Make it always quicker (Popen returns once the child has exited).
    real_popen = subprocess.Popen

    def finished_popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        popen: subprocess.Popen[bytes] = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        popen.wait(20)
        return popen

    monkeypatch.setattr(subprocess, "Popen", finished_popen)
    child = start("quick", python("print('armed', flush=True)"), log=tmp_path / "quick.log")
    assert child.log_probe("armed")() == "armed"


async def test_an_async_childs_first_output_is_seen_however_quick_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_exec = asyncio.create_subprocess_exec

    async def finished_exec(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        process = await real_exec(*args, **kwargs)
        await process.wait()
        return process

    monkeypatch.setattr(asyncio, "create_subprocess_exec", finished_exec)
    child = await start_async("quick", python("print('armed', flush=True)"), log=tmp_path / "q.log")
    assert await child.log_probe("armed")() == "armed"


async def test_an_async_child_that_exits_early_fails_the_wait(tmp_path: Path) -> None:
    log = tmp_path / "quitter.log"
    child = await start_async("quitter", python("print('no config'); raise SystemExit(2)"), log=log)

    async def never() -> bool:
        return False

    with pytest.raises(ProcessExited, match=r"quitter exited with status 2(.|\n)*no config"):
        await child.wait_ready(never, 60, interval=0.05)
    assert await child.stop() == 2


async def test_an_async_wait_times_out_with_the_last_value_seen() -> None:
    async def half() -> int:
        return 0

    with pytest.raises(NotReady, match=r"waiting for nothing \(last seen: 0\)"):
        await wait_for_async("nothing", half, 0.2, interval=0.05)


def test_a_childs_log_probe_reads_only_its_own_output(tmp_path: Path) -> None:
    log = tmp_path / "twice.log"
    first = start("first", python("print('serving', 'on', 1)"), log=log)
    assert first.popen.wait(20) == 0
    second = start("second", python("import time; time.sleep(60)"), log=log)
    try:
        assert log_probe(log, "serving on")() == "serving on 1"  # the whole file
        assert second.log_probe("serving on")() is None  # an earlier run does not count
    finally:
        second.stop(0)


def test_a_log_probe_answers_with_whole_lines_only(tmp_path: Path) -> None:
    # an unbuffered child (PYTHONUNBUFFERED=1) writes print("grandchild", pid) in pieces;
    # a probe between the pieces once answered "grandchild" and the test read no pid
    log = tmp_path / "pieces.log"
    log.write_text("started\ngrandchild")
    probe = log_probe(log, "grandchild")
    assert probe() is None
    with log.open("a") as f:
        f.write(" 4242")
    assert probe() is None
    with log.open("a") as f:
        f.write("\r\n")
    assert probe() == "grandchild 4242"
