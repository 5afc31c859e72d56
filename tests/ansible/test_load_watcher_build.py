"""roles/loadwise_load_watcher/files/build-load-watcher: the role's cross-build on the controller.

load-watcher publishes no image and its own Dockerfile/Makefile do not build at v0.2.4
(real-nodes reference: golang:1.16 for a go 1.22 module; GOOS typos on master). The role
builds it from the Go module proxy instead; this runs that exact script for the two
architectures a homelab has (amd64 PCs, arm64 Raspberry Pis) and reads what came out: the
ELF header's machine (what the kernel checks before exec) and the module version Go
stamped into the binary (`go version -m`).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "roles/loadwise_load_watcher/files/build-load-watcher"
VERSION = "v0.2.4"  # roles/loadwise_load_watcher/defaults/main.yml
# ELF e_machine values (System V ABI, elf.h): EM_X86_64, EM_AARCH64.
MACHINE = {"amd64": 62, "arm64": 183}
PT_INTERP = 3


def _go() -> str:
    go = shutil.which("go") or (
        "/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None
    )
    if go is None:
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
            pytest.fail("CI=true: Go is not installed (scripts/setup installs it)", pytrace=False)
        pytest.skip("Go is not installed")
    return go


def _elf(path: Path) -> tuple[int, int, bool]:
    """(EI_CLASS, e_machine, has a PT_INTERP program header) of a little-endian ELF file."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF", f"{path} is not an ELF file"
    assert data[5] == 1, "not little-endian"
    klass = data[4]
    (machine,) = struct.unpack_from("<H", data, 18)
    assert klass == 2, "not a 64-bit ELF"
    (phoff,) = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    types = [struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)]
    return klass, machine, PT_INTERP in types


@pytest.mark.parametrize("goarch", ["amd64", "arm64"])
def test_builds_a_static_linux_binary_for_the_node_arch(goarch: str, tmp_path: Path) -> None:
    go = _go()
    out = tmp_path / f"load-watcher-{VERSION}-linux-{goarch}"
    env = {**os.environ, "PATH": f"{Path(go).parent}{os.pathsep}{os.environ['PATH']}"}
    # Go builds on this machine are serialised (tests and helpers share two cores).
    argv = [str(SCRIPT), VERSION, goarch, str(out)]
    if shutil.which("flock"):
        argv = ["flock", "/tmp/loadwise-go.lock", *argv]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert os.access(out, os.X_OK)
    klass, machine, dynamic = _elf(out)
    assert machine == MACHINE[goarch], (
        f"e_machine {machine}, expected {MACHINE[goarch]} for {goarch}"
    )
    assert not dynamic, "the binary asks for a dynamic loader; the nodes need a static one"
    info = subprocess.run(
        [go, "version", "-m", str(out)], capture_output=True, text=True, check=True
    )
    fields = [line.split() for line in info.stdout.splitlines()]
    assert ["mod", "github.com/paypal/load-watcher", VERSION] in [f[:3] for f in fields], (
        info.stdout
    )
    assert ["build", f"GOARCH={goarch}"] in fields and ["build", "GOOS=linux"] in fields, (
        info.stdout
    )
    assert ["build", "CGO_ENABLED=0"] in fields, info.stdout
    assert not list(tmp_path.glob("*.tmp.*")), "a temporary file was left beside the output"


@pytest.mark.parametrize(
    ("version", "goarch", "message"),
    [
        ("latest", "amd64", "version must be a tag"),
        (VERSION, "x86_64", "unsupported GOARCH 'x86_64'"),
    ],
)
def test_refuses_bad_arguments_before_building(
    version: str, goarch: str, message: str, tmp_path: Path
) -> None:
    out = tmp_path / "lw"
    proc = subprocess.run(
        [str(SCRIPT), version, goarch, str(out)], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not out.exists()
