"""When a write may go, by the leader's write window (``LeaderElector.write_window``): the
one rule for the statuses, the labels and the Events, which are all writes."""

from __future__ import annotations

# A write goes only with more than this left of the window, and its request's timeout ends where
# the window does (at most WRITE_TIMEOUT_SECONDS): a write never lands after another replica may
# lead (leader.py).
MIN_WRITE_WINDOW_SECONDS = 0.5
WRITE_TIMEOUT_SECONDS = 60.0


def write_timeout(window: float) -> float | None:
    """The timeout of a write sent with ``window`` seconds left to write in; None: do not send it."""
    return None if window <= MIN_WRITE_WINDOW_SECONDS else min(window, WRITE_TIMEOUT_SECONDS)
