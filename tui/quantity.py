"""Kubernetes resource quantities, parsed exactly and formatted for narrow table cells.

The API server hands out quantities in whatever form a user wrote them (`1.5`, `1500m`,
`250000000n` for CPU; `512Mi`, `1G`, `129e6` for memory). metrics-server in particular
reports CPU in nanocores and memory in `Ki`. Parsing goes through `Decimal` so that
`0.1` plus `100m` is exactly `200m`, then rounds once at the edge: CPU to millicores
(float, because usage is fractional), memory to whole bytes.

The grammar itself lives in `extender.quantity` (one parser for the whole
distribution); this module adds the TUI's lenient conversions and cell formatting.
"""

from __future__ import annotations

from extender.quantity import QuantityError, parse_quantity

__all__ = [
    "QuantityError",
    "cpu_millicores",
    "format_bytes",
    "format_cores",
    "memory_bytes",
    "parse_quantity",
]


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
