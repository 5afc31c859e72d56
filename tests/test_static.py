"""Static checks that are part of the test run, so CI fails on them like on any test.

mypy strict over the shipped packages, the lab and the benchmarks (the configuration is in
pyproject.toml, `[tool.mypy]`; `make lint` runs the same command), and no import cycle in
any package.
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
    [
        ("check", "extender", "tui", "loadwise", "lab", "tests", "benchmarks"),
        ("format", "--check", "."),
    ],
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


def _packages(root: Path) -> list[str]:
    """The top-level packages under `root`: its directories with an __init__.py."""
    return sorted(init.parent.name for init in root.glob("*/__init__.py"))


def _linked(root: Path, packages: list[str]) -> dict[str, str]:
    """Directories imported under another package's name: `loadwise/extender` links to
    `extender/`, so the modules in `extender/` are `loadwise.extender.*`."""
    names: dict[str, str] = {}
    for package in packages:
        for link in (root / package).iterdir():
            if link.is_symlink() and link.is_dir():
                names[link.resolve().relative_to(root.resolve()).as_posix()] = (
                    f"{package}.{link.name}"
                )
    return names


def _cycle(root: Path, packages: list[str]) -> list[str] | None:
    """An import cycle among the modules of `packages`, as the modules along it; None when
    there is none. An import inside a function counts like one at the top: it only defers
    the cycle to the first call."""
    linked = _linked(root, packages)
    files: dict[str, Path] = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            parts = (*linked.get(parts[0], parts[0]).split("."), *parts[1:])
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {module: _imports(module, path, set(files)) for module, path in files.items()}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def test_the_import_graph_has_no_cycle() -> None:
    """Every package of the repository (the shipped ones, the lab, the benchmarks, the
    tests) imports in one direction only."""
    cycle = _cycle(ROOT, _packages(ROOT))
    assert cycle is None, f"import cycle: {' -> '.join(cycle or [])}"


def test_the_cycle_check_covers_every_package() -> None:
    # A package that lost its __init__.py would drop out of the check silently, and so
    # would the shipped modules if they were not named as they are imported.
    assert {"benchmarks", "extender", "lab", "loadwise", "tests", "tui"} <= set(_packages(ROOT))
    assert _linked(ROOT, _packages(ROOT)) == {
        "extender": "loadwise.extender",
        "tui": "loadwise.tui",
    }


def _top_level_imports(path: Path) -> list[str]:
    """Where `path` imports the shipped packages by their source-tree names."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        found += [
            f"{path.relative_to(ROOT)}:{node.lineno}"
            for name in names
            if name.split(".")[0] in ("extender", "tui")
        ]
    return found


def test_nothing_imports_the_shipped_packages_by_their_directory_names() -> None:
    """The wheel installs `loadwise.extender` and `loadwise.tui` only: `import extender`
    works in this checkout (its root is on the path) and nowhere else."""
    paths = [
        path
        for package in _packages(ROOT)
        if package != "loadwise"
        for path in (ROOT / package).rglob("*.py")
    ]
    paths += [*(ROOT / "plugins").rglob("*.py"), *(ROOT / "roles").rglob("*.py")]
    offenders = [hit for path in paths for hit in _top_level_imports(path)]
    assert offenders == []


def test_the_cycle_check_finds_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import helper\n")
    (pkg / "b.py").write_text("def helper() -> None:\n    from pkg import a\n")
    (pkg / "c.py").write_text("from . import b\n")
    assert _packages(tmp_path) == ["pkg"]
    cycle = _cycle(tmp_path, ["pkg"])
    assert cycle is not None and {"pkg.a", "pkg.b"} == set(cycle)
    (pkg / "b.py").write_text("def helper() -> None:\n    pass\n")
    assert _cycle(tmp_path, ["pkg"]) is None
