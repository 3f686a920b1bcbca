"""`fabriccap explain` advises only what schedules (review 66d F1-F3), on the example cluster
(examples/eks-cluster.json: p5-training, 4 p5.48xlarge nodes of 8 GPUs and 32 EFA, Ready;
g6-inference, g6.2xlarge nodes whose EFA maximum is 0, Stalled InstanceTypeUnsupported).

- F1: the pod's total of the fabric is the pool's per-node count, or its share when the pod
  takes part of a node's accelerators, split over its accelerator containers;
- F2: no advice to request the fabric where the operator's withoutFabric rule says the pool does
  not offer it;
- F3: a request above what a node has is lowered to it, or said to be beyond every pool.

And review 66f: a resource the container names already (an explicit "0") is set in limits and
requests alike (F1); a pool that offers the fabric only through DRA (p5-dranet) is told to claim
it, as FabricNotRequested and the admission warning say, never to request the extended resource
(F2); a shared fabric (aks-rdma) is asked 1 by each accelerator container, never lowered (F3);
nodes that differ in accelerators (one GPU lost) take the share of the most (F4); the note says
the share is of the per-node count the Event names (F5).

And review 66g: a pod's claim on a DRA-only pool is its share of the devices a node has, as its
request of the resource would be (F1); the claim change on a kind that cannot change in place
says to create it again (F2), and a TrainJob's names its runtime's template (F3); a shared
fabric is asked by each accelerator container that lacks it, whatever the others ask (F4)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from fabriccap_devtools.world import NODEGROUP
from support.cli import run, write_json
from support.nccl import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "eks-cluster.json"
# The AKS example: 3 ndv5 nodes of 8 GPUs, rdma/hca_shared_devices_a: 1k (rdmaHcaMax), shared.
AKS = (
    "--config",
    str(REPO_ROOT / "examples" / "config-aks.yaml"),
    "-f",
    str(REPO_ROOT / "examples" / "aks-ndv5-rdma.yaml"),
)
AGENTPOOL = "kubernetes.azure.com/agentpool"
EFA = "vpc.amazonaws.com/efa"
GPU = "nvidia.com/gpu"
RDMA = "rdma/hca_shared_devices_a"


def deployment(name: str, pool: str, containers: list[dict[str, str]], key: str = NODEGROUP) -> dict[str, Any]:
    """A Deployment in ``ml`` that selects ``pool`` (by ``key``), one container per entry of
    ``containers`` (its limits)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {key: pool},
                    "containers": [
                        {"name": f"c{i}", "image": "x", "resources": {"limits": limits}}
                        for i, limits in enumerate(containers)
                    ],
                },
            },
        },
    }


def explain(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    target: str,
    *objects: Any,
    cluster: Sequence[str] = ("-f", str(EXAMPLE)),
) -> dict[str, Any]:
    """``fabriccap explain TARGET <cluster> -f <objects> -o json`` (cluster: the EKS example)."""
    extra = write_json(tmp_path / "w.json", {"apiVersion": "v1", "kind": "List", "items": list(objects)})
    code, out, err = run(["explain", target, *cluster, "-f", extra, "-o", "json"], capsys)
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
    # The Event and the admission warning say "32 per node": the note ties the two (66f F5).
    assert "32 per node that FabricNotRequested and the admission warning name" in result["note"]


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


def test_an_explicit_zero_is_set_in_limits_and_requests_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A chart's ``efa: "0"`` (``| default 0``) in limits and requests: the patch sets 32 in both.
    32 in the limits alone is refused by the API server ("must be equal to
    vpc.amazonaws.com/efa limit of 32")."""
    zero = deployment("zero", "p5-training", [{GPU: "8", EFA: "0"}])
    zero["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {GPU: "8", EFA: "0"}
    result = explain(tmp_path, capsys, "deployment/ml/zero", zero)
    requests = "/spec/template/spec/containers/0/resources/requests/vpc.amazonaws.com~1efa"
    assert patch_of(result["change"]) == [
        {"op": "add", "path": efa_path(0), "value": "32"},
        {"op": "add", "path": requests, "value": "32"},
    ]


def test_a_trainjobs_explicit_zero_is_set_in_limits_and_requests_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same in a TrainJob's resourcesPerNode (a manifest change: its spec.trainer is kept)."""
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "t", "namespace": "ml", "uid": "uid-t"},
        "spec": {
            "runtimeRef": {"name": "torch"},
            "trainer": {"resourcesPerNode": {"limits": {GPU: "8"}, "requests": {EFA: "0"}}},
            "podTemplateOverrides": [
                {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {NODEGROUP: "p5-training"}}}
            ],
        },
    }
    result = explain(tmp_path, capsys, "trainjob/ml/t", trainjob)
    assert result["change"] == (
        'in the manifest, set spec.trainer.resourcesPerNode.limits["vpc.amazonaws.com/efa"]: "32", '
        'spec.trainer.resourcesPerNode.requests["vpc.amazonaws.com/efa"]: "32"'
    )


