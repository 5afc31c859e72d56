"""files/wait-scheduler-healthy.py, run as the role runs it, against a local HTTP server.

No host and no kube-scheduler: the "scheduler" is a sleep process started under a name made
for the test (the script finds it by argv[0], as it finds kube-scheduler), its health URL a
server on 127.0.0.1 in this process that answers healthy, unhealthy, slowly or not at all.
The role passes --url --since --timeout --stable --interval and either --process kube-scheduler
--log-glob <container logs> (kubeadm) or --unit k3s (k3s; faked here with a systemctl and a
journalctl on PATH).
"""

from __future__ import annotations

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

import pytest

from tests.ansible.fakes import Health, HealthServer, NamedProcess, path_with, serve, start_named

SCRIPT = (
    Path(__file__).resolve().parents[2]
    / "roles/loadwise_scheduler_config/files/wait-scheduler-healthy.py"
)


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/healthz"


@dataclass
class Run:
    rc: int
    out: str
    err: str
    seconds: float


def _wait(
    *args: str, since: float | None = None, env: dict[str, str] | None = None, limit: float = 30
) -> Run:
    start = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--since",
            str(int(time.time() - 5) if since is None else since),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=limit,
        env=env,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


def _fast(
    url: str, name: str = "", *, unit: str = "", timeout: float = 3, stable: float = 1
) -> list[str]:
    """The role's arguments with short times: --process name, or --unit unit (k3s)."""
    target = ["--unit", unit] if unit else ["--process", name]
    return [
        *f"--url {url} --timeout {timeout} --stable {stable} --interval 0.2".split(),
        *target,
    ]


def test_healthy_for_the_stable_time(health: HealthServer, scheduler: NamedProcess) -> None:
    state, url = health
    name, proc = scheduler
    run = _wait(*_fast(url, name, timeout=10, stable=1))
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
    run = _wait(*_fast(url, name, timeout=2))
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
    run = _wait(*_fast(url, name, timeout=3, stable=1))
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
    waiter = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--since", str(int(time.time() - 5))]
        + _fast(url, name, timeout=15, stable=1.5),
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(1)
    second = start_named(name)
    try:
        first.kill()
        out, _ = waiter.communicate(timeout=20)
    finally:
        second.kill()
        second.wait()
    assert waiter.returncode == 0, out
    assert out == f"healthy: pid {second.pid} answered 200 on {url} for 2s\n"
    assert time.monotonic() - start >= 2.5


def test_healthy_but_not_for_long_enough(health: HealthServer, scheduler: NamedProcess) -> None:
    _, url = health
    name, proc = scheduler
    run = _wait(*_fast(url, name, timeout=2, stable=60))
    assert run.rc == 1
    assert re.match(
        rf"kube-scheduler not healthy after 2s: pid {proc.pid} healthy for [12]s\n", run.out
    ), run.out


def test_a_slow_answer_counts_as_unreachable(health: HealthServer, scheduler: NamedProcess) -> None:
    # The probe gives up after max(--interval, 2) seconds.
    state, url = health
    state.delay = 4
    name, proc = scheduler
    run = _wait(*_fast(url, name, timeout=1))
    assert run.rc == 1
    assert run.out.startswith(
        f"kube-scheduler not healthy after 1s: pid {proc.pid}: {url} -> unreachable ("
    )
    assert "timed out" in run.out.splitlines()[0]
    assert 2 <= run.seconds < 6


def test_nothing_listening(scheduler: NamedProcess) -> None:
    name, proc = scheduler
    url = _closed_port_url()
    run = _wait(*_fast(url, name, timeout=1))
    assert run.rc == 1
    assert run.out.startswith(
        f"kube-scheduler not healthy after 1s: pid {proc.pid}: {url} -> unreachable ("
    )
    assert "refused" in run.out.splitlines()[0]
    assert run.seconds < 5


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
    since, extra = int(time.time()) - 5, []
    if case == "no process by that name":
        name = _absent()
    elif case == "started before --since":
        since += 65
    else:
        extra = ["--exclude", "300"]  # in the stand-in's command line
    run = _wait(*_fast(url, name, timeout=1), *extra, since=since)
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
    run = _wait(*_fast(url, name, timeout=1), "--log-glob", str(tmp_path / "kube-scheduler-*.log"))
    assert run.rc == 1
    assert run.out.splitlines()[1:] == ["scheduler's own last errors:", *KLOG[1:3]]


def test_timeout_without_error_lines_quotes_the_log_tail(
    tmp_path: Path, scheduler: NamedProcess
) -> None:
    name, _ = scheduler
    lines = [f"I1123 10:00:{i:02d}.000000 1 x.go:1] line {i}" for i in range(12)]
    _log(tmp_path, "kube-scheduler-a.log", lines)
    run = _wait(
        *_fast(_closed_port_url(), name, timeout=1),
        "--log-glob",
        str(tmp_path / "kube-scheduler-*.log"),
    )
    assert run.rc == 1
    assert run.out.splitlines()[2:] == lines[-8:]


