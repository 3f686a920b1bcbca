"""Leader election on a ``coordination.k8s.io/v1`` Lease, client-go's algorithm and defaults.

Every replica keeps its informers and evaluations warm; only the leader writes. The rules
that make "only the leader writes" hold through pauses and partitions:

- A follower takes the Lease only after it has seen the same holder record unchanged for a
  whole lease duration (15 s) by its own monotonic clock: clocks of two machines never
  need to agree.
- The leader may write only within the renew deadline (10 s) after its last successful
  renewal, also by its own monotonic clock. A leader that cannot renew (apiserver gone,
  process paused by SIGSTOP) stops writing at least lease duration - renew deadline = 5 s
  before anyone else may take over, and every write it sends carries a timeout that ends
  at that deadline.
- A deleted Lease is created again by a follower only a lease duration after it last saw a
  holder's record, as if that record had stayed: its holder may still be in its window.
- A replica campaigns only once it has listed the cluster (``campaign_after``): a new pod in
  a rolling update took the just-released Lease and wrote nothing until its listing ended,
  while the other replica, listed, could have led. Its watch counts the holder's record
  meanwhile, so a dead holder is taken over as soon as both the listing and a lease duration
  have passed. Only the first listing counts: a leader renews through a relist.
- On a clean stop the leader releases the Lease (empty holder), so a rolling update hands
  over at once instead of after 15 s.
- A follower also watches the Lease, so it sees each renewal when it happens rather than at
  its next poll: its count of 15 s then starts within milliseconds of the leader's last
  renewal, and a takeover after a crash comes 15 s after it (not up to 17 s, as polling
  every 2 s alone gives).
- The holder record's ``leaseDurationSeconds`` is trusted up to ``MAX_TRUSTED_LEASE_SECONDS``:
  a Lease edited to 2147483647 s kept every replica following a holder that never renewed,
  for 68 years. A holder that does keep renewing (not a replica of this install) leads
  nobody's writes: every replica's ``fabriccap_leader`` and ``fabriccap_publishing`` read 0,
  and the FabricCapabilityNoLeader alert fires after 5 minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.ratelimit import BackoffPolicy, Retry
from fabriccap.core.shard import Shard
from fabriccap.core.text import clean_text
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import LEASES

logger = logging.getLogger(__name__)

LEASE_NAME = "fabriccap-leader"


def lease_name(shard: Shard) -> str:
    """One Lease per shard: ``fabriccap-leader``, or ``fabriccap-leader-1-of-4`` for shard 1 of
    4. The count is in the name so that replicas of another split (a rollout from 2 shards to 4)
    never elect each other: they answer for other pools."""
    return f"{LEASE_NAME}-{shard.index}-of-{shard.count}" if shard.sharded else LEASE_NAME


# The longest lease duration a holder record is believed for (4x this install's own 15 s).
MAX_TRUSTED_LEASE_SECONDS = 60.0
# How much of a holder identity (another replica's, or anything written to the Lease) is shown.
MAX_SHOWN_HOLDER_CHARS = 253
# The largest leaseTransitions the API server accepts (an int32).
MAX_LEASE_TRANSITIONS = 2**31 - 1
# How much of an unexpected error of the Lease watch is logged (its text may quote anything).
MAX_SHOWN_ERROR_CHARS = 300
# A clean stop's release of the Lease: what it may take in all, so a shutdown against an API
# server that does not answer stays within the pod's grace period.
RELEASE_SECONDS = 2.0
# The Lease watch, broken, falls back to polling and is opened again after this backoff.
WATCH_BACKOFF = BackoffPolicy(base=1.0, cap=30.0)
# A Lease watch that ends within this long with no event counts as broken (see _watch_lease).
SHORT_WATCH_SECONDS = 1.0
# What a Lease watch delivers as events; an ERROR (its object a Status) is a failure instead.
WATCH_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class LeaseTimings:
    """client-go's defaults (leaderelection.LeaderElectionConfig)."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def operator_namespace(explicit: str | None = None) -> str:
    """Where the Lease lives: --namespace, else the pod's service account's, else POD_NAMESPACE."""
    if explicit:
        return explicit
    with contextlib.suppress(OSError):
        namespace = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
        if namespace:
            return namespace
    return os.environ.get("POD_NAMESPACE") or "default"


