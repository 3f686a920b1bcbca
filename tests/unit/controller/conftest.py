"""Every test of the publisher also checks the index its steps walk: whenever a step looks for
what fell due, each object that time alone may bring due (``ObjectState.may_fall_due``) is
among ``Publisher._timed``. A timer set where the index is not told would wait for the resync."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from fabriccap.controller.publisher import Publisher

WALKS = ("_fire_due", "_next_deadline", "_settle_absent")


def _walked_after_check(walk: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(walk)
    def checked(publisher: Publisher, *args: Any) -> Any:
        unwalked = [
            name for name, state in publisher.objects.items() if state.may_fall_due() and name not in publisher._timed
        ]
        assert not unwalked, f"objects with something due that {walk.__name__} would not look at: {unwalked}"
        return walk(publisher, *args)

    return checked


@pytest.fixture(autouse=True)
def every_timed_object_is_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    for walk in WALKS:
        monkeypatch.setattr(Publisher, walk, _walked_after_check(getattr(Publisher, walk)))
