"""scalesim speaks the API server's protocol where the operator depends on it: paged LISTs from one
snapshot, continue tokens that expire into 410, watches that resume from a version or get 410,
bookmarks, streaming lists, gzip, and the rules of writes (status subresource, generation,
no-op writes). Each test starts its own simulator (built once into the cache)."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from fabriccap.kube.client import USER_AGENT, KubeClient, connect
from fabriccap.kube.credentials import load_credentials
from fabriccap.kube.errors import KubeError
from fabriccap.kube.media import MERGE_PATCH, METADATA_ONLY
from fabriccap.kube.paths import FABRIC_CAPABILITIES, NODES, PODS
from fabriccap_devtools.gotools import GoToolError, run_go_tests
from fabriccap_devtools.reference.fabriccapability import crd_status_default
from fabriccap_devtools.scalesim import SOURCE, Simulator, SimulatorError, simulator_binary
from fabriccap_devtools.scalesim.world import PODS_PER_JOB, ScaleWorld, node_name
from fabriccap_devtools.seeding import JOBS

NODE_COUNT = 30


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    if shutil.which("go") is None and os.environ.get("CI", "").lower() != "true":
        pytest.skip("building scalesim needs a Go toolchain on PATH (Go >= 1.25)")
    try:
        simulator_binary()
    except GoToolError as error:
        pytest.fail(str(error))


def start(tmp_path: Path, **options: Any) -> Simulator:
    # No background writes unless a test asks: the others compare versions across requests.
    options.setdefault("background_writes", 0)
    simulator = Simulator(tmp_path / "sim", world=ScaleWorld(nodes=NODE_COUNT, pools=3).spec(), **options)
    simulator.start()
    return simulator


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Simulator]:
    simulator = start(tmp_path)
    try:
        yield simulator
    finally:
        simulator.stop()


@pytest.fixture
async def client(sim: Simulator) -> AsyncIterator[KubeClient]:
    async with await connect(str(sim.info.bench_kubeconfig)) as kube:
        yield kube


async def raw_get(
    kubeconfig: Path, path: str, params: dict[str, str], headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One GET without the client's decoding: status, headers and the bytes as sent."""
    credentials = load_credentials(str(kubeconfig))
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=credentials.ssl_context())) as session,
        session.get(
            credentials.server + path,
            params=params,
            headers={**credentials.headers(), **(headers or {})},
            auto_decompress=False,
        ) as response,
    ):
        return response.status, dict(response.headers), await response.read()


async def watch_events(client: KubeClient, params: dict[str, str], until: int) -> list[dict[str, Any]]:
    """Events of a node watch (raw query parameters) until ``until`` have come or the stream ends."""
    credentials = client.credentials
    events: list[dict[str, Any]] = []
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=credentials.ssl_context())) as session,
        session.get(
            credentials.server + NODES.collection(), params={"watch": "true", **params}, headers=credentials.headers()
        ) as response,
    ):
        assert response.status == 200, await response.text()
        async for line in response.content:
            if line.strip():
                events.append(json.loads(line))
            if len(events) >= until:
                break
    return events


async def test_pages_come_from_one_snapshot_whatever_changes_between_them(client: KubeClient) -> None:
    pages = client.list_pages(NODES.collection(), page_size=7)
    first = await anext(pages)
    version = first["metadata"]["resourceVersion"]
    assert first["metadata"]["remainingItemCount"] == NODE_COUNT - 7
    # Between pages: one node deleted, one changed, one created.
    await client.delete(NODES.item(node_name(20)))
    await client.merge_patch(NODES.item(node_name(25)), {"metadata": {"labels": {"changed": "yes"}}})
    await client.create(NODES.collection(), {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "zz-new"}})
    seen = [item["metadata"]["name"] for item in first["items"]]
    async for page in pages:
        assert page["metadata"]["resourceVersion"] == version
        seen += [item["metadata"]["name"] for item in page["items"]]
        changed = [item for item in page["items"] if item["metadata"]["name"] == node_name(25)]
        assert not changed or "changed" not in changed[0]["metadata"]["labels"]
    assert sorted(seen) == sorted(node_name(index) for index in range(NODE_COUNT))
    assert all(int(item["metadata"]["resourceVersion"]) <= int(version) for item in first["items"])
    listed = [item["metadata"]["name"] async for item in client.list_items(NODES.collection(), page_size=7)]
    assert node_name(20) not in listed
    assert "zz-new" in listed