def holder_identity() -> str:
    """The pod's name (or host name) plus a per-process suffix: a restarted container is a new holder."""
    base = os.environ.get("POD_NAME") or socket.gethostname() or "fabriccap"
    return f"{base}_{secrets.token_hex(4)}"


def _micro_time(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _watch_error(status: dict[str, Any]) -> KubeError:
    """An ERROR event of the Lease watch as the error its Status reports (410: the version is too old)."""
    code = status.get("code")
    message = status.get("message") or status.get("reason") or "an ERROR event"
    return KubeError(
        f"lease watch: {clean_text(message, MAX_SHOWN_ERROR_CHARS)}",
        code if type(code) is int else None,
    )


@dataclass
class LeaderElector:
    client: KubeClient
    namespace: str
    identity: str
    metrics: OperatorMetrics
    name: str = LEASE_NAME
    timings: LeaseTimings = field(default_factory=LeaseTimings)
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    # Called with True when this replica starts leading, False when it stops.
    on_change: Callable[[bool], None] = lambda leading: None
    # Set when this replica may campaign for the Lease (``Publisher.may_lead``: it has listed);
    # None: at once. Until then it only watches the Lease, and a cold replica never holds the
    # Lease while it cannot write anything yet.
    campaign_after: asyncio.Event | None = None
    # Set once the first campaign step ended, elected or not (``Publisher.election_attempted``).
    attempted: asyncio.Event = field(default_factory=asyncio.Event)
    leading: bool = False
    _renewed_at: float | None = None  # monotonic time of the last successful acquire/renew
    _observed: tuple[str, str, str] | None = None  # (holder, renewTime, resourceVersion) last seen
    _observed_at: float = 0.0  # monotonic time that record was first seen
    _lease: dict[str, Any] | None = None
    _distrusted: tuple[str, float] | None = None  # the holder and duration last said to be too long
    _wake: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.metrics.leader.set_function(self._leader_gauge)

    def write_window(self) -> float:
        """Seconds this replica may still write for; 0 when it must not write.

        Read from the /metrics render's worker thread too (fabriccap_leader,
        fabriccap_publishing): ``_renewed_at`` is read once, as a step down on the event loop
        may set it to None between two reads (a TypeError failed the whole exposition)."""
        renewed_at = self._renewed_at
        if not self.leading or renewed_at is None:
            return 0.0
        return max(self.timings.renew_deadline - (self.clock() - renewed_at), 0.0)

    def holds_window(self) -> bool:
        """Whether this replica leads now: it holds the Lease and is inside its write window.
        The one truth of fabriccap_leader, /healthz's ``leader`` and ``fabriccap_publishing``.
        ``leading`` alone stays True until the step under way ends (a renewal in flight when
        the window closes may still succeed and continue the term); this does not."""
        return self.write_window() > 0

    async def run(self) -> None:
        watcher = asyncio.create_task(self._watch_lease(), name="lease watch")
        try:
            if self.campaign_after is not None:
                # The watch counts the holder's record meanwhile, from its first read of the
                # Lease: a takeover from a dead holder comes max(listing, lease duration) after
                # the start, when it would have come anyway, and each renewal it sees starts
                # the count again.
                await self.campaign_after.wait()
            while True:
                try:
                    # Bounded as client-go bounds a renewal (leaderelection.go, renew: a
                    # context.WithTimeout(RenewDeadline) per attempt), from the step's start and
                    # not by what is left of the write window: against an API server that answers
                    # in 3 s, a GET and a PUT begun 2 s after the last renewal end 1 s past the
                    # window, and a step cut off there stepped the leader down, then took the
                    # Lease back (a read-back of everything) every 15 s. The window closes the
                    # writes meanwhile (write_window, holds_window), and a GET that hangs keeps
                    # ``leading`` up for a renew deadline at most, not the client's 60 s.
                    async with asyncio.timeout(self.timings.renew_deadline):
                        await self._step()
                except KubeError as error:
                    logger.warning("leader election: %s", error)
                except TimeoutError:
                    logger.warning("leader election: no answer within %.0fs", self.timings.renew_deadline)
                # Only once the step has ended: a renewal of this replica's own record that
                # succeeds after the window closed continues the term (nobody wrote the Lease
                # between its GET and its PUT, so nobody else led), with no read-back.
                if self.leading and self.write_window() <= 0:
                    self._set_leading(False, "could not renew the lease within the renew deadline")
                self.attempted.set()
                self._wake.clear()
                # asyncio.timeout, not wait_for: see publisher.run (kopf counts stray tasks).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._next_wait()):
                        await self._wake.wait()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher
            if self.leading:
                await self._release()

    def _observe(self, lease: dict[str, Any]) -> bool:
        """Note the Lease's holder record; True when it changed (the count starts again)."""
        spec = lease.get("spec") or {}
        # The resourceVersion too: a renewal is a write, whatever the holder's wall clock put in
        # renewTime (a clock stuck, or coarser than the renewals, repeated it).
        version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        record = (str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""), version)
        if record == self._observed:
            return False
        self._observed, self._observed_at = record, self.clock()
        return True

    def _watched(self, lease: dict[str, Any]) -> None:
        """A record the watch read: noted, and a follower wakes when it changed (the expiry to
        wake for moved)."""
        if self._observe(lease) and not self.leading:
            self._wake.set()

    async def _watch_lease(self) -> None:
        """Every change of the Lease as it happens; a broken watch only falls back to polling."""
        retry = Retry()
        selector = f"metadata.name={self.name}"
        # The Lease's resourceVersion a watch was refused from as too old (410 Gone). It is the
        # version of the Lease's last write: one nobody wrote for longer than the watch cache
        # holds (a released Lease, a dead holder's) stays too old until the next write.
        too_old: str | None = None
        while True:
            since: str | None = None
            try:
                lease = await self._get()
                if lease is not None:
                    # Counted from here: a watch from this exact resourceVersion sends no ADDED
                    # event for the Lease as it is ("Start at Exact" in
                    # https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-watch),
                    # and a dead holder never writes again, so a gated replica only started
                    # counting once it could campaign.
                    self._watched(lease)
                version = str(((lease or {}).get("metadata") or {}).get("resourceVersion") or "")
                # From a version found too old, the watch starts at the most recent one instead
                # (resourceVersion unset: "Get State and Start at Most Recent", the same page),
                # whose ADDED of the Lease as it is changes no record: watched again from the
                # same old version, every watch was refused with 410 for as long as nobody
                # wrote the Lease. client-go's reflector likewise watches from "" once its
                # version was expired (rewatchResourceVersion, k8s.io/client-go
                # tools/cache/reflector.go:1135-1144 at 32ce75a).
                since = "" if version == too_old else version
                opened, events = self.clock(), 0
                async for event in self.client.watch(
                    LEASES.collection(self.namespace), since, 60, 90, field_selector=selector
                ):
                    # A line that is not an event of an object (a broken front end) ended the
                    # watch for good with an AttributeError: it is passed over, as polling would.
                    obj = event.get("object") if isinstance(event, dict) else None
                    if not isinstance(obj, dict):
                        continue
                    event_type = event.get("type")
                    if event_type == "ERROR":
                        # The API server ends a watch it cannot serve with one ERROR event (a
                        # Status) and closes it (k8s.io/apiserver pkg/storage/cacher/cacher.go,
                        # Watch: "other errors must fail with a watch event of type ERROR");
                        # counted as an event, it reset the backoff and the watch was opened
                        # again at once, thousands of times a second. client-go's reflector
                        # returns it as an error (handleAnyWatch, reflector.go:1010-1012 at
                        # 32ce75a), which its caller backs off from.
                        raise _watch_error(obj)
                    if event_type not in WATCH_EVENT_TYPES:
                        # Not counted either (client-go counts it, reflector.go:1071-1076): a front end that
                        # sends some other line and closes is a watch closed at once.
                        continue
                    events += 1
                    if event_type in ("ADDED", "MODIFIED"):
                        self._watched(obj)
                if events == 0 and self.clock() - opened < SHORT_WATCH_SECONDS:
                    # A server shutting down, or a front end that ends streamed answers, closes
                    # the watch at once: opened again straight away, one replica sent thousands
                    # of GETs and WATCHes a second. client-go's reflector counts a watch that
                    # lasted less than a second with no event as an error (VeryShortWatchError,
                    # k8s.io/client-go tools/cache/reflector.go:1090 at 32ce75a) and backs off,
                    # jittered, from 800 ms to 30 s (reflector.go:62-67); polling covers the
                    # Lease meanwhile, and a watch that lasted or delivered events resets it.
                    delay = retry.failed(WATCH_BACKOFF, self.clock())
                    logger.debug("lease watch closed at once with no event; opened again in %.1fs", delay)
                    await asyncio.sleep(delay)
                    continue
                retry.forget()
            except KubeError as error:
                if error.status == 410 and since:
                    too_old = since
                logger.debug("lease watch interrupted: %s", error)
                await asyncio.sleep(retry.failed(WATCH_BACKOFF, self.clock()))
            except Exception as error:
                # Anything else (a bug, an answer the client did not expect) ended this task
                # silently, and followers fell back to polling for good: logged, opened again.
                delay = retry.failed(WATCH_BACKOFF, self.clock())
                logger.warning(
                    "lease watch failed: %s: %s; opened again in %.0fs",
                    type(error).__name__,
                    clean_text(error, MAX_SHOWN_ERROR_CHARS),
                    delay,
                )
                await asyncio.sleep(delay)

    def _leader_gauge(self) -> float:
        """fabriccap_leader, read when the exposition is rendered: 1 only inside the write
        window, whether or not the step under way has ended."""
        return 1.0 if self.holds_window() else 0.0

    def _next_wait(self) -> float:
        """Retry with client-go's jitter (replicas that start together do not poll in lockstep),
        but a follower wakes exactly when the record it watches would expire: takeover then
        comes a lease duration after the leader's last renewal (as the watch saw it). A leader
        does not wake at its window's close: the writes and fabriccap_leader stop then
        (holds_window), and a renewal that succeeds at its next try continues its term."""
        wait = self.timings.retry_period * random.uniform(1.0, 1.2)
        if not self.leading and self._observed is not None and self._observed[0]:
            expires_in = self._observed_at + self.timings.lease_duration - self.clock()
            if 0 < expires_in < wait:
                wait = expires_in + 0.01
        return wait

    async def _step(self) -> None:
        if not await self._read_and_act() and self.leading:
            # A renewal refused with 409 (someone wrote the Lease since it was read), or a
            # re-create of a deleted Lease refused with 409 (another replica created it first).
            # Read it again at once: another holder means stepping down now, not at the next
            # poll (2 s of writes under a Lease another replica holds), as client-go stops
            # leading when its Create fails (tools/leaderelection/leaderelection.go:470-484 at
            # 32ce75a); still ours, it is renewed.
            await self._read_and_act()

    async def _read_and_act(self) -> bool:
        """Read the Lease, then follow, acquire or renew it; False when a write of it met a 409."""
        lease = await self._get()
        if lease is None:
            if self._deleted_record_may_still_write():
                return True
            return await self._create()
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        self._observe(lease)
        if holder == self.identity:
            return await self._update(lease, acquiring=not self.leading)
        if self.leading:
            # Someone else holds it: this replica lost it, however old their record is. Taking
            # it back below without stepping down first would skip the read-back a new term
            # needs (another replica led and wrote meanwhile).
            shown = clean_text(holder, MAX_SHOWN_HOLDER_CHARS) if holder else "nobody"
            self._set_leading(False, f"the lease is held by {shown}")
        duration = self._trusted_duration(holder, spec.get("leaseDurationSeconds"))
        if holder and self.clock() - self._observed_at < duration:
            return True
        return await self._update(lease, acquiring=True)

    def _deleted_record_may_still_write(self) -> bool:
        """The Lease is gone: True while its last holder seen (another replica) may still lead.

        client-go's tryAcquireOrRenew creates a missing Lease and leads at once
        (k8s.io/client-go tools/leaderelection/leaderelection.go:470-484, commit 32ce75a):
        after ``kubectl delete lease`` its holder keeps its renew deadline, so two replicas
        wrote until the old one's next poll. Here a deleted record counts as that record
        unchanged: it is created a lease duration after it was last seen (by this replica's
        own clock), as a takeover would be. A replica that never saw a record (the first
        start), or last saw its own or an empty holder (a release), creates it at once."""
        if self._observed is None or self._observed[0] in ("", self.identity):
            return False
        return self.clock() - self._observed_at < self.timings.lease_duration

    def _trusted_duration(self, holder: str, stated: Any) -> float:
        """How long a holder record counts for: what it says, at most ``MAX_TRUSTED_LEASE_SECONDS``."""
        try:
            duration = float(stated) if stated else self.timings.lease_duration
        except (TypeError, ValueError):
            duration = self.timings.lease_duration
        if duration > MAX_TRUSTED_LEASE_SECONDS:
            if self._distrusted != (holder, duration):
                self._distrusted = (holder, duration)
                logger.warning(
                    "the lease %s/%s held by %s says leaseDurationSeconds %.0f; trusted for %.0f s only",
                    self.namespace,
                    self.name,
                    clean_text(holder, MAX_SHOWN_HOLDER_CHARS),
                    duration,
                    MAX_TRUSTED_LEASE_SECONDS,
                )
            return MAX_TRUSTED_LEASE_SECONDS
        return duration

    async def _get(self) -> dict[str, Any] | None:
        try:
            lease: dict[str, Any] = await self.client.get(LEASES.item(self.name, self.namespace))
        except KubeError as error:
            if error.status == 404:
                return None
            raise
        return lease

    def _spec(self, transitions: int, acquire_time: str | None = None) -> dict[str, Any]:
        now = _micro_time(self.wall())
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.timings.lease_duration),
            "acquireTime": acquire_time or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    async def _create(self) -> bool:
        """Create the Lease with this replica's record; False when another replica created it
        first (409)."""
        started = self.clock()
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": self._spec(transitions=0),
        }
        try:
            await self.client.create(LEASES.collection(self.namespace), body)
        except KubeError as error:
            if error.status == 409:
                return False
            raise
        self._renewed(started)
        return True

    async def _update(self, lease: dict[str, Any], acquiring: bool) -> bool:
        """PUT this replica's record over ``lease``; False when the Lease changed since (409)."""
        started = self.clock()
        spec = lease.get("spec") or {}
        transitions = int(spec.get("leaseTransitions") or 0)
        if spec.get("holderIdentity") != self.identity:
            # A transition is a change of holder, as client-go counts (leaderelection.go:499-505
            # at 32ce75a): this replica taking back its own record after its window lapsed is
            # none. The field is an int32 (k8s.io/api coordination/v1 LeaseSpec): counted past
            # it, every acquire was refused with 422, so the count stops there.
            transitions = min(transitions + 1, MAX_LEASE_TRANSITIONS)
        acquire_time = None if acquiring else spec.get("acquireTime")
        # PUT with the resourceVersion read: a concurrent writer makes this a 409, not a race.
        body = {**lease, "spec": self._spec(transitions, acquire_time)}
        try:
            await self.client.request(
                "PUT", LEASES.item(self.name, self.namespace), body=body, timeout=self.timings.renew_deadline
            )
        except KubeError as error:
            if error.status == 409:
                return False
            raise
        self._renewed(started)
        return True

    def _renewed(self, started: float) -> None:
        # Measured from when the request was sent: the lease may have been granted any time after.
        self._renewed_at = started
        if not self.leading:
            self._set_leading(True, "acquired the lease")

    def _set_leading(self, leading: bool, why: str) -> None:
        self.leading = leading
        if leading:
            logger.info("leading as %s (%s/%s): %s", self.identity, self.namespace, self.name, why)
        else:
            self._renewed_at = None
            logger.warning("stopped leading as %s: %s; writes stop", self.identity, why)
        self.on_change(leading)

    async def _release(self) -> None:
        """Hand the Lease over at once on a clean stop (client-go's ReleaseOnCancel)."""
        self.leading = False
        with contextlib.suppress(KubeError, OSError, asyncio.CancelledError, TimeoutError):
            async with asyncio.timeout(RELEASE_SECONDS):
                lease = await self._get()
                if lease is not None and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                    spec = {**(lease.get("spec") or {}), "holderIdentity": "", "leaseDurationSeconds": 1}
                    await self.client.request(
                        "PUT", LEASES.item(self.name, self.namespace), body={**lease, "spec": spec}
                    )
                    logger.info("released the lease %s/%s", self.namespace, self.name)


class AlwaysLeader:
    """--standalone: a single replica that writes without electing a leader."""

    leading = True

    def write_window(self) -> float:
        return float("inf")

    def holds_window(self) -> bool:
        return True
