"""Transition times move only with a condition's status; volatile fields never force a write."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any

from fabriccap.core.stamping import RFC3339, stamp_status, strip_volatile
from support.builders import evaluate_bodies, healthy_pool, node

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z"


def _status(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    (only,) = evaluate_bodies(bodies).capabilities
    return only.status.to_json()


def _times(status: dict[str, Any]) -> dict[str, str]:
    return {condition["type"]: condition["lastTransitionTime"] for condition in status["conditions"]}


def test_first_stamp_sets_generation_and_now() -> None:
    stamped = stamp_status(_status(healthy_pool()), None, generation=3, now=T0)
    assert stamped["observedGeneration"] == 3
    assert set(_times(stamped).values()) == {T0}
    assert {condition["observedGeneration"] for condition in stamped["conditions"]} == {3}


def test_stamp_does_not_mutate_its_input() -> None:
    status = _status(healthy_pool())
    before = copy.deepcopy(status)
    stamp_status(status, None, generation=1, now=T0)
    assert status == before


def test_transition_time_kept_when_status_unchanged() -> None:
    previous = stamp_status(_status(healthy_pool()), None, generation=1, now=T0)
    # Same statuses; messages change (a third node) but no condition status does.
    again = stamp_status(_status(healthy_pool(nodes=3)), previous, generation=2, now=T1)
    assert again["conditions"][0]["message"] != previous["conditions"][0]["message"]
    assert set(_times(again).values()) == {T0}
    assert again["observedGeneration"] == 2
    assert {condition["observedGeneration"] for condition in again["conditions"]} == {2}


def test_transition_time_moves_only_for_conditions_whose_status_changed() -> None:
    previous = stamp_status(_status(healthy_pool()), None, generation=1, now=T0)
    # n2 stops advertising: Advertised, Homogeneous, MatchesInstanceType and Ready flip;
    # DevicePluginReady and Stalled do not.
    bodies = [body for body in healthy_pool() if body["metadata"]["name"] != "n2"] + [node("n2", efa=0)]
    changed = stamp_status(_status(bodies), previous, generation=1, now=T1)
    assert _times(changed) == {
        "DevicePluginReady": T0,
        "Advertised": T1,
        "Homogeneous": T1,
        "MatchesInstanceType": T1,
        "Ready": T1,
        "Stalled": T0,
    }


def test_previous_condition_without_time_gets_now() -> None:
    status = _status(healthy_pool())
    previous = {"conditions": [{"type": "Ready", "status": "True"}, "junk"]}
    stamped = stamp_status(status, previous, generation=1, now=T1)
    assert _times(stamped)["Ready"] == T1


def test_strip_volatile() -> None:
    status = _status(healthy_pool())
    first = stamp_status(status, None, generation=1, now=T0)
    second = stamp_status(status, None, generation=7, now=T1)
    assert first != second
    assert strip_volatile(first) == strip_volatile(second)
    stripped = strip_volatile(first)
    assert "observedGeneration" not in stripped
    for condition in stripped["conditions"]:
        assert set(condition) == {"type", "status", "reason", "message"}
    assert stripped["uniformCount"] == 32
    assert strip_volatile(None) == {}
    assert strip_volatile({}) == {}


def test_strip_volatile_sees_real_changes() -> None:
    first = stamp_status(_status(healthy_pool()), None, generation=1, now=T0)
    second = stamp_status(_status(healthy_pool(count=16)), None, generation=1, now=T0)
    assert strip_volatile(first) != strip_volatile(second)


def test_times_are_rfc3339_utc_seconds() -> None:
    moment = datetime(2025, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    assert moment.strftime(RFC3339) == "2025-01-02T03:04:05Z"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", datetime.now(UTC).strftime(RFC3339))
