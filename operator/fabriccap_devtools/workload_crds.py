"""The CRDs of the training workloads fabriccap reports on, as their projects release them.

Taken from the Go module proxy at pinned versions (Go verifies each module zip against the
checksum database; the sha256 pins the one file used), never retyped. The end-to-end tests
and the demo install them on the local API server and create workloads of these kinds.

| kind | module | version |
|---|---|---|
| TrainJob (trainer.kubeflow.org/v1alpha1) | github.com/kubeflow/trainer/v2 | v2.3.0 (v2.1.0: paths only) |
| JobSet (jobset.x-k8s.io/v1alpha2), what a TrainJob runs as | sigs.k8s.io/jobset | v0.12.0 (Trainer v2.3.0's) |
| PyTorchJob, MPIJob (kubeflow.org/v1) | github.com/kubeflow/training-operator | v1.9.2 |
| LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) | sigs.k8s.io/lws | v0.8.0 |
| RayJob, RayCluster (ray.io/v1) | github.com/ray-project/kuberay/ray-operator | v1.5.0 |

Two are carried in the repository (``crds/``), each with a header naming its source:
Volcano's Job CRD (github.com/volcano-sh/volcano tag v1.15.1; the proxy refuses the module
that holds it), and a marked stand-in for HyperPodPyTorchJob, whose CRD ships only in a
closed EKS add-on. The proxy serves the exact versions above; it refuses their version lists
and ``@latest`` (research/workloads REPORT §1).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fabriccap_devtools.gotools import go_module_file


@dataclass(frozen=True)
class ReleasedCrd:
    name: str  # metadata.name
    module: str
    version: str
    path: str
    sha256: str

    def file(self) -> Path:
        return go_module_file(self.module, self.version, self.path, self.sha256)


TRAINJOB = ReleasedCrd(
    "trainjobs.trainer.kubeflow.org",
    "github.com/kubeflow/trainer/v2",
    "v2.3.0",
    "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
    "a742cafc5b5582640c7e0b7467c024fc237256fbca5ba0a9f0531dfb66d64416",
)
# Trainer v2.1.0's TrainJob, whose pool choice is a pod template override (podTemplateOverrides,
# gone in v2.2.0): the admission policy reads it too. Not installed (one CRD per resource); its
# schema pins the table's paths (tests/repo/test_workload_paths.py).
TRAINJOB_V2_1 = ReleasedCrd(
    "trainjobs.trainer.kubeflow.org",
    "github.com/kubeflow/trainer/v2",
    "v2.1.0",
    "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
    "65ea8f95f298103275e00b690bda5e090355f7eb5d6e4d15236b557f088b8078",
)
JOBSET = ReleasedCrd(
    "jobsets.jobset.x-k8s.io",
    "sigs.k8s.io/jobset",
    "v0.12.0",
    "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
    "d022b87624512cf0b6741b31b24a2bea9945b5a838b50713af29332c878bb6fe",
)
PYTORCHJOB = ReleasedCrd(
    "pytorchjobs.kubeflow.org",
    "github.com/kubeflow/training-operator",
    "v1.9.2",
    "manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
    "eb80e57a984cdc7ceefaaf3fc561e21b673c30cbb58589f2389528d2b2760d22",
)
MPIJOB = ReleasedCrd(
    "mpijobs.kubeflow.org",
    "github.com/kubeflow/training-operator",
    "v1.9.2",
    "manifests/base/crds/kubeflow.org_mpijobs.yaml",
    "477375d6759b1e173f3ac546ce8ee59ee3491ccb71cfa1df85243c29640870bf",
)
LEADERWORKERSET = ReleasedCrd(
    "leaderworkersets.leaderworkerset.x-k8s.io",
    "sigs.k8s.io/lws",
    "v0.8.0",
    "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    "ea523e42ff3d4e45a75371c7984bbe8ad5226c26ffa3ade8d28eb67c7cc228b6",
)
RAYJOB = ReleasedCrd(
    "rayjobs.ray.io",
    "github.com/ray-project/kuberay/ray-operator",
    "v1.5.0",
    "config/crd/bases/ray.io_rayjobs.yaml",
    "a2d8246e4573896ed68d5f439f4de716e220ef15df3832652d8ee68cc86e6190",
)
RAYCLUSTER = ReleasedCrd(
    "rayclusters.ray.io",
    "github.com/ray-project/kuberay/ray-operator",
    "v1.5.0",
    "config/crd/bases/ray.io_rayclusters.yaml",
    "d0094482c5855c504a56670a5a1a012c3b7fe0149e63445e863790e7a9a9a9fb",
)
WORKLOAD_CRDS: tuple[ReleasedCrd, ...] = (TRAINJOB, JOBSET, PYTORCHJOB, MPIJOB)
RELEASED_ADMISSION_CRDS: tuple[ReleasedCrd, ...] = (*WORKLOAD_CRDS, LEADERWORKERSET, RAYJOB, RAYCLUSTER)
CARRIED = Path(__file__).parent / "crds"
# Carried because no module the proxy serves holds them (the header of each names its source).
VOLCANO_JOB_CRD = CARRIED / "batch.volcano.sh_jobs.yaml"
HYPERPOD_STAND_IN_CRD = CARRIED / "STAND-IN.sagemaker.amazonaws.com_hyperpodpytorchjobs.yaml"


def admission_crd_files() -> list[Path]:
    """Every CRD of a kind the admission policy reads: the released ones, then the carried."""
    return [crd.file() for crd in RELEASED_ADMISSION_CRDS] + [VOLCANO_JOB_CRD, HYPERPOD_STAND_IN_CRD]


def trainjob(name: str, namespace: str, *, runtime: str = "torch-distributed", gpus: int = 8) -> dict[str, object]:
    """A TrainJob whose resourcesPerNode asks for GPUs only. Up to Trainer v2.2 that replaced the
    runtime's resources, EFA request included; v2.3.0 merges it key by key into the runtime's
    `node` container (pkg/runtime/core/trainingruntime.go), so the runtime's EFA stays."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runtimeRef": {"name": runtime},
            "suspend": True,  # no Trainer controller runs here: nothing would act on it anyway
            "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": str(gpus)}}},
        },
    }


def jobset_of(name: str, namespace: str, owner: dict[str, object]) -> dict[str, object]:
    """The JobSet Trainer makes for a TrainJob: same name, owned by it, one replicated job `node`."""
    metadata = owner["metadata"]
    assert isinstance(metadata, dict)
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": metadata["name"],
                    "uid": metadata["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "node",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [{"name": "node", "image": "registry.invalid/ml/trainer:e2e"}],
                                }
                            }
                        }
                    },
                }
            ],
        },
    }
