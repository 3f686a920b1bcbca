"""Kubernetes Events: the history `kubectl describe fcap NAME` shows, and the warnings that
reach a workload's owner.

An Event is recorded when a condition's status or reason changes (``Normal`` when the
condition reaches its healthy status: True, or False for ``Stalled``; ``Warning`` otherwise;
reason = the condition's new reason, message = ``<Type>=<Status>: <message>``; of a new object's
conditions, Ready and those that add to it: ``told_when_new``). Those changes
are computed against the status already published, so a restart that changes nothing sends
nothing. Only the leader records: the publisher calls this after its own successful writes.

A pool that flaps would make an Event per flap (a node label flapping every 0.5 s made 714 in
two minutes). So condition Events go through ``EventLimiter``, one per object, as client-go's
EventCorrelator does: per reason a burst, then one per interval; what is held back in between
is counted, and goes out with the next one let through as one Event whose ``count`` (and
``firstTimestamp``) says how many it stands for, which ``kubectl describe`` shows as "x7 over 3m".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from fabriccap.controller.ratelimit import Backoff, BackoffPolicy, PacedLines
from fabriccap.controller.window import write_timeout
from fabriccap.core.analysis import explains_not_ready
from fabriccap.core.api import API_VERSION, KIND, ConditionStatus, ConditionType, Reason
from fabriccap.core.index import OwnerKey
from fabriccap.core.ratelimit import TokenBucket
from fabriccap.core.text import MAX_API_VERSION, MAX_KIND, MAX_MESSAGE, MAX_NAME, MAX_NAMESPACE, MAX_UID, clean_text
from fabriccap.core.workloads import WorkloadEvent
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import EVENTS

logger = logging.getLogger(__name__)

COMPONENT = "fabriccap"
# Events about cluster-scoped objects live in `default`, where kubectl describe looks for them.
CLUSTER_SCOPED_EVENTS_NAMESPACE = "default"
MAX_MESSAGE_LENGTH = MAX_MESSAGE  # the API server refuses longer Event messages
MAX_REASON_LENGTH = 128  # the API server's limit for an Event's reason
# An Event the API server refused as invalid (400, 422) would be refused again: it is never
# sent again (it was POSTed every round, 120 times a minute, before). Remembered by its key, the
# newest this many: after the text cleaning no valid input makes one, so this stays near empty.
REFUSED_STATUSES = frozenset({400, 422})
MAX_REFUSED_EVENTS = 4096
# The bounds of an involvedObject's fields: what the API server allows each of them to be.
_INVOLVED_LIMITS = {
    "apiVersion": MAX_API_VERSION,
    "kind": MAX_KIND,
    "name": MAX_NAME,
    "namespace": MAX_NAMESPACE,
    "uid": MAX_UID,
}


@dataclass(frozen=True)
class EventSpec:
    type: str  # Normal | Warning
    reason: str
    message: str


class InvolvedObject(Protocol):
    name: str
    uid: str
    resource_version: str


# The status each condition has when all is well: True, except the abnormal-true Stalled.
HEALTHY_STATUS: dict[str, ConditionStatus] = {ConditionType.STALLED: ConditionStatus.FALSE}
# Why a condition is Unknown on a pool without a node to judge it by (a pool scaled to zero, one
# whose nodes are all left out): what such a pool shows, not something to act on.
NO_NODE_TO_JUDGE = frozenset({Reason.NO_TARGET_NODES, Reason.UNKNOWN_INSTANCE_TYPE})


def condition_events(previous: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[EventSpec]:
    """One Event per condition whose status or reason changed from ``previous`` to ``current``;
    of the conditions that appear (a new object), those ``told_when_new`` says."""
    before = {
        condition.get("type"): (condition.get("status"), condition.get("reason"))
        for condition in (previous or {}).get("conditions") or []
        if isinstance(condition, Mapping)
    }
    conditions = [condition for condition in current.get("conditions") or [] if isinstance(condition, Mapping)]
    ready = next((condition for condition in conditions if condition.get("type") == ConditionType.READY), {})
    events = []
    for condition in conditions:
        kind, status, reason = condition.get("type"), condition.get("status"), condition.get("reason")
        if before.get(kind) == (status, reason):
            continue
        healthy = status == HEALTHY_STATUS.get(str(kind), ConditionStatus.TRUE)
        if kind not in before and not told_when_new(condition, healthy, ready, current):
            continue
        events.append(
            EventSpec(
                type="Normal" if healthy else "Warning",
                reason=str(reason or "Unknown"),
                message=f"{kind}={status}: {condition.get('message', '')}",
            )
        )
    return events


def told_when_new(
    condition: Mapping[str, Any], healthy: bool, ready: Mapping[str, Any], pool_status: Mapping[str, Any]
) -> bool:
    """Whether a condition of a new object gets an Event. Its Ready condition does: it tells the
    story. Another does only when it adds to it: away from its healthy status, not Unknown for
    want of a node to judge (``NO_NODE_TO_JUDGE``), and not explained by Ready: a Ready=True
    explains no abnormal state, a Ready=False those it is judged from (``explains_not_ready``).
    So Stalled=True is told (waiting will not make the pool Ready), and so are the informational
    MatchesInstanceType=False BelowInstanceMaximum and Launchable on a pool with nodes.

    A pool created Stalled, or Ready with a count above its type's maximum, got no Event at all
    (review 64-observe F5); told every abnormal condition, a scaled-to-zero Ready pool got four
    Warnings and a first install without the device plugin three per pool, 15,000 at 5,000 pools
    (review 64-fixc F7). Taking every condition but Stalled for what a Ready=False is judged from
    left a pool created while it rolled out (its usual first status) without the Warning of
    nodes below their type's maximum, which the same pool created Ready got (review 64e F4)."""
    kind, status, reason = condition.get("type"), condition.get("status"), condition.get("reason")
    if kind == ConditionType.READY:
        return True
    if healthy or reason == ready.get("reason"):
        return False
    if status == ConditionStatus.UNKNOWN and reason in NO_NODE_TO_JUDGE:
        return False
    if ready.get("status") == ConditionStatus.TRUE:
        return True
    advertising = pool_status.get("advertisingNodes")
    return not explains_not_ready(
        str(kind),
        reason,
        ready_reason=ready.get("reason"),
        advertising=advertising if isinstance(advertising, int) else 0,
    )


