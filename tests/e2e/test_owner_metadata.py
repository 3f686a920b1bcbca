"""An owner is read as its metadata alone, on the real API server (issue 26).

A lookup of a pod's Job reads only the Job's own owner reference, and a Job carries the whole
pod template besides. The operator asks for meta.k8s.io/v1 PartialObjectMetadata, as client-go's
metadata client does: kube-apiserver sends the metadata without spec or status, and the
resolver learns the owner from it as from the whole object.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from fabriccap.controller.lookups import LookupResolver
from fabriccap.controller.store import FactStore
from fabriccap.core.config import build_config
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.workloads import LookupKey
from fabriccap.kube.client import connect
from fabriccap.kube.kinds import BY_KIND
from fabriccap.kube.media import METADATA_ONLY
from fabriccap.kube.paths import NAMESPACES, ApiResource
from fabriccap_devtools import world
from fabriccap_devtools.seeding import JOBS, create_job
from harness import E2ECluster, SyncKube

CRON_JOBS = ApiResource("batch", "v1", "cronjobs", "CronJob", namespaced=True)
WAIT_SECONDS = 30.0


def test_an_owner_is_read_as_metadata_and_its_own_owner_learned_from_it(cluster: E2ECluster, kube: SyncKube) -> None:
    namespace = f"owners-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    try:
        pod = world.workload_pod(
            "n1", "nightly-0", namespace=namespace, owner=world.owner_reference("Job", "batch/v1", "nightly", namespace)
        )
        template = {"metadata": {"labels": {"app": "nightly"}}, "spec": {**pod["spec"], "restartPolicy": "Never"}}
        template["spec"].pop("nodeName")
        cron_job = kube.create(
            CRON_JOBS.collection(namespace),
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": {"name": "nightly"},
                "spec": {"schedule": "0 3 * * *", "suspend": True, "jobTemplate": {"spec": {"template": template}}},
            },
        )
        owner = {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": "nightly",
            "uid": cron_job["metadata"]["uid"],
            "controller": True,
        }
        asyncio.run(_read_owner(str(cluster.kubeconfig), pod, namespace, owner))
    finally:
        kube.delete(NAMESPACES.item(namespace))


async def _read_owner(kubeconfig: str, pod: dict[str, Any], namespace: str, owner: dict[str, Any]) -> None:
    async with await connect(kubeconfig) as client:
        # The benchmarks' Jobs (world.job, created by seeding.create_job), here as a CronJob's.
        job = world.job(pod, "nightly", uid="", pods=1, started_at="2026-12-01T03:00:00Z", owner=owner)
        job["spec"]["suspend"] = True
        created = await create_job(client, job)
        assert created["spec"]["template"]["spec"]["containers"][0]["image"] == world.WORKLOAD_IMAGE
        job_path = JOBS.item("nightly", namespace)
        metadata = await asyncio.wait_for(client.get(job_path, accept=METADATA_ONLY), WAIT_SECONDS)
        whole = await asyncio.wait_for(client.get(job_path), WAIT_SECONDS)
        assert (metadata["kind"], metadata["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
        assert "spec" not in metadata and "status" not in metadata
        assert metadata["metadata"]["ownerReferences"] == whole["metadata"]["ownerReferences"]
        assert "template" in whole["spec"]

        # The resolver's read of the pod's Job: the Job's owner, the CronJob, learned from it.
        store = FactStore()
        BY_KIND["Pod"].upsert(store, FactsExtractor(build_config({})), pod)
        key = LookupKey("Job", namespace, "nightly", "batch/v1")
        resolver = LookupResolver(client, store)
        try:
            await resolver.resolve_now([key], timeout=WAIT_SECONDS)
        finally:
            await resolver.close()
        parent = store.owner_parents.get(key.owner_key)
        assert parent is not None and (parent.kind, parent.name) == ("CronJob", "nightly")
