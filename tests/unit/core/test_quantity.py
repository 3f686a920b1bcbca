"""parse_quantity: Kubernetes quantity rules, absent = 0, fractions rounded down."""

from __future__ import annotations

from typing import Any

import pytest

from fabriccap.core.quantity import QUANTITY_TEXTS_KEPT, _text_quantity, parse_quantity


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


def test_the_texts_kept_parsed_are_bounded_and_a_bad_one_raises_every_time() -> None:
    """Hostile pods can name any number of distinct quantities: what is kept parsed stays
    bounded, and a text that is not a quantity is never kept as an answer."""
    for count in range(QUANTITY_TEXTS_KEPT + 500):
        assert parse_quantity(f"{count}k") == count * 1000
    assert _text_quantity.cache_info().currsize <= QUANTITY_TEXTS_KEPT
    for _ in range(2):
        with pytest.raises(ValueError, match="is not a quantity"):
            parse_quantity("12 apples")
