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

import copy
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabriccap.core.config import parse_config
from fabriccap.core.workload_kinds import (
    BATCH_JOB,
    JOBSET,
    LEADERWORKERSET,
    MPIJOB,
    POD,
    PYTORCHJOB,
    RAYJOB,
    TRAINJOB,
    WorkloadKind,
)
from fabriccap.observability.admission import (
    ACCELERATORS_VARIABLE,
    FABRIC_REQUESTS_VARIABLE,
    OLDEST_KUBERNETES,
    POLICY_NAME,
    accelerator_resources,
    fabric_requests,
    policy_yaml,
)
from fabriccap_devtools.celcheck import (
    PolicyCompilation,
    Request,
    checker_binary,
    compile_policies,
    environment_of,
    evaluate,
)
from fabriccap_devtools.gotools import GoToolError
from support.rendering import CHART, MANIFESTS, RUN_TIMEOUT_SECONDS, helm_binary, one, render_helm

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


def test_the_command_says_which_expressions_a_server_refuses(checker: Path, tmp_path: Path) -> None:
    """``python -m fabriccap_devtools.celcheck``, as its docstring says to run it."""
    documents = list(yaml.safe_load_all(policy_yaml()))
    documents[0]["spec"]["variables"].append({"name": "flat", "expression": "[[1], [2]].flatten()"})
    with_flatten = tmp_path / "flatten.yaml"
    with_flatten.write_text(yaml.safe_dump_all(documents))

    def run(*files: Path) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "fabriccap_devtools.celcheck", OLDEST_KUBERNETES, *map(str, files)]
        return subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False)

    shipped = run(COMPONENT)
    assert shipped.returncode == 0 and f"{POLICY_NAME}: " in shipped.stdout and " 0 refused" in shipped.stdout
    refused = run(COMPONENT, with_flatten)
    assert refused.returncode == 1 and "1 refused" in refused.stdout and "'flatten'" in refused.stdout, refused


def test_a_server_creates_policies_with_the_environment_of_the_minor_before_its_own() -> None:
    assert environment_of("1.30") == "1.29"
    assert environment_of("1.35") == "1.34"
    with pytest.raises(ValueError, match="not a Kubernetes"):
        environment_of("1.x")


# -- what it tells -------------------------------------------------------------------------------

POOL_KEY, POOL = "eks.amazonaws.com/nodegroup", "p5"
EFA = "vpc.amazonaws.com/efa"
EFA_CLASS = "efa.networking.k8s.aws"  # the built-in profile's DeviceClass (aws-dranet's chart)
# The class's implicit extended resource (KEP-5004 DRAExtendedResource), which the scheduler
# serves from the class's devices.
EFA_CLASS_RESOURCE = f"deviceclass.resource.kubernetes.io/{EFA_CLASS}"
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


def told(*requests: Request, policy: Path = COMPONENT) -> dict[str, str | None]:
    """The warning the shipped policy (the kustomize component's, unless ``policy`` says)
    gives each request on the oldest Kubernetes it is for."""
    evaluations = evaluate(policy, requests, OLDEST_KUBERNETES)
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


def dra_pool(request: Request) -> Request:
    """``request`` against the params of a Ready pool whose nodes advertise EFA through DRA
    only: the recommendation is a ResourceClaimTemplate of the fabric's class."""
    params = copy.deepcopy(PARAMS)
    claim = {"deviceClassName": EFA_CLASS, "allocationMode": "ExactCount", "count": 32}
    template = {"spec": {"devices": {"requests": [{"name": "efa", "exactly": claim}]}}}
    params["status"]["recommendation"] = {"resourceClaimTemplate": template, "env": []}
    return dataclasses.replace(request, params=params)


def test_the_fabric_classs_implicit_resource_is_asking_for_the_fabric(checker: Path) -> None:
    """A pod asking for the fabric DeviceClass's implicit resource gets the class's devices
    (DRAExtendedResource) and the operator counts it in requestingFabric
    (core.workloads ``fabric_request_resources``): it is not warned about TCP, whether the pool's
    recommendation is the extended resource or a claim; another class's implicit resource, or one
    only a plain init container asks for, is no request of the fabric."""
    implicit = {**GPU, EFA_CLASS_RESOURCE: "32"}
    other_class = {**GPU, "deviceclass.resource.kubernetes.io/gpu.nvidia.com": "8"}
    in_init = pod_spec(GPU, initContainers=[container("check", {EFA_CLASS_RESOURCE: "32"})])
    said = told(
        job("implicit", pod_spec(implicit)),
        dra_pool(job("implicit-on-dra", pod_spec(implicit))),
        job("other-class", pod_spec(other_class)),
        job("implicit-in-init", in_init),
    )
    assert {name for name, warning in said.items() if warning} == {"other-class", "implicit-in-init"}


