"""Workloads: who on a pool asks for the fabric, who does not, and who cannot get it.

Pod bodies come from ``fabriccap_devtools.world`` (``workload_pod``, ``trainjob_pods``): shaped as
the Trainer, JobSet, Job and training-operator controllers make them.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Mapping
from typing import Any

import pytest

from fabriccap.core.api import FabricCapabilityStatus, WorkloadsStatus
from fabriccap.core.evaluate import evaluate
from fabriccap.core.facts import ClaimRef, FactsError, FactsExtractor, InitClaim, ObjectRef, insufficient_resources
from fabriccap.core.index import WORKLOAD_POD_FACTS, FactIndex
from fabriccap.core.text import MAX_MESSAGE
from fabriccap.core.workload_kinds import UNKNOWN_REQUEST_FIELD, request_field
from fabriccap.core.workloads import (
    FABRIC_NOT_REQUESTED,
    MAX_OWNER_DEPTH,
    LookupKey,
    NotRequestedWording,
    ReadyPool,
    learn_from_object,
    learn_lookup,
    owner_chain,
    owner_loop,
    ready_count,
    request_classes_of,
    top_owner,
    unschedulable_event,
    unschedulable_groups,
)
from fabriccap_devtools.world import (
    SCHEDULER_EFA_MESSAGE,
    allocated_claim,
    daemon_set,
    dranet_daemon_set,
    dranet_pods,
    owner_reference,
    resource_slice,
    trainjob_pods,
    workload_pod,
)
from support.builders import EFA, GPU, dra_pool, evaluate_bodies, facts_of, healthy_pool, node, only_status, plugin_pods
from support.configs import build_config, default_config

EXTRACTOR = FactsExtractor(default_config())
Bodies = list[dict[str, Any]]


def facts(body: dict[str, Any]) -> Any:
    return EXTRACTOR.workload_pod(body)


# --- Pod facts ----------------------------------------------------------------------------------


def test_a_pod_that_uses_nothing_leaves_nothing() -> None:
    assert facts(workload_pod("n1", "web", gpu=None)) is None


def test_a_finished_pod_runs_nothing_any_more() -> None:
    assert facts(workload_pod("n1", "done", phase="Succeeded")) is None
    assert facts(workload_pod("n1", "failed", phase="Failed")) is None


def test_requests_follow_the_scheduler() -> None:
    """App containers add up; an init container counts alone, with the sidecars started before it;
    sidecars (restartPolicy Always) run beside the app; the overhead comes on top."""
    body = workload_pod("n1", "p", gpu=2, efa=4)
    spec = body["spec"]
    spec["containers"].append({"name": "second", "resources": {"limits": {GPU: "2"}}})
    spec["initContainers"] = [
        {"name": "warmup", "resources": {"limits": {GPU: "6"}}},
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {EFA: "1"}, "limits": {EFA: "1"}}},
        {"name": "late-init", "resources": {"limits": {EFA: "8"}}},
    ]
    spec["overhead"] = {EFA: "1"}
    found = facts(body)
    assert found is not None
    # gpu: max(2 + 2 + 0, 6) = 6; efa: max(4 + 1, 8 + 1) + 1 = 10
    assert found.requests == ((GPU, 6), (EFA, 10))


def test_the_fabric_only_an_init_container_requests_is_not_the_jobs() -> None:
    """The scheduler reserves what a plain init container requests (its devices fit the node),
    but kubelet's device manager gives them on only to a later container that requests the same
    resource: a trainer with 8 GPUs and no EFA, after an ``efa-preflight`` init container with
    ``efa: 1``, runs NCCL over sockets. It was counted as requesting the fabric, and its job was
    never warned. A sidecar runs beside the trainer and keeps its devices, and a trainer that
    requests the fabric itself holds it whatever its init containers do: those two count."""

    def pod(name: str, init_container: dict[str, Any], efa: int | None = None) -> dict[str, Any]:
        owner = owner_reference("PyTorchJob", "kubeflow.org/v1", name)
        body = workload_pod("n1", f"{name}-0", gpu=8, efa=efa, owner=owner)
        body["spec"]["initContainers"] = [{**init_container, "image": "x", "resources": {"limits": {EFA: "1"}}}]
        return body

    preflight = pod("preflight", {"name": "efa-preflight"})
    sidecar = pod("sidecar", {"name": "efa-proxy", "restartPolicy": "Always"})
    both = pod("both", {"name": "efa-preflight"}, efa=32)
    found = facts(preflight)
    assert found is not None and found.request_of(EFA) == 1  # what the scheduler fits is unchanged
    assert found.init_only == (EFA,) and facts(sidecar).init_only == facts(both).init_only == ()
    evaluation = evaluate_bodies([*ready_pool(nodes=1), preflight, sidecar, both])
    workloads = evaluation.capabilities[0].status.workloads
    assert workloads is not None
    assert (workloads.requesting_fabric.pods, workloads.without_fabric.pods) == (2, 1)
    events = [(event.reason, event.involved.kind, event.involved.name) for event in evaluation.workload_events]
    assert events == [(FABRIC_NOT_REQUESTED, "PyTorchJob", "preflight")]


def test_an_accelerator_only_an_init_container_requests_makes_no_nccl_job() -> None:
    """The same rule for the accelerator: a CPU-only service whose plain init container checks a
    GPU (``gpu-check``, ``nvidia.com/gpu: 1``) holds no GPU once it runs and runs no NCCL. It
    counted as an accelerator pod by its effective request (the init container's peak), so it
    was withoutFabric and its owner was told NCCL would use TCP sockets. A sidecar's GPU runs
    beside the service, and counts."""

    def pod(name: str, init_container: dict[str, Any]) -> dict[str, Any]:
        body = workload_pod("n1", f"{name}-0", gpu=None, owner=owner_reference("StatefulSet", "apps/v1", name))
        body["spec"]["initContainers"] = [{**init_container, "image": "x", "resources": {"limits": {GPU: "1"}}}]
        return body

    checked = pod("web", {"name": "gpu-check"})
    sidecar = pod("encoder", {"name": "gpu-encoder", "restartPolicy": "Always"})
    found = facts(checked)
    assert found is not None and found.request_of(GPU) == 1  # what the scheduler fits is unchanged
    assert found.init_only == (GPU,)
    evaluation = evaluate_bodies([*ready_pool(nodes=1), checked, sidecar])
    workloads = evaluation.capabilities[0].status.workloads
    assert workloads is not None
    assert (workloads.requesting_fabric.pods, workloads.without_fabric.pods) == (0, 1)
    events = [(event.reason, event.involved.kind, event.involved.name) for event in evaluation.workload_events]
    assert events == [(FABRIC_NOT_REQUESTED, "StatefulSet", "encoder")]


def test_a_request_equal_to_its_limit_or_the_limit_alone() -> None:
    body = workload_pod("n1", "p", gpu=None)
    body["spec"]["containers"][0]["resources"] = {"requests": {GPU: "4"}, "limits": {GPU: "4"}}
    assert facts(body).requests == ((GPU, 4),)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param("abc", "'abc' is not a quantity", id="garbage"),
        pytest.param("1e40", "'1e40' is out of range", id="huge-exponent"),
        pytest.param("99999999999", "'99999999999' is out of range", id="beyond-int32"),
    ],
)
def test_a_malformed_quantity_is_named_and_the_pod_left_out(value: str, problem: str) -> None:
    body = workload_pod("n1", "broken", gpu=value)
    with pytest.raises(FactsError) as raised:
        facts(body)
    assert str(raised.value).startswith(f"Pod ml/broken: container 'node': resources.limits[{GPU}]: ")
    assert problem in str(raised.value)


def test_a_pod_with_500_containers_is_read_and_one_with_2000_is_refused() -> None:
    body = workload_pod("n1", "wide", gpu=None)
    body["spec"]["containers"] = [{"name": f"c{index}", "resources": {"limits": {GPU: "1"}}} for index in range(500)]
    assert facts(body).requests == ((GPU, 500),)
    body["spec"]["containers"] *= 4
    with pytest.raises(FactsError, match=r"spec\.containers has 2000 entries"):
        facts(body)


@pytest.mark.parametrize(
    ("env", "intent"),
    [
        pytest.param({"FI_PROVIDER": "efa"}, ("efa",), id="fi-provider"),
        pytest.param({"FI_PROVIDER": "shm, EFA"}, ("efa",), id="fi-provider-list"),
        pytest.param({"NCCL_NET": "AWS Libfabric"}, ("efa",), id="nccl-net-libfabric"),
        pytest.param({"NCCL_NET": "ofi"}, ("efa",), id="nccl-net-ofi"),
        pytest.param({"FI_EFA_USE_DEVICE_RDMA": "1"}, ("efa",), id="recommended-value"),
        pytest.param({"FI_EFA_USE_DEVICE_RDMA": "0"}, (), id="recommended-name-other-value"),
        pytest.param({"FI_PROVIDER": "tcp"}, (), id="tcp-provider"),
        pytest.param({"NCCL_SOCKET_IFNAME": "eth0"}, (), id="tcp-interface"),
        pytest.param({"NCCL_DEBUG": "INFO"}, (), id="unrelated"),
    ],
)
def test_fabric_intent_in_the_environment(env: dict[str, str], intent: tuple[str, ...]) -> None:
    found = facts(workload_pod("n1", "p", gpu=None, env=env))
    assert (found.intent if found is not None else ()) == intent


@pytest.mark.parametrize(
    ("trainer", "where", "other"),
    [
        pytest.param({"FI_PROVIDER": "efa"}, "initContainers", {"FI_PROVIDER": "tcp"}, id="a-staging-init-container"),
        pytest.param({"NCCL_NET": "ofi"}, "containers", {"NCCL_NET": "Socket"}, id="a-metrics-sidecar"),
    ],
)
def test_another_containers_environment_does_not_undo_the_trainers_intent(
    trainer: dict[str, str], where: str, other: dict[str, str]
) -> None:
    """Each container's environment is its own process's. Merged across the pod's containers,
    the last read won: a data-staging init container's FI_PROVIDER=tcp cancelled the trainer's
    efa, and a pod meaning to use EFA without asking for it was never counted."""
    body = workload_pod("n1", "p", gpu=None, env=trainer)
    env = [{"name": name, "value": value} for name, value in other.items()]
    body["spec"].setdefault(where, []).append({"name": "other", "image": "x", "env": env})
    found = facts(body)
    assert found is not None and found.intent == ("efa",)


def test_the_nearest_owner_is_the_jobset_its_labels_name() -> None:
    (pod,) = trainjob_pods("bert", ["n1"])
    found = facts(pod)
    assert found.owner == ObjectRef(
        "jobset.x-k8s.io/v1alpha2", "JobSet", "ml", "bert", pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-uid"]
    )


def test_an_owner_of_a_kind_fabriccap_does_not_know_is_the_top() -> None:
    owner = owner_reference("Workflow", "argoproj.io/v1alpha1", "wf-1")
    found = facts(workload_pod("n1", "wf-step", owner=owner))
    assert found.owner == ObjectRef("argoproj.io/v1alpha1", "Workflow", "ml", "wf-1", owner["uid"])
    assert top_owner(found, FactIndex()) == (found.owner, None)


def test_a_bare_pod_is_its_own_owner() -> None:
    body = workload_pod("n1", "alone")
    assert facts(body).owner == ObjectRef("v1", "Pod", "ml", "alone", body["metadata"]["uid"])


def test_claims_and_the_unschedulable_message_are_kept() -> None:
    claim = {"name": "efa", "resourceClaimTemplateName": "efa-32"}
    message = SCHEDULER_EFA_MESSAGE.format(nodes=12)
    found = facts(workload_pod(None, "waiting", claims=[claim], unschedulable=message))
    assert found.claims == (ClaimRef("ResourceClaimTemplate", "ml", "efa-32"),)
    assert found.unschedulable == message
    assert found.node_name is None


def test_workloads_off_keeps_no_pod() -> None:
    extractor = FactsExtractor(build_config({"workloads": {"enabled": False}}))
    assert extractor.workload_pod(workload_pod("n1", "p")) is None


# --- Owners -------------------------------------------------------------------------------------


def test_the_top_owner_is_found_through_the_lookups() -> None:
    (pod,) = trainjob_pods("bert", ["n1"])
    found = facts(pod)
    index = FactIndex()
    assert top_owner(found, index) == (found.owner, LookupKey("JobSet", "ml", "bert", "jobset.x-k8s.io/v1alpha2"))
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "bert",
            "namespace": "ml",
            "ownerReferences": [owner_reference("TrainJob", "trainer.kubeflow.org/v1alpha1", "bert")],
        },
    }
    assert learn_from_object(index, jobset)
    owner, missing = top_owner(found, index)
    assert (owner.kind, owner.name, missing) == ("TrainJob", "bert", None)


def test_a_job_owned_by_nothing_is_the_top_once_read() -> None:
    owner = owner_reference("Job", "batch/v1", "plain")
    found = facts(workload_pod("n1", "p", owner=owner))
    index = FactIndex()
    learn_from_object(
        index, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "plain", "namespace": "ml"}}
    )
    assert top_owner(found, index) == (found.owner, None)


def job_ref(name: str) -> ObjectRef:
    return ObjectRef("batch/v1", "Job", "ml", name)


def owned_jobs(parents: Mapping[str, str | None]) -> FactIndex:
    """An index that read each Job of ``parents`` and found the Job named (or no owner)."""
    index = FactIndex()
    for name, parent in parents.items():
        index.learn_owner(job_ref(name).key, job_ref(parent) if parent is not None else None)
    return index


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5, 8, 1000])
def test_the_owner_walk_ends_once_round_a_loop_of_any_length(length: int) -> None:
    # Review 64e F1: a loop longer than the walk's bound looked like a chain.
    index = owned_jobs({f"j{i}": f"j{(i + 1) % length}" for i in range(length)})
    chain, missing = owner_chain(job_ref("j0"), index, None)
    assert [owner.name for owner in chain] == [f"j{i}" for i in range(length)] + ["j0"]
    assert owner_loop(chain) and missing is None
    # The operator's walk stops at its bound, or once round a loop within it.
    bounded, _ = owner_chain(job_ref("j0"), index)
    assert len(bounded) == min(length + 1, MAX_OWNER_DEPTH + 1)
    assert owner_loop(bounded) == (length <= MAX_OWNER_DEPTH)


def test_an_unbounded_owner_walk_goes_to_the_top_or_the_owner_not_read() -> None:
    chain = {f"j{i}": f"j{i + 1}" for i in range(9)}
    index = owned_jobs({**chain, "j9": None})
    assert owner_chain(job_ref("j0"), index, None) == ([job_ref(f"j{i}") for i in range(10)], None)
    index = owned_jobs(chain)  # j9 not read
    walked, missing = owner_chain(job_ref("j0"), index, None)
    assert (len(walked), missing) == (10, LookupKey("Job", "ml", "j9", "batch/v1"))
    assert not owner_loop(walked)


# --- status.workloads ---------------------------------------------------------------------------


def ready_pool(nodes: int = 2) -> Bodies:
    return healthy_pool(count=32, nodes=nodes)


def test_a_ready_pool_reports_who_asks_and_who_does_not() -> None:
    bodies = ready_pool()
    bodies += trainjob_pods("bert", ["n1", "n2"], env={"FI_PROVIDER": "efa"})  # GPUs only: TCP
    bodies += [workload_pod("n1", "llama-0", efa=32), workload_pod("n2", "llama-1", efa=32)]
    bodies.append(workload_pod("n2", "env-only", gpu=None, env={"FI_PROVIDER": "efa"}))
    workloads = only_status(bodies).workloads
    assert workloads is not None
    assert (workloads.requesting_fabric.pods, workloads.requesting_fabric.workloads) == (2, 2)
    assert (workloads.without_fabric.pods, workloads.without_fabric.workloads) == (2, 1)
    assert (workloads.intent_without_request.pods, workloads.intent_without_request.workloads) == (3, 2)
    assert [(o.kind, o.name, o.pods, o.problem) for o in workloads.offenders] == [
        ("JobSet", "bert", 2, "intentWithoutRequest"),
        ("JobSet", "bert", 2, "withoutFabric"),
        ("Pod", "env-only", 1, "intentWithoutRequest"),
    ]


@pytest.mark.parametrize(
    ("instance_type", "without"),
    [
        ("g5.4xlarge", 0),  # the catalog's maximum is 0: the pool offers no EFA
        ("m7i.large", 0),  # not in the catalog: nothing says it could
        # SPEC round 3: nothing advertised now, but the type carries 32: the job that asks for
        # nothing is the seed's defect, and it is counted.
        ("p5.48xlarge", 1),
    ],
)
def test_without_fabric_is_judged_against_what_the_pool_offers(instance_type: str, without: int) -> None:
    bodies: Bodies = [
        daemon_set(),
        node("n1", efa=0, instance_type=instance_type),
        *plugin_pods(["n1"]),
        *trainjob_pods("bert", ["n1"]),
    ]
    workloads = only_status(bodies).workloads
    assert workloads is not None and workloads.without_fabric.pods == without


def test_offenders_are_sorted_and_at_most_twenty() -> None:
    bodies = ready_pool()
    bodies += [
        workload_pod("n1", f"solo-{index:02d}", owner=owner_reference("Job", "batch/v1", f"job-{index:02d}"))
        for index in range(25)
    ]
    workloads = only_status(bodies).workloads
    assert workloads is not None
    assert workloads.without_fabric.workloads == 25
    assert [o.name for o in workloads.offenders] == [f"job-{index:02d}" for index in range(20)]


def test_a_claim_of_the_fabrics_device_class_is_a_request() -> None:
    bodies: Bodies = [dranet_daemon_set(), node("d1", efa=None), resource_slice("d1"), *dranet_pods(["d1"])]
    claim = {"name": "efa", "resourceClaimTemplateName": "efa-32"}
    bodies.append(workload_pod("d1", "claimed", claims=[claim]))
    # Until the template is read, the pod is not judged: no false FabricNotRequested.
    unknown = only_status(bodies).workloads
    assert unknown is not None and (unknown.requesting_fabric.pods, unknown.without_fabric.pods) == (0, 0)
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "efa-32", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "efa", "exactly": {"deviceClassName": "efa.networking.k8s.aws", "count": 32}}]
                }
            }
        },
    }
    index = facts_of([*bodies, template])
    evaluation = evaluate_bodies([*bodies, template])
    assert index.claim_classes[ClaimRef("ResourceClaimTemplate", "ml", "efa-32")] == frozenset(
        {"efa.networking.k8s.aws"}
    )
    (capability,) = evaluation.capabilities
    assert capability.status.workloads is not None
    assert capability.status.workloads.requesting_fabric.pods == 1


def test_workloads_never_change_ready() -> None:
    bodies = ready_pool()
    before = only_status(bodies)
    after = only_status([*bodies, *trainjob_pods("bert", ["n1", "n2"])])
    assert before.conditions == after.conditions


def test_a_phase_change_within_a_class_changes_no_status() -> None:
    bodies = ready_pool()
    pending = only_status([*bodies, workload_pod("n1", "job-0", efa=32, phase="Pending")])
    running = only_status([*bodies, workload_pod("n1", "job-0", efa=32, phase="Running")])
    assert pending == running


def test_workloads_off_publishes_none() -> None:
    config = build_config({"workloads": {"enabled": False}})
    (capability,) = evaluate_bodies([*ready_pool(), *trainjob_pods("bert", ["n1"])], config).capabilities
    assert capability.status.workloads is None
    assert "workloads" not in capability.status.to_json()


# --- Events -------------------------------------------------------------------------------------


def test_fabric_not_requested_says_what_to_request_and_where() -> None:
    bodies = [*ready_pool(), *trainjob_pods("bert", ["n1", "n2"])]
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "bert",
            "namespace": "ml",
            "ownerReferences": [owner_reference("TrainJob", "trainer.kubeflow.org/v1alpha1", "bert")],
        },
    }
    evaluation = evaluate_bodies([*bodies, jobset])
    (event,) = evaluation.workload_events
    assert event.reason == FABRIC_NOT_REQUESTED
    assert (event.involved.kind, event.involved.name, event.involved.namespace) == ("TrainJob", "bert", "ml")
    assert event.message == (
        "runs 2 pods on pool p5 where vpc.amazonaws.com/efa: 32 is Ready, but requests none: NCCL will use TCP "
        "sockets; request vpc.amazonaws.com/efa: 32 per node (TrainJob: spec.trainer.resourcesPerNode)"
    )
    again = evaluate_bodies(
        [*bodies, jobset, workload_pod("n1", "extra", owner=owner_reference("Job", "batch/v1", "other"))]
    )
    keys = {e.key for e in again.workload_events}
    assert event.key in keys  # one more pod elsewhere: the same problem, the same Event


def test_the_events_of_one_pool_share_its_wording_and_are_worded_when_read() -> None:
    # A start queues one Event per owner without the fabric and sends 20 a second: the queue
    # holds one wording per pool, not a message per owner.
    bodies = [*ready_pool(), *trainjob_pods("bert", ["n1", "n2"]), *trainjob_pods("gpt", ["n1"])]
    first, second = evaluate_bodies(bodies).workload_events
    assert isinstance(first.text, NotRequestedWording) and first.text is second.text
    assert {event.involved.name: event.message.split(" where ")[0] for event in (first, second)} == {
        "bert": "runs 2 pods on pool p5",
        "gpt": "runs 1 pod on pool p5",
    }


def test_an_event_built_from_a_status_leaves_no_model_on_its_capability() -> None:
    # The operator's writes hold their capability until they end, which takes minutes for a
    # first round of 5,000 pools: a model cached on it for the Events held ~100 MiB that long.
    evaluation = evaluate_bodies([*ready_pool(), *trainjob_pods("bert", ["n1", "n2"])])
    assert [event.reason for event in evaluation.workload_events] == [FABRIC_NOT_REQUESTED]
    gc.collect()
    models = [kept for kept in gc.get_objects() if isinstance(kept, FabricCapabilityStatus)]
    assert models == []


def test_insufficient_resources_reads_the_fit_error_not_the_preemption_text() -> None:
    message = (
        "0/8 nodes are available: 2 Insufficient cpu, 6 Insufficient vpc.amazonaws.com/efa. no new claims to "
        "deallocate, preemption: 0/8 nodes are available: 1 Insufficient nvidia.com/gpu, 7 No preemption victims."
    )
    assert insufficient_resources(message) == {"cpu", EFA}
    assert insufficient_resources("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.") == {GPU}


def test_an_unschedulable_request_names_the_pools_that_could_take_it() -> None:
    pending = workload_pod(
        None,
        "big-0",
        efa=32,
        owner=owner_reference("PyTorchJob", "kubeflow.org/v1", "big"),
        unschedulable=SCHEDULER_EFA_MESSAGE.format(nodes=4),
    )
    index = facts_of([*ready_pool(), pending])
    (efa,) = default_config().enabled_fabrics
    groups, _ = unschedulable_groups([efa], index)
    (group,) = groups
    assert (group.owner.kind, group.owner.name, group.pods, group.per_pod) == ("PyTorchJob", "big", 1, 32)
    event = unschedulable_event(efa, group, [ReadyPool("efa", "eks.amazonaws.com/nodegroup", "p5-training", 32)])
    assert event.message == (
        f"1 pod request vpc.amazonaws.com/efa: 32 and cannot be scheduled ({SCHEDULER_EFA_MESSAGE.format(nodes=4)}); "
        "pools where vpc.amazonaws.com/efa is Ready with enough per node: p5-training "
        "(eks.amazonaws.com/nodegroup=p5-training)"
    )
    none = unschedulable_event(efa, group, [ReadyPool("efa", "eks.amazonaws.com/nodegroup", "p4", 4)])
    assert none.message.endswith("no pool has vpc.amazonaws.com/efa Ready with 32 or more per node")


def test_a_ready_pool_s_count_is_its_nodes_or_else_what_its_empty_nodepool_launches() -> None:
    one_bucket = {"counts": [{"count": 32, "instanceTypes": 2}]}
    assert ready_count({"nodes": 4, "uniformCount": 32}) == 32
    assert ready_count({"nodes": 0, "launchable": one_bucket}) == 32
    # Mixed counts give no one figure; a pool with nodes but no one count has none either, whatever
    # its NodePool could launch; a boolean is not a count.
    mixed = {"counts": [{"count": 32, "instanceTypes": 1}, {"count": 16, "instanceTypes": 1}]}
    assert ready_count({"nodes": 0, "launchable": mixed}) is None
    assert ready_count({"nodes": 3, "launchable": one_bucket}) is None
    assert ready_count({"nodes": 1, "uniformCount": True}) is None
    assert ready_count({"nodes": 0}) is None


def test_a_long_fit_error_keeps_the_reason_it_is_read_for() -> None:
    """kube-scheduler sorts a FitError's reasons as text (FitError.Error), so the EFA reason
    comes after every "1 node(s) had untolerated taint": with a few dozen of them it fell past
    the cut, and the job that waited for EFA was never told."""
    taints = ", ".join(f"1 node(s) had untolerated taint {{team-{index:02d}: reserved}}" for index in range(40))
    message = f"0/105 nodes are available: {taints}, 64 Insufficient vpc.amazonaws.com/efa. preemption: 0/105 nodes"
    pending = workload_pod(
        None, "big-0", efa=32, owner=owner_reference("PyTorchJob", "kubeflow.org/v1", "big"), unschedulable=message
    )
    (efa,) = default_config().enabled_fabrics
    groups, _ = unschedulable_groups([efa], facts_of([*ready_pool(), pending]))
    (group,) = groups
    assert group.scheduler_message.startswith("0/105 nodes are available: 64 Insufficient vpc.amazonaws.com/efa")
    assert len(group.scheduler_message) < 200  # the taints are not kept
    # However long the scheduler's words, the Event keeps what fabriccap adds after them.
    long = dataclasses.replace(group, scheduler_message="0/105 nodes are available: " + "x" * 2000)
    event = unschedulable_event(efa, long, [ReadyPool("efa", "eks.amazonaws.com/nodegroup", "p5-training", 32)])
    assert len(event.message) <= MAX_MESSAGE and event.message.endswith("(eks.amazonaws.com/nodegroup=p5-training)")


def test_a_pending_pod_for_another_reason_is_not_counted() -> None:
    pending = workload_pod(None, "cpu-bound", efa=32, unschedulable="0/4 nodes are available: 4 Insufficient cpu.")
    (efa,) = default_config().enabled_fabrics
    groups, _ = unschedulable_groups([efa], facts_of([pending]))
    assert groups == ()


def test_a_volcano_job_is_not_a_batch_job() -> None:
    """Owners are identified by group and kind: a batch.volcano.sh Job is the top owner (not
    read as a batch Job), its Event names the Volcano field, and it never shares a key with a
    batch Job of the same name."""
    volcano = facts(workload_pod("n1", "v", owner=owner_reference("Job", "batch.volcano.sh/v1alpha1", "train")))
    batch = facts(workload_pod("n1", "b", owner=owner_reference("Job", "batch/v1", "train")))
    index = FactIndex()
    assert top_owner(volcano, index) == (volcano.owner, None)
    assert top_owner(batch, index)[1] is not None  # a batch Job is read for its own owner
    assert volcano.owner.key != batch.owner.key
    assert request_field(volcano.owner.api_version, "Job") == "spec.tasks[].template.spec.containers[].resources"
    assert request_field(batch.owner.api_version, "Job") == "spec.template.spec.containers[].resources"
    # A kind of an unknown group is trusted for nothing but being the top.
    assert request_field("evil.example/v1", "TrainJob") == UNKNOWN_REQUEST_FIELD
    learn_from_object(index, {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "train"}})
    assert index.owner_parents == {}


def test_a_leaderworkerset_pod_names_its_leaderworkerset_by_label() -> None:
    owner = owner_reference("StatefulSet", "apps/v1", "serve-0")
    found = facts(workload_pod("n1", "w", owner=owner, labels={"leaderworkerset.sigs.k8s.io/name": "serve"}))
    assert (found.owner.api_version, found.owner.kind, found.owner.name) == (
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "serve",
    )


def _leaderworkerset_pods() -> Bodies:
    """LWS v0.8.0's shape: the leader is a pod of StatefulSet ``serve``, its workers pods of
    StatefulSet ``serve-0``, all labelled with the LWS's name and no label with its uid."""
    labels = {"leaderworkerset.sigs.k8s.io/name": "serve", "leaderworkerset.sigs.k8s.io/group-index": "0"}
    leader = workload_pod("n1", "serve-0", owner=owner_reference("StatefulSet", "apps/v1", "serve"), labels=labels)
    worker = workload_pod("n2", "serve-0-1", owner=owner_reference("StatefulSet", "apps/v1", "serve-0"), labels=labels)
    return [leader, worker]


LEADERWORKERSET_BODY = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "serve", "namespace": "ml", "uid": "6f1f9d0c-lws-serve"},
}


