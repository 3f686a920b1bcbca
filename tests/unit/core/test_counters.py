"""Shared counters (core.counters): how many partitionable devices fit at once, never more than
the scheduler's checkAvailableCounters admits together."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccap.core.counters import (
    NANOS_PER_UNIT,
    Consumption,
    CounterError,
    CounterSet,
    Demand,
    allocatable_at_once,
    invalid_counters,
    read_counter_sets,
    read_demand,
)

NIC = CounterSet("nic", (("bw", 4), ("lanes", 8)))


def take(bw: int, lanes: int = 0, *groups: str) -> Demand:
    return (Consumption("nic", (("bw", bw), ("lanes", lanes)), tuple(groups)),)


def fits_together(counter_sets: list[CounterSet], chosen: tuple[Demand, ...]) -> bool:
    """The rule itself, restated: every counter covers the sum of what the devices take, and
    the devices on one counter set share a compatibility group, or all have none."""
    available = {(s.name, name): amount for s in counter_sets for name, amount in s.counters}
    used: dict[tuple[str, str], int] = {}
    groups: dict[str, list[frozenset[str]]] = {}
    for demand in chosen:
        for consumption in demand:
            groups.setdefault(consumption.counter_set, []).append(frozenset(consumption.groups))
            for name, amount in consumption.counters:
                key = (consumption.counter_set, name)
                used[key] = used.get(key, 0) + amount
    for members in groups.values():
        if any(members) and not frozenset.intersection(*members):
            return False
    return all(amount <= available[key] for key, amount in used.items())


def most_at_once(counter_sets: list[CounterSet], demands: list[Demand]) -> int:
    return max(
        size
        for size in range(len(demands) + 1)
        if any(fits_together(counter_sets, chosen) for chosen in itertools.combinations(demands, size))
    )


def test_one_partition_size_counts_exactly_as_many_as_the_counters_hold() -> None:
    assert allocatable_at_once([NIC], [take(1, 2)] * 8) == 4  # bw 4 holds four
    assert allocatable_at_once([NIC], [take(1, 3)] * 8) == 2  # lanes 8 hold two


def test_a_whole_device_and_its_parts_count_the_parts() -> None:
    """A NIC published whole (all 4) and as four quarters: at most four devices at once."""
    assert allocatable_at_once([NIC], [take(4), take(1), take(1), take(1), take(1)]) == 4


def test_devices_that_all_fit_together_are_counted_without_the_greedy_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The roomy case, the usual one: their total fits every counter and their groups agree,
    so the count is all of them, in one pass without a sort (review 61, F3)."""
    from fabriccap.core import counters

    def no_greedy_pass(*_: object) -> dict[tuple[str, str], int]:
        raise AssertionError("the greedy pass ran")

    monkeypatch.setattr(counters, "_taken", no_greedy_pass)  # what the greedy pass reads each device with
    assert allocatable_at_once([NIC], [take(1, 2, "a"), take(1, 2, "a", "b"), take(2, 4, "a")]) == 3
    assert allocatable_at_once([NIC], [take(0)] * 50) == 50


def test_devices_taking_nothing_all_fit() -> None:
    empty = CounterSet("nic", (("bw", 0), ("lanes", 0)))
    assert allocatable_at_once([empty], [take(0)] * 3) == 3
    assert allocatable_at_once([empty], [take(0), take(1)]) == 1


def test_compatibility_groups_keep_devices_apart() -> None:
    """Devices on one counter set go together only if their groups intersect; one without
    groups only beside others without (resource/v1 DeviceCounterConsumption.compatibilityGroups)."""
    assert allocatable_at_once([NIC], [take(1, 0, "a"), take(1, 0, "b")]) == 1
    assert allocatable_at_once([NIC], [take(1, 0, "a"), take(1, 0, "a", "b"), take(1, 0, "b")]) == 2
    assert allocatable_at_once([NIC], [take(1), take(1, 0, "a")]) == 1


def test_counter_data_is_read_in_the_resource_v1_shape() -> None:
    spec = {"sharedCounters": [{"name": "nic", "counters": {"lanes": {"value": "8"}, "bw": {"value": "400Gi"}}}]}
    assert read_counter_sets(spec) == (
        CounterSet("nic", (("bw", 400 * 2**30 * NANOS_PER_UNIT), ("lanes", 8 * NANOS_PER_UNIT))),
    )
    device = {
        "name": "half",
        "consumesCounters": [
            {"counterSet": "nic", "counters": {"bw": {"value": "200Gi"}}, "compatibilityGroups": ["b", "a"]}
        ],
    }
    assert read_demand(device, "spec.devices[0]") == (
        Consumption("nic", (("bw", 200 * 2**30 * NANOS_PER_UNIT),), ("a", "b")),
    )


def test_a_hostile_counter_name_reaches_the_message_cleaned_and_bounded() -> None:
    reason = invalid_counters([], [("\x1b]0;pwned\x07" + "x" * 5000, ())])
    assert reason is not None and "\x1b" not in reason and len(reason) < 120


def test_a_device_taking_far_more_than_its_counter_never_fits_and_crashes_nothing() -> None:
    """The shares that order the pass were floats: a device taking more than 1.8e308 times its
    counter raised OverflowError out of the whole evaluation (review 61, F1)."""
    one_counter = [CounterSet("nic", (("bw", 1),))]
    huge: Demand = (Consumption("nic", (("bw", 10**400),)),)
    assert allocatable_at_once(one_counter, [huge, (Consumption("nic", (("bw", 1),)),)]) == 1


def counter_value(value: str) -> int:
    spec = {"sharedCounters": [{"name": "nic", "counters": {"bw": {"value": value}}}]}
    return read_counter_sets(spec)[0].counters[0][1]


def test_counter_values_are_read_to_the_nano_and_bounded_at_int64() -> None:
    """In billionths, rounded up as the API server rounds (quantity.go ParseQuantity); past
    int64 the slice is unreadable (its node fails closed), whatever the number of digits."""
    assert counter_value("9223372036854775807") == (2**63 - 1) * NANOS_PER_UNIT
    assert counter_value("500m") == NANOS_PER_UNIT // 2
    assert counter_value("0.1n") == 1
    for value in ("9223372036854775808", "1234567891" * 40):
        with pytest.raises(CounterError, match=r"is out of range \(above 2\*\*63-1\)$"):
            counter_value(value)


DEMANDS = st.builds(
    lambda bw, lanes, groups: take(bw, lanes, *sorted(groups)),
    st.integers(0, 5),
    st.integers(0, 9),
    st.sets(st.sampled_from("ab"), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(DEMANDS, max_size=7))
def test_the_count_never_exceeds_what_fits_at_once(demands: list[Demand]) -> None:
    """Greedy is a lower bound: never more than the most devices that fit together (a brute
    force over every subset), so a pool never says more than the scheduler can allocate."""
    assert allocatable_at_once([NIC], demands) <= most_at_once([NIC], demands)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=8))
def test_with_one_counter_and_no_groups_the_count_is_exact(amounts: list[int]) -> None:
    one_counter = [CounterSet("nic", (("bw", 6),))]
    demands: list[Demand] = [(Consumption("nic", (("bw", amount),)),) for amount in amounts]
    assert allocatable_at_once(one_counter, demands) == most_at_once(one_counter, demands)
