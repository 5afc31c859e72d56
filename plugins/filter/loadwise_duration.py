"""A Go duration as kube-scheduler reads one, for the one check of loadwise_*_http_timeout.

``loadwise_go_duration_seconds``: the seconds of a Go duration string, as Go's
``time.ParseDuration`` reads it (go/src/time/format.go: an optional sign, then one or more
decimal numbers each with a unit ns, us, µs/μs, ms, s, m or h, e.g. ``300ms``, ``1.5h``,
``1m30s``; ``0`` alone too), or None when Go would refuse it. kube-scheduler's extender
``httpTimeout`` is a ``metav1.Duration``, decoded from YAML by ``time.ParseDuration``
(k8s.io/apimachinery pkg/apis/meta/v1/duration.go).
"""

from __future__ import annotations

import re
from typing import Any

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # micro sign
    "\u03bcs": 1e-6,  # Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)([^0-9.]+)")


def loadwise_go_duration_seconds(value: Any) -> float | None:
    """Seconds of ``value`` read as a Go duration; None when it is not one."""
    text = str(value).strip() if value is not None else ""
    sign = 1.0
    if text[:1] in ("+", "-"):
        sign, text = (-1.0 if text[0] == "-" else 1.0), text[1:]
    if text == "0":
        return 0.0
    if not text:
        return None
    total, pos = 0.0, 0
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None:
            return None
        number, unit = match.groups()
        if number in ("", ".") or unit not in _UNITS:
            return None
        total += float(number) * _UNITS[unit]
        pos = match.end()
    return sign * total


class FilterModule:
    """Ansible's entry point for filter plugins."""

    def filters(self) -> dict[str, Any]:
        return {"loadwise_go_duration_seconds": loadwise_go_duration_seconds}
