"""One copy of the values that many facts repeat.

A decoded watch line has strings of its own: every pod bound to a node carries its own copy of
the node's name, every pod of a Job its own copies of ``batch/v1``, ``Job``, the Job's name and
uid, every node its own ``(('nvidia.com/gpu', 8), ('vpc.amazonaws.com/efa', 32))``. Kept in the
facts as they come, they were more than half of what a GPU pod's facts cost (measured by
benchmarks/memory_bench.py: docs/performance.md, "Memory per object"). The facts keep one
shared copy instead.

Strings go through ``sys.intern``: CPython frees an interned string when its last user goes,
so a name nobody holds any more costs nothing. Other values (tuples) go through a ``Shared``
table, bounded: past its limit it starts again, which costs sharing, never correctness, so a
cluster of hostile, all-different values cannot grow it.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

# The longest string value ``shared_json`` keeps one copy of: reasons, types, timestamps and
# names repeat across objects; a longer text (a condition's message) is mostly its own.
MAX_SHARED_JSON_TEXT = 80
# How deep ``shared_json`` goes: a status is a few levels deep; anything deeper is kept as it is.
MAX_SHARED_JSON_DEPTH = 16

# Distinct values a table keeps before it starts again: far above the distinct resource
# counts, label sets and pools of a real cluster (5,000 pools at 100,000 nodes).
MAX_SHARED_VALUES = 65_536

ValueT = TypeVar("ValueT", bound=Hashable)


def shared_text(value: str) -> str:
    """The one copy of ``value`` (a name many facts repeat: a node's, a namespace, an owner's)."""
    return sys.intern(value)


def shared_json(value: Any, depth: int = 0) -> Any:
    """A decoded JSON document with one copy of each of its keys and short strings, for
    documents kept at length: the FabricCapabilities' statuses as last read or written, one per
    pool, whose hundreds of keys (``type``, ``status``, ``lastTransitionTime``...) and reasons
    are the same in every object. Its own copy: the original is left as it is."""
    if isinstance(value, str):
        return shared_text(value) if len(value) <= MAX_SHARED_JSON_TEXT else value
    if depth >= MAX_SHARED_JSON_DEPTH:
        return value
    if isinstance(value, dict):
        return {
            (shared_text(key) if isinstance(key, str) else key): shared_json(item, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [shared_json(item, depth + 1) for item in value]
    return value


class Shared(Generic[ValueT]):
    """Equal values made one: ``shared(value)`` is the first equal value it was given."""

    def __init__(self, limit: int = MAX_SHARED_VALUES) -> None:
        self.limit = limit
        self._values: dict[ValueT, ValueT] = {}

    def __call__(self, value: ValueT) -> ValueT:
        known = self._values.get(value)
        if known is not None:
            return known
        if len(self._values) >= self.limit:
            self._values.clear()
        self._values[value] = value
        return value

    def __len__(self) -> int:
        return len(self._values)
