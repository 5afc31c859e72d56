"""docs/ansible.md's variable tables, written from the roles' meta/argument_specs.yml.

The argument specs are the one description of every variable (preflight validates the
inventory against them, `ansible-doc -t role loadwise.loadwise.<role>` shows them); the
tables in docs/ansible.md are generated from them between markers:

    <!-- BEGIN variables <role>: <name> <name> ... -->
    | variable | default | meaning |
    ...
    <!-- END variables -->

`*` instead of names lists every option of the role's main entry point, in the spec's order.
The specs are read as ansible-doc reads them: YAML with its anchors and merge keys resolved,
a description being a string or a list of paragraphs.

    .venv/bin/python -m tests.ansible.variable_docs          # rewrite docs/ansible.md
    .venv/bin/python -m tests.ansible.variable_docs --check  # exit 1 when it is out of date

(tests/ansible/test_variable_docs.py runs the check.)
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ansible.md"
ROLES = ROOT / "roles"

BLOCK = re.compile(
    r"(?P<begin><!-- BEGIN variables (?P<role>[a-z0-9_]+): (?P<names>[^>]*?) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<end><!-- END variables -->)",
    re.DOTALL,
)
HEADER = "| variable | default | meaning |\n|---|---|---|\n"


class VariableDocsError(ValueError):
    """A marker that names a role or variable the specs do not have."""


def role_options(role: str, roles: Path = ROLES) -> dict[str, dict[str, Any]]:
    """The options of `role`'s main entry point, in the order of its argument_specs.yml."""
    path = roles / role / "meta" / "argument_specs.yml"
    if not path.is_file():
        raise VariableDocsError(f"no role {role!r} with a meta/argument_specs.yml ({path})")
    specs = yaml.safe_load(path.read_text())
    try:
        options = specs["argument_specs"]["main"]["options"]
    except (KeyError, TypeError) as e:
        raise VariableDocsError(f"{path}: no argument_specs.main.options") from e
    if not isinstance(options, Mapping):
        raise VariableDocsError(f"{path}: argument_specs.main.options is not a mapping")
    return {str(k): dict(v or {}) for k, v in options.items()}


def _cell(text: str) -> str:
    """One table cell: on one line, its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def default_text(option: Mapping[str, Any]) -> str:
    """The default column: the value as YAML would write it, or why there is none."""
    if "default" not in option:
        return "required" if option.get("required") else "unset"
    value = option["default"]
    if value == "":
        return '`""`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, Mapping | list):
        flow = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10**6)
        return f"`{flow.strip()}`"
    return f"`{value}`"


def meaning_text(option: Mapping[str, Any]) -> str:
    """The description (its paragraphs joined), then its choices if it has any."""
    description = option.get("description", "")
    paragraphs = [description] if isinstance(description, str) else list(description)
    text = " ".join(str(p) for p in paragraphs)
    if option.get("choices"):
        text += " One of: " + ", ".join(f"`{c}`" for c in option["choices"]) + "."
    return text


def table(role: str, names: list[str], roles: Path = ROLES) -> str:
    """The markdown table of `names` (["*"]: all) of `role`'s main options."""
    options = role_options(role, roles)
    if names == ["*"]:
        names = list(options)
    unknown = [n for n in names if n not in options]
    if unknown:
        raise VariableDocsError(f"role {role} declares no {', '.join(unknown)}")
    rows = [
        f"| `{n}` | {_cell(default_text(options[n]))} | {_cell(meaning_text(options[n]))} |\n"
        for n in names
    ]
    return HEADER + "".join(rows)


def render(doc: str, roles: Path = ROLES) -> str:
    """`doc` with every marked table written again from the specs."""

    def one(m: re.Match[str]) -> str:
        names = m["names"].split()
        if not names:
            raise VariableDocsError(f"the marker {m['begin'].strip()} names no variable")
        return m["begin"] + table(m["role"], names, roles) + m["end"]

    return BLOCK.sub(one, doc)


def main(argv: list[str]) -> int:
    current = DOC.read_text()
    wanted = render(current)
    if "--check" in argv:
        if wanted != current:
            print(f"{DOC} is out of date: python -m tests.ansible.variable_docs", file=sys.stderr)
            return 1
        return 0
    if wanted != current:
        DOC.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
