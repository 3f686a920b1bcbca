"""The shipped admission policy over every workload kind of the table, on the real API server,
with each project's own CRD (fabriccap_devtools.workload_crds; Volcano's carried, HyperPod's a
marked stand-in).

A table of cases, at least one per kind and pool-selection style: `kubectl apply` prints the
warning when a template selects a Ready pool (a node pool, or an empty launchable NodePool)
and asks for an accelerator without the fabric, and none otherwise. Bad input (100 replicated
jobs, thousands of containers, missing fields at every level, every legal quantity form) never
errors: an error under the shipped `failurePolicy: Ignore` is silent, so a copy of the policy
with `failurePolicy: Fail` and `[Warn, Audit]` runs beside it, where an error would come back
as a warning and an audit annotation; and the API server's own error counter for the shipped
policy must not move.

The params are FabricCapability objects written here with the status the operator writes for
a Ready pool (the other admission test has the operator publish one): what the policy reads is
the object, whoever wrote it. Every case is applied with `--dry-run=server`, which runs
admission in full and stores nothing.
"""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from fabriccap.core.api import READY_LABEL
from fabriccap.core.config import default_config
from fabriccap.core.workload_kinds import ADMITTED, WorkloadKind
from fabriccap.kube.paths import CUSTOM_RESOURCE_DEFINITIONS, FABRIC_CAPABILITIES
from fabriccap.observability.admission import POLICY_NAME, binding, policy
from fabriccap_devtools.gotools import GoToolError
from fabriccap_devtools.workload_crds import admission_crd_files
from harness import SyncKube, wait_until

if TYPE_CHECKING:
    from harness import E2ECluster

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIPPED = REPO_ROOT / "manifests" / "components" / "admission-policy" / "admission-policy.yaml"
FAIL_COPY = "fabriccap-e2e-fail-copy"
NODEGROUP = "eks.amazonaws.com/nodegroup"
NODEPOOL = "karpenter.sh/nodepool"
EFA = "vpc.amazonaws.com/efa"
GPU = {"nvidia.com/gpu": "8"}
GPU_EFA = {"nvidia.com/gpu": "8", EFA: "32"}
IMAGE = "registry.invalid/ml/trainer:e2e"
SUFFIX = uuid.uuid4().hex[:6]
NODE_POOL = f"p5-{SUFFIX}"
KARPENTER_POOL = f"gpu-spot-{SUFFIX}"


# -- objects of each kind ------------------------------------------------------------------------


def pod_spec(
    pool: str | None, style: str = "selector", limits: Any = None, containers: int = 1, key: str = NODEGROUP
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {"name": f"c{i}", "image": IMAGE, **({"resources": {"limits": dict(limits)}} if limits is not None else {})}
            for i in range(containers)
        ],
    }
    values = {"affinity": [pool], "two-values": [pool, "other"]}
    if pool and style == "selector":
        spec["nodeSelector"] = {key: pool}
    elif pool:
        term = {"matchExpressions": [{"key": key, "operator": "In", "values": values[style]}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    return spec


def _object(kind: WorkloadKind, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": name}, "spec": spec}


def _template(**kw: Any) -> dict[str, Any]:
    return {"spec": pod_spec(**kw)}


BUILDERS: dict[str, Callable[..., dict[str, Any]]] = {
    "Pod": lambda **kw: pod_spec(**kw),
    "Job.batch": lambda **kw: {"suspend": True, "template": _template(**kw)},
    "JobSet.jobset.x-k8s.io": lambda replicated=1, **kw: {
        "suspend": True,
        "replicatedJobs": [
            {"name": f"r{i}", "replicas": 1, "template": {"spec": {"template": _template(**kw)}}}
            for i in range(replicated)
        ],
    },
    "PyTorchJob.kubeflow.org": lambda **kw: {
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": _template(**kw)},
            "Worker": {"replicas": 3, "template": _template(**kw)},
        }
    },
    "MPIJob.kubeflow.org": lambda **kw: {
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": pod_spec(None)}},
            "Worker": {"replicas": 2, "template": _template(**kw)},
        }
    },
    "LeaderWorkerSet.leaderworkerset.x-k8s.io": lambda **kw: {
        "replicas": 1,
        "leaderWorkerTemplate": {"size": 2, "workerTemplate": _template(**kw)},
    },
    "Job.batch.volcano.sh": lambda **kw: {
        "minAvailable": 1,
        "tasks": [{"name": "worker", "replicas": 2, "template": _template(**kw)}],
    },
    "RayCluster.ray.io": lambda **kw: {
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": pod_spec(None)}},
        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "rayStartParams": {}, "template": _template(**kw)}],
    },
    "RayJob.ray.io": lambda **kw: {
        "entrypoint": "python train.py",
        "suspend": True,
        "rayClusterSpec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": pod_spec(None)}},
            "workerGroupSpecs": [
                {"groupName": "gpu", "replicas": 2, "rayStartParams": {}, "template": _template(**kw)}
            ],
        },
    },
    "HyperPodPyTorchJob.sagemaker.amazonaws.com": lambda **kw: {
        "nprocPerNode": "8",
        "replicaSpecs": [{"name": "pods", "replicas": 2, "template": _template(**kw)}],
    },
}


