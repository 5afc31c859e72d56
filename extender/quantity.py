"""Kubernetes resource quantities, as the API serialises them.

The grammar is k8s.io/apimachinery ``resource.Quantity``: a signed decimal number
followed by a binary suffix (Ki, Mi, Gi, Ti, Pi, Ei), a decimal suffix
(n, u, m, "", k, M, G, T, P, E) or a decimal exponent (e3, E-2).
metrics-server reports CPU in nanocores ("123456789n") and memory in Ki.

``cpu_millis`` and ``memory_bytes`` read an *amount* of a resource: it must be
finite, not negative, and fit the int64 the scheduler itself counts in
(k8s.io/kubernetes pkg/scheduler/framework ``Resource``: ``MilliCPU`` and ``Memory``
are int64), so that a hostile ``"1e400"`` is refused here instead of turning into a
400-digit integer that overflows a float in a policy later.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from .exceptions import QuantityError

__all__ = ["INT64_MAX", "QuantityError", "cpu_millis", "memory_bytes", "parse_quantity", "shown"]

INT64_MAX = 2**63 - 1

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
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
_PATTERN = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


def shown(value: object) -> str:
    """The value as an error message quotes it: JSON-like, cut to 40 characters
    (a hostile request can send a megabyte-long string)."""
    text = f'"{value}"' if isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_quantity(value: str | int | float) -> Decimal:
    """Return the quantity's value in base units (cores, bytes, pods) as a Decimal."""
    if isinstance(value, bool):
        raise QuantityError(f"{shown(value)} is not a quantity")
    if isinstance(value, float) and not math.isfinite(value):
        raise QuantityError(f"{shown(value)} is not a finite quantity")
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"{shown(value)} is not a quantity")
    match = _PATTERN.match(value.strip())
    if match is None:
        raise QuantityError(f"{shown(value)} is not a quantity")
    try:
        number = Decimal(match["num"])
        if match["exp"]:
            return number * (Decimal(10) ** int(match["exp"][1:]))
    except (ArithmeticError, ValueError):
        # decimal.Overflow for "1e999999999", ValueError for an exponent of
        # thousands of digits (int() refuses more than 4300 digits by default)
        raise QuantityError(f"{shown(value)} is not a finite quantity") from None
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def _amount(value: str | int | float, scale: int, unit: str) -> int:
    """``value`` times ``scale``, rounded up, as a non-negative int64."""
    exact = parse_quantity(value) * scale
    if exact < 0:
        raise QuantityError(f"{shown(value)} is negative")
    if exact > INT64_MAX:
        raise QuantityError(f"{shown(value)} is out of range (more than 2^63-1 {unit})")
    return int(exact.to_integral_value(rounding="ROUND_CEILING"))


# Fast path for what the API almost always sends ("4", "250m", "16221172Ki"): plain
# integers with a suffix need no Decimal. Anything else takes the exact path.
_FAST = re.compile(r"^(\d{1,15})(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_FAST_FACTOR: dict[str | None, int] = {
    None: 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    **{k: int(v) for k, v in _BINARY.items()},
}


def cpu_millis(value: str | int | float) -> int:
    """CPU in millicores, rounded up like the API server does for sub-milli values."""
    if type(value) is str and (fast := _FAST.match(value)):
        number, suffix = int(fast[1]), fast[2]
        millis = number if suffix == "m" else number * _FAST_FACTOR[suffix] * 1000
        if millis <= INT64_MAX:
            return millis
    return _amount(value, 1000, "millicores")


def memory_bytes(value: str | int | float) -> int:
    """Memory (or any count) in whole units, rounded up."""
    if type(value) is str and (fast := _FAST.match(value)):
        number, suffix = int(fast[1]), fast[2]
        amount = -(-number // 1000) if suffix == "m" else number * _FAST_FACTOR[suffix]
        if amount <= INT64_MAX:
            return amount
    return _amount(value, 1, "units")
