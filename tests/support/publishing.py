"""The publisher against the fake API server, with a clock the test moves: what the
controller tests of the publisher, its writes, its expiry and its Events share."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, overload

from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.publisher import Publisher
from fabriccap.controller.store import FactStore
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.index import NODE_FACTS
from fabriccap.core.shard import UNSHARDED, Shard
from fabriccap.kube.kinds import BY_KIND
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from support.builders import daemon_set, node, plugin_pods
from support.configs import build_config
from support.fakeapi import FakeApi, fake_api

FCAPS = FABRIC_CAPABILITIES.collection()
GRACE = 30.0


@dataclass
class Lease:
    """A leader election the test decides: the seconds left to write in while it leads (the
    elector's write_window), none once it does not."""

    window: float = 10.0
    leading: bool = True

    def write_window(self) -> float:
        return self.window if self.leading else 0.0

    def holds_window(self) -> bool:
        return self.write_window() > 0


class Clock:
    """A monotonic clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Setup:
    api: FakeApi
    publisher: Publisher
    store: FactStore
    metrics: OperatorMetrics
    clock: Clock
    extractor: FactsExtractor

    def add(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        for body in bodies:
            BY_KIND[str(body["kind"])].upsert(self.store, self.extractor, body)

    def remove_node(self, name: str) -> None:
        self.store.remove(NODE_FACTS, name)

    def writes(self) -> float:
        return sum(
            self.metrics.registry.get_sample_value("fabriccap_status_writes_total", {"result": result}) or 0.0
            for result in ("created", "updated", "deleted")
        )

    def published(self) -> dict[str, dict[str, Any]]:
        return self.api.objects(FCAPS)

    def gauge(self, metric: str, /, **labels: str) -> float | None:
        return self.metrics.sample_value(metric, labels)


def healthy(pool: str, *names: str) -> list[dict[str, Any]]:
    return [node(name, pool=pool, efa=32) for name in names] + plugin_pods(names)


@asynccontextmanager
async def publishing(
    existing: Iterable[dict[str, Any]] = (),
    field_manager: str = "fabriccap/tests/config",
    shard: Shard = UNSHARDED,
    **config: Any,
) -> AsyncIterator[Setup]:
    async with fake_api() as (api, client):
        api.serve(FCAPS, "FabricCapability", list(existing), "1")
        built = build_config({"poolGracePeriodSeconds": GRACE, **config})
        store, metrics, clock = FactStore(shard), OperatorMetrics(), Clock()
        publisher = Publisher(config=built, store=store, client=client, metrics=metrics, clock=clock)
        publisher.field_manager = publisher.requests.field_manager = field_manager
        setup = Setup(api, publisher, store, metrics, clock, FactsExtractor(built))
        setup.add([daemon_set()])
        yield setup


async def start(setup: Setup) -> None:
    """What ``Publisher.run`` does before its loop: read back, then the first round."""
    await setup.publisher.load_published()
    start_grace(setup)
    await setup.publisher.reconcile_once()


def edited_just_after_our_status_write(setup: Setup, status: dict[str, Any]) -> Callable[..., Awaitable[Any]]:
    """A ``Requests.merge_patch`` (to set with monkeypatch) under which someone writes ``status``
    over the object just after this process's next status PATCH lands, and the watch tells of it
    before the PATCH's answer is read (two connections: either order)."""
    send = setup.publisher.requests.merge_patch
    edits = 1

    async def then_edited(path: str, body: Any, timeout: float) -> dict[str, Any]:
        nonlocal edits
        answer = await send(path, body, timeout)
        if path.endswith("/status") and edits:
            edits -= 1
            forged = await setup.publisher.client.merge_patch(path, {"status": status})
            setup.publisher.observe_published(forged, deleted=False)
        return answer

    return then_edited


def on_the_loops_own_time(setup: Setup) -> None:
    """The publisher and its writer on the monotonic clock, for a test of the running loop.
    Both, never one: a retry the writer timed on the test's Clock (1,000 s) and the loop
    awaited on the monotonic one waited as long as the machine had been up for less than
    that (a fresh machine: test_a_failed_status_write_is_retried_on_its_backoff...)."""
    setup.publisher.clock = setup.publisher.writer.clock = time.monotonic


def start_grace(setup: Setup) -> None:
    """Everything published but not (yet) called for starts its grace period now (``Publisher.run``)."""
    for state in setup.publisher.objects.values():
        if state.published is not None and state.absent_since is None:
            state.absent_since = setup.clock()


@overload
def writing(publisher: Publisher) -> list[str]: ...


@overload
def writing(publisher: Publisher, name: str) -> asyncio.Task[None] | None: ...


def writing(publisher: Publisher, name: str | None = None) -> list[str] | asyncio.Task[None] | None:
    """The objects with a write waiting or in flight; or the task of ``name``'s write."""
    if name is None:
        return sorted(key for key, state in publisher.objects.items() if state.slot is not None)
    state = publisher.objects.get(name)
    return None if state is None or state.slot is None else state.slot.task


def sending(publisher: Publisher) -> list[str]:
    """The objects whose write holds a lane and is being sent."""
    return sorted(key for key, state in publisher.objects.items() if state.slot is not None and state.slot.sending)


def remembers(publisher: object, name: str) -> list[str]:
    """Where ``publisher`` still keeps something under the object name ``name``: every dict or
    set among its attributes (and theirs, one level down), by attribute path."""
    found = []
    children = [(field, value) for field, value in vars(publisher).items()]
    for field, value in list(children):
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            # A dataclass with slots has no __dict__: its fields are what it holds.
            held = (
                vars(value).items()
                if hasattr(value, "__dict__")
                else [(inner.name, getattr(value, inner.name)) for inner in dataclasses.fields(value)]
            )
            children += [(f"{field}.{inner}", inner_value) for inner, inner_value in held]
    for field, value in children:
        if isinstance(value, dict | set | frozenset) and name in value:
            found.append(field)
    return found
