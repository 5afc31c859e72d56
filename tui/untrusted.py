"""Text from the cluster, made safe to show in a terminal.

Anyone who may create an Event, annotate a pod or name a node writes text the dashboard
shows. Two things keep that text from acting on the screen instead of being read:

- `clean` (applied by `tui.objects` and `tui.model`, where API documents and API errors
  become the model) replaces every character that a terminal or the layout would act on
  with a visible stand-in, so no screen ever holds one;
- the widgets render model strings as text, never as Rich/Textual markup (`rich.text.Text`
  cells, `Content` titles, `markup=False` statics), so `[bold]` or `[/x]` is shown as
  typed.

Replacements, chosen so that what was there stays visible and recognisable:

- C0 controls except tab and newline, and DEL, in caret notation as `cat -v` prints
  them: ESC is `^[`, BEL `^G`, CR `^M`, DEL `^?` (kubectl shows ESC as `^[` too:
  kubernetes/cli-runtime pkg/printers/terminal.go, the fix for CVE-2021-25743). An
  escape sequence thus reads `^[]52;c;...` and the terminal sees only printable text.
- C1 controls U+0080..U+009F, which many terminals also obey (U+009B is an 8-bit CSI,
  U+009D an OSC): as their 7-bit form ESC Fe (ECMA-48, 5.3), so U+009B reads `^[[`.
- Tab and newline are kept: Textual and Rich lay them out inside the widget and never
  pass them to the terminal.
- The Unicode Bidi_Control characters (U+061C, U+200E, U+200F, U+202A..U+202E,
  U+2066..U+2069; Unicode PropList.txt) as U+FFFD: terminals that implement
  bidirectional text (VTE, Konsole, mlterm) would otherwise reorder the rest of a line,
  so that a name reads as another ("Trojan Source", CVE-2021-42574).
- Lone surrogates (U+D800..U+DFFF), which a `\\ud800` escape in an annotation's JSON
  decodes to, as U+FFFD: they cannot be encoded as UTF-8 for the terminal at all.
"""

from __future__ import annotations

__all__ = ["clean"]

REPLACEMENT = "\ufffd"

_TABLE: dict[int, str] = {code: f"^{chr(code + 0x40)}" for code in range(0x20)}
del _TABLE[ord("\t")], _TABLE[ord("\n")]
_TABLE[0x7F] = "^?"
_TABLE.update({code: f"^[{chr(code - 0x40)}" for code in range(0x80, 0xA0)})
_BIDI_CONTROLS = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_TABLE.update(dict.fromkeys(_BIDI_CONTROLS, REPLACEMENT))
_TABLE.update(dict.fromkeys(range(0xD800, 0xE000), REPLACEMENT))


def clean(text: str) -> str:
    """`text` with every control, bidi control and lone surrogate replaced (see above)."""
    # Every character the table replaces is in a category `isprintable` rejects (Cc, Cf,
    # Cs), so the common case, a plain name, costs one scan in C and no copy.
    if text.isprintable():
        return text
    return text.translate(_TABLE)