def test_a_leaderworkerset_is_read_for_the_uid_its_pods_do_not_carry() -> None:
    """Its Events are found by uid (``kubectl describe lws``), which only the LWS itself tells:
    until it is read the evaluation asks for it, and its Event waits (publisher)."""
    evaluation = evaluate_bodies([*ready_pool(), *_leaderworkerset_pods()])
    assert ("LeaderWorkerSet", "ml", "serve") in {(key.kind, key.namespace, key.name) for key in evaluation.lookups}
    evaluation = evaluate_bodies([*ready_pool(), *_leaderworkerset_pods(), LEADERWORKERSET_BODY])
    (event,) = evaluation.workload_events
    assert (event.reason, event.involved.kind, event.involved.name) == (
        FABRIC_NOT_REQUESTED,
        "LeaderWorkerSet",
        "serve",
    )
    assert event.involved.uid == "6f1f9d0c-lws-serve"
    assert not evaluation.lookups


def test_a_re_created_leaderworkerset_is_read_again_once_for_its_uid() -> None:
    """An LWS deleted and created again (``kubectl replace --force``): garbage collection
    removes the old leader pod first and its worker StatefulSet's pods after, so the new
    leader pod (same name) comes while an old worker lingers. Read once by name, the old uid
    stayed while any pod led to the name: the new LWS's Events carried it (``kubectl describe``
    of the new LWS lists none) and their key was the old one's, which the outbox knew, so they
    were never sent. A leader pod names its leader StatefulSet, which the LWS controls and
    which is made anew with it: a new one is read again, once, whatever its pods."""
    labels = {"leaderworkerset.sigs.k8s.io/name": "serve"}

    def pod(name: str, statefulset: str, uid: str) -> dict[str, Any]:
        owner = {**owner_reference("StatefulSet", "apps/v1", statefulset), "uid": uid}
        return workload_pod("n1", name, owner=owner, labels=labels)

    def lws(uid: str) -> dict[str, Any]:
        return {**LEADERWORKERSET_BODY, "metadata": {"name": "serve", "namespace": "ml", "uid": uid}}

    index = facts_of([pod("serve-0", "serve", "old-leader-sts"), pod("serve-0-1", "serve-0", "old-worker-sts")])
    old_read = top_owner(index.workload_pods[("ml", "serve-0-1")], index)[1]
    assert old_read is not None and old_read.generation == "old-leader-sts"
    assert learn_lookup(index, old_read, lws("old-lws-uid"))
    index.remove(WORKLOAD_POD_FACTS, ("ml", "serve-0"))
    # the new LWS: its leader pod, with the old worker still there
    index.put(WORKLOAD_POD_FACTS, facts(pod("serve-0", "serve", "new-leader-sts")))
    owner, new_read = top_owner(index.workload_pods[("ml", "serve-0")], index)
    assert owner.uid == "" and new_read is not None and new_read.generation == "new-leader-sts"
    assert top_owner(index.workload_pods[("ml", "serve-0-1")], index)[1] == new_read  # one read for all
    assert not learn_lookup(index, old_read, lws("old-lws-uid"))  # a read of the old one, answered late
    assert learn_lookup(index, new_read, lws("new-lws-uid"))
    # more pods of the new LWS: its workers, another leader of the same StatefulSet; no read
    for body in (pod("serve-0-2", "serve-0", "new-worker-sts"), pod("serve-1", "serve", "new-leader-sts")):
        index.put(WORKLOAD_POD_FACTS, facts(body))
    for key in index.workload_pods:
        owner, missing = top_owner(index.workload_pods[key], index)
        assert (owner.uid, missing) == ("new-lws-uid", None)
    for key in list(index.workload_pods):
        index.remove(WORKLOAD_POD_FACTS, key)
    assert (index.owner_parents, index.owner_uids, index.owner_generations) == ({}, {}, {})