# client-go's EventCorrelator lets 25 Events through per object, then one per 5 minutes. A
# condition Event says more than a generic one, so fewer at once and more often, per reason.
CONDITION_EVENT_BURST = 5
CONDITION_EVENT_INTERVAL_SECONDS = 60.0


@dataclass(frozen=True)
class Outgoing:
    """An Event to send, standing for ``count`` occurrences, the first at ``first`` (RFC 3339)."""

    event: EventSpec
    count: int
    first: str


@dataclass
class _Held:
    event: EventSpec  # the newest held back
    count: int
    first: str


@dataclass
class EventLimiter:
    """One object's condition Events, rate-limited per reason (see the module docstring)."""

    burst: int = CONDITION_EVENT_BURST
    interval: float = CONDITION_EVENT_INTERVAL_SECONDS
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)
    _held: dict[str, _Held] = field(default_factory=dict)

    def _bucket(self, reason: str) -> TokenBucket:
        return self._buckets.setdefault(reason, TokenBucket(rate=1.0 / self.interval, burst=self.burst))

    def offer(self, event: EventSpec, now: float, wall: str) -> Outgoing | None:
        """The Event to send now (with those of its reason held back before it), or None: held."""
        held = self._held.get(event.reason)
        if self._bucket(event.reason).allows(now):
            self._held.pop(event.reason, None)
            return Outgoing(event, 1 + (held.count if held else 0), held.first if held else wall)
        self._held[event.reason] = _Held(event, (held.count if held else 0) + 1, held.first if held else wall)
        return None

    def hold(self, outgoing: Outgoing) -> None:
        """An Event let through that could not be sent then: held with its reason's, as the
        earliest of them (``due`` sends it, counted with those held after it)."""
        reason = outgoing.event.reason
        held = self._held.get(reason)
        newest = held.event if held else outgoing.event
        self._held[reason] = _Held(newest, outgoing.count + (held.count if held else 0), outgoing.first)

    def due(self, now: float) -> list[Outgoing]:
        """The held Events whose reason may send again: each goes out as one, with its count."""
        ready = [reason for reason in self._held if self._bucket(reason).allows(now)]
        return [Outgoing(held.event, held.count, held.first) for held in map(self._held.pop, ready)]

    def next_due(self, now: float) -> float | None:
        """Seconds until a held Event may go out; None when none is held."""
        if not self._held:
            return None
        return min(self._bucket(reason).next_token(now) for reason in self._held)

    @property
    def holding(self) -> bool:
        return bool(self._held)


