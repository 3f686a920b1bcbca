"""The one table of workload kinds: who they are (API group **and** kind), where their pod
templates are, where a user sets the fabric request, and how a pod leads back to them.

Everything that names a workload kind reads this table: the owner walk and the Events
(core.workloads, core.facts), the owner lookups and the RBAC they need (kube.lookups, checked
by tests/repo/test_packaging.py), the admission policy (observability.admission, generated)
and the kinds table of docs/workloads.md (generated). A kind is identified by its group: a
Volcano ``batch.volcano.sh`` ``Job`` is not a ``batch/v1`` Job, and an owner reference whose
group is not in the table is an unknown kind, trusted for nothing but being the top owner.

Paths use a small grammar that both the policy's CEL and the Python walker (explain) read:
``a.b`` fields, ``a[]`` every item of a list, ``a[name=x]`` the items whose ``name`` is x,
``a[l[name=x]]`` the items whose list ``l`` holds an item whose ``name`` is x, ``a.*`` every
value of a map. A pod template path ends at an object with a pod ``spec``; the
empty path is the object itself (a Pod).

Field paths are taken from each project's Go types at the version named in ``source``
(research: /work/research/workloads/REPORT.md §2; the CRDs in the e2e tests come from the same
releases).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fabriccap.core.sharing import shared_text

# A step of a path: a field, optionally followed by [] (every item), [name=value] (a filter) or
# [list[name=value]] (a filter on an item's list).
_STEP = re.compile(
    r"^(?P<field>[A-Za-z][A-Za-z0-9]*|\*)"
    r"(?:\[(?:(?:(?P<list>[A-Za-z][A-Za-z0-9]*)\[)?(?P<key>[a-z]+)=(?P<value>[a-z0-9-]+)(?(list)\]))?\])?$"
)


@dataclass(frozen=True)
class Step:
    field: str  # a field name, or "*" for every value of a map
    iterate: bool = False  # the field is a list: every item
    where: tuple[str, str] | None = None  # keep the items whose field equals this value
    where_list: str | None = None  # ... or, when set, an item of whose list so named does


def parse_path(path: str) -> tuple[Step, ...]:
    """The steps of a path in the table's grammar; ValueError for anything else (the table is
    code, so this fails its unit test, never a user)."""
    steps = []
    for part in path.split(".") if path else []:
        match = _STEP.fullmatch(part)  # not match: its $ also takes a final newline
        if match is None:
            raise ValueError(f"not a path step: {part!r} in {path!r}")
        key, value = match.group("key"), match.group("value")
        iterate = part.endswith("]")
        where = (key, value) if key and value else None
        steps.append(Step(match.group("field"), iterate, where, match.group("list") if where else None))
    return tuple(steps)


def walk(obj: Any, path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every mapping at ``path`` in ``obj``, with its JSON pointer (RFC 6901), in document
    order. Whatever is missing or of the wrong type yields nothing, never an error."""
    found: list[tuple[str, Any]] = [("", obj)]
    for step in parse_path(path):
        following: list[tuple[str, Any]] = []
        for pointer, value in found:
            if not isinstance(value, Mapping):
                continue
            if step.field == "*":
                following += [(f"{pointer}/{_escape(str(k))}", v) for k, v in value.items()]
            elif step.field in value:
                following.append((f"{pointer}/{step.field}", value[step.field]))
        if step.iterate:
            following = [
                (f"{pointer}/{i}", item)
                for pointer, items in following
                if isinstance(items, list)
                for i, item in enumerate(items)
                if _kept(step, item)
            ]
        found = following
    for pointer, value in found:
        if isinstance(value, Mapping):
            yield pointer, value


def _kept(step: Step, item: Any) -> bool:
    if step.where is None:
        return True
    key, value = step.where
    if step.where_list is None:
        return isinstance(item, Mapping) and item.get(key) == value
    entries = item.get(step.where_list) if isinstance(item, Mapping) else None
    return isinstance(entries, list) and any(isinstance(e, Mapping) and e.get(key) == value for e in entries)


