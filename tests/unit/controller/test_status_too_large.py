"""A status the API server refuses as too large: a minimal status that fails closed is published,
and the full one is retried on its backoff (reliability round 3, S2; issue 27 item 11)."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.publisher import Publisher
from fabriccap.controller.store import FactStore
from fabriccap.core.api import READY_LABEL, find_condition
from fabriccap.core.config import build_config
from fabriccap.core.facts import FactsExtractor
from fabriccap.kube.kinds import BY_KIND
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from support.builders import daemon_set, node, plugin_pods
from support.fakeapi import FakeApi, fake_api

FCAPS = FABRIC_CAPABILITIES.collection()
STATUS = FABRIC_CAPABILITIES.status("efa-p5")
REFUSALS = {
    # kube-apiserver's own answers: the request body over 3 MiB, and etcd's object limit.
    413: "Request entity too large: limit is 3145728",
    500: "etcdserver: request is too large",
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def publishing() -> AsyncIterator[tuple[FakeApi, Publisher, Clock]]:
    async with fake_api() as (api, client):
        api.serve(FCAPS, "FabricCapability", [], "1")
        config = build_config({})
        store, clock = FactStore(), Clock()
        publisher = Publisher(config=config, store=store, client=client, metrics=OperatorMetrics(), clock=clock)
        extractor = FactsExtractor(config)
        for body in [daemon_set(), node("a"), node("b"), *plugin_pods(["a", "b"])]:
            BY_KIND[str(body["kind"])].upsert(store, extractor, body)
        await publisher.load_published()
        yield api, publisher, clock


def ready(obj: dict[str, Any]) -> tuple[str, str]:
    condition = find_condition(obj.get("status"), "Ready") or {}
    return str(condition.get("status")), str(condition.get("reason"))


@pytest.mark.parametrize("code", sorted(REFUSALS))
async def test_a_status_refused_as_too_large_publishes_a_minimal_status_that_fails_closed(
    code: int, caplog: pytest.LogCaptureFixture
) -> None:
    async with publishing() as (api, publisher, clock):
        api.write_failures[("PATCH", STATUS)] = deque([code])
        api.failure_messages[code] = REFUSALS[code]
        with caplog.at_level(logging.ERROR):
            await publisher.reconcile_once()
        obj = api.objects(FCAPS)["efa-p5"]
        assert ready(obj) == ("False", "StatusTooLarge")
        assert "too large" in find_condition(obj["status"], "Ready")["message"]  # type: ignore[index]
        assert obj["metadata"]["labels"][READY_LABEL] == "false"
        assert "uniformCount" not in obj["status"] and "recommendation" not in obj["status"]
        assert any("too large" in record.getMessage() for record in caplog.records)

        # Not given up: the full status goes again once its backoff has passed, and then holds.
        state = publisher.objects["efa-p5"]
        assert state.refused is None and state.retry.failures == 1
        publisher.store.mark_all()
        await publisher.reconcile_once()
        assert ready(api.objects(FCAPS)["efa-p5"]) == ("False", "StatusTooLarge")  # still backing off
        clock.now = state.retry.due + 0.1
        publisher.store.mark_all()
        await publisher.reconcile_once()
        obj = api.objects(FCAPS)["efa-p5"]
        assert ready(obj) == ("True", "UniformCapability")
        assert obj["metadata"]["labels"][READY_LABEL] == "true"
        assert obj["status"]["uniformCount"] == 32


async def test_another_refusal_is_not_taken_for_a_size_problem() -> None:
    async with publishing() as (api, publisher, _):
        api.write_failures[("PATCH", STATUS)] = deque([500])
        await publisher.reconcile_once()
        obj = api.objects(FCAPS)["efa-p5"]
        assert find_condition(obj.get("status"), "Ready") is None  # nothing written: a plain retry