# KubeRay ray-operator v1.5.0: the RayJob controller generates RayCluster "<rayjob>-<suffix>",
# with a controller reference to the RayJob and ray.io/originated-from-* labels
# (controllers/ray/rayjob_controller.go:924-944); its pods carry the cluster's ray.io/cluster,
# node-type and group labels (controllers/ray/common/pod.go:629-652, labelPod) and are
# controlled by the RayCluster.
RAYJOB = owner_reference("RayJob", "ray.io/v1", "bert")
RAYCLUSTER_BODY = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {
        "name": "bert-x7k2p",
        "namespace": "ml",
        "labels": {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "bert"},
        "ownerReferences": [RAYJOB],
    },
}


def _rayjob_worker(name: str, node_name: str) -> dict[str, Any]:
    labels = {"ray.io/cluster": "bert-x7k2p", "ray.io/node-type": "worker", "ray.io/group": "gpu"}
    return workload_pod(node_name, name, owner=owner_reference("RayCluster", "ray.io/v1", "bert-x7k2p"), labels=labels)


def test_a_rayjob_is_the_owner_of_its_generated_raycluster_s_pods() -> None:
    """The user wrote the RayJob: its Event and its offender entry name it, and the request
    field the RayJob's (not that of a RayCluster KubeRay may delete when the job is done)."""
    found = facts(_rayjob_worker("w", "n1"))
    index = FactIndex()
    assert top_owner(found, index) == (found.owner, LookupKey("RayCluster", "ml", "bert-x7k2p", "ray.io/v1"))
    bodies = [*ready_pool(), _rayjob_worker("bert-x7k2p-gpu-worker-a", "n1"), RAYCLUSTER_BODY]
    evaluation = evaluate_bodies(bodies)
    (event,) = evaluation.workload_events
    assert (event.reason, event.involved.kind, event.involved.name) == (FABRIC_NOT_REQUESTED, "RayJob", "bert")
    assert event.involved.uid == RAYJOB["uid"]
    assert "(RayJob: spec.rayClusterSpec.workerGroupSpecs[].template.spec.containers[].resources)" in event.message
    (capability,) = evaluation.capabilities
    workloads = capability.status.workloads
    assert workloads is not None
    assert [(o.kind, o.name) for o in workloads.offenders] == [("RayJob", "bert")]


