#!/usr/bin/env python3
"""The extender under 1,000 connections held open by another local process.

    .venv/bin/python -m benchmarks.held_connections               # 1,000 held, 20 s
    .venv/bin/python -m benchmarks.held_connections --held 700 --seconds 30

What runs (all on loopback): the real extender process (``python -m loadwise.extender``) with
mutual TLS (certificates made by the lab's PKI, the openssl command line, as the Ansible
role lays them out), ``tls.client_names`` and a plain-HTTP health listener; a child
process (this module with ``--hold``) that keeps ``--held`` connections open to the TLS
port, half of them silent (connected, never a byte) and half stopped inside their
handshake (a ClientHello, then nothing), opening a new one whenever the extender closes
one; and this process, calling ``/scheduler/filter`` with the scheduler's certificate
every 100 ms in two ways, one call of each in turn: over one kept-alive connection opened
before the holder starts (and used while it opens its connections), as kube-scheduler
does (its extender client is a Go ``http.Transport``, k8s.io/kubernetes
pkg/scheduler/extender.go ``makeTransport``, which reuses an idle connection), and on a
new connection each time, as after that connection was closed (the extender closes one
idle for 10 s).

It prints the extender's resident memory (VmRSS, and its peak VmHWM, from
/proc/PID/status) before, the most while held and at the end; for each kind of call
the latency (p50 and max; kube-scheduler gives a call 5 s) and the calls that failed;
the connections the extender served in all (the kept-alive client opens a new one only
if its connection was closed); what the extender logged (lines, bytes) and its
handshake-failure counters. Both processes raise their soft
RLIMIT_NOFILE to the hard limit; the extender keeps the default ``max_connections``
(64; the systemd unit's LimitNOFILE is 512). It is a measurement: the exit code is
non-zero only when something is broken (the extender exits, or no call is answered).
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import selectors
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from benchmarks.procstat import memory_bytes
from lab.processes import LabError, start


def _raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def _client_hello() -> bytes:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_side=False)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def hold(port: int, count: int, seconds: float) -> None:
    """Keep ``count`` connections open to ``port`` for ``seconds``; print how many were
    opened in all (the extender closes them: evicted or timed out)."""
    _raise_nofile()
    hello = _client_hello()
    sel = selectors.DefaultSelector()
    opened = 0

    def open_one(i: int) -> None:
        nonlocal opened
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            return
        sock.setblocking(False)
        if i % 2:
            try:
                sock.send(hello)
            except OSError:
                sock.close()
                return
        sel.register(sock, selectors.EVENT_READ, i)
        opened += 1

    for i in range(count):
        open_one(i)
    print("holding", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for key, _ in sel.select(timeout=0.05):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            if not data:  # closed by the extender: open another in its place
                sel.unregister(sock)
                sock.close()
                open_one(key.data)
    print(json.dumps({"opened": opened}), flush=True)


class _Calls:
    """The valid calls of one kind: their latencies, and the failures by kind."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.failed: dict[str, int] = {}
        self.connections: set[object] = set()  # the client's addresses: one per connection

    def call(self, post: Callable[[], httpx.Response]) -> None:
        started = time.perf_counter()
        try:
            r = post()
        except httpx.TransportError as exc:
            what = type(exc).__name__
        else:
            stream = r.extensions.get("network_stream")
            if stream is not None:
                self.connections.add(stream.get_extra_info("client_addr"))
            status = r.status_code
            if status == 200:
                self.latencies.append(time.perf_counter() - started)
                return
            what = f"HTTP {status}"
        self.failed[what] = self.failed.get(what, 0) + 1

    def summary(self) -> str:
        failed = sum(self.failed.values())
        total = len(self.latencies) + failed
        text = f"{failed} of {total} failed, over {len(self.connections)} connections"
        if self.failed:
            text += " (" + ", ".join(f"{k} {v}" for k, v in sorted(self.failed.items())) + ")"
        if self.latencies:
            text += (
                f"; latency p50 {statistics.median(self.latencies) * 1000:.1f} ms, "
                f"max {max(self.latencies) * 1000:.1f} ms"
            )
        return text


