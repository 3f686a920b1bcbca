"""Owner reads that fail together, as all of them do while the API server is away: the queue
waits on one backoff, and the log says so in one line a minute, not one line a read."""

from __future__ import annotations

import logging
import socket

import pytest
from aiohttp import web

from fabriccap.controller.lookups import LOOKUP_BACKOFF, PARALLEL_LOOKUPS, LookupResolver
from fabriccap.controller.ratelimit import MAX_PACED_CAUSES, PacedLines
from fabriccap.controller.store import FactStore
from fabriccap.core.config import build_config
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.workloads import LookupKey
from fabriccap.kube.client import KubeClient
from fabriccap.kube.credentials import Credentials
from fabriccap.kube.kinds import BY_KIND
from fabriccap_devtools.world import owner_reference, workload_pod
from support.fakeapi import status_response

OWNERS = 50


def closed_port() -> int:
    """A loopback port nothing listens on: every connection to it is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_reads_that_get_no_answer_wait_together_and_go_on_when_the_server_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The API server away (a port that refuses, then listens): the reads in flight fail, the
    rest are not sent; the queue waits on one backoff, said once a minute with the number of
    failures; once the server answers, every owner is read."""
    store, extractor = FactStore(), FactsExtractor(build_config({}))
    keys = []
    for index in range(OWNERS):
        owner = owner_reference("Job", "batch/v1", f"job-{index}")
        BY_KIND["Pod"].upsert(store, extractor, workload_pod("n1", f"p{index}", owner=owner))
        keys.append(LookupKey("Job", "ml", f"job-{index}", "batch/v1"))
    served: list[str] = []

    async def no_such_job(request: web.Request) -> web.Response:
        served.append(request.path)
        return status_response(404, f"jobs.batch {request.path.rpartition('/')[2]!r} not found")

    app = web.Application()
    app.router.add_get("/{tail:.*}", no_such_job)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))  # bound, not listening yet: every connection is refused
    now = [0.0]
    failures: list[int] = []
    client = KubeClient(
        Credentials(server=f"http://127.0.0.1:{listener.getsockname()[1]}"),
        on_error=lambda _verb, status: failures.append(status),
    )
    resolver = LookupResolver(client, store, clock=lambda: now[0])

    def said() -> list[str]:
        return [record.getMessage() for record in caplog.records if "failed" in record.getMessage()]

    try:
        with caplog.at_level(logging.WARNING, logger="fabriccap.controller.lookups"):
            await resolver.resolve_now(keys, timeout=30)
            first_wave = len(failures)
            assert 1 <= first_wave <= PARALLEL_LOOKUPS  # the reads in flight, not all fifty
            (first,) = said()
            assert first.startswith("reading Job ml/job-") and "cannot reach the Kubernetes API" in first
            assert f"{OWNERS} reads wait" in first and "said at most every 60s" in first
            assert resolver.due() == []  # no read keeps a retry of its own
            waited = resolver.next_retry()
            assert waited is not None and 1.0 <= waited <= 3.0  # LOOKUP_BACKOFF's first wait

            now[0] = waited / 2  # before the wait is over, nothing is sent
            resolver.request(resolver.due())
            await resolver.resolve_now([], timeout=30)
            assert len(failures) == first_wave
            now[0] = 30.0  # over, but the minute is not: failed again, not said again
            resolver.request(resolver.due())
            await resolver.resolve_now([], timeout=30)
            assert first_wave < len(failures) <= 2 * PARALLEL_LOOKUPS and said() == [first]
            waited_again = resolver.next_retry()
            assert waited_again is not None and 2.0 <= waited_again <= 6.0  # the wait grows

            now[0] = 61.0  # a minute on, still away: said again, with the failures held back
            held_back = len(failures) - 1
            resolver.request(resolver.due())
            await resolver.resolve_now([], timeout=30)
            (_, summed) = said()
            assert summed.endswith(f"(and {held_back} more reads failed so since the last such line)")

            await web.SockSite(runner, listener).start()  # the API server is back
            now[0] = 61.0 + LOOKUP_BACKOFF.cap * 2
            resolver.request(resolver.due())
            await resolver.resolve_now([], timeout=30)
    finally:
        await resolver.close()
        await client.close()
        await runner.cleanup()
    assert sorted(served) == sorted(f"/apis/batch/v1/namespaces/ml/jobs/job-{index}" for index in range(OWNERS))
    assert resolver.next_retry() is None and not resolver.busy
    assert store.owner_parents == {key.owner_key: None for key in keys}  # each answered: no further owner


async def test_a_read_whose_pods_went_while_it_waited_is_not_sent() -> None:
    store, extractor = FactStore(), FactsExtractor(build_config({}))
    owner = owner_reference("Job", "batch/v1", "gone")
    BY_KIND["Pod"].upsert(store, extractor, workload_pod("n1", "p", owner=owner))
    sent: list[int] = []
    client = KubeClient(
        Credentials(server=f"http://127.0.0.1:{closed_port()}"), on_error=lambda _verb, status: sent.append(status)
    )
    now = [0.0]
    resolver = LookupResolver(client, store, clock=lambda: now[0])
    try:
        await resolver.resolve_now([LookupKey("Job", "ml", "gone", "batch/v1")], timeout=30)
        assert len(sent) == 1 and resolver.busy  # refused: it waits, first in line
        BY_KIND["Pod"].delete(store, workload_pod("n1", "p", owner=owner))
        now[0] = 10.0
        resolver.request(resolver.due())
        await resolver.resolve_now([], timeout=30)
    finally:
        await resolver.close()
        await client.close()
    assert len(sent) == 1 and not resolver.busy


def test_each_cause_is_paced_on_its_own_and_only_the_latest_are_remembered() -> None:
    now = [0.0]
    lines = PacedLines(seconds=60.0, clock=lambda: now[0])
    assert lines.say("503") == 0
    assert lines.say("503") is None and lines.say("503") is None  # held back, counted
    assert lines.say("429") == 0  # another cause: said at once
    now[0] = 59.0
    assert lines.say("503") is None
    now[0] = 60.0
    assert lines.say("503") == 3  # one token a minute; the three before it were held back
    for index in range(MAX_PACED_CAUSES):
        lines.say(f"cause {index}")  # error texts are not bounded by the caller
    assert lines.say("503") == 0  # forgotten among so many causes: said again, from nothing
