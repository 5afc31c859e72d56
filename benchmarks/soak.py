#!/usr/bin/env python3
"""Soak: does the extender's memory stay bounded under a steady stream of pods, and what
does it cost at rest, in a burst and over time?

    .venv/bin/python benchmarks/soak.py                    # 60 s at 20 pods/s
    .venv/bin/python benchmarks/soak.py --seconds 900      # past the ledger's horizon
    .venv/bin/python benchmarks/soak.py --seconds 3600 --rate 1 --every 600   # a homelab's hour

What runs (all on loopback): the real extender process (``python -m loadwise.extender``
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
Each pod goes through filter, then prioritize, as kube-scheduler asks an extender
configured with both verbs (loadwise's default); ``--prioritize-only`` sends prioritize
alone (the soak's figures before 2026-11-27 were taken that way).

The footprint a small control plane (a Raspberry Pi) pays: first ``--rest`` seconds with no
request (RSS and CPU at rest: the load source's refresh, the metrics), then a burst of
``--burst`` pods sent back to back (RSS after it, CPU per pod, wall time), then the stream.
CPU is the extender process's own (utime + stime from /proc/PID/stat), so the
client's work in this process is not counted; "CPU ms/pod" is over the report's interval.
It is a measurement: the exit code is non-zero only when something is broken
(the extender exits or answers an error).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.procstat import cpu_seconds, memory_bytes
from lab import processes
from loadwise.extender import kubeobjects

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


def mib(pid: int) -> float:
    return memory_bytes(pid)["VmRSS"] / 2**20


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


def _complete(verb: str, answer: object, nodes: int) -> bool:
    """A filter answer without an error that names every node once (kept, failed, or failed
    for load: the ledger's estimates pile up while the window stands still), or a prioritize
    answer with a score per node."""
    if verb == "prioritize":
        return isinstance(answer, list) and len(answer) == nodes
    if not isinstance(answer, dict) or answer.get("Error"):
        return False
    kept = answer.get("NodeNames") or [
        n["metadata"]["name"] for n in (answer.get("Nodes") or {}).get("items") or []
    ]
    failed = answer.get("FailedNodes") or {}
    unresolvable = answer.get("FailedAndUnresolvableNodes") or {}
    return len(kept) + len(failed) + len(unresolvable) == nodes


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
    argv = [
        sys.executable,
        "-m",
        "loadwise.extender",
        "--config",
        str(cfg),
        "--listen",
        f"127.0.0.1:{port}",
    ]
    proc = processes.start("extender", argv, log=log, append=False, cwd=ROOT)
    try:
        proc.wait_ready(processes.http_probe(f"http://127.0.0.1:{port}/readyz"), 30, interval=0.1)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        nodes = [kubeobjects.node(n, cpu="8", memory="32Gi", pods="110") for n in names]
        nodes_part = json.dumps({"metadata": {}, "items": nodes})
        names_part = json.dumps(names)
        mode = "node names" if args.names else "full Nodes"
        print(
            f"soak: {args.seconds:g} s at {args.rate:g} pods/s, {args.nodes} nodes ({mode}), "
            f"extender pid {proc.pid}, static load file, window never moves"
        )
        verbs = ("prioritize",) if args.prioritize_only else ("filter", "prioritize")

        def schedule(n: int) -> None:
            """Pod number n through the verbs, as kube-scheduler sends them."""
            uid = f"soak-{n:08d}"
            pod = kubeobjects.pod(
                uid,
                namespace="soak",
                uid=uid,
                containers=[kubeobjects.container("c", requests={"cpu": "50m", "memory": "64Mi"})],
            )
            pod_part = json.dumps(pod)
            if args.names:
                body = f'{{"Pod":{pod_part},"NodeNames":{names_part}}}'.encode()
            else:
                body = f'{{"Pod":{pod_part},"Nodes":{nodes_part}}}'.encode()
            for verb in verbs:
                conn.request(
                    "POST",
                    f"/scheduler/{verb}",
                    body=body,
                    headers={"Content-Type": "application/json"},
                )
                resp = conn.getresponse()
                answer = resp.read()
                if resp.status != 200 or not _complete(verb, json.loads(answer), len(names)):
                    raise RuntimeError(f"{verb} answered {resp.status}: {answer[-300:]!r}")

        cpu0 = cpu_seconds(proc.pid)
        time.sleep(args.rest)
        cpu_rest = cpu_seconds(proc.pid) - cpu0
        print(
            f"at rest: RSS {mib(proc.pid):.1f} MiB, CPU {cpu_rest * 1000:.0f} ms "
            f"over {args.rest:g} s ({100 * cpu_rest / args.rest:.2f} % of a core)"
        )
        sent = 0
        if args.burst:
            cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
            for n in range(args.burst):
                schedule(n)
            wall, cpu = time.monotonic() - t0, cpu_seconds(proc.pid) - cpu0
            sent = args.burst
            print(
                f"burst of {args.burst} pods ({'+'.join(verbs)}, back to back): "
                f"{wall:.2f} s, RSS {mib(proc.pid):.1f} MiB after, "
                f"CPU {1000 * cpu / args.burst:.2f} ms per pod"
            )
        print(
            f"{'t(s)':>6} {'sent':>7} {'RSS MiB':>8} {'CPU ms/pod':>10} {'ledger':>7} "
            f"{'heap':>7} {'nodes':>6}"
        )
        start = time.monotonic()
        next_report = 0.0
        period = 1.0 / args.rate
        last_cpu, last_sent = cpu_seconds(proc.pid), sent
        streamed = 0
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= next_report:
                g = gauges(conn)
                cpu = cpu_seconds(proc.pid)
                per_pod = (
                    f"{1000 * (cpu - last_cpu) / (sent - last_sent):10.2f}"
                    if sent > last_sent
                    else f"{'-':>10}"
                )
                last_cpu, last_sent = cpu, sent
                print(
                    f"{elapsed:6.0f} {sent:7d} {mib(proc.pid):8.1f} {per_pod} "
                    f"{g[GAUGES[0]]:7.0f} {g[GAUGES[1]]:7.0f} {g[GAUGES[2]]:6.0f}",
                    flush=True,
                )
                next_report += args.every
            if elapsed >= args.seconds:
                break
            schedule(sent)
            sent += 1
            streamed += 1
            # steady rate: sleep until this request's slot, never catch up in a burst
            delay = start + streamed * period - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -1.0:
                start = time.monotonic() - streamed * period  # fell behind: drop the backlog
        return 0
    finally:
        proc.stop(10)
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
    parser.add_argument(
        "--prioritize-only", action="store_true", help="no filter call (default: filter first)"
    )
    parser.add_argument("--rest", type=float, default=30.0, help="idle seconds first (default 30)")
    parser.add_argument("--burst", type=int, default=200, help="pods back to back (default 200)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.rate <= 0 or args.nodes < 1 or args.every <= 0:
        parser.error("--seconds, --rate and --every must be > 0, --nodes >= 1")
    if args.rest <= 0 or args.burst < 0:
        parser.error("--rest must be > 0 and --burst >= 0")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
