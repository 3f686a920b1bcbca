"""Dirty pools -> FabricCapability objects: create, write status on change, delete after grace.

This is the only module that writes to the cluster, and it writes only FabricCapability
objects (and, through the event recorder, Events). The loop wakes on changed facts, waits a
short debounce window so a burst of node updates becomes one evaluation, re-evaluates only
the pools marked dirty, and compares each result with what is published (ignoring
timestamps) before writing anything.

Every replica runs the loop, so its metrics and its view of the published objects stay warm;
only the leader writes, and only inside the window its Lease allows (leader.py).

Failed writes back off per object (exponential, jittered, capped) instead of re-marking every
pool; a write the API server refuses as invalid (422) is not retried until the status to
write changes, and is logged once. An object whose pool annotations name another pool is a
name conflict: it is reported (log, Event, ``fabriccap_name_conflicts``) and never written, so
two pools can never overwrite each other in a loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from fabriccap.controller.events import EventRecorder, WorkloadEventOutbox, condition_events
from fabriccap.controller.lookups import LookupResolver
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.store import FactStore
from fabriccap.core.api import (
    FABRIC_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    POOL_KEY_ANNOTATION,
    POOL_VALUE_ANNOTATION,
    ConditionType,
    FabricCapabilityStatus,
    find_condition,
    too_large_status,
)
from fabriccap.core.config import Config
from fabriccap.core.evaluate import Evaluation, EvaluationMemo, NameConflict, PoolCapability, evaluate
from fabriccap.core.facts import Pool
from fabriccap.core.stamping import RFC3339, stamp_status, strip_volatile
from fabriccap.core.workloads import ReadyPool, unschedulable_event
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import CRD_NAME, FABRIC_CAPABILITIES

logger = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 60.0
WRITE_BACKOFF_BASE_SECONDS = 1.0
WRITE_BACKOFF_CAP_SECONDS = 300.0
# Objects are written a few at a time (a cold start creates hundreds), in two lanes: a write
# that only moves the count of pods requesting the fabric is routine, and under pod churn
# nearly every write is one (75/s at 10,000 nodes). Everything else a user acts on (a
# condition, pods without the fabric, an offender) has lanes of its own, so it never queues
# behind those: it measured 0.5 s of a probe's 0.9 s, waiting for a writer.
ROUTINE_WRITES = 12
URGENT_WRITES = 4
# How long a clean stop waits for the writes in flight before the Lease is released.
WRITES_STOP_SECONDS = 5.0
# How long the first publication waits for the workloads' owners to be read. Short: the Ready
# gates must not wait on owner names (at 10,000 nodes and 12,500 Jobs the reads take longer
# than 10 s). A status that names a Job where its TrainJob is still being read is written once
# more when the read lands; Events wait for it (``_workload_events``).
FIRST_LOOKUPS_TIMEOUT_SECONDS = 2.0
# Statuses the API server refuses because of what is sent: retrying the same body cannot help.
PERMANENT_WRITE_ERRORS = frozenset({400, 422})
# How the API server says a write is too large: 413 for a body over its 3 MiB request limit;
# etcd's own limit (1.5 MiB per object) comes back as a 500 or 422 naming the size.
TOO_LARGE_PHRASES = ("too large", "too long", "request entity", "exceeds the maximum")


def is_too_large(error: KubeError) -> bool:
    """Whether the API server refused a write for its size."""
    if error.status == 413:
        return True
    return error.status in (422, 500) and any(phrase in str(error).lower() for phrase in TOO_LARGE_PHRASES)


class WritePermit(Protocol):
    """The leader election's answer to "may this replica write now, and for how long?"."""

    @property
    def leading(self) -> bool: ...

    def write_window(self) -> float: ...


