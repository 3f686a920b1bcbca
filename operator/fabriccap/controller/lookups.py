"""Owners and claims the pods do not tell: read once each, cached in the fact index.

A pod names its controller (a Job) and, through the JobSet controller's labels, its JobSet;
whose the JobSet is (a TrainJob's) only the JobSet says, and which devices a claim asks for
only its ResourceClaimTemplate says. The evaluation lists what it could not see through; this
reads each object once (a GET, never a watch of those kinds: RBAC grants ``get`` only) and
puts the answer in the index, which makes the pools concerned evaluate again.

An object that is gone, or a kind the cluster does not serve (no JobSet CRD), is an answer:
"no further owner". A kind the operator may not read (403), and an answer larger than any
object can be (``MAX_LOOKUP_BYTES``, read no further), are said once in the log and treated
the same way. Anything else is retried later, with a backoff per object.

What is read is only ever one object of a lookup kind, by a name an object can have, in the
pod's own namespace (``kube.lookups.lookup_path``); an owner reference that names anything
else is not followed (core.references), and said once per cause.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fabriccap.controller.ratelimit import Backoff, BackoffPolicy, PacedLines
from fabriccap.controller.store import FactStore
from fabriccap.core.facts import ClaimRef
from fabriccap.core.references import RefusalHook
from fabriccap.core.workloads import LookupKey, learn_lookup
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError, ResponseTooLargeError
from fabriccap.kube.lookups import MAX_LOOKUP_BYTES, lookup_path

logger = logging.getLogger(__name__)

PARALLEL_LOOKUPS = 8
LOOKUP_BACKOFF = BackoffPolicy(base=2.0, cap=300.0)


@dataclass
class LookupResolver:
    client: KubeClient
    store: FactStore
    clock: Callable[[], float] = time.monotonic
    # Told of owner references in the objects read that are not followed (the extractor's hook).
    refused: RefusalHook | None = None
    _pending: set[LookupKey] = field(default_factory=set)
    _retries: Backoff[LookupKey] = field(init=False)
    _forbidden_kinds: set[str] = field(default_factory=set)
    _oversized_kinds: set[str] = field(default_factory=set)
    # Keys waiting to be read, oldest first, and the few workers reading them: a worker per
    # read, not a task per key (12,500 owners at start were 12,500 tasks and their frames).
    _queue: deque[LookupKey] = field(default_factory=deque)
    _workers: set[asyncio.Task[None]] = field(default_factory=set)
    _failure_lines: PacedLines = field(init=False)

    def __post_init__(self) -> None:
        self._retries = Backoff(LOOKUP_BACKOFF, clock=self.clock)
        self._failure_lines = PacedLines(clock=self.clock)

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
        self._forget_unreferenced()
        return self._retries.next_due()

    def due(self) -> list[LookupKey]:
        self._forget_unreferenced()
        return self._retries.due()

    def _forget_unreferenced(self) -> None:
        for key in [key for key in self._retries if not self._referenced(key)]:
            self._retries.forget(key)  # its pods went: nothing to retry for

    def _referenced(self, key: LookupKey) -> bool:
        """Whether a live workload pod still leads to ``key``: what its answer may be kept for."""
        if key.is_claim:
            return self.store.claim_referenced(ClaimRef(key.kind, key.namespace, key.name))
        return self.store.owner_referenced(key.owner_key)

    async def _resolve(self, key: LookupKey) -> None:
        try:
            path = lookup_path(key)
        except ValueError:
            # Refused where the pod became facts already; a key that gets here anyway (no
            # extractor hook, a future caller) is never sent, and has no further owner.
            self._pending.discard(key)
            self._learn(key, None)
            return
        try:
            body = await self.client.get(path, max_body_bytes=MAX_LOOKUP_BYTES)
        except ResponseTooLargeError as error:
            self._oversized(key, error)
            return
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
        # An answer that lands after the last pod naming it went is dropped, not kept for good.
        if self._referenced(key):
            learn_lookup(self.store, key, body, self.refused)

    def _oversized(self, key: LookupKey, error: KubeError) -> None:
        self._retries.forget(key)
        if key.kind not in self._oversized_kinds:
            self._oversized_kinds.add(key.kind)
            logger.warning("%s; such a %s counts as having no further owner (said once per kind)", error, key.kind)
        self._learn(key, None)

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
        # Many reads fail at once for one cause (an API server away, a 429 storm).
        held = self._failure_lines.say_failure(error)
        if held is not None:
            logger.warning(
                "reading %s %s/%s failed: %s; again in %.0fs (%s)",
                key.kind,
                key.namespace,
                key.name,
                error,
                delay,
                self._failure_lines.aside(held, "reads"),
            )

    async def close(self) -> None:
        self._queue.clear()
        for worker in list(self._workers):
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
