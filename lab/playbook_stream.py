"""An ansible-playbook run whose progress is on screen while it runs: one line per task.

site.yml on the real-node cluster takes about 2.5 minutes, and the demo used to print nothing
until it ended. Here ansible-playbook's own output (the default callback, ansible.cfg) is read
line by line as the child prints it: every line goes to the run's log file at once (the full
log, as `AnsibleHost.playbook` writes it), and `TaskLines` folds it into one screen line per
task, printed when the task ends, with its outcome and how long it took. A task still running
after `HEARTBEAT_SECONDS` (a rollout wait, a restart, a health check) is named again with its
time so far, so the screen is never silent for longer than that.
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from lab.hosts import REPO, AnsibleHost, PlaybookRun
from lab.processes import LabError

__all__ = ["HEARTBEAT_SECONDS", "TaskLines", "run_playbook", "stream"]

HEARTBEAT_SECONDS = 15.0

# The default callback's headers: "TASK [role : name] ****", "RUNNING HANDLER [...] ****",
# "PLAY [name] ****", "PLAY RECAP ****".
_HEADER = re.compile(r"^(TASK|RUNNING HANDLER|PLAY|PLAY RECAP)\s*(?:\[(.*)\])?\s*\**\s*$")
# Its result lines: "ok: [host]", "changed: [host] => (item=...)", "fatal: [host]: FAILED! =>",
# "failed: [host] (item=...)", "skipping: [host]", "included: file for host", "...ignoring".
_RESULT = re.compile(r"^(ok|changed|skipping|fatal|failed|included|unreachable):")
# The worst outcome of a task's results wins its line (a loop's items, several hosts).
_RANK = {"skipping": 0, "included": 1, "ok": 2, "changed": 3, "ignored": 4, "failed": 5}


@dataclass
class _Task:
    name: str
    kind: str
    started: float
    outcome: str | None = None
    said_at: float = 0.0
    results: list[str] = field(default_factory=list)


class TaskLines:
    """Folds ansible-playbook's default output into screen lines (pure: the caller passes
    each line with the time it arrived, and asks for heartbeats with the time now)."""

    def __init__(self, heartbeat: float = HEARTBEAT_SECONDS) -> None:
        self.heartbeat = heartbeat
        self._task: _Task | None = None
        self._recap = False
        self._started: float | None = None

    def _elapsed(self, now: float) -> str:
        seconds = int(now - (self._started if self._started is not None else now))
        return f"{seconds // 60}:{seconds % 60:02d}"

    def _close(self, now: float) -> list[str]:
        task, self._task = self._task, None
        if task is None:
            return []
        outcome = task.outcome or "done"
        kind = "handler " if task.kind == "RUNNING HANDLER" else ""
        return [f"  {self._elapsed(now)} {outcome:8} {now - task.started:5.1f}s  {kind}{task.name}"]

    def line(self, text: str, now: float) -> list[str]:
        """The screen lines that `text`, arriving at `now`, completes (often none)."""
        if self._started is None:
            self._started = now
        text = text.rstrip("\n")
        if self._recap:
            return [text] if text.strip() else []
        header = _HEADER.match(text)
        if header:
            out = self._close(now)
            kind, name = header[1], header[2] or ""
            if kind == "PLAY RECAP":
                self._recap = True
                return [*out, "PLAY RECAP"]
            if kind == "PLAY":
                return [*out, f"PLAY [{name}]"]
            self._task = _Task(name, kind, now, said_at=now)
            return out
        result = _RESULT.match(text)
        if result and self._task is not None:
            outcome = {"fatal": "failed", "unreachable": "failed"}.get(result[1], result[1])
            if self._task.outcome is None or _RANK[outcome] > _RANK[self._task.outcome]:
                self._task.outcome = outcome
        elif text.startswith("...ignoring") and self._task is not None:
            self._task.outcome = "ignored"
        return []

    def tick(self, now: float) -> list[str]:
        """A line naming the running task when it has run `heartbeat` seconds since it was
        last named."""
        task = self._task
        if task is None or now - task.said_at < self.heartbeat:
            return []
        task.said_at = now
        return [f"  {self._elapsed(now)} running  {now - task.started:5.0f}s  {task.name}"]

    def end(self, now: float) -> list[str]:
        """The line of a task the output ended in (a playbook killed mid-task)."""
        return self._close(now)


def _pump(pipe: IO[str], into: queue.Queue[tuple[str, str | None]], name: str) -> None:
    for text in iter(pipe.readline, ""):
        into.put((name, text))
    into.put((name, None))


def stream(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log: Path,
    show: Callable[[str], None],
    heartbeat: float = HEARTBEAT_SECONDS,
    timeout: float = 900,
) -> tuple[int, str, str]:
    """Run `argv`; its stdout is written to `log` line by line as it comes and folded by
    TaskLines into `show`. Returns (rc, stdout, stderr); stderr goes to the log's end.
    Raises LabError when the run takes longer than `timeout` (the child is killed first)."""
    lines = TaskLines(heartbeat)
    got: queue.Queue[tuple[str, str | None]] = queue.Queue()
    out: list[str] = []
    err: list[str] = []
    deadline = time.monotonic() + timeout

    def say(texts: Iterable[str]) -> None:
        for text in texts:
            show(text)

    with log.open("w") as file, subprocess.Popen(
        argv, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, bufsize=1,
    ) as proc:  # fmt: skip
        file.write(" ".join(argv) + "\n\n")
        file.flush()
        assert proc.stdout is not None and proc.stderr is not None
        readers = [
            threading.Thread(target=_pump, args=(pipe, got, name), daemon=True)
            for pipe, name in ((proc.stdout, "out"), (proc.stderr, "err"))
        ]
        for reader in readers:
            reader.start()
        open_pipes = 2
        while open_pipes:
            left = deadline - time.monotonic()
            if left <= 0:
                proc.kill()
                proc.wait()
                say(lines.end(time.monotonic()))
                file.write("".join(out) + "\n--- stderr ---\n" + "".join(err))
                raise LabError(
                    f"{' '.join(argv[:4])} ...: no end after {timeout:.0f}s (log: {log})"
                )
            try:
                name, text = got.get(timeout=min(left, max(heartbeat / 3, 0.05)))
            except queue.Empty:
                say(lines.tick(time.monotonic()))
                continue
            if text is None:
                open_pipes -= 1
            elif name == "out":
                out.append(text)
                file.write(text)
                file.flush()
                say(lines.line(text, time.monotonic()))
            else:
                err.append(text)
            say(lines.tick(time.monotonic()))
        rc = proc.wait()
        say(lines.end(time.monotonic()))
        file.write("\n--- stderr ---\n" + "".join(err))
    return rc, "".join(out), "".join(err)


def run_playbook(
    host: AnsibleHost,
    playbook: str,
    show: Callable[[str], None],
    *,
    heartbeat: float = HEARTBEAT_SECONDS,
    timeout: float = 900,
) -> PlaybookRun:
    """`host.playbook(playbook)` with its tasks on screen as they run; the same log file."""
    argv = host.playbook_argv(playbook)
    host.runs += 1
    log = host.workdir / f"{host.name}-{host.runs:02d}-{Path(playbook).stem}.log"
    show(f"full log: {log}")
    rc, out, err = stream(
        argv, cwd=REPO, env=host.env(), log=log, show=show, heartbeat=heartbeat, timeout=timeout
    )
    return PlaybookRun(argv, rc, out, err)
