"""The operator's side of workloads, against the fake API: owners read once, Events once."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from fabriccap.controller import lookups as lookups_module
from fabriccap.controller.events import EventRecorder
from fabriccap.controller.lookups import PARALLEL_LOOKUPS, LookupResolver
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.publisher import Publisher
from fabriccap.controller.ratelimit import BackoffPolicy
from fabriccap.controller.store import FactStore
from fabriccap.core import evaluate as evaluate_module
from fabriccap.core.analysis import PoolAnalysis
from fabriccap.core.api import READY_LABEL, FabricCapabilityStatus
from fabriccap.core.facts import ClaimRef, FactsExtractor
from fabriccap.core.index import WORKLOAD_POD_FACTS
from fabriccap.core.shard import UNSHARDED, Shard
from fabriccap.core.workloads import LookupKey
from fabriccap.kube.kinds import BY_KIND
from fabriccap.kube.lookups import lookup_path
from fabriccap.kube.media import METADATA_ONLY
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from fabriccap_devtools.world import (
    SCHEDULER_EFA_MESSAGE,
    ec2_node_class,
    node_pool,
    owner_reference,
    trainjob_pods,
    workload_pod,
)
from support.builders import NODEGROUP, daemon_set, node, plugin_pods
from support.configs import build_config
from support.fakeapi import FakeApi, eventually, fake_api
from support.publishing import healthy, publishing, start

FCAPS = FABRIC_CAPABILITIES.collection()
ML_EVENTS = "/api/v1/namespaces/ml/events"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml/jobsets"
TEMPLATES = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates"
TRAINJOB = owner_reference("TrainJob", "trainer.kubeflow.org/v1alpha1", "bert")


def jobset(name: str = "bert") -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "ml", "ownerReferences": [TRAINJOB]},
    }


def pending_pytorchjob_pod(job: str, efa: int) -> dict[str, Any]:
    """A PyTorchJob's worker the scheduler could not place for lack of EFA."""
    return workload_pod(
        None,
        f"{job}-worker-0",
        efa=efa,
        owner=owner_reference("PyTorchJob", "kubeflow.org/v1", job),
        unschedulable=SCHEDULER_EFA_MESSAGE.format(nodes=2),
    )


