from __future__ import annotations

from decimal import Decimal

import pytest

from loadwise.tui.quantity import (
    QuantityError,
    cpu_millicores,
    format_bytes,
    memory_bytes,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "millicores"),
    [
        ("1", 1000),
        ("250m", 250),
        ("1.5", 1500),
        ("250000000n", 250),
        ("1500u", 1.5),
        ("0.1", 100),
        ("2k", 2_000_000),
        ("1e-3", 1),
        (".5", 500),
    ],
)
def test_cpu(text: str, millicores: float) -> None:
    assert cpu_millicores(text) == pytest.approx(millicores)


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("128974848", 128974848),
        ("129e6", 129_000_000),
        ("129M", 129_000_000),
        ("123Mi", 123 * 2**20),
        ("1Gi", 2**30),
        ("3901488Ki", 3901488 * 1024),
        ("1k", 1000),
        ("1E", 10**18),
        ("1E3", 1000),
        ("1Ei", 2**60),
        ("0.5Ki", 512),
        ("1m", 1),
    ],
)
def test_memory(text: str, count: int) -> None:
    assert memory_bytes(text) == count


def test_exact_arithmetic() -> None:
    assert parse_quantity("0.1") + parse_quantity("100m") == Decimal("0.2")


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5Qi", "Mi", "1 Gi"])
def test_rejects_garbage(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)
    assert cpu_millicores(text) == 0 and memory_bytes(text) == 0


def test_format_bytes() -> None:
    assert format_bytes(512 * 2**20) == "512Mi"
    assert format_bytes(1.5 * 2**30) == "1.50Gi"