def _metric_lines(text: str, name: str) -> dict[str, float]:
    return {
        m.group(1): float(m.group(2))
        for m in re.finditer(rf"^{name}\{{(.*?)\}} (\S+)$", text, re.M)
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--held", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--hold", type=int, metavar="PORT", help=argparse.SUPPRESS)
    ns = p.parse_args()
    if ns.hold:
        hold(ns.hold, ns.held, ns.seconds)
        return 0

    from lab.pki import make_ca, make_cert

    _raise_nofile()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        make_ca(d, "ca", "loadwise-extender-ca")
        make_cert(
            d, "server", "ca", "/CN=loadwise-extender", server_sans=["IP:127.0.0.1"], client=False
        )
        make_cert(d, "scheduler", "ca", "/CN=kube-scheduler")
        (d / "watcher.json").write_text(
            json.dumps(
                {
                    "timestamp": int(time.time()),
                    "window": {"duration": "15m", "start": 0, "end": int(time.time())},
                    "source": "KubernetesMetricsServer",
                    "data": {
                        "NodeMetricsMap": {
                            n: {
                                "metrics": [
                                    {"type": "CPU", "operator": "Latest", "value": 20.0},
                                    {"type": "Memory", "operator": "Latest", "value": 30.0},
                                ]
                            }
                            for n in ("n1", "n2")
                        }
                    },
                }
            )
        )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            health = s.getsockname()[1]
        config = {
            "listen": f"127.0.0.1:{port}",
            "health_listen": f"127.0.0.1:{health}",
            "source": {"kind": "file", "file": str(d / "watcher.json"), "stale_after_seconds": 0},
            "tls": {
                "cert_file": str(d / "server.crt"),
                "key_file": str(d / "server.key"),
                "client_ca_file": str(d / "ca.crt"),
                "client_names": ["kube-scheduler"],
            },
        }
        (d / "extender.json").write_text(json.dumps(config))  # JSON is YAML
        log_path = d / "extender.log"
        ext = start(
            "the extender",
            [sys.executable, "-m", "loadwise.extender", "--config", str(d / "extender.json")],
            log=log_path,
            append=False,
        )
        try:
            try:
                ext.wait_ready(ext.log_probe("serving on"), 10, interval=0.1)
            except LabError as exc:
                print(f"the extender did not start: {exc}", file=sys.stderr)
                return 1
            ctx = ssl.create_default_context(cafile=str(d / "ca.crt"))
            ctx.load_cert_chain(d / "scheduler.crt", d / "scheduler.key")
            body = json.dumps(
                {
                    "Pod": {
                        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
                        "spec": {
                            "containers": [
                                {"name": "c", "resources": {"requests": {"cpu": "100m"}}}
                            ]
                        },
                    },
                    "Nodes": None,
                    "NodeNames": ["n1", "n2"],
                }
            ).encode()
            url = f"https://127.0.0.1:{port}/scheduler/filter"
            # the scheduler's connection, open before the holder comes
            kept = httpx.Client(verify=ctx, timeout=10)
            calls = {"kept-alive": _Calls(), "new connection": _Calls()}
            calls["kept-alive"].call(lambda: kept.post(url, content=body))
            before = memory_bytes(ext.pid)
            log_before = log_path.stat().st_size
            holder = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.held_connections",
                    "--hold",
                    str(port),
                    "--held",
                    str(ns.held),
                    "--seconds",
                    str(ns.seconds),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert holder.stdout is not None
            # Until "holding" (every connection opened once, which takes seconds), the
            # kept-alive connection goes on calling: idle for HEADER_DEADLINE_SECONDS
            # (10 s), the extender would close it.
            waiting = selectors.DefaultSelector()
            waiting.register(holder.stdout, selectors.EVENT_READ)
            while not waiting.select(timeout=0.1):
                calls["kept-alive"].call(lambda: kept.post(url, content=body))
            waiting.close()
            holder.stdout.readline()
            rss_max = 0
            end = time.monotonic() + ns.seconds - 1.0
            while time.monotonic() < end:
                calls["kept-alive"].call(lambda: kept.post(url, content=body))
                with httpx.Client(verify=ctx, timeout=10) as client:
                    calls["new connection"].call(lambda: client.post(url, content=body))
                rss_max = max(rss_max, memory_bytes(ext.pid)["VmRSS"])
                time.sleep(0.1)
            opened = json.loads(holder.stdout.readline() or "{}").get("opened", 0)
            holder.wait(30)
            after = memory_bytes(ext.pid)
            metrics = httpx.get(f"http://127.0.0.1:{health}/metrics").text
            kept.close()
            if ext.popen.poll() is not None:
                print("the extender exited", file=sys.stderr)
                return 1
        finally:
            ext.stop(20)
        logged = log_path.read_bytes()[log_before:]
        mib = 1024 * 1024
        print(f"held connections: {ns.held} at once for {ns.seconds:g} s ({opened} opened in all)")
        print(
            f"extender RSS: {before['VmRSS'] / mib:.1f} MiB before, {rss_max / mib:.1f} MiB max "
            f"while held, peak VmHWM {after['VmHWM'] / mib:.1f} MiB"
        )
        for kind, made in calls.items():
            print(f"valid calls, {kind}: {made.summary()}")
        served = _metric_lines(metrics, "loadwise_extender_connections_total").get(
            'listener="scheduler"', 0.0
        )
        print(f"connections served on the TLS port in all: {served:g}")
        lines = logged.count(b"\n")
        print(f"extender log while held: {lines} lines, {len(logged)} bytes")
        for labels, value in _metric_lines(
            metrics, "loadwise_extender_handshake_failures_total"
        ).items():
            print(f"  handshake failures {labels}: {value:g}")
        return 0 if all(made.latencies for made in calls.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