def test_a_raycluster_of_its_own_is_the_top_once_read() -> None:
    found = facts(_rayjob_worker("w", "n1"))
    index = FactIndex()
    assert learn_from_object(index, {**RAYCLUSTER_BODY, "metadata": {"name": "bert-x7k2p", "namespace": "ml"}})
    assert top_owner(found, index) == (found.owner, None)


def test_offenders_name_their_owner_by_api_version() -> None:
    """A Volcano Job and a batch Job of one name are two offenders, and the status says which is
    which (SPEC: offenders are ``{namespace, kind, apiVersion, name, pods, problem}``)."""
    bodies = ready_pool()
    bodies.append(workload_pod("n1", "v", owner=owner_reference("Job", "batch.volcano.sh/v1alpha1", "train")))
    bodies.append(workload_pod("n1", "b", owner=owner_reference("Job", "batch/v1", "train")))
    bodies.append(workload_pod("n1", "solo"))
    workloads = only_status(bodies).workloads
    assert workloads is not None
    assert [(o.kind, o.api_version, o.name) for o in workloads.offenders] == [
        ("Job", "batch.volcano.sh/v1alpha1", "train"),
        ("Job", "batch/v1", "train"),
        ("Pod", "v1", "solo"),
    ]
    assert workloads.offenders[0].to_json()["apiVersion"] == "batch.volcano.sh/v1alpha1"


