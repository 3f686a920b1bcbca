"""Owner lookups against hostile pods: one GET of one valid object in the pod's namespace, or
nothing; and no answer held in memory beyond a few MiB (reliability round 3, S3 and S4; issue 27
item 9)."""

from __future__ import annotations

import logging
import re
import socket
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web

from fabriccap.controller.lookups import LookupResolver
from fabriccap.controller.store import FactStore
from fabriccap.core.config import build_config
from fabriccap.core.evaluate import evaluate
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.references import OncePerCause
from fabriccap.core.workloads import LookupKey
from fabriccap.kube.client import KubeClient
from fabriccap.kube.credentials import Credentials
from fabriccap.kube.errors import ResponseTooLargeError
from fabriccap.kube.kinds import BY_KIND
from fabriccap.kube.lookups import MAX_LOOKUP_BYTES
from fabriccap_devtools.world import owner_reference, workload_pod
from support.builders import daemon_set, node, plugin_pods
from support.fakeapi import fake_api

JOBS = "/apis/batch/v1/namespaces/ml/jobs"
HOSTILE_NAMES = [
    "../../../../api/v1/nodes?limit=0",
    "../../../../../../api/v1/pods",
    "x?watch=true",
    "../../namespaces/victim/pods/victim-pod",
    "%2e%2e",
    "a" * 600_000,
    "x\ny",
]
ONE_LOOKUP = re.compile(r"/apis/batch/v1/namespaces/ml/jobs/[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def hostile_pods() -> list[dict[str, Any]]:
    pods = [
        workload_pod("n1", f"hostile-{index}", owner={**owner_reference("Job", "batch/v1", "x"), "name": name})
        for index, name in enumerate(HOSTILE_NAMES)
    ]
    return [*pods, workload_pod("n1", "honest", owner=owner_reference("Job", "batch/v1", "honest-job"))]


async def test_hostile_owner_names_send_no_request_but_one_valid_lookup(caplog: pytest.LogCaptureFixture) -> None:
    config = build_config({})
    store = FactStore()
    said = OncePerCause(logging.getLogger("fabriccap.references").warning)
    extractor = FactsExtractor(config, on_refused=said)
    for body in [daemon_set(), node("n1", efa=32), *plugin_pods(["n1"]), *hostile_pods()]:
        BY_KIND[str(body["kind"])].upsert(store, extractor, body)
    async with fake_api() as (api, client):
        api.serve(JOBS, "Job", [{"kind": "Job", "metadata": {"name": "honest-job", "namespace": "ml"}}], "1")
        resolver = LookupResolver(client, store, refused=said)
        with caplog.at_level(logging.WARNING):
            await resolver.resolve_now(evaluate(config, store).lookups, timeout=5)
            # Keys that never went through the facts (another caller) are not sent either.
            await resolver.resolve_now([LookupKey("Job", "ml", name, "batch/v1") for name in HOSTILE_NAMES], 5)
        await resolver.close()
    sent = [(method, path, query) for method, path, query, _ in api.requests]
    assert sent == [("GET", f"{JOBS}/honest-job", {})]
    assert all(ONE_LOOKUP.fullmatch(path) for _, path, _ in sent)
    # Each hostile pod is its own top; the honest one is its Job's.
    assert {key[2] for key in store.owner_pods} == {"honest-job", *(f"hostile-{i}" for i in range(len(HOSTILE_NAMES)))}
    refusals = [record.getMessage() for record in caplog.records if record.name == "fabriccap.references"]
    assert len(refusals) == 1 and "not followed" in refusals[0]
    assert resolver.next_retry() is None  # nothing left to retry


@asynccontextmanager
async def streaming_server(total_bytes: int, *, declare_length: bool) -> AsyncIterator[KubeClient]:
    """An API server whose every answer is ``total_bytes`` of JSON-looking bytes, streamed."""
    chunk = b" " * (1024 * 1024)

    async def handle(request: web.Request) -> web.StreamResponse:
        headers = {"Content-Type": "application/json"}
        if declare_length:
            headers["Content-Length"] = str(total_bytes)
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        try:
            for _ in range(total_bytes // len(chunk)):
                await response.write(chunk)
        except (ConnectionResetError, RuntimeError):
            pass  # the client stopped reading: what a bounded read does
        return response

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    client = KubeClient(Credentials(server=f"http://127.0.0.1:{sock.getsockname()[1]}"))
    try:
        yield client
    finally:
        await client.close()
        await runner.cleanup()


@pytest.mark.parametrize("declare_length", [True, False], ids=["content-length", "chunked"])
async def test_a_bounded_read_stops_at_its_limit(declare_length: bool) -> None:
    async with streaming_server(64 * 1024 * 1024, declare_length=declare_length) as client:
        tracemalloc.start()
        try:
            with pytest.raises(ResponseTooLargeError, match="more than 1048576"):
                await client.get(f"{JOBS}/big", max_body_bytes=1024 * 1024)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, peak  # the 64 MiB answer was never held


async def test_an_owner_larger_than_any_object_counts_as_the_top(caplog: pytest.LogCaptureFixture) -> None:
    store = FactStore()
    extractor = FactsExtractor(build_config({}))
    pod = workload_pod("n1", "p", owner=owner_reference("Job", "batch/v1", "big"))
    BY_KIND["Pod"].upsert(store, extractor, pod)
    async with streaming_server(MAX_LOOKUP_BYTES + 8 * 1024 * 1024, declare_length=False) as client:
        resolver = LookupResolver(client, store)
        with caplog.at_level(logging.WARNING):
            await resolver.resolve_now([LookupKey("Job", "ml", "big", "batch/v1")], timeout=10)
            await resolver.resolve_now([LookupKey("Job", "ml", "big2", "batch/v1")], timeout=10)
        await resolver.close()
    assert store.owner_parents[("Job.batch", "ml", "big")] is None
    assert resolver.next_retry() is None  # an answer, not a failure to retry
    assert len([record for record in caplog.records if "more than" in record.getMessage()]) == 1