def trainjob_spec(pool: str | None = None, style: str = "selector", limits: Any = None, key: str = NODEGROUP) -> Any:
    """A TrainJob chooses its pool through a runtime patch of the `node` replicated job
    (Trainer v2.3.0 has no podSpecOverrides), and sets its per-node resources itself."""
    spec: dict[str, Any] = {
        "runtimeRef": {"name": "torch-distributed"},
        "suspend": True,
        "trainer": {"numNodes": 2, **({"resourcesPerNode": {"limits": dict(limits)}} if limits is not None else {})},
    }
    if pool:
        selection = pod_spec(pool, style, key=key)
        del selection["containers"], selection["restartPolicy"]
        node = {"name": "node", "template": {"spec": {"template": {"spec": selection}}}}
        spec["runtimePatches"] = [
            {
                "manager": "e2e.fabriccap.dev/user",
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}},
            }
        ]
    return spec


BUILDERS["TrainJob.trainer.kubeflow.org"] = trainjob_spec
KINDS = {kind.group_kind: kind for kind in ADMITTED}
assert set(KINDS) == set(BUILDERS), "a builder for every kind the policy admits"


@dataclass(frozen=True)
class Case:
    name: str
    kind: WorkloadKind
    body: dict[str, Any]
    # The pool whose FabricCapability must warn, or None: no warning at all.
    warns_for: str | None


def case(name: str, group_kind: str, warns_for: str | None, **kw: Any) -> Case:
    kind = KINDS[group_kind]
    return Case(name, kind, _object(kind, name, BUILDERS[group_kind](**kw)), warns_for)


def bare(name: str, group_kind: str, spec: dict[str, Any]) -> Case:
    return Case(name, KINDS[group_kind], _object(KINDS[group_kind], name, spec), None)