async def test_a_continue_token_whose_snapshot_expired_gets_410(tmp_path: Path) -> None:
    simulator = start(tmp_path, snapshot_ttl_seconds=0.2)
    try:
        async with await connect(str(simulator.info.bench_kubeconfig)) as kube:
            first = await kube.get(NODES.collection(), {"limit": 5})
            token = first["metadata"]["continue"]
            await asyncio.sleep(1.0)  # the snapshot lives 0.2 s; the janitor looks every 0.1 s
            with pytest.raises(KubeError) as expired:
                await kube.get(NODES.collection(), {"limit": 5, "continue": token})
            assert expired.value.status == 410
            with pytest.raises(KubeError) as garbled:
                await kube.get(NODES.collection(), {"limit": 5, "continue": "garbage"})
            assert garbled.value.status == 400
    finally:
        simulator.stop()


async def test_a_watch_resumes_from_a_version_and_gets_410_once_the_history_has_moved_on(tmp_path: Path) -> None:
    simulator = start(tmp_path, history=3)
    try:
        async with await connect(str(simulator.info.bench_kubeconfig)) as kube:
            listed = await kube.get(NODES.collection(), {"limit": 1})
            start_version = listed["metadata"]["resourceVersion"]
            await kube.merge_patch(NODES.item(node_name(1)), {"metadata": {"labels": {"step": "1"}}})
            resumed = await watch_events(kube, {"resourceVersion": start_version, "timeoutSeconds": "1"}, until=1)
            assert [(event["type"], event["object"]["metadata"]["name"]) for event in resumed] == [
                ("MODIFIED", node_name(1))
            ]
            assert resumed[0]["object"]["kind"] == "Node"
            for step in range(2, 6):  # more changes than the history keeps
                await kube.merge_patch(NODES.item(node_name(1)), {"metadata": {"labels": {"step": str(step)}}})
            expired = await watch_events(kube, {"resourceVersion": start_version, "timeoutSeconds": "1"}, until=1)
            assert expired[0]["type"] == "ERROR"
            assert expired[0]["object"]["code"] == 410
            assert expired[0]["object"]["reason"] == "Expired"
            # The client sees the same 410 and lists again.
            with pytest.raises(KubeError):
                async for event in kube.watch(NODES.collection(), start_version, timeout_seconds=1):
                    if event["type"] == "ERROR":
                        raise KubeError("expired", event["object"]["code"])
    finally:
        simulator.stop()


async def test_an_expired_history_sends_even_an_up_to_date_watch_to_list(sim: Simulator, client: KubeClient) -> None:
    # The forced relist of the benchmarks: a Node watch under heartbeats has read the newest
    # version, and it must relist all the same.
    await client.merge_patch(NODES.item(node_name(1)), {"metadata": {"labels": {"step": "1"}}})
    newest = (await client.get(NODES.collection(), {"limit": 1}))["metadata"]["resourceVersion"]
    sim.post("/fault/expire", {"resources": ["nodes"]})
    expired = await watch_events(client, {"resourceVersion": newest, "timeoutSeconds": "1"}, until=1)
    assert [(event["type"], event["object"].get("code")) for event in expired] == [("ERROR", 410)]
    # The list after the fault returns a version that a watch resumes from, with nothing changed.
    relisted = (await client.get(NODES.collection(), {"limit": 1}))["metadata"]["resourceVersion"]
    assert int(relisted) > int(newest)
    assert await watch_events(client, {"resourceVersion": relisted, "timeoutSeconds": "1"}, until=1) == []


