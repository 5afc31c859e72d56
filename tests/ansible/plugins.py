"""The collection's plugins and the roles' templates as Ansible itself loads and renders them.

- ``filter_module(stem)``, ``module_file(stem)``: plugins/filter/<stem>.py or
  plugins/modules/<stem>.py imported as a Python module, to call its functions directly.
- ``render(text, variables)``: a template rendered by ansible-core's own Templar, with its real
  filters and tests (``bool("false")`` is False, as in a run) and the collection's filters by
  their full names (loadwise.loadwise.*), found through the repository's view of itself as the
  collection (playbooks/collections, the link ansible.cfg explains).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REPO_COLLECTIONS = ROOT / "playbooks" / "collections"


def filter_module(stem: str) -> ModuleType:
    """plugins/filter/<stem>.py, imported once per test process."""
    return _plugin_file("filter", stem)


def module_file(stem: str) -> ModuleType:
    """plugins/modules/<stem>.py imported as Python (its pure functions; Ansible runs its main)."""
    return _plugin_file("modules", stem)


@cache
def _plugin_file(kind: str, stem: str) -> ModuleType:
    path = ROOT / "plugins" / kind / f"{stem}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no {kind} plugin {path}")
    name = f"loadwise_{kind}_under_test_{stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    return module


@cache
def _plugin_loader() -> None:
    """Ansible's plugin loader, with this repository as the collection loadwise.loadwise."""
    from ansible.plugins.loader import init_plugin_loader

    init_plugin_loader([str(REPO_COLLECTIONS)])


def render(text: str, variables: Mapping[str, Any] | None = None) -> Any:
    """``text`` rendered as a role's template or task value is, by ansible-core's Templar."""
    _plugin_loader()
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    try:  # ansible-core 2.19: only trusted text is a template (data tagging)
        from ansible.template import trust_as_template
    except ImportError:  # 2.16 - 2.18 template every string

        def trust_as_template(value: str) -> str:
            return value

    templar = Templar(loader=DataLoader(), variables=dict(variables or {}))
    return templar.template(trust_as_template(text))


def render_file(path: Path, variables: Mapping[str, Any] | None = None) -> str:
    """A role's template file rendered as ansible.builtin.template renders it."""
    return str(render(path.read_text(), variables))


def role_defaults(*roles: str) -> dict[str, Any]:
    """The roles' defaults/main.yml merged in order, read by Ansible's own loader (so a default
    that is a template, as `{{ loadwise_cluster_objects | bool }}`, is one, as in a run)."""
    from ansible.parsing.dataloader import DataLoader

    merged: dict[str, Any] = {}
    for role in roles:
        loaded = DataLoader().load_from_file(str(ROOT / "roles" / role / "defaults" / "main.yml"))
        merged.update(loaded or {})
    return merged