def cases() -> list[Case]:
    table = []
    for group_kind in BUILDERS:
        short = KINDS[group_kind].plural.removesuffix("s")[:10] + ("-vc" if "volcano" in group_kind else "")
        for style in ("selector", "affinity"):
            table.append(case(f"{short}-{style}-tcp", group_kind, NODE_POOL, pool=NODE_POOL, style=style, limits=GPU))
            table.append(case(f"{short}-{style}-efa", group_kind, None, pool=NODE_POOL, style=style, limits=GPU_EFA))
        # An empty Karpenter NodePool that is Ready from its catalog: no nodes, a count all the same.
        table.append(
            case(f"{short}-nodepool-tcp", group_kind, KARPENTER_POOL, pool=KARPENTER_POOL, key=NODEPOOL, limits=GPU)
        )
        table.append(case(f"{short}-elsewhere", group_kind, None, pool="not-a-pool", limits=GPU))
        table.append(case(f"{short}-nolimits", group_kind, None, pool=NODE_POOL))
        table.append(case(f"{short}-two-values", group_kind, None, pool=NODE_POOL, style="two-values", limits=GPU))
    # Quantities of every legal form, as strings (built-in kinds), and as numbers where a CRD
    # allows them (int-or-string in a TrainJob, anything in HyperPod's schemaless template).
    for i, quantity in enumerate([8, "8", "8000m", "1e1", "0.5", "+8", "8Ki", "0", 0, "0.0", "0m"]):
        asks = quantity not in (0, "0", "0.0", "0m")
        limits = {"nvidia.com/gpu": quantity}
        if quantity != "0.5":  # the API server refuses a fractional extended resource in a pod template
            table.append(case(f"job-q{i}", "Job.batch", NODE_POOL if asks else None, pool=NODE_POOL, limits=limits))
        for group_kind in ("TrainJob.trainer.kubeflow.org", "HyperPodPyTorchJob.sagemaker.amazonaws.com"):
            short = KINDS[group_kind].plural[:8]
            table.append(case(f"{short}-q{i}", group_kind, NODE_POOL if asks else None, pool=NODE_POOL, limits=limits))
    for i, efa in enumerate([32, "32", "3.2e1", "1"]):
        limits = {"nvidia.com/gpu": 8, EFA: efa}
        table.append(case(f"trainjob-efa-q{i}", "TrainJob.trainer.kubeflow.org", None, pool=NODE_POOL, limits=limits))
    table.append(case("job-efa-zero", "Job.batch", NODE_POOL, pool=NODE_POOL, limits={**GPU, EFA: "0"}))
    # The fabric under requests only (a CRD's template is not validated as a pod's would be).
    requested = case("jobset-efa-requests", "JobSet.jobset.x-k8s.io", None, pool=NODE_POOL, limits=GPU)
    template = requested.body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    template["spec"]["containers"][0]["resources"]["requests"] = {EFA: "32"}
    table.append(requested)
    # An empty list of claims is no claim (a CRD keeps `resourceClaims: []`; a Pod drops it).
    no_claims = case("jobset-no-claims", "JobSet.jobset.x-k8s.io", NODE_POOL, pool=NODE_POOL, limits=GPU)
    no_claims.body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["resourceClaims"] = []
    table.append(no_claims)
    # A native sidecar (an init container with restartPolicy Always) holds its devices as the
    # job's containers do, and the operator counts it: so does the policy.
    sidecar = case("pod-gpu-in-sidecar", "Pod", NODE_POOL, pool=NODE_POOL)
    sidecar.body["spec"]["initContainers"] = [
        {"name": "side", "image": IMAGE, "restartPolicy": "Always", "resources": {"limits": dict(GPU)}}
    ]
    table.append(sidecar)
    # Missing fields at every level.
    table += [
        bare("jobset-bare", "JobSet.jobset.x-k8s.io", {"replicatedJobs": []}),
        bare("trainjob-bare", "TrainJob.trainer.kubeflow.org", {"runtimeRef": {"name": "x"}}),
        bare(
            "trainjob-patch-bare",
            "TrainJob.trainer.kubeflow.org",
            {
                "runtimeRef": {"name": "x"},
                "runtimePatches": [{"manager": "a.b/c"}],
                "trainer": {"resourcesPerNode": {}},
            },
        ),
        bare("pytorch-bare", "PyTorchJob.kubeflow.org", {"pytorchReplicaSpecs": {}}),
        bare("hppt-bare", "HyperPodPyTorchJob.sagemaker.amazonaws.com", {}),
        bare("hppt-notemplate", "HyperPodPyTorchJob.sagemaker.amazonaws.com", {"replicaSpecs": [{"name": "a"}]}),
        bare(
            "hppt-nocontainers",
            "HyperPodPyTorchJob.sagemaker.amazonaws.com",
            {"replicaSpecs": [{"name": "a", "template": {"spec": {"nodeSelector": {NODEGROUP: NODE_POOL}}}}]},
        ),
        bare(
            "hppt-garbage",
            "HyperPodPyTorchJob.sagemaker.amazonaws.com",
            {
                "replicaSpecs": [
                    {
                        "name": "a",
                        "template": {
                            "spec": {
                                "nodeSelector": {NODEGROUP: NODE_POOL},
                                "affinity": {"nodeAffinity": {}},
                                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "lots"}}}],
                            }
                        },
                    }
                ]
            },
        ),
        bare("vcjob-notemplate", "Job.batch.volcano.sh", {"tasks": [{"name": "t", "replicas": 1}]}),
        bare("rayjob-selector-only", "RayJob.ray.io", {"entrypoint": "x", "clusterSelector": {"ray.io/cluster": "c"}}),
        bare("lws-bare", "LeaderWorkerSet.leaderworkerset.x-k8s.io", {"leaderWorkerTemplate": {"workerTemplate": {}}}),
    ]
    affinity_only_terms = case("job-affinity-no-terms", "Job.batch", None, pool=None, limits=GPU)
    affinity_only_terms.body["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}
    }
    table.append(affinity_only_terms)
    # A controller's object is not a user's: no warning (it would go to the controller).
    owned = case("job-owned", "Job.batch", None, pool=NODE_POOL, limits=GPU)
    owned.body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "js",
            "uid": str(uuid.uuid4()),
            "controller": True,
        }
    ]
    table.append(owned)
    # Size: 100 replicated jobs of 8 containers, and thousands of containers without any
    # accelerator, which every check has to scan to the end.
    table.append(
        case(
            "jobset-100x8",
            "JobSet.jobset.x-k8s.io",
            NODE_POOL,
            replicated=100,
            pool=NODE_POOL,
            limits=GPU,
            containers=8,
        )
    )
    table.append(
        case(
            "jobset-100x20-cpu",
            "JobSet.jobset.x-k8s.io",
            None,
            replicated=100,
            pool=NODE_POOL,
            limits={"cpu": "1"},
            containers=20,
        )
    )
    table.append(case("pod-3000-cpu", "Pod", None, pool=NODE_POOL, limits={"cpu": "1"}, containers=3000))
    return table


