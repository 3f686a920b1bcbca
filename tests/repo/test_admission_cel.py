"""The admission policy as shipped (the chart's render with default values, the kustomize
component) is accepted by the oldest Kubernetes it is for: every expression compiles with the
CEL environment a kube-apiserver of that version creates a new policy with. The end-to-end
tests run the newest kube-apiserver only, whose CEL has functions older ones lack (a policy
that names one is refused with 422, and ``helm install`` fails).

And what it tells a user there, evaluated by the same library: the shapes the end-to-end
table cannot reach (a field of another release of a CRD than the one it installs) and the
rules beside them. tests/e2e/test_admission_kinds.py is the proof on a real server.

fabriccap_devtools.celcheck does the server's compile step with k8s.io/apiserver's own
compiler. Building it needs a Go toolchain (Go >= 1.25) and the Go module proxy: minutes the
first time. Without Go the tests skip on a laptop and fail under CI=true.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabriccap.core.workload_kinds import BATCH_JOB, JOBSET, POD, TRAINJOB, WorkloadKind
from fabriccap.observability.admission import OLDEST_KUBERNETES, POLICY_NAME, policy_yaml
from fabriccap_devtools.celcheck import (
    PolicyCompilation,
    Request,
    checker_binary,
    compile_policies,
    environment_of,
    evaluate,
)
from fabriccap_devtools.gotools import GoToolError
from support.rendering import MANIFESTS, render_helm

COMPONENT = MANIFESTS / "components" / "admission-policy" / "admission-policy.yaml"
NEWEST_KUBERNETES = "1.35"  # the e2e tests' kube-apiserver (fabriccap_devtools.controlplane)


@pytest.fixture(scope="module")
def checker() -> Path:
    if shutil.which("go") is None and os.environ.get("CI", "").lower() != "true":
        pytest.skip("building fabriccap_devtools/celcheck needs a Go toolchain on PATH (Go >= 1.25)")
    try:
        return checker_binary()
    except GoToolError as error:
        pytest.fail(str(error))


def expressions(policy: dict[str, object]) -> int:
    spec = policy["spec"]
    assert isinstance(spec, dict)
    validations = spec["validations"]
    return (
        len(spec["matchConditions"])
        + len(spec["variables"])
        + sum(1 + ("messageExpression" in validation) for validation in validations)
    )


def test_the_shipped_policy_compiles_on_the_oldest_kubernetes_it_is_for(checker: Path, tmp_path: Path) -> None:
    rendered = tmp_path / "chart.yaml"
    rendered.write_text(yaml.safe_dump_all(render_helm()))
    compiled = compile_policies([rendered, COMPONENT], OLDEST_KUBERNETES)
    shipped = [doc for doc in yaml.safe_load_all(COMPONENT.read_text()) if doc["kind"] == "ValidatingAdmissionPolicy"]
    assert [(policy.name, policy.failures) for policy in compiled] == [
        ("fabriccap-fabric-request", ()),  # the chart's, named after the release
        (POLICY_NAME, ()),
    ]
    # Every expression was compiled: nothing was skipped on the way.
    assert {policy.compiled for policy in compiled} == {expressions(shipped[0])}


def test_the_check_refuses_what_an_older_server_refuses(checker: Path, tmp_path: Path) -> None:
    """flatten() came to Kubernetes' CEL in 1.34, and a 1.34 server still compiles a new policy
    with 1.33's: the policy is refused there and accepted from 1.35 on."""
    documents = list(yaml.safe_load_all(policy_yaml()))
    documents[0]["spec"]["variables"].append({"name": "flat", "expression": "[[1], [2]].flatten()"})
    with_flatten = tmp_path / "flatten.yaml"
    with_flatten.write_text(yaml.safe_dump_all(documents))

    def failures(kubernetes: str) -> tuple[tuple[str, str], ...]:
        (policy,) = compile_policies([with_flatten], kubernetes)
        assert isinstance(policy, PolicyCompilation)
        return policy.failures

    ((field, message),) = failures("1.34")
    assert field.endswith("(flat)") and "undeclared reference to 'flatten'" in message
    assert failures(OLDEST_KUBERNETES) == failures("1.34")
    assert failures(NEWEST_KUBERNETES) == ()


def test_a_server_creates_policies_with_the_environment_of_the_minor_before_its_own() -> None:
    assert environment_of("1.30") == "1.29"
    assert environment_of("1.35") == "1.34"
    with pytest.raises(ValueError, match="not a Kubernetes"):
        environment_of("1.x")


# -- what it tells -------------------------------------------------------------------------------

POOL_KEY, POOL = "eks.amazonaws.com/nodegroup", "p5"
EFA = "vpc.amazonaws.com/efa"
GPU = {"nvidia.com/gpu": "8"}
GPU_EFA = {**GPU, EFA: "32"}
# What the operator writes for a Ready pool of nodes advertising 32 (the fields the policy reads).
PARAMS: dict[str, Any] = {
    "apiVersion": "fabriccap.dev/v1alpha1",
    "kind": "FabricCapability",
    "metadata": {"name": f"efa-{POOL}"},
    "status": {
        "fabric": "efa",
        "resourceName": EFA,
        "pool": {"key": POOL_KEY, "value": POOL},
        "uniformCount": 32,
        "recommendation": {"resourcesPerNode": {EFA: "32"}, "env": []},
    },
}


