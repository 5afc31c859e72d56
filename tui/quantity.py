"""Kubernetes resource quantities, parsed exactly and formatted for narrow table cells.

The API server hands out quantities in whatever form a user wrote them (`1.5`, `1500m`,
`250000000n` for CPU; `512Mi`, `1G`, `129e6` for memory). metrics-server in particular
reports CPU in nanocores and memory in `Ki`. Parsing goes through `Decimal` so that
`0.1` plus `100m` is exactly `200m`, then rounds once at the edge: CPU to millicores
(float, because usage is fractional), memory to whole bytes.

The grammar itself lives in `extender.quantity` (one parser for the whole
distribution); this module adds the TUI's lenient conversions and cell formatting.

The lenient conversions also refuse what no well-formed object holds, before it can cost
anything: a text longer than `MAX_TEXT` (the grammar's regular expression backtracks
quadratically on a long run of digits: 8,000 of them take seconds), and an amount beyond
the int64 the API server and the scheduler count in (`1e400` would turn into an
infinite float that no bar or percentage can be drawn from, and turning `1e999999`
into an int alone takes a minute).
"""

from __future__ import annotations

from decimal import Decimal

from loadwise.extender.quantity import INT64_MAX, QuantityError, parse_quantity

__all__ = [
    "MAX_TEXT",
    "QuantityError",
    "cpu_millicores",
    "format_bytes",
    "format_cores",
    "memory_bytes",
    "parse_quantity",
]


MAX_TEXT = 64
"""The longest quantity text read. The longest a server writes is an int64 count of
nano-units with a sign and a suffix ("-9223372036854775807n", 21 characters); the rest
of the room is for a decimal point and an exponent written by hand."""

_LIMIT = Decimal(INT64_MAX)


def _amount(value: object, scale: int) -> Decimal | None:
    """`value` times `scale` if it is a quantity whose magnitude fits an int64, else None."""
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return None
    if not isinstance(value, str | int | float):
        return None
    try:
        amount = parse_quantity(value) * scale
    except (QuantityError, ArithmeticError):
        return None
    return amount if abs(amount) <= _LIMIT else None


def cpu_millicores(text: object) -> float:
    """CPU quantity in millicores; missing, malformed or out-of-range values count as zero."""
    amount = _amount(text, 1000)
    return 0.0 if amount is None else float(amount)


def memory_bytes(text: object) -> int:
    """Memory quantity in bytes, rounded up like the API server does; bad values are zero."""
    amount = _amount(text, 1)
    return 0 if amount is None else int(amount.to_integral_value(rounding="ROUND_CEILING"))


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