# -- the cluster ---------------------------------------------------------------------------------


def established(kube: SyncKube, name: str) -> bool:
    crd = kube.get(CUSTOM_RESOURCE_DEFINITIONS.item(name)) or {}
    return any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in (crd.get("status") or {}).get("conditions") or []
    )


def ready_status(pool_key: str, pool_value: str, nodes: int) -> dict[str, Any]:
    """What the operator writes for a Ready pool: `nodes` advertising 32, or (0) an empty
    NodePool that is Ready from its catalog, whose count is in the recommendation only."""
    now = "2026-12-02T00:00:00Z"
    return {
        "fabric": "efa",
        "resourceName": EFA,
        "pool": {"key": pool_key, "value": pool_value},
        "nodes": nodes,
        "cordonedNodes": 0,
        "advertisingNodes": nodes,
        **({"uniformCount": 32} if nodes else {}),
        "counts": [{"count": 32, "nodes": nodes}] if nodes else [],
        "instanceTypes": [{"name": "p5.48xlarge", "nodes": nodes, "maxCount": 32}],
        "devicePlugin": {"daemonSets": ["kube-system/aws-efa-k8s-device-plugin"], "readyNodes": nodes},
        "gap": {
            "pluginReadyNotAdvertised": 0,
            "unhealthy": 0,
            "advertisedWithoutPlugin": 0,
            "nodes": [],
            "truncated": False,
        },
        "recommendation": {"resourcesPerNode": {EFA: "32"}, "env": []},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "UniformCapability",
                "message": "e2e",
                "lastTransitionTime": now,
            }
        ],
    }