def _escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True)
class OwnerLabel:
    """A label a controller puts on its pods naming the workload, read when the pod's
    controller is of kind ``via``: the owner is known without a read (and the pod's walk
    stops there)."""

    via: tuple[str, str]  # (group, kind) of the pod's controller owner
    name_label: str
    uid_label: str | None = None
    # With no uid label: a controller of kind ``via`` that bears the workload's own name is one
    # the workload controls itself, made anew with each object of that name. Its uid, on the
    # pods it controls, tells a re-created workload from the one read before
    # (``WorkloadPodFacts.owner_generation``).
    namesake_controller: bool = False
    # A controller of kind ``via`` that one of the workload's pods controls (a LeaderWorkerSet's
    # worker StatefulSet, controlled by its leader pod) makes its pods from this template.
    pod_controlled_template: str | None = None


@dataclass(frozen=True)
class WorkloadKind:
    title: str  # for people: "Kubeflow Trainer TrainJob"
    group: str  # "" for the core group
    kind: str
    plural: str
    # The versions served by the releases named in `source`; the first is the one a lookup
    # reads and the admission policy names (matchPolicy Equivalent converts the others).
    versions: tuple[str, ...]
    # Where the pod templates are (the grammar above); empty when the object has none.
    pod_templates: tuple[str, ...]
    # Where a user sets the fabric request, as the warning and the Event say it.
    request_field: str
    # How a pod leads back to an object of this kind (docs).
    owner_from_pod: str
    source: str  # the upstream file and release the paths come from
    # Checked by the admission policy when its CRD is present.
    admitted: bool = True
    # Its own controller owner is worth one GET (a Job may be a CronJob's, a JobSet a TrainJob's,
    # a RayCluster a RayJob's); that GET also tells the uid of a kind its pods name by a label.
    read_for_owner: bool = False
    owner_label: OwnerLabel | None = None
    # TrainJob: the object carries per-node resources itself (a ResourceRequirements), and
    # selects its pool only through patches of the runtime's pod template.
    resources_per_node: str | None = None
    selector_templates: tuple[str, ...] = ()
    stand_in: bool = False  # no released CRD: the tests use a marked stand-in

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.versions[0]}" if self.group else self.versions[0]

    @property
    def uid_from_read(self) -> bool:
        """Its pods name it by a label, which may carry no uid (a LeaderWorkerSet's never does):
        the uid an Event on it needs (``kubectl describe`` finds Events by uid) is the one its
        read tells. Such a kind is read (``read_for_owner``; the table's unit test checks)."""
        return self.owner_label is not None

    @property
    def is_its_own_pod(self) -> bool:
        """The object is itself a pod (its one template path is the empty one): explaining it
        means this pod, found by name, not the pods some owner walk leads to."""
        return self.pod_templates == ("",)

    @property
    def group_kind(self) -> str:
        """``Kind.group`` (``Job.batch``, ``Job.batch.volcano.sh``), ``Kind`` for the core group:
        the identity kubectl uses for a resource, and the one owner keys carry."""
        return group_kind(self.group, self.kind)


def group_kind(group: str, kind: str) -> str:
    # Shared: every owner key holds one (the fact store's, the Event outbox's), 58 bytes a copy.
    return shared_text(f"{kind}.{group}") if group else kind


def group_of(api_version: str) -> str:
    """The group of an apiVersion (``batch/v1`` → ``batch``; ``v1`` → the core group ``""``)."""
    return api_version.rpartition("/")[0]


_TRAINER = "github.com/kubeflow/trainer/v2@v2.3.0 (658725bdae5c)"
_TRAINER_V2_1 = "github.com/kubeflow/trainer/v2@v2.1.0"
_TRAINING_OPERATOR = "github.com/kubeflow/training-operator@v1.9.2 (bde9c20903ad)"
# Where in a pod spec a request goes, as the table and the warnings say it.
TEMPLATE_RESOURCES = "containers[].resources"

