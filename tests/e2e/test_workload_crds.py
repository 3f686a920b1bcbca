"""Workloads end to end: TrainJob, JobSet, PyTorchJob and MPIJob objects of the projects' own
released CRDs (fabriccap_devtools.workload_crds, from the Go module proxy), pods owned through the
chains their controllers build, and what the operator makes of them: status.workloads,
Warning Events on the top-level owners (once, across a restart), the unschedulable gauge.

No Trainer, JobSet or training-operator controller runs here: the test creates what they would
(the JobSet owned by the TrainJob, the Job owned by the JobSet, pods labelled as the JobSet
controller labels them), the way the other e2e tests stand in for kubelets.
"""

from __future__ import annotations

import functools
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from fabriccap.kube.paths import CUSTOM_RESOURCE_DEFINITIONS, NAMESPACES, ApiResource
from fabriccap_devtools import world
from fabriccap_devtools.gotools import GoToolError
from fabriccap_devtools.seeding import JOBS, creatable
from fabriccap_devtools.workload_crds import WORKLOAD_CRDS, jobset_of, trainjob
from harness import (
    OperatorProcess,
    SyncKube,
    World,
    condition,
    pod_path,
    published_equals_evaluate,
    wait_until,
    write_config,
)

if TYPE_CHECKING:
    from harness import E2ECluster

TRAINJOBS = ApiResource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", namespaced=True)
JOBSETS = ApiResource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", namespaced=True)
PYTORCHJOBS = ApiResource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", namespaced=True)
MPIJOBS = ApiResource("kubeflow.org", "v1", "mpijobs", "MPIJob", namespaced=True)
EVENTS = ApiResource("", "v1", "events", "Event", namespaced=True)
WAIT = 30.0


@pytest.fixture(scope="module")
def workload_crds(cluster: E2ECluster) -> list[str]:
    if cluster.local is None:
        pytest.skip("installs cluster-wide CRDs: only on the local control plane")
    names = []
    admin = SyncKube(cluster.kubeconfig)
    for crd in WORKLOAD_CRDS:
        try:
            path = crd.file()
        except GoToolError as error:
            pytest.fail(str(error))
        # Server-side: the training-operator's PyTorchJob CRD is too large for the annotation
        # client-side apply writes.
        cluster.run_kubectl("apply", "--server-side", "--field-manager=fabriccap-e2e", "-f", str(path))
        wait_until(functools.partial(established, admin, crd.name), f"CRD {crd.name} Established", timeout=60)
        assert yaml.safe_load(path.read_text())["metadata"]["name"] == crd.name
        names.append(crd.name)
    admin.close()
    return names


def established(kube: SyncKube, name: str) -> bool:
    crd = kube.get(CUSTOM_RESOURCE_DEFINITIONS.item(name)) or {}
    return any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in (crd.get("status") or {}).get("conditions") or []
    )


def owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def replica_specs(field: str, *replica_types: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "main", "image": "registry.invalid/ml/trainer:e2e"}]}}
    return {field: {replica: {"replicas": 1, "template": template} for replica in replica_types}}


