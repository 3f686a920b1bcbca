"""What the publisher knows of each FabricCapability: one record per object name.

Everything about one name lives in its ``ObjectState``: what the cluster holds, which pool
calls for it, the write waiting or in flight, its failures and backoff, what this process last
wrote, a name conflict, a foreign writer, since when no pool calls for it, its Events' rate
limits. Forgetting a name is one ``pop``: nothing about it can be left behind in a map nobody
cleans (three such leaks were found when the publisher kept thirteen maps by name).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fabriccap.controller.events import EventLimiter
from fabriccap.controller.ratelimit import Retry
from fabriccap.core.api import (
    FABRIC_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    POOL_KEY_ANNOTATION,
    POOL_VALUE_ANNOTATION,
    is_ready_status,
)
from fabriccap.core.evaluate import PoolCapability
from fabriccap.core.facts import Pool
from fabriccap.core.ratelimit import TokenBucket
from fabriccap.core.sharing import shared_json
from fabriccap.core.workloads import ReadyPool
from fabriccap.kube.versions import version_number

# Status writes per object: a burst, then one a second. A pool flapping between two states
# (a node label flapping every 0.5 s made 6 writes a second) is written once a second, with
# the worst of what it showed meanwhile (``Publisher`` holds a not-Ready back for the next write).
OBJECT_WRITE_BURST = 10
OBJECT_WRITES_PER_SECOND = 1.0
# A pool whose counts keep moving (a job starting its pods) spends its budget on routine
# writes. Those leave this many tokens to the writes that move a condition or name an offender:
# a node losing its fabric in a busy pool is written at once, not after the next token (~1 s).
OBJECT_WRITES_KEPT_FROM_ROUTINE = 3

# A write war: another writer puts its own status back each time this one writes (a second
# install, a --standalone replica with another config). One overwrite is an edit, put back;
# this many within the window are a war. After a yield, one more overwrite is enough.
WAR_OVERWRITES = 3
WAR_WINDOW_SECONDS = 300.0
# A yielded object is written again once the other writer has been quiet this long.
WAR_QUIET_SECONDS = 600.0


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
    # The field managers whose write of a status field is the newest the object records
    # (managedFields; several when they wrote in the same second). Empty: the server keeps none.
    status_writers: frozenset[str] = frozenset()
    # Its deletion has been asked for and a finalizer holds it (metadata.deletionTimestamp): it
    # goes once the finalizer's controller lets it go, and a DELETE now changes nothing.
    terminating: bool = False

    def is_newer_than(self, other: Published) -> bool:
        # resourceVersions are opaque, but etcd-backed servers use increasing integers; a
        # watch event older than our own write must not be mistaken for someone's edit.
        later = self.is_known_later_than(other)
        return later if later is not None else self.resource_version != other.resource_version

    def is_known_later_than(self, other: Published) -> bool | None:
        """Whether this version comes after ``other``'s, of whichever object of the name (one
        etcd revision numbers every object); None where a version is not a number (opaque)."""
        mine, theirs = version_number(self.resource_version), version_number(other.resource_version)
        return None if mine is None or theirs is None else mine > theirs

    @property
    def owned(self) -> bool:
        return self.labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE

    @property
    def behind(self) -> bool:
        """Whether its status was written for another generation than its own (a spec edit
        since): every gate reads the object as InProgress until one of this generation is. A
        status not written yet (``core.api.status_written``: a create's, its write under way) is
        not behind."""
        return bool(self.status.get("conditions")) and self.status.get("observedGeneration") != self.generation

    def claimed_by(self) -> tuple[str | None, Pool | None]:
        """The (fabric, pool) this object says it is for, where it says so."""
        key, value = self.annotations.get(POOL_KEY_ANNOTATION), self.annotations.get(POOL_VALUE_ANNOTATION)
        pool = Pool(key, value) if key is not None and value is not None else None
        return self.labels.get(FABRIC_LABEL), pool

    @classmethod
    def from_object(cls, obj: dict[str, Any], held: dict[str, Any] | None = None) -> Published:
        """``obj`` as read or as a write's answer. ``held``: the status this replica holds for
        it already (what a status write sent; what was held before a write of metadata)."""
        metadata = obj.get("metadata") or {}
        try:
            generation = int(metadata.get("generation") or 1)
        except (TypeError, ValueError):
            generation = 1
        status = obj.get("status")
        return cls(
            name=str(metadata.get("name")),
            generation=generation,
            status=_kept_status(status, held),
            labels={str(k): str(v) for k, v in (metadata.get("labels") or {}).items()},
            annotations={str(k): str(v) for k, v in (metadata.get("annotations") or {}).items()},
            resource_version=str(metadata.get("resourceVersion") or ""),
            uid=str(metadata.get("uid") or ""),
            status_writers=_newest_status_writers(metadata.get("managedFields")),
            terminating=bool(metadata.get("deletionTimestamp")),
        )


def _kept_status(status: Any, held: dict[str, Any] | None) -> dict[str, Any]:
    """The status to keep (one per pool, until the next write): ``held`` when the object says
    the same, for most parts of a status this replica wrote are the evaluation memo's
    (PoolCapability), so a pool's status is held once, not twice; else the object's, its keys
    and reasons shared (core.sharing)."""
    if held is not None and status == held:
        return held
    return shared_json(status) if isinstance(status, dict) else {}


def _newest_status_writers(managed_fields: Any) -> frozenset[str]:
    """The managers of the newest managedFields entries that own a status field."""
    entries = [
        entry
        for entry in (managed_fields if isinstance(managed_fields, list) else [])
        if isinstance(entry, dict) and isinstance(entry.get("fieldsV1"), dict) and "f:status" in entry["fieldsV1"]
    ]
    if not entries:
        return frozenset()
    newest = max(str(entry.get("time") or "") for entry in entries)  # RFC 3339 in UTC: sorts as text
    return frozenset(str(entry.get("manager") or "") for entry in entries if str(entry.get("time") or "") == newest)


@dataclass(frozen=True)
class StatusWrite:
    """Make the object hold ``status``: created first (``create``) where a pool calls for it,
    labelled as ``capability`` says (None: no pool calls for it; only the ready label is lowered)."""

    capability: PoolCapability | None
    status: dict[str, Any]
    create: bool = True

    @property
    def ready(self) -> bool:
        return self.capability is not None and is_ready_status(self.status)


@dataclass(frozen=True)
class Delete:
    """Delete the object: its pool has had no target node for the grace period."""


Intent = StatusWrite | Delete


class Lane(StrEnum):
    """Where a write waits for its turn (``writes.WriteLanes``)."""

    # What gates and alerts read: a condition's status or reason, a new object. Never behind
    # the workload reports, which pod churn makes by the hundred a second.
    CONDITIONS = "conditions"
    URGENT = "urgent"  # what else a user acts on: a workload problem appearing or clearing, the nodes
    ROUTINE = "routine"  # only the workload reports' counts and names moved (writes.is_routine_change)
    EXPIRY = "expiry"  # a deletion after the grace period: never in the way of the others


def budget_kept(lane: Lane) -> int:
    """The tokens of its object's write budget a write in ``lane`` must leave for others."""
    return OBJECT_WRITES_KEPT_FROM_ROUTINE if lane is Lane.ROUTINE else 0


@dataclass
class WriteSlot:
    """The one write of an object waiting for its lane or being sent."""

    task: asyncio.Task[None]
    lane: Lane
    intent: Intent | None  # what it sends when its lane frees; None once taken
    queued_at: float  # the event loop's clock when it joined its lane
    sending: bool = False
    again: bool = False  # evaluated again while being sent (or held back): evaluate again after it


@dataclass
class ForeignWriter:
    """Another writer of this object's status, and whether this replica still writes it."""

    writer: str = ""
    overwrites: deque[float] = field(default_factory=deque)  # monotonic times
    last_seen: float = 0.0
    at_war: bool = False  # reported (log, Event, metric)
    yielded: bool = False  # this replica stopped writing the object
    yielded_before: bool = False

    def overwritten(self, writer: str, now: float) -> bool:
        """Count one overwrite of our status by ``writer``; True when it makes a war."""
        self.writer, self.last_seen = writer, now
        self.overwrites.append(now)
        while self.overwrites and now - self.overwrites[0] > WAR_WINDOW_SECONDS:
            self.overwrites.popleft()
        return len(self.overwrites) >= (1 if self.yielded_before else WAR_OVERWRITES)

    def quiet(self, now: float) -> bool:
        return now - self.last_seen >= WAR_QUIET_SECONDS

    def end(self) -> None:
        """The other writer has been quiet: write again (one overwrite will stop it again)."""
        self.yielded_before = self.yielded_before or self.yielded
        self.at_war = self.yielded = False
        self.overwrites.clear()


@dataclass(slots=True)
class ObjectState:
    """Everything the publisher knows about one FabricCapability name."""

    name: str
    published: Published | None = None  # what the cluster holds, as last read or written
    # The uid of the object the watch last saw deleted: a write's answer for it, handled after
    # the DELETED event (two connections, in either order), is of an object that is gone.
    deleted_uid: str | None = None
    claim: tuple[str, Pool] | None = None  # the (fabric, pool) the facts call for now
    # The claim as a Ready pool, for the FabricUnschedulable messages; None while its last
    # status is not Ready. Not the status itself: holding each pool's last status (with its
    # workloads) for four fields cost 13 MiB of RSS at 5,000 pools (docs/performance.md).
    ready: ReadyPool | None = None
    absent_since: float | None = None  # monotonic; since when no pool calls for it
    # What it shows while no pool calls for it (the empty state), and whether that is still to write.
    empty: StatusWrite | None = None
    empty_due: bool = False
    # Its grace period ended while it is not labelled as managed by fabriccap: kept, and logged once.
    kept_unmanaged: bool = False
    # The status this process last wrote as leader (or took as its own): an object whose
    # transition times differ was edited by someone else and is put back. None: what is
    # published is the record (at start, and after acquiring the Lease).
    written: dict[str, Any] | None = None
    retry: Retry = field(default_factory=Retry)  # failed writes in a row, and when to try again
    # Fingerprint of the newest status refused as invalid (400, 422), and when it is sent again:
    # a refusal is often an admission policy or webhook, not the status's fault, and the same
    # bytes are accepted once it relents (review 64-observe F1), so it is retried, slowly.
    refused: str | None = None
    refused_retry: Retry = field(default_factory=Retry)
    conflict: str | None = None  # why it is not written: another pool claims the name
    foreign: ForeignWriter | None = None
    # The newest not-Ready status evaluated since the last write: a Ready one does not replace
    # it before it was written (a flapping pool must not read steadily Ready).
    unready_seen: dict[str, Any] | None = None
    recheck_at: float | None = None  # monotonic; evaluate the pool again then (after a held not-Ready)
    budget: TokenBucket = field(default_factory=lambda: TokenBucket(OBJECT_WRITES_PER_SECOND, OBJECT_WRITE_BURST))
    # A write held back by the budget: the tokens it had to leave (``budget_kept``); the pool is
    # evaluated again when one more is there. None: nothing held back.
    deferred: int | None = None
    events: EventLimiter | None = None
    slot: WriteSlot | None = None

    def answered(self, answer: Published) -> Published | None:
        """A write's answer (or a read's) as what the cluster holds, unless the watch has
        seen that object deleted since: then nothing is held, and the next round creates it
        again. Taken as it came, the answer of a label PATCH that landed just before someone
        deleted the object, read after the watch's DELETED event, kept the deleted object as
        published and nothing recreated it until the relist, half an hour later (CI at fed11f1,
        test_a_capability_deleted_by_someone_else_is_put_back)."""
        held = self.published
        if held is not None and held.is_known_later_than(answer):
            # The watch told of a later version (someone's edit, or another object made under
            # the name since) before this answer was read: taken as it came, the answer hid the
            # edit until the resync, or dropped the successor (review 65-races F3).
            return held
        if answer.uid and answer.uid == self.deleted_uid:
            self.published, self.written = None, None
            return None
        self.published = answer
        return answer

    @property
    def at_war(self) -> bool:
        return self.foreign is not None and self.foreign.at_war

    @property
    def yielded(self) -> bool:
        return self.foreign is not None and self.foreign.yielded

    def may_fall_due(self) -> bool:
        """Whether time alone may bring something of it due: no pool calls for it (its grace
        period), a failed write's retry, a write its budget held back, a re-evaluation, held
        Events, or another writer it yielded to. The publisher walks only these objects."""
        return (
            self.claim is None
            or bool(self.retry.failures)
            or self.refused is not None
            or self.deferred is not None
            or self.recheck_at is not None
            or (self.events is not None and self.events.holding)
            or self.yielded
        )

    def refusal_waits(self, fingerprint: str, now: float) -> bool:
        """Whether the status of ``fingerprint`` was refused as invalid and its retry is not due yet."""
        return self.refused == fingerprint and self.refused_retry.waiting(now)

    def forget_refusal(self) -> None:
        """What is to be written was written, or needs no write: no refusal holds it back."""
        self.refused = None
        self.refused_retry.forget()

    def limiter(self) -> EventLimiter:
        if self.events is None:
            self.events = EventLimiter()
        return self.events

    def forgettable(self) -> bool:
        """Nothing calls for it, nothing of it is published, nothing is being written."""
        return self.claim is None and self.conflict is None and self.published is None and self.slot is None
