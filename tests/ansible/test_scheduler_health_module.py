"""plugins/modules/loadwise_scheduler_health.py, run as Ansible runs a module, against a local
HTTP server.

No host and no kube-scheduler: the "scheduler" is a sleep process started under a name made
for the test (the module finds it by argv[0], as it finds kube-scheduler), its health URL a
server on 127.0.0.1 in this process that answers healthy, unhealthy, slowly or not at all.
The module runs as AnsiballZ runs it in the end: its file with this venv's Python and a JSON
file of {"ANSIBLE_MODULE_ARGS": ...}; its answer is the JSON it prints. The role passes url,
since, timeout, stable, interval and either process kube-scheduler with log_glob (kubeadm)
or unit k3s (k3s; faked here with a systemctl and a journalctl on PATH).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.ansible.fakes import Health, HealthServer, NamedProcess, path_with, serve, start_named
from tests.ansible.plugins import module_file

MODULE = Path(__file__).resolve().parents[2] / "plugins/modules/loadwise_scheduler_health.py"


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/healthz"


@dataclass
class Run:
    rc: int
    result: dict[str, Any]
    err: str
    seconds: float

    @property
    def out(self) -> str:
        """The module's message, one line each, as the role's failure message quotes it."""
        return str(self.result.get("msg", "")) + "\n"


def _input(params: dict[str, Any], check: bool = False) -> str:
    """The module's arguments as Ansible hands them over (on stdin when no file is named)."""
    return json.dumps({"ANSIBLE_MODULE_ARGS": {**params, "_ansible_check_mode": check}})


def _since(params: dict[str, Any], since: float | None) -> dict[str, Any]:
    return {"since": int(time.time() - 5) if since is None else since, **params}


def _wait(
    params: dict[str, Any],
    *,
    since: float | None = None,
    env: dict[str, str] | None = None,
    check: bool = False,
    limit: float = 30,
) -> Run:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(MODULE)],
        input=_input(_since(params, since), check),
        capture_output=True,
        text=True,
        timeout=limit,
        env=env,
    )
    result = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return Run(proc.returncode, result, proc.stderr, time.monotonic() - start)


