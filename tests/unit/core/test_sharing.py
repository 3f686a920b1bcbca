"""The facts keep one copy of what many of them repeat (core.sharing): the strings and tuples
of each decoded body are its own, so equal values must come out as one object, not many."""

from __future__ import annotations

import json
from typing import Any

from fabriccap.core.facts import FactsExtractor
from fabriccap.core.sharing import MAX_SHARED_JSON_DEPTH, MAX_SHARED_JSON_TEXT, Shared, shared_json
from fabriccap_devtools.world import node, owner_reference, plugin_pods, workload_pod
from support.configs import build_config

EXTRACTOR = FactsExtractor(build_config({"workloads": {"enabled": True}}))


def decoded(body: dict[str, Any]) -> dict[str, Any]:
    """As a watch line is: every string of the body its own object."""
    result: dict[str, Any] = json.loads(json.dumps(body))
    return result


def test_a_shared_table_gives_back_the_first_equal_value() -> None:
    shared: Shared[tuple[str, int]] = Shared()
    first = ("nvidia.com/gpu", int("8"))
    again = ("nvidia.com/gpu", int("8"))
    assert first is not again
    assert shared(first) is first
    assert shared(again) is first


def test_a_shared_table_past_its_limit_starts_again_and_stays_within_it() -> None:
    shared: Shared[str] = Shared(limit=3)
    for number in range(10):
        assert shared(f"value-{number}") == f"value-{number}"
        assert len(shared) <= 3


def test_nodes_of_one_pool_share_their_pool_quantities_and_instance_type() -> None:
    first = EXTRACTOR.node(decoded(node("a", pool="p5")))
    second = EXTRACTOR.node(decoded(node("b", pool="p5")))
    assert first.pool is second.pool
    assert first.capacity is second.capacity
    assert first.allocatable is second.allocatable
    assert first.instance_type is second.instance_type


def test_pods_bound_to_a_node_hold_the_nodes_own_name() -> None:
    node_facts = EXTRACTOR.node(decoded(node("ip-10-0-0-1", pool="p5")))
    (plugin_body,) = plugin_pods(["ip-10-0-0-1"])
    plugin = EXTRACTOR.pod(decoded(plugin_body))
    workload = EXTRACTOR.workload_pod(decoded(workload_pod("ip-10-0-0-1", "train-0", efa=32)))
    assert plugin is not None and workload is not None
    assert plugin.node_name is node_facts.name
    assert workload.node_name is node_facts.name


def test_the_pods_of_one_job_share_their_owner_namespace_and_requests() -> None:
    job = owner_reference("Job", "batch/v1", "train")
    first = EXTRACTOR.workload_pod(decoded(workload_pod("n1", "train-0", efa=32, owner=job)))
    second = EXTRACTOR.workload_pod(decoded(workload_pod("n2", "train-1", efa=32, owner=job)))
    assert first is not None and second is not None
    assert first.owner == second.owner
    assert all(mine is theirs for mine, theirs in zip(first.owner, second.owner, strict=True))
    assert first.namespace is second.namespace
    assert first.requests is second.requests
    assert first.name is not second.name  # what is the pod's own stays its own


def test_a_kept_status_shares_its_keys_and_short_values_with_every_other() -> None:
    def status(message: str) -> dict[str, Any]:
        return decoded(
            {"conditions": [{"type": "Ready", "status": "True", "reason": "AllNodesAdvertise", "message": message}]}
        )

    long_message = "x" * (MAX_SHARED_JSON_TEXT + 1)
    first, second = shared_json(status(long_message)), shared_json(status(long_message))
    assert first == second == status(long_message)
    (mine,), (theirs,) = first["conditions"], second["conditions"]
    assert all(a is b for a, b in zip(mine, theirs, strict=True))  # the keys
    assert mine["reason"] is theirs["reason"]
    assert mine["message"] is not theirs["message"]  # a long text stays each object's own


def test_a_status_nested_past_the_depth_limit_is_kept_as_it_is() -> None:
    deep: dict[str, Any] = {"leaf": "v"}
    for _ in range(MAX_SHARED_JSON_DEPTH + 5):
        deep = {"next": deep}
    assert shared_json(deep) == deep
