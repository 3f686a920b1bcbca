"""`kubectl fabriccap explain jobset/NS/NAME` against the real API server: kubectl finds the
`kubectl-fabriccap` the package installs, the command reads the cluster once (the pool's nodes
and plugin pods, the JobSet of the project's released CRD), names the pool the JobSet selects,
and prints what to set in its manifest (a JobSet's template cannot be patched in place)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from fabriccap.kube.paths import ApiResource
from fabriccap_devtools import world as fabric_world
from fabriccap_devtools.gotools import GoToolError
from fabriccap_devtools.seeding import creatable
from fabriccap_devtools.workload_crds import JOBSET
from harness import SyncKube, World, wait_until, write_config
from test_admission_kinds import established

if TYPE_CHECKING:
    from harness import E2ECluster

JOBSETS = ApiResource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", namespaced=True)
NODEGROUP = "eks.amazonaws.com/nodegroup"
EFA = "vpc.amazonaws.com/efa"
GPU = "nvidia.com/gpu"


def jobset(name: str, pool: str, limits: dict[str, str]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": NODEGROUP, "operator": "In", "values": [pool]}]}
    spec = {
        "restartPolicy": "Never",
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}},
        "containers": [{"name": "node", "image": "registry.invalid/ml/trainer:e2e", "resources": {"limits": limits}}],
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "suspend": True,
            "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": spec}}}}],
        },
    }


def test_kubectl_fabriccap_explains_a_live_jobset_with_the_manifest_change(
    cluster: E2ECluster, kube: SyncKube, tmp_path: Path
) -> None:
    if cluster.local is None:
        pytest.skip("installs a CRD: only on the local control plane")
    plugin = Path(sys.executable).parent / "kubectl-fabriccap"
    assert plugin.exists(), "the package installs kubectl-fabriccap (run scripts/bootstrap.sh)"
    try:
        crd = JOBSET.file()
    except GoToolError as error:
        pytest.fail(str(error))
    cluster.run_kubectl("apply", "--server-side", "--field-manager=fabriccap-e2e", "-f", str(crd))
    wait_until(functools.partial(established, kube, JOBSET.name), "JobSet CRD Established", timeout=60)
    namespace = f"explain-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    world = World(kube, namespace, prefix=namespace)
    config = write_config(
        tmp_path / "config.yaml", {"fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [namespace]}}]}
    )
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "PATH": f"{plugin.parent}{os.pathsep}{os.environ['PATH']}",
    }
    try:
        world.add_pool("p5", 2, plugin=True)
        pool = world.pool("p5")
        kube.create(JOBSETS.collection(namespace), jobset("bert", pool, {"nvidia.com/gpu": "8"}))
        kube.create(JOBSETS.collection(namespace), jobset("ok", pool, {"nvidia.com/gpu": "8", EFA: "32"}))

        def explain(name: str) -> dict[str, Any]:
            result = subprocess.run(
                [
                    str(cluster.kubectl),
                    "fabriccap",
                    "explain",
                    f"jobset/{namespace}/{name}",
                    "--config",
                    str(config),
                    "-o",
                    "json",
                ],
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
                check=False,
            )
            assert (result.returncode, result.stderr) == (0, ""), result.stderr
            found: dict[str, Any] = json.loads(result.stdout)
            return found

        bert = explain("bert")
        assert (bert["pool"], bert["ready"], bert["offers"]) == (
            f"{NODEGROUP}={pool}",
            True,
            f"{EFA}: 32 per node, Ready (2 nodes now)",
        )
        assert explain("ok")["change"] == "nothing to change"

        # A JobSet's template cannot be patched in place (its webhook refuses it): the change is
        # what to set in the manifest (review 66d F5).
        assert bert["change"] == (
            "in the manifest, set spec.replicatedJobs[0].template.spec.template.spec.containers[0]"
            '.resources.limits["vpc.amazonaws.com/efa"]: "32"'
        )
        assert "cannot be changed in place" in bert["note"]
    finally:
        world.delete_objects()  # no operator runs: there are no FabricCapabilities to wait for
        kube.delete(f"/api/v1/namespaces/{namespace}")


# ---------------------------------------------------------------------------------------------
# A live explain reads the owners it needs. No controller-manager runs beside this API server:
# the test makes the Deployment's ReplicaSet and pod itself, owned as the controllers own them.

REPLICA_SETS = ApiResource("apps", "v1", "replicasets", "ReplicaSet", namespaced=True)
DEPLOYMENTS = ApiResource("apps", "v1", "deployments", "Deployment", namespaced=True)
PODS = ApiResource("", "v1", "pods", "Pod", namespaced=True)


def controller_reference(owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }


def apps_object(kind: str, name: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Deployment or ReplicaSet of one GPU pod (8 GPUs, no EFA), owned by ``owner`` if given."""
    labels = {"app": name}
    container = {"name": "node", "image": "registry.invalid/ml/serve:e2e", "resources": {"limits": {GPU: "8"}}}
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if owner is not None:
        metadata["ownerReferences"] = [controller_reference(owner)]
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": metadata,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


