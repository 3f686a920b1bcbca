"""What lookups learnt is kept while a live workload pod leads to it, and no longer (reliability
round 3, H7)."""

from __future__ import annotations

from typing import Any

from fabriccap.core.config import default_config
from fabriccap.core.facts import ClaimRef, FactsExtractor, ObjectRef
from fabriccap.core.index import WORKLOAD_POD_FACTS, FactIndex, OwnerKey
from fabriccap.kube.kinds import RESOURCE_CLAIM
from fabriccap_devtools.world import allocated_claim, owner_reference, workload_pod


class RecordingIndex(FactIndex):
    def __init__(self) -> None:
        super().__init__()
        self.released: list[OwnerKey] = []

    def _owner_released(self, owner: OwnerKey) -> None:
        self.released.append(owner)


def put(index: FactIndex, body: dict[str, Any]) -> None:
    facts = FactsExtractor(default_config()).workload_pod(body)
    assert facts is not None
    index.put(WORKLOAD_POD_FACTS, facts)


def job_pod(name: str, job: str, **kwargs: Any) -> dict[str, Any]:
    return workload_pod("n1", name, owner=owner_reference("Job", "batch/v1", job), **kwargs)


API_VERSIONS = {"Job": "batch/v1", "JobSet": "jobset.x-k8s.io/v1alpha2", "TrainJob": "trainer.kubeflow.org/v1alpha1"}


def ref(kind: str, name: str) -> ObjectRef:
    return ObjectRef(API_VERSIONS[kind], kind, "ml", name)


def test_an_owner_chain_is_forgotten_with_its_last_pod() -> None:
    index = RecordingIndex()
    put(index, job_pod("a", "j1"))
    put(index, job_pod("b", "j2"))
    index.learn_owner(("Job.batch", "ml", "j1"), ref("JobSet", "s"))
    index.learn_owner(("Job.batch", "ml", "j2"), ref("JobSet", "s"))
    index.learn_owner(("JobSet.jobset.x-k8s.io", "ml", "s"), ref("TrainJob", "t"))
    index.remove(WORKLOAD_POD_FACTS, ("ml", "a"))
    # j2 still leads to the JobSet and the TrainJob: only j1 goes.
    assert set(index.owner_parents) == {("Job.batch", "ml", "j2"), ("JobSet.jobset.x-k8s.io", "ml", "s")}
    assert index.owner_children == {
        ("JobSet.jobset.x-k8s.io", "ml", "s"): {("Job.batch", "ml", "j2")},
        ("TrainJob.trainer.kubeflow.org", "ml", "t"): {("JobSet.jobset.x-k8s.io", "ml", "s")},
    }
    index.remove(WORKLOAD_POD_FACTS, ("ml", "b"))
    assert (index.owner_parents, index.owner_children, index.owner_pods) == ({}, {}, {})
    assert ("TrainJob.trainer.kubeflow.org", "ml", "t") in index.released


def test_a_pod_that_changes_keeps_what_it_still_names() -> None:
    index = FactIndex()
    put(index, job_pod("a", "j1"))
    index.learn_owner(("Job.batch", "ml", "j1"), None)
    put(index, job_pod("a", "j1", gpu=4))  # new facts, same owner
    assert index.owner_parents == {("Job.batch", "ml", "j1"): None}
    put(index, job_pod("a", "j2"))  # another owner: the first is forgotten
    assert index.owner_parents == {}


def test_the_uid_read_of_an_owner_is_forgotten_with_its_last_pod() -> None:
    # A LeaderWorkerSet's pods name it by a label without its uid: the read tells it.
    index, labels = FactIndex(), {"leaderworkerset.sigs.k8s.io/name": "serve"}
    put(index, workload_pod("n1", "a", owner=owner_reference("StatefulSet", "apps/v1", "serve"), labels=labels))
    key = ("LeaderWorkerSet.leaderworkerset.x-k8s.io", "ml", "serve")
    assert index.learn_owner(key, None, "lws-uid")
    assert not index.learn_owner(key, None, "lws-uid")  # nothing new
    assert index.owner_uids == {key: "lws-uid"}
    index.remove(WORKLOAD_POD_FACTS, ("ml", "a"))
    assert (index.owner_parents, index.owner_uids) == ({}, {})


def test_owners_that_own_each_other_are_forgotten_too() -> None:
    index = FactIndex()
    put(index, job_pod("a", "j1"))
    index.learn_owner(("Job.batch", "ml", "j1"), ref("Job", "j2"))
    index.learn_owner(("Job.batch", "ml", "j2"), ref("Job", "j1"))  # a loop (H1)
    index.remove(WORKLOAD_POD_FACTS, ("ml", "a"))
    assert (index.owner_parents, index.owner_children) == ({}, {})