def test_a_trainjob_asking_for_the_implicit_resource_is_not_warned(checker: Path) -> None:
    """The same for a TrainJob's resourcesPerNode."""
    spec = {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {**GPU, EFA_CLASS_RESOURCE: "32"}}},
        "podTemplateOverrides": [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {POOL_KEY: POOL}}}],
    }
    assert told(request(TRAINJOB, "implicit", spec)) == {"implicit": None}


def test_a_warning_names_the_template_that_offends(checker: Path) -> None:
    """A kind with several pod templates sends the user to the one that asks for an
    accelerator without the fabric, not to a fixed one; a map of them (replica types) by its
    key, the first in order when several offend (a map's keys come in no fixed order), and a key
    that is not a replica type's name (unbounded text of the user's) as `*`."""

    def replicas(kind: WorkloadKind, field: str, name: str, specs: dict[str, dict[str, Any]]) -> Request:
        return request(kind, name, {field: {key: {"replicas": 1, "template": {"spec": s}} for key, s in specs.items()}})

    def rayjob(name: str, head: dict[str, Any], worker: dict[str, Any]) -> Request:
        cluster = {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": head}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "template": {"spec": worker}}],
        }
        return request(RAYJOB, name, {"entrypoint": "python train.py", "rayClusterSpec": cluster})

    one_gpu = {"nvidia.com/gpu": "1"}
    odd_key = "Worker'" + "x" * 80
    said = told(
        rayjob("ray-head", pod_spec(one_gpu), pod_spec(GPU_EFA)),
        rayjob("ray-worker", pod_spec({"cpu": "4"}), pod_spec(GPU)),
        replicas(
            MPIJOB, "mpiReplicaSpecs", "mpi-launcher", {"Launcher": pod_spec(one_gpu), "Worker": pod_spec(GPU_EFA)}
        ),
        replicas(PYTORCHJOB, "pytorchReplicaSpecs", "pt-both", {"Worker": pod_spec(GPU), "Master": pod_spec(GPU)}),
        replicas(
            PYTORCHJOB, "pytorchReplicaSpecs", "pt-odd-key", {odd_key: pod_spec(GPU), "Master": pod_spec(GPU_EFA)}
        ),
        request(
            LEADERWORKERSET,
            "lws-leader",
            {
                "leaderWorkerTemplate": {
                    "leaderTemplate": {"spec": pod_spec(GPU)},
                    "workerTemplate": {"spec": pod_spec(GPU_EFA)},
                }
            },
        ),
    )
    resources = "template.spec.containers[].resources"
    where = {name: re.search(r" per node in (\S+: \S+): ", warning or "") for name, warning in said.items()}
    assert {name: found and found[1] for name, found in where.items()} == {
        "ray-head": f"RayJob: spec.rayClusterSpec.headGroupSpec.{resources}",
        "ray-worker": f"RayJob: spec.rayClusterSpec.workerGroupSpecs[].{resources}",
        "mpi-launcher": f"MPIJob: spec.mpiReplicaSpecs.Launcher.{resources}",
        "pt-both": f"PyTorchJob: spec.pytorchReplicaSpecs.Master.{resources}",
        "pt-odd-key": f"PyTorchJob: spec.pytorchReplicaSpecs.*.{resources}",
        "lws-leader": "LeaderWorkerSet: spec.leaderWorkerTemplate.leaderTemplate.spec.containers[].resources",
    }


# -- the chart's accelerators: its config's ---------------------------------------------------------

# Intel Gaudi (dl1, dl2q: instances with EFA); its device plugin advertises habana.ai/gaudi
# (https://docs.habana.ai/en/latest/Installation_Guide/Additional_Installation/Kubernetes_Installation/).
GAUDI = "habana.ai/gaudi"
GAUDI_FABRICS = [{"name": "efa", "targetNodes": {"acceleratorResources": ["nvidia.com/gpu", GAUDI]}}]


