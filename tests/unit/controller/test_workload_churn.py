"""Workload churn leaves nothing behind: what lookups learnt and which problems were warned are
kept only while live pods reference them (reliability round 3, H7; issue 27).

The round-3 run created and deleted 6 x 2,000 pods, each of a new Job: ``owner_parents`` and
the outbox's sent problems grew by 2,000 a cycle and never shrank (about 330 B per finished
Job, for the life of the process). Here the real fact store, lookup resolver, publisher, event
recorder and outbox go through cycles of 2,000 Jobs' pods against a fake API; after each cycle
every map is back to its size before the first, and the memory the interpreter holds does not
grow from cycle to cycle.

The fake API answers from dictionaries, in process: the HTTP one (support.fakeapi) costs about
a millisecond a request, and these cycles make 20,000 (a lookup per Job and per claim template,
an Event per owner).
"""

from __future__ import annotations

import gc
import itertools
import sys
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

from fabriccap.controller.events import EventRecorder, WorkloadEventOutbox
from fabriccap.controller.lookups import LookupResolver
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.publisher import Publisher
from fabriccap.controller.store import FactStore
from fabriccap.core.config import build_config
from fabriccap.core.evaluate import evaluate
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.workloads import LookupKey
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.kinds import BY_KIND
from fabriccap.kube.media import JSON, METADATA_ONLY
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from fabriccap_devtools.world import owner_reference, workload_pod
from support.builders import daemon_set, node, plugin_pods
from support.fakeapi import merge_patch

JOBS_PER_CYCLE = 2_000
CYCLES = 6
# The first cycles set the high-water marks a cycle leaves: the largest table each set and dict
# had (CPython never shrinks one), the caches. Memory is compared after those.
WARM_UP_CYCLES = 2
FCAPS = FABRIC_CAPABILITIES.collection()
JOBS = "/apis/batch/v1/namespaces/ml/jobs"
TEMPLATES = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates"
EVENTS = "/api/v1/namespaces/ml/events"
EVENTS_OF_CAPABILITIES = "/api/v1/namespaces/default/events"
# Memory as the interpreter's allocated blocks (sys.getallocatedblocks: no tracing, which would
# cost 8 s a cycle here). The leak was about 330 B per finished Job, several objects each: more
# than 10,000 blocks a cycle. What may remain is noise, a small fraction of one cycle's leak.
GROWTH_ALLOWED = 1_000


def job(cycle: int, index: int) -> dict[str, Any]:
    """A Job of a CronJob: one read tells its owner (owner_parents, owner_children)."""
    cron = owner_reference("CronJob", "batch/v1", f"nightly-{cycle}-{index}")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"job-{cycle}-{index}", "ownerReferences": [cron]},
    }


def template(cycle: int, index: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": f"gpus-{cycle}-{index}"},
        "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}},
    }


def pod(cycle: int, index: int) -> dict[str, Any]:
    """A GPU pod that asks for no EFA on an advertising pool: a FabricNotRequested problem;
    every other one with a claim (claim_classes)."""
    claims = [{"name": "g", "resourceClaimTemplateName": f"gpus-{cycle}-{index}"}] if index % 2 else []
    owner = owner_reference("Job", "batch/v1", f"job-{cycle}-{index}")
    return workload_pod(f"n{index % 2}", f"job-{cycle}-{index}-pod", owner=owner, claims=claims)


class MemoryApi:
    """The calls the publisher, the resolver and the recorder make, answered from a dictionary
    of objects by path. Writes behave as the API server's do for them: a POST creates (with a
    uid, a resourceVersion and generation 1) and refuses a name taken (409), a PATCH merges."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.requests = 0
        self._versions = itertools.count(1000)

    def serve(self, collection: str, bodies: list[dict[str, Any]]) -> None:
        for body in bodies:
            self.objects[f"{collection}/{body['metadata']['name']}"] = body

    def forget(self, collection: str) -> None:
        for path in [path for path in self.objects if path.rpartition("/")[0] == collection]:
            del self.objects[path]

    async def get(self, path: str, query: Any = None, max_body_bytes: int | None = None, accept: str = JSON) -> Any:
        self.requests += 1
        if path not in self.objects:
            raise KubeError(f"GET {path}: 404 not found", 404)
        if accept == METADATA_ONLY:  # as the API server sends it
            return {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": self.objects[path]["metadata"],
            }
        return self.objects[path]

    async def create(self, path: str, body: Mapping[str, Any]) -> Any:
        return await self.request("POST", path, body=body)

    async def request(self, method: str, path: str, query: Any = None, body: Any = None, **_: Any) -> Any:
        self.requests += 1
        version = str(next(self._versions))
        if method == "POST":
            name = body["metadata"].get("name") or f"{body['metadata']['generateName']}{version}"
            item = f"{path}/{name}"
            if item in self.objects:
                raise KubeError(f"POST {path}: 409 exists", 409)
            metadata = {**body["metadata"], "name": name, "uid": f"uid-{version}", "resourceVersion": version}
            metadata["generation"] = 1
            self.objects[item] = {
                key: value for key, value in {**body, "metadata": metadata}.items() if key != "status"
            }
            return self.objects[item]
        if method == "PATCH" and path.endswith("/status"):
            item = path.removesuffix("/status")
            current = self.objects[item]
            self.objects[item] = {**current, "status": merge_patch(current.get("status"), body["status"])}
        elif method == "PATCH":
            item = path
            self.objects[item] = merge_patch(self.objects[item], {"metadata": body["metadata"]})
        else:
            raise KubeError(f"{method} {path}: 405", 405)
        self.objects[item]["metadata"]["resourceVersion"] = version
        return self.objects[item]

    async def list_items(self, path: str) -> AsyncIterator[dict[str, Any]]:
        for item, body in list(self.objects.items()):
            if item.rpartition("/")[0] == path:
                yield body


def sizes(store: FactStore, publisher: Publisher, lookups: LookupResolver) -> dict[str, int]:
    assert publisher.outbox is not None
    return {
        "workload_pods": len(store.workload_pods),
        "owner_pods": len(store.owner_pods),
        "owner_parents": len(store.owner_parents),
        "owner_children": len(store.owner_children),
        "claim_pods": len(store.claim_pods),
        "claim_classes": len(store.claim_classes),
        "outbox sent": len(publisher.outbox.sent),
        "lookups to retry": len(lookups.due()) + (lookups.next_retry() is not None),
    }


def forget_cycle(api: MemoryApi) -> None:
    """The fake API's own objects (the Jobs, templates and Events) are the test's, not the operator's."""
    for path in (JOBS, TEMPLATES, EVENTS, EVENTS_OF_CAPABILITIES):
        api.forget(path)