def event_time() -> str:
    """Now, as Events spell their timestamps."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class EventRecorder:
    client: KubeClient
    identity: str  # reportingInstance: which replica said it
    # The seconds this replica may still write for (the leader's write_window): an Event is a
    # write, sent only inside the window and with a timeout that ends with it.
    window: Callable[[], float] = lambda: math.inf
    _warned: set[tuple[str, str, str]] = field(default_factory=set)
    _sequence: itertools.count[int] = field(default_factory=itertools.count)
    _refused: OrderedDict[str, None] = field(default_factory=OrderedDict)
    _failure_lines: PacedLines = field(default_factory=PacedLines)

    async def record(
        self, involved: InvolvedObject, event: EventSpec, count: int = 1, first: str | None = None
    ) -> bool:
        """An Event on a FabricCapability; ``count`` and ``first``: the occurrences it stands for.
        Whether nothing more is to be done for it (``emit``)."""
        return await self.emit(
            CLUSTER_SCOPED_EVENTS_NAMESPACE,
            {"apiVersion": API_VERSION, "kind": KIND, "name": involved.name, "uid": involved.uid},
            event,
            count=count,
            first=first,
        )

    async def warn_once(self, involved: InvolvedObject, reason: str, message: str) -> None:
        """A Warning recorded once per (object, reason, message) in this process's life."""
        key = (involved.name, reason, message)
        if key in self._warned:
            return
        self._warned.add(key)
        if not await self.record(involved, EventSpec("Warning", reason, message)):
            # Not sent, and a later try may be (no write window now, a 500, a 429): the next
            # call tries again. Kept as sent, it was lost for the process's life (review 64d F1).
            self._warned.discard(key)

    async def warn_workload(self, event: WorkloadEvent) -> bool:
        """A Warning on a workload's top-level owner, named after the problem: a restart that
        finds the same problem finds the Event already there (409) and sends nothing new.
        True when nothing more is to be done for it (see ``emit``)."""
        owner = event.involved
        involved = {
            "apiVersion": owner.api_version,
            "kind": owner.kind,
            "name": owner.name,
            "namespace": owner.namespace,
        }
        if owner.uid:
            involved["uid"] = owner.uid
        return await self.emit(
            owner.namespace, involved, EventSpec("Warning", event.reason, event.message), name=event.event_name
        )

    async def emit(
        self,
        namespace: str,
        involved: Mapping[str, Any],
        event: EventSpec,
        name: str | None = None,
        count: int = 1,
        first: str | None = None,
    ) -> bool:
        """POST one core/v1 Event; a failure is logged, never raised (Events are best effort).
        True when nothing more is to be done for it: it was recorded, (a named Event) already
        was, or the API server refused it as invalid, which is final for that Event. False when
        a later try may succeed (a 500, a 429, no answer)."""
        now = event_time()
        # Every string here may come from an object's creator: cleaned and bounded again at
        # the door, whatever made the Event (the facts already were).
        involved = {key: clean_text(value, _INVOLVED_LIMITS.get(key, MAX_NAME)) for key, value in involved.items()}
        message = clean_text(event.message, MAX_MESSAGE_LENGTH)
        key = name or "\x00".join((namespace, involved.get("name", ""), event.type, event.reason, message))
        if key in self._refused:
            return True
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace}
            if name
            else {"generateName": f"{involved['name']}.", "namespace": namespace},
            "involvedObject": dict(involved),
            "type": event.type,
            "reason": clean_text(event.reason, MAX_REASON_LENGTH),
            "message": message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.identity,
            "firstTimestamp": first or now,
            "lastTimestamp": now,
            "count": count,
        }
        timeout = write_timeout(self.window())
        if timeout is None:
            return False  # not this replica's to send now: a later try, the leader's, may
        try:
            await self.client.request("POST", EVENTS.collection(namespace), body=body, timeout=timeout)
        except KubeError as error:
            if name and error.status == 409:
                return True
            if error.status in REFUSED_STATUSES:
                self._refuse(key)
                logger.warning(
                    "Event %s on %s refused (%s); it is not sent again", event.reason, involved.get("name"), error
                )
                return True
            # While the API server is away every send fails so: one line a minute says them all.
            held = self._failure_lines.say_failure(error)
            if held is not None:
                logger.warning(
                    "could not record Event %s on %s: %s (%s)",
                    event.reason,
                    involved.get("name"),
                    error,
                    self._failure_lines.aside(held, "Events"),
                )
            return False
        return True

    def _refuse(self, key: str) -> None:
        self._refused[key] = None
        while len(self._refused) > MAX_REFUSED_EVENTS:
            self._refused.popitem(last=False)


# Workload Warnings leave through an outbox: a cluster where thousands of jobs forgot the
# fabric has thousands of owners to warn, once each. Sent inline, they held up the round (a
# 10,000-owner start left pools 71 s behind their pods); sent all at once, they would flood the
# API server. So a few at a time, at a steady rate after a burst, never in the round's way.
PARALLEL_WORKLOAD_EVENTS = 4
WORKLOAD_EVENTS_PER_SECOND = 20.0
WORKLOAD_EVENT_BURST = 100
# A send that failed (a 500, a 429, no answer) is offered again by a later round, after its backoff.
WORKLOAD_EVENT_BACKOFF = BackoffPolicy(base=2.0, cap=300.0)