def chart_policy(*values: str) -> dict[str, Any]:
    return one(render_helm(*values), "ValidatingAdmissionPolicy")


def accelerators_of(policy: dict[str, Any]) -> str:
    (variable,) = (v for v in policy["spec"]["variables"] if v["name"] == ACCELERATORS_VARIABLE)
    expression = variable["expression"]
    assert isinstance(expression, str)
    return expression


def operators_accelerators(*values: str) -> str:
    """The CEL list of what the operator the chart deploys counts as accelerators: its
    ConfigMap's config file, read as the operator reads it."""
    config_map = one(render_helm(*values), "ConfigMap", "fabriccap-config")
    resources = accelerator_resources(parse_config(config_map["data"]["config.yaml"], "configmap"))
    return "[" + ", ".join(f"'{resource}'" for resource in resources) + "]"


def test_the_charts_policy_with_default_values_is_the_generated_one() -> None:
    """The chart renders its accelerators from its config value, the component has the built-in
    ones: with the default values they are one policy."""
    component = next(
        doc for doc in yaml.safe_load_all(COMPONENT.read_text()) if doc["kind"] == "ValidatingAdmissionPolicy"
    )
    assert chart_policy()["spec"] == component["spec"]


@pytest.mark.parametrize(
    "fabrics",
    [
        pytest.param(None, id="no-fabrics-the-built-in-profiles"),
        pytest.param([{"name": "efa"}], id="efa"),
        pytest.param(GAUDI_FABRICS, id="efa-with-gaudi"),
        pytest.param([{"name": "efa", "targetNodes": {"acceleratorLabels": ["x=y"]}}], id="efa-other-field"),
        pytest.param([{"name": "efa", "targetNodes": {"gpuResources": [GAUDI]}}], id="efa-old-field-name"),
        pytest.param([{"name": "efa", "enabled": False}, {"name": "aks-rdma"}], id="aks-rdma-listed-is-on"),
        pytest.param([{"name": "efa"}, {"name": "aks-rdma", "enabled": False}], id="aks-rdma-off"),
        pytest.param([{"name": "efa", "targetNodes": {"acceleratorResources": []}}], id="none"),
        pytest.param(
            [
                {"name": "efa", "targetNodes": {"acceleratorResources": [GAUDI, "nvidia.com/gpu"]}},
                {"name": "ib", "resource": "example.com/ib", "devicePlugin": {"daemonSetNames": ["ib-plugin"]}},
                {
                    "name": "roce",
                    "resource": "example.com/roce",
                    "devicePlugin": {"daemonSetNames": ["roce-plugin"]},
                    "targetNodes": {"acceleratorResources": ["example.com/tpu", GAUDI]},
                },
            ],
            id="own-profiles-default-and-given",
        ),
    ],
)
def test_the_charts_policy_counts_the_accelerators_the_operator_counts(fabrics: list[dict[str, Any]] | None) -> None:
    """The chart defaults its config value's fabrics as the operator defaults its config file:
    the policy's accelerators are those of the operator the chart deploys (its FabricNotRequested
    and the warning at submit time agree)."""
    values = (f"config.fabrics={json.dumps(fabrics)}",)
    assert accelerators_of(chart_policy(*values)) == operators_accelerators(*values)


def test_the_charts_policy_warns_for_the_accelerators_of_its_config(checker: Path, tmp_path: Path) -> None:
    """A Gaudi Job on a Ready EFA pool, without EFA: the chart configured with habana.ai/gaudi
    warns it; the kustomize component (built-in accelerators) and the default chart do not."""
    configured = tmp_path / "gaudi.yaml"
    configured.write_text(yaml.safe_dump(chart_policy(f"config.fabrics={json.dumps(GAUDI_FABRICS)}")))
    default = tmp_path / "default.yaml"
    default.write_text(yaml.safe_dump(chart_policy()))
    gaudi = job("gaudi", pod_spec({GAUDI: "8"}))
    with_efa = job("gaudi-efa", pod_spec({GAUDI: "8", EFA: "24"}))
    said = told(gaudi, with_efa, policy=configured)
    assert said["gaudi"] is not None and said["gaudi"].startswith(
        f"request {EFA}: 32 per node in Job: spec.template.spec.containers[].resources: Job gaudi selects pool {POOL}"
    )
    assert said["gaudi-efa"] is None
    assert told(gaudi, policy=default) == told(gaudi) == {"gaudi": None}