TRAINJOB = WorkloadKind(
    title="Kubeflow Trainer TrainJob",
    group="trainer.kubeflow.org",
    kind="TrainJob",
    plural="trainjobs",
    versions=("v1alpha1",),
    pod_templates=(),
    request_field="spec.trainer.resourcesPerNode",
    owner_from_pod="Pod → Job → JobSet (pod labels) → TrainJob (one read of the JobSet)",
    source=f"{_TRAINER} and {_TRAINER_V2_1} pkg/apis/trainer/v1alpha1/trainjob_types.go",
    resources_per_node="spec.trainer.resourcesPerNode",
    # Where a TrainJob chooses its pool for the `node` replicated job (whose `.spec` is a pod
    # spec, or an override of one). Trainer v2.2.0 on: a runtime patch (applied in list order,
    # v2.3.0 trainingruntime.go mergeRuntimePatches). v2.0 and v2.1: a pod template override
    # (PodTemplateOverride, targetJobs[].name; v2.1.0 trainjob_types.go), gone in v2.2.0. Each is
    # checked against that release's CRD (tests/repo/test_workload_paths.py).
    selector_templates=(
        "spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[name=node].template.spec.template",
        "spec.podTemplateOverrides[targetJobs[name=node]]",
    ),
)
JOBSET = WorkloadKind(
    title="JobSet",
    group="jobset.x-k8s.io",
    kind="JobSet",
    plural="jobsets",
    versions=("v1alpha2",),
    pod_templates=("spec.replicatedJobs[].template.spec.template",),
    request_field=f"spec.replicatedJobs[].template.spec.template.spec.{TEMPLATE_RESOURCES}",
    owner_from_pod="Pod → Job → JobSet, from the pod labels jobset.sigs.k8s.io/jobset-name and -uid",
    source="sigs.k8s.io/jobset@v0.12.0 (09e9a3bb4b64) api/jobset/v1alpha2/jobset_types.go",
    read_for_owner=True,
    owner_label=OwnerLabel(("batch", "Job"), "jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/jobset-uid"),
)
PYTORCHJOB = WorkloadKind(
    title="Kubeflow PyTorchJob",
    group="kubeflow.org",
    kind="PyTorchJob",
    plural="pytorchjobs",
    versions=("v1",),
    # Master, Worker: the replica types are map keys the user writes, so every value is read.
    pod_templates=("spec.pytorchReplicaSpecs.*.template",),
    request_field=f"spec.pytorchReplicaSpecs.<Master|Worker>.template.spec.{TEMPLATE_RESOURCES}",
    owner_from_pod="Pod → PyTorchJob (controller reference)",
    source=f"{_TRAINING_OPERATOR} pkg/apis/kubeflow.org/v1/pytorch_types.go",
)
MPIJOB = WorkloadKind(
    title="MPIJob (training-operator v1, mpi-operator v2beta1)",
    group="kubeflow.org",
    kind="MPIJob",
    plural="mpijobs",
    # Both releases define mpijobs.kubeflow.org: a cluster has one or the other.
    versions=("v1", "v2beta1"),
    pod_templates=("spec.mpiReplicaSpecs.*.template",),
    request_field=f"spec.mpiReplicaSpecs.Worker.template.spec.{TEMPLATE_RESOURCES}",
    owner_from_pod="Pod → MPIJob; the v2beta1 launcher: Pod → Job → MPIJob (one read of the Job)",
    source=(
        f"{_TRAINING_OPERATOR} pkg/apis/kubeflow.org/v1/mpi_types.go; "
        "github.com/kubeflow/mpi-operator@v0.8.0 (101db144e019) pkg/apis/kubeflow/v2beta1/types.go"
    ),
)
LEADERWORKERSET = WorkloadKind(
    title="LeaderWorkerSet",
    group="leaderworkerset.x-k8s.io",
    kind="LeaderWorkerSet",
    plural="leaderworkersets",
    versions=("v1",),
    pod_templates=("spec.leaderWorkerTemplate.leaderTemplate", "spec.leaderWorkerTemplate.workerTemplate"),
    request_field=f"spec.leaderWorkerTemplate.<leaderTemplate|workerTemplate>.spec.{TEMPLATE_RESOURCES}",
    owner_from_pod=(
        "Pod → StatefulSet (→ leader Pod → StatefulSet) → LeaderWorkerSet, from the pod label "
        "(one read of it for its uid and own owner)"
    ),
    source="sigs.k8s.io/lws@v0.8.0 (fc19b9ae9b01) api/leaderworkerset/v1/leaderworkerset_types.go",
    # The pods carry the LWS's name (SetNameLabelKey, leaderworkerset_types.go:37; on the workers
    # from pkg/controllers/pod_controller.go:362) and no label with its uid (none of the keys in
    # leaderworkerset_types.go:29-98 holds one): it is read for that, one GET per LWS. Its
    # leader StatefulSet bears its name and is controlled by it (pkg/controllers/
    # leaderworkerset_controller.go:355 and :760); a worker StatefulSet is named after its
    # leader pod and controlled by it (pod_controller.go:173 and :187).
    read_for_owner=True,
    owner_label=OwnerLabel(
        ("apps", "StatefulSet"),
        "leaderworkerset.sigs.k8s.io/name",
        namesake_controller=True,
        pod_controlled_template="spec.leaderWorkerTemplate.workerTemplate",
    ),
)
HYPERPOD_PYTORCHJOB = WorkloadKind(
    title="SageMaker HyperPod HyperPodPyTorchJob",
    group="sagemaker.amazonaws.com",
    kind="HyperPodPyTorchJob",
    plural="hyperpodpytorchjobs",
    versions=("v1",),
    pod_templates=("spec.replicaSpecs[].template",),
    request_field=f"spec.replicaSpecs[].template.spec.{TEMPLATE_RESOURCES}",
    owner_from_pod="Pod → its controller (closed operator; pods carry HPJob=<name>)",
    source=(
        "aws/sagemaker-hyperpod-cli@011ca927123e src/sagemaker/hyperpod/training/"
        "config/hyperpod_pytorch_job_unified_config.py (no released CRD)"
    ),
    stand_in=True,
)
VOLCANO_JOB = WorkloadKind(
    title="Volcano Job",
    group="batch.volcano.sh",
    kind="Job",
    plural="jobs",
    versions=("v1alpha1",),
    pod_templates=("spec.tasks[].template",),
    request_field=f"spec.tasks[].template.spec.{TEMPLATE_RESOURCES}",
    owner_from_pod="Pod → Volcano Job (controller reference)",
    source=(
        "github.com/volcano-sh/volcano@v1.15.1 (0a56ed331897) "
        "staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/job.go"
    ),
)
RAYJOB = WorkloadKind(
    title="KubeRay RayJob",
    group="ray.io",
    kind="RayJob",
    plural="rayjobs",
    versions=("v1",),
    pod_templates=(
        "spec.rayClusterSpec.headGroupSpec.template",
        "spec.rayClusterSpec.workerGroupSpecs[].template",
        "spec.submitterPodTemplate",
    ),
    request_field=f"spec.rayClusterSpec.workerGroupSpecs[].template.spec.{TEMPLATE_RESOURCES}",
    owner_from_pod=(
        "Pod → RayCluster → RayJob (one read of the RayCluster); the submitter: Pod → Job → RayJob "
        "(one read of the Job)"
    ),
    source="github.com/ray-project/kuberay/ray-operator@v1.5.0 apis/ray/v1/rayjob_types.go",
)
RAYCLUSTER = WorkloadKind(
    title="KubeRay RayCluster",
    group="ray.io",
    kind="RayCluster",
    plural="rayclusters",
    versions=("v1",),
    pod_templates=("spec.headGroupSpec.template", "spec.workerGroupSpecs[].template"),
    request_field=f"spec.workerGroupSpecs[].template.spec.{TEMPLATE_RESOURCES}",
    owner_from_pod="Pod → RayCluster (controller reference; one read of it for its RayJob)",
    source="github.com/ray-project/kuberay/ray-operator@v1.5.0 apis/ray/v1/raycluster_types.go",
    # A RayJob's RayCluster is generated, and controlled by the RayJob (kuberay ray-operator
    # v1.5.0 controllers/ray/rayjob_controller.go:924-944, constructRayClusterForRayJob:
    # SetControllerReference). Its pods do not say so: their labels are the cluster's own
    # ray.io/* labels and the template's (controllers/ray/common/pod.go:629-652, labelPod), not
    # the cluster's ray.io/originated-from-* labels, which carry no uid anyway. So the cluster
    # is read, as a Job is: one GET per RayCluster, whose controller reference names the RayJob
    # with its uid.
    read_for_owner=True,
)
BATCH_JOB = WorkloadKind(
    title="batch Job",
    group="batch",
    kind="Job",
    plural="jobs",
    versions=("v1",),
    pod_templates=("spec.template",),
    request_field=f"spec.template.spec.{TEMPLATE_RESOURCES}",
    owner_from_pod="Pod → Job (controller reference; one read of the Job for its own owner)",
    source="k8s.io/api@v0.35.4 batch/v1/types.go",
    read_for_owner=True,
)
POD = WorkloadKind(
    title="Pod",
    group="",
    kind="Pod",
    plural="pods",
    versions=("v1",),
    pod_templates=("",),
    request_field=f"spec.{TEMPLATE_RESOURCES}",
    owner_from_pod="a Pod with no controller is its own owner",
    source="k8s.io/api@v0.35.4 core/v1/types.go",
)
# Owners that are not submitted as training workloads (not in the admission policy), but
# which pods lead to and Events name.
CRONJOB = WorkloadKind(
    title="CronJob",
    group="batch",
    kind="CronJob",
    plural="cronjobs",
    versions=("v1",),
    pod_templates=("spec.jobTemplate.spec.template",),
    request_field=f"spec.jobTemplate.spec.template.spec.{TEMPLATE_RESOURCES}",
    owner_from_pod="Pod → Job → CronJob (one read of the Job)",
    source="k8s.io/api@v0.35.4 batch/v1/types.go",
    admitted=False,
)
REPLICASET = WorkloadKind(
    title="ReplicaSet",
    group="apps",
    kind="ReplicaSet",
    plural="replicasets",
    versions=("v1",),
    pod_templates=("spec.template",),
    request_field=f"spec.template.spec.{TEMPLATE_RESOURCES}",
    owner_from_pod="Pod → ReplicaSet (one read of it for its Deployment)",
    source="k8s.io/api@v0.35.4 apps/v1/types.go",
    admitted=False,
    read_for_owner=True,
)
DEPLOYMENT = WorkloadKind(
    title="Deployment",
    group="apps",
    kind="Deployment",
    plural="deployments",
    versions=("v1",),
    pod_templates=("spec.template",),
    request_field=f"spec.template.spec.{TEMPLATE_RESOURCES}",
    owner_from_pod="Pod → ReplicaSet → Deployment (one read of the ReplicaSet)",
    source="k8s.io/api@v0.35.4 apps/v1/types.go",
    admitted=False,
)
STATEFULSET = WorkloadKind(
    title="StatefulSet",
    group="apps",
    kind="StatefulSet",
    plural="statefulsets",
    versions=("v1",),
    pod_templates=("spec.template",),
    request_field=f"spec.template.spec.{TEMPLATE_RESOURCES}",
    owner_from_pod="Pod → StatefulSet (controller reference)",
    source="k8s.io/api@v0.35.4 apps/v1/types.go",
    admitted=False,
)

