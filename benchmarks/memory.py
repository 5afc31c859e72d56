#!/usr/bin/env python3
"""Peak memory of the extender while 20 callers send it a maximum-size body each.

    .venv/bin/python -m benchmarks.memory                 # three limits, 3 rounds each (~1 min)
    .venv/bin/python -m benchmarks.memory --checkout DIR  # the extender of another tree

What runs (all on loopback): the real extender process (``loadwise-extender``, or
``python -m loadwise.extender`` from ``--checkout``) with a file load source, and this process
as 20 callers. In each round every caller opens a connection and sends one filter
request whose body is exactly the extender's body limit, all 20 at once, and reads the
answer; ``--rounds`` rounds (3 by default) per limit, so at most 60 requests. Before
the first round it reads the extender's resident memory (VmRSS from /proc/PID/status),
after the last its peak (VmHWM): the figure an OOM killer or ``MemoryMax=`` meets.

The limits, one fresh process each:

- node names only (what a kubeconfig implies: 1 MiB): 1,000 node names;
- full Nodes, no kubeconfig (1 MiB + 64 KiB x max_nodes 50): as many realistic Node
  objects as fit (``benchmarks/prioritize.py`` ``make_node``, about 10.7 KiB each);
- full Nodes with a 32 MiB limit (the former default of ``max_body_bytes``).

A Pod annotation fills each body up to the limit. Answers other than 200 are counted,
not errors: a caller that finds every turn to read a body taken for a second gets 503
by design (``extender/server.py``), and the connection is closed at once, so a caller
still sending its body sees it reset ("reset"). The goal: under 100 MB for the first
two, the limits a default install has. It is a measurement: the exit code is non-zero
only when something is broken (the extender exits or no answer comes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import msgspec

from benchmarks.prioritize import (
    extender_command,
    extender_commit,
    free_port,
    load_average,
    make_node,
    make_pod_template,
    make_watcher,
    node_name,
)
from benchmarks.procstat import memory_bytes
from lab.processes import start_async
from loadwise.extender.config import NAMES_BODY_BYTES, NODE_BODY_BYTES

ROOT = Path(__file__).resolve().parent.parent

CALLERS = 20
GOAL_MB = 100.0
MB = 1_000_000


@dataclass
class Scenario:
    name: str
    mode: str  # "names" or "full"
    limit: int
    config: str  # YAML lines added to the extender's config
    goal: bool


SCENARIOS = [
    Scenario(
        "node names only (kubeconfig)",
        "names",
        NAMES_BODY_BYTES,
        # the limit a kubeconfig gives, without an API server to watch
        f"max_body_bytes: {NAMES_BODY_BYTES}\n",
        True,
    ),
    Scenario("full Nodes, max_nodes 50", "full", NAMES_BODY_BYTES + 50 * NODE_BODY_BYTES, "", True),
    Scenario(
        "full Nodes, 32 MiB (old default)",
        "full",
        32 * 2**20,
        f"max_body_bytes: {32 * 2**20}\n",
        False,
    ),
]


def body_for(scenario: Scenario, rng: random.Random) -> tuple[bytes, list[str]]:
    """A filter body of exactly ``scenario.limit`` bytes, and the node names in it: the
    nodes (names or realistic Node objects) that fit, and the Pod's annotation
    ``loadwise.dev/benchmark-padding`` taking up the rest."""
    pod = msgspec.json.decode(make_pod_template().replace(b"@UID@", b"uid-1"))
    annotations = pod["metadata"].setdefault("annotations", {})
    nodes: list[bytes] = []
    names: list[str] = []
    if scenario.mode == "names":
        names = [node_name(i) for i in range(1000)]
    else:
        room = scenario.limit - len(msgspec.json.encode(pod)) - 128
        while True:
            node = msgspec.json.encode(make_node(len(nodes), rng))
            if sum(map(len, nodes)) + len(nodes) + len(node) > room:
                break
            nodes.append(node)
            names.append(node_name(len(names)))

    def encode(pad: int) -> bytes:
        annotations["loadwise.dev/benchmark-padding"] = "x" * pad
        head = b'{"Pod":' + msgspec.json.encode(pod)
        if scenario.mode == "names":
            return head + b',"Nodes":null,"NodeNames":' + msgspec.json.encode(names) + b"}"
        items = b'{"metadata":{},"items":[' + b",".join(nodes) + b"]}"
        return head + b',"Nodes":' + items + b',"NodeNames":null}'

    body = encode(scenario.limit - len(encode(0)))
    assert len(body) == scenario.limit, (len(body), scenario.limit)
    return body, names


async def call(port: int, body: bytes) -> str:
    """One filter request on a connection of its own; the status, or what went wrong."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return f"connect: {exc.strerror or exc}"
    head = (
        "POST /scheduler/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    try:
        writer.write(head + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 120)
    except ConnectionResetError:
        return "reset"
    except (OSError, TimeoutError) as exc:
        return f"broken: {type(exc).__name__}"
    finally:
        writer.close()
    return answer[9:12].decode() if answer.startswith(b"HTTP/1.1 ") else "no answer"


async def readyz(port: int) -> bool:
    """Whether the extender's /readyz answers 200; a probe for AsyncChild.wait_ready."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = await reader.read()
    finally:
        writer.close()
    return answer.startswith(b"HTTP/1.1 200")


async def measure(
    scenario: Scenario, rounds: int, command: list[str], env: dict[str, str], work: Path
) -> tuple[int, int, Counter[str]]:
    body, names = body_for(scenario, random.Random(1))
    load = work / f"watcher-{scenario.mode}.json"
    load.write_bytes(make_watcher(len(names), random.Random(1)))
    port = free_port()
    cfg = work / "extender.yaml"
    cfg.write_text(
        f'listen: "127.0.0.1:{port}"\nlog_level: error\n'
        f"source: {{kind: file, file: {load}, stale_after_seconds: 0}}\n" + scenario.config
    )
    log = work / "extender.log"
    proc = await start_async(
        "the extender",
        [*command, "--config", str(cfg)],
        log=log,
        append=False,
        env=env,
        cwd=env.get("PYTHONPATH", work),  # `python -m` imports from its working directory first
    )
    try:
        await proc.wait_ready(lambda: readyz(port), 30, interval=0.1)
        idle = memory_bytes(proc.pid)["VmRSS"]
        answers: Counter[str] = Counter()
        for _ in range(rounds):
            answers.update(await asyncio.gather(*(call(port, body) for _ in range(CALLERS))))
            proc.check_running()
        peak = memory_bytes(proc.pid)["VmHWM"]
    finally:
        await proc.stop(15)
    return idle, peak, answers


def mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of 20 callers per limit")
    ap.add_argument("--checkout", type=Path, help="run the extender from this source tree instead")
    args = ap.parse_args(argv)
    env = dict(os.environ)
    if args.checkout:
        tree = args.checkout.resolve()
        # trees from before 0.3.0 hold the extender as the top-level package `extender`
        package = "loadwise.extender" if (tree / "loadwise").is_dir() else "extender"
        command = [sys.executable, "-m", package]
        env["PYTHONPATH"] = str(tree)
        which = f"the extender in {args.checkout}"
    else:
        command = extender_command(sys.executable)
        which = extender_commit()
    print(
        f"peak memory of loadwise-extender, {CALLERS} callers at once x {args.rounds} rounds, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {which}, {load_average()}"
    )
    print(f"{'limit':34} {'body':>10} | {'answers':22} | {'VmRSS idle':>10} {'VmHWM':>8} | goal")
    print("-" * 100)
    failed = False
    with tempfile.TemporaryDirectory(prefix="loadwise-memory-") as tmp:
        for scenario in SCENARIOS:
            try:
                idle, peak, answers = asyncio.run(
                    measure(scenario, args.rounds, command, env, Path(tmp))
                )
            except RuntimeError as exc:
                print(f"{scenario.name:34} BROKEN: {exc}")
                failed = True
                continue
            shown = " ".join(f"{n}x{status}" for status, n in sorted(answers.items()))
            verdict = "-"
            if scenario.goal:
                verdict = "PASS" if peak / MB < GOAL_MB else "GOAL MISSED"
                verdict += f" (< {GOAL_MB:g} MB)"
            print(
                f"{scenario.name:34} {mib(scenario.limit):>10} | {shown:22} | "
                f"{idle / MB:7.1f} MB {peak / MB:5.1f} MB | {verdict}"
            )
            if any(status.startswith("broken") for status in answers):
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