async def test_an_idle_watch_gets_bookmarks_only_when_it_asked_for_them(tmp_path: Path) -> None:
    simulator = start(tmp_path, bookmark_interval_seconds=0.1)
    try:
        async with await connect(str(simulator.info.bench_kubeconfig)) as kube:
            version = (await kube.get(NODES.collection(), {"limit": 1}))["metadata"]["resourceVersion"]
            with_bookmarks = await watch_events(
                kube, {"resourceVersion": version, "allowWatchBookmarks": "true", "timeoutSeconds": "3"}, until=2
            )
            assert [event["type"] for event in with_bookmarks] == ["BOOKMARK", "BOOKMARK"]
            assert with_bookmarks[0]["object"]["metadata"]["resourceVersion"] == version
            assert with_bookmarks[0]["object"]["kind"] == "Node"
            without = await watch_events(kube, {"resourceVersion": version, "timeoutSeconds": "1"}, until=1)
            assert without == []
    finally:
        simulator.stop()


async def test_background_writes_move_an_idle_watchs_bookmarks_without_an_event(tmp_path: Path) -> None:
    simulator = start(tmp_path, bookmark_interval_seconds=0.3, background_writes=100)
    try:
        async with await connect(str(simulator.info.bench_kubeconfig)) as kube:
            version = (await kube.get(NODES.collection(), {"limit": 1}))["metadata"]["resourceVersion"]
            events = await watch_events(
                kube, {"resourceVersion": version, "allowWatchBookmarks": "true", "timeoutSeconds": "3"}, until=2
            )
            assert [event["type"] for event in events] == ["BOOKMARK", "BOOKMARK"]
            versions = [int(event["object"]["metadata"]["resourceVersion"]) for event in events]
            # 100 a second, bookmarks 0.3 s apart: each one further than the last.
            assert int(version) < versions[0] < versions[1]
    finally:
        simulator.stop()


def test_the_default_background_writes_are_the_worlds_lease_renewals(tmp_path: Path) -> None:
    simulator = Simulator(tmp_path / "sim", world=ScaleWorld(nodes=NODE_COUNT, pools=3).spec())
    simulator.start()
    try:
        assert f"background writes: {NODE_COUNT // 10 + 1} a second" in simulator.log_path.read_text()
    finally:
        simulator.stop()