@dataclass
class Published:
    """What the cluster holds for one FabricCapability, as last read or written."""

    name: str
    generation: int
    status: dict[str, Any]
    labels: dict[str, str]
    annotations: dict[str, str]
    resource_version: str = ""
    uid: str = ""

    def is_newer_than(self, other: Published) -> bool:
        # resourceVersions are opaque, but etcd-backed servers use increasing integers; a
        # watch event older than our own write must not be mistaken for someone's edit.
        if self.resource_version.isdigit() and other.resource_version.isdigit():
            return int(self.resource_version) > int(other.resource_version)
        return self.resource_version != other.resource_version

    @property
    def owned(self) -> bool:
        return self.labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE

    def claimed_by(self) -> tuple[str | None, Pool | None]:
        """The (fabric, pool) this object says it is for, where it says so."""
        key, value = self.annotations.get(POOL_KEY_ANNOTATION), self.annotations.get(POOL_VALUE_ANNOTATION)
        pool = Pool(key, value) if key is not None and value is not None else None
        return self.labels.get(FABRIC_LABEL), pool

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> Published:
        metadata = obj.get("metadata") or {}
        try:
            generation = int(metadata.get("generation") or 1)
        except (TypeError, ValueError):
            generation = 1
        status = obj.get("status")
        return cls(
            name=str(metadata.get("name")),
            generation=generation,
            status=dict(status) if isinstance(status, dict) else {},
            labels={str(k): str(v) for k, v in (metadata.get("labels") or {}).items()},
            annotations={str(k): str(v) for k, v in (metadata.get("annotations") or {}).items()},
            resource_version=str(metadata.get("resourceVersion") or ""),
            uid=str(metadata.get("uid") or ""),
        )


@dataclass
class WriteFailure:
    attempts: int
    retry_at: float  # monotonic
    permanent_fingerprint: str | None  # the status the API server refused, if it was refused as invalid


