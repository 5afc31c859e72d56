"""lab/progress.py and lab/prepare.py: the first run names what it builds while it builds it.

Real subprocesses stand for the steps (a Go build is one too); the output goes where a
newcomer's terminal or a CI log would take it: a pseudo-terminal for the bar, a pipe-like
text stream for plain lines.
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lab import prepare
from lab.processes import LabError
from lab.progress import Step, StepTimes, run_steps

ROOT = Path(__file__).resolve().parents[1]


def sleeper(name: str, seconds: float, rc: int = 0, say: str = "working") -> Step:
    script = f"for i in 1 2 3; do echo '{say} '$i; done; sleep {seconds}; exit {rc}"
    return Step(name, ["sh", "-c", script])


def test_plain_lines_name_each_step_its_count_time_and_what_is_left(tmp_path):
    times = StepTimes(tmp_path / "times.json")
    out = io.StringIO()
    log = tmp_path / "build.log"
    run_steps(
        "first build",
        [sleeper("alpha", 1.6), sleeper("beta", 0.2)],
        out=out,
        times=times,
        log=log,
        heartbeat=0.5,
    )
    text = out.getvalue()
    assert f"full log: {log}" in text.splitlines()[0]
    assert "[1/2] alpha: started" in text
    assert "[2/2] beta: started" in text
    # a heartbeat while alpha runs: never silent for longer than the heartbeat
    assert re.search(r"\[1/2\] alpha: \ds so far .*left", text), text
    assert re.search(r"\[1/2\] alpha: done in \ds", text)
    assert "first build: done in" in text.splitlines()[-1]
    # the steps' own output is in the log, not on the screen
    assert "working 3" in log.read_text() and "working" not in text
    recorded = json.loads((tmp_path / "times.json").read_text())
    assert 1.5 <= recorded["alpha"] < 10 and recorded["beta"] < 5


def test_estimates_come_from_the_last_build_recorded_here(tmp_path):
    times = StepTimes(tmp_path / "times.json")
    times.record("kube-apiserver", 600.0)
    times.record("kwok", 120.0)
    out = io.StringIO()
    run_steps("again", [Step("kube-apiserver", ["true"]), Step("kwok", ["true"])], out=out,
              times=StepTimes(tmp_path / "times.json"), log=tmp_path / "l.log")  # fmt: skip
    first = out.getvalue().splitlines()[0]
    assert "~12 min by this machine's last build" in first, first
    assert "[1/2] kube-apiserver: started (~10m00s; ~12 min left)" in out.getvalue()


def test_a_failed_step_prints_its_tail_and_names_the_log(tmp_path):
    out = io.StringIO()
    log = tmp_path / "build.log"
    broken = sleeper("broken", 0, rc=3, say="compile error")
    steps = [sleeper("fine", 0), broken, Step("never", ["true"])]
    with pytest.raises(LabError) as err:
        run_steps("build", steps, out=out, times=StepTimes(tmp_path / "t.json"), log=log)
    assert "broken failed (exit 3)" in str(err.value) and str(log) in str(err.value)
    assert "compile error 3" in out.getvalue()
    assert "never" not in out.getvalue()
    assert "broken" not in json.loads((tmp_path / "t.json").read_text())


def test_a_terminal_gets_a_progress_bar(tmp_path):
    main, sub = pty.openpty()
    with os.fdopen(sub, "w") as tty:
        run_steps("bar", [sleeper("alpha", 1.5)], out=tty, times=StepTimes(tmp_path / "t.json"),
                  log=tmp_path / "l.log")  # fmt: skip
    chunks = []
    os.set_blocking(main, False)
    while True:
        try:
            chunk = os.read(main, 65536)
        except (BlockingIOError, OSError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    screen = b"".join(chunks).decode(errors="replace")
    assert "━" in screen, screen  # rich's bar
    assert "[1/1] alpha" in screen and "done in" in screen


def test_the_real_node_plan_lists_what_the_image_script_builds():
    script = prepare.REALNODE_IMAGE_SCRIPT.read_text()
    block = re.search(r"^PROGRAMS=\(([^)]*)\)", script, re.M)
    assert block, "build-image no longer has a PROGRAMS=(...) list"
    assert tuple(block.group(1).split()) == prepare.REALNODE_PROGRAMS


def test_the_upgrade_plan_lists_what_the_previous_images_need():
    script = prepare.REALNODE_IMAGE_SCRIPT.read_text()
    block = re.search(r"^\s*prev=\(([^)]*)\)", script, re.M)
    assert block, "build-image no longer has a prev=(...) list"
    assert tuple(f"{n}-previous" for n in block.group(1).split()) == prepare.PREVIOUS_PROGRAMS


def test_lab_build_answers_missing_without_building(tmp_path):
    env = dict(os.environ, LOADWISE_LAB_CACHE=str(tmp_path))
    build = str(ROOT / "lab" / "build")
    proc = subprocess.run([build, "--missing", "kwok", "prometheus", "kube-proxy-previous"],
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["kwok", "prometheus", "kube-proxy-previous"]
    assert not list(tmp_path.glob("*/bin/kwok")) and not list(tmp_path.glob("tools-*/bin/*"))
    proc = subprocess.run([build, "--missing"], env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert proc.stdout.split() == list(prepare.LAB_PROGRAMS)
    proc = subprocess.run([build, "--missing", "no-such"], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode != 0 and "unknown binary 'no-such'" in proc.stderr


def test_prepare_is_a_lab_command():
    proc = subprocess.run([sys.executable, "-m", "lab", "prepare", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0 and "test" in proc.stdout