@dataclass
class Setup:
    api: FakeApi
    publisher: Publisher
    store: FactStore
    metrics: OperatorMetrics
    lookups: LookupResolver
    extractor: FactsExtractor

    def add(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        for body in bodies:
            BY_KIND[str(body["kind"])].upsert(self.store, self.extractor, body)

    async def start(self) -> None:
        """What ``Publisher.run`` does before its loop: read back, read the owners, a round."""
        await self.publisher.load_published()
        await self.publisher.read_owners_first(timeout=5)
        await self.round()

    async def round(self) -> None:
        """One reconcile round, and the Events it handed to the outbox sent."""
        await self.publisher.reconcile_once()
        assert self.publisher.outbox is not None
        await self.publisher.outbox.drain()

    def events(self) -> list[dict[str, Any]]:
        return list(self.api.objects(ML_EVENTS).values())


@asynccontextmanager
async def operating(
    api_setup: Any = None, *, reuse: FakeApi | None = None, shard: Shard = UNSHARDED
) -> AsyncIterator[Setup]:
    async with fake_api() as (api, client):
        api.serve(FCAPS, "FabricCapability", [], "1")
        api.serve(ML_EVENTS, "Event", [], "1")
        api.serve(JOBSETS, "JobSet", [jobset()], "1")
        if api_setup is not None:
            api_setup(api)
        config = build_config({})
        store, metrics = FactStore(shard), OperatorMetrics(shard)
        lookups = LookupResolver(client, store)
        publisher = Publisher(
            config=config,
            store=store,
            client=client,
            metrics=metrics,
            events=EventRecorder(client, "test"),
            lookups=lookups,
        )
        setup = Setup(api, publisher, store, metrics, lookups, FactsExtractor(config))
        setup.add([daemon_set(), node("n1", efa=32), node("n2", efa=32), *plugin_pods(["n1", "n2"])])
        yield setup
        await lookups.close()


async def test_a_trainjob_without_efa_gets_one_warning_event_on_the_trainjob() -> None:
    async with operating() as setup:
        setup.add(trainjob_pods("bert", ["n1", "n2"]))
        await setup.start()
        (event,) = setup.events()
        assert event["involvedObject"] == {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "bert",
            "namespace": "ml",
            "uid": TRAINJOB["uid"],
        }
        assert (event["type"], event["reason"]) == ("Warning", "FabricNotRequested")
        assert event["metadata"]["name"].startswith("bert.fabriccap-")
        assert (
            "request vpc.amazonaws.com/efa: 32 per node (TrainJob: spec.trainer.resourcesPerNode)" in event["message"]
        )
        # The status names the TrainJob too: the owners were read before the first write.
        status = setup.api.objects(FCAPS)["efa-p5"]["status"]
        assert status["workloads"]["offenders"][0]["kind"] == "TrainJob"
        assert [query for method, path, query, _ in setup.api.requests if path == f"{JOBSETS}/bert"] == [{}]
        # Another round, another pod of the same TrainJob: nothing new is sent, nothing re-read.
        setup.add(trainjob_pods("bert", ["n1", "n2", "n1"]))
        setup.store.mark_all()
        await setup.round()
        assert len(setup.api.writes("POST")) == 3  # the FabricCapability, its Event... and no other
        assert len([1 for method, path, _, _ in setup.api.requests if path == f"{JOBSETS}/bert"]) == 1


async def test_no_event_goes_to_an_owner_whose_owner_is_still_being_read() -> None:
    async with operating() as setup:
        setup.add(trainjob_pods("bert", ["n1", "n2"]))
        await setup.publisher.load_published()
        # A round before the JobSet was read (the start's wait ran out, or a new TrainJob): the
        # status names the JobSet for now; an Event on it would be on the wrong object.
        await setup.round()
        status = setup.api.objects(FCAPS)["efa-p5"]["status"]
        assert status["workloads"]["offenders"][0]["kind"] == "JobSet"
        assert setup.events() == []
        # The read lands: the status and the one Event name the TrainJob.
        await setup.lookups.resolve_now([], timeout=5)
        await setup.round()
        status = setup.api.objects(FCAPS)["efa-p5"]["status"]
        assert status["workloads"]["offenders"][0]["kind"] == "TrainJob"
        (event,) = setup.events()
        assert event["involvedObject"]["kind"] == "TrainJob"


LEADERWORKERSETS = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/ml/leaderworkersets"
RAYCLUSTERS = "/apis/ray.io/v1/namespaces/ml/rayclusters"


def leaderworkerset_pods() -> list[dict[str, Any]]:
    """LWS v0.8.0's shape: leader ``serve-0`` of StatefulSet ``serve``, worker ``serve-0-1`` of
    StatefulSet ``serve-0``, both labelled with the LWS's name, none with its uid."""
    labels = {"leaderworkerset.sigs.k8s.io/name": "serve", "leaderworkerset.sigs.k8s.io/group-index": "0"}
    leader = workload_pod("n1", "serve-0", owner=owner_reference("StatefulSet", "apps/v1", "serve"), labels=labels)
    worker = workload_pod("n2", "serve-0-1", owner=owner_reference("StatefulSet", "apps/v1", "serve-0"), labels=labels)
    return [leader, worker]


async def test_a_leaderworkerset_s_event_carries_the_uid_its_one_read_told() -> None:
    """`kubectl describe lws serve` lists the Events whose involvedObject.uid is the LWS's
    (kubectl pkg/describe/describe.go searchEvents); the pods do not carry it, so it is read."""
    lws: dict[str, Any] = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet"}
    lws["metadata"] = {"name": "serve", "namespace": "ml", "uid": "0d5c4a53-lws-serve"}

    def serve_lws(api: FakeApi) -> None:
        api.serve(LEADERWORKERSETS, "LeaderWorkerSet", [lws], "1")

    async with operating(serve_lws) as setup:
        setup.add(leaderworkerset_pods())
        await setup.start()
        (event,) = setup.events()
        assert event["involvedObject"] == {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "name": "serve",
            "namespace": "ml",
            "uid": "0d5c4a53-lws-serve",
        }
        reads = [accept for path, accept in setup.api.accepts if path == f"{LEADERWORKERSETS}/serve"]
        assert reads == [METADATA_ONLY]  # one read, of its metadata


async def test_an_owner_whose_uid_is_not_known_gets_no_event() -> None:
    """The LWS could not be read (gone, or not served): the status still names it, but an
    Event without its uid would never show in `kubectl describe`, and its name (made without
    the uid) would be that of a re-created LWS's Event too."""
    async with operating() as setup:
        setup.add(leaderworkerset_pods())
        await setup.start()
        status = setup.api.objects(FCAPS)["efa-p5"]["status"]
        assert [(o["kind"], o["name"]) for o in status["workloads"]["offenders"]] == [("LeaderWorkerSet", "serve")]
        assert setup.events() == []


async def test_a_rayjob_s_workers_are_warned_on_the_rayjob() -> None:
    """KubeRay v1.5.0: the RayJob generates a RayCluster it controls (rayjob_controller.go
    constructRayClusterForRayJob); the pods are the RayCluster's and do not name the RayJob.
    One read of the RayCluster names it, with its uid."""
    rayjob = owner_reference("RayJob", "ray.io/v1", "bert")
    cluster: dict[str, Any] = {"apiVersion": "ray.io/v1", "kind": "RayCluster"}
    cluster["metadata"] = {"name": "bert-x7k2p", "namespace": "ml", "ownerReferences": [rayjob]}

    def serve_cluster(api: FakeApi) -> None:
        api.serve(RAYCLUSTERS, "RayCluster", [cluster], "1")

    labels = {"ray.io/cluster": "bert-x7k2p", "ray.io/node-type": "worker", "ray.io/group": "gpu"}
    owner = owner_reference("RayCluster", "ray.io/v1", "bert-x7k2p")
    async with operating(serve_cluster) as setup:
        setup.add([workload_pod(f"n{i}", f"bert-x7k2p-gpu-worker-{i}", owner=owner, labels=labels) for i in (1, 2)])
        await setup.start()
        (event,) = setup.events()
        assert event["involvedObject"] == {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "name": "bert",
            "namespace": "ml",
            "uid": rayjob["uid"],
        }
        assert (
            "(RayJob: spec.rayClusterSpec.workerGroupSpecs[].template.spec.containers[].resources)"
            in (event["message"])
        )
        status = setup.api.objects(FCAPS)["efa-p5"]["status"]
        assert [(o["kind"], o["name"]) for o in status["workloads"]["offenders"]] == [("RayJob", "bert")]
        assert len([1 for _, path, _, _ in setup.api.requests if path == f"{RAYCLUSTERS}/bert-x7k2p"]) == 1


async def test_the_first_round_finds_what_the_owners_read_evaluated(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the owners' read before the first round evaluated is in the memo: each pool's node
    side is computed once for both, and what they named is still the round's to publish."""
    computed: list[str] = []
    original = evaluate_module.evaluate_pool

    def counted(analysis: PoolAnalysis) -> FabricCapabilityStatus:
        computed.append(analysis.pool.value)
        return original(analysis)

    monkeypatch.setattr(evaluate_module, "evaluate_pool", counted)
    async with operating() as setup:
        setup.add(trainjob_pods("bert", ["n1", "n2"]))
        await setup.start()
        assert computed == ["p5"]
        (event,) = setup.events()
        assert event["involvedObject"]["kind"] == "TrainJob"
        assert list(setup.api.objects(FCAPS)) == ["efa-p5"]


async def test_a_restart_does_not_send_the_event_again() -> None:
    async with operating() as setup:
        setup.add(trainjob_pods("bert", ["n1"]))
        await setup.start()
        assert len(setup.events()) == 1
        # A new process: it knows nothing it sent, but the Event's name is the problem's.
        again = Publisher(
            config=setup.publisher.config,
            store=setup.store,
            client=setup.publisher.client,
            metrics=OperatorMetrics(),
            events=EventRecorder(setup.publisher.client, "test-2"),
            lookups=setup.lookups,
        )
        await again.load_published()
        setup.store.mark_all()
        await again.reconcile_once()
        assert again.outbox is not None
        await again.outbox.drain()
        (event,) = setup.events()
        (sent,) = again.workload_events_sent
        assert event["reason"] == "FabricNotRequested"
        assert event["metadata"]["name"].endswith(f".fabriccap-{sent}")  # the 409 told it: the same key


async def test_an_unschedulable_efa_request_is_counted_and_named() -> None:
    async with operating() as setup:
        pending = pending_pytorchjob_pod("big", efa=64)
        setup.add([pending])
        await setup.start()
        gauge = setup.metrics.registry.get_sample_value("fabriccap_unschedulable_fabric_pods", {"fabric": "efa"})
        assert gauge == 1.0
        (event,) = setup.events()
        assert (event["reason"], event["involvedObject"]["kind"]) == ("FabricUnschedulable", "PyTorchJob")
        assert event["message"].endswith("no pool has vpc.amazonaws.com/efa Ready with 64 or more per node")
        setup.store.remove(WORKLOAD_POD_FACTS, ("ml", "big-worker-0"))
        await setup.round()
        gauge = setup.metrics.registry.get_sample_value("fabriccap_unschedulable_fabric_pods", {"fabric": "efa"})
        assert gauge == 0.0


async def test_an_empty_nodepool_pool_ready_from_its_catalog_is_named_where_a_pending_request_would_fit() -> None:
    # Its status has no uniformCount (no node is up): the count is what Karpenter attaches to
    # every type it may launch, p5.48xlarge's 32. Karpenter launches a node for this very pod.
    p5_only = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}]
    pending = pending_pytorchjob_pod("wide", efa=32)
    async with operating() as setup:
        setup.add([node_pool("gpu", p5_only), ec2_node_class(), pending])
        await setup.start()
        status = setup.publisher.objects["efa-gpu"].written
        assert status is not None and status["nodes"] == 0 and "uniformCount" not in status
        (event,) = setup.events()
        assert event["reason"] == "FabricUnschedulable"
        assert event["message"].endswith(
            "pools where vpc.amazonaws.com/efa is Ready with enough per node: "
            f"gpu (karpenter.sh/nodepool=gpu), p5 ({NODEGROUP}=p5)"
        ), event["message"]


