"""parse_quantity: Kubernetes quantity rules, absent = 0, fractions rounded down."""

from __future__ import annotations

from typing import Any

import pytest

from fabriccap.core.quantity import parse_quantity


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("32", 32),
        ("0", 0),
        ("1", 1),
        ("1k", 1000),
        ("1Ki", 1024),
        ("2Mi", 2 * 2**20),
        ("1M", 1_000_000),
        ("1G", 10**9),
        ("1500m", 1),
        ("999m", 0),
        ("2.9", 2),
        ("0.5", 0),
        ("0.5Ki", 512),
        ("1.5k", 1500),
        ("1e3", 1000),
        ("1E3", 1000),
        ("2e0", 2),
        ("15e-1", 1),
        ("1E", 10**18),  # E alone is the exa suffix, not an exponent
        ("+4", 4),
        (".5k", 500),
        ("32000000000n", 32),
        ("32000000u", 32),
        (None, 0),
        (0, 0),
        (32, 32),
        (2.9, 2),
        (4.0, 4),
        ("-1", 0),
        ("-2.5", 0),
        ("-1k", 0),
        (-3, 0),
        (-0.5, 0),
    ],
)
def test_parse_quantity(value: Any, expected: int) -> None:
    assert parse_quantity(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "",
        "abc",
        "32x",
        "1KB",
        "1ki",
        "k",
        "1.2.3",
        "1e",
        "1e99",  # refused: bigger than any device count, and costly to materialise
        "0x20",
        "١٢",  # non-ASCII digits are not quantity digits
        True,
        False,
        [32],
        {"value": 32},
        float("inf"),
        float("-inf"),
        float("nan"),
    ],
)
def test_parse_quantity_rejects_garbage(value: Any) -> None:
    with pytest.raises(ValueError, match=r"quantity|out of range"):
        parse_quantity(value)