@pytest.fixture
def live_namespace(cluster: E2ECluster, kube: SyncKube, tmp_path: Path) -> Iterator[tuple[str, World, Path]]:
    """A namespace with a Ready pool of 2 nodes (plugin pods there), and a config for it."""
    namespace = f"explain-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    world = World(kube, namespace, prefix=namespace)
    config = write_config(
        tmp_path / "config.yaml", {"fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [namespace]}}]}
    )
    try:
        world.add_pool("p5", 2, plugin=True)
        yield namespace, world, config
    finally:
        world.delete_objects()  # no operator runs: there are no FabricCapabilities to wait for
        kube.delete(f"/api/v1/namespaces/{namespace}")


def bound_pod(world: World, namespace: str, name: str, owner: dict[str, Any]) -> dict[str, Any]:
    """A pod of 8 GPUs on the pool's first node, controlled by ``owner``, as a ReplicaSet makes it."""
    body = fabric_world.workload_pod(world.nodes[0], name, namespace=namespace, owner=owner, gpu=8)
    body.pop("status")
    return creatable(body)


def live_json(cluster: E2ECluster, config: Path, *command: str) -> tuple[dict[str, Any], str]:
    """``fabriccap COMMAND… -o json`` of the live cluster, which must exit 0: (its JSON, stderr)."""
    arguments = [*command, "--kubeconfig", str(cluster.kubeconfig), "--config", str(config), "-o", "json"]
    result = subprocess.run(
        [sys.executable, "-m", "fabriccap", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found, result.stderr


def explain_live(cluster: E2ECluster, config: Path, target: str) -> dict[str, Any]:
    return live_json(cluster, config, "explain", target)[0]


def deployment_with_pod(kube: SyncKube, world: World, namespace: str) -> None:
    """Deployment serve, its ReplicaSet serve-5d8f and their pod serve-5d8f-x2k4 on a p5 node,
    owned as the controllers own them (none runs here)."""
    made = kube.create(DEPLOYMENTS.collection(namespace), apps_object("Deployment", "serve"))
    replica_set = kube.create(REPLICA_SETS.collection(namespace), apps_object("ReplicaSet", "serve-5d8f", made))
    kube.create(
        PODS.collection(namespace), bound_pod(world, namespace, "serve-5d8f-x2k4", controller_reference(replica_set))
    )


def test_a_live_deployments_pod_is_named_under_the_deployment(
    cluster: E2ECluster, kube: SyncKube, live_namespace: tuple[str, World, Path]
) -> None:
    namespace, world, config = live_namespace
    deployment_with_pod(kube, world, namespace)

    pod = explain_live(cluster, config, f"pod/{namespace}/serve-5d8f-x2k4")
    # Not the ReplicaSet, which the Deployment would make again without the request.
    assert pod["change"] == f"fabriccap explain deployments.apps/{namespace}/serve"
    assert f"belongs to Deployment {namespace}/serve" in pod["note"]
    assert pod["requestField"].startswith("Deployment: ")
    deployment = explain_live(cluster, config, f"deployment/{namespace}/serve")
    assert deployment["runsOn"] == [f"{NODEGROUP}={world.pool('p5')} (1 pod)"]
    assert deployment["change"].startswith(f"kubectl patch deployments.apps serve -n {namespace} --type json")


def test_a_live_pods_owner_that_is_gone_is_said_with_why(
    cluster: E2ECluster, kube: SyncKube, live_namespace: tuple[str, World, Path]
) -> None:
    namespace, world, config = live_namespace
    # No garbage collector runs here: the pod outlives its ReplicaSet, as it does in a cluster
    # between the owner's deletion and the collector's pass.
    gone = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "gone-1", "uid": str(uuid.uuid4())}}
    kube.create(PODS.collection(namespace), bound_pod(world, namespace, "gone-1-x", controller_reference(gone)))

    pod = explain_live(cluster, config, f"pod/{namespace}/gone-1-x")
    assert pod["change"] == (
        f"ReplicaSet {namespace}/gone-1 could not be read (404 Not Found: it is gone), nor what owns it: "
        f"once it can be, fabriccap explain replicasets.apps/{namespace}/gone-1"
    )


def test_a_live_evaluate_names_a_deployments_pod_under_the_deployment(
    cluster: E2ECluster, kube: SyncKube, live_namespace: tuple[str, World, Path]
) -> None:
    """`fabriccap evaluate` of the live cluster reads the owners the operator reads: its
    `workloads` name the Deployment, as the running operator's status does, not its ReplicaSet."""
    namespace, world, config = live_namespace
    deployment_with_pod(kube, world, namespace)

    evaluated, stderr = live_json(cluster, config, "evaluate")
    assert "not read" not in stderr, stderr
    (status,) = [
        item["status"]
        for item in evaluated["items"]
        if item["status"]["pool"]["value"] == world.pool("p5") and item["status"]["fabric"] == "efa"
    ]
    offenders = [(entry["namespace"], entry["kind"], entry["name"]) for entry in status["workloads"]["offenders"]]
    assert offenders == [(namespace, "Deployment", "serve")]
