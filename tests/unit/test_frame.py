"""The kopf frame: started again when kopf's main loop fails, ended by a clean return."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from fabriccap.controller import frame


async def test_a_failed_frame_is_started_again_with_a_backoff(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """kopf ends ``kopf.operator`` when one watcher fails (a 404 once the CRD is deleted)."""
    outcomes: list[BaseException | None] = [RuntimeError("404 page not found"), RuntimeError("404 again"), None]
    calls: list[dict[str, Any]] = []
    delays: list[float] = []

    async def operator(**kwargs: Any) -> None:
        calls.append(kwargs)
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    async def sleep(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr("fabriccap.controller.frame.kopf.operator", operator)
    monkeypatch.setattr(frame, "asyncio", SimpleNamespace(sleep=sleep))
    state: Any = object()
    await frame._frame(state, "http://127.0.0.1:1/healthz", None)
    assert len(calls) == 3
    assert all(call["liveness_endpoint"] == "http://127.0.0.1:1/healthz" for call in calls)
    assert all(call["standalone"] is True and call["clusterwide"] is True for call in calls)
    assert delays == [1.0, 2.0]
    assert [record.getMessage() for record in caplog.records if record.name == frame.__name__] == [
        "the kopf frame failed (404 page not found); starting it again in 1s",
        "the kopf frame failed (404 again); starting it again in 2s",
    ]


async def test_the_backoff_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    failures = 8
    delays: list[float] = []

    async def operator(**_: Any) -> None:
        if len(delays) < failures:
            raise RuntimeError("down")

    async def sleep(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr("fabriccap.controller.frame.kopf.operator", operator)
    monkeypatch.setattr(frame, "asyncio", SimpleNamespace(sleep=sleep))
    state: Any = object()
    await frame._frame(state, None, None)
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


async def test_kopf_is_named_so_it_never_asks_the_password_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the image the UID (65532) has no /etc/passwd entry: getpass.getuser() raises
    KeyError, and a kopf left to name itself fails at every start (seen on real nodes)."""
    calls: list[dict[str, Any]] = []

    async def operator(**kwargs: Any) -> None:
        calls.append(kwargs)

    monkeypatch.setattr("fabriccap.controller.frame.kopf.operator", operator)
    state: Any = object()
    await frame._frame(state, None, None)
    assert [call["identity"] for call in calls] == [frame.KOPF_IDENTITY]
