"""A live ``fabriccap explain KIND/NS/NAME`` reads the owners it needs, as the operator reads them
(one metadata GET each, answers put in the index by ``learn_lookup``), bounded: a Deployment's
pod is told the Deployment, not its ReplicaSet; an owner that is forbidden or gone is said, with
why; a loop and a chain longer than the bound end the reads. A live ``evaluate`` and a pool's
``explain`` read the owners the operator would, bounded too, and say what they left unread.
Through a fake API server."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from fabriccap.cli.commands import main
from fabriccap.core.config import build_config
from fabriccap.core.workloads import LookupKey
from fabriccap.kube.errors import KubeError, UnreachableError
from fabriccap.kube.lookups import lookup_path
from fabriccap.kube.media import METADATA_ONLY
from fabriccap.kube.paths import DAEMON_SETS, NODES, PODS, ApiResource
from fabriccap.offline.owners import MAX_OWNER_READS, OwnerReader
from fabriccap_devtools.world import owner_reference, workload_pod
from support.builders import facts_of, healthy_pool
from support.cli import write_kubeconfig
from support.fakeapi import FakeApi, fake_api

REPLICA_SETS = ApiResource.of("apps/v1", "replicasets", "ReplicaSet", namespaced=True)
DEPLOYMENTS = ApiResource.of("apps/v1", "deployments", "Deployment", namespaced=True)
JOBS = ApiResource.of("batch/v1", "jobs", "Job", namespaced=True)
JOBSETS = ApiResource.of("jobset.x-k8s.io/v1alpha2", "jobsets", "JobSet", namespaced=True)
POD_TEMPLATE = {
    "spec": {"containers": [{"name": "node", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}
}


def serve(api: FakeApi, *objects: dict[str, Any]) -> None:
    """The healthy pool (nodes, plugin DaemonSet and pods) and ``objects``, each in its collection."""
    cluster = [*healthy_pool(), *objects]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for body in cluster:
        by_kind.setdefault(body["kind"], []).append(body)
    api.serve(NODES.collection(), "Node", by_kind.pop("Node", []), "10")
    api.serve(DAEMON_SETS.collection("kube-system"), "DaemonSet", by_kind.pop("DaemonSet", []), "10")
    pods = by_kind.pop("Pod", [])
    api.serve(PODS.collection(), "Pod", pods, "10")
    # Where the explained pod itself is read, by name.
    api.serve(PODS.collection("ml"), "Pod", [pod for pod in pods if pod["metadata"]["namespace"] == "ml"], "10")
    for resource in (REPLICA_SETS, DEPLOYMENTS, JOBS, JOBSETS):
        api.serve(resource.collection("ml"), resource.kind, by_kind.pop(resource.kind, []), "10")
    assert not by_kind, f"no collection for {sorted(by_kind)}"


def replica_set(name: str = "serve-1", owner: str | None = "serve") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ml"}
    if owner is not None:
        metadata["ownerReferences"] = [owner_reference("Deployment", "apps/v1", owner)]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": metadata, "spec": {"template": POD_TEMPLATE}}


def deployment(name: str = "serve") -> dict[str, Any]:
    metadata = {"name": name, "namespace": "ml"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": {"template": POD_TEMPLATE}}


def batch_job(name: str, owner: str | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ml"}
    if owner is not None:
        metadata["ownerReferences"] = [owner_reference("Job", "batch/v1", owner)]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {"template": POD_TEMPLATE}}


def deployment_pod(name: str = "serve-1-x", replica: str = "serve-1") -> dict[str, Any]:
    return workload_pod("n1", name, owner=owner_reference("ReplicaSet", "apps/v1", replica))


def owner_gets(api: FakeApi) -> list[str]:
    """The paths of the owner reads sent (every request a GET: the CLI never writes)."""
    assert {method for method, *_ in api.requests} == {"GET"}
    owner_paths = tuple(f"{r.collection('ml')}/" for r in (REPLICA_SETS, DEPLOYMENTS, JOBS, JOBSETS))
    return [path for _, path, _, _ in api.requests if path.startswith(owner_paths)]


async def run_explain(api: FakeApi, tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str) -> dict[str, Any]:
    kubeconfig = write_kubeconfig(tmp_path, api.url)
    code = await asyncio.to_thread(main, ["explain", target, "--kubeconfig", str(kubeconfig), "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0 and "error" not in err, err  # warnings: the fake serves no DRA kinds
    result: dict[str, Any] = json.loads(out)
    return result


async def test_a_deployments_pod_is_told_the_deployment_not_its_replica_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with fake_api() as (api, _client):
        serve(api, replica_set(), deployment(), deployment_pod())
        result = await run_explain(api, tmp_path, capsys, "pod/ml/serve-1-x")
        # The ReplicaSet is read, as the operator reads it (its metadata alone); the Deployment,
        # a kind whose owner is never read, is not.
        assert owner_gets(api) == [REPLICA_SETS.item("serve-1", "ml")]
        assert (REPLICA_SETS.item("serve-1", "ml"), METADATA_ONLY) in api.accepts
    assert result["change"] == "fabriccap explain deployments.apps/ml/serve"
    assert result["requestField"].startswith("Deployment: ")
    assert "belongs to Deployment ml/serve" in result["note"]


async def test_a_deployment_counts_the_pods_of_its_replica_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with fake_api() as (api, _client):
        serve(api, replica_set(), deployment(), deployment_pod())
        result = await run_explain(api, tmp_path, capsys, "deployment/ml/serve")
    assert result["runsOn"] == ["eks.amazonaws.com/nodegroup=p5 (1 pod)"]
    assert result["change"].startswith("kubectl patch deployments.apps serve -n ml --type json")


async def test_a_jobsets_pod_is_told_the_jobset_not_its_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A pod without the JobSet controller's labels names only its Job: the Job's read tells the
    # JobSet, and the JobSet's that nothing owns it.
    job = batch_job("bert-node-0", None)
    job["metadata"]["ownerReferences"] = [owner_reference("JobSet", "jobset.x-k8s.io/v1alpha2", "bert")]
    the_jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "bert", "namespace": "ml"},
        "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": POD_TEMPLATE}}}]},
    }
    pod = workload_pod("n1", "bert-node-0-0-x", owner=owner_reference("Job", "batch/v1", "bert-node-0"))
    async with fake_api() as (api, _client):
        serve(api, job, the_jobset, pod)
        result = await run_explain(api, tmp_path, capsys, "pod/ml/bert-node-0-0-x")
        assert owner_gets(api) == [JOBS.item("bert-node-0", "ml"), JOBSETS.item("bert", "ml")]
    assert result["change"] == "fabriccap explain jobsets.jobset.x-k8s.io/ml/bert"


@pytest.mark.parametrize(
    ("status", "why"),
    [
        (403, "403 Forbidden: grant get on replicasets.apps in namespace ml"),
        (404, "404 Not Found: it is gone"),
    ],
)
async def test_an_owner_forbidden_or_gone_is_said_with_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], status: int, why: str
) -> None:
    async with fake_api() as (api, _client):
        if status == 403:
            serve(api, replica_set(), deployment(), deployment_pod())
            api.get_failures[REPLICA_SETS.item("serve-1", "ml")] = deque([403])
        else:
            serve(api, deployment(), deployment_pod())  # the ReplicaSet is gone
        result = await run_explain(api, tmp_path, capsys, "pod/ml/serve-1-x")
        assert owner_gets(api) == [REPLICA_SETS.item("serve-1", "ml")]
    assert result["change"] == (
        f"ReplicaSet ml/serve-1 could not be read ({why}), nor what owns it: "
        "once it can be, fabriccap explain replicasets.apps/ml/serve-1"
    )


async def test_a_deployment_whose_replica_set_is_forbidden_says_its_pods_are_not_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with fake_api() as (api, _client):
        serve(api, replica_set(), deployment(), deployment_pod())
        api.get_failures[REPLICA_SETS.item("serve-1", "ml")] = deque([403])
        result = await run_explain(api, tmp_path, capsys, "deployment/ml/serve")
    assert result["runsOn"] == []
    assert (
        "1 other pods of ml are not counted: their owners could not be read "
        "(403 Forbidden: grant get on replicasets.apps in namespace ml)"
    ) in result["note"]


async def test_an_owner_loop_is_read_once_round_and_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = workload_pod("n1", "loop-pod", owner=owner_reference("Job", "batch/v1", "job-a"))
    async with fake_api() as (api, _client):
        serve(api, batch_job("job-a", "job-b"), batch_job("job-b", "job-a"), pod)
        result = await run_explain(api, tmp_path, capsys, "pod/ml/loop-pod")
        assert sorted(owner_gets(api)) == [JOBS.item("job-a", "ml"), JOBS.item("job-b", "ml")]
    assert result["change"] == (
        "none until the owner loop is fixed: Pod ml/loop-pod → Job ml/job-a → Job ml/job-b → Job ml/job-a"
    )


async def test_a_chain_longer_than_the_bound_is_read_that_far_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    length = MAX_OWNER_READS + 10
    jobs = [batch_job(f"job-{i}", f"job-{i + 1}" if i + 1 < length else None) for i in range(length)]
    pod = workload_pod("n1", "deep-pod", owner=owner_reference("Job", "batch/v1", "job-0"))
    async with fake_api() as (api, _client):
        serve(api, *jobs, pod)
        result = await run_explain(api, tmp_path, capsys, "pod/ml/deep-pod")
        assert owner_gets(api) == [JOBS.item(f"job-{i}", "ml") for i in range(MAX_OWNER_READS)]
    last = f"job-{MAX_OWNER_READS}"
    assert result["change"] == (
        f"Job ml/{last} could not be read (explain reads at most {MAX_OWNER_READS} owners), nor what owns it: "
        f"once it can be, fabriccap explain jobs.batch/ml/{last}"
    )


async def test_the_objects_own_chain_is_read_before_its_namespaces_pods() -> None:
    """Other workloads' pods never use the bound up before the explained object's chain is read."""
    others = [workload_pod("n2", f"a-{i}", owner=owner_reference("Job", "batch/v1", f"other-{i}")) for i in range(8)]
    jobs = [batch_job("job-0", "job-1"), batch_job("job-1", None), *(batch_job(f"other-{i}", None) for i in range(8))]
    pod = workload_pod("n1", "z-pod", owner=owner_reference("Job", "batch/v1", "job-0"))
    config = build_config({})
    facts = facts_of([*healthy_pool(), *others, pod], config)
    async with fake_api() as (api, client):
        serve(api, *jobs)
        reader = OwnerReader(client, facts, max_reads=3)
        own = [LookupKey("Job", "ml", "job-0", "batch/v1"), LookupKey("Job", "ml", "job-1", "batch/v1")]
        wanted = iter([[own[0]], [own[1]], []])
        await reader.read_until_known(lambda: next(wanted))
        await reader.read_until_known(lambda: [LookupKey("Job", "ml", f"other-{i}", "batch/v1") for i in range(8)])
        assert owner_gets(api)[:2] == [JOBS.item("job-0", "ml"), JOBS.item("job-1", "ml")]
        assert len(owner_gets(api)) == 3
    assert facts.owner_parents[("Job.batch", "ml", "job-0")] is not None
    assert facts.owner_parents[("Job.batch", "ml", "job-1")] is None
    assert len(reader.unread) == 7 and set(reader.unread.values()) == {"explain reads at most 3 owners"}


async def test_reads_go_a_few_at_a_time() -> None:
    class CountingClient:
        def __init__(self) -> None:
            self.running = 0
            self.most = 0

        async def get(self, path: str, **_: Any) -> dict[str, Any]:
            self.running += 1
            self.most = max(self.most, self.running)
            await asyncio.sleep(0.01)
            self.running -= 1
            return {"metadata": {"name": path.rpartition("/")[2]}}

    client = CountingClient()
    facts = facts_of(healthy_pool(), build_config({}))
    reader = OwnerReader(client, facts, parallel=4)  # type: ignore[arg-type]
    keys = [LookupKey("Job", "ml", f"job-{i}", "batch/v1") for i in range(20)]
    await reader.read_until_known(lambda: [key for key in keys if key.owner_key not in facts.owner_parents])
    assert client.most == 4
    assert all(facts.owner_parents[key.owner_key] is None for key in keys)


# -- A live ``fabriccap evaluate`` (and a pool's ``explain``) reads the owners the operator reads


async def run_evaluate(
    api: FakeApi, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, Any], list[str]]:
    """The status of the pool's EFA object, and the `warning:` lines on stderr."""
    kubeconfig = write_kubeconfig(tmp_path, api.url)
    code = await asyncio.to_thread(main, ["evaluate", "--kubeconfig", str(kubeconfig), "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0 and "error" not in err, err
    (status,) = [
        capability["status"] for capability in json.loads(out)["items"] if capability["status"]["fabric"] == "efa"
    ]
    return status, err.splitlines()


def offenders(status: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [(entry["kind"], entry["name"], entry["pods"]) for entry in status["workloads"]["offenders"]]


async def test_a_live_evaluate_reports_a_deployments_pod_under_the_deployment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with fake_api() as (api, _client):
        serve(api, replica_set(), deployment(), deployment_pod())
        status, _ = await run_evaluate(api, tmp_path, capsys)
        assert owner_gets(api) == [REPLICA_SETS.item("serve-1", "ml")]
        assert (REPLICA_SETS.item("serve-1", "ml"), METADATA_ONLY) in api.accepts
    assert offenders(status) == [("Deployment", "serve", 1)]
    assert status["workloads"]["withoutFabric"] == {"pods": 1, "workloads": 1}


async def test_a_live_pool_explain_reports_a_deployments_pod_under_the_deployment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with fake_api() as (api, _client):
        serve(api, replica_set(), deployment(), deployment_pod())
        result = await run_explain(api, tmp_path, capsys, "eks.amazonaws.com/nodegroup=p5")
        assert owner_gets(api) == [REPLICA_SETS.item("serve-1", "ml")]
    assert offenders(result["status"]) == [("Deployment", "serve", 1)]


async def test_a_live_evaluate_reads_at_most_its_bound_and_says_what_it_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("fabriccap.offline.pipeline.MAX_CLUSTER_READS", 2)
    names = ["a", "b", "c"]
    objects = [
        *(replica_set(f"{name}-1", owner=name) for name in names),
        *(deployment(name) for name in names),
        *(deployment_pod(f"{name}-1-x", f"{name}-1") for name in names),
    ]
    async with fake_api() as (api, _client):
        serve(api, *objects)
        status, warnings = await run_evaluate(api, tmp_path, capsys)
        # The first two by name are read; the third is not, and is named by what its pod names.
        assert owner_gets(api) == [REPLICA_SETS.item("a-1", "ml"), REPLICA_SETS.item("b-1", "ml")]
    assert offenders(status) == [("Deployment", "a", 1), ("Deployment", "b", 1), ("ReplicaSet", "c-1", 1)]
    assert [line for line in warnings if "not read" in line] == [
        "warning: not read (a live read reads at most 2 owners and claims): "
        "1 owners: their workloads are named by the nearest owner read"
    ]


async def test_a_live_evaluate_forbidden_an_owner_names_the_nearest_and_says_what_to_grant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with fake_api() as (api, _client):
        serve(api, replica_set(), deployment(), deployment_pod())
        api.get_failures[REPLICA_SETS.item("serve-1", "ml")] = deque([403])
        status, warnings = await run_evaluate(api, tmp_path, capsys)
        # Read once: a 403 is an answer, as the operator takes it (no further owner).
        assert owner_gets(api) == [REPLICA_SETS.item("serve-1", "ml")]
    assert offenders(status) == [("ReplicaSet", "serve-1", 1)]
    assert [line for line in warnings if "not read" in line] == [
        "warning: not read (403 Forbidden: grant get on replicasets.apps in namespace ml): "
        "1 owners: their workloads are named by the nearest owner read"
    ]


async def test_a_forbidden_claim_template_says_what_to_grant() -> None:
    """The operator reads a pod's ResourceClaimTemplate as it reads an owner: so does a live
    evaluate, and a 403 on it says which resource to grant, as an owner's does."""
    templates = ApiResource.of("resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate", namespaced=True)
    facts = facts_of(healthy_pool(), build_config({}))
    key = LookupKey("ResourceClaimTemplate", "ml", "efa", "resource.k8s.io/v1")
    async with fake_api() as (api, client):
        api.get_failures[templates.item("efa", "ml")] = deque([403])
        reader = OwnerReader(client, facts)
        await reader.read_until_known(lambda: [key])
    assert reader.unread_lookups == {
        key: "403 Forbidden: grant get on resourceclaimtemplates.resource.k8s.io in namespace ml"
    }
    assert reader.unread_lines() == [
        "not read (403 Forbidden: grant get on resourceclaimtemplates.resource.k8s.io in namespace ml): "
        "1 claims: their pods are judged as claiming no device class"
    ]


class SlowClient:
    """An API server that answers each GET after ``delay`` seconds, or answers 500 at once."""

    def __init__(self, delay: float, fail: bool = False) -> None:
        self.delay, self.fail, self.sent = delay, fail, 0

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        self.sent += 1
        if self.fail:
            raise KubeError(f"GET {path}: 500 Internal Server Error: etcdserver: request timed out", 500)
        await asyncio.sleep(self.delay)
        return {"metadata": {"name": path.rpartition("/")[2]}}


async def test_a_slow_api_server_holds_the_reads_no_longer_than_their_bounds() -> None:
    # Review 65-fixesb F2: each read had the client's 60 s and all of them no bound in time, so
    # 2,000 reads 8 at a time on a slow server were hours of a user's wait.
    facts = facts_of(healthy_pool(), build_config({}))
    client = SlowClient(delay=30.0)
    reader = OwnerReader(client, facts, parallel=2, read_timeout=0.05, max_seconds=0.3)  # type: ignore[arg-type]
    keys = [LookupKey("Job", "ml", f"job-{i}", "batch/v1") for i in range(40)]
    started = asyncio.get_running_loop().time()
    await reader.read_until_known(lambda: keys)
    assert asyncio.get_running_loop().time() - started < 5.0
    assert set(reader.unread.values()) <= {"no answer within 0.05 s", "not read within 0.3 s"}
    assert len(reader.unread) == 40 and "not read within 0.3 s" in reader.unread.values()
    assert client.sent < 40  # the reads past the deadline were never sent


async def test_one_failure_on_every_read_is_one_line_not_one_per_owner() -> None:
    # Review 65-fixesb F3: the reason named each request's path, so ten 500s were ten reasons.
    facts = facts_of(healthy_pool(), build_config({}))
    reader = OwnerReader(SlowClient(delay=0.0, fail=True), facts)  # type: ignore[arg-type]
    await reader.read_until_known(lambda: [LookupKey("Job", "ml", f"job-{i}", "batch/v1") for i in range(10)])
    assert reader.unread_lines() == [
        "not read (500 Internal Server Error: etcdserver: request timed out): "
        "10 owners: their workloads are named by the nearest owner read"
    ]


async def test_an_owner_read_that_meets_a_passing_failure_is_asked_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Left out at stop 65: nothing was retried, so one 503 (an API server replica restarting
    # behind the load balancer) and one 429 left the ReplicaSet unread and named it the top.
    async with fake_api() as (api, _client):
        serve(api, replica_set(), deployment(), deployment_pod())
        api.get_failures[REPLICA_SETS.item("serve-1", "ml")] = deque([503, 429])
        result = await run_explain(api, tmp_path, capsys, "pod/ml/serve-1-x")
        assert owner_gets(api) == [REPLICA_SETS.item("serve-1", "ml")] * 3
    assert result["change"] == "fabriccap explain deployments.apps/ml/serve"


class FailingClient:
    """An API server that answers every GET with ``status`` (None: no answer at all)."""

    def __init__(self, status: int | None) -> None:
        self.status, self.sent = status, 0

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        self.sent += 1
        if self.status is None:
            raise UnreachableError("cannot reach the Kubernetes API at https://127.0.0.1:1: Connection reset by peer")
        raise KubeError(f"GET {path}: {self.status} scripted", self.status)


@pytest.mark.parametrize(("status", "sent"), [(500, 3), (503, 3), (429, 3), (None, 3), (403, 1), (404, 1), (400, 1)])
async def test_only_a_failure_that_may_pass_is_asked_again_and_at_most_twice(status: int | None, sent: int) -> None:
    facts = facts_of(healthy_pool(), build_config({}))
    client = FailingClient(status)
    reader = OwnerReader(client, facts, retry_pauses=(0.01, 0.01))  # type: ignore[arg-type]
    key = LookupKey("ReplicaSet", "ml", "serve-1", "apps/v1")
    await reader.read_until_known(lambda: [key])
    assert client.sent == sent
    assert key in reader.unread_lookups


async def test_a_retry_waits_without_its_slot_and_never_past_the_deadline() -> None:
    # Four reads, one slot: a read's pause before asking again leaves the slot to the others,
    # and a pause that would end past the reads' deadline is not taken.
    facts = facts_of(healthy_pool(), build_config({}))
    client = FailingClient(503)
    reader = OwnerReader(client, facts, parallel=1, max_seconds=0.5, retry_pauses=(0.2, 5.0))  # type: ignore[arg-type]
    keys = [LookupKey("ReplicaSet", "ml", f"rs-{i}", "apps/v1") for i in range(4)]
    started = asyncio.get_running_loop().time()
    await reader.read_until_known(lambda: keys)
    assert asyncio.get_running_loop().time() - started < 0.5 + 0.2
    assert client.sent == 8  # each read twice: the second pause (5 s) would pass the deadline


async def test_a_garbled_answer_is_an_answer_and_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # Review 66a F3: the real client raises a 200 that is not JSON (a proxy's login page) with
    # no status, as it does a request that got no answer; both were asked again.
    key = LookupKey("ReplicaSet", "ml", "serve-1", "apps/v1")
    path = lookup_path(key)
    hits: list[str] = []
    handle = FakeApi.handle

    async def login_page(self: FakeApi, request: web.Request) -> Any:
        if request.path == path:
            hits.append(request.path)
            return web.Response(body=b"<html>login</html>", status=200, content_type="text/html")
        return await handle(self, request)

    monkeypatch.setattr(FakeApi, "handle", login_page)
    async with fake_api() as (_api, client):
        reader = OwnerReader(client, facts_of(healthy_pool(), build_config({})), retry_pauses=(0.01, 0.01))
        await reader.read_until_known(lambda: [key])
    assert hits == [path]
    assert "the answer is not JSON" in reader.unread_lookups[key]
