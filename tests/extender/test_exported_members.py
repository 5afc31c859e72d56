"""Every module's ``__all__`` is complete and true (after httpx's test of the same name).

True: every name listed exists. Complete: every public class and function a module
defines (not imports) is listed, so what other modules import from it is on record.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from loadwise import extender

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(extender.__path__, "loadwise.extender.")
    if not info.name.endswith("__main__")
)


@pytest.mark.parametrize("name", ["loadwise.extender", *MODULES])
def test_all_is_true_and_complete(name):
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
    defined = {
        n
        for n, obj in vars(module).items()
        if not n.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and obj.__module__ == name
    }
    unlisted = sorted(defined - set(exported))
    assert not unlisted, f"{name} defines public names missing from __all__: {unlisted}"


def test_the_package_exports_what_the_cli_and_the_tui_use():
    assert set(extender.__all__) >= {"Extender", "Reflector", "Backoff", "LoadwiseError"}
    from loadwise.extender.quantity import QuantityError, parse_quantity  # tui/quantity.py

    assert QuantityError is extender.QuantityError and callable(parse_quantity)


def test_names_imported_across_modules_are_exported():
    """A name one extender module imports from another is in the other's __all__."""
    import ast
    from pathlib import Path

    root = Path(extender.__file__).parent
    problems = []
    for path in root.rglob("*.py"):
        package = ".".join(("loadwise", "extender", *path.relative_to(root).with_suffix("").parts))
        if path.name == "__init__.py":
            package = package.rsplit(".", 1)[0] + ".__init__"
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            base = package.split(".")[: -node.level]
            target = ".".join(base + ([node.module] if node.module else []))
            try:
                module = importlib.import_module(target)
            except ModuleNotFoundError:
                continue  # a submodule imported as a name (from . import x)
            exported = set(getattr(module, "__all__", ()))
            for alias in node.names:
                if inspect.ismodule(getattr(module, alias.name, None)):
                    continue
                if alias.name not in exported:
                    problems.append(f"{path.relative_to(root)}: {target}.{alias.name}")
    assert not problems, "imported but not exported:\n" + "\n".join(sorted(problems))
