"""A podman container's files and processes, read from this machine's /proc.

The lab's tests poll their nodes (a manifest the kubelet follows, the scheduler's command
line) every half second or so. Each `podman exec` costs about 0.2 s of CPU here (measured
2026-11-26: 20 execs of `cat` into an idle container, 0.21 core-seconds each), and on these 2
cores that CPU comes out of the very playbook run or kubelet being waited for. Reading the
same things through /proc costs next to nothing: a container's files are at
/proc/<its init's pid>/root, and its processes are the ones whose cgroup lies under the
container's (every process it starts, `podman exec` included, stays there).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from lab.processes import LabError


def _inspect(name: str, field: str) -> str:
    proc = subprocess.run(
        ["podman", "inspect", "--format", "{{" + field + "}}", name],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode != 0:
        raise LabError(f"podman inspect {name} -> {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout.strip()


class Container:
    """One running container, by name. Its pid and cgroup are looked up again when the
    container was restarted since (its old init pid is gone)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._pid = 0
        self._cgroup = ""

    def _refresh(self) -> None:
        if self._pid and Path(f"/proc/{self._pid}/root").exists():
            return
        pid = int(_inspect(self.name, ".State.Pid") or 0)
        if pid <= 0:
            raise LabError(f"{self.name}: not running")
        self._pid, self._cgroup = pid, _inspect(self.name, ".State.CgroupPath")

    @property
    def cgroup(self) -> str:
        """The container's cgroup path, as podman made it (e.g. /libpod_parent/libpod-ID)."""
        self._refresh()
        return self._cgroup

    def read_text(self, path: str) -> str:
        """The file at `path` inside the container (FileNotFoundError when there is none)."""
        self._refresh()
        return Path(f"/proc/{self._pid}/root/{path.lstrip('/')}").read_text()

    def cmdlines(self) -> list[str]:
        """Every process's command line in the container, arguments joined by spaces (as
        `tr '\\0' ' ' < /proc/<pid>/cmdline` prints it inside), in pid order."""
        return [cmdline for _, cmdline in self.processes()]

    def processes(self) -> list[tuple[int, str]]:
        """Every process in the container as (pid on this machine, command line as
        cmdlines() gives it), in pid order; /proc/<pid> then has its status and stat."""
        self._refresh()
        top = self._cgroup
        out = []
        for entry in sorted((e for e in os.listdir("/proc") if e.isdigit()), key=int):
            try:
                groups = Path(f"/proc/{entry}/cgroup").read_text()
                raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:  # ended meanwhile
                continue
            paths = (line.split(":", 2)[2] for line in groups.splitlines())
            if raw and any(p == top or p.startswith(top + "/") for p in paths):
                out.append((int(entry), raw.replace(b"\0", b" ").decode(errors="replace")))
        return out


def schedulers(cmdlines: list[str]) -> list[str]:
    """The kube-scheduler command lines among them: started by name on PATH (the kubelet,
    from kubeadm's manifest) or by path (the k3s stand-in)."""
    return [c for c in cmdlines if c.startswith("kube-scheduler ") or "/kube-scheduler " in c]
