"""Stand-ins for a control-plane node's scheduler, for the tests in this directory.

A health endpoint on an ephemeral 127.0.0.1 port (in this process, answers set per test), a
process with a name of its own for the wait script to find by argv[0], and stand-in
commands (systemctl, journalctl) put first on PATH.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Health:
    """What the fake scheduler's health endpoint does; changeable while the script runs."""

    status: int = 200
    body: bytes = b"ok"
    delay: float = 0.0
    answers: list[int] = field(default_factory=list)
    requests: int = 0

    def next_status(self) -> int:
        self.requests += 1
        if self.answers:
            return self.answers[(self.requests - 1) % len(self.answers)]
        return self.status


@contextlib.contextmanager
def serve(state: Health, tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """Serve `state` on an ephemeral port of 127.0.0.1; yields the health URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
            status = state.next_status()
            time.sleep(state.delay)
            self.send_response(status)
            self.send_header("Content-Length", str(len(state.body)))
            self.end_headers()
            self.wfile.write(state.body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        scheme = "https" if tls else "http"
        yield f"{scheme}://127.0.0.1:{server.server_port}/healthz"
    finally:
        server.shutdown()
        server.server_close()


def start_named(name: str) -> subprocess.Popen[bytes]:
    """A sleeping process whose argv[0] (what the wait script matches) is `name`."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    return subprocess.Popen([name, "300"], executable=sleep)


def path_with(bin_dir: Path, scripts: dict[str, str]) -> dict[str, str]:
    """Write each `sh` script into bin_dir; the environment with bin_dir first on PATH."""
    bin_dir.mkdir(exist_ok=True)
    for tool, body in scripts.items():
        path = bin_dir / tool
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


# What the conftest fixtures `health` and `scheduler` give a test.
HealthServer = tuple[Health, str]
NamedProcess = tuple[str, subprocess.Popen[bytes]]
