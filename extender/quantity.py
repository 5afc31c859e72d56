"""Kubernetes resource quantities, as the API serialises them.

The grammar is k8s.io/apimachinery ``resource.Quantity``: a signed decimal number
followed by a binary suffix (Ki, Mi, Gi, Ti, Pi, Ei), a decimal suffix
(n, u, m, "", k, M, G, T, P, E) or a decimal exponent (e3, E-2).
metrics-server reports CPU in nanocores ("123456789n") and memory in Ki.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from .exceptions import QuantityError

__all__ = ["QuantityError", "cpu_millis", "memory_bytes", "parse_quantity"]

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


def parse_quantity(value: str | int | float) -> Decimal:
    """Return the quantity's value in base units (cores, bytes, pods) as a Decimal."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"not a quantity: {value!r}")
    match = _PATTERN.match(value.strip())
    if match is None:
        raise QuantityError(f"not a quantity: {value!r}")
    try:
        number = Decimal(match["num"])
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid numbers
        raise QuantityError(f"not a quantity: {value!r}") from exc
    if match["exp"]:
        return number * (Decimal(10) ** int(match["exp"][1:]))
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


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
        return number if suffix == "m" else number * _FAST_FACTOR[suffix] * 1000
    millis = parse_quantity(value) * 1000
    return int(millis.to_integral_value(rounding="ROUND_CEILING"))


def memory_bytes(value: str | int | float) -> int:
    """Memory (or any count) in whole units, rounded up."""
    if type(value) is str and (fast := _FAST.match(value)):
        number, suffix = int(fast[1]), fast[2]
        return -(-number // 1000) if suffix == "m" else number * _FAST_FACTOR[suffix]
    return int(parse_quantity(value).to_integral_value(rounding="ROUND_CEILING"))
