"""Dirty pools -> FabricCapability objects: create, write status on change, empty, delete after grace.

This is the only module that decides what to write to the cluster, and it writes only
FabricCapability objects (and, through the event recorder, Events). The loop wakes on changed
facts, waits a short debounce window so a burst of node updates becomes one evaluation,
re-evaluates only the pools marked dirty, and compares each result with what is published
(ignoring timestamps) before writing anything. It also wakes when something it scheduled falls
due: a failed write's retry, a held-back Event, a write held back by its object's budget, the
end of a grace period, the moment the watched data would turn stale.

Every replica runs the loop, so its metrics and its view of the published objects stay warm;
only the leader writes, and only inside the window its Lease allows (leader.py). A replica
that acquires the Lease reads every published object back before its first write: another
replica may have led meanwhile, and its transition times are the record, not this one's memory.

What the publisher knows per object is one record (objects.py). Writes go through lanes in
the background (writes.py); objects no pool calls for are emptied and expire (expiry.py).

What is written, and when:
- Ready and the ``fabriccap.dev/ready`` label: the status subresource cannot carry labels, so
  they are two requests. The label is never ahead of the status: it is lowered before the
  status is written and raised after it. Whatever fails between them leaves the label saying
  "not ready" where the status may say Ready, never the reverse, and the write is retried on
  the object's backoff until both agree.
- A failed write is retried on the object's backoff (controller-runtime's per-item shape), and
  the loop wakes for it; a status the API server refuses as invalid (400, 422) is not sent
  again until it changes, and is logged once.
- Stale data fails closed in the object: while a watched kind has not been heard from for
  ``staleAfterSeconds``, every status written says Ready False ``DataUnavailable``, naming it.
- A pool flapping between two states is not shown steadily Ready: the loop evaluates the
  dirty pools at the first change of a window as well as at its end, and a Ready status does
  not replace a not-Ready one seen since the last write before that one was written. Each
  object's writes are limited (a burst, then one a second), and so are its condition Events.
- An object whose pool annotations name another pool is a name conflict: it is reported (log,
  Event, ``fabriccap_name_conflicts``) and never written, so two pools can never overwrite each
  other in a loop. Another writer that keeps overwriting an object's status (a second install,
  a --standalone replica with another config) is a write war: reported (log, Event,
  ``fabriccap_foreign_writers``), and this replica stops writing that object unless the other
  is a fabriccap whose field manager sorts after its own (so one of two fabriccaps keeps the
  object current, and both settle).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from fabriccap.controller.events import EventRecorder, Outgoing, WorkloadEventOutbox
from fabriccap.controller.expiry import Settle, expires_in, no_pool_write, settle
from fabriccap.controller.lookups import LookupResolver
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.objects import (
    WAR_QUIET_SECONDS,
    Delete,
    ForeignWriter,
    Intent,
    Lane,
    ObjectState,
    Published,
    StatusWrite,
    budget_kept,
)
from fabriccap.controller.ratelimit import BackoffPolicy, Retry
from fabriccap.controller.store import FactStore
from fabriccap.controller.window import write_timeout
from fabriccap.controller.writes import (
    FIELD_MANAGER_PREFIX,
    WINDOW_RECHECK_SECONDS,
    ObjectWriter,
    Requests,
    WriteLanes,
    fingerprint,
    finish_by,
    labels_current,
    status_current,
    status_patch,
    transition_times,
    write_lane,
)
from fabriccap.core.api import (
    READY_LABEL,
    FabricCapabilityStatus,
    is_ready_status,
)
from fabriccap.core.config import Config
from fabriccap.core.evaluate import Evaluation, EvaluationMemo, PoolCapability, data_unavailable, evaluate
from fabriccap.core.facts import ObjectRef, Pool
from fabriccap.core.stamping import strip_volatile
from fabriccap.core.workloads import ReadyPool, ready_count, unschedulable_event, unschedulable_key
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.kinds import WATCHED_KINDS, kinds_for, listed_first
from fabriccap.kube.paths import CRD_NAME, FABRIC_CAPABILITIES
from fabriccap.kube.versions import version_number

logger = logging.getLogger(__name__)

# Reading the published objects back while the CRD is missing (or the list fails).
LOAD_BACKOFF = BackoffPolicy(base=1.0, cap=60.0, jitter=0.0)
# How long a clean stop waits for the writes in flight before the Lease is released.
WRITES_STOP_SECONDS = 5.0
# How long the first publication waits for the workloads' owners to be read. Short: the Ready
# gates must not wait on owner names (at 10,000 nodes and 12,500 Jobs the reads take longer
# than 10 s). A status that names a Job where its TrainJob is still being read is written once
# more when the read lands; Events wait for it (``_workload_events``).
FIRST_LOOKUPS_TIMEOUT_SECONDS = 2.0
# How long the first round waits for the leader election's first attempt, once this replica
# may lead: an election takes a GET and a create or PUT of the Lease, milliseconds. A slower
# one only costs the round the election then calls for anyway.
FIRST_ELECTION_WAIT_SECONDS = 1.0
# While the watched data is stale, the loop looks this often for it to come back.
UNAVAILABLE_RECHECK_SECONDS = 1.0
# The loop never sleeps shorter than this between two turns it scheduled itself.
MIN_WAKE_SECONDS = 0.05
# The resync evaluates every pool again, this many a round: at 100,000 nodes a round of all
# 5,000 pools held the event loop for about a second, and any change that came meanwhile (a
# node losing its fabric) waited for it. The first round, after the listing, is whole.
RESYNC_POOLS_PER_ROUND = 250
# The names users know the watched kinds by, for DataUnavailable messages.
KIND_NAMES: Mapping[str, str] = {watched.label: f"{watched.kind}s" for watched in WATCHED_KINDS}


class WritePermit(Protocol):
    """The leader election's answer to "may this replica write now, and for how long?"."""

    @property
    def leading(self) -> bool: ...

    def write_window(self) -> float: ...

    def holds_window(self) -> bool:
        """Whether this replica leads now (``leading`` and inside its write window): what
        fabriccap_leader, /healthz's ``leader`` and fabriccap_publishing all say."""
        ...


class DataFreshness(Protocol):
    """How current the watched data is, per kind (``informers.Freshness``)."""

    stale_after: float

    def ages(self) -> dict[str, float | None]: ...

    def stale_kinds(self) -> dict[str, float | None]: ...


class _Standalone:
    leading = True

    def write_window(self) -> float:
        return float("inf")

    def holds_window(self) -> bool:
        return True