def test_a_status_written_before_offenders_had_an_api_version_still_reads() -> None:
    """The fail-closed rewrite before the first listing reads back what the previous version wrote."""
    workloads = only_status([*ready_pool(), workload_pod("n1", "solo")]).workloads
    assert workloads is not None
    older = workloads.to_json()
    for offender in older["offenders"]:
        del offender["apiVersion"]
    read = WorkloadsStatus.model_validate(older)
    assert [(o.kind, o.api_version, o.name) for o in read.offenders] == [("Pod", None, "solo")]


def test_a_pod_holding_a_claim_made_from_a_template_is_judged_by_that_claim() -> None:
    """Once the resourceclaim controller made the pod's claim from its template
    (status.resourceClaimStatuses), the claim is what the pod holds. The template was read
    instead, and one deleted or renamed since (a Helm upgrade), or not readable (403), read as
    "a claim of no fabric class": a job holding 32 EFA devices was told it requests none."""
    config = default_config()
    claim = {"name": "efa", "resourceClaimTemplateName": "efa-32"}
    pod = workload_pod("d1", "train-0", claims=[claim], owner=owner_reference("PyTorchJob", "kubeflow.org/v1", "train"))
    pod["status"]["resourceClaimStatuses"] = [{"name": "efa", "resourceClaimName": "train-0-efa-x7k2p"}]
    made = allocated_claim(
        "d1", [f"efa{i}" for i in range(32)], name="train-0-efa-x7k2p", namespace="ml", pod_name="train-0"
    )
    index = facts_of([*dra_pool(count=32, nodes=1), pod, made], config)
    learn_lookup(index, LookupKey("ResourceClaimTemplate", "ml", "efa-32", "resource.k8s.io/v1"), None)  # gone
    evaluation = evaluate(config, index)
    (capability,) = evaluation.capabilities
    workloads = capability.status.workloads
    assert workloads is not None
    assert (workloads.requesting_fabric.pods, workloads.without_fabric.pods) == (1, 0)
    assert [event.reason for event in evaluation.workload_events] == []


