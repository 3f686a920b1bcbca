"""`fabriccap explain` advises only what schedules (review 66d F1-F3), on the example cluster
(examples/eks-cluster.json: p5-training, 4 p5.48xlarge nodes of 8 GPUs and 32 EFA, Ready;
g6-inference, g6.2xlarge nodes whose EFA maximum is 0, Stalled InstanceTypeUnsupported).

- F1: the pod's total of the fabric is the pool's per-node count, or its share when the pod
  takes part of a node's accelerators, split over its accelerator containers;
- F2: no advice to request the fabric where the operator's withoutFabric rule says the pool does
  not offer it;
- F3: a request above what a node has is lowered to it, or said to be beyond every pool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabriccap_devtools.world import NODEGROUP
from support.cli import run, write_json
from support.nccl import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "eks-cluster.json"
EFA = "vpc.amazonaws.com/efa"
GPU = "nvidia.com/gpu"


def deployment(name: str, pool: str, containers: list[dict[str, str]]) -> dict[str, Any]:
    """A Deployment in ``ml`` that selects ``pool``, one container per entry of ``containers``
    (its limits)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {NODEGROUP: pool},
                    "containers": [
                        {"name": f"c{i}", "image": "x", "resources": {"limits": limits}}
                        for i, limits in enumerate(containers)
                    ],
                },
            },
        },
    }


def explain(tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, *objects: Any) -> dict[str, Any]:
    """``fabriccap explain TARGET -f examples/eks-cluster.json -f <objects> -o json``."""
    extra = write_json(tmp_path / "w.json", {"apiVersion": "v1", "kind": "List", "items": list(objects)})
    code, out, err = run(["explain", target, "-f", str(EXAMPLE), "-f", extra, "-o", "json"], capsys)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def patch_of(change: str) -> list[dict[str, Any]]:
    """The JSON patch of a printed ``kubectl patch … --type json -p '…'``."""
    assert change.startswith("kubectl patch ") and " --type json -p " in change, change
    ops: list[dict[str, Any]] = json.loads(change.split(" -p ", 1)[1].strip("'"))
    return ops


def efa_path(container: int) -> str:
    return f"/spec/template/spec/containers/{container}/resources/limits/vpc.amazonaws.com~1efa"


def test_two_accelerator_containers_share_the_nodes_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two containers of 4 GPUs each make one 8-GPU pod per node: 32 between them, 16 each, not
    32 each (64 on nodes of 32 would leave the pods Pending); the table shows the pod's 8 GPUs."""
    result = explain(tmp_path, capsys, "deployment/ml/two", deployment("two", "p5-training", [{GPU: "4"}] * 2))
    assert patch_of(result["change"]) == [
        {"op": "add", "path": efa_path(0), "value": "16"},
        {"op": "add", "path": efa_path(1), "value": "16"},
    ]
    (view,) = result["templates"]
    assert view["accelerators"] == {GPU: "8"}


def test_the_split_follows_each_containers_accelerators(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """3 and 5 GPUs of a node's 8: 12 and 20 of its 32; a container without an accelerator gets none."""
    containers = [{GPU: "3"}, {"cpu": "1"}, {GPU: "5"}]
    result = explain(tmp_path, capsys, "deployment/ml/uneven", deployment("uneven", "p5-training", containers))
    assert patch_of(result["change"]) == [
        {"op": "add", "path": efa_path(0), "value": "12"},
        {"op": "add", "path": efa_path(2), "value": "20"},
    ]


def test_a_pod_of_part_of_a_node_asks_its_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 1-GPU pod on 8-GPU nodes of 32 EFA asks 4, so eight of them fit a node together (32 each
    would fit one a node), and the note says why."""
    result = explain(tmp_path, capsys, "deployment/ml/one-gpu", deployment("one-gpu", "p5-training", [{GPU: "1"}]))
    assert patch_of(result["change"]) == [{"op": "add", "path": efa_path(0), "value": "4"}]
    assert "1 of 8 nvidia.com/gpu" in result["note"] and "4 of the 32 per node" in result["note"]


def test_no_advice_to_request_the_fabric_on_a_pool_that_cannot_offer_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """g6-inference never offers EFA (g6.2xlarge's maximum is 0, no node advertises it): the
    operator counts no withoutFabric there, and explain advises no request; it says the pool's
    instance types cannot give it."""
    result = explain(tmp_path, capsys, "deployment/ml/infer", deployment("infer", "g6-inference", [{GPU: "1"}]))
    assert result["change"] == "nothing to change"
    assert "then request" not in result["note"]
    assert "run it on a pool of instance types that have it" in result["note"]
    assert [view["needsFabric"] for view in result["templates"]] == [False]


def test_a_request_of_the_fabric_on_a_pool_that_cannot_offer_it_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Requesting EFA on g6-inference keeps the pods Pending: not "nothing to change"."""
    result = explain(
        tmp_path, capsys, "deployment/ml/g6-efa", deployment("g6-efa", "g6-inference", [{GPU: "1", EFA: "1"}])
    )
    assert result["change"].startswith("none on this pool: its pods request vpc.amazonaws.com/efa")


def test_a_request_above_the_nodes_count_is_lowered_to_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """64 EFA on nodes of 32 is Pending for good: the change sets 32, in limits and requests alike."""
    big = deployment("big", "p5-training", [{GPU: "8", EFA: "64"}])
    big["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {EFA: "64"}
    result = explain(tmp_path, capsys, "deployment/ml/big", big)
    requests = "/spec/template/spec/containers/0/resources/requests/vpc.amazonaws.com~1efa"
    assert patch_of(result["change"]) == [
        {"op": "add", "path": efa_path(0), "value": "32"},
        {"op": "add", "path": requests, "value": "32"},
    ]
    assert "request 64 vpc.amazonaws.com/efa, more than the 32 a node of the pool has" in result["note"]


def test_a_request_beyond_every_pool_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """The example's PyTorchJob pod resnet-efa-64 asks 64 (PodScheduled=False, Insufficient EFA)
    and selects no pool: no pool offers 64, and the most one does is named."""
    target = "pod/ml-research/resnet-efa-64-worker-0"
    code, out, err = run(["explain", target, "-f", str(EXAMPLE), "-o", "json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["change"] == (
        "none: no pool offers vpc.amazonaws.com/efa: 64 per node; the most a Ready pool offers is 32"
        " (FabricCapability efa-p5-training): request 32 there"
    )
