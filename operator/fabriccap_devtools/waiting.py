"""Waiting for something to become true, with a deadline that names what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeoutError(AssertionError):
    """The awaited condition did not hold in time (an AssertionError, so tests read as failures)."""


def wait_until(
    probe: Callable[[], T | None],
    description: str,
    timeout: float = 20.0,
    interval: float = 0.1,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> T:
    """Call ``probe`` until it returns something truthy, and return that; bounded by ``timeout``."""
    deadline = clock() + timeout
    while True:
        value = probe()
        if value:
            return value
        if clock() >= deadline:
            raise WaitTimeoutError(f"timed out after {timeout:.0f}s waiting for {description}")
        sleep(interval)
