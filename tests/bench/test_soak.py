"""benchmarks/soak.py: its answer check and a short run against the real extender."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import soak
from benchmarks.procstat import cpu_seconds, memory_bytes

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("verb", "answer", "complete"),
    [
        ("prioritize", [{"Host": "a", "Score": 1}, {"Host": "b", "Score": 0}], True),
        ("prioritize", [{"Host": "a", "Score": 1}], False),
        ("filter", {"NodeNames": ["a", "b"]}, True),
        ("filter", {"NodeNames": ["a"], "FailedNodes": {"b": "x"}}, True),
        # a node over its threshold is failed as unresolvable (preemption cannot lower load)
        ("filter", {"NodeNames": ["a"], "FailedAndUnresolvableNodes": {"b": "cpu"}}, True),
        ("filter", {"Nodes": {"items": [{"metadata": {"name": "a"}}]}}, False),
        ("filter", {"NodeNames": ["a", "b"], "Error": "boom"}, False),
    ],
)
def test_an_answer_is_complete_when_it_accounts_for_every_node(verb, answer, complete):
    assert soak._complete(verb, answer, 2) is complete


def test_this_process_reads_its_own_memory_and_cpu():
    mem = memory_bytes(os.getpid())
    assert 0 < mem["VmRSS"] <= mem["VmHWM"]
    before = cpu_seconds(os.getpid())
    sum(i * i for i in range(2_000_000))  # spend some CPU
    assert cpu_seconds(os.getpid()) > before


def test_a_short_soak_prints_rest_burst_and_stream():
    proc = subprocess.run(
        [sys.executable, "benchmarks/soak.py", "--seconds", "2", "--rest", "0.5",
         "--burst", "20", "--every", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert re.search(r"^at rest: RSS [0-9.]+ MiB", out, re.M), out
    assert re.search(r"^burst of 20 pods \(filter\+prioritize", out, re.M), out
    rows = re.findall(r"^\s+\d+\s+(\d+)\s+[0-9.]+\s", out, re.M)
    assert rows and int(rows[-1]) > 20, out  # the stream went on after the burst
