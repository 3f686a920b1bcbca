"""One key object per held object: the index's maps refer to the key the table holds, and a
fresh LIST crosses off those keys rather than collect its own (issue 26, memory)."""

from __future__ import annotations

from fabriccap.core.config import default_config
from fabriccap.core.facts import FactsExtractor, WorkloadPodFacts
from fabriccap.core.index import NODE_FACTS, WORKLOAD_POD_FACTS, FactIndex
from fabriccap_devtools.world import node, owner_reference, workload_pod


def gpu_pod(name: str, node_name: str = "n1") -> WorkloadPodFacts:
    body = workload_pod(node_name, name, owner=owner_reference("Job", "batch/v1", "train"))
    facts = FactsExtractor(default_config()).workload_pod(body)
    assert facts is not None
    return facts


def held_key(index: FactIndex, wanted: tuple[str, str]) -> tuple[str, str]:
    (key,) = [key for key in index.workload_pods if key == wanted]
    return key


def test_a_new_pods_maps_hold_the_very_key_its_table_holds() -> None:
    index = FactIndex()
    facts = gpu_pod("a")
    index.put(WORKLOAD_POD_FACTS, facts)
    key = held_key(index, (facts.namespace, "a"))
    (versioned,) = index.workload_versions
    (on_node,) = index.node_workload_pods["n1"]
    (of_owner,) = index.owner_pods[facts.owner.key]
    # Equal copies would pass ==; 200,000 GPU pods held two copies each (11 MiB).
    assert versioned is key
    assert on_node is key
    assert of_owner is key


def test_a_listing_crosses_off_the_keys_held_and_forgets_the_rest() -> None:
    index = FactIndex()
    extractor = FactsExtractor(default_config())
    for name in ("n1", "n2", "n3"):
        facts = extractor.node(node(name, efa=32))
        index.put(NODE_FACTS, facts)
    held = {key: key for key in index.nodes}
    unlisted = index.unlisted(NODE_FACTS, None)
    assert all(key is held[key] for key in unlisted)  # the held keys, not copies
    unlisted.discard("n1")
    unlisted.discard("n3")
    unlisted.discard("new")  # listed, not held before: nothing to cross off
    index.forget(NODE_FACTS, unlisted)
    assert sorted(index.nodes) == ["n1", "n3"]


def test_a_namespaced_listing_leaves_other_namespaces_alone() -> None:
    index = FactIndex()
    index.put(WORKLOAD_POD_FACTS, gpu_pod("a"))
    namespace = next(iter(index.workload_pods))[0]
    assert set(index.unlisted(WORKLOAD_POD_FACTS, "elsewhere")) == set()
    assert set(index.unlisted(WORKLOAD_POD_FACTS, namespace)) == {(namespace, "a")}