def status_patch(previous: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch turning ``previous`` into ``new``: absent keys must be nulled."""
    patch: dict[str, Any] = {key: None for key in previous if key not in new}
    patch.update(new)
    return {"status": patch}


def fingerprint(status: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(strip_volatile(status), sort_keys=True).encode()).hexdigest()[:16]


def is_routine_change(previous: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether writing ``new`` over ``previous`` moves nothing but the count of pods (and
    workloads) that request the fabric: the one field pod churn keeps moving."""
    before, after = strip_volatile(previous), strip_volatile(new)
    if before == after:
        return True  # nothing to write at all (publish checks that again): no hurry either
    before_workloads, after_workloads = before.pop("workloads", None), after.pop("workloads", None)
    if before != after or not isinstance(before_workloads, dict) or not isinstance(after_workloads, dict):
        return False
    return {k: v for k, v in before_workloads.items() if k != "requestingFabric"} == {
        k: v for k, v in after_workloads.items() if k != "requestingFabric"
    }


def transition_times(status: dict[str, Any]) -> dict[str, Any]:
    return {
        str(condition.get("type")): condition.get("lastTransitionTime")
        for condition in status.get("conditions") or []
        if isinstance(condition, dict)
    }


class _Standalone:
    leading = True

    def write_window(self) -> float:
        return float("inf")


@dataclass
class Publisher:
    config: Config
    store: FactStore
    client: KubeClient
    metrics: OperatorMetrics
    clock: Callable[[], float] = time.monotonic
    leader: WritePermit = field(default_factory=_Standalone)
    events: EventRecorder | None = None
    # Whether the informers' data is fresh; stale data makes pool_ready read 0 (fail closed).
    fresh: Callable[[], bool] = lambda: True
    published: dict[str, Published] = field(default_factory=dict)
    # name -> (fabric, pool) of every capability the facts currently call for
    desired: dict[str, tuple[str, Pool]] = field(default_factory=dict)
    # name -> monotonic time since which its pool has had no target node (or it has no pool)
    absent_since: dict[str, float] = field(default_factory=dict)
    failures: dict[str, WriteFailure] = field(default_factory=dict)
    conflicts: dict[str, str] = field(default_factory=dict)  # name -> why it is not written
    # name -> the status this process last wrote (or confirmed as its own): an object whose
    # transition times differ was edited by someone else and is put back, and new transition
    # times are judged against it, never against someone's forgery.
    written: dict[str, dict[str, Any]] = field(default_factory=dict)
    # name -> fingerprint of the status last attempted: what a refusal as invalid refers to
    _pending_fingerprint: dict[str, str] = field(default_factory=dict)
    # Reads the owners and claims the evaluation could not see through (workload reporting).
    lookups: LookupResolver | None = None
    # The last status computed per name: where an unschedulable request could go instead.
    latest: dict[str, FabricCapabilityStatus] = field(default_factory=dict)
    # Workload Events go out in the background (each problem once), never holding up a round.
    outbox: WorkloadEventOutbox | None = None
    started: float = 0.0
    launched: float = 0.0  # monotonic time the publisher was made: the start-up timeout counts from it
    loaded: bool = False  # published objects read back; before that watch events only keep versions
    last_round: float | None = None  # monotonic time of the last completed reconcile round
    # The loop's rounds do not wait for their writes (see _start_write): name -> write in flight,
    # and the names evaluated again while theirs was in flight (written again after it).
    _writes: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _sending: set[str] = field(default_factory=set)  # those of _writes that hold a lane
    _routine: dict[str, bool] = field(default_factory=dict)  # the lane of each of _writes
    # What each write waiting for its lane will send: the newest status computed.
    _payloads: dict[str, tuple[PoolCapability, dict[str, Any]]] = field(default_factory=dict)
    _write_again: dict[str, Pool] = field(default_factory=dict)
    # What a round reuses from the rounds before (the pools' node-side status, the pods' judgements).
    memo: EvaluationMemo = field(default_factory=EvaluationMemo)
    _routine_writers: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(ROUTINE_WRITES))
    _urgent_writers: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(URGENT_WRITES))

    def __post_init__(self) -> None:
        self.launched = self.clock()
        self.metrics.pools.fresh = self.fresh
        if self.events is not None and self.outbox is None:
            self.outbox = WorkloadEventOutbox(self.events, leading=lambda: self.leader.leading)
        if self.outbox is not None:
            outbox = self.outbox
            outbox.referenced = self.store.owner_referenced
            self.metrics.workload_events_queued.set_function(lambda: outbox.queued)

    @property
    def workload_events_sent(self) -> set[str]:
        """The workload problems this process recorded (or found recorded) an Event for."""
        return set() if self.outbox is None else set(self.outbox.sent)

    # -- the loop

    async def run(self) -> None:
        await self.store.listed.wait()
        await self.load_published()
        self.started = self.clock()
        # Everything published but not (yet) called for starts its grace period now.
        for name in self.published:
            self.absent_since.setdefault(name, self.started)
        if self.lookups is not None and self.config.workloads.enabled:
            # Read the owners first, so the first statuses name TrainJobs, not their JobSets.
            await self.lookups.resolve_now(
                evaluate(self.config, self.store).lookups, timeout=FIRST_LOOKUPS_TIMEOUT_SECONDS
            )
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
            self._retry_due_writes()
            if self.store.changed.is_set() and self.config.debounce_seconds:
                await asyncio.sleep(self.config.debounce_seconds)
            await self.reconcile_once(finish_writes=False)

    def _next_deadline(self) -> float | None:
        now = self.clock()
        candidates = [
            since + self.config.pool_grace_period_seconds - now
            for name, since in self.absent_since.items()
            if name in self.published
        ]
        candidates += [
            failure.retry_at - now
            for name, failure in self.failures.items()
            if failure.permanent_fingerprint is None and name in self.desired
        ]
        if self.lookups is not None and (retry := self.lookups.next_retry()) is not None:
            candidates.append(retry)
        return max(min(candidates), 0.05) if candidates else None

    def _retry_due_writes(self) -> None:
        if self.lookups is not None:
            self.lookups.request(self.lookups.due())
        now = self.clock()
        for name, failure in self.failures.items():
            if failure.permanent_fingerprint is None and failure.retry_at <= now and name in self.desired:
                self.store.mark_pool(self.desired[name][1])

    def became_leader(self, leading: bool) -> None:
        """A new leader reconciles everything: the previous one may have left work undone."""
        if leading:
            self.failures.clear()
            self.store.mark_all()

    # -- reading what is published

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
            listed = {p.name: p for p in map(Published.from_object, items)}
            # The watch may have told of a newer version while this LIST was under way.
            for name, known in self.published.items():
                if name in listed and known.is_newer_than(listed[name]):
                    listed[name] = known
            self.published = listed
            self.loaded = True
            logger.info("found %d published FabricCapabilities", len(self.published))
            return

    def observe_published(self, obj: dict[str, Any], deleted: bool) -> None:
        """A watch event on a FabricCapability: keep our view of the cluster current."""
        name = str((obj.get("metadata") or {}).get("name"))
        if deleted:
            if self.published.pop(name, None) is not None:
                self.written.pop(name, None)
                if name in self.desired:  # deleted by someone else while still called for
                    self.store.mark_pool(self.desired[name][1])
                else:
                    self.metrics.pools.remove_pool(name)
            return
        current = Published.from_object(obj)
        known = self.published.get(name)
        if known is not None and not current.is_newer_than(known):
            return
        self.published[name] = current
        if not self.loaded:  # nothing is called for yet: load_published keeps the newest version
            return
        if name not in self.desired:
            # Made by someone else (by hand, a restore, another operator): no pool calls for
            # it, so it gets the grace period and, if it says it is ours, deletion.
            self.absent_since.setdefault(name, self.clock())
            return
        edited = known is None or strip_volatile(known.status) != strip_volatile(current.status)
        forged = name in self.written and transition_times(current.status) != transition_times(self.written[name])
        if edited or forged or current.labels.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
            self.store.mark_pool(self.desired[name][1])  # edited by someone else: put our answer back

    def forget_unlisted(self, names: set[str], version: str) -> None:
        """A fresh LIST of the watch (at resourceVersion ``version``) holds only ``names``.

        What it lacks was deleted while the watch was down (a partition, the CRD deleted),
        unless it is younger than the listing: this process's own create that the LIST
        predates. Without comparable versions nothing is forgotten; a write to an object
        that is gone answers 404, and the publisher reads everything again.
        """
        if not version.isdigit():
            return
        for name, known in list(self.published.items()):
            if name not in names and known.resource_version.isdigit() and int(known.resource_version) <= int(version):
                self.observe_published({"metadata": {"name": name}}, deleted=True)

    # -- one round

    async def reconcile_once(self, finish_writes: bool = True) -> None:
        """One round: evaluate the dirty pools, start the writes they need, send Events.

        The loop passes ``finish_writes=False``: a round then does not wait for its writes,
        so one slow PATCH (or thirty, on a busy API server) never holds up the next round
        and the pools it brings; each object still has at most one write in flight.
        """
        everything, pools = self.store.take_dirty()
        # Owners whose pods all went: their problems are forgotten (reliability round 3, H7).
        released = self.store.take_released()
        if self.outbox is not None:
            self.outbox.forget(released)
        started = time.perf_counter()
        if everything:
            pools = set(self.store.pools()) | {pool for _, pool in self.desired.values()}
        evaluation = evaluate(self.config, self.store, pools, memo=self.memo, warned=self._warned)
        self.metrics.unpooled_nodes.set(evaluation.unpooled_nodes)
        self.metrics.evaluations.inc(len(pools))
        self.metrics.evaluation_duration.observe(time.perf_counter() - started)
        now = self.clock()
        for name in evaluation.absent:
            self.desired.pop(name, None)
            self.absent_since.setdefault(name, now)
        for name in evaluation.renamed:
            # Its pool is published under another name now (a pool of the same value came or
            # went): the old object goes at once, so no pool has two objects.
            self.desired.pop(name, None)
            self.latest.pop(name, None)
            self.absent_since[name] = now - self.config.pool_grace_period_seconds
        for conflict in evaluation.conflicts:
            await self._conflict(conflict.name, conflict.describe())
            self.desired.pop(conflict.name, None)
        if self.lookups is not None:
            self.lookups.request(evaluation.lookups)
        for profile in self.config.enabled_fabrics:
            self.metrics.unschedulable_fabric_pods.labels(fabric=profile.name).set(
                evaluation.unschedulable_pods(profile.name)
            )
        for name in evaluation.absent:
            self.latest.pop(name, None)
        statuses = {}  # name -> its JSON, made once for the metrics and the write
        for capability in evaluation.capabilities:
            statuses[capability.name] = status_json = capability.status.to_json()
            self.latest[capability.name] = capability.status
            self.desired[capability.name] = (capability.fabric, capability.pool)
            self.absent_since.pop(capability.name, None)
            # Metrics come from what this replica computed, never from a status read back
            # (which anyone with RBAC could have forged).
            self.metrics.pools.set_pool(capability.name, capability.fabric, capability.pool.value, status_json)
        if self.leader.leading:
            writes = [
                self._start_write(capability, statuses[capability.name]) for capability in evaluation.capabilities
            ]
            if finish_writes:
                await asyncio.gather(*(task for task in writes if task is not None))
            self._workload_events(evaluation)
        for name, since in list(self.absent_since.items()):
            if name in self._writes:
                continue  # its write in flight goes first (a create has not recorded its object yet)
            if name not in self.published:
                self.absent_since.pop(name)
                self.metrics.pools.remove_pool(name)
            elif now - since >= self.config.pool_grace_period_seconds and self.leader.leading:
                await self._guarded(name, self.expire(name))
        self.metrics.name_conflicts.set(len(self.conflicts))
        self.metrics.last_evaluation.set(time.time())
        self.last_round = self.clock()

    def _start_write(self, capability: PoolCapability, new_status: dict[str, Any]) -> asyncio.Task[None] | None:
        """Write ``capability`` in the background; None when a write of it is being sent
        (two PATCHes of one object must not race: the later status could land first). That
        write's end marks the pool again, so the newest status follows it.

        A write still waiting for its lane has sent nothing: it takes the newer status and
        keeps its place in the line (a pool the churn touches every round would otherwise go
        to the back every round, and never be written). Only a routine write that is no
        longer routine leaves its line, for an urgent lane.
        """
        name = capability.name
        if name in self._sending:
            self._write_again[name] = capability.pool
            return None
        existing = self.published.get(name)
        routine = existing is not None and is_routine_change(existing.status, new_status)
        self._payloads[name] = (capability, new_status)
        waiting = self._writes.get(name)
        if waiting is not None:
            if routine or not self._routine[name]:
                return waiting
            waiting.cancel()
        self._routine[name] = routine
        task = asyncio.create_task(self._write(name, routine), name=f"write {name}")
        self._writes[name] = task
        return task

    async def _write(self, name: str, routine: bool) -> None:
        sending = False
        try:
            async with self._routine_writers if routine else self._urgent_writers:
                sending = True
                self._sending.add(name)
                capability, new_status = self._payloads.pop(name)
                await self._guarded(name, self.publish(capability, new_status))
        except Exception:
            # In a task of its own nobody awaits, an unexpected error would otherwise vanish
            # (inline, it used to end the publisher). The next change or resync tries again.
            logger.exception("writing FabricCapability %s failed unexpectedly", name)
        finally:
            if sending:
                self._sending.discard(name)
            if self._writes.get(name) is asyncio.current_task():  # not replaced while it waited
                del self._writes[name]
                del self._routine[name]
                self._payloads.pop(name, None)  # cancelled before its lane (a stop)
                pool = self._write_again.pop(name, None)
                if pool is not None:
                    self.store.mark_pool(pool)

    async def finish_writes(self, timeout: float | None = None) -> None:
        """Wait for the writes in flight (a clean stop, before the Lease is released; tests).
        Those still running after ``timeout`` are cancelled."""
        writes = list(self._writes.values())
        if not writes:
            return
        _, running = await asyncio.wait(writes, timeout=timeout)
        for task in running:
            task.cancel()
        await asyncio.gather(*writes, return_exceptions=True)

    def _warned(self, key: str) -> bool:
        """Whether the workload problem ``key`` has had its Event (or has it queued)."""
        return self.outbox is not None and self.outbox.knows(key)

    def _workload_events(self, evaluation: Evaluation) -> None:
        """FabricNotRequested and FabricUnschedulable, once per problem, on the owners: handed
        to the outbox, which sends them in the background."""
        if self.outbox is None:
            return
        ready = [
            ReadyPool(self.desired[name][0], status.pool.key, status.pool.value, status.uniform_count)
            for name, status in self.latest.items()
            if name in self.desired and status.is_ready and status.uniform_count is not None
        ]
        profiles = {profile.name: profile for profile in self.config.enabled_fabrics}
        events = [
            *evaluation.workload_events,
            *(unschedulable_event(profiles[group.fabric], group, ready) for group in evaluation.unschedulable),
        ]
        # An owner still to be read may have an owner of its own (a JobSet's TrainJob): an Event
        # on it now would land on the wrong object, and could not be taken back. It waits.
        provisional = {key.owner_key for key in evaluation.lookups if not key.is_claim}
        self.outbox.offer(event for event in events if event.involved.key not in provisional)

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
            "leader": self.leader.leading,
            "secondsSinceEvaluation": since,
            "nameConflicts": len(self.conflicts),
        }

    # -- writing

    def _deadline(self) -> float | None:
        """The request timeout that keeps a write inside the Lease's window; None: do not write."""
        window = self.leader.write_window()
        if window <= 0.5:  # too close to the renew deadline to start a write
            return None
        return min(window, 60.0)

    async def _guarded(self, name: str, operation: Any) -> None:
        try:
            await operation
        except KubeError as error:
            self.metrics.status_writes.labels(result="error").inc()
            self._record_failure(name, error)
            if error.status == 404:
                # The CRD went away, or the object: re-read everything before the next write.
                await self.load_published()

    def _record_failure(self, name: str, error: KubeError) -> None:
        previous = self.failures.get(name)
        attempts = (previous.attempts if previous else 0) + 1
        delay = min(WRITE_BACKOFF_BASE_SECONDS * 2 ** (attempts - 1), WRITE_BACKOFF_CAP_SECONDS)
        delay *= random.uniform(0.5, 1.5)
        permanent = None
        # A status too large is not the same refusal forever: the pool's facts shrink (pods go),
        # so it is tried again on its backoff while the summary stands in (_publish_summary).
        if error.status in PERMANENT_WRITE_ERRORS and name in self.desired and not is_too_large(error):
            permanent = self._pending_fingerprint.get(name)
            if previous is None or previous.permanent_fingerprint != permanent:
                logger.error("%s; not retried until the status to write changes", error)
        else:
            logger.error("%s; retrying %s in %.1fs (attempt %d)", error, name, delay, attempts)
        self.failures[name] = WriteFailure(attempts, self.clock() + delay, permanent)

    async def _conflict(self, name: str, why: str) -> None:
        if self.conflicts.get(name) != why:
            logger.error("name conflict: %s; neither is written until it is resolved", why)
        self.conflicts[name] = why
        if self.events is not None and name in self.published and self.leader.leading:
            await self.events.warn_once(self.published[name], "NameConflict", why)

    def _claim_conflict(self, capability: PoolCapability, existing: Published) -> str | None:
        fabric, pool = existing.claimed_by()
        if (fabric is not None and fabric != capability.fabric) or (pool is not None and pool != capability.pool):
            claimed = f"{fabric or '?'} pool {pool.key}={pool.value}" if pool else f"fabric {fabric}"
            return (
                f"FabricCapability {capability.name} exists for {claimed}; "
                f"{capability.fabric} pool {capability.pool.key}={capability.pool.value} computes the same name"
            )
        return None

    async def publish(self, capability: PoolCapability, new_status: dict[str, Any]) -> None:
        """Write ``new_status`` (``capability.status`` as JSON) if what is published differs."""
        name = capability.name
        wanted = self._pending_fingerprint[name] = fingerprint(new_status)
        failure = self.failures.get(name)
        if failure is not None:
            if failure.permanent_fingerprint is not None and failure.permanent_fingerprint == wanted:
                return  # refused as invalid; the same status would be refused again
            if failure.permanent_fingerprint is None and self.clock() < failure.retry_at:
                return  # backing off; the retry timer marks the pool again
        existing = self.published.get(name)
        if existing is not None and (why := self._claim_conflict(capability, existing)) is not None:
            await self._conflict(name, why)
            return
        self.conflicts.pop(name, None)
        timeout = self._deadline()
        if timeout is None:
            return
        if existing is None:
            created = await self.client.request(
                "POST", FABRIC_CAPABILITIES.collection(), body=capability.create_body(), timeout=timeout
            )
            existing = Published.from_object(created)
            self.published[name] = existing
            self.metrics.status_writes.labels(result="created").inc()
            logger.info("created FabricCapability %s", name)
        elif not existing.owned or existing.labels != {**existing.labels, **capability.labels()}:
            if (timeout := self._deadline()) is None:
                return
            patched = await self.client.request(
                "PATCH",
                FABRIC_CAPABILITIES.item(name),
                body={"metadata": {"labels": capability.labels(), "annotations": capability.annotations()}},
                content_type="application/merge-patch+json",
                timeout=timeout,
            )
            adopted = not existing.owned
            existing = Published.from_object(patched)
            self.published[name] = existing
            if adopted:
                logger.info("adopted FabricCapability %s", name)
            else:
                logger.info("labelled FabricCapability %s %s", name, capability.labels())
        forged = name in self.written and transition_times(existing.status) != transition_times(self.written[name])
        if (
            not forged
            and strip_volatile(existing.status) == strip_volatile(new_status)
            and existing.status.get("observedGeneration") == existing.generation
        ):
            self.failures.pop(name, None)
            if name not in self.written:  # read back at start and what we compute: ours now
                self.written[name] = existing.status
            return
        # Transition times carry over from what this process wrote; after a restart, from what
        # is published (the only record there is).
        previous = self.written.get(name, existing.status)
        stamped = stamp_status(new_status, previous, existing.generation, datetime.now(UTC).strftime(RFC3339))
        if (timeout := self._deadline()) is None:
            return
        try:
            written = await self.client.request(
                "PATCH",
                FABRIC_CAPABILITIES.status(name),
                body=status_patch(existing.status, stamped),
                content_type="application/merge-patch+json",
                timeout=timeout,
            )
        except KubeError as error:
            if is_too_large(error):
                await self._publish_summary(capability, existing, previous, error)
            raise  # recorded as a failure: the full status is tried again on its backoff
        await self._written(capability, previous, stamped, written)

    async def _publish_summary(
        self, capability: PoolCapability, existing: Published, previous: dict[str, Any], refusal: KubeError
    ) -> None:
        """The API server refused the status as too large: publish a summary that fails closed
        (``too_large_status``: Ready False, StatusTooLarge), labels included, so that no gate
        keeps reading the last status as current (reliability round 3, S2)."""
        name = capability.name
        logger.error(
            "FabricCapability %s: the API server refused its status as too large (%s); publishing a summary"
            " with Ready=False (StatusTooLarge) until the full status is accepted",
            name,
            refusal,
        )
        summary = replace(capability, status=too_large_status(capability.status, str(refusal)))
        if existing.labels != {**existing.labels, **summary.labels()}:
            if (timeout := self._deadline()) is None:
                return
            patched = await self.client.request(
                "PATCH",
                FABRIC_CAPABILITIES.item(name),
                body={"metadata": {"labels": summary.labels()}},
                content_type="application/merge-patch+json",
                timeout=timeout,
            )
            existing = self.published[name] = Published.from_object(patched)
        summary_status = summary.status.to_json()
        if strip_volatile(existing.status) == strip_volatile(summary_status):
            return
        stamped = stamp_status(summary_status, previous, existing.generation, datetime.now(UTC).strftime(RFC3339))
        if (timeout := self._deadline()) is None:
            return
        written = await self.client.request(
            "PATCH",
            FABRIC_CAPABILITIES.status(name),
            body=status_patch(existing.status, stamped),
            content_type="application/merge-patch+json",
            timeout=timeout,
        )
        await self._written(summary, previous, stamped, written, summary=True)

    async def _written(
        self,
        capability: PoolCapability,
        previous: dict[str, Any],
        stamped: dict[str, Any],
        written: Any,
        *,
        summary: bool = False,
    ) -> None:
        """After a status write: what is published now, its Events, and a log line. A summary
        written for a refused status leaves that refusal's backoff running."""
        name = capability.name
        written_state = Published.from_object(written)
        self.published[name] = written_state
        self.written[name] = written_state.status
        if not summary:
            self.failures.pop(name, None)
        self.metrics.status_writes.labels(result="updated").inc()
        if self.events is not None:
            for event in condition_events(previous, stamped):
                await self.events.record(written_state, event)
        ready = capability.status.condition(ConditionType.READY)
        before = find_condition(previous, ConditionType.READY)
        # At INFO only when Ready's status or reason moves: under churn every touched pool's
        # counts are written each round, 70 writes/s at 10,000 nodes, and a line per write is noise.
        # (what was there before may be anyone's edit: read, never trusted to be complete)
        was = None if before is None else (before.get("status"), before.get("reason"))
        moved = ready is None or (ready.status, ready.reason) != was
        logger.log(
            logging.INFO if moved else logging.DEBUG,
            "FabricCapability %s: Ready=%s (%s)",
            name,
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
        if (timeout := self._deadline()) is None:
            self.absent_since[name] = self.clock() - self.config.pool_grace_period_seconds  # due again
            return
        try:
            await self.client.request("DELETE", FABRIC_CAPABILITIES.item(name), timeout=timeout)
        except KubeError as error:
            if error.status != 404:
                raise
        self.published.pop(name, None)
        self.written.pop(name, None)
        self.metrics.pools.remove_pool(name)
        self.metrics.status_writes.labels(result="deleted").inc()
        logger.info("deleted FabricCapability %s: its pool has had no target node for the grace period", name)


__all__ = ["NameConflict", "Published", "Publisher", "WriteFailure", "status_patch"]