def test_an_accelerator_that_is_no_resource_name_fails_the_install() -> None:
    """The names go into the policy's CEL: one that is not an extended resource's name (which the
    operator would refuse at start) stops the render, even with the values schema skipped."""
    injected = "nvidia.com/gpu'] || true || ['x"
    fabrics = [{"name": "efa", "targetNodes": {"acceleratorResources": [injected]}}]
    args = [helm_binary(), "template", "t", str(CHART), "--skip-schema-validation"]
    args += ["--set-json", f"config.fabrics={json.dumps(fabrics)}"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False)
    assert result.returncode != 0
    assert "config.fabrics[].targetNodes.acceleratorResources" in result.stderr
    assert "is not an extended resource name" in result.stderr


# -- the chart's fabric requests: its config's -------------------------------------------------------


def fabric_requests_of(policy: dict[str, Any]) -> str:
    (variable,) = (v for v in policy["spec"]["variables"] if v["name"] == FABRIC_REQUESTS_VARIABLE)
    expression = variable["expression"]
    assert isinstance(expression, str)
    return expression


def operators_fabric_requests(*values: str) -> str:
    """The CEL list of each fabric with what asks for it, for the operator the chart deploys."""
    config_map = one(render_helm(*values), "ConfigMap", "fabriccap-config")
    pairs = fabric_requests(parse_config(config_map["data"]["config.yaml"], "configmap"))
    return "[" + ", ".join(f"['{name}', '{resource}']" for name, resource in pairs) + "]"


@pytest.mark.parametrize(
    "fabrics",
    [
        pytest.param(None, id="no-fabrics-the-built-in-profiles"),
        pytest.param([{"name": "efa"}], id="efa"),
        pytest.param([{"name": "efa", "sources": ["devicePlugin"]}], id="efa-without-dra"),
        pytest.param([{"name": "efa", "dra": {"deviceClassNames": ["efa.example.com", EFA_CLASS]}}], id="two-classes"),
        pytest.param([{"name": "efa", "dra": {"deviceClassName": "efa.example.com"}}], id="old-field-name"),
        pytest.param([{"name": "efa", "dra": {"drivers": ["dra.net"]}}], id="efa-other-dra-field"),
        pytest.param([{"name": "efa", "enabled": False}, {"name": "aks-rdma"}], id="aks-rdma-listed-is-on"),
        pytest.param(
            [
                {"name": "efa", "resource": "example.com/efa"},
                {
                    "name": "ib",
                    "resource": "example.com/ib",
                    "sources": ["dra"],
                    "devicePlugin": {"daemonSetNames": ["ib-plugin"]},
                    "dra": {"deviceClassNames": ["ib.example.com"]},
                },
                {"name": "roce", "resource": "example.com/roce", "devicePlugin": {"daemonSetNames": ["roce-plugin"]}},
            ],
            id="own-profiles-default-and-given",
        ),
    ],
)
def test_the_charts_policy_counts_the_fabric_requests_the_operator_counts(
    fabrics: list[dict[str, Any]] | None,
) -> None:
    """The chart defaults its config value's fabrics as the operator defaults its config file:
    what the policy takes as asking for a fabric is what the operator's requestingFabric counts."""
    values = (f"config.fabrics={json.dumps(fabrics)}",)
    assert fabric_requests_of(chart_policy(*values)) == operators_fabric_requests(*values)


@pytest.mark.parametrize(
    ("fabric", "field"),
    [
        ({"name": "efa", "resource": "example.com/efa'] || true || ['x"}, "config.fabrics[].resource"),
        ({"name": "efa", "dra": {"deviceClassNames": ["a'] || true || ['x"]}}, "config.fabrics[].dra.deviceClassNames"),
        ({"name": "ib'] || true || ['x", "resource": "example.com/ib"}, "config.fabrics[].name"),
    ],
    ids=["resource", "device-class", "fabric-name"],
)
def test_a_fabric_request_that_is_no_name_fails_the_install(fabric: dict[str, Any], field: str) -> None:
    """The fabric requests go into the policy's CEL too: a value the operator would refuse stops
    the render, even with the values schema skipped."""
    args = [helm_binary(), "template", "t", str(CHART), "--skip-schema-validation"]
    args += ["--set-json", f"config.fabrics={json.dumps([fabric])}"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False)
    assert result.returncode != 0
    assert f"{field}: " in result.stderr
