"""The demo's workload story: a TrainJob that forgot EFA, the warning it gets, and its fix.

The demo cluster (examples/eks-cluster.json) runs the pods of TrainJob ``bert-finetune`` on the
Ready pool p5-training, asking for GPUs only. Here the owners behind those pods are made real:
Kubeflow Trainer's TrainJob CRD and JobSet's, as their projects release them (from the Go
module proxy), a TrainJob, the JobSet Trainer would make for it, and its Job, so the operator
finds the TrainJob by reading the JobSet, and its Event lands on the object a user wrote.
Without the CRDs (no network to the module proxy), the pods' nearest owner, the JobSet, is
reported instead and the demo says so.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import ApiResource
from fabriccap_devtools.gotools import GoToolError
from fabriccap_devtools.seeding import JOBS, creatable, ensure_namespace
from fabriccap_devtools.workload_crds import JOBSET, TRAINJOB, jobset_of, trainjob

NAMESPACE = "ml-training"
NAME = "bert-finetune"
JOB = f"{NAME}-node-0"
EFA = "vpc.amazonaws.com/efa"
TRAINJOBS = ApiResource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", namespaced=True)
JOBSETS = ApiResource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", namespaced=True)
PODS = ApiResource("", "v1", "pods", "Pod", namespaced=True)


def crd_files(say: Callable[[str], None]) -> list[str] | None:
    """The TrainJob and JobSet CRD files, or None (and why) when the module proxy is out of reach."""
    try:
        return [str(TRAINJOB.file()), str(JOBSET.file())]
    except GoToolError as error:
        say(f"(no TrainJob CRD: {error}; the demo reports the JobSet instead)")
        return None


def trainjob_pods(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        obj
        for obj in objects
        if obj["kind"] == "Pod" and (obj["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name") == NAME
    ]


async def create_owners(client: KubeClient, objects: list[dict[str, Any]]) -> None:
    """The TrainJob, its JobSet and its Job; the pods in ``objects`` are re-pointed at them."""
    await ensure_namespace(client, NAMESPACE)
    train = await client.create(TRAINJOBS.collection(NAMESPACE), trainjob(NAME, NAMESPACE))
    jobset = await client.create(JOBSETS.collection(NAMESPACE), jobset_of(NAME, NAMESPACE, train))
    job = await client.create(
        JOBS.collection(NAMESPACE),
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": JOB,
                "namespace": NAMESPACE,
                "ownerReferences": [
                    {
                        "apiVersion": "jobset.x-k8s.io/v1alpha2",
                        "kind": "JobSet",
                        "name": NAME,
                        "uid": jobset["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "suspend": True,  # no Job controller may run its pods: the demo's are simulated
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "node", "image": "registry.invalid/x"}]}
                },
            },
        },
    )
    for pod in trainjob_pods(objects):
        pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-uid"] = jobset["metadata"]["uid"]
        for reference in pod["metadata"].get("ownerReferences") or []:
            if reference.get("kind") == "Job" and reference.get("name") == JOB:
                reference["uid"] = job["metadata"]["uid"]


async def fix(client: KubeClient, objects: list[dict[str, Any]]) -> int:
    """The TrainJob's resourcesPerNode now asks for EFA too: its pods come back with it."""
    fixed = 0
    for pod in trainjob_pods(objects):
        name = pod["metadata"]["name"]
        try:
            # At once: no kubelet runs the simulated pod to confirm its termination.
            await client.delete(PODS.item(name, NAMESPACE), body={"gracePeriodSeconds": 0})
        except KubeError as error:
            if error.status != 404:
                raise
        body = creatable(copy.deepcopy(pod))
        body["metadata"]["name"] = f"{name}-efa"
        status = body.pop("status", None)
        for container in body["spec"]["containers"]:
            resources = container.setdefault("resources", {})
            for field in ("limits", "requests"):
                resources.setdefault(field, {})[EFA] = "32"
        await client.create(PODS.collection(NAMESPACE), body)
        if status:
            await client.merge_patch(PODS.status(body["metadata"]["name"], NAMESPACE), {"status": status})
        fixed += 1
    return fixed