async def test_shard_zero_names_the_other_shards_ready_pools_where_a_pending_request_would_fit() -> None:
    # Shard 0 holds the pods no node took; the pools that could take them may be another shard's,
    # known from their published objects.
    first, second = Shard(index=0, count=2), Shard(index=1, count=2)
    theirs = next(f"p5-{number}" for number in range(40) if second.owns_value(f"p5-{number}"))
    async with publishing() as whole:
        whole.add([*healthy(theirs, "t1", "t2")])
        await start(whole)
        published = list(whole.published().values())
    assert [obj["metadata"]["labels"][READY_LABEL] for obj in published] == ["true"]

    def serve_theirs(api: FakeApi) -> None:
        api.serve(FCAPS, "FabricCapability", published, "5")

    pending = pending_pytorchjob_pod("wide", efa=32)
    async with operating(serve_theirs, shard=first) as setup:
        setup.add([pending])
        await setup.start()
        (event,) = setup.events()
        assert event["reason"] == "FabricUnschedulable"
        # Its own pool p5 and the other shard's, in the order of their values.
        assert event["message"].endswith(
            f"pools where vpc.amazonaws.com/efa is Ready with enough per node: p5 ({NODEGROUP}=p5), "
            f"{theirs} ({NODEGROUP}={theirs})"
        ), event["message"]
        written = [path for method, path, _, _ in setup.api.requests if method in ("PUT", "PATCH", "DELETE")]
        assert not [path for path in written if f"efa-{theirs}" in path], "it never writes the other shard's object"