def _forget_failed_writes(state: ObjectState) -> None:
    """``state``'s failed and refused writes are no longer this replica's to retry."""
    state.retry.forget()
    state.forget_refusal()


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
    # Which watched kinds are stale: the objects then fail closed too (Ready False DataUnavailable).
    freshness: DataFreshness | None = None
    # Who this install writes as (writes.field_manager): how another writer is told from this one.
    field_manager: str = FIELD_MANAGER_PREFIX
    # Reads the owners and claims the evaluation could not see through (workload reporting).
    lookups: LookupResolver | None = None
    # Workload Events go out in the background (each problem once), never holding up a round.
    outbox: WorkloadEventOutbox | None = None
    # How the loop waits out a debounce window (tests pass a clock of their own).
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    # name -> everything known about that FabricCapability (objects.py)
    objects: dict[str, ObjectState] = field(default_factory=dict)
    # The names of the objects that time alone may bring due (``ObjectState.may_fall_due``), in
    # the order they became so: what a step walks to find them. Walking all 5,000 objects took
    # three scans a step, 4% of the operator's CPU under churn, on rounds that hold the loop.
    # A name is added wherever one of those timers is set, and dropped by ``_fire_due``.
    _timed: dict[str, None] = field(default_factory=dict)
    started: float = 0.0
    launched: float = 0.0  # monotonic time the publisher was made: the start-up timeout counts from it
    loaded: bool = False  # published objects read back; before that watch events only keep versions
    last_round: float | None = None  # monotonic time of the last completed reconcile round
    # What a round reuses from the rounds before (the pools' node-side status, the pods' judgements).
    memo: EvaluationMemo = field(default_factory=EvaluationMemo)
    lanes: WriteLanes = field(init=False)
    requests: Requests = field(init=False)
    writer: ObjectWriter = field(init=False)
    # Set once this replica may campaign for the Lease (``LeaderElector.campaign_after``): it has
    # listed, or its listing is overdue and what is published must fail closed, which takes a leader.
    may_lead: asyncio.Event = field(default_factory=asyncio.Event)
    # Set once the leader election's first attempt ended, elected or not
    # (``LeaderElector.attempted``); None (standalone): the first round waits for nothing.
    election_attempted: asyncio.Event | None = None
    _listing_wait: asyncio.Timeout | None = None  # the wait for the first listing, ended early when elected
    _elected_between_waits: bool = False  # elected, unlisted, while no wait for the listing ran: the next is none
    _read_back: bool = False  # the Lease was acquired: read everything back before writing
    _read_back_retry: Retry = field(default_factory=Retry)  # the read-back's failures, and when to try again
    _first_round_done: bool = False
    _unavailable: str | None = None  # the DataUnavailable message of the last round, if any
    _next_resync: float = 0.0
    _resync_left: list[Pool] = field(default_factory=list)  # the resync's pools not yet evaluated
    _idling: asyncio.Timeout | None = None  # the loop's wait for work, moved earlier by new deadlines
    _side_tasks: set[asyncio.Task[None]] = field(default_factory=set)  # Event sends outside writes
    # Sharded: the other shards' Ready pools, from their published objects, by object name. Shard
    # 0 holds the pods no node took, and its FabricUnschedulable names where a request would fit.
    _other_shards_ready: dict[str, ReadyPool] = field(default_factory=dict)
    # The names the watch told of while a LIST of ``_read_published`` was under way: its view of
    # them is newer than the LIST's (review 65-races F4). None: no such LIST under way.
    _told_while_listing: set[str] | None = None

    def __post_init__(self) -> None:
        self.launched = self.clock()
        # Counted when scraped: a refusal, and its end, happen in write tasks after the round.
        # Only a leader's refusals are current: a follower writes nothing, and the refusals a
        # deposed leader kept held the alert firing after the new leader had written everything
        # (review 64-fixc F2).
        self.metrics.status_writes_refused.set_function(
            lambda: sum(1 for state in self.objects.values() if state.refused is not None) if self.leader.leading else 0
        )
        if self.lookups is not None:
            self.lookups.falls_due = self._wake_in
        self.requests = Requests(self.client, self.field_manager)
        self.writer = ObjectWriter(
            requests=self.requests,
            metrics=self.metrics,
            clock=self.clock,
            timeout=self._timeout,
            events=lambda: self.events,
            falls_due=self._falls_due,
            read_back=self._must_read_back,
            found=self._found_existing,
        )
        self.lanes = WriteLanes(
            perform=self.writer.perform,
            done=self._write_ended,
            waited=lambda lane, seconds: self.metrics.status_write_wait.labels(lane=lane).observe(seconds),
        )
        for lane in Lane:  # every lane's series from the start: a rate() needs a first sample
            self.metrics.status_write_wait.labels(lane=lane)
            waiting = self.metrics.status_writes_waiting.labels(lane=lane)
            waiting.set_function(functools.partial(self.lanes.waiting_in, lane))
        self.metrics.pools.fresh = self.fresh
        self.metrics.publishing.set_function(lambda: 1.0 if self.publishing else 0.0)
        if self.events is not None and self.outbox is None:
            self.outbox = WorkloadEventOutbox(
                # What the recorder's sends are gated by (the write window), not ``leading``,
                # which stays up until the election's step ends: a send decided in that gap was
                # refused, and what it carried was already taken off the queue (review 64d F1).
                self.events,
                leading=self.leader.holds_window,
            )
        if self.outbox is not None:
            outbox = self.outbox
            outbox.referenced = self.store.owner_referenced
            self.metrics.workload_events_queued.set_function(lambda: outbox.queued)

    # -- views (health, tests)

    @property
    def published(self) -> dict[str, Published]:
        """What the cluster holds, by name, as last read or written."""
        return {name: state.published for name, state in self.objects.items() if state.published is not None}

    @property
    def publishing(self) -> bool:
        """Whether this replica writes now: it leads, inside its Lease's window, and has read
        back what is published since it acquired the Lease (``fabriccap_publishing``)."""
        return self.leader.holds_window() and self.loaded and not self._read_back

    @property
    def workload_events_sent(self) -> set[str]:
        """The workload problems this process recorded (or found recorded) an Event for."""
        return set() if self.outbox is None else set(self.outbox.sent)

    def _state(self, name: str) -> ObjectState:
        state = self.objects.get(name)
        if state is None:
            state = self.objects[name] = ObjectState(name)
            self._track_time(state)  # no pool calls for it yet
        return state

    def _forget(self, name: str) -> None:
        self.objects.pop(name, None)
        self._timed.pop(name, None)
        self.metrics.pools.remove_pool(name)

    # -- the loop

    async def run(self) -> None:
        await self._wait_for_listing()
        if not self.loaded:
            await self.load_published()
        self.started = self.clock()
        # Everything published but not (yet) called for starts its grace period now.
        for state in self.objects.values():
            if state.published is not None and state.absent_since is None:
                state.absent_since = self.started
        await self.read_owners_first()
        await self._wait_for_the_first_election()
        # The first round needs no debounce: the listing already gathered everything.
        await self.reconcile_once()
        self._next_resync = self.clock() + self.config.resync_seconds
        while True:
            if not self.store.changed.is_set():  # under churn it nearly always is: no wait to compute
                await self._idle(self._seconds_to_wait())
            await self.step()

    async def _wait_for_the_first_election(self) -> None:
        """The election campaigns only once ``may_lead`` is set, at the end of the listing, and
        the first round (everything, evaluated) often came before it was decided: as a follower
        it wrote nothing, and the election called for a second round of everything before the
        first write. Waiting (briefly) for its first attempt makes the first round that of what
        this replica is: the leader's, which writes, or a follower's."""
        if self.election_attempted is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FIRST_ELECTION_WAIT_SECONDS):
                await self.election_attempted.wait()

    async def read_owners_first(self, timeout: float = FIRST_LOOKUPS_TIMEOUT_SECONDS) -> None:
        """Before the first round: read the owners and claims the facts name (for ``timeout`` at
        most), so the first statuses name TrainJobs, not their JobSets. What to read comes from
        a preview through the memo: the first round then finds every pool's node side, and
        every pod no answer moved, already evaluated (at 5,000 pools an evaluation of its own
        cost as much again as the round's)."""
        if self.lookups is None or not self.config.workloads.enabled:
            return
        preview = evaluate(self.config, self.store, memo=self.memo, preview=True)
        await self.lookups.resolve_now(preview.lookups, timeout=timeout)

    async def step(self) -> None:
        """One turn of the loop once it woke: what fell due, the debounce window, a round.

        The window is sampled at its start as well as at its end (``sample``): rounds that
        only looked at the end of each window locked onto the phase of a pool flapping at the
        window's own rate, and saw it in the same state every time (Ready, 29 times in 29).
        """
        now = self.clock()
        if now >= self._next_resync:
            self._resync_left = sorted(self._every_pool(), reverse=True)  # taken from the end
            self._next_resync = now + self.config.resync_seconds
        self._fire_due(now)
        if self.store.changed.is_set() and self.config.debounce_seconds:
            self.sample()
            await self.sleep(self.config.debounce_seconds)
        resyncing = bool(self._resync_left)
        if resyncing:  # after the window: the resync's pools need no sample of their own
            for pool in self._resync_left[-RESYNC_POOLS_PER_ROUND:]:
                self.store.mark_pool(pool)
            del self._resync_left[-RESYNC_POOLS_PER_ROUND:]
        await self.reconcile_once(finish_writes=False)
        if resyncing:
            await asyncio.sleep(0)  # the watches' turn before the next part of the resync

    def _every_pool(self) -> set[Pool]:
        """Every pool with facts or an object: what a round of everything evaluates."""
        claimed = {state.claim[1] for state in self.objects.values() if state.claim}
        return set(self.store.pools()) | claimed

    async def _idle(self, timeout: float) -> None:
        """Wait for changed facts, or ``timeout`` seconds; ``_falls_due`` can shorten the wait."""
        if timeout <= 0 or self.store.changed.is_set():
            return
        # asyncio.timeout, not wait_for: wait_for runs the wait in a task of its own, which
        # kopf counts as a stray task at shutdown, waits 5 s for, then cancels (exit 1).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout) as self._idling:
                await self.store.changed.wait()
        self._idling = None

    def _track_time(self, state: ObjectState) -> None:
        """One of ``state``'s timers was set (or no pool calls for it): the steps look at it.
        A write that ends after its object was forgotten leaves nothing to look at."""
        if self.objects.get(state.name) is state:
            self._timed[state.name] = None

    def _release_claim(self, state: ObjectState) -> None:
        """No pool calls for ``state`` now (emptied, renamed, or its name in conflict): the steps
        look at it (``ObjectState.may_fall_due``)."""
        state.claim, state.ready = None, None
        self._track_time(state)

    def _falls_due(self, state: ObjectState, seconds: float) -> None:
        """Something of ``state`` falls due in ``seconds`` (a retry, a held Event, a held-back
        write): the steps look at it, and the loop's wait, if it waits longer, ends then. Failed
        writes end in background tasks, after the loop has chosen how long to sleep; without
        this their retries waited for the resync (5 min)."""
        self._track_time(state)
        self._wake_in(seconds)

    def _wake_in(self, seconds: float) -> None:
        """The loop's wait, if it waits longer, ends in ``seconds``."""
        idling = self._idling
        if idling is None:
            return
        at = asyncio.get_running_loop().time() + max(seconds, MIN_WAKE_SECONDS)
        when = idling.when()
        if when is None or at < when:
            idling.reschedule(at)

    def _seconds_to_wait(self) -> float:
        if self._resync_left:
            return 0.0
        until_resync = max(self._next_resync - self.clock(), 0.0)
        deadline = self._next_deadline()
        return until_resync if deadline is None else min(deadline, until_resync)

    def _next_deadline(self) -> float | None:
        """Seconds until the next thing the loop scheduled falls due, if anything."""
        now = self.clock()
        grace = self.config.pool_grace_period_seconds
        window, leading = self.leader.holds_window(), self.leader.leading
        candidates: list[float] = []
        for name in self._timed:
            state = self.objects[name]
            if (expiry := expires_in(state, now, grace)) is not None:
                candidates.append(expiry)
            if state.retry.failures and state.refused is None:
                candidates.append(state.retry.due - now)
            if state.refused is not None and state.refused_retry.failures:
                candidates.append(state.refused_retry.due - now)
            if state.deferred is not None:
                candidates.append(state.budget.next_token(now, state.deferred))
            if state.recheck_at is not None:
                candidates.append(state.recheck_at - now)
            if state.events is not None and (held := state.events.next_due(now)) is not None:
                # Held Events go only with the window (_fire_due): a leader whose window closed
                # looks again as its label recheck does; a follower not at all, for it cannot
                # send them, and their deadline of 0 woke it 20 times a second for as long as it
                # followed (review 64e F3). became_leader(True) marks everything, and the next
                # step sees them due again.
                if window:
                    candidates.append(held)
                elif leading:
                    candidates.append(max(held, WINDOW_RECHECK_SECONDS))
            if state.yielded and state.foreign is not None:
                candidates.append(state.foreign.last_seen + WAR_QUIET_SECONDS - now)
        if self.lookups is not None and (retry := self.lookups.next_retry()) is not None:
            candidates.append(retry)
        if (stale_in := self._next_staleness()) is not None:
            candidates.append(stale_in)
        return max(min(candidates), MIN_WAKE_SECONDS) if candidates else None

    def _next_staleness(self) -> float | None:
        """Seconds until the watched data turns stale (or, while it is, when to look again)."""
        if self.freshness is None:
            return None
        if self._unavailable is not None:
            return UNAVAILABLE_RECHECK_SECONDS
        ages = [age for age in self.freshness.ages().values() if age is not None]
        return max(self.freshness.stale_after - max(ages), 0.0) + MIN_WAKE_SECONDS if ages else None

    def _fire_due(self, now: float) -> None:
        """Bring back what fell due: failed writes, held-back writes and re-evaluations (their
        pools are evaluated again), held Events (sent), yields whose other writer went quiet."""
        if self.lookups is not None:
            self.lookups.request(self.lookups.due())
        following = not self.leader.leading
        for name in list(self._timed):
            state = self.objects[name]
            due = False
            if following:
                _forget_failed_writes(state)  # one that ended after this replica stepped down
            if state.retry.failures and state.refused is None and state.retry.due <= now:
                due = True
                state.empty_due = state.empty_due or state.claim is None
            if state.refused is not None and state.refused_retry.failures and state.refused_retry.due <= now:
                due = True  # a refused status is sent again (its write refuses it once more, or clears it)
                state.empty_due = state.empty_due or state.claim is None
            if state.deferred is not None and state.budget.next_token(now, state.deferred) <= 0:
                state.deferred, due = None, True
            if state.recheck_at is not None and state.recheck_at <= now:
                state.recheck_at, due = None, True
            if state.yielded and state.foreign is not None and state.foreign.quiet(now):
                logger.info(
                    "FabricCapability %s: %s has not written its status for %.0fs; writing it again",
                    state.name,
                    state.foreign.writer,
                    WAR_QUIET_SECONDS,
                )
                state.foreign.end()
                state.written, due = None, True
                state.empty_due = state.claim is None
            if due and state.claim is not None:
                self.store.mark_pool(state.claim[1])
            if state.events is not None and state.events.holding and self.leader.holds_window():
                self._send_held_events(state, now)
            if not state.may_fall_due():
                del self._timed[name]

    def became_leader(self, leading: bool) -> None:
        """A new leader reads everything back before its first write, then reconciles
        everything: another replica may have led and written meanwhile. A replica that steps
        down forgets its failed and refused writes: it makes no retry, and each one kept its
        pool due in every step, evaluated some 4 times a second for as long as it followed,
        and its refusals in fabriccap_status_writes_refused (review 64-fixc F2)."""
        if leading:
            self._read_back = True
            self.store.mark_all()
            listing_wait = self._listing_wait
            if listing_wait is not None and not listing_wait.expired():
                # Elected before the first listing (it campaigned because the listing was
                # overdue): fail closed now, not a further staleAfterSeconds later.
                listing_wait.reschedule(asyncio.get_running_loop().time())
            elif not self.store.listed.is_set():
                # Between two waits (loading what is published, after the last one ran out):
                # the next one must not take a staleAfterSeconds either.
                self._elected_between_waits = True
        else:
            for state in self.objects.values():
                _forget_failed_writes(state)

    async def _wait_for_listing(self) -> None:
        """Wait for the first listing; while it does not come (RBAC revoked, the API server
        answering errors), the published objects fail closed once ``staleAfterSeconds`` passed."""
        stale_after = self.config.stale_after_seconds
        while not self.store.listed.is_set():
            wait, self._elected_between_waits = (0.0 if self._elected_between_waits else stale_after), False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait) as self._listing_wait:
                    await self.store.listed.wait()
            self._listing_wait = None
            if not self.store.listed.is_set():
                # Failing closed takes a leader: no replica that has listed may come (RBAC
                # revoked for all of them), so this one campaigns, unlisted.
                self.may_lead.set()
                if self._read_back and self.leader.leading:
                    # Elected before its first listing: no write goes before the read-back, and
                    # only a round did it, which waits for the listing: the writes that fail the
                    # published objects closed were all held back, for good.
                    await self._read_everything_back()
                elif not self.loaded:
                    await self.load_published()
                self._fail_closed_unlisted()
        self.may_lead.set()

    def _fail_closed_unlisted(self) -> None:
        """Before any listing: every managed object says that its data cannot be read."""
        if not self.leader.leading:
            return
        message = self._unavailable_message(self._never_listed())
        for state in list(self.objects.values()):
            published = state.published
            if published is None or not published.owned or not published.status:
                continue
            try:
                current = FabricCapabilityStatus.model_validate(published.status)
            except ValueError:
                continue  # not a status this operator wrote: it expires as one no pool calls for
            self._offer(state, StatusWrite(None, data_unavailable(current, message).to_json(), create=False))

    def _never_listed(self) -> str:
        """The kinds not listed yet, as the message of the objects failed closed names them: the
        one refused (a ClusterRole without devicetaintrules), not every kind watched. A kind first
        listed only after others (ResourceSlices, after DeviceClasses and DeviceTaintRules) is
        said to wait for them. Every kind this config watches when the informers' progress is
        not known (a cluster without Karpenter is not told its NodePools are unread)."""
        watched = kinds_for(self.config)
        ages = self.freshness.ages() if self.freshness is not None else {}
        unlisted = [row for row in watched if row.label in ages and ages[row.label] is None] or list(watched)
        waiting = [row for row in unlisted if any(first in unlisted for first in listed_first(row, watched))]
        refused = ", ".join(sorted(KIND_NAMES[row.label] for row in unlisted if row not in waiting))
        if not waiting:
            return f"{refused} (never listed)"
        return f"{refused} (never listed; {', '.join(sorted(KIND_NAMES[row.label] for row in waiting))} wait for them)"

    # -- reading what is published

    async def load_published(self) -> None:
        """Read back every FabricCapability, waiting with backoff while the CRD is missing."""
        retry = Retry()
        while (delay := await self._read_published(retry)) is not None:
            await asyncio.sleep(delay)

    async def _read_published(self, retry: Retry) -> float | None:
        """One LIST of every FabricCapability, taken as what is published; on failure (logged,
        counted in ``retry``) the delay before the next try, else None."""
        self._told_while_listing = set()
        try:
            items = [item async for item in self.client.list_items(FABRIC_CAPABILITIES.collection())]
        except KubeError as error:
            delay = retry.failed(LOAD_BACKOFF, self.clock())
            if error.status == 404:
                logger.error(
                    "CRD %s is not installed (apply crds/fabriccapabilities.yaml); retrying in %.0fs", CRD_NAME, delay
                )
            else:
                logger.error("cannot list FabricCapabilities: %s; retrying in %.0fs", error, delay)
            return delay
        finally:  # failed, cancelled or done: no LIST is under way now
            told, self._told_while_listing = self._told_while_listing or set(), None
        retry.forget()
        everything = [Published.from_object(item) for item in items]
        listed = {published.name: published for published in everything if self._in_shard(published)}
        # Another shard's pool the watch told of meanwhile (deleted, or no longer Ready) stays as
        # the watch said: the LIST's older copy brought it back, and no later event corrected it.
        self._other_shards_ready = {name: ready for name, ready in self._other_shards_ready.items() if name in told}
        for published in everything:
            if not self._in_shard(published) and published.name not in told:
                self._remember_other_shard(published)
        for name, state in self.objects.items():
            known = state.published
            # The watch may have told of a newer version while this LIST was under way.
            if name not in listed:
                state.published = None
            elif known is None or not known.is_newer_than(listed[name]):
                state.answered(listed[name])  # not one the watch saw deleted while this listed
        for name, published in listed.items():
            if name not in self.objects:
                self._state(name).published = published
        self.loaded = True
        logger.info("found %d published FabricCapabilities", len(listed))
        return None

    async def _read_everything_back(self) -> None:
        """After acquiring the Lease: what is published is the record, not this process's memory.
        One try, then again after a backoff: while it fails, nothing is written (``_timeout``),
        but the rounds go on, so the pools' metrics say what the facts say (retried inline, a
        failing LIST held every round, and fabriccap_pool_ready kept its last values)."""
        if self._read_back_retry.waiting(self.clock()):
            return
        if await self._read_published(self._read_back_retry) is not None:
            return
        for state in self.objects.values():
            state.written = None
            state.retry.forget()
            state.forget_refusal()
            state.foreign = None
            state.empty_due = state.claim is None
        self._read_back = False
        self.store.mark_all()  # what was held back while reading (or lost with a 404) is looked at again
        logger.info("read back %d published FabricCapabilities before writing", len(self.published))

    def observe_published(self, obj: dict[str, Any], deleted: bool) -> None:
        """A watch event on a FabricCapability: keep our view of the cluster current."""
        name = str((obj.get("metadata") or {}).get("name"))
        if self._told_while_listing is not None:
            self._told_while_listing.add(name)
        if deleted:
            self._other_shards_ready.pop(name, None)
            state = self.objects.get(name)
            if state is None:
                return
            # Remembered even while nothing is held: a create under way may have made just
            # this object, and its answer may come after this event (``ObjectState.answered``).
            uid = str((obj.get("metadata") or {}).get("uid") or "")
            held = state.published
            if held is not None and held.uid and uid and held.uid != uid:
                return  # an earlier object of that name, behind the one held (made since)
            state.deleted_uid = uid or None
            state.published, state.written = None, None
            if state.claim is not None:  # deleted by someone else while still called for
                self.store.mark_pool(state.claim[1])
            return
        current = Published.from_object(obj)
        if not self._in_shard(current):
            self._remember_other_shard(current)  # another shard's pool: that shard's leader keeps it
            self._let_go(name)
            return
        state = self._state(name)
        known = state.published
        if known is not None and not current.is_newer_than(known):
            # An echo of a write of this replica, or older. A spec edit that landed between the
            # read and the status PATCH comes back in the PATCH's answer, a generation ahead of
            # the status it stamped, and the edit's events are no newer than that answer: the
            # newest version held is looked at here, else the status stayed a generation behind
            # until the resync (review 64-fixc F6).
            if self.loaded and state.claim is not None and known.behind:
                self.store.mark_pool(state.claim[1])
            return
        state.published = current
        if not self.loaded:  # nothing is called for yet: load_published keeps the newest version
            return
        if state.claim is None:
            # Made by someone else (by hand, a restore, another operator), or one whose pool
            # went: its empty state is written (again, if someone changed it), it gets the grace
            # period and, if it says it is ours, deletion.
            if state.absent_since is None:
                state.absent_since = self.clock()
            state.empty_due = True
            self.store.changed.set()  # a round writes its empty state now (``_settle_absent``)
            return
        edited = known is None or strip_volatile(known.status) != strip_volatile(current.status)
        forged = state.written is not None and transition_times(current.status) != transition_times(state.written)
        # The ready label is what the admission policy selects pools by: one set by hand over a
        # pool that is not Ready (or taken down over one that is) stayed until the resync.
        relabelled = known is not None and known.labels.get(READY_LABEL) != current.labels.get(READY_LABEL)
        # A spec edit bumps the generation: every gate reads the object as InProgress until a
        # status of that generation is written, and nothing wrote one until the resync (review
        # 64-observe F4). One small PATCH per spec edit.
        behind = current.behind
        if current.claimed_by() != state.claim:
            # Pool annotations (or the fabric label) stripped or changed by an edit: put back
            # now, not at the pool's next evaluation or the resync (review 64a F2).
            self.store.mark_pool(state.claim[1])
        if (edited or forged) and state.written is not None and not self._overwritten(state, current):
            return
        if edited or forged or relabelled or behind or not current.owned:
            self.store.mark_pool(state.claim[1])  # edited by someone else: put our answer back

    def _in_shard(self, published: Published) -> bool:
        """Whether this shard answers for the object (``Shard.owns_object``): the shard whose
        pool computes its name, whatever its annotations say."""
        shard = self.store.shard
        if not shard.sharded:
            return True
        fabrics = [profile.name for profile in self.config.fabrics]
        return shard.owns_object(
            published.name, published.claimed_by()[1], fabrics, lambda name: self.store.pool_computing(name, fabrics)
        )

    def _let_go(self, name: str) -> None:
        """An object held as no pool's is another shard's after all (a pool of another shard that
        computes its name came to be known): that shard answers for it, this one forgets it."""
        state = self.objects.get(name)
        if state is not None and state.claim is None and state.slot is None:
            self._forget(name)

    def _remember_other_shard(self, published: Published) -> None:
        """Keep another shard's pool while it says it is Ready, for shard 0's FabricUnschedulable
        (the only shard that holds pods no node took)."""
        if not self.store.shard.keeps_unpooled:
            return
        fabric, pool = published.claimed_by()
        count = ready_count(published.status)
        if published.labels.get(READY_LABEL) == "true" and fabric and pool is not None and count is not None:
            self._other_shards_ready[published.name] = ReadyPool(fabric, pool.key, pool.value, count)
        else:
            self._other_shards_ready.pop(published.name, None)

    def _overwritten(self, state: ObjectState, current: Published) -> bool:
        """Someone changed the status this process wrote; True: put ours back.

        The same field manager (another process of this install and config: a replica that led
        while this one was paused, a second --standalone replica) writes what this one would:
        its record becomes ours. Anyone else's change is an edit, put back; repeated, a war.
        """
        writers = current.status_writers - {self.field_manager}
        if current.status_writers and not writers:
            state.written = current.status
            if self.leader.leading and state.claim is not None:
                # While this replica leads, no other process of the install writes: this is a
                # deposed leader's write landing late (older than this one's). Its transition
                # times are adopted, and the pool is evaluated again, so it is replaced if it
                # says anything else than this replica would.
                self.store.mark_pool(state.claim[1])
            return False
        if not self.leader.leading:
            return True
        writer = min(writers) if writers else "a writer the API server does not name"
        foreign = state.foreign = state.foreign or ForeignWriter()
        if not foreign.overwritten(writer, self.clock()):
            return True
        # Of two fabriccaps, the one whose field manager sorts first keeps the object current.
        keeps = writer.startswith(f"{FIELD_MANAGER_PREFIX}/") and self.field_manager < writer
        if not foreign.at_war:
            foreign.at_war = True
            if keeps:
                why = f"its status is also written by {writer}; {self.field_manager} keeps writing it"
            else:
                foreign.yielded = True
                self._track_time(state)  # it writes again once the other writer went quiet
                why = f"its status is also written by {writer}; {self.field_manager} stops writing it"
            logger.error("write war on FabricCapability %s: %s (two installs, or two configs?)", state.name, why)
            if self.events is not None:
                self._spawn(self.events.warn_once(current, "ForeignStatusWriter", why))
        return not foreign.yielded

    def forget_unlisted(self, names: set[str], version: str) -> None:
        """A fresh LIST of the watch (at resourceVersion ``version``) holds only ``names``.

        What it lacks was deleted while the watch was down (a partition, the CRD deleted),
        unless it is younger than the listing: this process's own create that the LIST
        predates. Without comparable versions nothing is forgotten; a write to an object
        that is gone answers 404, and the publisher reads everything again.
        """
        listed = version_number(version)
        if listed is None:
            return
        # Another shard's pool deleted while the watch was down: no event will tell of it.
        for name in [name for name in self._other_shards_ready if name not in names]:
            del self._other_shards_ready[name]
        for name, state in list(self.objects.items()):
            known = state.published
            if known is None or name in names:
                continue
            held = version_number(known.resource_version)
            if held is not None and held <= listed:
                self.observe_published({"metadata": {"name": name, "uid": known.uid}}, deleted=True)

    # -- one round

    def sample(self) -> None:
        """The start of a debounce window: note which dirty pools are not Ready now. A Ready
        status at the window's end does not replace a not-Ready one seen here before that one
        was written (``_take_unready``), so flapping shows."""
        if self.store.everything_dirty or not self.store.dirty_pools:
            return
        evaluation = evaluate(self.config, self.store, set(self.store.dirty_pools), memo=self.memo, preview=True)
        for capability in evaluation.capabilities:
            state = self.objects.get(capability.name)
            if state is not None and not capability.is_ready:
                state.unready_seen = capability.status_json

    async def reconcile_once(self, finish_writes: bool = True) -> None:
        """One round: evaluate the dirty pools, start the writes they need, send Events.

        The loop passes ``finish_writes=False``: a round then does not wait for its writes,
        so one slow PATCH (or thirty, on a busy API server) never holds up the next round
        and the pools it brings; each object still has at most one write in flight.
        """
        if self._read_back and self.leader.leading:
            await self._read_everything_back()
        unavailable = self._data_unavailable()
        if unavailable != self._unavailable:
            if unavailable is not None:
                logger.error("%s: every FabricCapability says Ready=False (DataUnavailable)", unavailable)
            elif self._unavailable is not None:
                logger.info("the watched data is current again: writing what it says")
            self._unavailable = unavailable
            self.store.mark_all()
        everything, pools = self.store.take_dirty()
        # Owners whose pods all went: their problems are forgotten (reliability round 3, H7).
        released = self.store.take_released()
        if self.outbox is not None:
            self.outbox.forget(released)
        started = time.perf_counter()
        if everything:
            pools = self._every_pool()
        evaluation = evaluate(self.config, self.store, pools, memo=self.memo, warned=self._warned)
        self.metrics.unpooled_nodes.set(evaluation.unpooled_nodes)
        self.metrics.evaluations.inc(len(pools))
        self.metrics.evaluation_duration.observe(time.perf_counter() - started)
        now = self.clock()
        leading = self.leader.leading
        claimed = {capability.name for capability in evaluation.capabilities}
        conflicted = {conflict.name for conflict in evaluation.conflicts}
        for capability in evaluation.emptied:
            if capability.name not in claimed and capability.name not in conflicted:
                self._emptied(capability, now)
        for name in evaluation.renamed - claimed - conflicted:
            self._renamed(name, now)
        for conflict in evaluation.conflicts:
            state = self._state(conflict.name)
            self._release_claim(state)
            self._conflict(state, conflict.describe())
        if self.lookups is not None:
            self.lookups.request(evaluation.lookups)
        for profile in self.config.enabled_fabrics:
            self.metrics.unschedulable_fabric_pods.labels(fabric=profile.name).set(
                evaluation.unschedulable_pods(profile.name)
            )
        for capability in evaluation.capabilities:
            state = self._state(capability.name)
            status_json = capability.status_json
            if unavailable is not None:
                status_json = data_unavailable(capability.status, unavailable).to_json()
            state.claim, state.ready = (capability.fabric, capability.pool), _ready_pool(capability)
            state.absent_since, state.empty, state.empty_due = None, None, False
            ready = is_ready_status(status_json)
            if not ready:
                state.unready_seen = status_json
            shown = self._take_unready(state, status_json, now) if ready else status_json
            # Metrics come from what this replica computed, never from a status read back
            # (which anyone with RBAC could have forged).
            self.metrics.pools.set_pool(capability.name, capability.fabric, capability.pool.value, shown)
            if leading:
                if self._offer(state, StatusWrite(capability, shown)):
                    state.unready_seen = None
            else:
                state.unready_seen = None
        if leading:
            self._workload_events(evaluation)
        self._first_round_done = self._first_round_done or everything
        self._settle_absent(now)
        self.metrics.name_conflicts.set(sum(1 for state in self.objects.values() if state.conflict is not None))
        self.metrics.foreign_writers.set(sum(1 for state in self.objects.values() if state.at_war))
        self.metrics.last_evaluation.set(time.time())
        self.last_round = self.clock()
        if finish_writes:
            # The writes can take a while (5,000 creates for a first round): the round's
            # statuses, held by its evaluation, are not kept for them.
            del evaluation
            await self.finish_writes()

    def _take_unready(self, state: ObjectState, ready_json: dict[str, Any], now: float) -> dict[str, Any]:
        """A Ready status, unless a not-Ready one was seen since the last write: that one is
        shown first, and the pool evaluated again a window later."""
        held = state.unready_seen
        waiting = self.lanes.waiting(state)
        if held is None and isinstance(waiting, StatusWrite) and waiting.capability and not waiting.ready:
            held = waiting.status  # a not-Ready write still waiting for its lane: it goes first
        if held is None:
            return ready_json
        state.recheck_at = now + max(self.config.debounce_seconds, MIN_WAKE_SECONDS)
        self._track_time(state)
        return held

    def _emptied(self, capability: PoolCapability, now: float) -> None:
        """A pool evaluated without any target node: its object shows that at once."""
        state = self.objects.get(capability.name)
        if state is None:
            return  # never called for, nothing published: nothing to empty
        self._release_claim(state)
        state.conflict, state.unready_seen, state.recheck_at = None, None, None
        if state.absent_since is None:
            state.absent_since = now
        status_json = capability.status_json
        if self._unavailable is not None:
            status_json = data_unavailable(capability.status, self._unavailable).to_json()
        published = state.published
        if published is not None and _claims_other(capability, published):
            state.empty = None  # it says it is another pool's: no pool calls for it (``no_pool_write``)
        else:
            state.empty = StatusWrite(capability, status_json, create=False)
            self.metrics.pools.set_pool(capability.name, capability.fabric, capability.pool.value, state.empty.status)
        state.empty_due = True

    def _renamed(self, name: str, now: float) -> None:
        """An object whose pool is published under another name now (a pool of the same value
        came or went): it is deleted at once, through the expiry lane, so no pool has two
        objects. Its grace period is over already, and no empty state is written first."""
        state = self.objects.get(name)
        if state is None:
            return  # never published: nothing to delete
        self._release_claim(state)
        state.conflict, state.unready_seen, state.recheck_at = None, None, None
        state.absent_since = now - self.config.pool_grace_period_seconds
        # Deleted at once, without its empty state first; but an object a finalizer holds
        # already is never deleted again (``expiry.settle``): its empty state is written instead,
        # or it kept Ready=True and its claim on the pool for as long as the finalizer stayed.
        terminating = state.published is not None and state.published.terminating
        state.empty, state.empty_due = None, terminating
        self.metrics.pools.remove_pool(name)

    def _settle_absent(self, now: float) -> None:
        """Objects no pool calls for: emptied at once, deleted after the grace period, forgotten
        once nothing of them is published (expiry.py)."""
        grace = self.config.pool_grace_period_seconds
        for name in list(self._timed):  # every object no pool calls for is among them
            state = self.objects[name]
            if state.claim is not None:
                continue  # called for: nothing to settle (``settle`` keeps it), and most are
            if state.conflict is None and state.published and state.absent_since is None:
                state.absent_since, state.empty_due = now, True  # published, and no pool calls for it
            action = settle(state, now, grace)
            if action is Settle.FORGET:
                self._forget(name)
            elif not self.leader.leading or not self._first_round_done:
                continue
            elif action is not Settle.KEEP and state.published is not None and not self._in_shard(state.published):
                self._let_go(name)  # held before the pool that computes its name was known
            elif action is Settle.DELETE:
                self._offer(state, Delete())
            elif action is Settle.UNMANAGED:
                logger.warning("FabricCapability %s has no target node but is not managed by fabriccap; kept", name)
                state.kept_unmanaged = True
            elif action is Settle.EMPTY and state.published is not None:
                if state.empty is None or state.empty.capability is None:
                    # Made from what is held now: an object that became terminating since is
                    # not told of a deletion still to come (``no_pool_write``).
                    state.empty = no_pool_write(state.published, self.config.enabled_fabrics)
                self._offer(state, state.empty)

    def _conflict(self, state: ObjectState, why: str) -> None:
        if state.conflict != why:
            logger.error("name conflict: %s; neither is written until it is resolved", why)
        state.conflict = why
        if self.events is not None and state.published is not None and self.leader.holds_window():
            self._spawn(self.events.warn_once(state.published, "NameConflict", why))

    # -- deciding what to write

    def _offer(self, state: ObjectState, intent: Intent) -> bool:
        """Hand ``intent`` to the write lanes if it needs writing and may be written now.
        False when it was held back (its object's write budget): the loop comes back to it."""
        now = self.clock()
        if isinstance(intent, Delete):
            if not state.yielded and not state.retry.waiting(now):
                self.lanes.submit(state, intent, Lane.EXPIRY)
            return True
        capability = intent.capability
        published = state.published
        if capability is not None and published is not None and (why := _claim_conflict(capability, published)):
            self._conflict(state, why)
            return True
        if capability is not None:
            state.conflict = None
        if not self._needs_write(state, intent):
            # A write of an older status may wait for its lane or be on the wire: a pool that
            # flapped back to what is published had that older status (a Ready) written after
            # this, and nothing looked at it again until the resync.
            self.lanes.supersede(state, intent)
            if published is not None and state.written is None and capability is not None:
                state.written = published.status  # read back at start and what we compute: ours now
            if intent is state.empty:
                state.empty_due = False
            state.retry.forget()
            state.forget_refusal()
            return True
        if state.refusal_waits(fingerprint(intent.status), now):
            return True  # refused as invalid: sent again when its backoff is over (``_fire_due``)
        if state.retry.waiting(now) or state.yielded:
            return True  # backing off (the loop comes back when it is due), or yielded
        lane = write_lane(None if published is None else published.status, intent.status)
        kept = budget_kept(lane)
        if state.slot is None and published is not None and not state.budget.allows(now, kept):
            state.deferred = kept
            self._falls_due(state, state.budget.next_token(now, kept))
            return False
        self.lanes.submit(state, intent, lane)
        return True

    def _needs_write(self, state: ObjectState, intent: StatusWrite) -> bool:
        existing = state.published
        if existing is None:
            return intent.create and intent.capability is not None
        if intent.capability is None and not existing.owned:
            return False
        return not (status_current(state, existing, intent.status) and labels_current(existing, intent))

    # -- writing (in the lanes' tasks: writes.ObjectWriter)

    def _timeout(self) -> float | None:
        """The request timeout that keeps a write inside the Lease's window; None: do not write."""
        if self._read_back:  # not read back yet
            return None
        return write_timeout(self.leader.write_window())  # None too close to the renew deadline

    def _must_read_back(self) -> None:
        """An object (or the CRD) went away under a write: read everything back first."""
        self._read_back = True

    def _found_existing(self, state: ObjectState) -> None:
        """A create found its object there already (``ObjectWriter._found``): its pool's next
        round offers the write again over what was read, through ``_offer`` (adopted, or a name
        conflict), as for any published object."""
        if state.claim is not None:
            self.store.mark_pool(state.claim[1])

    def _write_ended(self, state: ObjectState, again: bool) -> None:
        """A write ended: evaluate its pool again if it changed while being written; an object
        no pool calls for gets a round (its empty state or its deletion may have waited for it)."""
        if state.claim is not None:
            if again:
                self.store.mark_pool(state.claim[1])
        elif state.recheck_at is not None:
            # Skipped for want of a write window: its recheck wakes the loop. A round now would
            # offer it again, be skipped again, at debounce speed (review 65-fixes F2).
            return
        elif state.empty_due or state.published is None or state.absent_since is not None:
            self.store.changed.set()

    async def finish_writes(self, timeout: float | None = None) -> None:
        """Wait for the writes in flight (a clean stop, before the Lease is released; tests).
        Those still running after ``timeout`` are cancelled, the Events sent in the background
        too: only a leader sends, and one left running landed after the Lease was released,
        when another replica may lead (review 64-shard F8)."""
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        await self.lanes.finish(timeout)
        if self._side_tasks:
            await finish_by(list(self._side_tasks), deadline)

    # -- Events

    def _spawn(self, send: Coroutine[Any, Any, Any]) -> None:
        """An Event sent in the background: a round never waits for one."""

        async def run() -> None:
            with contextlib.suppress(KubeError):
                await send

        task = asyncio.create_task(run(), name="event")
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    def _send_held_events(self, state: ObjectState, now: float) -> None:
        assert state.events is not None
        published, events = state.published, self.events
        due = state.events.due(now)
        if published is None or events is None:
            return
        for outgoing in due:
            self._spawn(self._send_held_event(state, published, events, outgoing))

    async def _send_held_event(
        self, state: ObjectState, published: Published, events: EventRecorder, outgoing: Outgoing
    ) -> None:
        """A held Event, due: sent, or held again when a later try may send it (no write window
        now, a 500): ``due`` took it off the queue, and a failed send lost it (review 64d F1)."""
        if await events.record(published, outgoing.event, outgoing.count, outgoing.first):
            return
        if state.events is not None and self.objects.get(state.name) is state:
            state.events.hold(outgoing)
            self._falls_due(state, state.events.next_due(self.clock()) or MIN_WAKE_SECONDS)

    def _warned(self, key: str) -> bool:
        """Whether the workload problem ``key`` has had its Event (or has it queued)."""
        return self.outbox is not None and self.outbox.knows(key)

    def _workload_events(self, evaluation: Evaluation) -> None:
        """FabricNotRequested and FabricUnschedulable, once per problem, on the owners: handed
        to the outbox, which sends them in the background."""
        if self.outbox is None:
            return
        # An owner still to be read may have an owner of its own (a JobSet's TrainJob): an Event
        # on it now would land on the wrong object, and could not be taken back. It waits.
        provisional = {key.owner_key for key in evaluation.lookups if not key.is_claim}

        def may_warn(owner: ObjectRef) -> bool:
            # And an owner of unknown uid gets none (a LeaderWorkerSet, named by its pods' label,
            # whose read failed): `kubectl describe` lists an object's Events by its uid (kubectl
            # pkg/describe/describe.go searchEvents, GetFieldSelector(name, namespace, kind, uid)),
            # and the Event's name, made without one, would be a re-created owner's as well.
            return bool(owner.uid) and owner.key not in provisional

        events = [event for event in evaluation.workload_events if may_warn(event.involved)]
        profiles = {profile.name: profile for profile in self.config.enabled_fabrics}
        # Pending pods' problems already sent or queued build no message again: the message
        # names the Ready pools, which takes a pass over every object (at 5,000 pools it cost
        # 8% of a core under pod churn when it was made for every round).
        unsent = [
            group
            for group in evaluation.unschedulable
            if may_warn(group.owner) and not self.outbox.knows(unschedulable_key(profiles[group.fabric], group.owner))
        ]
        if unsent:
            # Cleared with its claim: an object no pool calls for has none.
            ready = [state.ready for state in self.objects.values() if state.ready is not None]
            ready += self._other_shards_ready.values()
            events += [unschedulable_event(profiles[group.fabric], group, ready) for group in unsent]
        self.outbox.offer(events)

    # -- health

    def _data_unavailable(self) -> str | None:
        """The DataUnavailable message while a watched kind is stale, else None."""
        if self.freshness is None:
            return None
        stale = self.freshness.stale_kinds()
        if not stale:
            return None
        return self._unavailable_message(", ".join(sorted(KIND_NAMES.get(kind, kind) for kind in stale)))

    def _unavailable_message(self, what: str) -> str:
        return (
            f"{what} could not be read from the API server for staleAfterSeconds "
            f"({self.config.stale_after_seconds:.0f}s): the rest of this status is the last answer computed, "
            "and may be out of date"
        )

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
            "published": sum(1 for state in self.objects.values() if state.published is not None),
            # The gauge's truth (fabriccap_leader): ``leading`` stays up until a step under way
            # ends, past the window's close.
            "leader": self.leader.holds_window(),
            "publishing": self.publishing,
            "secondsSinceEvaluation": since,
            "nameConflicts": sum(1 for state in self.objects.values() if state.conflict is not None),
            "foreignWriters": sum(1 for state in self.objects.values() if state.at_war),
        }


def _claims_other(capability: PoolCapability, existing: Published) -> bool:
    fabric, pool = existing.claimed_by()
    return (fabric is not None and fabric != capability.fabric) or (pool is not None and pool != capability.pool)


def _claim_conflict(capability: PoolCapability, existing: Published) -> str | None:
    if not _claims_other(capability, existing):
        return None
    fabric, pool = existing.claimed_by()
    claimed = f"{fabric or '?'} pool {pool.key}={pool.value}" if pool else f"fabric {fabric}"
    return (
        f"FabricCapability {capability.name} exists for {claimed}; "
        f"{capability.fabric} pool {capability.pool.key}={capability.pool.value} computes the same name"
    )


def _ready_pool(capability: PoolCapability) -> ReadyPool | None:
    """The pool as the FabricUnschedulable messages name it, while its status is Ready."""
    status = capability.status_json
    count = ready_count(status)
    if not capability.is_ready or count is None:
        return None
    pool = status["pool"]
    return ReadyPool(capability.fabric, pool["key"], pool["value"], count)


__all__ = ["Published", "Publisher", "WritePermit", "is_ready_status", "status_patch"]
