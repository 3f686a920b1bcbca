"""The largest status there can be: bounded by construction, far below what the API server
takes (reliability round 3, S2; issue 27 item 11)."""

from __future__ import annotations

import json
from typing import Any

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
from fabriccap_devtools.world import owner_reference, workload_pod
from support.builders import EFA_DS_SELECTOR, daemon_set, facts_of, node, pod

# The API server refuses a request body over 3 MiB (413), and etcd an object over 1.5 MiB.
API_SERVER_REQUEST_LIMIT = 3 * 1024 * 1024
# One character that JSON (ensure_ascii, as the operator sends it) writes as 12 bytes:
# a character outside the Basic Multilingual Plane, escaped as a surrogate pair.
WIDEST = "\U0001f600"
NODES = 400


def wide(length: int, tag: int | str = "") -> str:
    """``length`` characters, each as wide as JSON makes one, after ``tag`` (kept distinct)."""
    text = str(tag)
    return text + WIDEST * (length - len(text))


def worst_case_bodies() -> list[dict[str, Any]]:
    """One pool with hostile text at every bound: node names, instance types, the pool value,
    DaemonSet names, namespaces, pod names and owners, a different count on every node."""
    pool = wide(300, "p")
    namespace = wide(63, "")
    bodies: list[dict[str, Any]] = []
    for index in range(NODES):
        name = wide(300, index)
        # Every node its own count and instance type; every fourth one with no plugin pod (a gap).
        bodies.append(node(name, pool=pool, efa=index + 1, instance_type=wide(300, index)))
        if index % 4:
            bodies.append(pod(name, name=wide(300, f"plugin{index}")))
        bodies.append(
            workload_pod(
                name,
                wide(300, f"pod{index}"),
                namespace=namespace,
                owner={**owner_reference("Job", "batch/v1", "x"), "name": wide(300, index)},
            )
        )
    bodies += [daemon_set(), *(daemon_set(wide(300, f"ds{index}"), labels=EFA_DS_SELECTOR) for index in range(50))]
    return bodies


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
