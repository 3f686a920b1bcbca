"""Owner reads that fail together, as all of them do while the API server is away: each is
retried on its own backoff, and the log says so in one line a minute, not one line a read."""

from __future__ import annotations

import logging
import socket

import pytest

from fabriccap.controller.lookups import LookupResolver
from fabriccap.controller.ratelimit import MAX_PACED_CAUSES, PacedLines
from fabriccap.controller.store import FactStore
from fabriccap.core.config import build_config
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.workloads import LookupKey
from fabriccap.kube.client import KubeClient
from fabriccap.kube.credentials import Credentials
from fabriccap.kube.kinds import BY_KIND
from fabriccap_devtools.world import owner_reference, workload_pod

OWNERS = 50


def closed_port() -> int:
    """A loopback port nothing listens on: every connection to it is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_reads_failing_together_are_said_once_a_minute_with_their_number(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, extractor = FactStore(), FactsExtractor(build_config({}))
    keys = []
    for index in range(OWNERS):
        owner = owner_reference("Job", "batch/v1", f"job-{index}")
        BY_KIND["Pod"].upsert(store, extractor, workload_pod("n1", f"p{index}", owner=owner))
        keys.append(LookupKey("Job", "ml", f"job-{index}", "batch/v1"))
    now = [0.0]
    client = KubeClient(Credentials(server=f"http://127.0.0.1:{closed_port()}"))
    resolver = LookupResolver(client, store, clock=lambda: now[0])

    def said() -> list[str]:
        return [record.getMessage() for record in caplog.records if "failed" in record.getMessage()]

    try:
        with caplog.at_level(logging.WARNING, logger="fabriccap.controller.lookups"):
            await resolver.resolve_now(keys, timeout=30)
            (first,) = said()
            assert first.startswith("reading Job ml/job-") and "cannot reach the Kubernetes API" in first
            assert "said at most every 60s" in first
            now[0] = 30.0  # every read is due again (1-3 s), but the minute is not over
            assert len(resolver.due()) == OWNERS
            await resolver.resolve_now(resolver.due(), timeout=30)
            assert said() == [first]
            assert resolver.next_retry() is not None  # each read still waits for its retry
            now[0] = 61.0
            await resolver.resolve_now(resolver.due(), timeout=30)
            (_, summed) = said()  # the 49 after the first line, and the 50 of the second round
            assert summed.endswith(f"(and {2 * OWNERS - 1} more reads failed so since the last such line)")
    finally:
        await resolver.close()
        await client.close()
    assert store.owner_parents == {}  # a failure is no answer


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
