"""The CRDs of the training workloads fabriccap reports on, as their projects release them.

Taken from the Go module proxy at pinned versions (Go verifies each module zip against the
checksum database; the sha256 pins the one file used), never retyped. The end-to-end tests
and the demo install them on the local API server and create workloads of these kinds.

| kind | module | version |
|---|---|---|
| TrainJob (trainer.kubeflow.org/v1alpha1) | github.com/kubeflow/trainer/v2 | v2.3.0 |
| JobSet (jobset.x-k8s.io/v1alpha2), what a TrainJob runs as | sigs.k8s.io/jobset | v0.12.0 (Trainer v2.3.0's) |
| PyTorchJob, MPIJob (kubeflow.org/v1) | github.com/kubeflow/training-operator | v1.9.2 |
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
WORKLOAD_CRDS: tuple[ReleasedCrd, ...] = (TRAINJOB, JOBSET, PYTORCHJOB, MPIJOB)


def trainjob(name: str, namespace: str, *, runtime: str = "torch-distributed", gpus: int = 8) -> dict[str, object]:
    """A TrainJob whose resourcesPerNode asks for GPUs only: it replaces the runtime's resources,
    EFA request included (Trainer v2.3.0's API)."""
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
