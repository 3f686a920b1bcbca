"""The registry of condition reasons (core.api.REASONS) against what the evaluation writes.

The user reference (docs/reference/fabriccapability.md) is generated from the registry, so a
reason the evaluation writes but the registry lacks would be undocumented, and a registered
reason no pool can reach would document nothing.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import fabriccap
from fabriccap.cli import commands as cli
from fabriccap.core.api import (
    CONDITIONS,
    REASONS,
    ConditionStatus,
    ConditionType,
    Reason,
    reason_meaning,
    too_large_status,
    write_refused_status,
)
from fabriccap.core.evaluate import data_unavailable
from fabriccap_devtools.world import ec2_node_class, node_pool
from support.builders import (
    daemon_set,
    dranet_daemon_set,
    dranet_pods,
    efa_device_class,
    evaluate_bodies,
    healthy_pool,
    node,
    plugin_pods,
    pod,
    resource_slice,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
Triple = tuple[str, str, str]

# Every example snapshot with the config it is meant for.
EXAMPLE_RUNS = [
    ["-f", str(EXAMPLES / "eks-cluster.json")],
    ["-f", str(EXAMPLES / "eks-trainium-hyperpod.yaml")],
    ["--config", str(EXAMPLES / "config-aks.yaml"), "-f", str(EXAMPLES / "aks-ndv5-rdma.yaml")],
    ["--config", str(EXAMPLES / "config-aks-shared-ib.yaml"), "-f", str(EXAMPLES / "aks-ndv5-rdma.yaml")],
]


def _node_pool(name: str, key: str, operator: str, *values: str) -> dict[str, Any]:
    return node_pool(name, [{"key": key, "operator": operator, "values": list(values)}])


_TYPE = "node.kubernetes.io/instance-type"
_ALLOWLIST = daemon_set()
_ALLOWLIST["spec"]["template"]["spec"]["nodeSelector"] = {_TYPE: "p5.48xlarge"}

# Small pools for the outcomes no example shows.
WORLDS: dict[str, list[dict[str, Any]]] = {
    "all-cordoned": [daemon_set(), node("n1", cordoned=True), pod("n1")],
    "above-maximum": healthy_pool(count=64),
    "plugin-gap": [daemon_set(), node("n1"), node("n2"), *plugin_pods(["n1"]), pod("n2", ready=False)],
    # Karpenter NodePools without nodes, one per Launchable outcome.
    "nodepools": [
        daemon_set(),
        ec2_node_class(),  # a NodePool whose EC2NodeClass is missing launches nothing
        _node_pool("uniform", _TYPE, "In", "p5.48xlarge"),
        _node_pool("mixed", "karpenter.k8s.aws/instance-family", "In", "p5"),
        _node_pool("unknown-type", _TYPE, "In", "p6e-gb200.36xlarge"),
        _node_pool("unevaluated", "karpenter.k8s.aws/instance-local-nvme", "Gt", "100"),
    ],
    "nodepool-without-plugin": [ec2_node_class(), _node_pool("lonely", _TYPE, "In", "p5.48xlarge")],
    "nodepool-excluded-types": [
        _ALLOWLIST,
        ec2_node_class(),
        _node_pool("excluded", _TYPE, "In", "p5.48xlarge", "p5e.48xlarge"),
    ],
    # A NodePool with a node of a type it no longer admits: its types carry no EFA.
    "nodepool-without-fabric": [
        daemon_set(),
        ec2_node_class(),
        _node_pool("trn1-small", _TYPE, "In", "trn1.2xlarge"),
        node("k1", pool="trn1-small", pool_key="karpenter.sh/nodepool", instance_type="trn1.32xlarge"),
        pod("k1"),
    ],
    "mixed-sources": [
        efa_device_class(),
        daemon_set(),
        dranet_daemon_set(),
        node("n1"),
        *plugin_pods(["n1"]),
        node("n2", efa=None),
        resource_slice("n2"),
        *dranet_pods(["n2"]),
    ],
    "advertiser-conflict": [
        efa_device_class(),
        daemon_set(),
        dranet_daemon_set(),
        node("n1"),
        resource_slice("n1"),
        *plugin_pods(["n1"]),
        *dranet_pods(["n1"]),
    ],
}


def triples_of(statuses: list[dict[str, Any]]) -> set[Triple]:
    return {(c["type"], c["status"], c["reason"]) for status in statuses for c in status["conditions"]}


def example_statuses(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    statuses = []
    for run in EXAMPLE_RUNS:
        assert cli.main(["evaluate", *run, "-o", "json"]) == 0
        statuses += [item["status"] for item in json.loads(capsys.readouterr().out)["items"]]
    return statuses


def world_statuses() -> list[dict[str, Any]]:
    statuses = [
        capability.status.to_json() for bodies in WORLDS.values() for capability in evaluate_bodies(bodies).capabilities
    ]
    # What the publisher writes instead of a status the API server refused as too large, or
    # refused as invalid while it would drop a published Ready.
    (healthy,) = evaluate_bodies(healthy_pool()).capabilities
    return [
        *statuses,
        too_large_status(healthy.status, "413 Request entity too large").to_json(),
        write_refused_status(healthy.status, "422 denied by policy").to_json(),
    ]


def failed_closed_statuses() -> list[dict[str, Any]]:
    """What only the operator writes: a status whose data could not be read for staleAfterSeconds."""
    (capability,) = evaluate_bodies(healthy_pool()).capabilities
    return [data_unavailable(capability.status, "Pods could not be read").to_json()]


REGISTERED = {(entry.condition.value, entry.status.value, entry.reason.value) for entry in REASONS}


def test_each_entry_is_registered_once_with_a_meaning_and_an_action() -> None:
    counts = Counter((entry.condition, entry.status, entry.reason) for entry in REASONS)
    assert [key for key, count in counts.items() if count > 1] == []
    for entry in REASONS:
        assert entry.meaning.strip() and entry.action.strip(), entry


def test_every_reason_and_condition_type_is_described() -> None:
    assert {entry.reason for entry in REASONS} == set(Reason)
    assert [meaning.type for meaning in CONDITIONS] == list(ConditionType)


def test_ready_has_one_true_reason_and_never_unknown() -> None:
    ready = [entry for entry in REASONS if entry.condition is ConditionType.READY]
    assert [entry.reason for entry in ready if entry.status is ConditionStatus.TRUE] == [Reason.UNIFORM_CAPABILITY]
    assert all(entry.status is not ConditionStatus.UNKNOWN for entry in ready)


def test_reason_meaning_looks_up_the_triple() -> None:
    found = reason_meaning("Ready", "False", "DevicePluginGap")
    assert found is not None and found.reason is Reason.DEVICE_PLUGIN_GAP
    assert reason_meaning("Ready", "Unknown", "NoTargetNodes") is None  # Ready is never Unknown
    assert reason_meaning("Advertised", "True", "NotAdvertised") is None


def test_everything_the_examples_write_is_registered(capsys: pytest.CaptureFixture[str]) -> None:
    assert triples_of(example_statuses(capsys)) - REGISTERED == set()


def test_every_registered_reason_is_reached(capsys: pytest.CaptureFixture[str]) -> None:
    """By the examples, or by one of the small WORLDS above: no entry documents a dead outcome."""
    reached = triples_of(example_statuses(capsys)) | triples_of(world_statuses() + failed_closed_statuses())
    assert REGISTERED - reached == set()
    assert reached - REGISTERED == set()


# Raw condition-status words the product may still spell, and why each means something else.
NOT_A_CONDITION_STATUS = {
    ("fabriccap/core/api.py", "True"),  # the enum's own definition
    ("fabriccap/core/api.py", "False"),
    ("fabriccap/core/api.py", "Unknown"),
    ("fabriccap/controller/events.py", "Unknown"),  # an Event's reason when a condition has none
}


def test_condition_status_is_spelt_once() -> None:
    """Every comparison with a condition's status goes through ConditionStatus: a string
    literal "True", "False" or "Unknown" in the product is either in the list above or a bug."""
    package = Path(fabriccap.__file__).resolve().parent
    found = set()
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent).as_posix()
        for child in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(child, ast.Constant) and child.value in {status.value for status in ConditionStatus}:
                found.add((relative, child.value))
    assert found == NOT_A_CONDITION_STATUS
