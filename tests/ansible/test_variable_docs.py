"""docs/ansible.md's variable tables are the roles' argument specs, written out.

tests/ansible/variable_docs.py writes them; this fails when a spec changed and the tables were
not written again (or a table was edited by hand), and checks how a spec becomes a row.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ansible.variable_docs import DOC, ROLES, VariableDocsError, render, table

SPEC = """\
---
argument_specs:
  main:
    options: &opts
      demo_flag:
        type: bool
        default: false
        description:
          - First paragraph.
          - Second | with a pipe.
      demo_empty:
        type: str
        default: ""
        description: Empty by default.
      demo_map:
        type: dict
        default: {cpu: 90, memory: 90}
        description: A map.
      demo_unset:
        type: int
        description: No default.
      demo_needed:
        type: str
        required: true
        choices: [a, b]
        description: Must be given.
  other:
    options:
      <<: *opts
"""


@pytest.fixture
def roles(tmp_path: Path) -> Path:
    meta = tmp_path / "demo" / "meta"
    meta.mkdir(parents=True)
    (meta / "argument_specs.yml").write_text(SPEC)
    return tmp_path


def test_docs_ansible_md_is_written_from_the_specs() -> None:
    current = DOC.read_text()
    assert render(current) == current, (
        "docs/ansible.md's variable tables differ from roles/*/meta/argument_specs.yml: "
        "run .venv/bin/python -m tests.ansible.variable_docs"
    )


def test_every_role_has_its_full_table() -> None:
    doc = DOC.read_text()
    specs = sorted(p.parent.parent.name for p in ROLES.glob("*/meta/argument_specs.yml"))
    assert specs, "no role with argument specs found"
    for role in specs:
        assert f"<!-- BEGIN variables {role}: * -->" in doc, role


def test_a_spec_becomes_rows(roles: Path) -> None:
    assert table("demo", ["*"], roles).splitlines() == [
        "| variable | default | meaning |",
        "|---|---|---|",
        "| `demo_flag` | `false` | First paragraph. Second \\| with a pipe. |",
        '| `demo_empty` | `""` | Empty by default. |',
        "| `demo_map` | `{cpu: 90, memory: 90}` | A map. |",
        "| `demo_unset` | unset | No default. |",
        "| `demo_needed` | required | Must be given. One of: `a`, `b`. |",
    ]


def test_only_the_marked_block_is_written(roles: Path) -> None:
    doc = (
        "Prose stays.\n\n"
        "<!-- BEGIN variables demo: demo_map demo_flag -->\n"
        "| stale | table |\n"
        "<!-- END variables -->\n\n"
        "More prose.\n"
    )
    assert render(doc, roles) == (
        "Prose stays.\n\n"
        "<!-- BEGIN variables demo: demo_map demo_flag -->\n"
        "| variable | default | meaning |\n|---|---|---|\n"
        "| `demo_map` | `{cpu: 90, memory: 90}` | A map. |\n"
        "| `demo_flag` | `false` | First paragraph. Second \\| with a pipe. |\n"
        "<!-- END variables -->\n\n"
        "More prose.\n"
    )


@pytest.mark.parametrize(
    ("marker", "error"),
    [
        ("demo: demo_typo", "role demo declares no demo_typo"),
        ("nosuchrole: x", "no role 'nosuchrole' with a meta/argument_specs.yml"),
    ],
)
def test_a_marker_naming_what_no_spec_has_is_refused(roles: Path, marker: str, error: str) -> None:
    doc = f"<!-- BEGIN variables {marker} -->\n<!-- END variables -->\n"
    with pytest.raises(VariableDocsError, match=error):
        render(doc, roles)