async def test_a_streaming_list_sends_every_object_then_the_initial_events_end_bookmark(client: KubeClient) -> None:
    listed = await client.get(NODES.collection())
    events = await watch_events(
        client,
        {
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "5",
        },
        until=NODE_COUNT + 1,
    )
    assert [event["type"] for event in events] == ["ADDED"] * NODE_COUNT + ["BOOKMARK"]
    assert sorted(event["object"]["metadata"]["name"] for event in events[:-1]) == sorted(
        item["metadata"]["name"] for item in listed["items"]
    )
    bookmark = events[-1]["object"]["metadata"]
    assert bookmark["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert bookmark["resourceVersion"] == listed["metadata"]["resourceVersion"]
    with pytest.raises(AssertionError, match="sendInitialEvents requires setting resourceVersionMatch"):
        await watch_events(client, {"sendInitialEvents": "true", "allowWatchBookmarks": "true"}, until=1)


async def test_a_change_after_a_streaming_list_follows_its_bookmark(client: KubeClient) -> None:
    async def change_soon() -> None:
        await asyncio.sleep(0.5)
        await client.merge_patch(
            NODES.status(node_name(3)), {"status": {"allocatable": {"vpc.amazonaws.com/efa": "16"}}}
        )

    changing = asyncio.create_task(change_soon())
    events = await watch_events(
        client,
        {
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "10",
        },
        until=NODE_COUNT + 2,
    )
    await changing
    assert events[-1]["type"] == "MODIFIED"
    assert events[-1]["object"]["status"]["allocatable"]["vpc.amazonaws.com/efa"] == "16"
    assert int(events[-1]["object"]["metadata"]["resourceVersion"]) > int(
        events[-2]["object"]["metadata"]["resourceVersion"]
    )


async def test_large_lists_are_gzipped_for_clients_that_accept_it(sim: Simulator) -> None:
    status, headers, body = await raw_get(
        sim.info.bench_kubeconfig, NODES.collection(), {}, {"Accept-Encoding": "gzip"}
    )
    assert status == 200
    assert headers.get("Content-Encoding") == "gzip"
    assert len(json.loads(gzip.decompress(body))["items"]) == NODE_COUNT
    _, plain_headers, plain = await raw_get(
        sim.info.bench_kubeconfig, NODES.collection(), {}, {"Accept-Encoding": "identity"}
    )
    assert "Content-Encoding" not in plain_headers
    assert len(plain) > len(body)
    _, small_headers, _ = await raw_get(
        sim.info.bench_kubeconfig, NODES.collection(), {"limit": "1"}, {"Accept-Encoding": "gzip"}
    )
    assert "Content-Encoding" not in small_headers  # under 128 KiB


async def test_served_bodies_weigh_what_a_busy_clusters_do(client: KubeClient) -> None:
    world = ScaleWorld(nodes=NODE_COUNT, pools=3)
    node = (await client.get(NODES.collection(), {"limit": 1}))["items"][0]
    assert 14_000 < len(json.dumps(node, separators=(",", ":"))) < 20_000
    assert {entry["manager"] for entry in node["metadata"]["managedFields"]} == {"kubelet"}
    assert node["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] == "p5-pool-00000"
    assert world.pool_of(NODE_COUNT - 1) == 2


async def test_status_writes_follow_the_status_subresource_rules(client: KubeClient) -> None:
    created = await client.create(
        FABRIC_CAPABILITIES.collection(),
        {
            "apiVersion": "fabriccap.dev/v1alpha1",
            "kind": "FabricCapability",
            "metadata": {"name": "efa-x"},
            "spec": {"fabric": "efa"},
            "status": {"targetNodes": 3},
        },
    )
    # The create's status is dropped; the CRD's default is served until a status is written.
    assert created["status"] == crd_status_default() == {"observedGeneration": 0}
    assert created["metadata"]["generation"] == 1
    written = await client.merge_patch(
        FABRIC_CAPABILITIES.status("efa-x"), {"status": {"targetNodes": 4}, "spec": {"fabric": "rdma"}}
    )
    assert written["status"] == {"observedGeneration": 0, "targetNodes": 4}  # merged, as the API server does
    assert written["spec"] == {"fabric": "efa"}  # /status changes nothing else
    assert written["metadata"]["generation"] == 1
    again = await client.merge_patch(FABRIC_CAPABILITIES.status("efa-x"), {"status": {"targetNodes": 4}})
    assert again["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]  # a no-op
    respecced = await client.merge_patch(
        FABRIC_CAPABILITIES.item("efa-x"), {"spec": {"fabric": "rdma"}, "status": {"targetNodes": 9}}
    )
    assert respecced["metadata"]["generation"] == 2
    assert respecced["status"] == written["status"]
    with pytest.raises(KubeError) as conflict:
        await client.create(FABRIC_CAPABILITIES.collection(), {"metadata": {"name": "efa-x"}})
    assert conflict.value.status == 409
    listed = await client.get(FABRIC_CAPABILITIES.collection())
    assert listed["items"][0]["kind"] == "FabricCapability"  # custom resources keep their type in lists


async def test_writes_are_owned_by_their_field_manager_and_a_main_resource_write_owns_no_status(
    client: KubeClient,
) -> None:
    """As the API server records managed fields: the request's fieldManager names the writer,
    and a write to the main resource of a kind with a status subresource owns no status field.
    Both wrong once: every write was the User-Agent's ("Python" then) and owned the whole object, so
    the operator's own label PATCH read as a foreign writer of its status (a "write war")."""
    await client.create(
        FABRIC_CAPABILITIES.collection(),
        {"apiVersion": "fabriccap.dev/v1alpha1", "kind": "FabricCapability", "metadata": {"name": "efa-m"}},
    )
    status_path = FABRIC_CAPABILITIES.status("efa-m")
    await client.request(
        "PATCH", status_path, {"fieldManager": "fabriccap/a"}, {"status": {"targetNodes": 1}}, MERGE_PATCH
    )
    labelled = await client.request(
        "PATCH", FABRIC_CAPABILITIES.item("efa-m"), None, {"metadata": {"labels": {"x": "y"}}}, MERGE_PATCH
    )
    owners = {
        (entry["manager"], entry.get("subresource", "")): entry["fieldsV1"]
        for entry in labelled["metadata"]["managedFields"]
    }
    assert "f:status" in owners[("fabriccap/a", "status")]
    agent = owners[(USER_AGENT.partition("/")[0], "")]  # no fieldManager: the User-Agent's product
    assert "f:status" not in agent and "f:metadata" in agent


async def test_a_malformed_event_reaches_the_operator_but_not_the_benchmark(sim: Simulator) -> None:
    async with await connect(str(sim.kubeconfig)) as operator, await connect(str(sim.info.bench_kubeconfig)) as bench:
        version = (await bench.get(NODES.collection(), {"limit": 1}))["metadata"]["resourceVersion"]
        sim.post("/fault/malformed", {"resource": "nodes", "count": 1})
        await bench.merge_patch(NODES.item(node_name(2)), {"metadata": {"labels": {"x": "1"}}})
        benchmark_events = [event async for event in bench.watch(NODES.collection(), version, timeout_seconds=1)]
        assert [event["type"] for event in benchmark_events if event["type"] != "BOOKMARK"] == ["MODIFIED"]
        with pytest.raises(KubeError, match="malformed event"):
            async for _ in operator.watch(NODES.collection(), version, timeout_seconds=1):
                pass
        # Resuming from the same version delivers the event whole.
        resumed = [event async for event in operator.watch(NODES.collection(), version, timeout_seconds=1)]
        assert [event["type"] for event in resumed if event["type"] != "BOOKMARK"] == ["MODIFIED"]
    assert sim.stats()["faults"]["malformed events sent"] == 1


async def test_heartbeat_churn_changes_only_the_heartbeat(sim: Simulator, client: KubeClient) -> None:
    version = (await client.get(NODES.collection(), {"limit": 1}))["metadata"]["resourceVersion"]
    sim.post("/churn", {"heartbeatsPerSecond": 200, "seconds": 0.5})
    events = [event async for event in client.watch(NODES.collection(), version, timeout_seconds=2)]
    modified = [event["object"] for event in events if event["type"] == "MODIFIED"]
    assert modified
    node = modified[0]
    assert {condition["lastHeartbeatTime"] for condition in node["status"]["conditions"]} != {"2026-11-30T09:00:00Z"}
    assert node["status"]["allocatable"]["vpc.amazonaws.com/efa"] == "32"
    counts = sim.request("DELETE", "/churn")["counts"]
    assert counts["node heartbeats"] == len(modified)


async def test_a_watch_event_is_timed_to_the_operators_read_of_it(tmp_path: Path) -> None:
    """The delivery latency ends at the server's flush; the read latency ends when the client
    takes the event's bytes off its socket. A client that does not read (its event loop held)
    shows the wait in the second, and one that reads at once does not."""
    pause = 1.0
    sim = start(tmp_path, read_lag_period_seconds=0.02)
    try:
        await read_latencies_held_and_prompt(sim, pause)
    finally:
        sim.stop()


async def read_latencies_held_and_prompt(sim: Simulator, pause: float) -> None:
    credentials = load_credentials(str(sim.kubeconfig))  # the operator's: its watches are timed
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=credentials.ssl_context())) as session,
        await connect(str(sim.info.bench_kubeconfig)) as bench,
    ):

        async def read_latencies(hold: bool) -> tuple[int, dict[str, Any]]:
            """Heartbeats for 0.5 s to a node watch: the MODIFIED events read, and their read latencies."""
            version = (await bench.get(NODES.collection(), {"limit": 1}))["metadata"]["resourceVersion"]
            sim.post("/stats/reset", {})
            params = {"watch": "true", "resourceVersion": version, "timeoutSeconds": "3"}
            async with session.get(
                credentials.server + NODES.collection(), params=params, headers=credentials.headers()
            ) as response:
                assert response.status == 200
                sim.post("/churn", {"heartbeatsPerSecond": 20, "seconds": 0.5})
                if hold:
                    time.sleep(pause)  # the event loop held: nothing is read off the socket
                lines = [line async for line in response.content if line.strip()]
            sim.request("DELETE", "/churn")
            await asyncio.sleep(0.2)  # the sampler's turn (every 20 ms)
            modified = sum(1 for line in lines if json.loads(line)["type"] == "MODIFIED")
            return modified, sim.stats()["readDelivery"]["nodes"]

        held, late = await read_latencies(hold=True)
        assert held > 0 and late["count"] == held
        assert late["p50"] >= pause - 0.5 - 0.05  # committed in the first 0.5 s, read after the pause
        prompt, read = await read_latencies(hold=False)
        assert prompt > 0 and read["count"] == prompt
        assert read["p99"] < pause / 2


