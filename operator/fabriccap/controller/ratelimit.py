"""Every retry and every repeat the operator makes is paced by one of two rules, each written once.

- A per-key exponential backoff, controller-runtime's ``ItemExponentialFailureRateLimiter``
  (client-go workqueue): the n-th failure in a row of one key waits ``base * 2**(n-1)``, capped,
  and a success forgets the key, so one object's trouble never slows another's. A jitter spreads
  the retries of keys that failed together (a 429 storm), so they do not come back together.
  Status writes, creates and deletes, owner lookups and Event sends all retry on it.
- A token bucket, client-go's ``BucketRateLimiter`` (and the shape of its EventCorrelator's
  spam filter): a burst, then one per interval. Condition Events per (object, reason), status
  writes per object, workload Warnings, the log reads and the operator's own lines about
  failures that come many at once (``PacedLines``) use it; it is ``core.ratelimit``'s, since the
  kube layer's log reads are paced by it too.

Both read a monotonic clock that is passed in, so the tests move time instead of waiting.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from fabriccap.core.ratelimit import TokenBucket
from fabriccap.kube.errors import KubeError

Key = TypeVar("Key", bound=Hashable)

Jitter = Callable[[float, float], float]


@dataclass(frozen=True)
class BackoffPolicy:
    """How long the n-th failure in a row waits: ``base * 2**(n-1)``, at most ``cap``, each
    delay scaled by a factor drawn from ``[1 - jitter, 1 + jitter]``."""

    base: float
    cap: float
    jitter: float = 0.5

    def delay(self, failures: int, draw: Jitter = random.uniform) -> float:
        exponent = min(max(failures - 1, 0), 62)  # 2**62 * any base is past every cap
        return min(self.base * 2.0**exponent, self.cap) * draw(1.0 - self.jitter, 1.0 + self.jitter)


@dataclass(slots=True)
class Retry:
    """One key's failures in a row, and the monotonic time it may be tried again."""

    failures: int = 0
    due: float = 0.0

    def failed(self, policy: BackoffPolicy, now: float, draw: Jitter = random.uniform) -> float:
        """Count a failure; the delay until the next try."""
        self.failures += 1
        delay = policy.delay(self.failures, draw)
        self.due = now + delay
        return delay

    def waiting(self, now: float) -> bool:
        return self.failures > 0 and now < self.due

    def forget(self) -> None:
        self.failures, self.due = 0, 0.0


@dataclass
class Backoff(Generic[Key]):
    """Per-key backoff for callers that keep no record of their own per key (lookups, Event
    sends): the keys that failed, until they succeed or are forgotten."""

    policy: BackoffPolicy
    clock: Callable[[], float] = time.monotonic
    draw: Jitter = random.uniform
    _retries: dict[Key, Retry] = field(default_factory=dict)

    def failed(self, key: Key) -> float:
        """Count a failure of ``key``; the delay until its next try."""
        return self._retries.setdefault(key, Retry()).failed(self.policy, self.clock(), self.draw)

    def forget(self, key: Key) -> None:
        """A success, or a key that is gone: it starts from ``base`` again next time."""
        self._retries.pop(key, None)

    def waiting(self, key: Key) -> bool:
        retry = self._retries.get(key)
        return retry is not None and retry.waiting(self.clock())

    def failures(self, key: Key) -> int:
        retry = self._retries.get(key)
        return 0 if retry is None else retry.failures

    def due(self) -> list[Key]:
        """The keys whose wait is over."""
        now = self.clock()
        return [key for key, retry in self._retries.items() if retry.due <= now]

    def next_due(self) -> float | None:
        """Seconds until the earliest wait ends (0 when one already has), None when none waits."""
        if not self._retries:
            return None
        return max(min(retry.due for retry in self._retries.values()) - self.clock(), 0.0)

    def __contains__(self, key: object) -> bool:
        return key in self._retries

    def __iter__(self) -> Iterator[Key]:
        return iter(self._retries)

    def __len__(self) -> int:
        return len(self._retries)


# A line about a failure shared by many objects: one at once, then one a minute per cause.
PACED_LINE_SECONDS = 60.0
# Causes remembered at once (the oldest go first): an error's text is not the caller's to bound.
MAX_PACED_CAUSES = 64


@dataclass
class PacedLines:
    """Lines that share a cause, said once per ``seconds`` each: an API server that is away
    fails every read in flight the same way, and a line per object flooded the log (548 owner
    reads in 0.13 s, on the real API server at 10,000 nodes, when it was restarted). ``say``
    tells whether this one goes out, and how many of its cause were held back since the last."""

    seconds: float = PACED_LINE_SECONDS
    clock: Callable[[], float] = time.monotonic
    _causes: dict[str, tuple[TokenBucket, int]] = field(default_factory=dict)

    def say(self, cause: str) -> int | None:
        """None: hold this line back (it is counted); else the number held back before it."""
        now = self.clock()
        known = self._causes.pop(cause, None)  # put back last: the oldest cause is first
        bucket, held = known if known is not None else (TokenBucket(rate=1.0 / self.seconds, burst=1), 0)
        if len(self._causes) >= MAX_PACED_CAUSES:
            del self._causes[next(iter(self._causes))]
        if bucket.allows(now):
            self._causes[cause] = (bucket, 0)
            return held
        self._causes[cause] = (bucket, held + 1)
        return None

    def say_failure(self, error: KubeError) -> int | None:
        """``say`` for a request that failed: its cause is its HTTP status, or, for no answer
        at all, the error itself, which then names no object."""
        return self.say(str(error.status or error))

    def aside(self, held: int, what: str) -> str:
        """What a line said after ``held`` were held back adds about them (``what``: "reads")."""
        if held:
            return f"and {held} more {what} failed so since the last such line"
        return f"more {what} that fail so are counted, and said at most every {self.seconds:.0f}s"
