"""How current the operator's view of the cluster is, kind by kind: earned, never assumed.

A kind's view is as recent as its last *progress*: a completed LIST, or a watch event or
bookmark that advanced the kind's resourceVersion (``informers.ListWatch``). Opening a watch
is not progress, and neither are bytes that decode to nothing usable: a proxy that accepts
every watch and then stays silent, or cuts every stream mid-event, leaves the view as old as
the last progress, and it goes stale after ``staleAfterSeconds``. A healthy quiet watch proves
itself with the bookmarks it asks for (the API server sends one before each watch request's
deadline, and about every minute, once its own resourceVersion has moved; a quiet one is
nudged so that it moves, ``informers.NUDGE_SELECTOR``), and one that does not is listed again
long before it would go stale (``informers.progress_timeout``).

``/healthz`` (``main.health_report``), ``fabriccap_watch_last_event_timestamp_seconds``,
``fabriccap_watch_connected`` and ``fabriccap_pool_ready`` all read this, and so does the
publisher, through ``FactStore.stale_kinds()``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from fabriccap.controller.metrics import OperatorMetrics


class Progress(Protocol):
    """What one informer (one kind, one scope) tells about its progress."""

    @property
    def kind(self) -> str: ...  # the kind's label: node, pod, daemonset, resourceslice

    # Monotonic time of the last progress; None: never listed.
    last_progress: float | None
    # Whether its watch is up right now.
    connected: bool
    # An optional kind the API server does not serve: nothing to be current about.
    absent: bool


@dataclass
class Freshness:
    """Every informer's progress, by kind: a kind is as old as its oldest scope."""

    informers: Sequence[Progress]
    stale_after: float
    metrics: OperatorMetrics
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time

    def ages(self) -> dict[str, float | None]:
        """Seconds since each kind's last progress (its oldest informer's); None: never listed."""
        now = self.clock()
        by_kind: dict[str, list[float | None]] = {}
        for informer in self.informers:
            if informer.absent:
                continue
            age = None if informer.last_progress is None else now - informer.last_progress
            by_kind.setdefault(informer.kind, []).append(age)
        return {
            kind: None if any(age is None for age in ages) else max(age for age in ages if age is not None)
            for kind, ages in by_kind.items()
        }

    def stale_kinds(self) -> dict[str, float | None]:
        """The kinds whose view is older than ``stale_after`` (or was never listed), with their age."""
        return {kind: age for kind, age in self.ages().items() if age is None or age > self.stale_after}

    def fresh(self, kind: str | None = None) -> bool:
        """Whether every kind's view (or ``kind``'s) is current."""
        stale = self.stale_kinds()
        return not stale if kind is None else kind not in stale

    def export(self) -> None:
        """Refresh the per-kind freshness gauges (called at scrape time and every round)."""
        now, wall = self.clock(), self.wall()
        for kind in {informer.kind for informer in self.informers}:
            own = [informer for informer in self.informers if informer.kind == kind and not informer.absent]
            if not own:
                # Not served: no series, rather than one whose age would fire the Stale alert.
                for gauge in (self.metrics.watch_last_event, self.metrics.watch_connected):
                    with contextlib.suppress(KeyError):
                        gauge.remove(kind)
                continue
            seen = [informer.last_progress for informer in own]
            if all(moment is not None for moment in seen):
                oldest = min(moment for moment in seen if moment is not None)
                self.metrics.watch_last_event.labels(kind=kind).set(wall - (now - oldest))
            self.metrics.watch_connected.labels(kind=kind).set(1 if all(i.connected for i in own) else 0)

    def describe_staleness(self) -> str:
        stale = self.stale_kinds()
        parts = []
        for kind, age in sorted(stale.items()):
            connected = all(i.connected for i in self.informers if i.kind == kind)
            state = "connected" if connected else "disconnected"
            parts.append(f"{kind}s never listed" if age is None else f"{kind}s current as of {age:.0f}s ago ({state})")
        return ", ".join(parts)
