"""A process's memory and CPU as the kernel accounts them, read from /proc (proc(5)); the
benchmarks measure the extender this way, whether it runs here or on a lab node (a node
container's processes are this machine's)."""

from __future__ import annotations

import os
from pathlib import Path


def memory_bytes(pid: int) -> dict[str, int]:
    """VmRSS (resident now) and VmHWM (the peak resident so far) from /proc/PID/status."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024  # the kernel writes "<n> kB"
    if len(fields) != 2:
        raise RuntimeError(f"no VmRSS/VmHWM for pid {pid} (a kernel thread, or gone)")
    return fields


def cpu_seconds(pid: int) -> float:
    """User + system CPU time so far: fields 14 and 15 of /proc/PID/stat, in clock ticks."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ", field 3 onwards
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