async def test_the_sink_says_which_objects_got_a_status_and_when_the_last_did(sim: Simulator) -> None:
    async with await connect(str(sim.kubeconfig)) as operator:
        for name in ("efa-a", "efa-b"):
            body = {"metadata": {"name": name}, "spec": {"fabric": "efa"}}
            await operator.create(FABRIC_CAPABILITIES.collection(), body)
        assert sim.published() == (0, 0)  # created with the CRD's default, which no one wrote
        await operator.merge_patch(FABRIC_CAPABILITIES.status("efa-a"), {"status": {"targetNodes": 1}})
        count, first_done = sim.published()
        assert count == 1 and first_done > 0
        await operator.merge_patch(FABRIC_CAPABILITIES.status("efa-b"), {"status": {"targetNodes": 2}})
        await operator.merge_patch(FABRIC_CAPABILITIES.status("efa-a"), {"status": {"targetNodes": 3}})
    count, last_done = sim.published()
    assert count == 2 and last_done > first_done  # the second write to efa-a is not a first status
    # The creates are logged too, with the default they are served with.
    statuses = [write["status"] for write in sim.status_writes(name="efa-a")]
    assert statuses == [
        {"observedGeneration": 0},
        {"observedGeneration": 0, "targetNodes": 1},
        {"observedGeneration": 0, "targetNodes": 3},
    ]
    assert [write["name"] for write in sim.status_writes()] == ["efa-a", "efa-b", "efa-a", "efa-b", "efa-a"]