def _start(params: dict[str, Any], since: float | None = None) -> subprocess.Popen[str]:
    """The module started in the background (the test plays the kubelet meanwhile)."""
    proc = subprocess.Popen(
        [sys.executable, str(MODULE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(_input(_since(params, since)))
    proc.stdin.close()
    return proc


def _finish(proc: subprocess.Popen[str], limit: float = 20) -> tuple[int, dict[str, Any]]:
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.wait(timeout=limit)
    return proc.returncode, json.loads(out)


def _fast(
    url: str, name: str = "", *, unit: str = "", timeout: float = 3, stable: float = 1
) -> dict[str, Any]:
    """The role's arguments with short times: process name, or unit (k3s)."""
    target = {"unit": unit} if unit else {"process": name}
    return {"url": url, "timeout": timeout, "stable": stable, "interval": 0.2, **target}


def test_healthy_for_the_stable_time(health: HealthServer, scheduler: NamedProcess) -> None:
    state, url = health
    name, proc = scheduler
    run = _wait(_fast(url, name, timeout=10, stable=1))
    assert run.rc == 0, run.out + run.err
    assert run.out == f"healthy: pid {proc.pid} answered 200 on {url} for 1s\n"
    assert 1 <= run.seconds < 6
    # The first 200 starts the streak; only a later poll can find it a second long.
    assert state.requests >= 2


def test_unhealthy_times_out_with_the_status_and_body(
    health: HealthServer, scheduler: NamedProcess
) -> None:
    state, url = health
    state.status, state.body = 500, b"[-]sched-handler-sync failed: reason withheld"
    name, proc = scheduler
    run = _wait(_fast(url, name, timeout=2))
    assert run.rc == 1
    lines = run.out.splitlines()
    assert lines[0] == (
        f"kube-scheduler not healthy after 2s: pid {proc.pid}: {url} -> "
        "500 [-]sched-handler-sync failed: reason withheld"
    )
    assert lines[1:] == ["scheduler's own last errors:", "(no scheduler log found)"]
    assert 2 <= run.seconds < 8


def test_flapping_health_never_becomes_stable(
    health: HealthServer, scheduler: NamedProcess
) -> None:
    state, url = health
    state.answers = [200, 200, 503]
    name, _ = scheduler
    run = _wait(_fast(url, name, timeout=3, stable=1))
    assert run.rc == 1
    assert run.out.startswith("kube-scheduler not healthy after 3s: ")
    assert state.requests >= 6


def test_a_restarted_scheduler_starts_the_streak_again(
    health: HealthServer, scheduler: NamedProcess
) -> None:
    # A crash-looping scheduler: the streak belongs to one PID, so a new process (same
    # name) must answer for the whole --stable time itself.
    _, url = health
    name, first = scheduler
    start = time.monotonic()
    waiter = _start(_fast(url, name, timeout=15, stable=1.5))
    time.sleep(1)
    second = start_named(name)
    try:
        first.kill()
        rc, result = _finish(waiter)
    finally:
        second.kill()
        second.wait()
    assert rc == 0, result
    assert result["msg"] == f"healthy: pid {second.pid} answered 200 on {url} for 2s"
    assert result["pid"] == second.pid
    assert time.monotonic() - start >= 2.5


def test_healthy_but_not_for_long_enough(health: HealthServer, scheduler: NamedProcess) -> None:
    _, url = health
    name, proc = scheduler
    run = _wait(_fast(url, name, timeout=2, stable=60))
    assert run.rc == 1
    assert re.match(
        rf"kube-scheduler not healthy after 2s: pid {proc.pid} healthy for [12]s\n", run.out
    ), run.out


def test_a_slow_answer_counts_as_unreachable(health: HealthServer, scheduler: NamedProcess) -> None:
    # The probe gives up after max(interval, 2) seconds: an answer 30 s late is never waited
    # for (the upper bound leaves room for the module's start on a loaded machine).
    state, url = health
    state.delay = 30
    name, proc = scheduler
    run = _wait(_fast(url, name, timeout=1))
    assert run.rc == 1
    assert run.out.startswith(
        f"kube-scheduler not healthy after 1s: pid {proc.pid}: {url} -> unreachable ("
    )
    assert "timed out" in run.out.splitlines()[0]
    assert 2 <= run.seconds < 15


def test_nothing_listening(scheduler: NamedProcess) -> None:
    name, proc = scheduler
    url = _closed_port_url()
    run = _wait(_fast(url, name, timeout=1))
    assert run.rc == 1
    assert run.out.startswith(
        f"kube-scheduler not healthy after 1s: pid {proc.pid}: {url} -> unreachable ("
    )
    assert "refused" in run.out.splitlines()[0]
    assert run.seconds < 10  # a refusal is not waited on (room for a loaded machine)


def _absent() -> str:
    return f"loadwise-test-absent-{uuid.uuid4().hex[:12]}"


@pytest.mark.parametrize(
    ("case", "last"),
    [
        ("no process by that name", "no scheduler process"),
        # The old scheduler keeps answering 200 until the kubelet replaces it: not proof.
        ("started before --since", "the scheduler has not been restarted yet"),
        ("only an --exclude'd process", "no scheduler process"),
    ],
)
def test_no_new_scheduler_process_is_never_healthy(
    health: HealthServer, scheduler: NamedProcess, case: str, last: str
) -> None:
    state, url = health
    name, _ = scheduler
    since, extra = int(time.time()) - 5, {}
    if case == "no process by that name":
        name = _absent()
    elif case == "started before --since":
        since += 65
    else:
        extra = {"exclude": "300"}  # in the stand-in's command line
    run = _wait({**_fast(url, name, timeout=1), **extra}, since=since)
    assert run.rc == 1
    assert run.out.splitlines()[0] == f"kube-scheduler not healthy after 1s: {last}"
    assert state.requests == 0


def _log(tmp_path: Path, name: str, lines: list[str], age: float = 0) -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{line}\n" for line in lines))
    if age:
        mtime = time.time() - age
        os.utime(path, (mtime, mtime))
    return path


KLOG = [
    'I1123 10:00:00.000000       1 serving.go:380] "Generated self-signed cert"',
    'E1123 10:00:01.000000       1 run.go:72] "first error"',
    'E1123 10:00:02.000000       1 run.go:72] "second error"',
    "W1123 10:00:03.000000       1 warning",
]


def test_timeout_quotes_the_error_lines_of_the_newest_log(
    tmp_path: Path, scheduler: NamedProcess
) -> None:
    name, _ = scheduler
    _log(tmp_path, "kube-scheduler-old.log", ['E1123 09:00:00.000000 1 x.go:1] "stale"'], age=30)
    _log(tmp_path, "kube-scheduler-new.log", KLOG)
    url = _closed_port_url()
    run = _wait({**_fast(url, name, timeout=1), "log_glob": str(tmp_path / "kube-scheduler-*.log")})
    assert run.rc == 1
    assert run.out.splitlines()[1:] == ["scheduler's own last errors:", *KLOG[1:3]]


def test_timeout_without_error_lines_quotes_the_log_tail(
    tmp_path: Path, scheduler: NamedProcess
) -> None:
    name, _ = scheduler
    lines = [f"I1123 10:00:{i:02d}.000000 1 x.go:1] line {i}" for i in range(12)]
    _log(tmp_path, "kube-scheduler-a.log", lines)
    run = _wait(
        {
            **_fast(_closed_port_url(), name, timeout=1),
            "log_glob": str(tmp_path / "kube-scheduler-*.log"),
        }
    )
    assert run.rc == 1
    assert run.out.splitlines()[2:] == lines[-8:]


def test_a_log_older_than_since_is_not_quoted(tmp_path: Path, scheduler: NamedProcess) -> None:
    name, _ = scheduler
    _log(tmp_path, "kube-scheduler-a.log", KLOG, age=60)
    run = _wait(
        {
            **_fast(_closed_port_url(), name, timeout=1),
            "log_glob": str(tmp_path / "kube-scheduler-*.log"),
        }
    )
    assert run.rc == 1
    assert run.out.splitlines()[1:] == ["scheduler's own last errors:", "(no scheduler log found)"]


def test_a_fatal_log_line_ends_the_wait_early(tmp_path: Path) -> None:
    # No new scheduler process (it died of its config) and a fatal line in its log: the
    # module stops after fatal_grace instead of waiting out timeout.
    fatal = 'E1123 10:00:04.000000 1 run.go:72] "command failed" err="no such plugin"'
    _log(tmp_path, "kube-scheduler-a.log", [*KLOG, fatal])
    run = _wait(
        {
            **_fast(_closed_port_url(), _absent(), timeout=60),
            "fatal_grace": 0.5,
            "log_glob": str(tmp_path / "kube-scheduler-*.log"),
        }
    )
    assert run.rc == 1
    assert run.out.splitlines() == [
        "kube-scheduler exited with a fatal error after the change",
        "scheduler's own last errors:",
        fatal,
    ]
    assert run.seconds < 10


def test_a_fatal_line_does_not_end_a_healthy_streak(
    tmp_path: Path, health: HealthServer, scheduler: NamedProcess
) -> None:
    # A fatal line from an earlier crash is in the log, but by the end of fatal_grace the
    # new scheduler is answering 200: the module waits out the streak.
    _, url = health
    name, _ = scheduler
    _log(tmp_path, "kube-scheduler-a.log", ['E1123 10:00:04.000000 1 x.go:1] "command failed"'])
    run = _wait(
        {
            **_fast(url, name, timeout=10, stable=1.5),
            "fatal_grace": 0.5,
            "log_glob": str(tmp_path / "kube-scheduler-*.log"),
        }
    )
    assert run.rc == 0, run.out
    assert run.out.startswith("healthy: ")


def test_unit_main_pid_healthy(
    tmp_path: Path, health: HealthServer, scheduler: NamedProcess
) -> None:
    _, url = health
    _, proc = scheduler
    calls = tmp_path / "calls"
    env = path_with(
        tmp_path / "bin",
        {
            "systemctl": f'echo "$*" >> {calls}; echo {proc.pid}',
            "journalctl": "exit 0",
        },
    )
    run = _wait(_fast(url, unit="k3s", timeout=10), env=env)
    assert run.rc == 0, run.out + run.err
    assert run.out == f"healthy: pid {proc.pid} answered 200 on {url} for 1s\n"
    assert set(calls.read_text().splitlines()) == {"show -p MainPID --value k3s"}


def test_unit_stopped_quotes_its_journal(tmp_path: Path, health: HealthServer) -> None:
    _, url = health
    calls = tmp_path / "calls"
    since = int(time.time()) - 5
    env = path_with(
        tmp_path / "bin",
        {
            "systemctl": "echo 0",
            "journalctl": f'echo "$*" >> {calls}; printf "%s\\n" "starting" "Error: bad flag"',
        },
    )
    run = _wait(_fast(url, unit="k3s", timeout=1), since=since, env=env)
    assert run.rc == 1
    assert run.out.splitlines() == [
        "kube-scheduler not healthy after 1s: no scheduler process",
        "scheduler's own last errors:",
        "Error: bad flag",
    ]
    assert f"-u k3s --no-pager -o cat --since @{since}" in calls.read_text().splitlines()


def test_process_or_unit_is_required(health: HealthServer) -> None:
    _, url = health
    run = _wait({"url": url})
    assert run.rc == 1
    assert run.result["msg"] == "one of the following is required: process, unit"


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", "/CN=kube-scheduler", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return key, cert


def test_https_with_a_self_signed_certificate(tmp_path: Path, scheduler: NamedProcess) -> None:
    # The scheduler serves a self-signed certificate on 127.0.0.1:10259; the module must
    # accept it.
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a certificate")
    key, cert = _self_signed(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    state = Health()
    name, proc = scheduler
    with serve(state, tls) as url:
        run = _wait(_fast(url, name, timeout=10, stable=0.5))
    assert run.rc == 0, run.out
    assert run.out == f"healthy: pid {proc.pid} answered 200 on {url} for 0s\n"
    # the first 200 starts the streak, a later one ends it
    assert state.requests >= 2


# --- which configuration the healthy scheduler runs (--expect-arg / --refuse-arg) ---

OURS = "--config=/etc/kubernetes/loadwise-scheduler-config.yaml"


def _named_with_args(name: str, *args: str) -> subprocess.Popen[bytes]:
    """A sleeping process called `name` whose command line also carries `args` (sleep
    accepts several durations and sleeps their sum, so every arg must be a number)."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    return subprocess.Popen([name, "300", *args], executable=sleep)


def test_expected_arg_in_the_process_command_line(
    health: HealthServer, scheduler: NamedProcess
) -> None:
    _, url = health
    name, proc = scheduler
    run = _wait({**_fast(url, name, timeout=10), "expect_args": ["300"]})
    assert run.rc == 0, run.out + run.err


def test_missing_arg_fails_with_the_command_line(
    health: HealthServer, scheduler: NamedProcess
) -> None:
    _, url = health
    name, proc = scheduler
    run = _wait({**_fast(url, name, timeout=10), "expect_args": [OURS]})
    assert run.rc == 1
    assert run.out == (
        f"healthy but not configured as asked: the running kube-scheduler (pid {proc.pid}) "
        f"lacks {OURS}. Its arguments: {name} 300\n"
    )


def test_refused_arg_still_there_fails(health: HealthServer) -> None:
    _, url = health
    name = f"loadwise-test-scheduler-{uuid.uuid4().hex[:12]}"
    proc = _named_with_args(name, "1")
    try:
        run = _wait({**_fast(url, name, timeout=10), "refuse_args": ["1"]})
    finally:
        proc.kill()
        proc.wait()
    assert run.rc == 1
    assert "still has 1. Its arguments: " in run.out


def _k3s_env(tmp_path: Path, pid: int, journal: list[str]) -> dict[str, str]:
    lines = " ".join(f"'{ln}'" for ln in journal)
    return path_with(
        tmp_path / "bin",
        {"systemctl": f"echo {pid}", "journalctl": f'printf "%s\\n" {lines}'},
    )


K3S_OURS = "--config=/etc/rancher/k3s/loadwise-scheduler-config.yaml"
K3S_LINE = (
    'time="2026-11-23T10:00:00Z" level=info msg="Running kube-scheduler '
    "--authentication-kubeconfig=/var/lib/rancher/k3s/server/cred/scheduler.kubeconfig "
    '--bind-address=127.0.0.1 {extra}--profiling=false --secure-port=10259"'
)


def test_k3s_log_line_proves_the_config(
    tmp_path: Path, health: HealthServer, scheduler: NamedProcess
) -> None:
    _, url = health
    _, proc = scheduler
    env = _k3s_env(tmp_path, proc.pid, ["starting", K3S_LINE.format(extra=K3S_OURS + " ")])
    run = _wait({**_fast(url, unit="k3s", timeout=10), "expect_args": [K3S_OURS]}, env=env)
    assert run.rc == 0, run.out + run.err


def test_k3s_clobbered_config_is_reported(
    tmp_path: Path, health: HealthServer, scheduler: NamedProcess
) -> None:
    """A later drop-in without '+' (or an ExecStart flag) left k3s running without our --config."""
    _, url = health
    _, proc = scheduler
    env = _k3s_env(
        tmp_path,
        proc.pid,
        [K3S_LINE.format(extra=K3S_OURS + " "), K3S_LINE.format(extra="--bind-address=0.0.0.0 ")],
    )
    run = _wait({**_fast(url, unit="k3s", timeout=10), "expect_args": [K3S_OURS]}, env=env)
    assert run.rc == 1
    assert f"lacks {K3S_OURS}" in run.out and "--bind-address=0.0.0.0" in run.out


def test_k3s_without_a_running_line_is_not_proof(
    tmp_path: Path, health: HealthServer, scheduler: NamedProcess
) -> None:
    _, url = health
    _, proc = scheduler
    env = _k3s_env(tmp_path, proc.pid, ["starting"])
    run = _wait({**_fast(url, unit="k3s", timeout=10), "expect_args": [K3S_OURS]}, env=env)
    assert run.rc == 1
    assert "no 'Running kube-scheduler' line in the journal of k3s" in run.out


def test_k3s_running_line_before_hundreds_of_scheduler_lines(
    tmp_path: Path, health: HealthServer, scheduler: NamedProcess
) -> None:
    """The real scheduler logs hundreds of lines within the stable period (seen in the lab)."""
    _, url = health
    _, proc = scheduler
    env = _k3s_env(
        tmp_path,
        proc.pid,
        [K3S_LINE.format(extra=K3S_OURS + " ")] + [f"I1123 scheduler line {i}" for i in range(400)],
    )
    run = _wait({**_fast(url, unit="k3s", timeout=10), "expect_args": [K3S_OURS]}, env=env)
    assert run.rc == 0, run.out + run.err


def test_restart_stops_the_running_scheduler_and_proves_the_next(
    health: HealthServer, scheduler: NamedProcess
) -> None:
    """restart (files in place that no run proved): the running scheduler gets SIGTERM, and
    only the process the kubelet starts after it counts; here the test plays the kubelet."""
    _, url = health
    name, old = scheduler
    waiter = _start({**_fast(url, name, timeout=15, stable=1), "restart": True}, time.time())
    assert old.wait(timeout=10) == -15  # SIGTERM
    new = start_named(name)
    try:
        rc, result = _finish(waiter)
    finally:
        new.kill()
        new.wait()
    assert rc == 0, result
    assert result["msg"].splitlines() == [
        f"restarted: stopped pid {old.pid} for the kubelet to start it again",
        f"healthy: pid {new.pid} answered 200 on {url} for 1s",
    ]
    assert (result["changed"], result["restarted_pid"], result["pid"]) == (True, old.pid, new.pid)


def test_restart_needs_a_process_not_a_unit(health: HealthServer) -> None:
    _, url = health
    run = _wait({**_fast(url, unit="k3s"), "restart": True})
    assert run.rc == 1
    assert run.result["msg"] == "restart is True but all of the following are missing: process"


# --- check mode: nothing stopped, nothing waited for ---


def test_check_mode_reports_the_restart_without_stopping_anything(
    health: HealthServer, scheduler: NamedProcess
) -> None:
    state, url = health
    name, proc = scheduler
    run = _wait({**_fast(url, name, timeout=60), "restart": True}, check=True)
    assert run.rc == 0, run.result
    assert proc.poll() is None  # still running: no SIGTERM in check mode
    assert state.requests == 0
    assert run.result["changed"] is True
    assert (run.result["healthy"], run.result["waited"]) == (False, False)
    assert (run.result["restarted_pid"], run.result["pid"]) == (proc.pid, proc.pid)
    assert run.result["msg"].splitlines()[0] == (
        f"would restart: stop pid {proc.pid} for the kubelet to start it again"
    )
    assert run.seconds < 20  # not the 60 s timeout


def test_check_mode_without_restart_changes_nothing(
    health: HealthServer, scheduler: NamedProcess
) -> None:
    state, url = health
    name, _ = scheduler
    since = int(time.time())
    run = _wait(_fast(url, name, timeout=10), since=since, check=True)
    assert run.rc == 0, run.result
    assert run.result["changed"] is False
    assert "restarted_pid" not in run.result
    assert run.result["msg"] == (
        f"check mode: not waited for a kube-scheduler (process {name}) started after {since}"
    )
    assert state.requests == 0


# --- the verdict, as pure functions ---

verdict = module_file("loadwise_scheduler_health")
URL = "https://127.0.0.1:10259/healthz"


def test_a_streak_is_one_pid_answering_200_for_the_stable_time() -> None:
    streak = verdict.Streak()
    ok = verdict.Look(pid=7, new_enough=True, status="200")
    assert verdict.step(streak, ok, now=100.0, stable=20, url=URL) is None
    assert verdict.step(streak, ok, now=119.0, stable=20, url=URL) is None
    assert streak.last == "pid 7 healthy for 19s"
    # another process answering (the first one crashed): the streak starts again
    other = verdict.Look(pid=8, new_enough=True, status="200")
    assert verdict.step(streak, other, now=121.0, stable=20, url=URL) is None
    assert verdict.step(streak, other, now=141.0, stable=20, url=URL) == (
        f"healthy: pid 8 answered 200 on {URL} for 20s"
    )


@pytest.mark.parametrize(
    ("look", "last"),
    [
        (("pid", 7, "new_enough", False), "the scheduler has not been restarted yet"),
        (("pid", None, "new_enough", False), "no scheduler process"),
        (("pid", 7, "new_enough", True, "status", "500 no"), f"pid 7: {URL} -> 500 no"),
    ],
)
def test_anything_but_a_new_process_answering_200_breaks_the_streak(
    look: tuple[Any, ...], last: str
) -> None:
    streak = verdict.Streak(pid=7, start=0.0)
    fields = dict(zip(look[::2], look[1::2], strict=True))
    assert verdict.step(streak, verdict.Look(**fields), now=50.0, stable=20, url=URL) is None
    assert (streak.pid, streak.last) == (None, last)


def test_the_configuration_asked_for() -> None:
    args = ["kube-scheduler", "--config=/a.yaml", "--v=2"]
    assert verdict.config_problem(7, args, ["--config=/a.yaml"], [], None) == ""
    assert verdict.config_problem(7, args, [], ["--config=/b.yaml"], None) == ""
    assert verdict.config_problem(7, args, ["--config=/b.yaml"], ["--v=2"], None) == (
        "the running kube-scheduler (pid 7) lacks --config=/b.yaml; still has --v=2. "
        "Its arguments: kube-scheduler --config=/a.yaml --v=2"
    )
    assert verdict.config_problem(7, None, ["--config=/a.yaml"], [], "k3s") == (
        "cannot tell which configuration pid 7 runs: "
        "no 'Running kube-scheduler' line in the journal of k3s"
    )
    assert verdict.config_problem(7, None, [], [], None) == ""  # nothing asked, nothing read


def test_the_error_lines_quoted() -> None:
    tail = [f"I1123 line {i}" for i in range(10)]
    errors = [f"E1123 error {i}" for i in range(7)]
    fatal = ['E1123 run.go:72] "command failed" err="x"']
    assert verdict.error_lines(tail) == tail[-8:]
    assert verdict.error_lines(tail + errors) == errors[-5:]
    assert verdict.error_lines(errors + fatal + tail) == fatal
    assert verdict.error_lines([]) == []
