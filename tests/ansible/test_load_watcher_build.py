"""roles/loadwise_load_watcher/files/build-load-watcher: the role's cross-build on the controller.

load-watcher publishes no image and its own Dockerfile/Makefile do not build at v0.2.4
(real-nodes reference: golang:1.16 for a go 1.22 module; GOOS typos on master). The role
builds it from the Go module proxy instead; this runs that exact script for the two
architectures a homelab has (amd64 PCs, arm64 Raspberry Pis) and reads what came out: the
ELF header's machine (what the kernel checks before exec) and the module version Go
stamped into the binary (`go version -m`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "roles/loadwise_load_watcher/files/build-load-watcher"
VERSION = "v0.2.4"  # roles/loadwise_load_watcher/defaults/main.yml
MODULE = SCRIPT.parent / f"load-watcher-{VERSION}"
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
    # The digest the role checks before every copy to a node, in sha256sum's format.
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert (tmp_path / f"{out.name}.sha256").read_text() == f"{digest}  {out.name}\n"
    # Built from the shipped module list alone: its go.mod is what Go recorded.
    assert ["dep", "golang.org/x/net", _required(MODULE / "go.mod")["golang.org/x/net"]] in [
        f[:3] for f in fields
    ], info.stdout


@pytest.mark.parametrize(
    ("version", "goarch", "message"),
    [
        ("latest", "amd64", "version must be a tag"),
        (VERSION, "x86_64", "unsupported GOARCH 'x86_64'"),
        ("v9.9.9", "amd64", "no go.mod and go.sum for load-watcher v9.9.9"),
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


def _required(go_mod: Path) -> dict[str, str]:
    """module -> version of every requirement in a go.mod (block and single-line forms)."""
    text = go_mod.read_text()
    lines = re.findall(r"(?m)^\s*(?:require\s+)?([\w./~-]+\.[\w./~-]+)\s+(v\S+)", text)
    return dict(lines)


def test_the_shipped_module_list_pins_every_module_by_hash() -> None:
    """What makes -mod=readonly possible: go.sum holds both hashes (the module's tree and its
    go.mod) of every module go.mod requires, load-watcher itself at the role's version."""
    script = SCRIPT.read_text()
    assert "GOFLAGS=-mod=readonly" in script and "mod=mod" not in script.replace(
        "with -mod=mod", ""
    )
    required = _required(MODULE / "go.mod")
    assert required["github.com/paypal/load-watcher"] == VERSION
    go_line = re.search(r"(?m)^go (\S+)$", (MODULE / "go.mod").read_text())
    assert go_line is not None and go_line[1] == "1.22.0"  # load-watcher's own: Go 1.22+ builds it
    sums = {
        tuple(line.split()[:2])
        for line in (MODULE / "go.sum").read_text().splitlines()
        if re.fullmatch(r"\S+ \S+ h1:[A-Za-z0-9+/]{43}=", line)
    }
    for module, version in required.items():
        assert (module, version) in sums, f"go.sum has no h1 hash of {module} {version}"
        assert (module, f"{version}/go.mod") in sums, f"go.sum has no hash of {module}'s go.mod"


def test_a_tampered_go_sum_stops_the_build(tmp_path: Path) -> None:
    """The script with its module list, one hash in go.sum changed: Go refuses the module."""
    go = _go()
    files = tmp_path / "files"
    shutil.copytree(MODULE, files / MODULE.name)
    shutil.copy2(SCRIPT, files / SCRIPT.name)
    go_sum = files / MODULE.name / "go.sum"
    text = go_sum.read_text()
    line = next(x for x in text.splitlines() if x.startswith("github.com/paypal/load-watcher "))
    forged = line[:-5] + ("AAAA=" if not line.endswith("AAAA=") else "BBBB=")
    go_sum.write_text(text.replace(line, forged))
    out = tmp_path / "lw"
    env = {**os.environ, "PATH": f"{Path(go).parent}{os.pathsep}{os.environ['PATH']}"}
    argv = [str(files / SCRIPT.name), VERSION, "amd64", str(out)]
    if shutil.which("flock"):
        argv = ["flock", "/tmp/loadwise-go.lock", *argv]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode != 0
    assert "checksum mismatch" in proc.stderr or "SECURITY ERROR" in proc.stderr, proc.stderr
    assert not out.exists() and not (tmp_path / "lw.sha256").exists()
