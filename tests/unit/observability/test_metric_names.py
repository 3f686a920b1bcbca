"""Every metric the alerts and the dashboard query exists in the operator's /metrics, and the
pool families' exposition for one pool is exactly what docs/reference/metrics.md promises.

A misspelt metric or label value in PromQL is not an error: the query returns nothing, the
alert never fires, the panel stays empty. So the names are checked against the real exposition.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fabriccap.controller.metrics import EXPOSITION_CHUNK_POOLS, OperatorMetrics
from fabriccap.core.config import build_config
from fabriccap.core.evaluate import PoolCapability
from fabriccap.core.shard import Shard
from fabriccap.observability import alerts, dashboard
from fabriccap_devtools.world import ec2_node_class, node_pool
from support.builders import daemon_set, evaluate_bodies, healthy_pool, node, plugin_pods

REPO_ROOT = Path(__file__).resolve().parents[3]
MONITORING = REPO_ROOT / "monitoring"

METRIC = re.compile(r"\b(fabriccap_[a-z0-9_]+)\b(\{[^}]*\})?")
# Only literal equality matchers: `=~"$pool"` and `%q` (template placeholders) are not checked.
EQUALITY_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"$%]*)"')


def _mixed_pool() -> PoolCapability:
    """mx (a p5 pool): two nodes at 32 EFA, one at 0 with a Ready plugin pod (mixed rollout and a gap)."""
    names = ["mixed-1", "mixed-2", "mixed-3"]
    bodies = [
        daemon_set(),
        node("mixed-1", pool="mx", efa=32),
        node("mixed-2", pool="mx", efa=32),
        node("mixed-3", pool="mx", efa=0),
        *plugin_pods(names),
    ]
    (capability,) = evaluate_bodies(bodies).capabilities
    return capability


def _feed(metrics: OperatorMetrics, capability: PoolCapability) -> None:
    # As the publisher does: the status as written to (and read back from) the cluster.
    metrics.pools.set_pool(capability.name, capability.fabric, capability.pool.value, capability.status.to_json())


def _samples(exposition: bytes) -> list[tuple[str, dict[str, str], float]]:
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(exposition.decode())
        for sample in family.samples
    ]


@pytest.fixture(scope="module")
def exposed() -> list[tuple[str, dict[str, str], float]]:
    """The exposition with a Ready pool and a mixed one, and some operator activity."""
    metrics = OperatorMetrics()
    # Read with transport on: its status carries workloads.transport, which only then is exposed.
    transport_on = build_config({"transport": {"enabled": True}})
    (healthy,) = evaluate_bodies(healthy_pool(pool="p5-good", prefix="good-"), transport_on).capabilities
    _feed(metrics, healthy)
    _feed(metrics, _mixed_pool())
    metrics.evaluations.inc(2)
    metrics.evaluation_duration.observe(0.003)
    metrics.watch_events.labels(kind="node", result="applied").inc()
    metrics.status_writes.labels(result="updated").inc()
    metrics.status_write_wait.labels(lane="urgent").observe(0.02)
    metrics.last_evaluation.set(1_700_000_000)
    metrics.watch_last_event.labels(kind="node").set(1_700_000_000)
    metrics.unschedulable_fabric_pods.labels(fabric="efa").set(0)
    return _samples(metrics.exposition())


def _rule_texts() -> Iterator[tuple[str, str]]:
    for rule in alerts.rules_file()["groups"][0]["rules"]:
        yield f"alert {rule['alert']} expr", rule["expr"]
        for key, text in rule["annotations"].items():
            yield f"alert {rule['alert']} {key}", text


def _dashboard_texts() -> Iterator[tuple[str, str]]:
    board = dashboard.dashboard()
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            yield f"variable {variable['name']}", variable["query"]["query"]


def _references(texts: Iterator[tuple[str, str]]) -> list[tuple[str, str, dict[str, str]]]:
    """(where, metric name, literal equality matchers) for every fabriccap_* metric named."""
    found = []
    for where, text in texts:
        for match in METRIC.finditer(text):
            matchers = dict(EQUALITY_MATCHER.findall(match.group(2) or ""))
            found.append((where, match.group(1), matchers))
    return found


RULE_REFERENCES = _references(_rule_texts())
DASHBOARD_REFERENCES = _references(_dashboard_texts())


def test_the_rules_and_the_dashboard_do_reference_metrics() -> None:
    # Guards the extraction itself: an empty list would make the checks below vacuous.
    rule_names = {name for _, name, _ in RULE_REFERENCES}
    assert {"fabriccap_pool_condition", "fabriccap_pool_gap_nodes", "fabriccap_pool_ready"} <= rule_names
    assert "fabriccap_last_evaluation_timestamp_seconds" in rule_names
    board_names = {name for _, name, _ in DASHBOARD_REFERENCES}
    assert "fabriccap_evaluation_duration_seconds_bucket" in board_names
    assert len(board_names) >= 12


@pytest.mark.parametrize(
    ("where", "metric", "matchers"),
    RULE_REFERENCES + DASHBOARD_REFERENCES,
    ids=[f"{where}:{metric}" for where, metric, _ in RULE_REFERENCES + DASHBOARD_REFERENCES],
)
def test_referenced_metric_exists_in_the_exposition(
    where: str, metric: str, matchers: dict[str, str], exposed: list[tuple[str, dict[str, str], float]]
) -> None:
    series = [labels for name, labels, _ in exposed if name == metric]
    assert series, f"{where} uses {metric}, which /metrics does not expose"
    # `job`/`instance` are added by Prometheus at scrape time, not by the operator.
    own = {key: value for key, value in matchers.items() if key not in ("job", "instance")}
    assert any(all(labels.get(key) == value for key, value in own.items()) for labels in series), (
        f"{where} selects {metric}{own}; no exposed series matches"
    )


# --- the exposition of one pool -------------------------------------------------------------

# Labels sort alphabetically in the text format, as prometheus_client writes them.
GOLDEN_MIXED_POOL = """\
fabriccap_pool_nodes{fabric="efa",name="efa-mx",pool="mx"} 3.0
fabriccap_pool_cordoned_nodes{fabric="efa",name="efa-mx",pool="mx"} 0.0
fabriccap_pool_unready_nodes{fabric="efa",name="efa-mx",pool="mx"} 0.0
fabriccap_pool_advertising_nodes{fabric="efa",name="efa-mx",pool="mx"} 2.0
fabriccap_pool_nodes_by_allocatable{allocatable="32",fabric="efa",name="efa-mx",pool="mx"} 2.0
fabriccap_pool_nodes_by_allocatable{allocatable="0",fabric="efa",name="efa-mx",pool="mx"} 1.0
fabriccap_pool_gap_nodes{fabric="efa",kind="plugin_ready_not_advertised",name="efa-mx",pool="mx"} 1.0
fabriccap_pool_gap_nodes{fabric="efa",kind="unhealthy",name="efa-mx",pool="mx"} 0.0
fabriccap_pool_gap_nodes{fabric="efa",kind="advertised_without_plugin",name="efa-mx",pool="mx"} 0.0
fabriccap_pool_gap_nodes{fabric="efa",kind="launched_without_fabric",name="efa-mx",pool="mx"} 0.0
fabriccap_pool_gap_nodes{fabric="efa",kind="conflicting_advertisers",name="efa-mx",pool="mx"} 0.0
fabriccap_pool_condition{condition="DevicePluginReady",fabric="efa",name="efa-mx",pool="mx",status="true"} 1.0
fabriccap_pool_condition{condition="DevicePluginReady",fabric="efa",name="efa-mx",pool="mx",status="false"} 0.0
fabriccap_pool_condition{condition="DevicePluginReady",fabric="efa",name="efa-mx",pool="mx",status="unknown"} 0.0
fabriccap_pool_condition{condition="Advertised",fabric="efa",name="efa-mx",pool="mx",status="true"} 0.0
fabriccap_pool_condition{condition="Advertised",fabric="efa",name="efa-mx",pool="mx",status="false"} 1.0
fabriccap_pool_condition{condition="Advertised",fabric="efa",name="efa-mx",pool="mx",status="unknown"} 0.0
fabriccap_pool_condition{condition="Homogeneous",fabric="efa",name="efa-mx",pool="mx",status="true"} 0.0
fabriccap_pool_condition{condition="Homogeneous",fabric="efa",name="efa-mx",pool="mx",status="false"} 1.0
fabriccap_pool_condition{condition="Homogeneous",fabric="efa",name="efa-mx",pool="mx",status="unknown"} 0.0
fabriccap_pool_condition{condition="MatchesInstanceType",fabric="efa",name="efa-mx",pool="mx",status="true"} 0.0
fabriccap_pool_condition{condition="MatchesInstanceType",fabric="efa",name="efa-mx",pool="mx",status="false"} 1.0
fabriccap_pool_condition{condition="MatchesInstanceType",fabric="efa",name="efa-mx",pool="mx",status="unknown"} 0.0
fabriccap_pool_condition{condition="Ready",fabric="efa",name="efa-mx",pool="mx",status="true"} 0.0
fabriccap_pool_condition{condition="Ready",fabric="efa",name="efa-mx",pool="mx",status="false"} 1.0
fabriccap_pool_condition{condition="Ready",fabric="efa",name="efa-mx",pool="mx",status="unknown"} 0.0
fabriccap_pool_condition{condition="Stalled",fabric="efa",name="efa-mx",pool="mx",status="true"} 0.0
fabriccap_pool_condition{condition="Stalled",fabric="efa",name="efa-mx",pool="mx",status="false"} 1.0
fabriccap_pool_condition{condition="Stalled",fabric="efa",name="efa-mx",pool="mx",status="unknown"} 0.0
fabriccap_pool_workload_pods{fabric="efa",name="efa-mx",pool="mx",use="requesting_fabric"} 0.0
fabriccap_pool_workload_pods{fabric="efa",name="efa-mx",pool="mx",use="without_fabric"} 0.0
fabriccap_pool_workload_pods{fabric="efa",name="efa-mx",pool="mx",use="intent_without_request"} 0.0
fabriccap_pool_ready{fabric="efa",name="efa-mx",pool="mx"} 0.0
"""


def _pool_lines(exposition: bytes) -> str:
    return "".join(line + "\n" for line in exposition.decode().splitlines() if line.startswith("fabriccap_pool_"))


def test_exposition_of_a_mixed_pool_is_golden() -> None:
    metrics = OperatorMetrics()
    _feed(metrics, _mixed_pool())
    assert _pool_lines(metrics.exposition()) == GOLDEN_MIXED_POOL
    # uniform_count is absent while counts differ: `fabriccap_pool_uniform_allocatable` is the
    # fail-closed value, and a stale number there would invite wiring a mixed pool.
    assert "fabriccap_pool_uniform_allocatable{" not in metrics.exposition().decode()


def test_condition_family_has_one_for_the_current_status_and_zero_for_the_others() -> None:
    metrics = OperatorMetrics()
    capability = _mixed_pool()
    _feed(metrics, capability)
    current = {condition.type: condition.status.lower() for condition in capability.status.conditions}
    by_condition: dict[str, dict[str, float]] = {}
    for name, labels, value in _samples(metrics.exposition()):
        if name == "fabriccap_pool_condition":
            by_condition.setdefault(labels["condition"], {})[labels["status"]] = value
    assert (
        set(by_condition)
        == set(current)
        == {
            "DevicePluginReady",
            "Advertised",
            "Homogeneous",
            "MatchesInstanceType",
            "Ready",
            "Stalled",
        }
    )
    for condition, values in by_condition.items():
        assert values == {
            status: 1.0 if status == current[condition] else 0.0 for status in ("true", "false", "unknown")
        }


def test_a_pools_series_appear_with_set_pool_and_disappear_with_remove_pool() -> None:
    metrics = OperatorMetrics()
    (healthy,) = evaluate_bodies(healthy_pool(count=32, pool="p5-good", prefix="good-")).capabilities
    mixed = _mixed_pool()
    assert _pool_lines(metrics.exposition()) == ""

    _feed(metrics, healthy)
    _feed(metrics, mixed)
    names = {
        labels.get("name") for name, labels, _ in _samples(metrics.exposition()) if name.startswith("fabriccap_pool_")
    }
    assert names == {healthy.name, mixed.name}
    samples = _samples(metrics.exposition())
    assert (
        "fabriccap_pool_uniform_allocatable",
        {"name": healthy.name, "fabric": "efa", "pool": "p5-good"},
        32.0,
    ) in samples
    assert ("fabriccap_pool_ready", {"name": healthy.name, "fabric": "efa", "pool": "p5-good"}, 1.0) in samples

    metrics.pools.remove_pool(mixed.name)
    remaining = _pool_lines(metrics.exposition())
    assert mixed.name not in remaining
    assert f'name="{healthy.name}"' in remaining

    metrics.pools.remove_pool(healthy.name)
    assert _pool_lines(metrics.exposition()) == ""
    # Operator families stay: they describe the process, not a pool.
    assert "fabriccap_build_info{" in metrics.exposition().decode()


def test_a_pools_status_is_read_into_samples_when_set_and_not_kept() -> None:
    """Statuses are not held by the metrics (8.7 KB each at the benchmark's pools): what a
    scrape shows was read when the status was set, and pools with the same series share one
    layout."""
    metrics = OperatorMetrics()
    (first,) = evaluate_bodies(healthy_pool(count=32, pool="p5-a", prefix="a-")).capabilities
    (second,) = evaluate_bodies(healthy_pool(count=32, pool="p5-b", prefix="b-")).capabilities
    status = first.status.to_json()
    metrics.pools.set_pool(first.name, first.fabric, first.pool.value, status)
    _feed(metrics, second)
    before = _pool_lines(metrics.exposition())
    status["nodes"], status["uniformCount"] = 999, 1  # the caller's dict, changed afterwards
    assert _pool_lines(metrics.exposition()) == before
    assert f'fabriccap_pool_uniform_allocatable{{fabric="efa",name="{first.name}",pool="p5-a"}} 32.0' in before
    assert metrics.pools.pools[first.name].layout is metrics.pools.pools[second.name].layout


def test_a_malformed_status_costs_that_pool_not_the_scrape() -> None:
    metrics = OperatorMetrics()
    _feed(metrics, _mixed_pool())
    metrics.pools.set_pool("efa-edited", "efa", "edited", {"nodes": "many", "conditions": [{"status": "True"}]})
    samples = _samples(metrics.exposition())
    series = {(name, labels["name"]) for name, labels, _ in samples if name.startswith("fabriccap_pool_")}
    assert ("fabriccap_pool_nodes", "efa-mx") in series
    assert ("fabriccap_pool_nodes", "efa-edited") not in series  # "many" is not a number
    assert ("fabriccap_pool_condition", "efa-edited") not in series  # a condition without a type
    assert ("fabriccap_pool_ready", {"name": "efa-edited", "fabric": "efa", "pool": "edited"}, 0.0) in samples


# --- the shipped dashboard --------------------------------------------------------------------


def _datasources(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        if "datasource" in node:
            yield node["datasource"]
        for value in node.values():
            yield from _datasources(value)
    elif isinstance(node, list):
        for value in node:
            yield from _datasources(value)


def test_dashboard_uses_the_datasource_variable_and_a_fixed_uid() -> None:
    board = json.loads((MONITORING / dashboard.DASHBOARD_FILE).read_text())
    assert board["uid"] == "fabriccap"
    variables = {variable["name"]: variable for variable in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    references = list(_datasources(board["panels"])) + list(_datasources(list(variables.values())))
    assert references
    assert all(ref == {"type": "prometheus", "uid": "${datasource}"} for ref in references), references
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))


def test_dashboard_configmap_carries_the_same_json_and_the_sidecar_label() -> None:
    configmap = yaml.safe_load((MONITORING / dashboard.CONFIGMAP_FILE).read_text())
    assert configmap["kind"] == "ConfigMap"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    (content,) = configmap["data"].values()
    assert json.loads(content) == json.loads((MONITORING / dashboard.DASHBOARD_FILE).read_text())


def test_a_nodepool_pool_exports_its_launchable_maxima() -> None:
    family = [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p5"]}]
    (capability,) = evaluate_bodies([daemon_set(), node_pool("gpu", family), ec2_node_class()]).capabilities
    metrics = OperatorMetrics()
    metrics.pools.set_pool(capability.name, capability.fabric, capability.pool.value, capability.status.to_json())
    lines = [line for line in _pool_lines(metrics.exposition()).splitlines() if "launchable_max" in line]
    assert lines == [
        'fabriccap_pool_launchable_max{count="32",fabric="efa",name="efa-gpu",pool="gpu"} 1.0',
        'fabriccap_pool_launchable_max{count="1",fabric="efa",name="efa-gpu",pool="gpu"} 1.0',
    ]


def test_the_pool_families_rendered_in_chunks_are_the_whole_render_byte_for_byte() -> None:
    metrics = OperatorMetrics()
    healthy, mixed = (
        evaluate_bodies(healthy_pool(pool="p5-good", prefix="good-")).capabilities[0].status.to_json(),
        _mixed_pool().status.to_json(),
    )
    pools = 2 * EXPOSITION_CHUNK_POOLS + 7  # three chunks, the last a short one
    # Label values as users may name pools: quotes, backslashes, a newline, other scripts.
    hostile = ['a"b', "back\\slash", "two\nlines", "üñî-プール", ""]
    for index in range(pools):
        pool = f"p{index:04d}{hostile[index % len(hostile)]}"
        metrics.pools.set_pool(f"efa-{pool}", "efa", pool, mixed if index % 3 else healthy)
    chunked = b"".join(metrics.pools.exposition())
    assert chunked == generate_latest(metrics.pool_registry)
    metrics.pools.fresh = lambda: False  # stale data: fabriccap_pool_ready reads 0 in both
    assert b"".join(metrics.pools.exposition()) == generate_latest(metrics.pool_registry)
    # Each family once, every pool in it: the chunks' own headers were left out.
    families = list(text_string_to_metric_families(chunked.decode()))
    assert len(families) == len({family.name for family in families})
    ready = next(family for family in families if family.name == "fabriccap_pool_ready")
    assert len(ready.samples) == pools
    # No pools: the families' headers alone, as before.
    assert b"".join(OperatorMetrics().pools.exposition()) == generate_latest(OperatorMetrics().pool_registry)


def test_the_pool_families_and_the_others_have_no_name_in_common() -> None:
    metrics = OperatorMetrics()
    metrics.pools.set_pool("efa-p", "efa", "p", _mixed_pool().status.to_json())
    pool_names = {family.name for family in metrics.pool_registry.collect()}
    other_names = {family.name for family in metrics.registry.collect()}
    assert pool_names and other_names
    assert not pool_names & other_names


def test_only_the_shard_that_counts_unpooled_nodes_exports_them() -> None:
    """Shard 0 counts the nodes with no pool label; the others exported a constant 0, so a
    panel of the sum read 0 with confidence while shard 0 was down (review 64d F4)."""
    exported = {
        str(shard): "fabriccap_unpooled_nodes " in OperatorMetrics(shard).exposition().decode()
        for shard in (Shard(), Shard(index=0, count=2), Shard(index=1, count=2))
    }
    assert exported == {"unsharded": True, "shard 0 of 2": True, "shard 1 of 2": False}
