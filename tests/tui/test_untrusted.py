"""`clean`: what a terminal would act on becomes visible text; everything else is kept."""

from __future__ import annotations

import pytest
from conftest import HOSTILE_TEXT, UNSAFE
from hypothesis import given

from loadwise.tui.untrusted import clean


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("worker-01", "worker-01"),
        ("[bold]x[/] [/x]", "[bold]x[/] [/x]"),  # markup is the widgets' business: kept
        (
            "\x1b]8;;https://example.invalid\x1b\\x\x1b]8;;\x1b\\",
            "^[]8;;https://example.invalid^[\\x^[]8;;^[\\",
        ),
        ("\x1b]52;c;aGk=\x07", "^[]52;c;aGk=^G"),
        ("\x1b[2J\x1b[31mred", "^[[2J^[[31mred"),
        ("a\rb\x00c\x7fd\x08e", "a^Mb^@c^?d^He"),
        ("\x9b2J \x9d0;t\x9c \x85", "^[[2J ^[]0;t^[\\ ^[E"),  # C1 as its 7-bit ESC Fe form
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        (
            "admin\u202eevil\u202c \u2066x\u2069 \u200e\u200f\u061c",
            "admin\ufffdevil\ufffd \ufffdx\ufffd \ufffd\ufffd\ufffd",
        ),
        ("half \ud800 pair", "half \ufffd pair"),
        ("naïve café 日本 \u00a0nbsp", "naïve café 日本 \u00a0nbsp"),
    ],
)
def test_examples(raw: str, shown: str) -> None:
    assert clean(raw) == shown


@given(HOSTILE_TEXT)
def test_nothing_unsafe_survives_and_safe_text_is_untouched(text: str) -> None:
    cleaned = clean(text)
    assert not UNSAFE.search(cleaned)
    cleaned.encode("utf-8")  # the terminal driver encodes it: must not raise
    assert (cleaned == text) == (not UNSAFE.search(text))
    assert clean(cleaned) == cleaned
