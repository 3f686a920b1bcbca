"""The kopf frame: login and signals only; a failure of kopf stops the operator with one line."""

from __future__ import annotations

from typing import Any

import pytest

from fabriccap.controller import frame


async def test_a_failed_frame_stops_the_operator_with_kopfs_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """kopf cancels every task it did not start before it re-raises: the process is not whole
    any more, so the failure is not retried in place."""
    calls: list[dict[str, Any]] = []

    async def operator(**kwargs: Any) -> None:
        calls.append(kwargs)
        raise RuntimeError("Ran out of valid credentials")

    monkeypatch.setattr("fabriccap.controller.frame.kopf.operator", operator)
    state: Any = object()
    with pytest.raises(frame.FrameFailedError) as failed:
        await frame._frame(state, None)
    assert str(failed.value) == "the kopf frame failed (Ran out of valid credentials); stopping the operator"
    assert len(calls) == 1
    assert "liveness_endpoint" not in calls[0], "/healthz is the operator's own server (dual-stack)"
    assert calls[0]["standalone"] is True and calls[0]["clusterwide"] is True


async def test_kopf_watches_nothing() -> None:
    """A kopf watcher ends kopf when it answers 404 (the CRD deleted, kopf#1077): the project's
    own objects are watched by informers.PublishedWatch, and kopf does not scan CRDs either."""
    registry = frame.build_registry()
    assert registry._watching.get_all_handlers() == []
    assert registry._changing.get_all_handlers() == []
    assert registry._spawning.get_all_handlers() == []
    assert [handler.id.rsplit(".", 1)[-1] for handler in registry._activities.get_all_handlers()] == ["login"]
    assert frame.settings().scanning.disabled is True


async def test_kopf_is_named_so_it_never_asks_the_password_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the image the UID (65532) has no /etc/passwd entry: getpass.getuser() raises
    KeyError, and a kopf left to name itself fails at every start (seen on real nodes)."""
    calls: list[dict[str, Any]] = []

    async def operator(**kwargs: Any) -> None:
        calls.append(kwargs)

    monkeypatch.setattr("fabriccap.controller.frame.kopf.operator", operator)
    state: Any = object()
    await frame._frame(state, None)
    assert [call["identity"] for call in calls] == [frame.KOPF_IDENTITY]