def test_a_dra_only_pool_is_told_to_claim_the_fabric(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """p5-dranet offers EFA only through ResourceSlices: no node has vpc.amazonaws.com/efa in its
    allocatable, and its recommendation is only a resourceClaimTemplate. The change is the claim
    FabricNotRequested and the admission warning name, not the extended resource (Pending)."""
    result = explain(tmp_path, capsys, "deployment/ml/dra", deployment("dra", "p5-dranet", [{GPU: "8"}]))
    claim = "a ResourceClaim of DeviceClass efa.networking.k8s.aws for 32 devices per node"
    assert result["change"].startswith(f"request {claim}: create a ResourceClaimTemplate"), result["change"]
    assert EFA not in result["change"] and "efa~1" not in result["change"]
    assert result["offers"].startswith(claim)


def test_a_request_of_the_extended_resource_on_a_dra_only_pool_is_not_lowered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """64 EFA on p5-dranet stays Pending whatever the number: it is told to claim instead, not to
    lower the request to 32 (also Pending)."""
    big = deployment("dra-big", "p5-dranet", [{GPU: "8", EFA: "64"}])
    result = explain(tmp_path, capsys, "deployment/ml/dra-big", big)
    assert result["change"].startswith("request a ResourceClaim of DeviceClass efa.networking.k8s.aws")
    assert "lowers" not in result["note"]
    assert "its pods request 64 vpc.amazonaws.com/efa: drop that request" in result["note"]


def test_a_shared_fabric_is_asked_one_in_each_accelerator_container(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """aks-rdma counts pods that may share a node's HCAs (1k a node), each asking 1; its device
    plugin mounts them only in a container that requests it: two 4-GPU containers ask 1 each,
    not 1 and 0."""
    two = deployment("two", "ndv5", [{GPU: "4"}] * 2, key=AGENTPOOL)
    result = explain(tmp_path, capsys, "deployment/ml/two", two, cluster=AKS)
    rdma = "rdma~1hca_shared_devices_a"
    assert patch_of(result["change"]) == [
        {"op": "add", "path": f"/spec/template/spec/containers/{i}/resources/limits/{rdma}", "value": "1"}
        for i in (0, 1)
    ]
    assert result["offers"].startswith(f"{RDMA}: 1 per accelerator container, shared by up to 1000 containers per node")


def test_a_shared_fabric_request_above_one_is_not_lowered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pod asking 2 of the 1k a node shares schedules: not "Pending", nothing to lower; nor is
    it beyond every pool when it selects none."""
    asks_two = deployment("two", "ndv5", [{GPU: "8", RDMA: "2"}], key=AGENTPOOL)
    result = explain(tmp_path, capsys, "deployment/ml/two", asks_two, cluster=AKS)
    assert result["change"] == "nothing to change"
    assert "Pending" not in (result.get("note") or "")
    elsewhere = deployment("elsewhere", "none-such", [{GPU: "8", RDMA: "2"}], key=AGENTPOOL)
    result = explain(tmp_path, capsys, "deployment/ml/elsewhere", elsewhere, cluster=AKS)
    assert result["change"] == "nothing to change"


def test_a_node_short_of_a_gpu_leaves_the_share_of_the_most(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One p5-training node reports 7 allocatable GPUs (one lost to an Xid): a 1-GPU pod still asks
    its share of the most a node carries, 4 of 32 (7 of them fit the short node: 28), not all 32,
    and the note says the nodes differ."""
    cluster = json.loads(EXAMPLE.read_text())
    (short,) = [
        item
        for item in cluster["items"]
        if item["kind"] == "Node" and item["metadata"]["name"].startswith("ip-10-0-16-110")
    ]
    short["status"]["allocatable"][GPU] = "7"
    degraded = write_json(tmp_path / "degraded.json", cluster)
    one = deployment("one", "p5-training", [{GPU: "1"}])
    result = explain(tmp_path, capsys, "deployment/ml/one", one, cluster=("-f", degraded))
    assert patch_of(result["change"]) == [{"op": "add", "path": efa_path(0), "value": "4"}]
    assert "the most one of the pool's nodes carries: they differ" in result["note"]


def test_a_dra_claim_of_a_pod_of_part_of_a_node_is_its_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """66g F1: a ResourceClaimTemplate makes a claim for each pod; 32 devices for a 1-GPU pod on
    p5-dranet (8 GPUs, 32 EFA devices a node) would fit one pod a node. It claims its share, 4,
    as its request of the resource would be, and the note ties it to the 32 per node the Event
    names."""
    one = deployment("one-dra", "p5-dranet", [{GPU: "1"}])
    result = explain(tmp_path, capsys, "deployment/ml/one-dra", one)
    assert result["change"].startswith(
        "request a ResourceClaim of DeviceClass efa.networking.k8s.aws for 4 devices per pod"
    ), result["change"]
    assert "its exactly.count set to 4" in result["change"]
    assert "32 devices" not in result["change"]
    assert "1 of 8 nvidia.com/gpu" in result["note"]
    assert "4 of the 32 per node that FabricNotRequested and the admission warning name" in result["note"]


@pytest.mark.parametrize(
    ("target", "workload"),
    [
        (
            "job/ml/jdra",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "jdra", "namespace": "ml", "uid": "uid-jdra"},
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "nodeSelector": {NODEGROUP: "p5-dranet"},
                            "containers": [{"name": "c", "image": "x", "resources": {"limits": {GPU: "8"}}}],
                        }
                    }
                },
            },
        ),
        (
            "pod/ml/pdra",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "pdra", "namespace": "ml", "uid": "uid-pdra"},
                "spec": {
                    "nodeSelector": {NODEGROUP: "p5-dranet"},
                    "containers": [{"name": "c", "image": "x", "resources": {"limits": {GPU: "8"}}}],
                },
            },
        ),
    ],
)
def test_a_claim_change_on_a_template_fixed_at_creation_says_create_it_again(
    target: str, workload: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """66g F2: a Pod's and a Job's pod template cannot take spec.resourceClaims once created: the
    claim change says so, as the change of the resource does."""
    result = explain(tmp_path, capsys, target, workload)
    assert result["change"].startswith("request a ResourceClaim of DeviceClass efa.networking.k8s.aws")
    assert result["note"].startswith(
        f"{workload['kind']}'s pod template cannot be changed in place: "
        "make this change to the manifest and create it again; "
    ), result["note"]


def test_a_trainjobs_claim_goes_in_its_runtimes_template(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """66g F3: a TrainJob has no pod template: its pods' resourceClaims come from its runtime's
    node template, which the change names; the Trainer runtime note stays."""
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tjdra", "namespace": "ml", "uid": "uid-tjdra"},
        "spec": {
            "runtimeRef": {"name": "torch"},
            "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {GPU: "8"}}},
            "podTemplateOverrides": [
                {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {NODEGROUP: "p5-dranet"}}}
            ],
        },
    }
    result = explain(tmp_path, capsys, "trainjob/ml/tjdra", trainjob)
    change, note = result["change"], result["note"]
    assert "pod template's spec.resourceClaims" not in change
    assert (
        "name it in the node pod template of the TrainJob's runtime torch (its "
        "spec.template.spec.replicatedJobs[name=node].template.spec.template.spec.resourceClaims)"
    ) in change
    assert "make this change to runtime torch and create it again" in note
    assert "if runtime torch already claims DeviceClass efa.networking.k8s.aws, nothing needs to change" in note


def test_a_shared_fabric_is_asked_by_each_accelerator_container_that_lacks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """66g F4: the device plugin mounts the HCAs only in a container that requests them: where one
    accelerator container asks (1, or 2) and the other none, the other gets 1 and the first keeps
    what it asks."""
    for asked in ("1", "2"):
        half = deployment("half", "ndv5", [{GPU: "4", RDMA: asked}, {GPU: "4"}], key=AGENTPOOL)
        result = explain(tmp_path, capsys, "deployment/ml/half", half, cluster=AKS)
        assert patch_of(result["change"]) == [
            {
                "op": "add",
                "path": "/spec/template/spec/containers/1/resources/limits/rdma~1hca_shared_devices_a",
                "value": "1",
            }
        ], result["change"]
    both = deployment("both", "ndv5", [{GPU: "4", RDMA: "1"}, {GPU: "4", RDMA: "1"}], key=AGENTPOOL)
    assert explain(tmp_path, capsys, "deployment/ml/both", both, cluster=AKS)["change"] == "nothing to change"
