"""The largest status, and the summary that stands in for a refused one, as the real API server
takes them: within the CRD's schema (its maxItems and maxLength included), nothing pruned, and
far below the request limit (reliability round 3, S2; issue 27 item 11)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from fabriccap.controller.publisher import status_patch
from fabriccap.core.api import too_large_status
from fabriccap.core.config import build_config
from fabriccap.core.evaluate import evaluate
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from harness import FCAP_PATH, SyncKube
from support.builders import facts_of
from support.hostile import worst_case_bodies

TIME = "2026-01-01T00:00:00Z"


def stamped(status: dict[str, Any]) -> dict[str, Any]:
    """What the publisher sends: every condition with its transition time and generation."""
    conditions = [
        {**condition, "lastTransitionTime": TIME, "observedGeneration": 1} for condition in status["conditions"]
    ]
    return {**status, "observedGeneration": 1, "conditions": conditions}


@pytest.fixture
def fcap(kube: SyncKube) -> Iterator[str]:
    name = f"efa-bounds-{uuid.uuid4().hex[:8]}"
    kube.create(
        FCAP_PATH, {"apiVersion": "fabriccap.dev/v1alpha1", "kind": "FabricCapability", "metadata": {"name": name}}
    )
    yield name
    kube.delete(FABRIC_CAPABILITIES.item(name))


def test_the_worst_case_status_and_its_summary_are_accepted_whole(kube: SyncKube, fcap: str) -> None:
    config = build_config({})
    (capability,) = evaluate(config, facts_of(worst_case_bodies(), config)).capabilities
    previous: dict[str, Any] = {}
    for status in (capability.status, too_large_status(capability.status, "413 Request entity too large")):
        sent = stamped(status.to_json())
        assert len(json.dumps({"status": sent})) < 1024 * 1024
        written = kube.patch(FABRIC_CAPABILITIES.status(fcap), status_patch(previous, sent))
        # The schema pruned nothing and refused nothing: what was sent is what is stored.
        assert written["status"] == sent, "the API server changed the status"
        previous = sent
