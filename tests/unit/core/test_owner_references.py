"""Owner references a pod's creator wrote: followed only when they name an object an API server
could hold, and only in the pod's own namespace (reliability round 3, S3 and S4; issue 27 item 9)."""

from __future__ import annotations

from typing import Any

import pytest

from fabriccap.core.config import default_config
from fabriccap.core.facts import FactsExtractor, ObjectRef
from fabriccap.core.index import FactIndex
from fabriccap.core.references import (
    INVALID_API_VERSION,
    INVALID_KIND,
    INVALID_NAME,
    OncePerCause,
    RefusedReference,
    is_api_version,
    is_kind,
    is_object_name,
)
from fabriccap.core.workloads import LookupKey, learn_lookup
from fabriccap_devtools.world import owner_reference, trainjob_pods, workload_pod

# The shapes the adversary sent (S3), and the other ways out of a path segment.
HOSTILE_NAMES = [
    "../../../../api/v1/nodes?limit=0",
    "../../../../../../api/v1/pods",
    "x?watch=true",
    "../../namespaces/victim/pods/victim-pod",
    "%2e%2e",
    "..",
    "a" * 600_000,
    "x\ny",
    "x#fragment",
    "Upper",
    "a/b",
    "",
]
HOSTILE_KINDS = ["Evil\nName\x1b]0;pwned\x07", "Job/../../x", "Job?x=1", "1Job", "K" * 64]
HOSTILE_API_VERSIONS = [
    "../../api/v1",
    "batch/v1/../../x",
    "batch/V1",
    "batch/v1?watch=true",
    "/v1",
    "batch/",
    "x" * 300,
]


def pod_owned_by(reference: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return workload_pod("n1", "p", owner=reference, **kwargs)


def extract(body: dict[str, Any]) -> tuple[ObjectRef, list[RefusedReference]]:
    refused: list[RefusedReference] = []
    facts = FactsExtractor(default_config(), on_refused=refused.append).workload_pod(body)
    assert facts is not None
    return facts.owner, refused


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=lambda name: repr(name[:40]))
def test_an_owner_name_no_object_can_have_is_not_followed(name: str) -> None:
    owner, refused = extract(pod_owned_by({**owner_reference("Job", "batch/v1", "x"), "name": name}))
    if name == "":  # an empty name is no reference at all (the API server refuses it too)
        assert (owner.kind, owner.name) == ("Pod", "p") and refused == []
        return
    assert (owner.kind, owner.namespace, owner.name) == ("Pod", "ml", "p")  # reported as itself
    assert [entry.cause for entry in refused] == [INVALID_NAME]
    assert refused[0].holder == "Pod ml/p"
    assert len(refused[0].reference) <= 80 and "\n" not in refused[0].reference


@pytest.mark.parametrize("kind", HOSTILE_KINDS, ids=repr)
def test_an_owner_kind_that_is_no_kind_is_not_followed(kind: str) -> None:
    owner, refused = extract(pod_owned_by({**owner_reference("Job", "batch/v1", "x"), "kind": kind}))
    assert owner.kind == "Pod"
    assert [entry.cause for entry in refused] == [INVALID_KIND]


@pytest.mark.parametrize("api_version", HOSTILE_API_VERSIONS, ids=lambda value: repr(value[:40]))
def test_an_owner_api_version_that_is_none_is_not_followed(api_version: str) -> None:
    owner, refused = extract(pod_owned_by({**owner_reference("Job", "batch/v1", "x"), "apiVersion": api_version}))
    assert owner.kind == "Pod"
    assert [entry.cause for entry in refused] == [INVALID_API_VERSION]


def test_valid_references_are_followed_as_before() -> None:
    owner, refused = extract(pod_owned_by(owner_reference("Job", "batch/v1", "bert-node-0.x-1")))
    assert (owner.api_version, owner.kind, owner.name) == ("batch/v1", "Job", "bert-node-0.x-1")
    assert refused == []
    assert is_kind("TrainJob") and is_kind("PyTorchJob") and is_kind("foo-bar")
    assert is_api_version("v1") and is_api_version("trainer.kubeflow.org/v1alpha1") and is_api_version("")
    assert is_object_name("a" * 253) and not is_object_name("a" * 254)


def test_a_jobset_label_that_names_no_jobset_leaves_the_job_as_the_owner() -> None:
    (body,) = trainjob_pods("bert", ["n1"])
    body["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = "../../../../api/v1/nodes"
    owner, refused = extract(body)
    assert (owner.kind, owner.name) == ("Job", "bert-node-0")
    assert [entry.cause for entry in refused] == [INVALID_NAME]


def test_a_claim_name_no_claim_can_have_is_left_out() -> None:
    claims = [{"name": "efa", "resourceClaimTemplateName": "../../x"}, {"name": "ok", "resourceClaimName": "ok"}]
    refused: list[RefusedReference] = []
    facts = FactsExtractor(default_config(), on_refused=refused.append).workload_pod(
        workload_pod("n1", "p", claims=claims)
    )
    assert facts is not None
    assert [(claim.kind, claim.name) for claim in facts.claims] == [("ResourceClaim", "ok")]
    assert [entry.cause for entry in refused] == [INVALID_NAME]


@pytest.mark.parametrize("name", HOSTILE_NAMES[:-1], ids=lambda name: repr(name[:40]))
def test_an_owner_read_by_a_lookup_does_not_lead_to_a_hostile_reference(name: str) -> None:
    index = FactIndex()
    key = LookupKey("Job", "ml", "j", "batch/v1")
    body = {"kind": "Job", "metadata": {"name": "j", "ownerReferences": [{**owner_reference("Job", "batch/v1", name)}]}}
    refused: list[RefusedReference] = []
    learn_lookup(index, key, body, refused.append)
    assert index.owner_parents[("Job.batch", "ml", "j")] is None  # the Job is the top
    assert [entry.cause for entry in refused] == [INVALID_NAME]


def test_an_owner_is_followed_in_the_pods_namespace_whatever_its_body_says() -> None:
    index = FactIndex()
    key = LookupKey("Job", "ml", "j", "batch/v1")
    body = {
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "victim", "ownerReferences": [owner_reference("JobSet", "x/v1", "s")]},
    }
    learn_lookup(index, key, body)
    parent = index.owner_parents[("Job.batch", "ml", "j")]
    assert parent is not None and parent.namespace == "ml"


def test_each_cause_is_said_once() -> None:
    said: list[str] = []
    once = OncePerCause(said.append)
    extractor = FactsExtractor(default_config(), on_refused=once)
    for index in range(50):
        extractor.workload_pod(pod_owned_by({**owner_reference("Job", "batch/v1", "x"), "name": f"../{index}"}))
        extractor.workload_pod(pod_owned_by({**owner_reference("Job", "batch/v1", "x"), "kind": f"K/{index}"}))
    assert len(said) == 2
    assert "not followed: its name is not a DNS-1123 subdomain" in said[0]