async def test_the_workload_gauge_follows_the_pods() -> None:
    async with operating() as setup:
        setup.add([workload_pod("n1", "llama-0", efa=32)])
        await setup.start()
        labels = {"name": "efa-p5", "fabric": "efa", "pool": "p5"}
        value = setup.metrics.sample_value
        assert value("fabriccap_pool_workload_pods", {**labels, "use": "requesting_fabric"}) == 1.0
        assert value("fabriccap_pool_workload_pods", {**labels, "use": "without_fabric"}) == 0.0


# --- lookups ------------------------------------------------------------------------------------


def referenced(*keys: LookupKey) -> FactStore:
    """A store with a workload pod leading to each of ``keys``: an answer is kept only while
    a live pod leads to it (reliability round 3, H7)."""
    store, extractor = FactStore(), FactsExtractor(build_config({}))
    for index, key in enumerate(keys):
        if key.is_claim:
            field = "resourceClaimTemplateName" if key.kind == "ResourceClaimTemplate" else "resourceClaimName"
            body = workload_pod("n1", f"p{index}", claims=[{"name": "c", field: key.name}])
        else:
            body = workload_pod("n1", f"p{index}", owner=owner_reference(key.kind, key.api_version or "v1", key.name))
        BY_KIND["Pod"].upsert(store, extractor, body)
    return store


