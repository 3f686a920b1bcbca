"""Shared counters of partitionable devices (KEP-4815, DRAPartitionableDevices): how many of a
pool's devices can be allocated at once.

A driver that carves one piece of hardware into overlapping devices (a whole NIC and its
halves, say) publishes counter sets and, per device, what it takes from them (k8s.io/api
resource/v1 types.go):

- ``ResourceSliceSpec.sharedCounters []CounterSet``: ``{name, counters: map[string]Counter}``,
  ``Counter`` being ``{value: Quantity}``. Counter set names are unique in the *pool*, not the
  slice, and since resource/v1 a slice holds either devices or counter sets ("Only one of
  Devices and SharedCounters can be set in a ResourceSlice"), so a device's counters are often
  in another slice of its pool.
- ``Device.consumesCounters []DeviceCounterConsumption``: ``{counterSet, counters:
  map[string]Counter, compatibilityGroups []string}``.

The scheduler admits a device only while every counter of its pool still covers what the
devices chosen so far consume (k8s.io/dynamic-resource-allocation structured/internal/stable/
allocator_stable.go, ``allocateDevice`` -> ``checkAvailableCounters``), and counts a pool
invalid when a device names a counter set or counter the pool lacks, or two counter sets share
a name (structured/internal/incubating/pools_incubating.go, ``buildPool``:
``getAndValidateCounterSets``, ``validateDeviceCounterConsumption``). So devices sharing counters
are not independent: four devices that each take a whole ``bw: 1`` are one device's worth.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from fabriccap.core.quantity import exact_quantity
from fabriccap.core.text import clean_text

# A counter name is a DNS label (63); a snapshot's may be anything, and reaches a message.
MAX_SHOWN_NAME = 63

# The API server keeps a Quantity to the nano, rounding anything finer up (k8s.io/apimachinery
# pkg/api/resource/quantity.go, ParseQuantity: "amount.Round(amount, Nano.infScale(),
# inf.RoundUp)"): amounts are held as whole billionths, so the count needs neither a float (a
# device taking 1e308 times its counter overflowed one) nor a Fraction.
NANOS_PER_UNIT = 10**9
# The largest counter value read: int64's. ParseQuantity caps a BinarySI quantity there ("The
# max is just a simple cap", quantity.go) but keeps a DecimalSI one of any length as written,
# and no device counter comes near it (2**63 bytes is 8 EiB). A longer one makes its slice
# unreadable, failing the node closed, rather than the count handling 400-digit numbers.
MAX_COUNTER_VALUE = 2**63 - 1
# The shares that order the greedy pass are fixed-point, in 2**-64ths of a counter.
SHARE_ONE = 2**64

# (counter name, amount in billionths), sorted by name.
CounterAmounts = tuple[tuple[str, int], ...]


class CounterSet(NamedTuple):
    """One entry of a slice's ``spec.sharedCounters``."""

    name: str
    counters: CounterAmounts


class Consumption(NamedTuple):
    """One entry of a device's ``consumesCounters``."""

    counter_set: str
    counters: CounterAmounts
    # ``compatibilityGroups`` (DRADeviceCompatibilityGroups), sorted: devices drawing on one
    # counter set may be allocated together only if their groups intersect, and a device
    # without groups only beside others without groups (resource/v1 types.go).
    groups: tuple[str, ...] = ()


# What one device takes from its pool's counters: its ``consumesCounters``, in order.
Demand = tuple[Consumption, ...]
# What a device refers to (counter set, the counters it names), for the pool's validation.
Reference = tuple[str, tuple[str, ...]]


class CounterError(ValueError):
    """Counter data that cannot be read (the API server would have refused it)."""