def test_a_log_older_than_since_is_not_quoted(tmp_path: Path, scheduler: NamedProcess) -> None:
    name, _ = scheduler
    _log(tmp_path, "kube-scheduler-a.log", KLOG, age=60)
    run = _wait(
        *_fast(_closed_port_url(), name, timeout=1),
        "--log-glob",
        str(tmp_path / "kube-scheduler-*.log"),
    )
    assert run.rc == 1
    assert run.out.splitlines()[1:] == ["scheduler's own last errors:", "(no scheduler log found)"]


def test_a_fatal_log_line_ends_the_wait_early(tmp_path: Path) -> None:
    # No new scheduler process (it died of its config) and a fatal line in its log: the
    # script stops after --fatal-grace instead of waiting out --timeout.
    fatal = 'E1123 10:00:04.000000 1 run.go:72] "command failed" err="no such plugin"'
    _log(tmp_path, "kube-scheduler-a.log", [*KLOG, fatal])
    run = _wait(
        *_fast(_closed_port_url(), _absent(), timeout=60),
        "--fatal-grace",
        "0.5",
        "--log-glob",
        str(tmp_path / "kube-scheduler-*.log"),
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
    # A fatal line from an earlier crash is in the log, but by the end of --fatal-grace the
    # new scheduler is answering 200: the script waits out the streak.
    _, url = health
    name, _ = scheduler
    _log(tmp_path, "kube-scheduler-a.log", ['E1123 10:00:04.000000 1 x.go:1] "command failed"'])
    run = _wait(
        *_fast(url, name, timeout=10, stable=1.5),
        "--fatal-grace",
        "0.5",
        "--log-glob",
        str(tmp_path / "kube-scheduler-*.log"),
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
    run = _wait(*_fast(url, unit="k3s", timeout=10), env=env)
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
    run = _wait(*_fast(url, unit="k3s", timeout=1), since=since, env=env)
    assert run.rc == 1
    assert run.out.splitlines() == [
        "kube-scheduler not healthy after 1s: no scheduler process",
        "scheduler's own last errors:",
        "Error: bad flag",
    ]
    assert f"-u k3s --no-pager -o cat --since @{since}" in calls.read_text().splitlines()


def test_process_or_unit_is_required(health: HealthServer) -> None:
    _, url = health
    run = _wait("--url", url)
    assert run.rc == 2
    assert "give --process or --unit" in run.err


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
    # The scheduler serves a self-signed certificate on 127.0.0.1:10259; the script must
    # accept it.
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a certificate")
    key, cert = _self_signed(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    state = Health()
    name, proc = scheduler
    with serve(state, tls) as url:
        run = _wait(*_fast(url, name, timeout=10, stable=0.5))
    assert run.rc == 0, run.out
    assert run.out == f"healthy: pid {proc.pid} answered 200 on {url} for 0s\n"
    assert state.requests >= 3


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
    run = _wait(*_fast(url, name, timeout=10), "--expect-arg=300")
    assert run.rc == 0, run.out + run.err


def test_missing_arg_fails_with_the_command_line(
    health: HealthServer, scheduler: NamedProcess
) -> None:
    _, url = health
    name, proc = scheduler
    run = _wait(*_fast(url, name, timeout=10), f"--expect-arg={OURS}")
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
        run = _wait(*_fast(url, name, timeout=10), "--refuse-arg=1")
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
    run = _wait(*_fast(url, unit="k3s", timeout=10), f"--expect-arg={K3S_OURS}", env=env)
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
    run = _wait(*_fast(url, unit="k3s", timeout=10), f"--expect-arg={K3S_OURS}", env=env)
    assert run.rc == 1
    assert f"lacks {K3S_OURS}" in run.out and "--bind-address=0.0.0.0" in run.out


def test_k3s_without_a_running_line_is_not_proof(
    tmp_path: Path, health: HealthServer, scheduler: NamedProcess
) -> None:
    _, url = health
    _, proc = scheduler
    env = _k3s_env(tmp_path, proc.pid, ["starting"])
    run = _wait(*_fast(url, unit="k3s", timeout=10), f"--expect-arg={K3S_OURS}", env=env)
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
    run = _wait(*_fast(url, unit="k3s", timeout=10), f"--expect-arg={K3S_OURS}", env=env)
    assert run.rc == 0, run.out + run.err


def test_restart_stops_the_running_scheduler_and_proves_the_next(
    health: HealthServer, scheduler: NamedProcess
) -> None:
    """--restart (files in place that no run proved): the running scheduler gets SIGTERM, and
    only the process the kubelet starts after it counts; here the test plays the kubelet."""
    _, url = health
    name, old = scheduler
    waiter = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--since", str(time.time()), "--restart"]
        + _fast(url, name, timeout=15, stable=1),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert old.wait(timeout=10) == -15  # SIGTERM
    new = start_named(name)
    try:
        out, _ = waiter.communicate(timeout=20)
    finally:
        new.kill()
        new.wait()
    assert waiter.returncode == 0, out
    assert out.splitlines() == [
        f"restarted: stopped pid {old.pid} for the kubelet to start it again",
        f"healthy: pid {new.pid} answered 200 on {url} for 1s",
    ]


def test_restart_needs_a_process_not_a_unit(health: HealthServer) -> None:
    _, url = health
    run = _wait("--restart", *_fast(url, unit="k3s"))
    assert run.rc == 2 and "--restart needs --process" in run.err, run
