"""The one token bucket: a burst at once, then the rate, never more than the burst saved up."""

from __future__ import annotations

import asyncio

from fabriccap.core.ratelimit import TokenBucket
from fabriccap.kube.logs import take_token


def test_the_token_bucket_allows_a_burst_then_the_rate() -> None:
    bucket = TokenBucket(rate=8.0, burst=8.0)  # powers of two: exact sums
    now = 100.0
    assert [bucket.allows(now) for _ in range(8)] == [True] * 8
    assert not bucket.allows(now)
    assert bucket.next_token(now) == 0.125
    now += 0.125
    assert bucket.allows(now) and not bucket.allows(now)
    now += 60
    assert bucket.take(now, wanted=20) == 8  # a full burst again, no more
    assert bucket.next_token(now) == 0.125


def test_a_fractional_rate_still_gives_one_token_at_a_time() -> None:
    bucket = TokenBucket(rate=0.5, burst=1.0)  # the log reads' smallest setting: one every 2 s
    assert bucket.allows(0.0) and not bucket.allows(1.0)
    assert bucket.next_token(1.0) == 1.0
    assert bucket.allows(2.0)


def test_a_clock_that_goes_back_neither_adds_nor_owes_tokens() -> None:
    bucket = TokenBucket(rate=1.0, burst=1.0)
    assert bucket.allows(50.0)
    assert not bucket.allows(10.0) and not bucket.allows(10.5)
    assert bucket.allows(11.0)  # the rate from where the clock is now, no debt of 40 s


def test_take_token_waits_for_the_next_token() -> None:
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    async def twice() -> None:
        bucket = TokenBucket(rate=4.0, burst=1.0)
        await take_token(bucket, lambda: now[0], sleep)
        await take_token(bucket, lambda: now[0], sleep)

    asyncio.run(twice())
    assert slept == [0.25] and now[0] == 0.25
