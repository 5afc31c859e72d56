"""``loadwise-extender`` as a real process on loopback, for the tests of what only a
process shows: signals, exit codes, listeners, TLS, systemd notifications."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from lab.processes import die_with_parent, stop_child


def watcher_document(use: dict[str, tuple[float, float]]) -> str:
    """A load-watcher ``/watcher`` document: node -> (cpu %, memory %)."""
    return json.dumps(
        {
            "timestamp": 1735689600,
            "window": {"duration": "15m", "start": 1735688700, "end": 1735689600},
            "source": "KubernetesMetricsServer",
            "data": {
                "NodeMetricsMap": {
                    name: {
                        "metrics": [
                            {"type": "CPU", "operator": "Latest", "value": cpu},
                            {"type": "Memory", "operator": "Latest", "value": memory},
                        ]
                    }
                    for name, (cpu, memory) in use.items()
                }
            },
        }
    )


# n2's memory is over the default 90 % threshold
LOAD = {"n1": (20.0, 30.0), "n2": (5.0, 95.0), "n3": (10.0, 20.0)}


def extender_command() -> list[str]:
    script = Path(sys.executable).parent / "loadwise-extender"
    return [str(script)] if script.exists() else [sys.executable, "-m", "loadwise.extender"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def write_config(tmp: Path, **settings: Any) -> Path:
    """A config file: ``LOAD`` as a file source (never stale), a free loopback port,
    and ``settings`` on top."""
    load = tmp / "watcher.json"
    if not load.exists():
        load.write_text(watcher_document(LOAD))
    config: dict[str, Any] = {
        "listen": f"127.0.0.1:{free_port()}",
        "source": {"kind": "file", "file": str(load), "stale_after_seconds": 0},
    }
    config.update(settings)
    path = tmp / "extender.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Running:
    """The process, its stderr collected line by line as it comes."""

    def __init__(
        self, config: Path, *args: str, env: dict[str, str] | None = None, wait: bool = True
    ) -> None:
        self.config = yaml.safe_load(config.read_text())
        host, _, port = self.config["listen"].rpartition(":")
        self.host, self.port = host, int(port)
        self.proc = subprocess.Popen(
            [*extender_command(), "--config", str(config), *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
            # SIGKILL when the test process ends without a teardown (a worker's hard exit)
            preexec_fn=die_with_parent(signal.SIGKILL),
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._ended = False
        threading.Thread(target=self._read, daemon=True).start()
        if wait:
            try:
                self.wait_for_line("serving on")
            except BaseException:
                self.stop()  # nobody holds it yet to stop it later
                raise

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def wait_for_line(self, needle: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines:
                    if needle in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or self._ended:
                    break
                self._changed.wait(min(left, 0.5))
        raise AssertionError(f"no line with {needle!r} in the extender's log:\n{self.log}")

    def signal(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)

    def exit_code(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> None:
        """Kill it at once: a test that wants a clean shutdown signals and waits itself."""
        stop_child(self.proc, 0)


def filter_body(names: list[str]) -> bytes:
    """A filter request as kube-scheduler sends it with nodeCacheCapable: true."""
    from .helpers import container, pod_json

    pod = pod_json(container({"cpu": "100m", "memory": "64Mi"}), name="web", uid="w1")
    return json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode()


def post_head(path: str, length: int, host: str = "127.0.0.1") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def read_answer(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Everything the server sends until it closes the connection."""
    sock.settimeout(timeout)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data
