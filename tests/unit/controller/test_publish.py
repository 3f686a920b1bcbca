"""Publisher pieces that need no cluster: merge patches, version order, the health probe."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.objects import Published
from fabriccap.controller.publisher import Publisher
from fabriccap.controller.store import FactStore
from fabriccap.controller.writes import status_patch
from fabriccap.kube.client import KubeClient
from fabriccap.kube.credentials import Credentials
from support.configs import build_config
from support.fakeapi import merge_patch


def test_a_status_patch_nulls_the_fields_that_went_away() -> None:
    previous = {"nodes": 2, "uniformCount": 32, "recommendation": {"env": []}, "conditions": []}
    new = {"nodes": 3, "conditions": [{"type": "Ready"}]}
    assert status_patch(previous, new) == {
        "status": {"uniformCount": None, "recommendation": None, "nodes": 3, "conditions": [{"type": "Ready"}]}
    }


# JSON as a status holds it: no null member (a merge patch says "delete" with null), lists of anything.
# The members are drawn from non-null scalars, not filtered: filtering None out of every leaf
# discarded so many statuses that Hypothesis's health check failed about one run in fifteen.
_members = st.booleans() | st.integers() | st.text(max_size=4)
_json: st.SearchStrategy[Any] = st.recursive(
    _members,
    lambda inner: st.lists(inner | st.none(), max_size=3) | st.dictionaries(st.sampled_from("abcd"), inner, max_size=4),
    max_leaves=12,
)
_statuses = st.dictionaries(st.sampled_from(["nodes", "workloads", "conditions", "pool"]), _json, max_size=4)


@given(previous=_statuses, new=_statuses)
def test_a_status_patch_applied_to_the_status_before_gives_the_new_one(
    previous: dict[str, Any], new: dict[str, Any]
) -> None:
    patch = status_patch(previous, new)["status"]
    assert merge_patch(previous, patch) == new
    # Only what moved is sent: no member of the patch is already what it says.
    assert all(key not in previous or previous[key] != new.get(key) for key in patch)


def test_a_status_patch_sends_only_the_counts_that_moved() -> None:
    workloads = {"requestingFabric": {"pods": 3, "workloads": 1}, "withoutFabric": {"pods": 0, "workloads": 0}}
    previous = {"nodes": 2, "workloads": workloads, "conditions": [{"type": "Ready", "status": "True"}]}
    new = {**previous, "workloads": {**workloads, "requestingFabric": {"pods": 4, "workloads": 1}}}
    assert status_patch(previous, new) == {"status": {"workloads": {"requestingFabric": {"pods": 4}}}}
    assert status_patch(previous, previous) == {"status": {}}


def _published(version: str) -> Published:
    return Published(name="x", generation=1, status={}, labels={}, annotations={}, resource_version=version)


def test_watch_events_older_than_our_write_are_not_news() -> None:
    assert _published("12").is_newer_than(_published("9")) is True
    assert _published("9").is_newer_than(_published("12")) is False
    assert _published("12").is_newer_than(_published("12")) is False
    # Opaque versions: any difference counts as newer.
    assert _published("b").is_newer_than(_published("a")) is True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_health_fails_only_when_the_loop_is_stuck() -> None:
    clock = Clock()
    publisher = Publisher(
        config=build_config({"resyncSeconds": 300}),
        store=FactStore(),
        client=KubeClient(Credentials(server="http://127.0.0.1:9")),
        metrics=OperatorMetrics(),
        clock=clock,
    )
    assert publisher.health()["secondsSinceEvaluation"] is None  # still listing: healthy
    publisher.last_round = clock.now
    clock.now += 600
    assert publisher.health()["secondsSinceEvaluation"] == 600
    clock.now += 61
    with pytest.raises(RuntimeError, match="no evaluation for 661s"):
        publisher.health()


def test_health_fails_when_the_initial_listing_never_finishes() -> None:
    clock = Clock()
    publisher = Publisher(
        config=build_config({"startupTimeoutSeconds": 60}),
        store=FactStore(),
        client=KubeClient(Credentials(server="http://127.0.0.1:9")),
        metrics=OperatorMetrics(),
        clock=clock,
    )
    clock.now += 59
    assert publisher.health()["listed"] is False  # still within the start-up timeout
    clock.now += 2
    with pytest.raises(
        RuntimeError, match=r"the initial listing has not finished after 61s \(startupTimeoutSeconds 60\)"
    ):
        publisher.health()
    publisher.store.listed.set()
    assert publisher.health()["listed"] is True