def _pod_with_a_first_available_claim(job: str, chosen: str) -> list[dict[str, Any]]:
    """Pod ``<job>-0`` of a PyTorchJob, and the claim made for it from a template that prefers 32
    EFA devices and falls back to one plain NIC (``firstAvailable``), allocated with the
    subrequest ``chosen``."""
    pod_name, claim_name = f"{job}-0", f"{job}-0-net-x7k2p"
    claim = {"name": "net", "resourceClaimTemplateName": "efa-or-ena"}
    pod = workload_pod("d1", pod_name, claims=[claim], owner=owner_reference("PyTorchJob", "kubeflow.org/v1", job))
    pod["status"]["resourceClaimStatuses"] = [{"name": "net", "resourceClaimName": claim_name}]
    made = allocated_claim("d1", [f"{job}0"], name=claim_name, namespace="ml", pod_name=pod_name)
    efa = {"name": "efa", "deviceClassName": "efa.networking.k8s.aws", "allocationMode": "ExactCount", "count": 32}
    ena = {"name": "ena", "deviceClassName": "ena.networking.k8s.aws", "allocationMode": "ExactCount", "count": 1}
    made["spec"] = {"devices": {"requests": [{"name": "net", "firstAvailable": [efa, ena]}]}}
    for result in made["status"]["allocation"]["devices"]["results"]:
        result["request"] = f"net/{chosen}"  # kubernetes/api resource/v1 DeviceRequestAllocationResult.Request
    return [pod, made]


