"""Owners and claims the pods do not tell: read once each, cached in the fact index.

A pod names its controller (a Job) and, through the JobSet controller's labels, its JobSet;
whose the JobSet is (a TrainJob's) only the JobSet says, and which devices a claim asks for
only its ResourceClaimTemplate says. The evaluation lists what it could not see through; this
reads each object once (a GET, never a watch of those kinds: RBAC grants ``get`` only) and
puts the answer in the index, which makes the pools concerned evaluate again.

An object that is gone, or a kind the cluster does not serve (no JobSet CRD), is an answer:
"no further owner". A kind the operator may not read (403), and an answer larger than any
object can be (``MAX_LOOKUP_BYTES``, read no further), are said once in the log and treated
the same way. A read that gets no answer, or one saying the API server is not serving now
(``SERVER_AWAY_STATUSES``), is the server's state, not the object's: the whole queue waits,
with a backoff of its own, that read first in line again. Anything else is retried later,
with a backoff per object.

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

from fabriccap.controller.ratelimit import Backoff, BackoffPolicy, PacedLines, Retry
from fabriccap.controller.store import FactStore
from fabriccap.core.facts import ClaimRef
from fabriccap.core.references import RefusalHook
from fabriccap.core.workloads import LookupKey, learn_lookup
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError, ResponseTooLargeError
from fabriccap.kube.lookups import MAX_LOOKUP_BYTES, NO_FURTHER_OWNER_STATUSES, lookup_accept, lookup_path

logger = logging.getLogger(__name__)

PARALLEL_LOOKUPS = 8
LOOKUP_BACKOFF = BackoffPolicy(base=2.0, cap=300.0)
# No answer (None: refused, cut, timed out), priority and fairness shedding load (429), the API
# server unavailable (503) or timing out (504): every read would get the same now. When the
# API server was killed at 10,000 nodes and 100,000 pods, the start's owner reads still queued
# all failed within 0.13 s, and each kept a retry of its own (docs/performance.md, "A TLS
# connection's receive buffer, and owner reads that wait together"); under a 429 storm each
# would have been one more request to a server shedding load. So the queue waits instead.
SERVER_AWAY_STATUSES: frozenset[int | None] = frozenset({None, 429, 503, 504})


@dataclass
class LookupResolver:
    client: KubeClient
    store: FactStore
    clock: Callable[[], float] = time.monotonic
    # Told of owner references in the objects read that are not followed (the extractor's hook).
    refused: RefusalHook | None = None
    # Told, in seconds, when a retry or the queue's wait falls due: a read fails in a worker,
    # after the publisher's loop chose how long to sleep, and the loop wakes then (without it,
    # with nothing else changing, the next resync read it again).
    falls_due: Callable[[float], None] = lambda _seconds: None
    _pending: set[LookupKey] = field(default_factory=set)
    _retries: Backoff[LookupKey] = field(init=False)
    _forbidden_kinds: set[str] = field(default_factory=set)
    _oversized_kinds: set[str] = field(default_factory=set)
    # Keys waiting to be read, oldest first, and the few workers reading them: a worker per
    # read, not a task per key (12,500 owners at start were 12,500 tasks and their frames).
    _queue: deque[LookupKey] = field(default_factory=deque)
    _workers: set[asyncio.Task[None]] = field(default_factory=set)
    _failure_lines: PacedLines = field(init=False)
    # The queue's own wait while the API server is away: its failures in a row, and when the
    # queue may be read again (no worker runs meanwhile; the publisher wakes for it).
    _server_away: Retry = field(default_factory=Retry)

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
        if self._server_away.waiting(self.clock()):
            return
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
        while self._queue and not self._server_away.waiting(self.clock()):
            key = self._queue.popleft()
            if self._referenced(key):
                await self._resolve(key)
            else:
                self._pending.discard(key)  # its pods went while it waited: nothing to read it for

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def next_retry(self) -> float | None:
        """Seconds until the earliest retry falls due, or the queue may be read again, if any."""
        self._forget_unreferenced()
        due = [seconds for seconds in (self._retries.next_due(), self._queue_resumes_in()) if seconds is not None]
        return min(due) if due else None

    def _queue_resumes_in(self) -> float | None:
        """While reads wait for the API server with no worker running: seconds until they go on
        (0 once the wait is over: ``request`` then starts the workers again)."""
        if not self._queue or self._workers or not self._server_away.failures:
            return None
        return max(self._server_away.due - self.clock(), 0.0)

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
            body = await self.client.get(path, max_body_bytes=MAX_LOOKUP_BYTES, accept=lookup_accept(key))
        except ResponseTooLargeError as error:
            self._answered(key)
            self._oversized(key, error)
            return
        except KubeError as error:
            if error.status in SERVER_AWAY_STATUSES:
                self._wait_for_server(key, error)  # still pending: first in line again
                return
            self._answered(key)
            self._failed(key, error)
            return
        except Exception as error:  # a garbled body: retry later
            self._answered(key)
            self._failed(key, KubeError(str(error)))
            return
        self._answered(key)
        self._retries.forget(key)
        self._learn(key, body)

    def _answered(self, key: LookupKey) -> None:
        """The API server answered the read of ``key``: it is no longer pending, and the
        queue's wait for the server starts from nothing next time."""
        self._pending.discard(key)
        self._server_away.forget()

    def _wait_for_server(self, key: LookupKey, error: KubeError) -> None:
        self._queue.appendleft(key)
        now = self.clock()
        # The reads in flight when the server went fail with the first: one wait, not one each.
        if not self._server_away.waiting(now):
            self.falls_due(self._server_away.failed(LOOKUP_BACKOFF, now))
        self._say_failure(key, error, f"{len(self._pending)} reads wait {self._server_away.due - now:.0f}s")

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
        if error.status in NO_FURTHER_OWNER_STATUSES:
            if error.status == 403 and key.kind not in self._forbidden_kinds:
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
        self.falls_due(delay)
        self._say_failure(key, error, f"again in {delay:.0f}s")

    def _say_failure(self, key: LookupKey, error: KubeError, next_step: str) -> None:
        """Reads fail many at once for one cause (an API server away, a 429 storm, a kind whose
        every read is a 500): one line a minute per cause, with how many were held back."""
        held = self._failure_lines.say_failure(error)
        if held is not None:
            logger.warning(
                "reading %s %s/%s failed: %s; %s (%s)",
                key.kind,
                key.namespace,
                key.name,
                error,
                next_step,
                self._failure_lines.aside(held, "reads"),
            )

    async def close(self) -> None:
        self._queue.clear()
        for worker in list(self._workers):
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
