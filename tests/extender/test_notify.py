"""systemd notifications (sd_notify(3)) received on a real datagram socket, as systemd
receives them: READY=1 once serving, WATCHDOG=1 while the event loop runs (and not
while it is blocked), STOPPING=1 on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from loadwise.extender.sdnotify import Notifier, keep_alive, watchdog_interval

from .running import Running, write_config


class Systemd:
    """The receiving end of NOTIFY_SOCKET: each datagram with the time it came."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + address[1:] if address.startswith("@") else address)
        self.got: list[tuple[float, str]] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._receive, daemon=True).start()

    def _receive(self) -> None:
        while True:
            try:
                data = self.sock.recv(4096)
            except OSError:
                return
            with self._changed:
                self.got.append((time.monotonic(), data.decode()))
                self._changed.notify_all()

    def wait_for(self, key: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for _, message in self.got:
                    if key in message.split("\n"):
                        return message
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {key} in {self.got}")
                self._changed.wait(left)

    def times(self, key: str) -> list[float]:
        with self._changed:
            return [at for at, message in self.got if key in message.split("\n")]

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def systemd() -> Iterator[Systemd]:
    short = tempfile.mkdtemp(prefix="lw-")  # a socket path must fit in 108 bytes
    receiver = Systemd(os.path.join(short, "notify"))
    yield receiver
    receiver.close()
    os.unlink(receiver.address)
    os.rmdir(short)


def test_ready_when_serving_watchdog_while_running_stopping_on_sigterm(tmp_path, systemd):
    ext = Running(
        write_config(tmp_path),
        env={"NOTIFY_SOCKET": systemd.address, "WATCHDOG_USEC": "300000"},
        wait=False,
    )
    try:
        ready = systemd.wait_for("READY=1")
        # READY=1 means serving: the port accepts a connection at once
        socket.create_connection((ext.host, ext.port), timeout=2).close()
        assert f"STATUS=serving on http://127.0.0.1:{ext.port}" in ready.split("\n")
        # keep-alives every 0.15 s (half of WATCHDOG_USEC), with the readiness as status
        systemd.wait_for("WATCHDOG=1")
        time.sleep(1.0)
        pings = systemd.times("WATCHDOG=1")
        assert len(pings) >= 4, systemd.got
        assert max(b - a for a, b in zip(pings, pings[1:], strict=False)) < 0.3 * 1.5
        assert any("STATUS=ok: 3 nodes from file:" in m for _, m in systemd.got), systemd.got
        ext.signal()
        systemd.wait_for("STOPPING=1")
        assert ext.exit_code(timeout=10) == 0
    finally:
        ext.stop()


def test_an_abstract_socket_address(tmp_path):
    receiver = Systemd(f"@loadwise-test-{uuid.uuid4().hex}")
    ext = Running(write_config(tmp_path), env={"NOTIFY_SOCKET": receiver.address}, wait=False)
    try:
        receiver.wait_for("READY=1")
        time.sleep(0.5)
        assert receiver.times("WATCHDOG=1") == []  # no WATCHDOG_USEC: no keep-alives
    finally:
        ext.stop()
        receiver.close()


def test_no_keep_alives_when_the_watchdog_is_meant_for_another_process(tmp_path, systemd):
    env = {
        "NOTIFY_SOCKET": systemd.address,
        "WATCHDOG_USEC": "200000",
        "WATCHDOG_PID": "1",  # set by a manager for the process it started, not for us
    }
    ext = Running(write_config(tmp_path), env=env, wait=False)
    try:
        systemd.wait_for("READY=1")
        time.sleep(0.6)
        assert systemd.times("WATCHDOG=1") == []
    finally:
        ext.stop()


def test_watchdog_interval_follows_sd_watchdog_enabled():
    assert watchdog_interval({"WATCHDOG_USEC": "30000000"}) == 15.0
    assert watchdog_interval({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}) == 15
    assert watchdog_interval({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "0"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "soon"}) is None
    assert watchdog_interval({}) is None


async def test_keep_alives_stop_while_the_event_loop_is_blocked(systemd):
    notifier = Notifier(systemd.address)
    task = asyncio.create_task(keep_alive(notifier, 0.05, lambda: "ok"))
    try:
        await asyncio.sleep(0.3)
        blocked_at = time.monotonic()
        time.sleep(0.6)  # a hung handler: the loop makes no progress
        unblocked_at = time.monotonic()
        await asyncio.sleep(0.3)
    finally:
        task.cancel()
        notifier.close()
    pings = systemd.times("WATCHDOG=1")
    assert not [at for at in pings if blocked_at + 0.05 < at < unblocked_at]
    assert len([at for at in pings if at < blocked_at]) >= 4
    assert len([at for at in pings if at > unblocked_at]) >= 4  # and they resume
    assert systemd.got[0][1] == "WATCHDOG=1\nSTATUS=ok"  # the status once, then pings alone
    assert systemd.got[1][1] == "WATCHDOG=1"


def test_without_notify_socket_nothing_is_sent():
    notifier = Notifier.from_environ({})
    assert not notifier.enabled and notifier.notify("READY=1") is False
