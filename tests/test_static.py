"""Static checks that are part of the test run, so CI fails on them like on any test.

mypy strict over the shipped packages and the lab (the configuration is in pyproject.toml,
`[tool.mypy]`; `make lint` runs the same command), and no import cycle among them.
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_strict_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"mypy reported problems:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize(
    "args",
    [("check", "extender", "tui", "lab", "tests", "benchmarks"), ("format", "--check", ".")],
    ids=["check", "format"],
)
def test_ruff_is_clean(args: tuple[str, ...]) -> None:
    """`make lint`'s ruff steps, so CI holds them too (an E501 in lab/hosts.py stood for a
    day while only `make lint` would have said so)."""
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run(
        [str(ruff), *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"ruff {' '.join(args)}:\n{result.stdout}{result.stderr}"


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that `module` (at `path`) imports, at any depth of its body."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            prefix = ".".join(base + [node.module] if node.module else base)
            prefix = prefix if node.level else node.module or ""
            names = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in known and name != module)
    return found


def test_the_import_graph_has_no_cycle() -> None:
    """extender/, tui/ and lab/ import each other in one direction only (issue #9)."""
    files: dict[str, Path] = {}
    for package in ("extender", "tui", "lab"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {module: _imports(module, path, set(files)) for module, path in files.items()}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