async def test_a_missing_owner_kind_means_the_nearest_owner_is_the_top() -> None:
    async with fake_api() as (_api, client):
        key = LookupKey("JobSet", "ml", "gone", "jobset.x-k8s.io/v1alpha2")
        store = referenced(key)
        resolver = LookupResolver(client, store)
        await resolver.resolve_now([key], timeout=5)
        assert store.owner_parents == {("JobSet.jobset.x-k8s.io", "ml", "gone"): None}
        await resolver.close()


async def test_many_owners_are_read_by_a_few_workers_each_once() -> None:
    async with fake_api() as (api, client):
        keys = [LookupKey("Job", "ml", f"job-{index}", "batch/v1") for index in range(300)]
        store = referenced(*keys)
        resolver = LookupResolver(client, store)
        resolver.request(keys)
        resolver.request(keys[:50])  # asked again while queued: read once all the same
        assert 0 < len(resolver._workers) <= PARALLEL_LOOKUPS
        await resolver.resolve_now([], timeout=5)
        assert not resolver.busy
        assert set(store.owner_parents) == {("Job.batch", "ml", f"job-{index}") for index in range(300)}
        reads = [path for method, path, _, _ in api.requests if method == "GET" and "/jobs/" in path]
        assert len(reads) == 300 and len(set(reads)) == 300
        await resolver.close()


async def test_a_forbidden_kind_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="fabriccap.controller.lookups")
    async with fake_api() as (api, client):
        for name in ("a", "b"):
            api.get_failures[f"/apis/batch/v1/namespaces/ml/jobs/{name}"] = deque([403])
        store = referenced(LookupKey("Job", "ml", "a", "batch/v1"), LookupKey("Job", "ml", "b", "batch/v1"))
        resolver = LookupResolver(client, store)
        await resolver.resolve_now(
            [LookupKey("Job", "ml", "a", "batch/v1"), LookupKey("Job", "ml", "b", "batch/v1")], timeout=5
        )
        await resolver.close()
    assert store.owner_parents == {("Job.batch", "ml", "a"): None, ("Job.batch", "ml", "b"): None}
    assert len([r for r in caplog.records if "may not read Job objects" in r.getMessage()]) == 1


async def test_a_claim_template_tells_its_device_classes() -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "efa-32", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "efa", "exactly": {"deviceClassName": "efa.networking.k8s.aws", "count": 32}},
                        {"name": "gpu", "firstAvailable": [{"name": "h100", "deviceClassName": "gpu.nvidia.com"}]},
                    ]
                }
            }
        },
    }
    async with fake_api() as (api, client):
        api.serve(TEMPLATES, "ResourceClaimTemplate", [template], "1")
        store = referenced(LookupKey("ResourceClaimTemplate", "ml", "efa-32"))
        resolver = LookupResolver(client, store)
        await resolver.resolve_now([LookupKey("ResourceClaimTemplate", "ml", "efa-32")], timeout=5)
        await resolver.close()
    assert store.claim_classes == {
        ClaimRef("ResourceClaimTemplate", "ml", "efa-32"): frozenset({"efa.networking.k8s.aws", "gpu.nvidia.com"})
    }


