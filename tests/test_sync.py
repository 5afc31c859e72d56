"""What is written in two places says the same in both: each role's defaults and its
argument_specs, and the extender's policy names wherever they are listed.

(The version strings, ``extender.__version__``, galaxy.yml and the changelog's newest
release, are held equal by tests/ansible/test_release.py.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from loadwise.extender.config import Settings
from loadwise.extender.policies import POLICY_NAMES

ROOT = Path(__file__).resolve().parent.parent
ROLES = sorted(p for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.exists() else None


def _options(role: Path) -> dict[str, list[dict[str, Any]]]:
    """Every option of every entry point, by name (an option may be in several)."""
    specs = _yaml(role / "meta/argument_specs.yml")
    assert specs, f"{role.name}: no meta/argument_specs.yml"
    found: dict[str, list[dict[str, Any]]] = {}
    for entry, spec in specs["argument_specs"].items():
        for name, option in (spec.get("options") or {}).items():
            found.setdefault(name, []).append({"entry": entry, **option})
    return found


def test_every_role_is_checked():
    assert {r.name for r in ROLES} >= {"loadwise", "loadwise_extender", "loadwise_preflight"}


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.name)
def test_every_default_is_a_described_option_with_the_same_default(role: Path):
    defaults = _yaml(role / "defaults/main.yml") or {}
    options = _options(role)
    undescribed = sorted(set(defaults) - set(options))
    assert not undescribed, f"{role.name}: defaults/main.yml sets options no spec has"
    differ = [
        f"{name} ({option['entry']}): spec {option['default']!r}, defaults {defaults[name]!r}"
        for name in defaults
        for option in options[name]
        if "default" in option and option["default"] != defaults[name]
    ]
    assert not differ, f"{role.name}: " + "; ".join(differ)


def _read_with_default(role: Path, name: str, value: object) -> bool:
    """Whether the role's tasks and templates read ``name`` with ``| default(value)``: a
    variable several roles share is not in any role's defaults (a role default would hide
    the value another role's play sets), so each read names the spec's default itself."""
    pattern = re.compile(rf"\b{name}\s*\|\s*default\(\s*(['\"]){re.escape(str(value))}\1\s*\)")
    files = [*role.glob("tasks/**/*.yml"), *role.glob("templates/**/*")]
    return any(pattern.search(f.read_text()) for f in files if f.is_file())


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.name)
def test_every_default_in_the_spec_is_the_default_in_effect(role: Path):
    """A spec default is in defaults/main.yml, or the role reads the variable with that
    very default; else ansible-doc shows a value the role never uses."""
    defaults = _yaml(role / "defaults/main.yml") or {}
    missing = sorted(
        f"{name} ({option['entry']})"
        for name, found in _options(role).items()
        for option in found
        if "default" in option
        and option["default"] is not None
        and name not in defaults
        and not _read_with_default(role, name, option["default"])
    )
    assert not missing, f"{role.name}: spec defaults the role does not apply: {missing}"


def test_the_role_offers_the_extenders_policies_and_its_default():
    found = _options(ROOT / "roles/loadwise_extender")["loadwise_extender_policy"]
    for option in found:
        assert option["choices"] == list(POLICY_NAMES), option["entry"]
        assert option["default"] == Settings().policy, option["entry"]
    defaults = _yaml(ROOT / "roles/loadwise_extender/defaults/main.yml")
    assert defaults["loadwise_extender_policy"] == Settings().policy


def _listed(text: str, pattern: str) -> list[str]:
    match = re.search(pattern, text, re.M)
    assert match, f"no line matching {pattern!r}"
    return re.findall(r"[a-z][a-z-]+", match.group(1))


def test_the_docs_list_the_extenders_policies():
    contracts = (ROOT / "docs/contracts.md").read_text()
    assert _listed(contracts, r"^policy: \S+ +# (.+)$") == list(POLICY_NAMES)
    ansible = (ROOT / "docs/ansible.md").read_text()
    row = _listed(ansible, r"^\| `loadwise_extender_policy` .*One of: (.+?)\. \|$")
    assert row == list(POLICY_NAMES)