def read_counter_sets(spec: Mapping[str, Any]) -> tuple[CounterSet, ...]:
    """A slice's ``spec.sharedCounters``. Raises CounterError on anything unreadable."""
    entries = spec.get("sharedCounters")
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise CounterError("spec.sharedCounters is not a list")
    counter_sets = []
    for position, entry in enumerate(entries):
        where = f"spec.sharedCounters[{position}]"
        if not isinstance(entry, Mapping):
            raise CounterError(f"{where} is not a mapping")
        counter_sets.append(CounterSet(_name(entry.get("name"), f"{where}.name"), _amounts(entry, where)))
    return tuple(counter_sets)


def read_demand(device: Mapping[str, Any], where: str) -> Demand:
    """A device's ``consumesCounters`` (``where`` names the device in errors). Raises
    CounterError on anything unreadable."""
    entries = device.get("consumesCounters")
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise CounterError(f"{where}.consumesCounters is not a list")
    demand = []
    for position, entry in enumerate(entries):
        place = f"{where}.consumesCounters[{position}]"
        if not isinstance(entry, Mapping):
            raise CounterError(f"{place} is not a mapping")
        groups = entry.get("compatibilityGroups") or []
        if not isinstance(groups, list) or not all(isinstance(group, str) for group in groups):
            raise CounterError(f"{place}.compatibilityGroups is not a list of names")
        counter_set = _name(entry.get("counterSet"), f"{place}.counterSet")
        demand.append(Consumption(counter_set, _amounts(entry, place), tuple(sorted(set(groups)))))
    return tuple(demand)


def references(demand: Demand) -> tuple[Reference, ...]:
    return tuple((consumption.counter_set, tuple(name for name, _ in consumption.counters)) for consumption in demand)


def invalid_counters(counter_sets: Sequence[CounterSet], referenced: Iterable[Reference]) -> str | None:
    """Why the scheduler counts a pool with these counter sets (from all its slices) and these
    references (from all its devices) invalid, in its words; None when it does not."""
    known: dict[str, frozenset[str]] = {}
    for counter_set in counter_sets:
        if counter_set.name in known:
            return f"duplicate counter set name {_shown(counter_set.name)}"
        known[counter_set.name] = frozenset(name for name, _ in counter_set.counters)
    for counter_set_name, counter_names in referenced:
        counters = known.get(counter_set_name)
        if counters is None:
            return f"counter set {_shown(counter_set_name)} not found"
        for counter_name in counter_names:
            if counter_name not in counters:
                return f"counter {_shown(counter_name)} not found in counter set {_shown(counter_set_name)}"
    return None


def allocatable_at_once(counter_sets: Sequence[CounterSet], demands: Sequence[Demand]) -> int:
    """How many devices with these demands one pool's counters let the scheduler hold at once:
    a lower bound that is exact in the usual cases, never more than the scheduler can allocate.

    When every device fits beside all the others (their total on each counter fits it, and
    their groups agree), that is all of them, exactly, found in one pass (the roomy case, the
    usual one). Otherwise, greedy: the devices are taken cheapest first (the sum, over the
    counters they draw on, of the share of each counter they take), each kept only if every
    counter still covers it and its compatibility groups fit the ones kept. Every device kept
    fits beside those kept before it, exactly as ``checkAvailableCounters`` admits devices one
    by one, so the kept set is one the scheduler can allocate together: the result never
    over-counts. It is the maximum when every device draws the same amounts with the same
    groups (one partition size, the usual case: any k of them fit as soon as k times the
    amount does), or when one counter is involved and no groups are (cheapest first maximises
    how many fit under one bound).
    Otherwise (several counters and mixed sizes, a knapsack) it may count fewer than the
    scheduler could place: the pool then says less, never more.

    ``counter_sets`` must be valid for ``demands`` (``invalid_counters`` is None)."""
    available = {
        (counter_set.name, name): amount for counter_set in counter_sets for name, amount in counter_set.counters
    }
    total = dict.fromkeys(available, 0)
    for demand in demands:
        for consumption in demand:
            for name, amount in consumption.counters:
                total[(consumption.counter_set, name)] += amount
    if all(total[key] <= limit for key, limit in available.items()) and _groups_agree(demands):
        return len(demands)
    return _greedy_count(available, demands)


