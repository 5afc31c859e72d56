"""What each entry point needs built before it can run, built with progress (lab/progress.py):
`python -m lab prepare [demo|lab|realnodes|test|upgrade]`, and the same plan from inside
`components.build_binaries`, `hosts.node_image` and `realnodes.build_image`, so `make demo`,
`make test` and `scripts/lab ...` all name what they build while they build it.

Only work that is really missing becomes a step: lab/build answers `--missing` and the
image scripts `--check` from their own cache keys, without building anything.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO

from lab.progress import Step, run_steps

__all__ = [
    "NODE_IMAGE_SCRIPT",
    "PURPOSES",
    "REALNODE_IMAGE_SCRIPT",
    "REALNODE_PROGRAMS",
    "image_missing",
    "missing_programs",
    "prepare",
    "prepare_programs",
]

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build"
NODE_IMAGE_SCRIPT = HERE / "nodes" / "build-node-image"
REALNODE_IMAGE_SCRIPT = HERE / "nodes" / "kubeadm" / "build-image"

# lab/build's default set: the loopback lab's programs (lab/components.py).
LAB_PROGRAMS = (
    "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "kwok",
    "metrics-server", "load-watcher", "descheduler",
)  # fmt: skip
# What lab/nodes/kubeadm/build-image puts in the real-node image (its `lab/build` call;
# tests/lab/test_prepare.py checks the two lists agree).
REALNODE_PROGRAMS = (
    "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd",
    "metrics-server", "descheduler", "load-watcher",
    "kubeadm", "kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "pause",
    "kube-proxy", "burner",
)  # fmt: skip
# The tools only the test suite and the benchmarks use.
TEST_TOOLS = ("prometheus", "promtool", "trimaran-scheduler")
# The release before the lab's, for a cluster that kubeadm upgrades (`build-image --previous`,
# lab/realnodes.py up(previous=True)); only `make test-full` and that command build them.
PREVIOUS_PROGRAMS = (
    "kube-apiserver-previous", "kube-controller-manager-previous", "kube-scheduler-previous",
    "kube-proxy-previous",
)  # fmt: skip

# purpose -> (programs, node image?, real-node image?)
PURPOSES: dict[str, tuple[tuple[str, ...], bool, bool]] = {
    "lab": (LAB_PROGRAMS, True, False),
    "node-image": ((), True, False),
    "realnodes": (REALNODE_PROGRAMS, False, True),
    # the demo runs on the real nodes, else on the lab's stand-ins (lab/demo.py run_auto)
    "demo": (tuple(dict.fromkeys(REALNODE_PROGRAMS + LAB_PROGRAMS)), True, True),
    "test": (tuple(dict.fromkeys(LAB_PROGRAMS + REALNODE_PROGRAMS + TEST_TOOLS)), True, True),
    "upgrade": (REALNODE_PROGRAMS + PREVIOUS_PROGRAMS, False, True),
}


def missing_programs(names: Iterable[str]) -> list[str]:
    """The programs among `names` (lab/build's default set when empty) not built yet."""
    proc = subprocess.run(
        [str(BUILD), "--missing", *names], capture_output=True, text=True, timeout=300
    )
    if proc.returncode != 0:
        from lab.processes import LabError

        raise LabError(f"lab/build --missing exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return proc.stdout.split()


def _program_steps(names: Sequence[str]) -> list[Step]:
    return [Step(n, [str(BUILD), n]) for n in missing_programs(names)]


def prepare_programs(names: Iterable[str], *, out: IO[str] | None = None) -> None:
    """Build the missing ones among `names` with progress (nothing to say when none is)."""
    steps = _program_steps(list(names))
    if steps:
        run_steps("building the lab's Go programs", steps, out=out)


def image_missing(script: Path) -> bool:
    """Whether an image script (NODE_IMAGE_SCRIPT, REALNODE_IMAGE_SCRIPT) would build."""
    proc = subprocess.run([str(script), "--check"], capture_output=True, timeout=300)
    return proc.returncode != 0


def prepare(purpose: str, *, out: IO[str] | None = None) -> float:
    """Build everything `purpose` needs (a key of PURPOSES) with progress; the seconds it
    took (0 when everything was there)."""
    programs, node_image, realnode_image = PURPOSES[purpose]
    steps = _program_steps(programs) if programs else []
    # asked before anything is built: a program still missing makes the real-node image's
    # check answer "missing" too (its tag hashes the programs' cache paths)
    if node_image and image_missing(NODE_IMAGE_SCRIPT):
        steps.append(Step("node image", [str(NODE_IMAGE_SCRIPT)]))
    if realnode_image and image_missing(REALNODE_IMAGE_SCRIPT):
        steps.append(Step("real-node image", [str(REALNODE_IMAGE_SCRIPT)]))
    return run_steps(f"{purpose}: first build", steps, out=out)
