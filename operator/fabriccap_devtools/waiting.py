"""Waiting for something to become true, with a deadline that names what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from fabriccap.kube.errors import KubeError

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
        try:
            value = probe()
        except KubeError as error:
            # 429 is the API server's "not yet" (a CRD's storage still initialising just after
            # it is created): asked again at the next interval, like any other falsy answer.
            if error.status != 429:
                raise
            value = None
        if value:
            return value
        if clock() >= deadline:
            raise WaitTimeoutError(f"timed out after {timeout:.0f}s waiting for {description}")
        sleep(interval)
