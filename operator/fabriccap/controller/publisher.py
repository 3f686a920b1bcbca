"""Dirty pools -> FabricCapability objects: create, write status on change, delete after grace.

This is the only module that writes to the cluster, and it writes only FabricCapability
objects. The loop wakes on changed facts, waits a short debounce window so a burst of node
updates becomes one evaluation, re-evaluates only the pools marked dirty, and compares each
result with what is published (ignoring timestamps) before writing anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.store import FactStore
from fabriccap.core.api import MANAGED_BY_LABEL, MANAGED_BY_VALUE, POOL_KEY_ANNOTATION, ConditionType
from fabriccap.core.config import Config
from fabriccap.core.evaluate import PoolCapability, evaluate
from fabriccap.core.facts import Pool
from fabriccap.core.stamping import now_rfc3339, stamp_status, strip_volatile
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import CRD_NAME, FABRIC_CAPABILITIES

logger = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 60.0
PARALLEL_WRITES = 16


@dataclass
class Published:
    """What the cluster holds for one FabricCapability, as last read or written."""

    name: str
    generation: int
    status: dict[str, Any]
    labels: dict[str, str]
    annotations: dict[str, str]
    resource_version: str = ""

    def is_newer_than(self, other: Published) -> bool:
        # resourceVersions are opaque, but etcd-backed servers use increasing integers; a
        # watch event older than our own write must not be mistaken for someone's edit.
        if self.resource_version.isdigit() and other.resource_version.isdigit():
            return int(self.resource_version) > int(other.resource_version)
        return self.resource_version != other.resource_version

    @property
    def owned(self) -> bool:
        return self.labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> Published:
        metadata = obj.get("metadata") or {}
        return cls(
            name=str(metadata.get("name")),
            generation=int(metadata.get("generation") or 1),
            status=dict(obj.get("status") or {}),
            labels=dict(metadata.get("labels") or {}),
            annotations=dict(metadata.get("annotations") or {}),
            resource_version=str(metadata.get("resourceVersion") or ""),
        )


def status_patch(previous: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch turning ``previous`` into ``new``: absent keys must be nulled."""
    patch: dict[str, Any] = {key: None for key in previous if key not in new}
    patch.update(new)
    return {"status": patch}