class KeysByOwner(dict[OwnerKey, tuple[str, ...]]):
    """The problem keys of each owner. Nearly every owner has one (a Job without the fabric),
    and a tuple of one takes 48 bytes where a set took 216: at 10,000 owners warned, 2 MiB less
    in the sent record and as much again in the queue (memory_bench's tracemalloc)."""

    def add(self, owner: OwnerKey, key: str) -> None:
        keys = self.get(owner, ())
        if key not in keys:
            self[owner] = (*keys, key)

    def discard(self, owner: OwnerKey, key: str) -> None:
        kept = tuple(known for known in self.get(owner, ()) if known != key)
        if kept:
            self[owner] = kept
        else:
            self.pop(owner, None)


@dataclass
class WorkloadEventOutbox:
    """Workload Warnings, each problem once, sent in the background by whoever leads.

    A problem stays known as sent while its owner is: ``forget`` drops the problems of owners
    no workload pod leads to any more (the fact store says which), so churn leaves nothing
    behind (reliability round 3, H7). An owner that comes back is warned again; its Event,
    named after the problem, is then a 409 if it still exists.

    ``offer`` queues what was not sent yet and returns at once. A send that fails leaves the
    problem unsent, so a later round offers it again, once its backoff is over, unless the API
    server refused the Event as invalid: that is final, and it counts as sent. Losing the lead
    drops the queue: the next leader finds what is still a problem, and a named Event already
    there is a 409.
    """

    recorder: EventRecorder
    leading: Callable[[], bool]
    clock: Callable[[], float] = time.monotonic
    rate: float = WORKLOAD_EVENTS_PER_SECOND
    burst: int = WORKLOAD_EVENT_BURST
    # Whether an owner is still some workload pod's (the fact store's owner_referenced): a
    # problem whose owner went while its Event was being sent is not kept.
    referenced: Callable[[OwnerKey], bool] = lambda _owner: True
    sent: dict[str, OwnerKey] = field(default_factory=dict)  # problem key -> its owner
    _sent_by_owner: KeysByOwner = field(default_factory=KeysByOwner)
    _queue: dict[str, WorkloadEvent] = field(default_factory=dict)  # key -> event, oldest first
    # The queue's keys by owner: under churn owners go every round, and the queue is long
    # while the rate holds Events back (a scan of it for each round cost 3% of a core).
    _queued_by_owner: KeysByOwner = field(default_factory=KeysByOwner)
    _bucket: TokenBucket | None = None
    _retries: Backoff[str] | None = None
    _worker: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self._bucket = TokenBucket(rate=self.rate, burst=self.burst)
        self._retries = Backoff(WORKLOAD_EVENT_BACKOFF, clock=self.clock)

    @property
    def queued(self) -> int:
        return len(self._queue)

    def knows(self, key: str) -> bool:
        """Whether the problem ``key`` was recorded (or found recorded), or is queued."""
        return key in self.sent or key in self._queue

    def forget(self, owners: set[OwnerKey]) -> None:
        """Drop what is known of the problems of ``owners``, sent or queued."""
        for owner in owners:
            for key in self._sent_by_owner.pop(owner, ()):
                self.sent.pop(key, None)
        for owner in owners:
            for key in self._queued_by_owner.pop(owner, ()):
                del self._queue[key]

    def _unqueue(self, key: str) -> WorkloadEvent:
        event = self._queue.pop(key)
        self._queued_by_owner.discard(event.involved.key, key)
        return event

    def _sent(self, event: WorkloadEvent) -> None:
        owner = event.involved.key
        if self.referenced(owner):
            self.sent[event.key] = owner
            self._sent_by_owner.add(owner, event.key)

    def offer(self, events: Iterable[WorkloadEvent]) -> None:
        assert self._retries is not None
        for event in events:
            if event.key not in self.sent and event.key not in self._queue and not self._retries.waiting(event.key):
                self._queue[event.key] = event
                self._queued_by_owner.add(event.involved.key, event.key)
        if self._queue and (self._worker is None or self._worker.done()):
            self._worker = asyncio.create_task(self._send_queued(), name="workload events")

    async def drain(self) -> None:
        """Wait until the queue is empty (tests, and a clean stop)."""
        while self._worker is not None and not self._worker.done():
            await asyncio.shield(self._worker)

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker

    async def _send_queued(self) -> None:
        assert self._bucket is not None and self._retries is not None
        while self._queue:
            if not self.leading():
                self._queue.clear()
                self._queued_by_owner.clear()
                return
            granted = self._bucket.take(self.clock(), PARALLEL_WORKLOAD_EVENTS)
            batch = [self._unqueue(key) for key in list(itertools.islice(self._queue, granted))]
            if not batch:
                await asyncio.sleep(1.0 / self.rate)
                continue
            results = await asyncio.gather(*(self.recorder.warn_workload(event) for event in batch))
            for event, done in zip(batch, results, strict=True):
                if done:
                    self._sent(event)
                    self._retries.forget(event.key)
                else:
                    self._retries.failed(event.key)
