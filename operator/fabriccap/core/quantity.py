"""Kubernetes quantities (``32``, ``1k``, ``1500m``): as whole device counts, or exactly.

Device counts round a fraction down (``parse_quantity``); a DRA device's capacity is compared
exactly, as ``resource.Quantity`` compares in Go (``exact_quantity``).
"""

from __future__ import annotations

import functools
import math
import re
from decimal import ROUND_FLOOR, Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

# Kubernetes resource.Quantity suffixes (apimachinery/pkg/api/resource).
_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIXES = {
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
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(\d+(\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$",
    re.ASCII,  # Kubernetes quantities are ASCII; \d alone would accept other scripts' digits
)
# The same grammar for a JSON Schema (ECMA-262 has no named groups here, and \d is ASCII there).
QUANTITY_PATTERN = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
# An exponent beyond this is larger than any device count or capacity; refused rather than
# allocating a huge integer.
MAX_EXPONENT = 30


def shown_value(value: Any) -> str:
    # A 5,000-digit quantity must not become a 5,000-character error line.
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def parse_quantity(value: Any) -> int:
    """Parse a Kubernetes quantity into a whole count, rounding a fraction down.

    ``"32"`` -> 32, ``"1k"`` -> 1000, ``"1500m"`` -> 1, ``None`` -> 0. Device-plugin
    resources are integers in practice; rounding down keeps a malformed fraction from ever
    over-stating what a node can schedule. Raises ValueError on anything that is not a
    quantity.
    """
    if value is None:
        return 0
    if isinstance(value, bool):
        raise ValueError(f"{shown_value(value)} is not a quantity")
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float):
        if not math.isfinite(value):  # YAML .inf/.nan, JSON Infinity/NaN
            raise ValueError(f"{shown_value(value)} is not a quantity")
        return max(int(Decimal(repr(value)).to_integral_value(ROUND_FLOOR)), 0)
    if not isinstance(value, str):
        raise ValueError(f"{shown_value(value)} is not a quantity")
    return _text_quantity(value)


# Distinct quantity texts kept parsed: a cluster's nodes and pods repeat a handful ("8", "32",
# "64Gi"), and a parse takes 1.2 us (0.2 us kept): the 100,000-node start spent 2.2 s parsing
# (docs/performance.md). A text that is not a quantity raises, and is not kept.
QUANTITY_TEXTS_KEPT = 4096


@functools.lru_cache(maxsize=QUANTITY_TEXTS_KEPT)
def _text_quantity(value: str) -> int:
    match = _QUANTITY.match(value.strip())
    if not match:
        raise ValueError(f"{shown_value(value)} is not a quantity")
    try:
        number = Decimal(match["number"])
    except InvalidOperation:  # pragma: no cover - the regex admits only valid decimals
        raise ValueError(f"{shown_value(value)} is not a quantity") from None
    suffix = match["suffix"] or ""
    if suffix in _BINARY_SUFFIXES:
        scaled = number * _BINARY_SUFFIXES[suffix]
    elif suffix in _DECIMAL_SUFFIXES:
        scaled = number * _DECIMAL_SUFFIXES[suffix]
    else:
        exponent = int(suffix[1:])
        if exponent > MAX_EXPONENT:
            raise ValueError(f"{shown_value(value)} is out of range")
        scaled = number.scaleb(exponent)
    if scaled <= 0:
        return 0
    return int(scaled.to_integral_value(ROUND_FLOOR))


def exact_quantity(text: str) -> Fraction:
    """A quantity's exact value (``"1.5Gi"`` -> 1610612736, ``"500m"`` -> 1/2), negative values
    included, as a DRA device's capacity holds it. Raises ValueError on anything that is not a
    quantity, or whose exponent is out of range either way."""
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"{shown_value(text)} is not a quantity")
    number = Fraction(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY_SUFFIXES:
        return number * _BINARY_SUFFIXES[suffix]
    if suffix in _DECIMAL_SUFFIXES:
        return number * Fraction(_DECIMAL_SUFFIXES[suffix])
    exponent = int(suffix[1:])
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"{shown_value(text)} is out of range")
    return number * Fraction(10) ** exponent
