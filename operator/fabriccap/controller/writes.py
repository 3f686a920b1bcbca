"""Writing FabricCapabilities: the lanes writes wait in, the requests they send, and what a
failed one means.

Lanes. Objects are written a few at a time (a cold start creates hundreds), in four lanes. A
write that only moves the workload reports' counts and names, with no kind of problem appearing
or clearing, is routine, and under pod churn nearly every write is one (75/s at 10,000 nodes,
380/s at 5,000 pools). Everything else a user acts on has lanes of its own, so it never queues
behind those: it measured 0.5 s of a probe's 0.9 s, waiting for a writer. What gates and alerts
read (a condition's status or reason, a new object) goes first, ahead of a workload problem
appearing or clearing: at 5,000 pools the churn makes those faster than they can be written,
and a Ready flip waited 66 s behind them. Deletions after the grace period have a narrow lane
of their own: 5,000 pools that lost their nodes at once are
deleted a few at a time while other pools' changes are written as they come (they were deleted
inline, one after another, and held another pool's change for 99 s).

Each object has at most one write waiting or in flight: two PATCHes of one object must not
race (the later status could land first). A write still waiting for its lane has sent
nothing: it takes the newer status and keeps its place in the line (a pool the churn touches
every round would otherwise go to the back every round, and never be written). Only a
routine write that is no longer routine leaves its line, for an urgent lane.

One write. ``ObjectWriter`` sends what one intent needs, each request only when needed: the
create; the labels, with the ready label only lowered; the status; the ready label raised. The
status subresource ignores metadata, so the label and the status cannot be one request: the
label goes down before the status and up after it, and whatever fails between them leaves the
label saying "not ready" over a status that may still say Ready, never the reverse.

What follows a status (its Events, the ready label raised) waits in its lane again, at the back
of the line (``Rest``): a cold start at 5,000 pools is 20,000 writes, and every pool's status
was as late as the last pool's Event and label. Statuses go first now, each Event and label
after them, in the order their statuses were written. With no line in the lane they follow at
once, as before.

Errors. ``on_write_error`` is the one place that says what a failed write means, and
``ObjectWriter.failed`` what follows: a retry on the object's backoff (the loop is woken for
it), or, for a status refused as invalid, a retry on a long backoff, with a summary that fails
closed published meanwhile where what is published says Ready and the refused status differs
from it in what users act on (``needs_summary``).

Field manager. Every request names this install's field manager (``field_manager``), so an
object's managedFields say who wrote its status last: how a write war is told from an edit.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from fabriccap.controller.events import EventRecorder, Outgoing, condition_events, event_time
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.objects import Delete, Intent, Lane, ObjectState, Published, StatusWrite, WriteSlot
from fabriccap.controller.ratelimit import BackoffPolicy, PacedLines
from fabriccap.core.api import (
    READY_LABEL,
    ConditionType,
    FabricCapabilityStatus,
    Reason,
    condition_status,
    find_condition,
    is_ready_status,
    too_large_status,
    write_refused_status,
)
from fabriccap.core.config import Config
from fabriccap.core.stamping import RFC3339, stamp_status, strip_volatile
from fabriccap.core.workloads import problems_present
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.media import MERGE_PATCH
from fabriccap.kube.paths import FABRIC_CAPABILITIES

logger = logging.getLogger(__name__)

LANE_WIDTHS: Mapping[Lane, int] = {Lane.CONDITIONS: 4, Lane.URGENT: 4, Lane.ROUTINE: 12, Lane.EXPIRY: 2}
# Which lane a write moves to when it needs a faster one than the lane it waits in.
LANE_ORDER = (Lane.CONDITIONS, Lane.URGENT, Lane.ROUTINE, Lane.EXPIRY)
ROUTINE_WRITES = LANE_WIDTHS[Lane.ROUTINE]
URGENT_WRITES = LANE_WIDTHS[Lane.URGENT]
# A failed write is tried again after 1 s, 2 s, 4 s ... (jittered), at most a minute apart: the
# status is at most a minute late once the API server takes writes again.
WRITE_BACKOFF = BackoffPolicy(base=1.0, cap=60.0)
# A status refused as invalid (400, 422) is tried again after about a minute, then up to every 5
# minutes: most such refusals are an admission policy or webhook that relents, after which the
# same bytes are accepted; one that is the status's own fault costs a PATCH per 5 minutes.
REFUSED_BACKOFF = BackoffPolicy(base=60.0, cap=300.0, jitter=0.2)
# A write skipped because the Lease's window was nearly over is looked at again after this: by
# then the elector has renewed (the write goes) or stepped down (a follower offers none).
WINDOW_RECHECK_SECONDS = 1.0
# The field manager of every write, followed by what tells installs apart (``field_manager``).
FIELD_MANAGER_PREFIX = "fabriccap"
MAX_FIELD_MANAGER_LENGTH = 128  # the API server's limit


# How the API server says a write is too large: 413 for a body over its 3 MiB request limit;
# etcd's own limit (1.5 MiB per object) comes back as a 500 or 422 naming the size.
TOO_LARGE_PHRASES = ("too large", "too long", "request entity", "exceeds the maximum")


class WriteErrorAction(Enum):
    """What a failed write means, and so what the publisher does next."""

    RETRY = "retry"  # try again on the object's backoff: 429, 5xx, 403, 409, no answer
    # 400, 422: an invalid status, or an admission policy or webhook denying it: tried again on
    # the long REFUSED_BACKOFF, a summary that fails closed standing in meanwhile where the
    # published Ready no longer holds (``needs_summary``).
    REFUSED = "refused"
    # 413, or a 422/500 naming the size: a summary that fails closed stands in, and the full
    # status is tried again on the backoff (the pool's facts shrink as pods go).
    TOO_LARGE = "too large"
    GONE = "gone"  # 404: the object, or the CRD, went away: read everything back


async def finish_by(tasks: list[asyncio.Task[Any]], deadline: float | None) -> bool:
    """Wait for ``tasks`` until ``deadline`` (the loop's clock; None: for as long as they take),
    cancel those still running then, and wait for them to end; whether any was cancelled. A
    clean stop's one way to end what is in flight before the Lease is released."""
    left = None if deadline is None else max(deadline - asyncio.get_running_loop().time(), 0.0)
    _, running = await asyncio.wait(tasks, timeout=left)
    for task in running:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return bool(running)


def is_too_large(error: KubeError) -> bool:
    """Whether the API server refused a write for its size."""
    if error.status == 413:
        return True
    return error.status in (422, 500) and any(phrase in str(error).lower() for phrase in TOO_LARGE_PHRASES)


def on_write_error(error: KubeError) -> WriteErrorAction:
    """The one place that decides what a failed write means."""
    if is_too_large(error):
        return WriteErrorAction.TOO_LARGE
    if error.status in (400, 422):
        return WriteErrorAction.REFUSED
    if error.status == 404:
        return WriteErrorAction.GONE
    # A 403 is retried too (RBAC fixed, a webhook relenting), visibly: each try counts in
    # fabriccap_status_writes_total{result="error"} and fabriccap_api_errors_total.
    return WriteErrorAction.RETRY


def needs_summary(action: WriteErrorAction, existing: Published, intent: StatusWrite) -> bool:
    """Whether a summary that fails closed stands in for the refused status of ``intent``: always
    for one too large, and for one refused as invalid while the object says Ready and the refused
    status differs from it in anything a gate or a job acts on (``what_users_act_on``). That
    Ready=True is no longer true: left in place, every gate said go while the pool broke (review
    64-observe F1), or while it offered 16 per node where the published recommendation said 32
    (review 64-fixc F1). A refusal of what nobody acts on (the workload
    reports) leaves the older Ready in place. A summary is small and differs from what a policy
    refused, so it usually passes; when it is refused too, that is one more refusal, retried on
    the same backoff."""
    if action is WriteErrorAction.TOO_LARGE:
        return True
    return (
        action is WriteErrorAction.REFUSED
        and is_ready_status(existing.status)
        and what_users_act_on(existing.status) != what_users_act_on(intent.status)
    )


def what_users_act_on(status: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a status a gate or a job acts on: whether it is Ready (kubectl wait, kstatus,
    Argo CD, the ready label), the count every node offers and the recommendation a job copies
    its request from. Not how many nodes there are: a node more or fewer at the same count
    changes no gate's answer (a pool that lost them all is not Ready), and counting it turned
    every scale-up or cordon during a refusal into Ready=False (review 64e)."""
    return (
        condition_status(status, ConditionType.READY),
        status.get("uniformCount"),
        status.get("recommendation"),
    )


def config_digest(config: Config) -> str:
    """A short digest of the configuration: two replicas with different configs write as two managers."""
    return hashlib.sha256(config.model_dump_json(by_alias=True).encode()).hexdigest()[:10]


def field_manager(namespace: str, config_digest: str) -> str:
    """``fabriccap/<namespace>/<config digest>``: the replicas of one install with one config
    write as one manager (they take turns), any other install or config as another."""
    return f"{FIELD_MANAGER_PREFIX}/{namespace}/{config_digest}"[:MAX_FIELD_MANAGER_LENGTH]


def status_patch(previous: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) turning the status ``previous`` into ``new``."""
    return {"status": merge_diff(previous, new)}


def merge_diff(previous: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The smallest merge patch turning ``previous`` into ``new``: keys gone nulled, objects
    compared key by key, anything else (lists included: a merge patch replaces them) sent
    whole where it differs. Under pod churn most writes move a count or two of an 11 KB
    status, and every byte of it was sent, ~130 times a second at 5,000 pools.

    ``previous`` is the status as last read or written; a field someone else changed since
    and this diff leaves alone is seen by the watch, and the next write puts it back."""
    patch: dict[str, Any] = {key: None for key in previous if key not in new}
    for key, value in new.items():
        before = previous.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            nested = merge_diff(before, value)
            if nested:
                patch[key] = nested
        elif key not in previous or before != value:
            patch[key] = value
    return patch


def fingerprint(status: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(strip_volatile(status), sort_keys=True).encode()).hexdigest()[:16]


def is_routine_change(previous: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether writing ``new`` over ``previous`` moves nothing but the workload reports, and
    no kind of workload problem appears or clears (``problems_present``).

    What a reader of the status acts on is whether a pool has a problem of a kind at all, as
    the alerts do (from the metrics, which never wait for a write: a count above zero for 15
    minutes); a workload without the fabric, or whose NCCL chose another network, gets its own
    Event, sent apart from these writes (one that only sets fabric environment has none: its
    name may wait in the offenders list with the counts). The counts moving while a problem
    stays, and which workloads the offenders list names, are what pod churn moves everywhere:
    at 5,000 pools, 189 such writes a second, and a pool's first pod without the fabric waited
    behind them for a writer up to 2.5 s at p99 (docs/performance.md)."""
    before, after = strip_volatile(previous), strip_volatile(new)
    if before == after:
        return True  # nothing to write at all: no hurry either
    before_workloads, after_workloads = before.pop("workloads", None), after.pop("workloads", None)
    if before != after or not isinstance(before_workloads, dict) or not isinstance(after_workloads, dict):
        return False
    return problems_present(before_workloads) == problems_present(after_workloads)


def moves_a_condition(previous: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether writing ``new`` over ``previous`` changes a condition's status or reason (or
    adds or removes one): what gates (kstatus, Flux, Argo CD) and alerts act on."""
    return _condition_states(previous) != _condition_states(new)


def _condition_states(status: dict[str, Any]) -> set[tuple[Any, Any, Any]]:
    return {
        (condition.get("type"), condition.get("status"), condition.get("reason"))
        for condition in status.get("conditions") or []
        if isinstance(condition, dict)
    }


def write_lane(previous: dict[str, Any] | None, new: dict[str, Any]) -> Lane:
    """The lane of a status write over ``previous`` (None: the object is created)."""
    if previous is None or moves_a_condition(previous, new):
        return Lane.CONDITIONS
    return Lane.ROUTINE if is_routine_change(previous, new) else Lane.URGENT


def transition_times(status: dict[str, Any]) -> dict[str, Any]:
    return {
        str(condition.get("type")): condition.get("lastTransitionTime")
        for condition in status.get("conditions") or []
        if isinstance(condition, dict)
    }


@dataclass
class Requests:
    """The writes' HTTP requests, each under this install's field manager."""

    client: KubeClient
    field_manager: str
    # Told every object a write answered with (the watch of FabricCapabilities then leaves its
    # echo undecoded: kube.unread.OwnWritesRule).
    answered: Callable[[Mapping[str, Any]], None] = lambda _response: None

    def _query(self) -> dict[str, str]:
        return {"fieldManager": self.field_manager}

    async def create(self, path: str, body: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        created: dict[str, Any] = await self.client.request(
            "POST", path, query=self._query(), body=body, timeout=timeout
        )
        self.answered(created)
        return created

    async def merge_patch(self, path: str, patch: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        patched: dict[str, Any] = await self.client.request(
            "PATCH", path, query=self._query(), body=patch, content_type=MERGE_PATCH, timeout=timeout
        )
        self.answered(patched)
        return patched

    async def delete(self, path: str, uid: str, timeout: float) -> Any:
        """Delete the object at ``path`` if it is still the one with ``uid`` (where known): a
        name deleted and made again meanwhile holds another object. The answer: the object as
        deleted, terminating if a finalizer holds it (or a Status)."""
        body = {"preconditions": {"uid": uid}} if uid else None
        return await self.client.request("DELETE", path, body=body, timeout=timeout)

    async def read(self, path: str, timeout: float) -> dict[str, Any]:
        found: dict[str, Any] = await self.client.request("GET", path, timeout=timeout)
        return found


# What is left of a write after its status (``ObjectWriter.perform``): sent after the writes
# that waited in its lane meanwhile. Its errors are its own, as perform's are.
Rest = Callable[[], Awaitable[None]]
Perform = Callable[[ObjectState, Intent], Awaitable[Rest | None]]
Done = Callable[[ObjectState, bool], None]


@dataclass
class WriteLanes:
    """Writes in the background, one per object at a time, a few per lane at a time.

    ``perform`` sends one intent (its errors are its own); ``done`` hears that an object's
    write ended, and whether the object was evaluated again meanwhile (then its newest status
    goes next).
    """

    perform: Perform
    done: Done
    # Hears how long each write waited for its lane before it was sent (a metric).
    waited: Callable[[Lane, float], None] = lambda lane, seconds: None
    _lanes: dict[Lane, asyncio.Semaphore] = field(
        default_factory=lambda: {lane: asyncio.Semaphore(width) for lane, width in LANE_WIDTHS.items()}
    )
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _waiting: dict[Lane, int] = field(default_factory=lambda: dict.fromkeys(LANE_WIDTHS, 0))

    def submit(self, state: ObjectState, intent: Intent, lane: Lane) -> asyncio.Task[None] | None:
        """Write ``intent`` for ``state`` in ``lane``; None when a write of it is being sent
        (its end brings the object back, so the newest status follows it)."""
        slot = state.slot
        if slot is not None and slot.sending:
            slot.again = True
            return None
        if slot is not None:
            if LANE_ORDER.index(lane) >= LANE_ORDER.index(slot.lane):
                slot.intent = intent  # the newer intent, in its place in the line
                return slot.task
            slot.task.cancel()  # it waits in a slower lane than it needs now
        task = asyncio.create_task(self._write(state), name=f"write {state.name}")
        state.slot = WriteSlot(task, lane, intent, queued_at=asyncio.get_running_loop().time())
        self._waiting[lane] += 1
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._ended, state, state.slot))
        return task

    def supersede(self, state: ObjectState, intent: Intent) -> None:
        """``intent`` is the newest for ``state`` even though it needs no write: a write of an
        older one waiting for its lane sends this one instead (a no-op if it is what is
        published), and one on the wire is followed by a look at its object (``done``'s again)."""
        slot = state.slot
        if slot is None:
            return
        if slot.sending:
            slot.again = True
        else:
            slot.intent = intent

    def waiting(self, state: ObjectState) -> Intent | None:
        """What the write of ``state`` still waiting for its lane will send, if one waits."""
        return None if state.slot is None or state.slot.sending else state.slot.intent

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def waiting_in(self, lane: Lane) -> int:
        """How many writes wait for ``lane`` (not yet sent)."""
        return self._waiting[lane]

    def _ended(self, state: ObjectState, slot: WriteSlot, task: asyncio.Task[None]) -> None:
        """A write's task ended, however it ended: sent, failed, or cancelled, even before its
        first step (then none of its code ran). So its object's slot is freed here, not in it."""
        self._tasks.discard(task)
        if not slot.sending:  # cancelled while it waited (for a faster lane, or a stop)
            self._waiting[slot.lane] -= 1
        if state.slot is slot:  # not replaced while it waited
            state.slot = None
            self.done(state, slot.again)

    async def _write(self, state: ObjectState) -> None:
        slot = state.slot
        assert slot is not None
        try:
            async with self._lanes[slot.lane]:
                slot.sending = True
                self._waiting[slot.lane] -= 1
                waited = asyncio.get_running_loop().time() - slot.queued_at
                intent, slot.intent = slot.intent, None
                rest = await self.perform(state, intent) if intent is not None else None
            if rest is not None:
                async with self._lanes[slot.lane]:  # at the back of the lane's line
                    await rest()
            self.waited(slot.lane, waited)  # after the write: a failing metric loses no status
        except Exception:
            # In a task of its own nobody awaits, an unexpected error would otherwise vanish
            # (inline, it used to end the publisher). The next change or resync tries again.
            logger.exception("writing FabricCapability %s failed unexpectedly", state.name)

    async def finish(self, timeout: float | None = None) -> None:
        """Wait for the writes in flight, and those their ends start (a clean stop, before the
        Lease is released; tests). Those still running after ``timeout`` are cancelled."""
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        while self._tasks:
            if await finish_by(list(self._tasks), deadline):
                return


def status_current(state: ObjectState, existing: Published, status: dict[str, Any]) -> bool:
    """Whether ``existing`` already holds ``status`` as this process would write it: the same
    content, for its generation, with the transition times this process wrote (if it wrote)."""
    forged = state.written is not None and transition_times(existing.status) != transition_times(state.written)
    return (
        not forged
        and strip_volatile(existing.status) == strip_volatile(status)
        and existing.status.get("observedGeneration") == existing.generation
    )


def metadata_before_status(existing: Published, intent: StatusWrite) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations to set before the status: everything the capability says,
    except that the ready label may only go down here (it goes up after the status)."""
    capability = intent.capability
    if capability is None:  # no pool calls for it: only a "true" ready label is lowered
        return ({READY_LABEL: "false"} if existing.labels.get(READY_LABEL) == "true" else {}), {}
    wanted = capability.labels()
    # From the status to write (which may say less than the capability: stale data, a held
    # not-Ready), and only ever lowered here.
    wanted[READY_LABEL] = existing.labels.get(READY_LABEL, "false") if intent.ready else "false"
    labels = {key: value for key, value in wanted.items() if existing.labels.get(key) != value}
    annotations = {
        key: value for key, value in capability.annotations().items() if existing.annotations.get(key) != value
    }
    if labels and not existing.owned:
        labels = wanted  # adopted: every label, so the object reads as ours
    return labels, annotations


def raises_ready_label(existing: Published, intent: StatusWrite) -> bool:
    """Whether the ready label goes up after the intent's status (it says Ready, the label not)."""
    return intent.ready and existing.labels.get(READY_LABEL) != "true"


def labels_current(existing: Published, intent: StatusWrite) -> bool:
    labels, annotations = metadata_before_status(existing, intent)
    return not labels and not annotations and not raises_ready_label(existing, intent)


@dataclass
class ObjectWriter:
    """Sends what one intent needs (in a lane's task), and says what a failure leads to."""

    requests: Requests
    metrics: OperatorMetrics
    clock: Callable[[], float]
    # The request timeout that keeps a write inside the Lease's window; None: do not write.
    timeout: Callable[[], float | None]
    events: Callable[[], EventRecorder | None]
    falls_due: Callable[[ObjectState, float], None]  # something of the object falls due in that many seconds
    read_back: Callable[[], None]  # read every published object back before the next write
    # An object found to exist where it was to be created: its pool is evaluated again, and the
    # publisher decides, as for any published object, whether to adopt it or call it in conflict.
    found: Callable[[ObjectState], None] = lambda _state: None
    _failure_lines: PacedLines = field(init=False)

    def __post_init__(self) -> None:
        self._failure_lines = PacedLines(clock=self.clock)

    def _timeout(self, state: ObjectState) -> float | None:
        """The request timeout for a write of ``state`` now. None: the write is skipped, and its
        pool is evaluated again in ``WINDOW_RECHECK_SECONDS``: a leader close to its renew deadline
        that then renews is told by no one (it never stepped down), so without this the skipped
        write waited for the pool's next change or the resync."""
        timeout = self.timeout()
        if timeout is None:
            at = self.clock() + WINDOW_RECHECK_SECONDS
            state.recheck_at = at if state.recheck_at is None else min(state.recheck_at, at)
            self.falls_due(state, WINDOW_RECHECK_SECONDS)
        return timeout

    async def perform(self, state: ObjectState, intent: Intent) -> Rest | None:
        """Send ``intent`` up to its status; what is left after it (``Rest``), if anything."""
        try:
            if isinstance(intent, Delete):
                await self._delete(state)
                return None
            return await self._write(state, intent)
        except KubeError as error:
            self.failed(state, intent, error)
            return None

    async def _write(self, state: ObjectState, intent: StatusWrite) -> Rest | None:
        name, capability = state.name, intent.capability
        if state.yielded or state.refusal_waits(fingerprint(intent.status), self.clock()):
            return None
        existing = state.published
        if existing is None:
            if not intent.create or capability is None or (timeout := self._timeout(state)) is None:
                return None
            body = capability.create_body()
            body["metadata"]["labels"][READY_LABEL] = "false"  # raised once the status says Ready
            try:
                created = await self.requests.create(FABRIC_CAPABILITIES.collection(), body, timeout)
            except KubeError as error:
                if error.status != 409:
                    raise
                await self._found(state, error)
                return None
            self.metrics.status_writes.labels(result="created").inc()
            logger.info("created FabricCapability %s", name)
            if (existing := state.answered(Published.from_object(created))) is None:
                return None  # deleted again already: the next round decides
        labels, annotations = metadata_before_status(existing, intent)
        if labels or annotations:
            if (timeout := self._timeout(state)) is None:
                return None
            adopted = capability is not None and not existing.owned
            patch: dict[str, Any] = {"labels": labels}
            if annotations:
                patch["annotations"] = annotations
            answer = await self.requests.merge_patch(FABRIC_CAPABILITIES.item(name), {"metadata": patch}, timeout)
            logger.info("%s FabricCapability %s %s", "adopted" if adopted else "labelled", name, labels)
            if (existing := state.answered(Published.from_object(answer, held=existing.status))) is None:
                return None
        events: list[Outgoing] = []
        if not status_current(state, existing, intent.status):
            written = await self._write_status(state, existing, intent)
            if written is None or state.published is None or state.published.uid != existing.uid:
                # Not written (the Lease's window closed: its recheck brings it back), or the
                # object went or was replaced while it was (a read-back or the watch told): the
                # next round decides. Taken as written, an emptied pool kept Ready=True for the
                # grace period, a ready label went up over Ready=False (review 65-races F1), and
                # over a successor's status not yet written (review 65-fixes F1).
                return None
            events, existing = written, state.published
        if not events and not raises_ready_label(existing, intent):
            self._written(state, intent)
            return None
        return functools.partial(self._after_status, state, intent, events)

    async def _found(self, state: ObjectState, conflict: KubeError) -> None:
        """The create answered 409: the object exists though this process held none (made by
        hand or declared in Git while this process did not see it, or before its watch told of
        it). It is read and goes on as an existing object, adopted unless it claims another
        pool; retrying the POST answered 409 forever (review 64-shard F1)."""
        self.metrics.status_writes.labels(result="error").inc()
        logger.info("FabricCapability %s exists already (%s); reading it", state.name, conflict)
        if (timeout := self._timeout(state)) is None:
            return
        found = Published.from_object(await self.requests.read(FABRIC_CAPABILITIES.item(state.name), timeout))
        if (state.published is None or found.is_newer_than(state.published)) and state.answered(found) is None:
            return
        self.found(state)

    async def _after_status(self, state: ObjectState, intent: StatusWrite, events: list[Outgoing]) -> None:
        """The rest of a write after its status: the status's Events, then the ready label raised."""
        try:
            existing = state.published
            if existing is None:
                return  # the object went meanwhile: its Events would name nothing
            if self._timeout(state) is None:
                # The Lease's window closed while this waited: only a leader sends, so the Events
                # are held with the object's own (a leader sends them when due), and the label
                # waits for the recheck the skip asked for.
                self._hold_events(state, events)
                return
            await self._send_events(existing, events)
            if raises_ready_label(existing, intent):
                if (timeout := self._timeout(state)) is None:
                    return
                answer = await self.requests.merge_patch(
                    FABRIC_CAPABILITIES.item(state.name), {"metadata": {"labels": {READY_LABEL: "true"}}}, timeout
                )
                if state.answered(Published.from_object(answer, held=existing.status)) is None:
                    return
            self._written(state, intent)
        except KubeError as error:
            self.failed(state, intent, error)

    @staticmethod
    def _written(state: ObjectState, intent: StatusWrite) -> None:
        """All of ``intent`` is written: its object's failures and refusal are over. The empty
        state is due no more only if the object holds it now: someone's edit the watch told of
        before the write's answer was read asked for it again (review 65-races F2)."""
        state.retry.forget()
        state.forget_refusal()
        held = state.published
        if intent is state.empty and held is not None and status_current(state, held, intent.status):
            state.empty_due = False

    async def _write_status(
        self, state: ObjectState, existing: Published, intent: StatusWrite
    ) -> list[Outgoing] | None:
        """Write the intent's status; the Events it calls for, to send after it (None: not
        written, for want of a write window)."""
        # Transition times carry over from what this process wrote; after a restart or a new
        # Lease, from what is published (the only record there is).
        previous = state.written if state.written is not None else existing.status
        stamped = stamp_status(intent.status, previous, existing.generation, datetime.now(UTC).strftime(RFC3339))
        try:
            return await self._patch_status(state, existing, previous, stamped)
        except KubeError as error:
            if needs_summary(on_write_error(error), existing, intent):
                await self._publish_summary(state, intent, error)
            raise  # a failure all the same: the full status is tried again on its backoff

    async def _publish_summary(self, state: ObjectState, intent: StatusWrite, refusal: KubeError) -> None:
        """The API server refused the status (``needs_summary``): publish a summary that fails
        closed (``fail_closed_summary``: Ready False, StatusTooLarge or StatusWriteRefused), its
        ready label lowered first, so that no gate keeps reading the last status as current
        (reliability round 3, S2; review 64-observe F1)."""
        name = state.name
        existing = state.published
        assert existing is not None
        too_large = on_write_error(refusal) is WriteErrorAction.TOO_LARGE
        summary_status = too_large_status if too_large else write_refused_status
        logger.error(
            "FabricCapability %s: the API server refused its %s (%s); publishing a summary"
            " with Ready=False (%s) until the full status is accepted",
            name,
            "status as too large" if too_large else "newest status, which the published Ready no longer matches",
            refusal,
            Reason.STATUS_TOO_LARGE if too_large else Reason.STATUS_WRITE_REFUSED,
        )
        if existing.labels.get(READY_LABEL) != "false":
            if (timeout := self._timeout(state)) is None:
                return
            answer = await self.requests.merge_patch(
                FABRIC_CAPABILITIES.item(name), {"metadata": {"labels": {READY_LABEL: "false"}}}, timeout
            )
            if (existing := state.answered(Published.from_object(answer, held=existing.status))) is None:
                return
        # The evaluated status where a pool calls for the object; else (its empty state under the
        # identity it claims: ``expiry.no_pool_write``) the status refused, which is one too.
        capability = intent.capability
        refused = capability.status if capability is not None else FabricCapabilityStatus.model_validate(intent.status)
        summary = summary_status(refused, str(refusal)).to_json()
        if strip_volatile(existing.status) == strip_volatile(summary):
            return
        previous = state.written if state.written is not None else existing.status
        stamped = stamp_status(summary, previous, existing.generation, datetime.now(UTC).strftime(RFC3339))
        events = await self._patch_status(state, existing, previous, stamped)
        if events and state.published is not None:
            await self._send_events(state.published, events)  # now: the write fails after this

    async def _patch_status(
        self, state: ObjectState, existing: Published, previous: dict[str, Any], stamped: dict[str, Any]
    ) -> list[Outgoing] | None:
        """Write ``stamped`` over ``existing``'s status, and log it; the Events it calls for
        (rate-limited per object), to send after it. None: not written, for want of a write
        window (``_timeout`` asked for a recheck)."""
        name = state.name
        if (timeout := self._timeout(state)) is None:
            return None
        written = Published.from_object(
            await self.requests.merge_patch(
                FABRIC_CAPABILITIES.status(name), status_patch(existing.status, stamped), timeout
            ),
            held=stamped,
        )
        self.metrics.status_writes.labels(result="updated").inc()
        kept = state.answered(written)
        if kept is None or kept.uid != written.uid:
            return []  # deleted or replaced meanwhile: its Events would name another object
        state.written = written.status
        events: list[Outgoing] = []
        if self.events() is not None:
            now, wall = self.clock(), event_time()
            limiter = state.limiter()
            for event in condition_events(previous, stamped):
                outgoing = limiter.offer(event, now, wall)
                if outgoing is not None:
                    events.append(outgoing)
            if limiter.holding:
                self.falls_due(state, limiter.next_due(now) or 0.0)
        ready = find_condition(stamped, ConditionType.READY)
        before = find_condition(previous, ConditionType.READY)
        # At INFO only when Ready's status or reason moves: under churn every touched pool's
        # counts are written each round, 70 writes/s at 10,000 nodes, and a line per write is noise.
        # (what was there before may be anyone's edit: read, never trusted to be complete)
        shown = None if ready is None else (ready.get("status"), ready.get("reason"))
        was = None if before is None else (before.get("status"), before.get("reason"))
        logger.log(
            logging.INFO if shown != was else logging.DEBUG,
            "FabricCapability %s: Ready=%s (%s)",
            name,
            shown[0] if shown else "?",
            shown[1] if shown else "?",
        )
        return events

    def _hold_events(self, state: ObjectState, events: list[Outgoing]) -> None:
        if events:
            limiter = state.limiter()
            for outgoing in events:
                limiter.hold(outgoing)
            self.falls_due(state, limiter.next_due(self.clock()) or 0.0)

    async def _send_events(self, involved: Published, events: list[Outgoing]) -> None:
        if events and (recorder := self.events()) is not None:
            for outgoing in events:
                await recorder.record(involved, outgoing.event, outgoing.count, outgoing.first)

    async def _delete(self, state: ObjectState) -> None:
        existing = state.published
        if existing is None or state.claim is not None or state.absent_since is None:
            return  # gone meanwhile, or its pool came back
        if not existing.owned:
            logger.warning("FabricCapability %s has no target node but is not managed by fabriccap; kept", state.name)
            return
        if (timeout := self._timeout(state)) is None:
            return
        answer: Any = None
        try:
            answer = await self.requests.delete(FABRIC_CAPABILITIES.item(state.name), existing.uid, timeout)
        except KubeError as error:
            if error.status == 409:
                # The uid precondition failed: the name holds another object now, made since by
                # someone else. Not this deletion's to delete unseen: the watch tells of it, and
                # the expiry judges it as any object no pool calls for.
                logger.info("FabricCapability %s was replaced before its deletion; kept", state.name)
                return
            if error.status != 404:
                raise
        deleted = _terminating(answer, existing.uid)
        if deleted is not None:
            # A finalizer holds it: held as terminating (never deleted again: ``expiry.settle``)
            # until the watch's DELETED. Forgotten here, the watch's MODIFIED read after this
            # made it a new object of no pool, deleted once more a grace period later.
            state.answered(Published.from_object(deleted, held=existing.status))
            # Its status may not be the empty state (a renamed pool's object is deleted without
            # it; an edit may have put Ready=True back just before): the watch's events for this
            # version are echoes now, so nothing else would write it (review 66a F1, F2).
            state.empty_due = True
        elif (held := state.published) is None or (held.uid == existing.uid and not held.terminating):
            # Forgotten, unless the watch told of a successor meanwhile (another uid), or of this
            # object terminating (a finalizer): kept, until the watch tells of its end.
            state.published, state.written = None, None
        state.retry.forget()
        self.metrics.pools.remove_pool(state.name)
        self.metrics.status_writes.labels(result="deleted").inc()
        logger.info("deleted FabricCapability %s: its pool has had no target node for the grace period", state.name)

    def failed(self, state: ObjectState, intent: Intent, error: KubeError) -> None:
        """What a failed write leads to (``on_write_error`` says what it means)."""
        self.metrics.status_writes.labels(result="error").inc()
        action = on_write_error(error)
        if isinstance(intent, StatusWrite) and action is WriteErrorAction.REFUSED:
            refused = fingerprint(intent.status)
            delay = state.refused_retry.failed(REFUSED_BACKOFF, self.clock())
            if state.refused != refused:
                logger.error(
                    "%s; retrying %s in %.0fs, or at once if the status to write changes", error, state.name, delay
                )
            state.refused = refused
            self.falls_due(state, delay)
            return
        if action is WriteErrorAction.GONE:
            if isinstance(intent, Delete):
                return  # gone already: what a delete wanted
            # The object went away, or the CRD: read everything back before the next write.
            state.published = None
            self.read_back()
        delay = state.retry.failed(WRITE_BACKOFF, self.clock())
        # Every pool's write fails so while the API server is away (5,000 pools: 5,000 lines).
        held = self._failure_lines.say_failure(error)
        if held is not None:
            logger.error(
                "%s; retrying %s in %.1fs (attempt %d) (%s)",
                error,
                state.name,
                delay,
                state.retry.failures,
                self._failure_lines.aside(held, "writes"),
            )
        self.falls_due(state, delay)


def _terminating(answer: Any, uid: str) -> dict[str, Any] | None:
    """A DELETE's answer, if it is the object with ``uid`` (where known) left terminating."""
    metadata = answer.get("metadata") if isinstance(answer, dict) else None  # a Status has no deletionTimestamp
    if not isinstance(metadata, dict) or not metadata.get("deletionTimestamp"):
        return None
    return answer if not uid or metadata.get("uid") == uid else None