@pytest.fixture(scope="module")
def params(cluster: E2ECluster, kube: SyncKube) -> Iterator[dict[str, str]]:
    """Two Ready FabricCapabilities (the policy's params): a node pool and an empty NodePool."""
    if cluster.local is None:
        pytest.skip("installs CRDs and a cluster-wide admission policy: only on the local control plane")
    names = {NODE_POOL: f"efa-{NODE_POOL}", KARPENTER_POOL: f"efa-{KARPENTER_POOL}"}
    for key, value, nodes in ((NODEGROUP, NODE_POOL, 2), (NODEPOOL, KARPENTER_POOL, 0)):
        name = names[value]
        kube.create(
            FABRIC_CAPABILITIES.collection(),
            {
                "apiVersion": "fabriccap.dev/v1alpha1",
                "kind": "FabricCapability",
                "metadata": {"name": name, "labels": {READY_LABEL: "true"}},
            },
        )
        kube.patch(FABRIC_CAPABILITIES.item(name) + "/status", {"status": ready_status(key, value, nodes)})
    yield names
    for name in names.values():
        kube.delete(FABRIC_CAPABILITIES.item(name))


@pytest.fixture(scope="module")
def policies(
    cluster: E2ECluster, kube: SyncKube, params: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Every admitted kind's CRD, the shipped policy, and its Fail copy."""
    for path in _crd_files():
        cluster.run_kubectl("apply", "--server-side", "--field-manager=fabriccap-e2e", "-f", str(path))
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        wait_until(functools.partial(established, kube, name), f"CRD {name} Established", timeout=60)
    fail_policy = policy(default_config(), failure_policy="Fail")
    fail_policy["metadata"]["name"] = FAIL_COPY
    fail_binding = binding()
    fail_binding["metadata"]["name"] = FAIL_COPY
    fail_binding["spec"]["policyName"] = FAIL_COPY
    copy_file = tmp_path_factory.mktemp("policy") / "fail-copy.yaml"
    copy_file.write_text(yaml.safe_dump_all([fail_policy, fail_binding]))
    cluster.run_kubectl("apply", "-f", str(SHIPPED))
    cluster.run_kubectl("apply", "-f", str(copy_file))
    yield
    cluster.run_kubectl("delete", "-f", str(copy_file), "--ignore-not-found")
    cluster.run_kubectl("delete", "-f", str(SHIPPED), "--ignore-not-found")


def _crd_files() -> list[Path]:
    try:
        return admission_crd_files()
    except GoToolError as error:
        pytest.fail(str(error))


# Client-side apply keeps the whole object in an annotation, capped at 256 KiB: larger objects
# are applied server-side, as kubectl users apply them.
CLIENT_SIDE_LIMIT = 200 * 1024


def apply(cluster: E2ECluster, namespace: str, body: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """`kubectl apply` as a user runs it, with admission in full and nothing stored."""
    assert cluster.kubectl is not None
    obj = copy.deepcopy(body)
    obj["metadata"]["namespace"] = namespace
    text = json.dumps(obj)
    side = ["--server-side", "--field-manager=e2e-user"] if len(text) > CLIENT_SIDE_LIMIT else []
    return subprocess.run(
        [str(cluster.kubectl), f"--kubeconfig={cluster.kubeconfig}", "apply", *side, "--dry-run=server", "-f", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def warnings_of(stderr: str, policy_name: str) -> list[str]:
    return [line.strip() for line in stderr.splitlines() if f"ValidatingAdmissionPolicy '{policy_name}'" in line]


def evaluation_errors(cluster: E2ECluster) -> float:
    """The API server's count of policy evaluations that errored and were let through (what
    `failurePolicy: Ignore` hides from the warning and the audit log)."""
    text = cluster.run_kubectl("get", "--raw", "/metrics").stdout
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("apiserver_validating_admission_policy_check_total{")
        and f'policy="{POLICY_NAME}"' in line
        and 'enforcement_action="allow"' in line
        and 'error_type="no_error"' not in line
    )


# Where the warning sends the user in BUILDERS' objects when it is not the kind's request field:
# the template that offends, a map of them by its key (the first in order when several do).
WHERE = {
    "PyTorchJob.kubeflow.org": "spec.pytorchReplicaSpecs.Master.template.spec.containers[].resources",
    "LeaderWorkerSet.leaderworkerset.x-k8s.io": "spec.leaderWorkerTemplate.workerTemplate.spec.containers[].resources",
}


def expected_warning(case: Case, params: dict[str, str]) -> str:
    pool = case.warns_for
    assert pool is not None
    where = WHERE.get(case.kind.group_kind, case.kind.request_field)
    return (
        f"request {EFA}: 32 per node in {case.kind.kind}: {where}: {case.kind.kind} {case.name} "
        f"selects pool {pool} where {EFA}: 32 is Ready (FabricCapability {params[pool]}), and requests an "
        f"accelerator but no {EFA}: NCCL will use TCP sockets"
    )


def test_every_kind_is_warned_at_apply_exactly_when_it_should_be(
    cluster: E2ECluster, kube: SyncKube, params: dict[str, str], policies: None
) -> None:
    namespace = f"vap-kinds-{SUFFIX}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    table = cases()
    # One case per kind and selection style at least (the table's promise).
    styles = {(c.kind.group_kind, c.name.rsplit("-", 2)[-2]) for c in table if c.warns_for}
    assert {(kind, style) for kind in BUILDERS for style in ("selector", "affinity", "nodepool")} <= styles
    try:
        # The API server takes a moment to see a new policy, binding and params, and loads the
        # two policies independently: wait until both warn (waiting for the shipped one alone
        # let the first case meet a Fail copy not loaded yet).
        first = table[0]

        def both_policies_warn() -> bool:
            stderr = apply(cluster, namespace, first.body).stderr
            return expected_warning(first, params) in stderr and bool(warnings_of(stderr, FAIL_COPY))

        wait_until(both_policies_warn, "the shipped policy and its Fail copy warn", timeout=60, interval=1.0)
        errors_before = evaluation_errors(cluster)
        wrong = []
        for entry in table:
            result = apply(cluster, namespace, entry.body)
            shipped = warnings_of(result.stderr, POLICY_NAME)
            fail_copy = warnings_of(result.stderr, FAIL_COPY)
            expected = [expected_warning(entry, params)] if entry.warns_for else []
            said = [line.split(f"with binding '{POLICY_NAME}': ", 1)[-1] for line in shipped]
            if entry.kind.resources_per_node is not None:
                said = [line.split(" (unless runtime ", 1)[0] for line in said]
            problems = []
            if result.returncode != 0:
                problems.append(f"exit {result.returncode}: {result.stderr.strip()[:300]}")
            if said != expected:
                problems.append(f"warned {said}, expected {expected}")
            # The Fail copy warns exactly where the shipped one does; anything else it says
            # is an evaluation error the shipped policy would have hidden.
            if len(fail_copy) != len(shipped) or any("error" in line for line in fail_copy):
                problems.append(f"the Fail copy said {fail_copy}")
            if problems:
                wrong.append(f"{entry.name}: {'; '.join(problems)}")
        assert wrong == []
        assert evaluation_errors(cluster) == errors_before
    finally:
        kube.delete(f"/api/v1/namespaces/{namespace}")


def test_the_audit_log_records_the_warnings_and_no_evaluation_error(
    cluster: E2ECluster, kube: SyncKube, params: dict[str, str], policies: None
) -> None:
    """Run after the table (same module): every audited request of its namespace that the
    policies judged carries their annotation, and none says an expression errored."""
    assert cluster.local is not None
    namespace = f"vap-kinds-{SUFFIX}"
    events = [e for e in cluster.local.audit_events() if (e.get("objectRef") or {}).get("namespace") == namespace]
    annotations = [
        value
        for event in events
        for key, value in (event.get("annotations") or {}).items()
        if key.startswith("validation.policy.admission.k8s.io/")
    ]
    assert annotations, "the table's warnings are audited"
    assert [value for value in annotations if "error" in value.lower()] == []
