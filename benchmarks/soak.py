#!/usr/bin/env python3
"""Soak: does the extender's memory stay bounded under a steady stream of pods?

    .venv/bin/python benchmarks/soak.py                    # 60 s at 20 pods/s
    .venv/bin/python benchmarks/soak.py --seconds 900      # past the ledger's horizon

What runs (all on loopback): the real extender process (``python -m extender``
from this checkout) with a file load source whose document never changes, and
``stale_after_seconds: 0`` so that the static window stays "fresh" for ever, the
case in which the ledger's window never moves. This process sends prioritize
requests at a steady rate, every one for a new pod (its own name and UID), over
one keep-alive connection, with full Node objects (``nodeCacheCapable: false``)
by default or node names only (``--names``). Every ``--every`` seconds it prints
the extender's resident memory (VmRSS from /proc/PID/status) and the sizes it
exports on /metrics: ledger entries, the ledger heap's entries, node sizes cached.

The ledger keeps a placement for its horizon (the larger of 300 s and
``max_stale_seconds`` + 60 s, 660 s by default), so the ledger grows for the first
660 s and then stays flat at about horizon x rate; RSS must flatten likewise.
It is a measurement: the exit code is non-zero only when something is broken
(the extender exits or answers an error).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from extender import kubeobjects

ROOT = Path(__file__).resolve().parent.parent

GAUGES = (
    "loadwise_extender_ledger_entries",
    "loadwise_extender_ledger_heap_entries",
    "loadwise_extender_node_cache_entries",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def watcher_document(names: list[str]) -> bytes:
    """A load-watcher ``/watcher`` document, the same for the whole run."""
    now = int(time.time())
    nodes = {
        name: {
            "metrics": [
                {"type": "CPU", "operator": "AVG", "value": 20.0 + i % 7},
                {"type": "Memory", "operator": "AVG", "value": 30.0 + i % 5},
            ]
        }
        for i, name in enumerate(names)
    }
    doc = {
        "timestamp": now,
        "window": {"duration": "15m", "start": now - 900, "end": now},
        "source": "soak",
        "data": {"NodeMetricsMap": nodes},
    }
    return json.dumps(doc).encode()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def gauges(conn: http.client.HTTPConnection) -> dict[str, float]:
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    text = resp.read().decode()
    if resp.status != 200:
        raise RuntimeError(f"/metrics answered {resp.status}")
    out = {}
    for name in GAUGES:
        match = re.search(rf"^{name} ([0-9.e+]+)$", text, re.MULTILINE)
        out[name] = float(match.group(1)) if match else float("nan")
    return out


def wait_ready(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"extender exited with {proc.returncode}:\n{log.read_text()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/readyz")
            resp = conn.getresponse()
            last = f"{resp.status} {resp.read().decode().strip()}"
            conn.close()
            if resp.status == 200:
                return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.1)
    raise RuntimeError(f"extender not ready after 30 s: {last}")


def run(args: argparse.Namespace) -> int:
    names = [f"soak-node-{i:03d}" for i in range(args.nodes)]
    work = Path(tempfile.mkdtemp(prefix="loadwise-soak-"))
    load = work / "watcher.json"
    load.write_bytes(watcher_document(names))
    cfg = work / "extender.yaml"
    cfg.write_text(
        "log_level: warning\n"
        "source:\n"
        "  kind: file\n"
        f"  file: {load}\n"
        "  stale_after_seconds: 0   # never stale: the window never moves, the worst case\n"
    )
    port = free_port()
    log = work / "extender.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "extender", "--config", str(cfg), "--listen", f"127.0.0.1:{port}"],
        cwd=ROOT,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_ready(port, proc, log)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        nodes = [kubeobjects.node(n, cpu="8", memory="32Gi", pods="110") for n in names]
        nodes_part = json.dumps({"metadata": {}, "items": nodes})
        names_part = json.dumps(names)
        mode = "node names" if args.names else "full Nodes"
        print(
            f"soak: {args.seconds:g} s at {args.rate:g} pods/s, {args.nodes} nodes ({mode}), "
            f"extender pid {proc.pid}, static load file, window never moves"
        )
        print(f"{'t(s)':>6} {'sent':>7} {'RSS MiB':>8} {'ledger':>7} {'heap':>7} {'nodes':>6}")
        start = time.monotonic()
        sent = 0
        next_report = 0.0
        period = 1.0 / args.rate
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= next_report:
                g = gauges(conn)
                print(
                    f"{elapsed:6.0f} {sent:7d} {rss_kib(proc.pid) / 1024:8.1f} "
                    f"{g[GAUGES[0]]:7.0f} {g[GAUGES[1]]:7.0f} {g[GAUGES[2]]:6.0f}",
                    flush=True,
                )
                next_report += args.every
            if elapsed >= args.seconds:
                break
            uid = f"soak-{sent:08d}"
            pod = kubeobjects.pod(
                uid,
                namespace="soak",
                uid=uid,
                containers=[kubeobjects.container("c", requests={"cpu": "50m", "memory": "64Mi"})],
            )
            pod_part = json.dumps(pod)
            if args.names:
                body = f'{{"Pod":{pod_part},"NodeNames":{names_part}}}'
            else:
                body = f'{{"Pod":{pod_part},"Nodes":{nodes_part}}}'
            conn.request(
                "POST",
                "/scheduler/prioritize",
                body=body.encode(),
                headers={"Content-Type": "application/json"},
            )
            resp = conn.getresponse()
            answer = resp.read()
            if resp.status != 200 or len(json.loads(answer)) != len(names):
                raise RuntimeError(f"prioritize answered {resp.status}: {answer[:200]!r}")
            sent += 1
            # steady rate: sleep until this request's slot, never catch up in a burst
            delay = start + sent * period - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -1.0:
                start = time.monotonic() - sent * period  # fell behind: drop the backlog
        return 0
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for f in work.iterdir():
            f.unlink()
        os.rmdir(work)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long (default 60)")
    parser.add_argument("--rate", type=float, default=20.0, help="pods per second (default 20)")
    parser.add_argument("--nodes", type=int, default=20, help="nodes per request (default 20)")
    parser.add_argument("--every", type=float, default=10.0, help="report period (default 10 s)")
    parser.add_argument("--names", action="store_true", help="send node names only")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.rate <= 0 or args.nodes < 1 or args.every <= 0:
        parser.error("--seconds, --rate and --every must be > 0, --nodes >= 1")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