def test_a_first_available_claim_holds_the_fabric_only_when_its_fabric_subrequest_was_chosen() -> None:
    """A claim's firstAvailable subrequests are alternatives, and the scheduler picks one. Every
    class the claim could get counted: a job that prefers EFA and got the plain-NIC fallback was
    counted as requesting the fabric, and ran NCCL over sockets unwarned. Once allocated, the
    claim holds the classes of the subrequests its devices were allocated for; before, any."""
    config = default_config()
    fallback = _pod_with_a_first_available_claim("fallback", "ena")
    preferred = _pod_with_a_first_available_claim("preferred", "efa")
    index = facts_of([*dra_pool(count=32, nodes=1), *fallback, *preferred], config)
    evaluation = evaluate(config, index)
    workloads = evaluation.capabilities[0].status.workloads
    assert workloads is not None
    assert (workloads.requesting_fabric.pods, workloads.without_fabric.pods) == (1, 1)
    events = [(event.reason, event.involved.kind, event.involved.name) for event in evaluation.workload_events]
    assert events == [(FABRIC_NOT_REQUESTED, "PyTorchJob", "fallback")]
    _, made = fallback
    del made["status"]  # not allocated yet: any of its subrequests may be chosen
    assert request_classes_of(made) == (("net", "efa.networking.k8s.aws"), ("net", "ena.networking.k8s.aws"))


def _pod_with_a_claim_named_by(job: str, container: dict[str, Any]) -> Bodies:
    """A trainer (8 GPUs) whose pod claims EFA, the claim named by ``container`` (the trainer
    itself when it is the trainer's name ``node``, else an init container), and the claim."""
    claim_name = f"{job}-efa"
    pod_name = f"{job}-0"
    claim = {"name": "net", "resourceClaimName": claim_name}
    owner = owner_reference("PyTorchJob", "kubeflow.org/v1", job)
    pod = workload_pod("d1", pod_name, claims=[claim], owner=owner)
    if container["name"] != "node":
        del pod["spec"]["containers"][0]["resources"]["claims"]
        pod["spec"]["initContainers"] = [{**container, "image": "x", "resources": {"claims": [{"name": "net"}]}}]
    made = allocated_claim("d1", [f"{job}0"], name=claim_name, namespace="ml", pod_name=pod_name)
    return [pod, made]


def test_a_claim_only_a_plain_init_container_names_is_not_the_jobs() -> None:
    """The rule of an init container's extended resource, for a claim: kubelet hands a claim's
    devices only to the containers whose ``resources.claims`` name it (pkg/kubelet/cm/dra/
    manager.go GetResources). A trainer whose EFA claim only an ``efa-preflight`` init container
    names holds no EFA device, and NCCL uses sockets; with a device plugin the same pod was
    withoutFabric, with DRA requestingFabric, and its job was never warned. A sidecar runs
    beside the trainer: its claim counts, as the trainer's own does. The scheduler still fits
    every claim of the pod (``WorkloadPodFacts.claims``)."""
    preflight = _pod_with_a_claim_named_by("preflight", {"name": "efa-preflight"})
    sidecar = _pod_with_a_claim_named_by("sidecar", {"name": "efa-proxy", "restartPolicy": "Always"})
    trainer = _pod_with_a_claim_named_by("trainer", {"name": "node"})
    found = facts(preflight[0])
    claim = ClaimRef("ResourceClaim", "ml", "preflight-efa")
    assert found is not None and found.claims == (claim,)
    assert found.init_claims == (InitClaim(claim, frozenset()),)
    assert facts(sidecar[0]).init_claims == facts(trainer[0]).init_claims == ()
    evaluation = evaluate_bodies([*dra_pool(count=32, nodes=1), *preflight, *sidecar, *trainer])
    workloads = evaluation.capabilities[0].status.workloads
    assert workloads is not None
    assert (workloads.requesting_fabric.pods, workloads.without_fabric.pods) == (2, 1)
    events = [(event.reason, event.involved.kind, event.involved.name) for event in evaluation.workload_events]
    assert events == [(FABRIC_NOT_REQUESTED, "PyTorchJob", "preflight")]