def events_on(kube: SyncKube, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
    return [
        event
        for event in kube.list_objects(EVENTS.collection(namespace))
        if event["involvedObject"].get("kind") == kind and event["involvedObject"].get("name") == name
    ]


def test_workloads_of_real_crds_are_reported_and_warned_once(
    cluster: E2ECluster, kube: SyncKube, workload_crds: list[str], tmp_path: Path
) -> None:
    namespace = f"wl-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    pool = World(kube, namespace, prefix=namespace)
    config = write_config(
        tmp_path / "config.yaml",
        {"debounceSeconds": 0.1, "fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [namespace]}}]},
    )
    operator = OperatorProcess(kubeconfig=cluster.kubeconfig, config=config, log_path=tmp_path / "operator.log")
    pods: list[str] = []

    def run_pod(body: dict[str, Any]) -> None:
        status = body.pop("status")
        kube.create(pod_path(namespace), creatable(body))
        kube.patch(pod_path(namespace, body["metadata"]["name"]) + "/status", {"status": status})
        pods.append(body["metadata"]["name"])

    try:
        nodes = pool.add_pool("p5", 2, plugin=True)
        # A TrainJob whose resourcesPerNode asks for GPUs only, run as Trainer, JobSet and the
        # Job controller would: TrainJob -> JobSet -> Job -> pods (labelled by JobSet).
        train = kube.create(TRAINJOBS.collection(namespace), trainjob("bert", namespace))
        jobset = kube.create(JOBSETS.collection(namespace), jobset_of("bert", namespace, train))
        job = kube.create(
            JOBS.collection(namespace),
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "bert-node-0", "namespace": namespace, "ownerReferences": [owner_ref(jobset)]},
                "spec": {
                    "suspend": True,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "node", "image": "registry.invalid/x"}],
                        }
                    },
                },
            },
        )
        labels = {
            "batch.kubernetes.io/job-name": "bert-node-0",
            "jobset.sigs.k8s.io/jobset-name": "bert",
            "jobset.sigs.k8s.io/jobset-uid": jobset["metadata"]["uid"],
            "jobset.sigs.k8s.io/replicatedjob-name": "node",
        }
        for index, node_name in enumerate(nodes):
            run_pod(
                world.workload_pod(
                    node_name,
                    f"bert-node-0-{index}",
                    namespace=namespace,
                    owner=owner_ref(job),
                    labels=labels,
                    env={"FI_PROVIDER": "efa"},
                )
            )
        # A PyTorchJob that asks for EFA (its pods are owned by it directly, no Job between).
        good = kube.create(
            PYTORCHJOBS.collection(namespace),
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": "llama", "namespace": namespace},
                "spec": replica_specs("pytorchReplicaSpecs", "Worker"),
            },
        )
        run_pod(world.workload_pod(nodes[0], "llama-worker-0", namespace=namespace, efa=32, owner=owner_ref(good)))
        # An MPIJob (v1: launcher and workers are its own pods) whose worker forgot EFA.
        mpi = kube.create(
            MPIJOBS.collection(namespace),
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "MPIJob",
                "metadata": {"name": "nccl-tests", "namespace": namespace},
                "spec": replica_specs("mpiReplicaSpecs", "Launcher", "Worker"),
            },
        )
        run_pod(world.workload_pod(nodes[1], "nccl-tests-worker-0", namespace=namespace, owner=owner_ref(mpi)))
        # A PyTorchJob asking for more EFA than any node has: Pending, with the scheduler's message.
        big = kube.create(
            PYTORCHJOBS.collection(namespace),
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": "big", "namespace": namespace},
                "spec": replica_specs("pytorchReplicaSpecs", "Worker"),
            },
        )
        message = world.SCHEDULER_EFA_MESSAGE.format(nodes=2)
        run_pod(
            world.workload_pod(
                None, "big-worker-0", namespace=namespace, efa=64, owner=owner_ref(big), unschedulable=message
            )
        )

        operator.start()
        name = pool.fcap_name("p5")

        def workloads() -> dict[str, Any] | None:
            obj = kube.fcap(name)
            found = ((obj or {}).get("status") or {}).get("workloads")
            return found if found and found["withoutFabric"]["pods"] == 3 else None

        found = wait_until(workloads, f"{name} workloads", timeout=WAIT)
        assert found["requestingFabric"] == {"pods": 1, "workloads": 1}
        assert found["withoutFabric"] == {"pods": 3, "workloads": 2}
        assert found["intentWithoutRequest"] == {"pods": 2, "workloads": 1}
        mpi_job, train_job = (
            {"kind": "MPIJob", "apiVersion": mpi["apiVersion"]},
            {
                "kind": "TrainJob",
                "apiVersion": train["apiVersion"],
            },
        )
        assert found["offenders"] == [
            {"namespace": namespace, **mpi_job, "name": "nccl-tests", "pods": 1, "problem": "withoutFabric"},
            {"namespace": namespace, **train_job, "name": "bert", "pods": 2, "problem": "intentWithoutRequest"},
            {"namespace": namespace, **train_job, "name": "bert", "pods": 2, "problem": "withoutFabric"},
        ]
        assert condition(kube.fcap(name) or {}, "Ready")["status"] == "True"  # informational only

        (warning,) = wait_until(lambda: events_on(kube, namespace, "TrainJob", "bert") or None, "TrainJob Event", WAIT)
        assert (warning["type"], warning["reason"]) == ("Warning", "FabricNotRequested")
        assert warning["involvedObject"]["uid"] == train["metadata"]["uid"]
        assert warning["message"] == (
            f"runs 2 pods on pool {pool.pool('p5')} where vpc.amazonaws.com/efa: 32 is Ready, but requests none: "
            "NCCL will use TCP sockets; request vpc.amazonaws.com/efa: 32 per node "
            "(TrainJob: spec.trainer.resourcesPerNode)"
        )
        # `kubectl describe` of the TrainJob (a custom resource) shows it: the Event names its uid.
        described = cluster.run_kubectl("describe", "trainjob", "bert", "-n", namespace).stdout
        assert "FabricNotRequested" in described and "spec.trainer.resourcesPerNode" in described
        assert [e["reason"] for e in events_on(kube, namespace, "MPIJob", "nccl-tests")] == ["FabricNotRequested"]
        (unschedulable,) = wait_until(lambda: events_on(kube, namespace, "PyTorchJob", "big") or None, "Event", WAIT)
        assert unschedulable["reason"] == "FabricUnschedulable"
        assert unschedulable["message"] == (
            f"1 pod request vpc.amazonaws.com/efa: 64 and cannot be scheduled ({message}); "
            "no pool has vpc.amazonaws.com/efa Ready with 64 or more per node"
        )
        assert events_on(kube, namespace, "PyTorchJob", "llama") == []
        assert operator.metrics().get("fabriccap_unschedulable_fabric_pods", fabric="efa") == 1.0
        assert (
            operator.metrics().get(
                "fabriccap_pool_workload_pods", name=name, fabric="efa", pool=pool.pool("p5"), use="without_fabric"
            )
            == 3.0
        )

        # Offline, from a dump that includes the owners, `fabriccap evaluate` says the same.
        published_equals_evaluate(
            cluster, kube, config, [name], kinds="nodes,pods,daemonsets,resourceslices,jobs,jobsets"
        )

        # A restart finds the same problems: it sends no Event again.
        before = len(kube.list_objects(EVENTS.collection(namespace)))
        operator.restart()
        wait_until(lambda: operator.metrics().get("fabriccap_evaluations_total") or None, "an evaluation", WAIT)
        wait_until(workloads, f"{name} workloads after the restart", timeout=WAIT)
        assert len(kube.list_objects(EVENTS.collection(namespace))) == before

        # The TrainJob is fixed: its pods come back asking for EFA; only the MPIJob is left.
        for index in range(2):
            kube.delete(pod_path(namespace, f"bert-node-0-{index}"))
            pods.remove(f"bert-node-0-{index}")
        for index, node_name in enumerate(nodes):
            run_pod(
                world.workload_pod(
                    node_name,
                    f"bert-node-0-fixed-{index}",
                    namespace=namespace,
                    owner=owner_ref(job),
                    labels=labels,
                    env={"FI_PROVIDER": "efa"},
                    efa=32,
                )
            )

        def fixed() -> dict[str, Any] | None:
            obj = kube.fcap(name)
            found = ((obj or {}).get("status") or {}).get("workloads") or {}
            return found if found.get("withoutFabric", {}).get("pods") == 1 else None

        after = wait_until(fixed, "the fixed TrainJob", timeout=WAIT)
        assert after["requestingFabric"] == {"pods": 3, "workloads": 2}
        assert after["intentWithoutRequest"]["pods"] == 0
    finally:
        operator.stop()
        for pod_name in pods:
            kube.delete(pod_path(namespace, pod_name))
        pool.cleanup(wait=False)
        kube.delete(NAMESPACES.item(namespace))