async def test_an_owner_is_read_as_its_metadata_and_a_claim_template_whole() -> None:
    job, template = LookupKey("Job", "ml", "bert-0", "batch/v1"), LookupKey("ResourceClaimTemplate", "ml", "efa-32")
    async with fake_api() as (api, client):
        resolver = LookupResolver(client, referenced(job, template))
        await resolver.resolve_now([job, template], timeout=5)
        await resolver.close()
    accepts = dict(api.accepts)
    # An owner's own owner reference is all a lookup reads of it: the pod template stays home.
    assert accepts[lookup_path(job)] == METADATA_ONLY
    assert accepts[lookup_path(template)] == "application/json"


async def test_a_failed_read_is_retried_later() -> None:
    async with fake_api() as (api, client):
        api.serve(JOBSETS, "JobSet", [jobset()], "1")
        key = LookupKey("JobSet", "ml", "bert", "jobset.x-k8s.io/v1alpha2")
        store = referenced(key)
        now = [100.0]
        resolver = LookupResolver(client, store, clock=lambda: now[0])
        api.get_failures[f"{JOBSETS}/bert"] = deque([500])
        await resolver.resolve_now([key], timeout=5)
        assert store.owner_parents == {}
        retry = resolver.next_retry()
        assert retry is not None and 1.0 <= retry <= 3.0  # 2 s, jittered
        assert resolver.due() == []
        now[0] += retry
        await resolver.resolve_now(resolver.due(), timeout=5)
        await eventually(lambda: ("JobSet.jobset.x-k8s.io", "ml", "bert") in store.owner_parents, "the retry")
        assert store.owner_parents[("JobSet.jobset.x-k8s.io", "ml", "bert")] is not None
        await resolver.close()


@pytest.mark.parametrize("refusal", [503, 500])
async def test_a_read_refused_is_read_again_when_its_wait_is_over_though_nothing_changed(
    monkeypatch: pytest.MonkeyPatch, refusal: int
) -> None:
    """The publisher's own loop, its resync an hour away: a read that failed in a worker (503:
    the queue waits for the server; 500: the read waits on its own) wakes the loop when its
    wait is over, and the status then names the TrainJob, with nothing else changing."""
    monkeypatch.setattr(lookups_module, "LOOKUP_BACKOFF", BackoffPolicy(base=0.2, cap=0.2))

    def refuse_twice(api: FakeApi) -> None:
        api.get_failures[f"{JOBSETS}/bert"] = deque([refusal, refusal])

    async with operating(refuse_twice) as setup:
        setup.publisher.config = build_config({"resyncSeconds": 3600})
        setup.add(trainjob_pods("bert", ["n1", "n2"]))
        setup.store.listed.set()
        loop = asyncio.create_task(setup.publisher.run())

        def names() -> str | None:
            status = setup.api.objects(FCAPS).get("efa-p5", {}).get("status") or {}
            offenders = (status.get("workloads") or {}).get("offenders") or [{}]
            kind = offenders[0].get("kind")
            return kind if isinstance(kind, str) else None

        try:
            await eventually(lambda: names() == "TrainJob", "the JobSet read once its waits were over")
        finally:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)
    assert [1 for _, path, _, _ in setup.api.requests if path == f"{JOBSETS}/bert"] == [1, 1, 1]


def test_lookup_paths() -> None:
    assert lookup_path(LookupKey("Job", "ml", "j", "batch/v1")) == "/apis/batch/v1/namespaces/ml/jobs/j"
    assert lookup_path(LookupKey("JobSet", "ml", "s", "jobset.x-k8s.io/v1alpha2")) == f"{JOBSETS}/s"
    assert lookup_path(LookupKey("ReplicaSet", "ml", "r", "apps/v1")) == "/apis/apps/v1/namespaces/ml/replicasets/r"
    assert lookup_path(LookupKey("ResourceClaim", "ml", "c", "resource.k8s.io/v1beta2")) == (
        "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/c"
    )
