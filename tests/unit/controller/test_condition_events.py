"""Events on a FabricCapability: one per condition whose status or reason changed (SPEC "Events")."""

from __future__ import annotations

from typing import Any

from fabriccap.controller.events import EventSpec, condition_events


def status(*conditions: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "conditions": [
            {"type": kind, "status": state, "reason": reason, "message": f"{reason} here"}
            for kind, state, reason in conditions
        ]
    }


def test_a_reason_change_with_the_same_status_is_an_event() -> None:
    before = status(("Ready", "False", "PartialRollout"), ("Homogeneous", "False", "PartialRollout"))
    after = status(("Ready", "False", "MixedCounts"), ("Homogeneous", "False", "MixedCounts"))
    assert condition_events(before, after) == [
        EventSpec("Warning", "MixedCounts", "Ready=False: MixedCounts here"),
        EventSpec("Warning", "MixedCounts", "Homogeneous=False: MixedCounts here"),
    ]


def test_nothing_changed_is_no_event() -> None:
    same = status(("Ready", "False", "AdvertiserConflict"), ("Stalled", "False", "NotStalled"))
    assert condition_events(same, same) == []


def test_a_recovery_is_normal_for_every_condition_and_stalled_recovers_to_false() -> None:
    before = status(
        ("Ready", "False", "MixedSources"),
        ("Advertised", "False", "PartiallyAdvertised"),
        ("Stalled", "True", "HeterogeneousInstanceTypes"),
    )
    after = status(
        ("Ready", "True", "UniformCapability"),
        ("Advertised", "True", "AllNodesAdvertise"),
        ("Stalled", "False", "NotStalled"),
    )
    assert [(event.type, event.reason) for event in condition_events(before, after)] == [
        ("Normal", "UniformCapability"),
        ("Normal", "AllNodesAdvertise"),
        ("Normal", "NotStalled"),
    ]


def test_going_stalled_or_unknown_is_a_warning() -> None:
    before = status(("Stalled", "False", "NotStalled"), ("MatchesInstanceType", "True", "MatchesInstanceMaximum"))
    after = status(
        ("Stalled", "True", "InstanceTypeUnsupported"), ("MatchesInstanceType", "Unknown", "UnknownInstanceType")
    )
    assert [(event.type, event.message) for event in condition_events(before, after)] == [
        ("Warning", "Stalled=True: InstanceTypeUnsupported here"),
        ("Warning", "MatchesInstanceType=Unknown: UnknownInstanceType here"),
    ]


def test_a_new_object_tells_its_story_with_ready_alone() -> None:
    after = status(("DevicePluginReady", "True", "PluginReadyOnAllNodes"), ("Ready", "False", "AdvertiserConflict"))
    assert condition_events(None, after) == [
        EventSpec("Warning", "AdvertiserConflict", "Ready=False: AdvertiserConflict here")
    ]
