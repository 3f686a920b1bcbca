"""The keys a fresh LIST has yet to name, of those held as it began.

A relist names each object that still exists; what it never names was deleted while the watch
was away, and is forgotten at its end. The keys held when it began are kept sorted, with one
byte per key that says whether the listing named it: 9 bytes a key. A set of them took a hash
table of 16-byte slots at most three fifths full, which its discards never shrink, so all of it
stayed until the listing's end: at 10,000 nodes and 100,000 pods, the pods' relist held 1.5 MiB
of sets (10,000 plugin pods, 20,000 GPU pods) at the relist's highest RSS (docs/performance.md,
"A relist's keys, sorted").

Crossing a key off is a binary search, or two comparisons where the listing comes in the keys'
order, as the API server serves it (etcd and the watch cache keep objects ordered by key): a
key that falls just after the last one found is found, or known absent, there.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

# Keys of one table: all strings, or all tuples of strings, so any two compare.
KeyT = TypeVar("KeyT")


class UnlistedKeys(Generic[KeyT]):
    """``discard`` each key the listing names; iterating gives the keys it has not named."""

    __slots__ = ("_keys", "_named", "_next")

    def __init__(self, keys: Iterable[KeyT]) -> None:
        self._keys: list[Any] = sorted(keys)
        self._named = bytearray(len(self._keys))
        # Where the key after the last one found would be, if the listing is in order.
        self._next = 0

    def discard(self, key: KeyT) -> None:
        """The listing named ``key`` (held or not when it began)."""
        keys, at = self._keys, self._next
        if not ((at == 0 or keys[at - 1] < key) and (at == len(keys) or not keys[at] < key)):
            at = bisect_left(keys, key)  # out of order: search
        named = self._named
        while at < len(keys) and keys[at] == key:  # a key held twice is named twice
            named[at] = 1
            at += 1
        self._next = at

    def __iter__(self) -> Iterator[KeyT]:
        named = self._named
        return (key for at, key in enumerate(self._keys) if not named[at])
