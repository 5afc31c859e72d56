"""Kubernetes resource quantities, parsed exactly and formatted for narrow table cells.

The API server hands out quantities in whatever form a user wrote them (`1.5`, `1500m`,
`250000000n` for CPU; `512Mi`, `1G`, `129e6` for memory). metrics-server in particular
reports CPU in nanocores and memory in `Ki`. Parsing goes through `Decimal` so that
`0.1` plus `100m` is exactly `200m`, then rounds once at the edge: CPU to millicores
(float, because usage is fractional), memory to whole bytes.

The lead's `extender/quantity.py` covers the same grammar; this module keeps the TUI
installable and testable on its own until the two are unified.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

__all__ = [
    "QuantityError",
    "cpu_millicores",
    "format_bytes",
    "format_cores",
    "memory_bytes",
    "parse_quantity",
]

_BINARY = {
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
# <sign><digits>[.<digits>] then either a decimal exponent (e3, E-2) or a suffix.
# "1E" alone is exa, "1E3" is a thousand: the exponent needs digits, so the suffix
# alternative catches a bare trailing E.
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<exponent>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)


class QuantityError(ValueError):
    """Raised for a string that is not a Kubernetes quantity."""


def parse_quantity(text: str | int | float) -> Decimal:
    """Return the exact value of a quantity in base units (cores, bytes)."""
    if isinstance(text, int | float):
        return Decimal(str(text))
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise QuantityError(f"not a Kubernetes quantity: {text!r}")
    try:
        number = Decimal(match["number"])
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise QuantityError(f"not a Kubernetes quantity: {text!r}") from exc
    if match["exponent"]:
        return number * (Decimal(10) ** int(match["exponent"][1:]))
    suffix = match["suffix"] or ""
    return number * (_BINARY.get(suffix) or _DECIMAL[suffix])


def cpu_millicores(text: str | int | float | None) -> float:
    """CPU quantity in millicores; missing or malformed values count as zero."""
    if text is None:
        return 0.0
    try:
        return float(parse_quantity(text) * 1000)
    except QuantityError:
        return 0.0


def memory_bytes(text: str | int | float | None) -> int:
    """Memory quantity in bytes, rounded up like the API server does; bad values are zero."""
    if text is None:
        return 0
    try:
        value = parse_quantity(text)
    except QuantityError:
        return 0
    return int(value.to_integral_value(rounding="ROUND_CEILING"))


def format_cores(millicores: float) -> str:
    """Cores with two significant decimals: `0.25`, `1.50`, `12.0`, `128`."""
    cores = millicores / 1000
    if cores >= 100:
        return f"{cores:.0f}"
    if cores >= 10:
        return f"{cores:.1f}"
    return f"{cores:.2f}"


def format_bytes(count: float) -> str:
    """Binary units, about three significant digits: `512Mi`, `1.50Gi`, `31.4Gi`."""
    value = float(count)
    for unit in ("", "Ki", "Mi", "Gi", "Ti", "Pi"):
        if abs(value) < 1024 or unit == "Pi":
            if unit == "":
                return f"{value:.0f}"
            if abs(value) >= 100:
                return f"{value:.0f}{unit}"
            if abs(value) >= 10:
                return f"{value:.1f}{unit}"
            return f"{value:.2f}{unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover
