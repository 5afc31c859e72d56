"""Cell renderers shared by the tables: bars, sparklines, compact numbers, ages.

Plain functions returning `rich.text.Text`, so they are cheap to call 500 times per
refresh and easy to unit-test without an app. A table cell is always a `Text`: DataTable
parses a `str` cell as Rich markup, and cells hold names and messages from the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from rich.text import Text

from ..quantity import format_bytes, format_cores

__all__ = [
    "age",
    "bar",
    "compact_bytes",
    "cores",
    "level_style",
    "plain",
    "sparkline",
    "triple",
]

_SPARKS = "▁▂▃▄▅▆▇█"


def plain(value: str, style: str = "") -> Text:
    """`value` as a cell, never read as markup; laid out as DataTable lays out a `str` cell."""
    return Text(value, style=style, no_wrap=True, end="")


def level_style(fraction: float | None) -> str:
    """Green below 60 %, yellow below 85 %, red above: the same bands everywhere."""
    if fraction is None:
        return "dim"
    if fraction >= 0.85:
        return "bold red"
    if fraction >= 0.60:
        return "yellow"
    return "green"


def bar(
    fraction: float | None, width: int = 6, *, style: str | None = None, dim: bool = False
) -> Text:
    """`██████░░  62%`; an unknown fraction renders as a dim placeholder of the same width."""
    if fraction is None:
        return Text("·" * width + "    –", style="dim")
    filled = max(0, min(width, round(fraction * width)))
    text = Text()
    chosen = style or level_style(fraction)
    if dim:
        chosen = f"{chosen} dim"
    text.append("█" * filled, style=chosen)
    text.append("░" * (width - filled), style="dim")
    text.append(f" {fraction * 100:3.0f}%", style=chosen)
    return text


def sparkline(values: Iterable[float], width: int = 8) -> Text:
    """Absolute sparkline (0 % → ▁, 100 % → █) of the last `width` samples, right-aligned."""
    recent = list(values)[-width:]
    text = Text(" " * (width - len(recent)))
    for value in recent:
        index = max(0, min(len(_SPARKS) - 1, int(value * len(_SPARKS))))
        text.append(_SPARKS[index], style=level_style(value))
    return text


def compact_bytes(count: float) -> str:
    """Memory in at most four characters of number: `512Mi`, `3.1Gi`, `31Gi`."""
    value = float(count)
    for unit in ("", "Ki", "Mi", "Gi", "Ti"):
        if abs(value) < 1000 or unit == "Ti":
            if unit == "":
                return f"{value:.0f}"
            return f"{value:.1f}{unit}" if abs(value) < 10 else f"{value:.0f}{unit}"
        value /= 1024
    return format_bytes(count)  # pragma: no cover


def cores(millicores: float) -> str:
    return format_cores(millicores)


def triple(used: str | None, requested: str, allocatable: str, *, dim: bool = False) -> Text:
    """`used / requested / allocatable`, the kube-capacity view in one cell."""
    text = Text()
    text.append(used if used is not None else "–", style="bold dim" if dim else "bold")
    text.append("/", style="dim")
    text.append(requested, style="cyan")
    text.append("/", style="dim")
    text.append(allocatable)
    return text


def age(at: datetime | None, now: datetime) -> str:
    """kubectl-style age: `42s`, `7m`, `3h`, `12d`."""
    if at is None:
        return "–"
    seconds = max(0, int((now - at).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 120 * 60:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"