def _pod_whose_claim_is_split(job: str, trainer_holds: str | None) -> Bodies:
    """A trainer (8 GPUs) whose pod claim has an EFA and a GPU request, and an
    ``efa-preflight`` init container naming the claim's ``efa`` request. The trainer names the
    request ``trainer_holds`` of it (None: all of it)."""
    pod_name, claim_name = f"{job}-0", f"{job}-0-devs"
    owner = owner_reference("PyTorchJob", "kubeflow.org/v1", job)
    pod = workload_pod("d1", pod_name, claims=[{"name": "devs", "resourceClaimName": claim_name}], owner=owner)
    trainer_claim = {"name": "devs"} if trainer_holds is None else {"name": "devs", "request": trainer_holds}
    pod["spec"]["containers"][0]["resources"]["claims"] = [trainer_claim]
    preflight = {"name": "devs", "request": "efa"}
    pod["spec"]["initContainers"] = [{"name": "efa-preflight", "image": "x", "resources": {"claims": [preflight]}}]
    made = allocated_claim("d1", [f"{job}0"], name=claim_name, namespace="ml", pod_name=pod_name)
    made["spec"]["devices"]["requests"] = [
        {"name": request, "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1}}
        for request, device_class in (("efa", "efa.networking.k8s.aws"), ("gpu", "gpu.nvidia.com"))
    ]
    result = made["status"]["allocation"]["devices"]["results"][0]
    made["status"]["allocation"]["devices"]["results"] = [
        {**result, "request": request, "device": f"{job}-{request}"} for request in ("efa", "gpu")
    ]
    return [pod, made]


def test_a_claim_request_only_a_plain_init_container_names_is_not_the_jobs() -> None:
    """A container may name one request of a pod claim (``resources.claims[].request``: "If
    empty, everything from the claim is made available, otherwise only the result of this
    request", k8s.io/api core/v1 ``ResourceClaim.Request``). A trainer naming the claim's GPU
    request beside an ``efa-preflight`` naming its EFA request holds no EFA device, and NCCL
    uses sockets: the claim counted whole because the trainer named it, where the same split
    in the scheduler's claim (KEP-5004) counted request by request. A trainer naming the EFA
    request, or all of the claim, holds the fabric."""
    split = _pod_whose_claim_is_split("split", "gpu")
    efa = _pod_whose_claim_is_split("efa", "efa")
    whole = _pod_whose_claim_is_split("whole", None)
    claim = ClaimRef("ResourceClaim", "ml", "split-0-devs")
    assert facts(split[0]).init_claims == (InitClaim(claim, frozenset({"gpu"})),)
    assert facts(whole[0]).init_claims == ()
    evaluation = evaluate_bodies([*dra_pool(count=32, nodes=1), *split, *efa, *whole])
    workloads = evaluation.capabilities[0].status.workloads
    assert workloads is not None
    assert (workloads.requesting_fabric.pods, workloads.without_fabric.pods) == (2, 1)
    events = [(event.reason, event.involved.kind, event.involved.name) for event in evaluation.workload_events]
    assert events == [(FABRIC_NOT_REQUESTED, "PyTorchJob", "split")]


def _pod_served_from_dra(job: str, mapped: list[tuple[str, str, str]]) -> Bodies:
    """KEP-5004: a trainer (8 GPUs) after an ``efa-preflight`` init container asking for
    ``efa: 1``, both served from DRA: the scheduler's claim for the pod, its requests of the EFA
    and the GPU class, and the pod's ``status.extendedResourceClaimStatus`` mapping each
    (container, resource) to its request, as kube-scheduler writes them
    (extendeddynamicresources.go createRequestsAndMappings, patchPodExtendedResourceClaimStatus).
    ``mapped``: (container, resource, request)."""
    pod_name = f"{job}-0"
    claim_name = f"{pod_name}-extended-resources-x7k2p"
    pod = workload_pod("d1", pod_name, owner=owner_reference("PyTorchJob", "kubeflow.org/v1", job))
    pod["spec"]["initContainers"] = [{"name": "efa-preflight", "image": "x", "resources": {"limits": {EFA: "1"}}}]
    mappings = [{"containerName": c, "resourceName": r, "requestName": q} for c, r, q in mapped]
    pod["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": claim_name, "requestMappings": mappings}
    made = allocated_claim("d1", [f"{job}0"], name=claim_name, namespace="ml", pod_name=pod_name)
    classes = {EFA: "efa.networking.k8s.aws", GPU: "gpu.nvidia.com"}
    made["spec"]["devices"]["requests"] = [
        {"name": q, "exactly": {"deviceClassName": classes[r], "allocationMode": "ExactCount", "count": 1}}
        for q, r in sorted({(q, r) for _, r, q in mapped})
    ]
    result = made["status"]["allocation"]["devices"]["results"][0]
    made["status"]["allocation"]["devices"]["results"] = [
        {**result, "request": q, "device": f"{job}-{q}"} for q in sorted({q for *_, q in mapped})
    ]
    return [pod, made]


def test_the_schedulers_claim_for_extended_resources_is_the_jobs_by_its_request_mappings() -> None:
    """Where EFA is served from DRA (KEP-5004), the scheduler makes one claim of the pod's
    extended resources from every container, plain init containers included, and names it in
    ``status.extendedResourceClaimStatus``. The preflight's EFA was init-only as a resource, yet
    the claim's EFA class made the pod requestingFabric once it was scheduled. Only the
    requests that ``requestMappings`` map to an app container or a sidecar are the job's: the
    claim's GPU request the trainer holds is not the fabric, and a trainer mapped to an EFA
    request (one it reuses with the init container, or its own) holds the fabric."""
    preflight = _pod_served_from_dra(
        "preflight",
        [("node", GPU, "container-1-request-0"), ("efa-preflight", EFA, "container-0-request-0")],
    )
    trainer = _pod_served_from_dra(
        "trainer",
        [("node", EFA, "container-1-request-0"), ("efa-preflight", EFA, "container-1-request-0")],
    )
    found = facts(preflight[0])
    claim = ClaimRef("ResourceClaim", "ml", "preflight-0-extended-resources-x7k2p")
    assert found is not None and found.claims == (claim,) and found.init_only == (EFA,)
    assert found.init_claims == (InitClaim(claim, frozenset({"container-1-request-0"})),)
    assert facts(trainer[0]).init_claims == ()
    evaluation = evaluate_bodies([*dra_pool(count=32, nodes=1), *preflight, *trainer])
    workloads = evaluation.capabilities[0].status.workloads
    assert workloads is not None
    assert (workloads.requesting_fabric.pods, workloads.without_fabric.pods) == (1, 1)
    events = [(event.reason, event.involved.kind, event.involved.name) for event in evaluation.workload_events]
    assert events == [(FABRIC_NOT_REQUESTED, "PyTorchJob", "preflight")]


def test_a_request_mapping_that_names_no_container_by_a_string_is_the_jobs() -> None:
    """``requestMappings[].containerName`` and a container's ``name`` are strings from any API
    server, which decodes typed fields; from any other source (a proxy, a fake) one that is a
    list raised TypeError (unhashable) out of the extractor, where every other malformed field
    is a FactsError. It names no plain init container: its request is the job's."""
    trainer_request, preflight_request = "container-1-request-0", "container-0-request-0"
    pod, _ = _pod_served_from_dra("odd", [("node", EFA, trainer_request), ("efa-preflight", EFA, preflight_request)])
    mappings = pod["status"]["extendedResourceClaimStatus"]["requestMappings"]
    mappings[1]["containerName"] = ["efa-preflight"]
    pod["spec"]["initContainers"].append({"name": ["x"], "image": "x"})
    found = facts(pod)
    assert found is not None and found.init_claims == ()
    mappings[0]["containerName"] = {"node": 1}
    mappings[1]["containerName"] = "efa-preflight"
    claim = ClaimRef("ResourceClaim", "ml", "odd-0-extended-resources-x7k2p")
    assert facts(pod).init_claims == (InitClaim(claim, frozenset({trainer_request})),)