async def test_cycles_of_2000_jobs_leave_nothing_behind() -> None:
    api = MemoryApi()
    client = cast(KubeClient, api)
    config = build_config({})
    store, extractor = FactStore(), FactsExtractor(config)
    lookups = LookupResolver(client, store)
    recorder = EventRecorder(client, "test")
    outbox = WorkloadEventOutbox(recorder, leading=lambda: True, rate=1e9, burst=10**9)
    publisher = Publisher(
        config=config,
        store=store,
        client=client,
        metrics=OperatorMetrics(),
        events=recorder,
        lookups=lookups,
        outbox=outbox,
    )
    for body in [daemon_set(), node("n0", efa=32), node("n1", efa=32), *plugin_pods(["n0", "n1"])]:
        BY_KIND[str(body["kind"])].upsert(store, extractor, body)
    await publisher.load_published()
    await publisher.reconcile_once()
    baseline = sizes(store, publisher, lookups)
    memory: list[int] = []
    try:
        for cycle in range(CYCLES):
            api.serve(JOBS, [job(cycle, index) for index in range(JOBS_PER_CYCLE)])
            api.serve(TEMPLATES, [template(cycle, index) for index in range(JOBS_PER_CYCLE)])
            requests = api.requests
            pods = [pod(cycle, index) for index in range(JOBS_PER_CYCLE)]
            for body in pods:
                BY_KIND["Pod"].upsert(store, extractor, body)
            await lookups.resolve_now(evaluate(config, store).lookups, timeout=60)
            await publisher.reconcile_once()
            await outbox.drain()
            # Every Job and template was read once, every CronJob warned once: real churn.
            assert len(outbox.sent) == JOBS_PER_CYCLE + baseline["outbox sent"]
            assert len(store.owner_parents) == JOBS_PER_CYCLE
            assert len(store.claim_classes) == JOBS_PER_CYCLE // 2
            assert api.requests - requests >= JOBS_PER_CYCLE * 2.5

            for body in pods:
                BY_KIND["Pod"].delete(store, body)
            await publisher.reconcile_once()
            del pods, body
            assert sizes(store, publisher, lookups) == baseline, f"cycle {cycle}"
            forget_cycle(api)
            gc.collect()
            memory.append(sys.getallocatedblocks())
    finally:
        await lookups.close()
        await outbox.close()
    print(f"allocated blocks after each cycle: {memory}")
    assert memory[-1] - memory[WARM_UP_CYCLES - 1] < GROWTH_ALLOWED, memory


async def test_an_answer_for_an_owner_no_pod_leads_to_any_more_is_dropped() -> None:
    """A read that lands after the last pod naming it went would otherwise stay for good."""
    store, extractor = FactStore(), FactsExtractor(build_config({}))
    BY_KIND["Pod"].upsert(store, extractor, pod(0, 0))

    class PodGoesWhileRead(MemoryApi):
        async def get(self, path: str, query: Any = None, max_body_bytes: int | None = None, accept: str = JSON) -> Any:
            BY_KIND["Pod"].delete(store, pod(0, 0))
            return await super().get(path, query, max_body_bytes, accept)

    api = PodGoesWhileRead()
    api.serve(JOBS, [job(0, 0)])
    lookups = LookupResolver(cast(KubeClient, api), store)
    await lookups.resolve_now([LookupKey("Job", "ml", "job-0-0", "batch/v1")], timeout=5)
    await lookups.close()
    assert api.requests == 1  # it was read
    assert store.owner_parents == {} and store.owner_children == {}


async def test_a_read_whose_pods_went_before_it_was_sent_is_not_sent() -> None:
    api = MemoryApi()
    api.serve(JOBS, [job(0, 0)])
    lookups = LookupResolver(cast(KubeClient, api), FactStore())
    await lookups.resolve_now([LookupKey("Job", "ml", "job-0-0", "batch/v1")], timeout=5)
    await lookups.close()
    assert api.requests == 0 and not lookups.busy


async def test_released_owners_are_taken_each_round_even_without_events() -> None:
    """The store's record of released owners is emptied every round, not only when an outbox
    wants it: without one (no Events) it would grow with the churn it records."""
    api = MemoryApi()
    config = build_config({})
    store, extractor = FactStore(), FactsExtractor(config)
    publisher = Publisher(config=config, store=store, client=cast(KubeClient, api), metrics=OperatorMetrics())
    assert publisher.outbox is None
    body = pod(0, 0)
    BY_KIND["Pod"].upsert(store, extractor, body)
    BY_KIND["Pod"].delete(store, body)
    assert store.released_owners
    await publisher.reconcile_once()
    assert store.released_owners == set()
