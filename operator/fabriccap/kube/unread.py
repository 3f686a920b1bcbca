"""Watch lines left undecoded: a new object whose text holds nothing the operator reads.

Decoding is most of what a watch costs the operator: at 100,000 nodes / 1,000,000 pods, four
pods in five ask for no accelerator, no fabric and no claim, and each was decoded (3.5-4 KB of
JSON, ~40 us) only for its facts to come out empty. A kind that knows the text every object it
keeps facts of holds (``WatchedKind.unread_marks``) gets an ``UnreadRule``: an ADDED line that
holds none of those marks is not decoded, and what the informer learns of it is its
resourceVersion (for progress and the plausibility rule) and that it is there.

Why that is sound. A JSON string holds its text verbatim unless it is escaped, and the only
escapes that spell the characters a mark is made of (letters, digits, ``_ . / -``) are ``\\u``
and ``\\/``: a line with either is decoded. Only ADDED lines are left undecoded: an object the
operator already holds facts of arrives as MODIFIED or DELETED, which are always decoded, so no
fact is left behind (a streaming list's ADDED lines that are left out are absent from its keys,
and the list's retain drops what they stood for). Only a line the API server framed as an event
(``{"type":"ADDED",`` ... ``}``) with exactly one ``"resourceVersion"`` key, a number, is left
undecoded; any other is decoded and judged as before (``informers.read_event``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["UnreadEvent", "UnreadRule"]

# The event's type is its first key, as every API server writes it (Go's encoder keeps the
# struct's order: type, then object).
_ADDED_LINE = re.compile(rb'\s*\{\s*"type"\s*:\s*"ADDED"\s*,')
_VERSION_KEY = b'"resourceVersion"'
# A JSON key cannot occur inside a string (its quotes would be escaped there); one occurrence is
# the object's own metadata.resourceVersion. Digits only: etcd's revision.
_VERSION = re.compile(rb'"resourceVersion"\s*:\s*"([0-9]{1,19})"')
_ESCAPES = (b"\\u", b"\\/")
_BACKSLASH = b"\\"


@dataclass(frozen=True, slots=True)
class UnreadEvent:
    """An ADDED line left undecoded: its object concerns nothing the operator reads."""

    resource_version: str


@dataclass(frozen=True)
class UnreadRule:
    """Which ADDED lines need not be decoded: those that hold none of ``marks``."""

    marks: tuple[bytes, ...]

    @classmethod
    def holding_none_of(cls, marks: Iterable[str]) -> UnreadRule:
        return cls(tuple(sorted(mark.encode() for mark in marks)))

    def unread(self, line: bytes) -> UnreadEvent | None:
        """The stand-in for ``line`` if it need not be decoded, else None (decode it).

        Every line left undecoded is searched once per mark, so each search counts: a
        backslash is looked for first (one memchr) and the two escapes only in a line that has
        one, and the version key is found, not counted and then searched for again."""
        if not _ADDED_LINE.match(line) or not line.rstrip().endswith(b"}"):
            return None
        if _BACKSLASH in line and any(escape in line for escape in _ESCAPES):
            return None
        for mark in self.marks:
            if mark in line:
                return None
        at = line.find(_VERSION_KEY)
        if at < 0 or line.find(_VERSION_KEY, at + len(_VERSION_KEY)) >= 0:
            return None
        found = _VERSION.match(line, at)
        return UnreadEvent(found.group(1).decode()) if found is not None else None
