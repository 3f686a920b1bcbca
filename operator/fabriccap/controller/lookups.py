"""Owners and claims the pods do not tell: read once each, cached in the fact index.

A pod names its controller (a Job) and, through the JobSet controller's labels, its JobSet;
whose the JobSet is (a TrainJob's) only the JobSet says, and which devices a claim asks for
only its ResourceClaimTemplate says. The evaluation lists what it could not see through; this
reads each object once (a GET, never a watch of those kinds: RBAC grants ``get`` only) and
puts the answer in the index, which makes the pools concerned evaluate again.

An object that is gone, or a kind the cluster does not serve (no JobSet CRD), is an answer:
"no further owner". A kind the operator may not read (403) is said once in the log and treated
the same way. Anything else is retried later, with a backoff per object.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fabriccap.controller.ratelimit import Backoff, BackoffPolicy
from fabriccap.controller.store import FactStore
from fabriccap.core.workloads import LookupKey, learn_lookup
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.lookups import lookup_path

logger = logging.getLogger(__name__)

PARALLEL_LOOKUPS = 8
LOOKUP_BACKOFF = BackoffPolicy(base=2.0, cap=300.0)


@dataclass
class LookupResolver:
    client: KubeClient
    store: FactStore
    clock: Callable[[], float] = time.monotonic
    _pending: set[LookupKey] = field(default_factory=set)
    _retries: Backoff[LookupKey] = field(init=False)
    _forbidden_kinds: set[str] = field(default_factory=set)
    # Keys waiting to be read, oldest first, and the few workers reading them: a worker per
    # read, not a task per key (12,500 owners at start were 12,500 tasks and their frames).
    _queue: deque[LookupKey] = field(default_factory=deque)
    _workers: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._retries = Backoff(LOOKUP_BACKOFF, clock=self.clock)

    def request(self, keys: Iterable[LookupKey]) -> None:
        """Queue the objects not already queued or being read (nor waiting for their retry)."""
        for key in keys:
            if key in self._pending or self._retries.waiting(key):
                continue
            self._pending.add(key)
            self._queue.append(key)
        while self._queue and len(self._workers) < PARALLEL_LOOKUPS:
            worker = asyncio.create_task(self._work(), name="owner and claim lookups")
            self._workers.add(worker)
            worker.add_done_callback(self._workers.discard)

    async def resolve_now(self, keys: Iterable[LookupKey], timeout: float) -> None:
        """Read these and wait until the queue is done (bounded): the first publication should
        not name a JobSet where a moment later it would name the TrainJob."""
        self.request(keys)
        if self._workers:
            await asyncio.wait(list(self._workers), timeout=timeout)

    async def _work(self) -> None:
        while self._queue:
            await self._resolve(self._queue.popleft())

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def next_retry(self) -> float | None:
        """Seconds until the earliest retry falls due, if any."""
        return self._retries.next_due()

    def due(self) -> list[LookupKey]:
        return self._retries.due()

    async def _resolve(self, key: LookupKey) -> None:
        try:
            body = await self.client.get(lookup_path(key))
        except KubeError as error:
            self._failed(key, error)
            return
        except Exception as error:  # a garbled body, a dropped connection: retry later
            self._failed(key, KubeError(str(error)))
            return
        finally:
            self._pending.discard(key)
        self._retries.forget(key)
        self._learn(key, body)

    def _learn(self, key: LookupKey, body: dict[str, object] | None) -> None:
        learn_lookup(self.store, key, body)

    def _failed(self, key: LookupKey, error: KubeError) -> None:
        if error.status == 404:
            # Gone, or a kind this cluster does not serve: the nearest known owner is the top.
            self._retries.forget(key)
            self._learn(key, None)
            return
        if error.status == 403:
            if key.kind not in self._forbidden_kinds:
                self._forbidden_kinds.add(key.kind)
                logger.warning(
                    "may not read %s objects (%s): workloads are reported by their nearest known owner",
                    key.kind,
                    error,
                )
            self._retries.forget(key)
            self._learn(key, None)
            return
        delay = self._retries.failed(key)
        logger.warning("reading %s %s/%s failed: %s; again in %.0fs", key.kind, key.namespace, key.name, error, delay)

    async def close(self) -> None:
        self._queue.clear()
        for worker in list(self._workers):
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
