"""What decoding a load source's answer of ``source.max_response_bytes`` can cost in memory.

    .venv/bin/python -m benchmarks.source_decode_memory            # the default caps, every case
    .venv/bin/python -m benchmarks.source_decode_memory --mib 4 --case node-metrics-empty

The byte cap bounds what is read, not what it decodes to: a body of near-empty entries
(``{},`` is 3 bytes) becomes one Python object or more per entry. For each case this
builds the worst body of its kind at the cap, writes it to a temporary file, and a fresh
child process reads it and hands it to the source's own parser (``extender.sources``,
``extender.podusage``); printed are the child's peak resident memory (``VmHWM`` in
/proc/self/status: a fresh process image's own; ``ru_maxrss`` keeps the parent's peak
across fork and exec) above what it held before the call, and how the parser ended (a
reading, or the SourceError that refused it). One child per case, and the body built
elsewhere, so no other peak hides the decoding's. Nothing touches the network.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable

from loadwise.extender.exceptions import SourceError
from loadwise.extender.model import NodeInfo
from loadwise.extender.sources.base import DEFAULT_MAX_RESPONSE_BYTES, WATCHER_MAX_RESPONSE_BYTES

Case = tuple[str, Callable[[int], bytes], Callable[[bytes], object]]


def _fill(head: bytes, unit: Callable[[int], bytes], tail: bytes, size: int) -> bytes:
    parts = [head]
    total = len(head) + len(tail)
    i = 0
    while True:
        piece = unit(i) + b","
        if total + len(piece) > size:
            break
        parts.append(piece)
        total += len(piece)
        i += 1
    body = b"".join(parts).rstrip(b",")
    return body + tail


def _node_metrics(body: bytes) -> object:
    from loadwise.extender.sources import parse_node_metrics

    return parse_node_metrics(body, {"n0": NodeInfo("n0", 4000, 8 * 2**30)})


def _pod_metrics(body: bytes) -> object:
    import asyncio
    from typing import Any, cast

    from loadwise.extender.sources.pod_metrics import PodMetricsSource

    class _Served:  # what KubeAPI.get answers once it has read the body within the cap
        def get(self, path: str, **_caps: object) -> bytes:
            return body

    return asyncio.run(PodMetricsSource(cast(Any, _Served())).fetch())


def _watcher(body: bytes) -> object:
    from loadwise.extender.sources import parse_watcher

    return parse_watcher(body)


def _prometheus(body: bytes) -> object:
    from loadwise.extender.sources.prometheus import parse_vector

    return parse_vector(body, "instance")


def _pod_vector(body: bytes) -> object:
    from loadwise.extender.sources.pod_metrics import parse_container_vector

    return parse_container_vector(body)


def _generic(body: bytes) -> object:
    import msgspec

    return msgspec.json.decode(body)


def _usage_keys(i: int) -> bytes:
    return f'"k{i}":0'.encode()


CASES: list[Case] = [
    (
        "generic-decode-empty-objects",
        lambda n: _fill(b'{"items":[', lambda i: b"{}", b"]}", n),
        _generic,
    ),
    (
        "node-metrics-empty-items",
        lambda n: _fill(b'{"items":[', lambda i: b"{}", b"]}", n),
        _node_metrics,
    ),
    (
        "node-metrics-empty-array-items",
        lambda n: _fill(b'{"items":[', lambda i: b"[]", b"]}", n),
        _node_metrics,
    ),
    (
        "node-metrics-one-item-unique-usage-keys",
        lambda n: _fill(b'{"items":[{"metadata":{"name":"n0"},"usage":{', _usage_keys, b"}}]}", n),
        _node_metrics,
    ),
    (
        "pod-metrics-empty-items",
        lambda n: _fill(b'{"items":[', lambda i: b"{}", b"]}", n),
        _pod_metrics,
    ),
    (
        "pod-metrics-one-pod-empty-containers",
        lambda n: _fill(
            b'{"items":[{"metadata":{"name":"p"},"containers":[', lambda i: b"{}", b"]}]}", n
        ),
        _pod_metrics,
    ),
    (
        "pod-metrics-empty-array-items",
        lambda n: _fill(b'{"items":[', lambda i: b"[]", b"]}", n),
        _pod_metrics,
    ),
    (
        "pod-metrics-one-pod-empty-array-containers",
        lambda n: _fill(
            b'{"items":[{"metadata":{"name":"p"},"containers":[', lambda i: b"[]", b"]}]}", n
        ),
        _pod_metrics,
    ),
    (
        "prometheus-pod-usage-empty-samples",
        lambda n: _fill(
            b'{"status":"success","data":{"resultType":"vector","result":[',
            lambda i: b"{}",
            b"]}}",
            n,
        ),
        _pod_vector,
    ),
    (
        "load-watcher-unique-empty-nodes",
        lambda n: _fill(
            b'{"data":{"NodeMetricsMap":{', lambda i: f'"{i:x}":{{}}'.encode(), b"}}}", n
        ),
        _watcher,
    ),
    (
        "prometheus-empty-samples",
        lambda n: _fill(
            b'{"status":"success","data":{"resultType":"vector","result":[',
            lambda i: b"{}",
            b"]}}",
            n,
        ),
        _prometheus,
    ),
    (
        "prometheus-empty-array-samples",
        lambda n: _fill(
            b'{"status":"success","data":{"resultType":"vector","result":[',
            lambda i: b"[]",
            b"]}}",
            n,
        ),
        _prometheus,
    ),
]


def _hwm_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def _child(name: str, path: str) -> None:
    parse = next(p for n, _m, p in CASES if n == name)
    with open(path, "rb") as file:
        body = file.read()
    before = _hwm_kib()
    try:
        result = parse(body)
        outcome = f"read ({type(result).__name__})"
    except SourceError as exc:
        outcome = f"refused: {str(exc)[:90]}"
    peak = _hwm_kib()
    print(
        json.dumps({"body": len(body), "before_kib": before, "peak_kib": peak, "outcome": outcome})
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument(
        "--mib", type=int, help="body size in MiB (default: the source's default cap)"
    )
    parser.add_argument("--case", action="append", choices=[c[0] for c in CASES])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--body", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.body)
        return 0
    print(f"{'case':42} {'body':>9} {'peak above start':>17}  outcome")
    for name in args.case or [c[0] for c in CASES]:
        make = next(m for n, m, _p in CASES if n == name)
        default = WATCHER_MAX_RESPONSE_BYTES if name.startswith("load-watcher") else None
        size = args.mib * 2**20 if args.mib else default or DEFAULT_MAX_RESPONSE_BYTES
        with tempfile.NamedTemporaryFile(prefix="loadwise-decode-") as file:
            file.write(make(size))
            file.flush()
            run = subprocess.run(
                [sys.executable, "-m", "benchmarks.source_decode_memory"]
                + ["--child", name, "--body", file.name],
                capture_output=True,
                text=True,
                check=True,
            )
        got = json.loads(run.stdout)
        peak = (got["peak_kib"] - got["before_kib"]) / 1024
        print(f"{name:42} {got['body'] / 2**20:7.1f}Mi {peak:13.0f} MiB  {got['outcome']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