def _greedy_count(available: Mapping[tuple[str, str], int], demands: Sequence[Demand]) -> int:
    candidates: list[tuple[int, int, int]] = []  # (share, total taken, position)
    takes = [_taken(demand) for demand in demands]
    for position, taken in enumerate(takes):
        if all(amount <= available[key] for key, amount in taken.items()):  # else it never fits
            # Its share: the sum, over the counters it draws on, of the part of each it takes.
            share = sum(amount * SHARE_ONE // available[key] for key, amount in taken.items() if amount)
            candidates.append((share, sum(taken.values()), position))
    # Equal shares (fixed-point) fall back to the total taken: with one counter, that orders the
    # devices by what they take, exactly.
    candidates.sort()
    used: dict[tuple[str, str], int] = dict.fromkeys(available, 0)
    # Per counter set: the compatibility groups every device kept on it shares (None: none yet).
    shared_groups: dict[str, frozenset[str]] = {}
    kept = 0
    for _, _, position in candidates:
        demand, taken = demands[position], takes[position]
        if not _groups_fit(demand, shared_groups) or any(
            used[key] + amount > available[key] for key, amount in taken.items()
        ):
            continue
        kept += 1
        _keep_groups(demand, shared_groups)
        for key, amount in taken.items():
            used[key] += amount
    return kept


def _taken(demand: Demand) -> dict[tuple[str, str], int]:
    """What one device takes from each counter, its consumptions summed."""
    taken: dict[tuple[str, str], int] = {}
    for consumption in demand:
        for name, amount in consumption.counters:
            key = (consumption.counter_set, name)
            taken[key] = taken.get(key, 0) + amount
    return taken


def _groups_agree(demands: Iterable[Demand]) -> bool:
    """Whether every device's compatibility groups fit beside all the others'."""
    shared_groups: dict[str, frozenset[str]] = {}
    for demand in demands:
        if not _groups_fit(demand, shared_groups):
            return False
        _keep_groups(demand, shared_groups)
    return True


def _keep_groups(demand: Demand, shared_groups: dict[str, frozenset[str]]) -> None:
    for consumption in demand:
        groups = frozenset(consumption.groups)
        before = shared_groups.get(consumption.counter_set)
        shared_groups[consumption.counter_set] = groups if before is None else before & groups


def _groups_fit(demand: Demand, shared_groups: Mapping[str, frozenset[str]]) -> bool:
    for consumption in demand:
        before = shared_groups.get(consumption.counter_set)
        if before is not None:
            # Devices without groups go only beside each other; devices with groups need one
            # that every device kept on the set has.
            groups = frozenset(consumption.groups)
            if not (before & groups if before else not groups):
                return False
    return True


def _shown(name: str) -> str:
    return clean_text(name, MAX_SHOWN_NAME)


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise CounterError(f"{where} is missing")
    return value


def _amounts(entry: Mapping[str, Any], where: str) -> CounterAmounts:
    counters = entry.get("counters") or {}
    if not isinstance(counters, Mapping):
        raise CounterError(f"{where}.counters is not a mapping")
    amounts = []
    for name, counter in counters.items():
        place = f"{where}.counters.{_shown(str(name))}"
        value = counter.get("value") if isinstance(counter, Mapping) else None
        # A Quantity is a string on the wire; a number only in a hand-written snapshot.
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise CounterError(f"{place}.value is not a quantity")
        try:
            amount = exact_quantity(str(value))
        except ValueError as error:
            raise CounterError(f"{place}.value: {error}") from None
        if amount < 0:
            # Not a size a device can take or a counter can hold; read as a count, it would let
            # a device add room for others.
            raise CounterError(f"{place}.value is negative")
        if amount > MAX_COUNTER_VALUE:
            raise CounterError(f"{place}.value is out of range (above 2**63-1)")
        amounts.append((str(name), math.ceil(amount * NANOS_PER_UNIT)))
    return tuple(sorted(amounts))
