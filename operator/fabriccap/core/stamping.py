"""Adding what the pure evaluation leaves out: generations and transition times.

``lastTransitionTime`` must move only when a condition's status moves (metav1.Condition
semantics); GitOps tools and humans read it as "since when". So the new status takes the
previous one's time for every condition whose status did not change, including across
operator restarts, where "previous" is what is published on the object.

The time itself is an argument: the core reads no clock. Callers take it with
``datetime.now(UTC).strftime(RFC3339)``.
"""

from __future__ import annotations

from typing import Any

# metav1.Time as the API server writes it: UTC, whole seconds (a strftime/strptime format).
RFC3339 = "%Y-%m-%dT%H:%M:%SZ"


def stamp_status(status: dict[str, Any], previous: dict[str, Any] | None, generation: int, now: str) -> dict[str, Any]:
    """The status to publish: ``status`` with generations and transition times filled in."""
    previous_conditions = {
        condition.get("type"): condition
        for condition in ((previous or {}).get("conditions") or [])
        if isinstance(condition, dict)
    }
    # A new dict and new conditions; every other part is ``status``'s own, shared and never
    # changed (a deep copy per write cost CPU, and the memory of a second copy per pool).
    stamped = {**status, "observedGeneration": generation}
    if "conditions" in status:
        stamped["conditions"] = [
            _stamped(condition, previous_conditions, generation, now) for condition in status["conditions"]
        ]
    return stamped


def _stamped(
    condition: dict[str, Any], previous: dict[Any, dict[str, Any]], generation: int, now: str
) -> dict[str, Any]:
    earlier = previous.get(condition["type"])
    unchanged = earlier is not None and earlier.get("status") == condition["status"]
    transition = earlier.get("lastTransitionTime") if unchanged and earlier else None
    return {**condition, "lastTransitionTime": transition or now, "observedGeneration": generation}


def strip_volatile(status: dict[str, Any] | None) -> dict[str, Any]:
    """The status without generations and times: what decides whether a write is needed."""
    if not status:
        return {}
    stripped = {key: value for key, value in status.items() if key != "observedGeneration"}
    stripped["conditions"] = [
        {key: value for key, value in condition.items() if key not in ("lastTransitionTime", "observedGeneration")}
        for condition in status.get("conditions") or []
        if isinstance(condition, dict)
    ]
    return stripped
