"""The echoes of the operator's own writes left undecoded (kube.unread.OwnWritesRule): only a
MODIFIED line whose one resourceVersion a write of this process was answered with, and once."""

from __future__ import annotations

import json
from typing import Any

from fabriccap.kube.unread import MAX_OWN_VERSIONS, OwnWritesRule, UnreadEvent


def fcap(version: str, name: str = "efa-p5") -> dict[str, Any]:
    return {
        "apiVersion": "fabriccap.dev/v1alpha1",
        "kind": "FabricCapability",
        "metadata": {"name": name, "resourceVersion": version, "labels": {"fabriccap.dev/fabric": "efa"}},
        "status": {"nodes": 2, "workloads": {"requestingFabric": {"pods": 3, "workloads": 1}}},
    }


def line(event_type: str, body: dict[str, Any]) -> bytes:
    return json.dumps({"type": event_type, "object": body}, separators=(",", ":")).encode() + b"\n"


def test_the_echo_of_a_write_is_not_decoded_once() -> None:
    rule = OwnWritesRule()
    rule.remember(fcap("120"))
    assert rule.unread(line("MODIFIED", fcap("119"))) is None  # someone else's change
    assert rule.unread(line("MODIFIED", fcap("120"))) == UnreadEvent("120", "own")
    assert rule.unread(line("MODIFIED", fcap("120"))) is None  # only once: a replay is decoded
    assert len(rule) == 0


def test_a_listing_and_odd_lines_are_always_decoded() -> None:
    rule = OwnWritesRule()
    for version in ("130", "131", "132"):
        rule.remember(fcap(version))
    # A listing's objects arrive as ADDED: one left out would count as deleted.
    assert rule.unread(line("ADDED", fcap("130"))) is None
    # Two version keys (one in the status, say): which is the object's cannot be told undecoded.
    doubled = {**fcap("131"), "status": {"resourceVersion": "131"}}
    assert rule.unread(line("MODIFIED", doubled)) is None
    assert rule.unread(line("DELETED", fcap("132"))) is None
    assert rule.unread(line("MODIFIED", fcap("132"))[:-20]) is None  # cut short
    rule.listing_began()
    assert len(rule) == 0 and rule.unread(line("MODIFIED", fcap("132"))) is None


def test_answers_without_a_numeric_version_are_not_remembered_and_memory_is_bounded() -> None:
    rule = OwnWritesRule()
    rule.remember({"metadata": {"resourceVersion": "opaque-1"}})
    rule.remember({"kind": "Status"})
    assert len(rule) == 0
    for version in range(MAX_OWN_VERSIONS + 5):
        rule.remember(fcap(str(version)))
    assert len(rule) == MAX_OWN_VERSIONS
    assert rule.unread(line("MODIFIED", fcap("0"))) is None  # the oldest went first
    assert rule.unread(line("MODIFIED", fcap(str(MAX_OWN_VERSIONS + 4)))) is not None
