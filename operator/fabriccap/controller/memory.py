"""Giving memory the allocator holds free back to the system, after a burst of work.

Reading thousands of pods' logs (``logreader``) leaves the process's resident memory well
above what it keeps: each read decodes and scans chunks, and the allocators keep the freed
space for reuse. Measured at 2,000 reads (benchmarks/transport_bench.py --tracemalloc): Python's
live objects grew 3.3 MiB and the RSS about 48 MiB, of which glibc's ``malloc_trim(0)`` gave
31 MiB back (docs/performance.md, "Transport"). Nothing in use is freed, so the only cost is
the call itself (a walk of the heap, milliseconds), which is why it runs only after many units
of work, when no more are under way.

glibc only: elsewhere (musl, macOS) there is no ``malloc_trim`` and this does nothing.
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# A trim is worth its walk of the heap only after this many units of work (log reads).
MIN_WORK_BETWEEN_TRIMS = 64
# Objects listed (streamed or in pages, decoded or not) before a trim, as the listing goes: each
# was a body of 4-17 KB that is garbage once its facts are kept. Measured at 20,000 nodes /
# 200,000 pods: a trim after the start gave back 100-145 MiB of RSS (docs/performance.md,
# "Memory per object"); a relist, which keeps nothing new, grew by all it read until its end.
MIN_LISTED_BETWEEN_TRIMS = 10_000
# A watch under churn never falls idle, and its lines leave the allocators holding free memory
# as a listing does (at 2,000 nodes, 120 s of churn: +56 MiB of RSS and -1.6 MiB of live
# objects, nearly all of it given back by a trim; docs/performance.md, "What the churn
# leaves"). So the informers' watches trim once this many lines came since the last trim, and
# that was at least MIN_SECONDS_BETWEEN_TRIMS ago: under churn, every 10 s. At 10,000 nodes and
# 100,000 pods under churn that took only 3-5 MiB off a peak of 180 MiB ("Trims under churn");
# each trim took 0.2-0.6 ms there, so they cost nothing measurable.
MIN_LINES_BETWEEN_TRIMS = 1_000
MIN_SECONDS_BETWEEN_TRIMS = 10.0


def _malloc_trim() -> Callable[[int], object] | None:
    # The process's own symbols, libc's among them: no search for the library (find_library
    # runs ldconfig).
    try:
        trim: Callable[[int], object] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return trim


def give_back_free_memory() -> bool:
    """Trim now, whatever work was done (after the first listing, once its garbage is
    collected); False where there is no ``malloc_trim``."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@dataclass
class MemoryTrimmer:
    """``done()`` after each unit of work, ``idle()`` when none is left under way (or, for work
    that never stops, such as a watch, after each unit): the free memory goes back once enough
    work has been done, and enough time has passed, since the last time."""

    trim: Callable[[int], object] | None = field(default_factory=_malloc_trim)
    min_work: int = MIN_WORK_BETWEEN_TRIMS
    min_seconds: float = 0.0
    clock: Callable[[], float] = time.monotonic
    work: int = 0
    trims: int = 0
    _last_trim: float = field(default=-math.inf, init=False)

    def done(self, units: int = 1) -> None:
        self.work += units

    def idle(self) -> bool:
        """Trim if enough work was done since the last trim; True when it ran."""
        if self.trim is None or self.work < self.min_work:
            return False
        now = self.clock()
        if now - self._last_trim < self.min_seconds:
            return False
        self._last_trim = now
        self.work = 0
        self.trim(0)
        self.trims += 1
        return True
