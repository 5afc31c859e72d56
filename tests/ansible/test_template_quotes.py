"""No template of the collection escapes a quote with a backslash inside a Jinja string.

ansible-core before 2.19 doubles every backslash of a template before Jinja parses it, so
`{{ 'loadwise\\'s' }}` reaches Jinja as `'loadwise\\\\'s'`: the string ends at the quote and
the template fails with "expected token 'end of print statement', got 's'". 2.19 passes it
through, so a run on .venv's pin alone never sees it; 2.16.19, 2.17.14 and 2.18.19 all failed
on one (checked with each core's ansible-playbook, November 2026), and a `"loadwise's"` in
double quotes works on all four. This scan finds it in a second, without a playbook run on
each core (test_ansible_core_versions.py covers only the tasks its runs reach).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The text Jinja parses: inside {{ }} or {% %}, across lines (a folded YAML scalar).
_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)


def offenders(text: str) -> list[str]:
    """Each Jinja expression or statement in `text` holding a backslash before a single quote.
    Only single quotes: YAML itself has no such escape (a double-quoted scalar refuses it, a
    single-quoted or block one keeps the backslash), so the raw text is what Jinja gets, while
    a \\" may be YAML's own escape in a double-quoted scalar, which Jinja never sees."""
    return [m.group(0) for m in _JINJA.finditer(text) if "\\'" in m.group(0)]


def test_the_scan_finds_an_escaped_quote_and_passes_double_quotes() -> None:
    assert offenders("msg: >-\n  {{ 'a' if x\n     else 'none of loadwise\\'s' }}\n")
    assert offenders("{% set a = 'say \\'hi\\'' %}")
    assert not offenders('msg: "{{ "none of loadwise\'s" }}"\n')
    assert not offenders("cmd: tr '\\000' '\\n' < x  # not a template\n")


def test_no_template_escapes_a_quote_with_a_backslash() -> None:
    files = [
        path
        for top in ("roles", "playbooks")
        for path in sorted((ROOT / top).rglob("*"))
        if path.suffix in (".yml", ".yaml", ".j2") and "collections" not in path.parts
    ]
    assert len(files) > 20, files
    found = {
        str(path.relative_to(ROOT)): hits
        for path in files
        if (hits := offenders(path.read_text(errors="replace")))
    }
    assert not found, found