@dataclass
class Publisher:
    config: Config
    store: FactStore
    client: KubeClient
    metrics: OperatorMetrics
    clock: Callable[[], float] = time.monotonic
    published: dict[str, Published] = field(default_factory=dict)
    # name -> (fabric, pool) of every capability the facts currently call for
    desired: dict[str, tuple[str, Pool]] = field(default_factory=dict)
    # name -> monotonic time since which its pool has had no target node
    absent_since: dict[str, float] = field(default_factory=dict)
    started: float = 0.0
    launched: float = 0.0  # monotonic time the publisher was made: the start-up timeout counts from it
    loaded: bool = False  # published objects read back; watch events before that are moot
    last_round: float | None = None  # monotonic time of the last completed reconcile round

    def __post_init__(self) -> None:
        self.launched = self.clock()

    async def run(self) -> None:
        await self.store.listed.wait()
        await self.load_published()
        self.started = self.clock()
        # Everything published but not (yet) called for starts its grace period now.
        for name in self.published:
            self.absent_since.setdefault(name, self.started)
        # The first round needs no debounce: the listing already gathered everything.
        await self.reconcile_once()
        next_resync = self.clock() + self.config.resync_seconds
        while True:
            deadline = self._next_deadline()
            until_resync = max(next_resync - self.clock(), 0.0)
            timeout = until_resync if deadline is None else min(deadline, until_resync)
            # asyncio.timeout, not wait_for: wait_for runs the wait in a task of its own, which
            # kopf counts as a stray task at shutdown, waits 5 s for, then cancels (exit 1).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.store.changed.wait()
            if self.clock() >= next_resync:
                self.store.mark_all()
                next_resync = self.clock() + self.config.resync_seconds
            if self.store.changed.is_set() and self.config.debounce_seconds:
                await asyncio.sleep(self.config.debounce_seconds)
            await self.reconcile_once()

    def _next_deadline(self) -> float | None:
        candidates = [
            since + self.config.pool_grace_period_seconds - self.clock()
            for name, since in self.absent_since.items()
            if name in self.published
        ]
        return max(min(candidates), 0.05) if candidates else None

    async def load_published(self) -> None:
        """Read back every FabricCapability, waiting with backoff while the CRD is missing."""
        delay = 1.0
        while True:
            try:
                items = [item async for item in self.client.list_items(FABRIC_CAPABILITIES.collection())]
            except KubeError as error:
                if error.status == 404:
                    logger.error(
                        "CRD %s is not installed (apply crds/fabriccapabilities.yaml); retrying in %.0fs",
                        CRD_NAME,
                        delay,
                    )
                else:
                    logger.error("cannot list FabricCapabilities: %s; retrying in %.0fs", error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_SECONDS)
                continue
            self.published = {p.name: p for p in map(Published.from_object, items)}
            self.loaded = True
            logger.info("found %d published FabricCapabilities", len(self.published))
            for published in self.published.values():
                if published.owned:
                    self._set_metrics(published)
            return

    def observe_published(self, obj: dict[str, Any], deleted: bool) -> None:
        """A watch event on a FabricCapability: keep our view of the cluster current."""
        name = str((obj.get("metadata") or {}).get("name"))
        if deleted:
            if self.published.pop(name, None) is not None:
                self.metrics.pools.remove_pool(name)
                if name in self.desired:  # deleted by someone else while still called for
                    self.store.mark_pool(self.desired[name][1])
            return
        current = Published.from_object(obj)
        known = self.published.get(name)
        if known is not None and not current.is_newer_than(known):
            return
        self.published[name] = current
        if name in self.desired and (known is None or strip_volatile(known.status) != strip_volatile(current.status)):
            self.store.mark_pool(self.desired[name][1])  # edited by someone else: put our answer back

    async def reconcile_once(self) -> None:
        everything, pools = self.store.take_dirty()
        started = time.perf_counter()
        if everything:
            pools = set(self.store.pool_members) | {pool for _, pool in self.desired.values()}
        evaluation = evaluate(self.config, self.store, pools)
        capabilities, empty = evaluation.capabilities, evaluation.absent
        self.metrics.unpooled_nodes.set(evaluation.unpooled_nodes)
        self.metrics.evaluations.inc(len(pools))
        self.metrics.evaluation_duration.observe(time.perf_counter() - started)
        now = self.clock()
        for name in empty:
            self.desired.pop(name, None)
            self.absent_since.setdefault(name, now)
        for capability in capabilities:
            self.desired[capability.name] = (capability.fabric, capability.pool)
            self.absent_since.pop(capability.name, None)
        # Objects are independent: write them a few at a time (a cold start creates hundreds).
        writers = asyncio.Semaphore(PARALLEL_WRITES)

        async def publish_one(capability: PoolCapability) -> None:
            async with writers:
                await self._guarded(self.publish(capability))

        await asyncio.gather(*(publish_one(capability) for capability in capabilities))
        for name, since in list(self.absent_since.items()):
            if name not in self.published:
                self.absent_since.pop(name)
            elif now - since >= self.config.pool_grace_period_seconds:
                await self._guarded(self.expire(name))
        self.metrics.last_evaluation.set(time.time())
        self.last_round = self.clock()

    def health(self) -> dict[str, Any]:
        """What /healthz reports; raises when the evaluation loop is stuck (so the pod restarts).

        A round runs at least every resync period, so one missing for two periods (and a
        minute) means the loop hangs, not that the cluster is quiet.
        """
        since = None if self.last_round is None else round(self.clock() - self.last_round, 1)
        waiting = self.clock() - self.launched
        if self.last_round is None and not self.store.listed.is_set() and waiting > self.config.startup_timeout_seconds:
            raise RuntimeError(
                f"the initial listing has not finished after {waiting:.0f}s "
                f"(startupTimeoutSeconds {self.config.startup_timeout_seconds:.0f})"
            )
        if since is not None and since > 2 * self.config.resync_seconds + 60:
            raise RuntimeError(f"no evaluation for {since:.0f}s (resync every {self.config.resync_seconds:.0f}s)")
        return {
            "listed": self.store.listed.is_set(),
            "nodes": len(self.store.nodes),
            "published": len(self.published),
            "secondsSinceEvaluation": since,
        }

    async def _guarded(self, operation: Any) -> None:
        try:
            await operation
        except KubeError as error:
            self.metrics.status_writes.labels(result="error").inc()
            logger.error("%s", error)
            if error.status == 404:
                # The CRD went away, or the object: re-read everything before the next write.
                await self.load_published()
            self.store.mark_all()

    def _set_metrics(self, published: Published) -> None:
        status = published.status
        pool = (status.get("pool") or {}).get("value") or published.annotations.get(POOL_KEY_ANNOTATION, "")
        self.metrics.pools.set_pool(published.name, str(status.get("fabric", "")), str(pool), status)

    async def publish(self, capability: PoolCapability) -> None:
        new_status = capability.status.to_json()
        existing = self.published.get(capability.name)
        if existing is None:
            created = await self.client.create(FABRIC_CAPABILITIES.collection(), capability.create_body())
            existing = Published.from_object(created)
            self.published[capability.name] = existing
            self.metrics.status_writes.labels(result="created").inc()
            logger.info("created FabricCapability %s", capability.name)
        elif not existing.owned or existing.labels != {**existing.labels, **capability.labels()}:
            patched = await self.client.merge_patch(
                FABRIC_CAPABILITIES.item(capability.name), {"metadata": {"labels": capability.labels()}}
            )
            existing = Published.from_object(patched)
            self.published[capability.name] = existing
            logger.info("adopted FabricCapability %s", capability.name)
        if (
            strip_volatile(existing.status) == strip_volatile(new_status)
            and existing.status.get("observedGeneration") == existing.generation
        ):
            self._set_metrics(existing)
            return
        stamped = stamp_status(new_status, existing.status, existing.generation, now_rfc3339())
        written = await self.client.merge_patch(
            FABRIC_CAPABILITIES.status(capability.name), status_patch(existing.status, stamped)
        )
        written_state = Published.from_object(written)
        self.published[capability.name] = written_state
        self.metrics.status_writes.labels(result="updated").inc()
        self._set_metrics(written_state)
        ready = capability.status.condition(ConditionType.READY)
        logger.info(
            "FabricCapability %s: Ready=%s (%s)",
            capability.name,
            ready.status if ready else "?",
            ready.reason if ready else "?",
        )

    async def expire(self, name: str) -> None:
        existing = self.published.get(name)
        self.absent_since.pop(name, None)
        if existing is None:
            return
        if not existing.owned:
            logger.warning("FabricCapability %s has no target node but is not managed by fabriccap; kept", name)
            return
        try:
            await self.client.delete(FABRIC_CAPABILITIES.item(name))
        except KubeError as error:
            if error.status != 404:
                raise
        self.published.pop(name, None)
        self.metrics.pools.remove_pool(name)
        self.metrics.status_writes.labels(result="deleted").inc()
        logger.info("deleted FabricCapability %s: its pool has had no target node for the grace period", name)