async def test_probes_change_create_and_delete_the_object_they_name(sim: Simulator, client: KubeClient) -> None:
    """The benchmark's probes (a node change, a pod made and removed): each commits one event,
    and a probe naming nothing, or a variable the object lacks, is refused."""
    node = node_name(0)
    before = await client.get(NODES.item(node))
    committed = sim.post("/probe/vars", {"resource": "nodes", "name": node, "vars": {"EFA": "16"}})
    after = await client.get(NODES.item(node))
    assert int(after["metadata"]["resourceVersion"]) == committed["rv"] > int(before["metadata"]["resourceVersion"])
    assert after["status"]["allocatable"]["vpc.amazonaws.com/efa"] == "16"
    with pytest.raises(SimulatorError, match="404 no nowhere"):
        sim.post("/probe/vars", {"resource": "nodes", "name": "nowhere", "vars": {"EFA": "16"}})
    with pytest.raises(SimulatorError, match=f"400 {node} has no @@NOPE@@"):
        sim.post("/probe/vars", {"resource": "nodes", "name": node, "vars": {"NOPE": "1"}})
    with pytest.raises(SimulatorError, match="400 no resource widgets"):
        sim.post("/probe/delete", {"resource": "widgets", "name": node})
    sim.post("/probe/delete", {"resource": "nodes", "name": node})
    with pytest.raises(KubeError) as gone:
        await client.get(NODES.item(node))
    assert gone.value.status == 404