WORKLOAD_KINDS: tuple[WorkloadKind, ...] = (
    TRAINJOB,
    JOBSET,
    PYTORCHJOB,
    MPIJOB,
    LEADERWORKERSET,
    HYPERPOD_PYTORCHJOB,
    VOLCANO_JOB,
    RAYJOB,
    RAYCLUSTER,
    BATCH_JOB,
    POD,
    CRONJOB,
    REPLICASET,
    DEPLOYMENT,
    STATEFULSET,
)
BY_GROUP_KIND: dict[tuple[str, str], WorkloadKind] = {(k.group, k.kind): k for k in WORKLOAD_KINDS}
ADMITTED: tuple[WorkloadKind, ...] = tuple(k for k in WORKLOAD_KINDS if k.admitted)
READ_FOR_OWNER: tuple[WorkloadKind, ...] = tuple(k for k in WORKLOAD_KINDS if k.read_for_owner)
OWNER_LABELS: dict[tuple[str, str], tuple[WorkloadKind, OwnerLabel]] = {
    k.owner_label.via: (k, k.owner_label) for k in WORKLOAD_KINDS if k.owner_label is not None
}
# Where an unknown kind's request goes: said in general, never guessed from its name.
UNKNOWN_REQUEST_FIELD = "its pod template's containers[].resources"


def kind_of(api_version: str, kind: str) -> WorkloadKind | None:
    """The table's row for an object's apiVersion and kind; None for a kind not in the table
    (whatever its name: a ``Job`` of another group is not a batch Job)."""
    return BY_GROUP_KIND.get((group_of(api_version), kind))


def request_field(api_version: str, kind: str) -> str:
    row = kind_of(api_version, kind)
    return row.request_field if row is not None else UNKNOWN_REQUEST_FIELD


def find(name: str) -> WorkloadKind | None:
    """A kind as a user types it on the command line: ``trainjob``, ``trainjobs``,
    ``TrainJob``, ``jobs.batch.volcano.sh``, ``job.batch`` (a bare ``job`` is batch's, as for
    kubectl)."""
    lowered = name.lower()
    plain, _, group = lowered.partition(".")
    matches = [
        row
        for row in WORKLOAD_KINDS
        if plain in (row.kind.lower(), row.plural)
        and (group == row.group or (not group and row.group in ("", "batch")))
    ]
    if not matches and not group:
        matches = [row for row in WORKLOAD_KINDS if plain in (row.kind.lower(), row.plural)]
    return matches[0] if len(matches) == 1 else None