def test_a_claims_device_classes_go_with_its_last_pod() -> None:
    index = FactIndex()
    claims = [{"name": "g", "resourceClaimTemplateName": "gpus"}]
    put(index, job_pod("a", "j1", claims=claims))
    put(index, job_pod("b", "j1", claims=claims))
    claim = ClaimRef("ResourceClaimTemplate", "ml", "gpus")
    index.learn_claim(claim, (("gpu", "gpu.nvidia.com"),))
    index.remove(WORKLOAD_POD_FACTS, ("ml", "a"))
    assert claim in index.claim_classes and index.claim_referenced(claim)
    index.remove(WORKLOAD_POD_FACTS, ("ml", "b"))
    assert index.claim_classes == {} and not index.claim_referenced(claim)


def two_class_claim(name: str, pod_name: str) -> dict[str, Any]:
    """A pod's claim allocated one EFA and one GPU device, by a request of each class."""
    made = allocated_claim("n1", ["dev0"], name=name, namespace="ml", pod_name=pod_name)
    made["spec"]["devices"]["requests"] = [
        {"name": request, "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1}}
        for request, device_class in (("efa", "efa.networking.k8s.aws"), ("gpu", "gpu.nvidia.com"))
    ]
    result = made["status"]["allocation"]["devices"]["results"][0]
    made["status"]["allocation"]["devices"]["results"] = [
        {**result, "request": "efa", "device": "e0"},
        {**result, "request": "gpu", "device": "g0"},
    ]
    return made


def test_a_claim_read_after_its_pod_went_leaves_nothing() -> None:
    """The resourceclaim controller updates a pod's claim once the pod is gone (it drops
    ``status.reservedFor``, deallocates), then deletes it (kubernetes pkg/controller/resourceclaim/
    controller.go, syncClaim). The claim watch learnt every claim it read: that last update put
    the classes back, and nothing forgot them again. One entry per churned pod, for good."""
    index = FactIndex()
    extractor = FactsExtractor(default_config())
    for i in range(3):
        pod_name, claim_name = f"job{i}-0", f"job{i}-0-net-abcde"
        put(index, job_pod(pod_name, f"job{i}", claims=[{"name": "net", "resourceClaimName": claim_name}]))
        claim = two_class_claim(claim_name, pod_name)
        RESOURCE_CLAIM.upsert(index, extractor, claim)
        assert index.claim_request_classes[ClaimRef("ResourceClaim", "ml", claim_name)]
        index.remove(WORKLOAD_POD_FACTS, ("ml", pod_name))
        del claim["status"]["reservedFor"]
        RESOURCE_CLAIM.upsert(index, extractor, claim)
        RESOURCE_CLAIM.delete(index, claim)
    assert (index.claim_classes, index.claim_request_classes, index.claims) == ({}, {}, {})


def test_a_claim_read_before_a_pod_names_it_is_learnt_when_one_does() -> None:
    """The listing of claims ends long before that of 100,000 pods, and a template's claim is
    made before the pod's status names it: the classes read then are what the pod is judged
    by, with no read of the claim again. A claim no workload pod names is kept only as the
    watch holds it, and goes with it."""
    index = FactIndex()
    extractor = FactsExtractor(default_config())
    gpus = allocated_claim("n1", ["gpu0"], name="gpus", namespace="ml", device_class="gpu.nvidia.com")
    RESOURCE_CLAIM.upsert(index, extractor, gpus)
    claim = ClaimRef("ResourceClaim", "ml", "gpus")
    assert claim not in index.claim_classes
    put(index, job_pod("a", "j1", claims=[{"name": "g", "resourceClaimName": "gpus"}]))
    assert index.claim_classes == {claim: frozenset({"gpu.nvidia.com"})}
    index.remove(WORKLOAD_POD_FACTS, ("ml", "a"))
    RESOURCE_CLAIM.delete(index, gpus)
    assert (index.claim_classes, index.claims) == ({}, {})


def test_what_is_referenced_says_whether_an_answer_may_be_kept() -> None:
    index = FactIndex()
    put(index, job_pod("a", "j1"))
    index.learn_owner(("Job.batch", "ml", "j1"), ref("JobSet", "s"))
    assert index.owner_referenced(("Job.batch", "ml", "j1")) and index.owner_referenced(
        ("JobSet.jobset.x-k8s.io", "ml", "s")
    )
    assert not index.owner_referenced(("Job.batch", "ml", "other"))