async def test_the_jobs_the_pods_name_are_served_whole_or_as_their_metadata(tmp_path: Path) -> None:
    """Every workload pod's Job exists (an owner read gets an answer, not a 404), with the uid
    its pods' owner references name and their pod template; asked for its metadata alone
    (PartialObjectMetadata, as the operator's owner reads ask), it is sent without the rest."""
    scale = ScaleWorld(nodes=NODE_COUNT, pools=3, pods=100)
    simulator = Simulator(tmp_path / "sim", world=scale.spec(), background_writes=0)
    simulator.start()
    try:
        async with await connect(str(simulator.info.bench_kubeconfig)) as client:
            pods = (await client.get(PODS.collection(scale.namespace)))["items"]
            owners = {
                reference["name"]: reference["uid"] for pod in pods for reference in pod["metadata"]["ownerReferences"]
            }
            jobs = (await client.get(JOBS.collection(scale.namespace)))["items"]
            assert {job["metadata"]["name"]: job["metadata"]["uid"] for job in jobs} == owners
            assert len(owners) == -(-100 // PODS_PER_JOB)
            first = next(
                pod for pod in pods if pod["metadata"]["ownerReferences"][0]["name"] == jobs[0]["metadata"]["name"]
            )
            template = jobs[0]["spec"]["template"]["spec"]
            # (the API server defaults a pod's requests from its limits, not a template's)
            assert (
                template["containers"][0]["resources"]["limits"]
                == first["spec"]["containers"][0]["resources"]["limits"]
            )
            whole = await client.get(JOBS.item(jobs[0]["metadata"]["name"], scale.namespace))
            metadata = await client.get(JOBS.item(jobs[0]["metadata"]["name"], scale.namespace), accept=METADATA_ONLY)
    finally:
        simulator.stop()
    assert (whole["kind"], whole["apiVersion"]) == ("Job", "batch/v1")
    assert metadata == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": whole["metadata"]}
    assert {"spec", "status"} <= set(whole)


def kill_and_wait(sim: Simulator, signal_number: int) -> None:
    """Send the simulator a signal and wait until it has exited, left unreaped for the Simulator.

    Not by its state in /proc: a Go process's main thread shows "Z" while its other threads are
    still exiting, and until they have, waitpid (the Simulator's poll) says it runs."""
    pid = sim.info.pid
    os.kill(pid, signal_number)
    for _ in range(200):
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return
        time.sleep(0.05)
    raise AssertionError(f"scalesim {pid} still runs 10 s after signal {signal_number}")


def test_a_simulator_that_stops_answering_is_reported_with_its_log(sim: Simulator) -> None:
    """A benchmark's scratch directory goes with the run: the error itself carries the log's end."""
    kill_and_wait(sim, signal.SIGKILL)
    with pytest.raises(SimulatorError) as failed:
        sim.stats()
    message = str(failed.value)
    assert message.startswith("GET /stats: no answer (")
    assert "scalesim exited with -9;" in message  # killed: no crash of its own to name
    assert sim.log_path.read_text().splitlines()[-1] in message


def test_a_simulator_that_crashed_is_reported_with_the_crash_not_only_its_dump(sim: Simulator) -> None:
    """Go reports a crash on one line and then dumps every goroutine, far longer than a tail."""
    kill_and_wait(sim, signal.SIGQUIT)  # the Go runtime dies of it as of any crash, dump and all
    with pytest.raises(SimulatorError) as failed:
        sim.stats()
    assert "scalesim exited with 2: SIGQUIT: quit;" in str(failed.value)


def test_a_crash_of_an_earlier_run_in_the_same_directory_is_not_named(tmp_path: Path) -> None:
    """The log is appended to: a directory used again holds the last run's crash above this run."""
    earlier = "fatal error: concurrent map iteration and map write"
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "scalesim.log").write_text(f"{earlier}\ngoroutine 1 [running]:\n")
    simulator = start(tmp_path)
    try:
        kill_and_wait(simulator, signal.SIGKILL)
        with pytest.raises(SimulatorError) as failed:
            simulator.stats()
    finally:
        simulator.stop()
    message = str(failed.value)
    assert "scalesim exited with -9;" in message and earlier not in message


def test_the_simulators_go_tests_pass() -> None:
    """scalesim's own tests (stats_test.go: a snapshot encoded while requests go on counting)."""
    output = run_go_tests(SOURCE)
    assert output.startswith("ok ") and "fabriccap.dev/scalesim" in output
