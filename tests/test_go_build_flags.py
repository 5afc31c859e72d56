"""The Go builds take their modules as the repository records them (no cluster, no build).

``-mod=mod`` lets ``go build`` add a module missing from go.mod / go.sum, fetched and
trusted on first use; ``-mod=readonly`` fails instead, so only modules whose hash is in a
committed go.sum can enter a binary. These checks read the build scripts and the module
files: a ``-mod=mod`` coming back, a ``go build`` line without the read-only flag, or a
go.sum missing a module its go.mod requires fails here, before the 30-minute lab build.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "lab"

# What runs Go builds or Go module commands: the lab's build script and Python, the roles'
# scripts and tasks, the helper scripts, the Makefile.
_SCANNED_SUFFIXES = {".py", ".sh", ".yml", ".yaml", ".j2", ""}


def _build_files() -> list[Path]:
    found = [LAB / "build", ROOT / "Makefile"]
    for top in (LAB, ROOT / "roles", ROOT / "scripts", ROOT / "playbooks"):
        for path in top.rglob("*"):
            if "__pycache__" in path.parts or path.suffix not in _SCANNED_SUFFIXES:
                continue
            if path.is_file():
                found.append(path)
    return sorted(set(found))


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except UnicodeDecodeError:  # a binary without a suffix
        return ""


def test_no_build_fetches_unrecorded_modules() -> None:
    offenders = []
    for path in _build_files():
        for number, line in enumerate(_text(path).splitlines(), 1):
            # a comment may explain what -mod=mod would do; a command may not use it
            code = line.split("#", 1)[0] if path.suffix != ".py" else line
            if re.search(r"-mod=mod\b", code) and not line.lstrip().startswith("#"):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "builds with -mod=mod (use -mod=readonly):\n" + "\n".join(offenders)


def test_every_lab_go_build_is_read_only() -> None:
    lines = _text(LAB / "build").splitlines()
    builds = [i for i, line in enumerate(lines) if re.search(r"\bgo build\b", line)]
    commands = [i for i in builds if not lines[i].lstrip().startswith("#")]
    assert len(commands) >= 2, "lab/build has fewer go build commands than expected"
    for i in commands:
        # the environment is on the line itself or on the continued line before it
        command = lines[i] + (lines[i - 1] if lines[i - 1].rstrip().endswith("\\") else "")
        assert "GOFLAGS=-mod=readonly" in command, f"lab/build:{i + 1} not read-only: {command}"


def _modules() -> list[Path]:
    return sorted(p.parent for p in [*LAB.glob("go/*/go.mod"), *LAB.glob("go-tools/*/go.mod")])


def _directives(go_mod: str, verb: str) -> list[list[str]]:
    """The fields of every ``verb`` line (``require``, ``replace``), in blocks or alone."""
    out: list[list[str]] = []
    in_block = False
    for raw in go_mod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if line == f"{verb} (":
            in_block = True
        elif in_block and line == ")":
            in_block = False
        elif in_block and line:
            out.append(line.split())
        elif line.startswith(f"{verb} "):
            out.append(line.removeprefix(f"{verb} ").split())
    return out


def _requires(go_mod: str) -> list[tuple[str, str]]:
    """(module, version) that each require line resolves to, after the replace lines (a
    replacement by a module version; one by a local directory has nothing in go.sum)."""
    replaced: dict[str, tuple[str, str] | None] = {}
    for fields in _directives(go_mod, "replace"):
        arrow = fields.index("=>")
        target = fields[arrow + 1 :]
        replaced[fields[0]] = (target[0], target[1]) if len(target) == 2 else None
    out: list[tuple[str, str]] = []
    for fields in _directives(go_mod, "require"):
        module, version = fields[0], fields[1]
        if module not in replaced:
            out.append((module, version))
        elif (target := replaced[module]) is not None:
            out.append(target)
    return out


@pytest.mark.parametrize("module", _modules(), ids=lambda p: str(p.relative_to(LAB)))
def test_go_sum_records_every_required_module(module: Path) -> None:
    """Each module a go.mod requires has its go.mod hash in go.sum: with -mod=readonly a
    missing one stops the build (``missing go.sum entry``), so it must be committed."""
    requires = _requires((module / "go.mod").read_text())
    if not requires:
        assert not (module / "go.sum").exists() or (module / "go.sum").read_text().strip() == ""
        return
    go_sum = (module / "go.sum").read_text().splitlines()
    recorded = {tuple(line.split()[:2]) for line in go_sum if line.strip()}
    missing = [f"{m} {v}" for m, v in requires if (m, f"{v}/go.mod") not in recorded]
    assert not missing, f"{module.relative_to(ROOT)}/go.sum lacks: {', '.join(missing)}"


def test_requires_parser_reads_blocks_single_lines_and_replacements() -> None:
    text = (
        "module x\n\nrequire a.b/c v1.0.0\n\nrequire (\n\td.e/f v0.2.0 // indirect\n"
        "\tg.h/i v0.3.0\n)\n\nreplace d.e/f => d.e/f v0.9.0\n\nreplace (\n\tg.h/i => ../i\n)\n"
    )
    assert _requires(text) == [("a.b/c", "v1.0.0"), ("d.e/f", "v0.9.0")]
