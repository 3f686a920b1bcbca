"""examples/ beyond EKS with EFA node groups: AKS with network-operator, Trainium, HyperPod.

Each example is a realistic snapshot a user can run `fabriccap evaluate` on; the expected
outcomes are written out by hand from the rules (docs/reference/how-it-decides.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabriccap.cli import commands as cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
AKS = EXAMPLES / "aks-ndv5-rdma.yaml"
TRAINIUM = EXAMPLES / "eks-trainium-hyperpod.yaml"
RDMA = "rdma/hca_shared_devices_a"


def evaluate(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, dict[str, Any]]:
    """The published objects of `fabriccap evaluate ARGS -o json`, keyed by pool value."""
    assert cli.main(["evaluate", *args, "-o", "json"]) == 0
    return {item["status"]["pool"]["value"]: item["status"] for item in json.loads(capsys.readouterr().out)["items"]}


def reasons(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


# --- AKS, NVIDIA network-operator ---------------------------------------------------------------


def test_aks_pool_is_found_in_nvidia_network_operator_and_recommends_one(capsys: pytest.CaptureFixture[str]) -> None:
    pools = evaluate(capsys, "--config", str(EXAMPLES / "config-aks.yaml"), "-f", str(AKS))
    assert sorted(pools) == ["ndv5", "ndv5b"]  # system has no GPU and no RDMA
    ndv5 = pools["ndv5"]
    assert ndv5["pool"] == {"key": "kubernetes.azure.com/agentpool", "value": "ndv5"}
    # Found by the pod template's label: the DaemonSet's own labels do not carry it.
    assert ndv5["devicePlugin"] == {"daemonSets": ["nvidia-network-operator/rdma-shared-dp-ds"], "readyNodes": 3}
    assert reasons(ndv5)["Ready"] == ("True", "UniformCapability")
    assert ndv5["uniformCount"] == 1000  # "1k": rdmaHcaMax
    # A shared resource counts pods that may share the HCAs: each pod asks for one.
    assert ndv5["recommendation"]["resourcesPerNode"] == {RDMA: "1"}
    ready = next(c for c in ndv5["conditions"] if c["type"] == "Ready")
    assert ready["message"].endswith("up to 1000 pods per node may share it, each requesting 1")


def test_aks_scaled_out_pool_waits_for_the_new_nodes_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    pools = evaluate(capsys, "--config", str(EXAMPLES / "config-aks.yaml"), "-f", str(AKS))
    ndv5b = pools["ndv5b"]
    assert reasons(ndv5b)["Ready"] == ("False", "PartialRollout")
    assert reasons(ndv5b)["DevicePluginReady"] == ("False", "PluginNotReady")
    assert ndv5b["counts"] == [{"count": 1000, "nodes": 1}, {"count": 0, "nodes": 1}]
    assert "recommendation" not in ndv5b


def test_the_shared_ib_config_of_azures_guide(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Azure's InfiniBand guide names the resource rdma/shared_ib and runs the standalone
    DaemonSet in kube-system: the worked config in examples/ finds it."""
    document = yaml.safe_load(AKS.read_text())
    for item in document["items"]:
        if item["kind"] == "Node":
            for field in ("capacity", "allocatable"):
                quantities = item["status"][field]
                if RDMA in quantities:
                    quantities["rdma/shared_ib"] = quantities.pop(RDMA)
        elif item["kind"] in ("DaemonSet", "Pod"):
            item["metadata"]["namespace"] = "kube-system"
            if item["kind"] == "DaemonSet":
                item["metadata"]["labels"] = {}
                item["spec"]["template"]["metadata"]["labels"] = {"name": "rdma-shared-dp-ds"}
    snapshot = tmp_path / "azure-guide.yaml"
    snapshot.write_text(yaml.safe_dump(document))
    pools = evaluate(capsys, "--config", str(EXAMPLES / "config-aks-shared-ib.yaml"), "-f", str(snapshot))
    ndv5 = pools["ndv5"]
    assert ndv5["resourceName"] == "rdma/shared_ib"
    assert ndv5["devicePlugin"]["daemonSets"] == ["kube-system/rdma-shared-dp-ds"]
    assert reasons(ndv5)["Ready"] == ("True", "UniformCapability")
    assert ndv5["recommendation"]["resourcesPerNode"] == {"rdma/shared_ib": "1"}


def test_without_the_aks_profile_the_cluster_has_no_rdma_pools(capsys: pytest.CaptureFixture[str]) -> None:
    # The built-in default is EFA only. Its GPUs made AKS nodes EFA targets, NotAdvertised pools,
    # before round 3; their providerID (azure://) now says they are no EFA pool at all.
    assert evaluate(capsys, "-f", str(AKS)) == {}


# --- EKS: Trainium, SageMaker HyperPod, Karpenter before v1 -------------------------------------


@pytest.fixture
def trainium(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    return evaluate(capsys, "-f", str(TRAINIUM))


def test_exactly_the_fabric_pools_are_published(trainium: dict[str, dict[str, Any]]) -> None:
    assert sorted(trainium) == ["p5en-new", "train-p5", "trn1-train", "web"]


def test_hyperpod_nodes_use_the_ec2_maximum_of_their_type(trainium: dict[str, dict[str, Any]]) -> None:
    # HyperPod's instance group is the pool (round 3): two groups of one type no longer merge.
    hyperpod = trainium["train-p5"]
    assert hyperpod["pool"] == {"key": "sagemaker.amazonaws.com/instance-group-name", "value": "train-p5"}
    assert hyperpod["instanceTypes"] == [{"name": "ml.p5.48xlarge", "nodes": 2, "maxCount": 32}]
    assert reasons(hyperpod)["MatchesInstanceType"] == ("True", "MatchesInstanceMaximum")
    assert reasons(hyperpod)["Ready"] == ("True", "UniformCapability")


def test_trainium_nodes_are_targets_through_their_neuron_devices(trainium: dict[str, dict[str, Any]]) -> None:
    trn1 = trainium["trn1-train"]
    assert trn1["pool"] == {"key": "karpenter.sh/provisioner-name", "value": "trn1-train"}
    assert trn1["nodes"] == 2
    assert reasons(trn1)["Ready"] == ("False", "NotAdvertised")
    assert reasons(trn1)["DevicePluginReady"] == ("False", "PluginNotScheduled")
    assert reasons(trn1)["MatchesInstanceType"] == ("False", "BelowInstanceMaximum")


def test_a_type_that_can_carry_efa_is_a_target_before_any_plugin_lands(trainium: dict[str, dict[str, Any]]) -> None:
    fresh = trainium["p5en-new"]
    assert fresh["instanceTypes"] == [{"name": "p5en.48xlarge", "nodes": 2, "maxCount": 16}]
    assert reasons(fresh)["Ready"] == ("False", "NotAdvertised")
    web = trainium["web"]
    assert web["instanceTypes"] == [{"name": "c5n.18xlarge", "nodes": 2, "maxCount": 1}]
    assert reasons(web)["Stalled"] == ("False", "NotStalled")
