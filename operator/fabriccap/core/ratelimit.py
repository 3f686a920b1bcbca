"""The token bucket every paced repeat of fabriccap uses: client-go's ``BucketRateLimiter``.

``burst`` at once, then ``rate`` per second. Status writes per object, condition Events per
(object, reason), workload Warnings and the transport's log reads are paced by it. It reads
no clock: the time is passed in, so the core stays pure and tests move time instead of waiting
(``kube.logs.take_token`` waits on it with a real clock).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class TokenBucket:
    """``burst`` tokens at once, then ``rate`` per second. Starts full."""

    rate: float
    burst: float
    _tokens: float | None = None
    _refilled: float = 0.0

    def _refill(self, now: float) -> float:
        if self._tokens is None:
            self._tokens, self._refilled = float(self.burst), now
        self._tokens = min(float(self.burst), self._tokens + max(now - self._refilled, 0.0) * self.rate)
        self._refilled = now
        return self._tokens

    def take(self, now: float, wanted: int = 1) -> int:
        """Take up to ``wanted`` tokens; how many were granted."""
        granted = min(wanted, int(self._refill(now)))
        self._tokens = self._refill(now) - granted
        return granted

    def allows(self, now: float, keep: int = 0) -> bool:
        """Take one token if there is one besides the ``keep`` left for others."""
        if self._refill(now) < 1 + keep:
            return False
        return self.take(now) == 1

    def next_token(self, now: float, keep: int = 0) -> float:
        """Seconds until one token is there besides ``keep`` (0: now)."""
        missing = 1.0 + keep - self._refill(now)
        return 0.0 if missing <= 0 else missing / self.rate
