from decimal import Decimal

import pytest

from loadwise.extender.quantity import QuantityError, cpu_millis, memory_bytes, parse_quantity


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("1", 1000),
        ("250m", 250),
        ("0.5", 500),
        ("1500000000n", 1500),
        ("123456789n", 124),
        ("2500u", 3),
        (".5", 500),
        ("1e3", 1_000_000),
        ("100m", 100),
        (2, 2000),
        (0.25, 250),
    ],
)
def test_cpu_millis(text, millis):
    assert cpu_millis(text) == millis


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Ki", 1024),
        ("128974848", 128974848),
        ("129e6", 129_000_000),
        ("129M", 129_000_000),
        ("123Mi", 123 * 2**20),
        ("8Gi", 8 * 2**30),
        ("1.5Gi", 1610612736),
        ("16221172Ki", 16221172 * 1024),
        ("1E", 10**18),
        ("1Ei", 2**60),
        ("12E6", 12_000_000),
    ],
)
def test_memory_bytes(text, value):
    assert memory_bytes(text) == value


def test_negative_and_decimal_exponent():
    assert parse_quantity("-1.5k") == Decimal("-1500")
    assert parse_quantity("5e-3") == Decimal("0.005")


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "10Kb", "Mi", "1 Gi", True, None, [1]])
def test_rejects_garbage_with_the_value_in_the_message(bad):
    with pytest.raises(QuantityError, match="not a quantity"):
        parse_quantity(bad)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        # 1e400 cores is 1e403 millicores: far past the int64 the scheduler counts in
        ("1e400", '"1e400" is out of range'),
        (float("inf"), "inf is not a finite quantity"),
        (float("nan"), "nan is not a finite quantity"),
        ("1e999999999", '"1e999999999" is not a finite quantity'),
        ("1e" + "9" * 5000, "is not a finite quantity"),
        ("9" * 5000, "is out of range"),
        ("-5", '"-5" is negative'),
        ("-1m", '"-1m" is negative'),
        ("9223372036854776", "is out of range"),  # 2^63/1000 cores, rounded up
        ("999999999999999E", "is out of range"),  # through the fast path's shape
    ],
)
def test_cpu_amounts_must_be_finite_non_negative_int64(value, message):
    with pytest.raises(QuantityError, match=message.replace("^", r"\^")):
        cpu_millis(value)


def test_memory_amounts_must_fit_int64_bytes():
    assert memory_bytes("7E") == 7 * 10**18
    assert memory_bytes("9223372036854775807") == 2**63 - 1
    for bad in ("8Ei", "10E", "1e19"):
        with pytest.raises(QuantityError, match="out of range"):
            memory_bytes(bad)
    with pytest.raises(QuantityError, match="negative"):
        memory_bytes("-1Ki")


def test_error_messages_cut_long_values():
    with pytest.raises(QuantityError) as info:
        cpu_millis("x" * 100_000)
    assert len(str(info.value)) < 80 and str(info.value).startswith('"xxx')


@pytest.mark.parametrize(
    "text", ["4", "250m", "16221172Ki", "8Gi", "110", "1500m", "3k", "2M", "7P", "999999999999999"]
)
def test_fast_path_agrees_with_the_exact_parser(text):
    from decimal import ROUND_CEILING

    exact = parse_quantity(text)
    assert cpu_millis(text) == int((exact * 1000).to_integral_value(rounding=ROUND_CEILING))
    assert memory_bytes(text) == int(exact.to_integral_value(rounding=ROUND_CEILING))