def container(name: str, limits: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "ml/trainer:1", **({"resources": {"limits": limits}} if limits else {}), **extra}


def pod_spec(limits: dict[str, Any] | None = GPU, **extra: Any) -> dict[str, Any]:
    """A pod spec that selects the pool, one container asking ``limits``."""
    return {"nodeSelector": {POOL_KEY: POOL}, "containers": [container("train", limits)], **extra}


def request(kind: WorkloadKind, name: str, spec: dict[str, Any]) -> Request:
    return Request(
        name=name,
        group=kind.group,
        version=kind.versions[0],
        resource=kind.plural,
        kind=kind.kind,
        object={"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": name}, "spec": spec},
        params=PARAMS,
    )


def job(name: str, spec: dict[str, Any]) -> Request:
    return request(BATCH_JOB, name, {"template": {"spec": spec}})


def jobset(name: str, spec: dict[str, Any]) -> Request:
    replicated = {"name": "workers", "replicas": 1, "template": {"spec": {"template": {"spec": spec}}}}
    return request(JOBSET, name, {"replicatedJobs": [replicated]})


def told(*requests: Request) -> dict[str, str | None]:
    """The warning the shipped policy gives each request on the oldest Kubernetes it is for."""
    evaluations = evaluate(COMPONENT, requests, OLDEST_KUBERNETES)
    assert [(e.name, e.matched, e.error) for e in evaluations] == [(r.name, True, None) for r in requests]
    return {e.name: e.warning for e in evaluations}


def test_a_template_on_the_pool_with_an_accelerator_and_no_fabric_is_warned(checker: Path) -> None:
    said = told(job("tcp", pod_spec(GPU)), job("efa", pod_spec(GPU_EFA)), job("cpu", pod_spec({"cpu": "4"})))
    assert said == {
        "tcp": (
            f"request {EFA}: 32 per node in Job: spec.template.spec.containers[].resources: Job tcp selects pool "
            f"{POOL} where {EFA}: 32 is Ready (FabricCapability efa-{POOL}), and requests an accelerator but no "
            f"{EFA}: NCCL will use TCP sockets"
        ),
        "efa": None,
        "cpu": None,
    }


def test_an_empty_list_of_claims_is_no_claim(checker: Path) -> None:
    """A CRD keeps `resourceClaims: []` (a chart's `{{ toYaml .Values.claims }}` with a `[]`
    default writes it); a claim, which may be the fabric's, is not judged."""
    claim = [{"name": "fabric", "resourceClaimTemplateName": "efa-32"}]
    said = told(
        jobset("no-claims", pod_spec(GPU, resourceClaims=[])), jobset("a-claim", pod_spec(GPU, resourceClaims=claim))
    )
    assert said["no-claims"] is not None and said["a-claim"] is None


def test_native_sidecars_count_as_the_operator_counts_them(checker: Path) -> None:
    """An init container with restartPolicy Always runs beside the job's containers and holds
    its devices: its requests count (core.facts ``requested_by_app``). A plain init container's
    end with it: they count for neither."""

    def pod(name: str, main: dict[str, Any] | None, init: dict[str, Any], restart_policy: str | None) -> Request:
        policy = {"restartPolicy": restart_policy} if restart_policy else {}
        spec = pod_spec(main, initContainers=[container("side", init, **policy)])
        return request(POD, name, spec)

    said = told(
        pod("gpu-in-sidecar", None, GPU, "Always"),
        pod("efa-in-sidecar", GPU, {EFA: "32"}, "Always"),
        pod("gpu-in-init", None, GPU, None),
        pod("efa-in-init", GPU, {EFA: "32"}, None),
    )
    assert {name for name, warning in said.items() if warning} == {"gpu-in-sidecar", "efa-in-init"}


def test_a_trainer_v2_1_trainjob_is_warned_where_its_override_chooses_the_pool(checker: Path) -> None:
    """Trainer v2.0 and v2.1 choose a TrainJob's pool by a pod template override of the `node`
    job (v2.1.0's CRD: podTemplateOverrides[].targetJobs[].name, .spec.nodeSelector); v2.2 on
    by a runtime patch (the e2e table, on v2.3.0's CRD)."""

    def trainjob(name: str, target: str, limits: dict[str, Any]) -> Request:
        override = {"targetJobs": [{"name": target}], "spec": {"nodeSelector": {POOL_KEY: POOL}}}
        spec = {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": limits}},
            "podTemplateOverrides": [override],
        }
        return request(TRAINJOB, name, spec)

    said = told(trainjob("tcp", "node", GPU), trainjob("efa", "node", GPU_EFA), trainjob("launcher", "launcher", GPU))
    assert said["tcp"] is not None and said["tcp"].startswith(
        f"request {EFA}: 32 per node in TrainJob: spec.trainer.resourcesPerNode: TrainJob tcp selects pool {POOL}"
    )
    assert said["efa"] is None and said["launcher"] is None
