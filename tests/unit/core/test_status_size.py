"""The largest status there can be: bounded by construction, far below what the API server
takes (reliability round 3, S2; issue 27 item 11)."""

from __future__ import annotations

import json

from fabriccap.core.api import (
    MAX_CONDITION_MESSAGE,
    MAX_COUNT_BUCKETS,
    MAX_DAEMON_SETS,
    MAX_GAP_NODES,
    MAX_INSTANCE_TYPES,
    MAX_OFFENDERS,
    MAX_STATUS_BYTES,
    Condition,
    CountBucket,
    FabricCapabilityStatus,
)
from fabriccap.core.config import build_config
from fabriccap.core.evaluate import evaluate
from support.builders import facts_of
from support.hostile import worst_case_bodies

# The API server refuses a request body over 3 MiB (413), and etcd an object over 1.5 MiB.
API_SERVER_REQUEST_LIMIT = 3 * 1024 * 1024


def test_the_worst_case_status_is_far_below_what_the_api_server_takes() -> None:
    config = build_config({})
    (capability,) = evaluate(config, facts_of(worst_case_bodies(), config)).capabilities
    status = capability.status.to_json()
    size = len(json.dumps({"status": status}))
    print(f"worst-case status: {size:,} bytes (bound {MAX_STATUS_BYTES:,})")
    assert size <= MAX_STATUS_BYTES <= API_SERVER_REQUEST_LIMIT / 3
    assert len(status["counts"]) == MAX_COUNT_BUCKETS
    assert len(status["instanceTypes"]) == MAX_INSTANCE_TYPES
    assert len(status["devicePlugin"]["daemonSets"]) == MAX_DAEMON_SETS
    assert len(status["gap"]["nodes"]) == MAX_GAP_NODES and status["gap"]["truncated"]
    assert len(status["workloads"]["offenders"]) == MAX_OFFENDERS
    assert all(len(condition["message"]) <= MAX_CONDITION_MESSAGE for condition in status["conditions"])


def test_the_status_model_bounds_whatever_it_is_given() -> None:
    """Bounded by construction: the model cuts what any evaluation could hand it."""
    config = build_config({})
    (capability,) = evaluate(config, facts_of(worst_case_bodies()[:30], config)).capabilities
    built = capability.status.model_dump(by_alias=True)
    built["counts"] = [CountBucket(count=index, nodes=1) for index in range(10_000)]
    built["gap"]["nodes"] = [f"n{index}" for index in range(10_000)]
    built["devicePlugin"]["daemonSets"] = ["ns/" + "d" * 10_000] * 1000
    built["conditions"] = [Condition(type="Ready", status="False", reason="MixedCounts", message="m" * 1_000_000)]
    built["pool"]["value"] = "v" * 1_000_000
    status = FabricCapabilityStatus.model_validate(built).to_json()
    assert len(json.dumps(status)) <= MAX_STATUS_BYTES
    assert len(status["counts"]) == MAX_COUNT_BUCKETS
    assert len(status["conditions"][0]["message"]) == MAX_CONDITION_MESSAGE
