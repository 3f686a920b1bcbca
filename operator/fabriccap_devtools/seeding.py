"""Loading a snapshot into a bare API server: what kubelets and controllers would have written.

A local kube-apiserver has no kubelet, scheduler or controllers, so the demo and the
end-to-end tests create Nodes and patch their ``/status`` (capacity, allocatable), create
DaemonSets, create bound Pods and patch their status, and publish ResourceSlices as a DRA
driver would, themselves. Only the demo, the
tests and the benchmarks use this module; the operator never writes these kinds.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterable, Mapping
from typing import Any

from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import DAEMON_SETS, NAMESPACES, NODES, PODS, RESOURCE_SLICES, ApiResource
from fabriccap_devtools.world import JOB_CONTROLLER_LABELS

JOBS = ApiResource("batch", "v1", "jobs", "Job", namespaced=True)

# Fields the API server sets itself and refuses (or ignores) on create.
_SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "managedFields", "selfLink", "generation")


def creatable(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy without the fields the API server sets itself and refuses on create."""
    body = copy.deepcopy(dict(obj))
    metadata = body.setdefault("metadata", {})
    for key in _SERVER_FIELDS:
        metadata.pop(key, None)
    return body


async def ensure_namespace(client: KubeClient, namespace: str) -> None:
    try:
        await client.create(
            NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
    except KubeError as error:
        if error.status != 409:
            raise


async def create_job(client: KubeClient, job: Mapping[str, Any]) -> dict[str, Any]:
    """A Job (as ``world.job`` serves it) created as a client creates one: the API server
    picks the uid and makes the selector and the controller-uid labels from it (a Job naming
    its own selector is refused unless ``spec.manualSelector``); no status (the Job
    controller's, where one runs)."""
    body = creatable(job)
    body.pop("status", None)
    spec = body["spec"]
    spec.pop("selector", None)
    spec.pop("manualSelector", None)
    for labels in (body["metadata"].get("labels", {}), spec["template"]["metadata"].get("labels", {})):
        for key in JOB_CONTROLLER_LABELS:
            labels.pop(key, None)
    created: dict[str, Any] = await client.create(JOBS.collection(body["metadata"]["namespace"]), body)
    return created


async def create_node(client: KubeClient, node: Mapping[str, Any]) -> dict[str, Any]:
    body = creatable(node)
    status = body.pop("status", None)
    created: dict[str, Any] = await client.create(NODES.collection(), body)
    if status:
        created = await client.merge_patch(NODES.status(body["metadata"]["name"]), {"status": status})
    return created


async def create_daemon_set(client: KubeClient, daemon_set: Mapping[str, Any]) -> dict[str, Any]:
    body = creatable(daemon_set)
    status = body.pop("status", None)
    namespace = body["metadata"].get("namespace", "default")
    created: dict[str, Any] = await client.create(DAEMON_SETS.collection(namespace), body)
    if status:
        created = await client.merge_patch(DAEMON_SETS.status(body["metadata"]["name"], namespace), {"status": status})
    return created


async def create_pod(
    client: KubeClient, pod: Mapping[str, Any], owner_uids: Mapping[tuple[str, str], str] | None = None
) -> dict[str, Any]:
    body = creatable(pod)
    status = body.pop("status", None)
    metadata = body["metadata"]
    namespace = metadata.get("namespace", "default")
    for reference in metadata.get("ownerReferences") or []:
        uid = (owner_uids or {}).get((reference.get("kind", ""), reference.get("name", "")))
        if uid:
            reference["uid"] = uid
    created: dict[str, Any] = await client.create(PODS.collection(namespace), body)
    if status:
        created = await client.merge_patch(PODS.status(metadata["name"], namespace), {"status": status})
    return created


async def create_resource_slice(
    client: KubeClient, resource_slice: Mapping[str, Any], node_uids: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A ResourceSlice as a DRA driver publishes it; its Node owner reference gets the real uid."""
    body = creatable(resource_slice)
    for reference in body["metadata"].get("ownerReferences") or []:
        uid = (node_uids or {}).get(reference.get("name", "")) if reference.get("kind") == "Node" else None
        if uid:
            reference["uid"] = uid
    created: dict[str, Any] = await client.create(RESOURCE_SLICES.collection(), body)
    return created


async def create_with_status(client: KubeClient, resource: ApiResource, obj: Mapping[str, Any]) -> dict[str, Any]:
    """A cluster-scoped object of a CRD with a status subresource, as its controller writes it:
    created, then its status patched (Karpenter's NodePools, NodeClaims and EC2NodeClasses)."""
    body = creatable(obj)
    status = body.pop("status", None)
    created: dict[str, Any] = await client.create(resource.collection(), body)
    if status:
        created = await client.merge_patch(f"{resource.item(body['metadata']['name'])}/status", {"status": status})
    return created


async def load_cluster_scoped(
    client: KubeClient, objects: Iterable[Mapping[str, Any]], resources: Iterable[ApiResource]
) -> int:
    """Create the objects of ``resources``' kinds among ``objects``, kind by kind in that order."""
    created = 0
    listed = list(objects)
    for resource in resources:
        for obj in listed:
            if obj.get("kind") == resource.kind and str(obj.get("apiVersion")) == resource.api_version:
                await create_with_status(client, resource, obj)
                created += 1
    return created


async def wait_for_default_service_account(client: KubeClient, namespace: str, timeout: float = 30.0) -> None:
    """Where ServiceAccount admission is on (real nodes), a pod is refused until the
    controller-manager has created its namespace's `default` ServiceAccount."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await client.get(f"{NAMESPACES.item(namespace)}/serviceaccounts/default")
            return
        except KubeError as error:
            if error.status != 404 or asyncio.get_running_loop().time() > deadline:
                raise
        await asyncio.sleep(0.2)


async def load_objects(
    client: KubeClient,
    objects: Iterable[Mapping[str, Any]],
    concurrency: int = 16,
    *,
    service_accounts: bool = False,
    adopt: bool = False,
) -> None:
    """Create Nodes, then DaemonSets, then Pods and ResourceSlices (owner references get the
    real DaemonSet and Node uids).

    ``service_accounts``: the apiserver admits pods only once their ServiceAccount exists.
    ``adopt`` (a DaemonSet controller runs): Pods go first, without their DaemonSet owner
    references, and the DaemonSets after them, so that the controller adopts the pods instead
    of creating its own for every node (it would then delete ours as duplicates).
    """
    by_kind: dict[str, list[Mapping[str, Any]]] = {"Node": [], "DaemonSet": [], "Pod": [], "ResourceSlice": []}
    for obj in objects:
        if obj.get("kind") in by_kind:
            by_kind[str(obj["kind"])].append(obj)
    namespaces = {
        str(obj.get("metadata", {}).get("namespace", "default")) for obj in by_kind["DaemonSet"] + by_kind["Pod"]
    }
    for namespace in sorted(namespaces):
        await ensure_namespace(client, namespace)
        if service_accounts:
            await wait_for_default_service_account(client, namespace)
    limit = asyncio.Semaphore(concurrency)

    async def bounded(coroutine: Any) -> Any:
        async with limit:
            return await coroutine

    created_nodes = await asyncio.gather(*(bounded(create_node(client, node)) for node in by_kind["Node"]))
    node_uids = {node["metadata"]["name"]: node["metadata"]["uid"] for node in created_nodes}

    async def publish_slices() -> None:
        await asyncio.gather(
            *(bounded(create_resource_slice(client, body, node_uids)) for body in by_kind["ResourceSlice"])
        )

    if adopt:
        await asyncio.gather(*(bounded(create_pod(client, _orphaned(pod))) for pod in by_kind["Pod"]))
        await asyncio.gather(*(bounded(create_daemon_set(client, ds)) for ds in by_kind["DaemonSet"]))
        await publish_slices()
        return
    created_sets = await asyncio.gather(*(bounded(create_daemon_set(client, ds)) for ds in by_kind["DaemonSet"]))
    owner_uids = {("DaemonSet", ds["metadata"]["name"]): ds["metadata"]["uid"] for ds in created_sets}
    await asyncio.gather(*(bounded(create_pod(client, pod, owner_uids)) for pod in by_kind["Pod"]))
    await publish_slices()


def _orphaned(pod: Mapping[str, Any]) -> dict[str, Any]:
    body = creatable(pod)
    references = body["metadata"].get("ownerReferences") or []
    body["metadata"]["ownerReferences"] = [r for r in references if r.get("kind") != "DaemonSet"]
    return body


async def set_node_fabric(client: KubeClient, name: str, resource: str, capacity: int, allocatable: int) -> None:
    """What the device plugin (via the kubelet) does when devices come and go."""
    await client.merge_patch(
        NODES.status(name),
        {"status": {"capacity": {resource: str(capacity)}, "allocatable": {resource: str(allocatable)}}},
    )
