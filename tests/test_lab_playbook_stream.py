"""lab/playbook_stream.py: the demo's site.yml run shows its tasks while it runs.

A fake ansible-playbook (a script printing the default callback's lines with sleeps between
them) stands for the real one, on no cluster and no node: what matters is when each line
reaches the screen, and that the run's full log keeps everything.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from lab import hosts
from lab.hosts import AnsibleHost
from lab.playbook_stream import TaskLines, run_playbook, stream
from lab.processes import LabError

FAKE = """\
import sys, time
def say(text):
    print(text, flush=True)
say("PLAY [Select the control-plane hosts] ****")
say("TASK [loadwise_preflight : Check the variables] ****")
say("ok: [cp-1]")
time.sleep(1.0)
say("TASK [loadwise_extender : Install the extender] ****")
time.sleep(1.0)
say("changed: [cp-1]")
say("TASK [loadwise_scheduler_config : Wait for the scheduler] ****")
time.sleep(1.2)
say("ok: [cp-1]")
say("PLAY RECAP ****")
say("cp-1 : ok=3    changed=1    unreachable=0    failed=0    skipped=0")
print("[WARNING]: a warning on stderr", file=sys.stderr, flush=True)
sys.exit(int(sys.argv[-1].endswith("fail.yml")))
"""


def _fake_ansible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str = FAKE) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ansible-playbook"
    script.write_text(f"#!{sys.executable}\n{body}")
    script.chmod(0o755)
    monkeypatch.setattr(hosts, "VENV_BIN", bin_dir)
    return script


def _host(tmp_path: Path) -> AnsibleHost:
    return AnsibleHost(
        "cp-1",
        "kubeadm",
        tmp_path,
        address="127.0.0.1",
        ssh_port=22,
        kubeconfig=str(tmp_path / "kubeconfig"),
        site_vars={},
    )


def test_each_task_reaches_the_screen_when_it_ends_not_when_the_run_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_ansible(tmp_path, monkeypatch)
    seen: list[tuple[float, str]] = []
    started = time.monotonic()
    run = run_playbook(
        _host(tmp_path),
        "playbooks/site.yml",
        lambda line: seen.append((time.monotonic() - started, line)),
        heartbeat=0.5,
    )
    ended = time.monotonic() - started
    assert run.rc == 0
    lines = [line for _, line in seen]

    def when(part: str) -> float:
        return next(t for t, line in seen if part in line)

    # the first task's line came while the child still had 3.2 s of sleeps ahead of it
    assert ended - when("Check the variables") > 2.0, seen
    assert when("Check the variables") < when("Install the extender") < when("Wait for")
    assert any(" ok " in line and "Check the variables" in line for line in lines), lines
    assert any(" changed " in line and "Install the extender" in line for line in lines), lines
    # a heartbeat named the task that ran for 1.2 s while it ran
    assert any(" running " in line and "Wait for the scheduler" in line for line in lines), lines
    assert "PLAY [Select the control-plane hosts]" in lines
    assert lines[-1].startswith("cp-1 : ok=3"), lines
    # one line per task: the result lines themselves are not repeated on the screen
    assert not any(line.startswith(("ok:", "changed:")) for line in lines), lines
    assert lines[0] == f"full log: {tmp_path / 'cp-1-01-site.log'}"
    log = (tmp_path / "cp-1-01-site.log").read_text()
    assert "TASK [loadwise_extender : Install the extender]" in log
    assert log.index("changed: [cp-1]") < log.index("--- stderr ---")
    assert "[WARNING]: a warning on stderr" in log.split("--- stderr ---")[1]
    assert run.changed == {"cp-1": 1}
    assert "a warning on stderr" in run.stderr


def test_the_log_grows_while_the_run_goes_on(tmp_path: Path) -> None:
    script = tmp_path / "slow"
    script.write_text(
        f"#!{sys.executable}\nimport time\n"
        "print('TASK [first] ***', flush=True)\nprint('ok: [cp-1]', flush=True)\n"
        "time.sleep(1.5)\nprint('TASK [second] ***', flush=True)\n"
    )
    script.chmod(0o755)
    log = tmp_path / "run.log"
    sizes: list[str] = []
    rc, out, _ = stream(
        [str(script)],
        cwd=tmp_path,
        env={},
        log=log,
        show=lambda line: sizes.append(log.read_text()),
        heartbeat=0.3,
    )
    assert rc == 0 and "TASK [second]" in out
    # when the first task's line was shown, its result was already in the log, the second
    # task not yet
    first = next(i for i, text in enumerate(sizes) if "ok: [cp-1]" in text)
    assert "TASK [second]" not in sizes[first]


def test_a_failed_run_returns_its_code_and_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_ansible(tmp_path, monkeypatch)
    run = run_playbook(_host(tmp_path), "playbooks/fail.yml", lambda line: None, heartbeat=5)
    assert run.rc == 1
    assert "PLAY RECAP" in run.tail(10)


def test_a_run_past_its_timeout_is_killed_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_ansible(tmp_path, monkeypatch, "import time\nprint('TASK [hang] ***', flush=True)\n"
                  "time.sleep(60)\n")  # fmt: skip
    seen: list[str] = []
    started = time.monotonic()
    with pytest.raises(LabError, match=r"no end after 1s \(log: .*cp-1-01-site\.log\)"):
        run_playbook(_host(tmp_path), "playbooks/site.yml", seen.append, timeout=1)
    assert time.monotonic() - started < 10
    assert any("hang" in line for line in seen), seen


def test_a_task_line_says_the_worst_outcome_of_its_results() -> None:
    lines = TaskLines(heartbeat=10)
    feed = [
        "TASK [role : loop] ***",
        "ok: [cp-1] => (item=a)",
        "changed: [cp-1] => (item=b)",
        "skipping: [cp-1] => (item=c)",
        "TASK [role : may fail] ***",
        'fatal: [cp-1]: FAILED! => {"msg": "no"}',
        "...ignoring",
        "RUNNING HANDLER [role : restart] ***",
        "changed: [cp-1]",
        "TASK [role : all skipped] ***",
        "skipping: [cp-1]",
        "TASK [role : broken] ***",
        "fatal: [cp-1]: UNREACHABLE! => {}",
        "PLAY RECAP ***",
        "cp-1 : ok=1 changed=1",
    ]
    out: list[str] = []
    for i, text in enumerate(feed):
        out += lines.line(text, now=float(i))
    assert [line.split()[1] for line in out[:5]] == [
        "changed",
        "ignored",
        "changed",
        "skipping",
        "failed",
    ], out
    assert "handler role : restart" in out[2]
    assert out[-2:] == ["PLAY RECAP", "cp-1 : ok=1 changed=1"]
    # seconds per task: the loop began at 0 and ended when the next header came at 4
    assert "4.0s  role : loop" in out[0], out


def test_a_long_task_is_named_every_heartbeat_and_a_cut_run_names_its_last() -> None:
    lines = TaskLines(heartbeat=15)
    assert lines.line("TASK [role : wait] ***", now=100.0) == []
    assert lines.tick(110.0) == []
    assert lines.tick(116.0) == ["  0:16 running     16s  role : wait"]
    assert lines.tick(120.0) == []
    assert lines.tick(131.0) == ["  0:31 running     31s  role : wait"]
    assert lines.end(140.0) == ["  0:40 done      40.0s  role : wait"]
    assert lines.end(141.0) == []
