"""Objects no pool calls for: their empty state at once, their deletion after the grace period.

A pool that loses its last target node (a node group deleted, scaled to zero for the night)
shows that at once: Ready False ``NoTargetNodes``, every count 0 (``core.evaluate.empty_status``).
It kept its last status, Ready=True, for the whole grace period before, and ``kubectl wait``
passed on it. An object no pool calls for at all (made by hand with a forged Ready=True, or
left over from a pool that went while the operator was down) is overwritten the same way, its
message saying that there is no such pool. Either is deleted once the grace period
(``poolGracePeriodSeconds``) has passed, if it is labelled as managed by fabriccap; an object
that is not is never written or deleted. An object whose deletion a finalizer holds up
(terminating) is deleted once: the watch's DELETED ends it, when the finalizer goes.

Deletions go through the write lanes (``writes``), a few at a time: 5,000 pools that lost
their nodes at once were deleted inline, one after another, and another pool's change waited
99 s behind them.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

from fabriccap.controller.objects import ObjectState, Published, StatusWrite
from fabriccap.core.api import PoolRef
from fabriccap.core.config import FabricProfile
from fabriccap.core.evaluate import NO_SUCH_POOL_MESSAGE, NO_SUCH_POOL_TERMINATING_MESSAGE, empty_status


class Settle(Enum):
    """What to do with an object no pool calls for, this round."""

    KEEP = "keep"  # nothing now: called for, in conflict, being written, not ours, or settled
    FORGET = "forget"  # nothing of it is published any more: drop the record
    EMPTY = "empty"  # write its empty state
    DELETE = "delete"  # its grace period is over
    UNMANAGED = "unmanaged"  # its grace period is over, but it is not labelled as ours: kept, and said once


def settle(state: ObjectState, now: float, grace: float) -> Settle:
    if state.claim is not None or state.conflict is not None or state.slot is not None:
        return Settle.KEEP
    if state.published is None:
        return Settle.FORGET
    if state.absent_since is None:
        return Settle.KEEP
    # A terminating object is being deleted already (a finalizer holds it): a DELETE changes
    # nothing, and sent after each grace period it was one more request for the same deletion
    # (review 65-fixes F1). Its empty state is still written: a forged Ready=True held by a
    # finalizer must not pass ``kubectl wait`` until the finalizer goes.
    if now - state.absent_since >= grace and not state.published.terminating:
        if not state.published.owned:
            return Settle.KEEP if state.kept_unmanaged else Settle.UNMANAGED
        return Settle.DELETE
    if not state.published.owned:
        return Settle.KEEP
    return Settle.EMPTY if state.empty_due else Settle.KEEP


def expires_in(state: ObjectState, now: float, grace: float) -> float | None:
    """Seconds until the grace period of an object no pool calls for is over; None: not counting."""
    if state.claim is not None or state.absent_since is None or state.published is None:
        return None
    if not state.published.owned and state.kept_unmanaged:
        return None  # kept, and said so: nothing falls due
    if state.published.terminating:
        return None  # its deletion is under way: nothing of ours falls due
    return state.absent_since + grace - now


def no_pool_write(published: Published, profiles: Iterable[FabricProfile]) -> StatusWrite:
    """The empty state of an object no pool of the config calls for, under the identity it
    claims (its labels and annotations, else its status), so the status stays valid."""
    claimed_fabric, claimed_pool = published.claimed_by()
    status = published.status
    shown = status.get("pool")
    shown_pool: dict[str, Any] = shown if isinstance(shown, dict) else {}
    fabric = claimed_fabric or _text(status.get("fabric"))
    profile = next((profile for profile in profiles if profile.name == fabric), None)
    resource = profile.resource if profile is not None else _text(status.get("resourceName"))
    pool = (
        PoolRef(key=claimed_pool.key, value=claimed_pool.value)
        if claimed_pool is not None
        else PoolRef(key=_text(shown_pool.get("key")), value=_text(shown_pool.get("value")))
    )
    message = NO_SUCH_POOL_TERMINATING_MESSAGE if published.terminating else NO_SUCH_POOL_MESSAGE
    empty = empty_status(fabric, resource, pool, [], message=message)
    return StatusWrite(capability=None, status=empty.to_json(), create=False)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
