"""Free memory given back after a burst of work (controller.memory)."""

from __future__ import annotations

from fabriccap.controller.memory import MemoryTrimmer, give_back_free_memory


def test_a_trim_runs_only_after_enough_work_and_then_starts_counting_again() -> None:
    calls: list[int] = []
    trimmer = MemoryTrimmer(trim=calls.append, min_work=3)
    for _ in range(2):
        trimmer.done()
    assert not trimmer.idle()  # two units of work: not worth a walk of the heap
    trimmer.done()
    assert trimmer.idle() and calls == [0]  # malloc_trim(0): keep no padding
    assert not trimmer.idle()  # nothing done since
    for _ in range(3):
        trimmer.done()
    assert trimmer.idle() and trimmer.trims == 2


def test_without_malloc_trim_nothing_happens() -> None:
    trimmer = MemoryTrimmer(trim=None, min_work=1)
    trimmer.done()
    assert not trimmer.idle()
    assert trimmer.trims == 0


def test_this_platforms_malloc_trim_is_found_and_runs() -> None:
    # The image is Debian (glibc), like this machine: the product's trim must be the real one.
    trimmer = MemoryTrimmer(min_work=1)
    assert trimmer.trim is not None
    trimmer.done()
    assert trimmer.idle()


def test_the_memory_a_first_listing_left_goes_back_on_this_platform() -> None:
    # settle_heap's trim, after the first listing: glibc here, as in the image.
    assert give_back_free_memory()


def test_work_that_never_stops_is_trimmed_at_most_once_in_min_seconds() -> None:
    calls: list[int] = []
    now = [100.0]
    trimmer = MemoryTrimmer(trim=calls.append, min_work=2, min_seconds=10.0, clock=lambda: now[0])
    trimmer.done(2)
    assert trimmer.idle()  # the first trim waits for no clock
    trimmer.done(5)
    now[0] = 109.9
    assert not trimmer.idle() and trimmer.work == 5  # the work is kept for the next chance
    now[0] = 110.0
    assert trimmer.idle() and calls == [0, 0] and trimmer.work == 0
