"""Watch lines left undecoded: a new object whose text holds nothing the operator reads.

Decoding is most of what a watch costs the operator: at 100,000 nodes / 1,000,000 pods, four
pods in five ask for no accelerator, no fabric and no claim, and each was decoded (3.5-4 KB of
JSON, ~40 us) only for its facts to come out empty. A kind that knows the text every object it
keeps facts of holds (``WatchedKind.unread_marks``) gets an ``UnreadRule``: an ADDED line that
holds none of those marks is not decoded, and what the informer learns of it is its
resourceVersion (for progress and the plausibility rule) and that it is there.

Why that is sound. A JSON string holds its text verbatim unless it is escaped. A mark is
searched as JSON spells it: a quote or a backslash in it (a recommendedEnv name may hold either)
is searched escaped, ``\\"`` and ``\\\\``, as every encoder must write them. Any other escape
that could spell a mark's characters is ``\\u`` or ``\\/``: a line with either is decoded.
Only ADDED lines are left undecoded: an object the operator already holds facts of arrives as
MODIFIED or DELETED, which are always decoded, so no fact is left behind (a streaming list's
ADDED lines that are left out are absent from its keys, and the list's retain drops what they
stood for). Only a line the API server framed as an event (``{"type":"ADDED",`` ... ``}``) with
exactly one ``"resourceVersion"`` key, a number, is left undecoded; any other is decoded and
judged as before (``informers.read_event``). The marks and the two escapes are looked for
together, in one pass (``ahocorasick_rs``): a search for the leftmost-first match finds one
wherever any of them occurs, and any one means decode. The same pass counts the version keys.

Heartbeats (``UnchangedRule``). At 100,000 nodes the node monitoring agent and the kubelets send
hundreds of Node updates a second that move nothing the facts read: the conditions'
``lastHeartbeatTime``, the writer's managedFields ``time``, the object's version. A Node line
is 10-20 KB, and decoding it and reading its facts was most of what a heartbeat cost (0.40 CPU
s per 1,000 at 20,000 nodes on scalesim; 0.19 left undecoded). A MODIFIED line whose text,
with the string values of those keys blanked, is the text of the last line decoded and applied
for the same object is left undecoded: its facts are the ones held. A key can only be blanked
where it is a key (an unescaped ``"key":"`` cannot occur inside a string), and a value with an
escape in it is not blanked (it is compared as it is: a change to it is seen). The kind's facts
must read none of the blanked keys (``FactsExtractor.node_unread_keys``); what was last applied
is forgotten with the object (DELETED), when a line was not applied, and at every listing.
A listing keeps no digest. Its lines are all decoded anyway, and the digests of 100,000 Node
lines held the start's first status back by 4.5-5 s. Each node's first change after a listing
is decoded instead (about 80 us more, once per node) and keeps the digest: 3-4 s more CPU in
all, spent after the start, when the operator has a core to spare (docs/performance.md).

The operator's own writes (``OwnWritesRule``). Every status the operator writes comes back on
its watch of FabricCapabilities (an 11 KB line), and the publisher, holding the write's answer
at the same version already, drops it once decoded. A MODIFIED line whose one resourceVersion is
one the API server answered a write of this process with is not decoded (``result="own"``): a
version names one write of one object (etcd's revision), so the line is that write's echo, not
any other object's change, whatever its name reads as. Only MODIFIED lines: a listing's objects
all arrive as ADDED, and one left out of a listing would count as deleted.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ahocorasick_rs import MATCHKIND_LEFTMOST_FIRST, BytesAhoCorasick

from fabriccap.core.sharing import shared_text

__all__ = ["LineRule", "OwnWritesRule", "UnchangedRule", "UnreadEvent", "UnreadRule"]

# JSON's whitespace (RFC 8259): what may stand between its tokens, and follow an event's closing
# brace on its line. Not regular expressions' \s, which takes \f and \v too.
_JSON_WHITESPACE = b" \t\r\n"
_WHITESPACE = frozenset(_JSON_WHITESPACE)
_SPACE = b"[" + re.escape(_JSON_WHITESPACE) + b"]*"
# The event's type is its first key, as every API server writes it (Go's encoder keeps the
# struct's order: type, then object).
_EVENT_START = re.compile(
    _SPACE + rb"\{" + _SPACE + rb'"type"' + _SPACE + b":" + _SPACE + rb'"(ADDED|MODIFIED)"' + _SPACE + b","
)
# The object's own name: the first "name" key after "metadata" (kube-apiserver writes it first
# in ObjectMeta; an encoder that sorts keys, as scalesim's, after annotations and labels).
# It only says where the digest of the last applied line is kept: a wrong one (a label named
# "name") finds no digest, and ``settled`` keeps none under a name the object does not have.
_METADATA = re.compile(rb'"metadata"' + _SPACE + b":" + _SPACE + rb"\{")
_NAME = re.compile(rb'"name"' + _SPACE + b":" + _SPACE + rb'"([^"\\]{1,253})"')
_VERSION_KEY = b'"resourceVersion"'
# A JSON key cannot occur inside a string (its quotes would be escaped there); one occurrence is
# the object's own metadata.resourceVersion. Digits only: etcd's revision.
_VERSION = re.compile(_VERSION_KEY + _SPACE + b":" + _SPACE + rb'"([0-9]{1,19})"')
# The version key as ``UnreadRule``'s search finds it: without its opening quote, which is
# checked apart (a text that begins with a quote is slow to search for in JSON).
_VERSION_FIND = _VERSION_KEY[1:]
# The escapes that could spell a mark's characters: ``\uXXXX`` and ``\/``. Searched for with the
# marks, as two more texts. (The others, ``\"``, ``\\`` and the short ones of control
# characters, are searched as part of a mark that holds such a character: ``_as_json_spells``.)
_MARK_ESCAPES = (b"\\u", b"\\/")
# What follows a key that ``UnchangedRule`` blanks: a colon and a string without an escape.
_STRING_VALUE = re.compile(_SPACE + b":" + _SPACE + rb'"[^"\\]*"')
_QUOTE = ord('"')
_BACKSLASH = ord("\\")


@dataclass(frozen=True, slots=True)
class UnreadEvent:
    """A line left undecoded: a new object that concerns nothing the operator reads
    (``unread``), or a change that moved nothing it reads (``unchanged``)."""

    resource_version: str
    result: Literal["unread", "unchanged", "own"] = "unread"


class LineRule(Protocol):
    """Which watch lines need not be decoded, and what it learns of those that were."""

    def unread(self, line: bytes) -> UnreadEvent | None:
        """The stand-in for ``line`` if it need not be decoded, else None (decode it)."""
        ...

    def settled(self, event_type: str, body: Mapping[str, Any], applied: bool) -> None:
        """The line last decoded was an event of ``event_type`` for ``body``; ``applied``:
        its facts are held now."""
        ...

    def listing_began(self) -> None:
        """A listing starts: what was applied before may not stand."""
        ...

    def listing_ended(self) -> None:
        """The listing is done (every object it named has ``settled``)."""
        ...


def _framed(line: bytes) -> re.Match[bytes] | None:
    """The line's ADDED or MODIFIED framing (group 1, the type), if it is a whole event as an
    API server frames one; None for any other line (decode it)."""
    framed = _EVENT_START.match(line)
    if framed is None:
        return None
    # Where the text ends, whitespace aside, found without copying the line as rstrip() would
    # (a line comes with its newline: kube.client.watch_lines).
    end = len(line)
    while end and line[end - 1] in _WHITESPACE:
        end -= 1
    return framed if line.endswith(b"}", 0, end) else None


def _only_version(line: bytes) -> str | None:
    """The object's resourceVersion, if the line has exactly one such key and it is a number."""
    at = line.find(_VERSION_KEY)
    if at < 0 or line.find(_VERSION_KEY, at + len(_VERSION_KEY)) >= 0:
        return None
    found = _VERSION.match(line, at)
    return found.group(1).decode() if found is not None else None


def _as_json_spells(mark: str) -> bytes:
    """``mark`` as it stands inside a JSON string: a quote, a backslash and a control character
    escaped (the short escapes, and ``\\u`` for the rest, which the rule searches for anyway)."""
    return json.dumps(mark, ensure_ascii=False)[1:-1].encode()


def _escaped(line: bytes, at: int) -> bool:
    """Whether the byte at ``at`` is escaped: an odd run of backslashes right before it."""
    run = 0
    while run < at and line[at - run - 1] == _BACKSLASH:
        run += 1
    return run % 2 == 1


def _may_start_inside(text: bytes, other: bytes) -> bool:
    """Whether an occurrence of ``text`` can begin strictly inside one of ``other`` (a suffix
    of ``other`` begins ``text``, or ``text`` lies within one): in a leftmost-first search of
    both, the find of ``other`` would hide it."""
    return any(other[k:].startswith(text) or text.startswith(other[k:]) for k in range(1, len(other)))


@dataclass(frozen=True)
class UnreadRule:
    """Which ADDED lines need not be decoded: those that hold none of ``marks``."""

    marks: tuple[bytes, ...]
    # The marks and the escapes, all found in one pass over the line. Leftmost-first, because
    # that is the kind of match aho-corasick's packed (SIMD) searcher answers: a line that holds
    # none of them is read at memory speed, where one ``in`` per mark read it once per mark, at
    # 15 us of the 20 us a 6 KB pod cost (benchmarks/watch_event_bench.py). Which of them is
    # found first does not matter: any one means decode. None when a mark is empty (the config
    # refuses a recommended variable with no name, 673b4df; a rule built from other marks may
    # still hold one): every line holds it, so every line is decoded.
    _search: BytesAhoCorasick | None = field(init=False, repr=False, compare=False)
    # The index of the version key (``_VERSION_FIND``) among the searched texts, the last, or
    # None when it is not searched. When it is, a line that
    # holds no mark has its version keys counted in the same pass, where ``_only_version`` read
    # the whole line again for a second key (a served pod of no fabric: 4.3 -> 2.8 us, in
    # watch_event_bench). Only when no mark or escape can begin inside the key: a find of the
    # key would hide it (``_may_start_inside``; no built-in mark can).
    _version_text: int | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        texts = [*self.marks, *_MARK_ESCAPES]
        finds_version = all(texts) and not any(_may_start_inside(text, _VERSION_FIND) for text in texts)
        if finds_version:
            texts.append(_VERSION_FIND)  # last: a mark found at the same place wins
        search = BytesAhoCorasick(texts, matchkind=MATCHKIND_LEFTMOST_FIRST) if all(texts) else None
        object.__setattr__(self, "_search", search)
        object.__setattr__(self, "_version_text", len(texts) - 1 if finds_version else None)

    @property
    def _finds_version(self) -> bool:
        return self._version_text is not None

    @classmethod
    def holding_none_of(cls, marks: Iterable[str]) -> UnreadRule:
        return cls(tuple(sorted(_as_json_spells(mark) for mark in marks)))

    def unread(self, line: bytes) -> UnreadEvent | None:
        """The stand-in for ``line`` if it need not be decoded, else None (decode it)."""
        framed = _framed(line)
        if framed is None or framed.group(1) != b"ADDED" or self._search is None:
            return None
        finds = self._search.find_matches_as_indexes(line)
        last = self._version_text
        if last is None:
            version = None if finds else _only_version(line)
            return UnreadEvent(version) if version is not None else None
        # Every find is the version key's (the last text) or the line holds a mark: decode it.
        # A find of the key counts where a quote opens it, as ``_only_version`` counts
        # ``"resourceVersion"``; the key's text never overlaps itself, so every one is found.
        keys: list[int] = []
        for text, found, _end in finds:
            if text != last:
                return None
            if found and line[found - 1] == _QUOTE:
                keys.append(found - 1)
        if len(keys) != 1:
            return None
        key = _VERSION.match(line, keys[0])
        return UnreadEvent(key.group(1).decode()) if key is not None else None

    def settled(self, event_type: str, body: Mapping[str, Any], applied: bool) -> None:
        """Nothing to learn: the rule reads each line alone."""

    def listing_began(self) -> None:
        """Nothing kept."""

    def listing_ended(self) -> None:
        """Nothing kept."""


@dataclass
class UnchangedRule:
    """Which MODIFIED lines need not be decoded: those that, but for the string values of some
    keys (``keys``), are the last line applied for their object. One per informer: it keeps,
    per object name, a digest of that line (a 64-bit hash: two texts that differ have one
    chance in 2**64 of reading as the same)."""

    keys: tuple[bytes, ...]
    _applied: dict[str, int] = field(default_factory=dict)
    _pending: tuple[str, int] | None = None
    # A listing is under way: its lines make no digest (see the module's docstring).
    _listing: bool = False
    # Each key with its closing quote, all found in one pass (see ``_blanked``).
    _search: BytesAhoCorasick = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._search = BytesAhoCorasick([key + b'"' for key in self.keys], matchkind=MATCHKIND_LEFTMOST_FIRST)

    @classmethod
    def blanking_values_of(cls, keys: Iterable[str]) -> UnchangedRule:
        """A key's value is blanked where it is a key with a string value without escapes
        (``"key":"value"``, any spacing); one with an escape stays, so a change to it is seen."""
        return cls(tuple(sorted(key.encode() for key in keys)))

    def _blanked(self, line: bytes, start: int) -> bytes:
        """``line`` from ``start`` with the values of ``keys`` taken out.

        The keys are found in one leftmost-first pass (aho-corasick's packed searcher), each
        with its closing quote and without its opening one: 2.6 us on a 14 KB Node line, 6.9
        with the opening quote, a byte too common in JSON for the searcher's prefilter. A find
        is a key only where a quote that is not escaped precedes it (an odd run of backslashes
        before a quote escapes it: in ``{"x\\"time":"a"}`` the key is ``x"time``) and a colon
        and a string follow it. A find that is not one hides no key: its one quote, its last
        byte, would have to open that key, and a quote that opens a string never follows a
        letter (outside a string, only ``{[,:`` and whitespace do; inside one, a quote is
        escaped). One regular expression substituting
        every key cost twice this: 17.4 against 11.9 us a heartbeat, all told
        (benchmarks/watch_event_bench.py)."""
        kept: list[bytes] = []
        taken = start
        for _, found, end in self._search.find_matches_as_indexes(line):
            if found <= start or line[found - 1] != _QUOTE or _escaped(line, found - 1):
                continue
            value = _STRING_VALUE.match(line, end)
            if value is not None:
                kept.append(line[taken:end])
                taken = value.end()
        if not kept:
            return line[start:]
        kept.append(line[taken:])
        return b"".join(kept)

    def __len__(self) -> int:
        return len(self._applied)

    def unread(self, line: bytes) -> UnreadEvent | None:
        self._pending = None
        if self._listing:
            return None
        framed = _framed(line)
        if framed is None:
            return None
        metadata = _METADATA.search(line, framed.end())
        named = _NAME.search(line, metadata.end()) if metadata is not None else None
        if named is None:
            return None
        # From the object on: an object first ADDED then MODIFIED unchanged reads the same.
        name, digest = named.group(1).decode(), hash(self._blanked(line, framed.end()))
        if framed.group(1) == b"MODIFIED" and self._applied.get(name) == digest:
            # The line applied had exactly one version key (below), so this one has too: the
            # first is the object's. Blanked, its value may be anything: a number, or decode.
            found = _VERSION.search(line)
            if found is not None:
                return UnreadEvent(found.group(1).decode(), "unchanged")
            return None
        if _only_version(line) is not None:
            self._pending = (name, digest)
        return None

    def settled(self, event_type: str, body: Mapping[str, Any], applied: bool) -> None:
        pending, self._pending = self._pending, None
        if self._listing:
            return  # no digest to keep or forget: all were cleared as the listing began
        metadata = body.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        if not isinstance(name, str):
            return
        if event_type == "DELETED" or not applied or pending is None or pending[0] != name:
            self._applied.pop(name, None)
        elif self._applied.get(name) != pending[1]:
            # The node's facts keep the same one copy of its name (core.sharing).
            self._applied[shared_text(name)] = pending[1]

    def listing_began(self) -> None:
        # Cleared now, not when the listing ends: no digest is kept among the garbage of the
        # bodies it decodes, where one would pin the arenas it lands in after that garbage is
        # freed (a forced relist left 13.6 MiB at 100,000 nodes: docs/performance.md).
        self._applied.clear()
        self._pending = None
        self._listing = True

    def listing_ended(self) -> None:
        self._listing = False


# Versions of the operator's own writes remembered at most: a write's echo comes within a watch
# delivery of its answer, long before this many writes later (at 180 writes a second, a minute).
MAX_OWN_VERSIONS = 10_000


@dataclass
class OwnWritesRule:
    """Which MODIFIED lines need not be decoded: the echoes of this process's own writes, known
    by the versions the API server answered them with (``remember``)."""

    _versions: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def __len__(self) -> int:
        return len(self._versions)

    def remember(self, response: Mapping[str, Any]) -> None:
        """A write's answer: its object's resourceVersion is this process's."""
        metadata = response.get("metadata")
        version = metadata.get("resourceVersion") if isinstance(metadata, Mapping) else None
        if isinstance(version, str) and version.isdigit():
            self._versions[version] = None
            if len(self._versions) > MAX_OWN_VERSIONS:
                self._versions.popitem(last=False)

    def unread(self, line: bytes) -> UnreadEvent | None:
        framed = _framed(line)
        if framed is None or framed.group(1) != b"MODIFIED" or not self._versions:
            return None
        version = _only_version(line)
        if version is None or version not in self._versions:
            return None
        del self._versions[version]
        return UnreadEvent(version, "own")

    def settled(self, event_type: str, body: Mapping[str, Any], applied: bool) -> None:
        """Nothing to learn from a line decoded."""

    def listing_began(self) -> None:
        self._versions.clear()

    def listing_ended(self) -> None:
        """Nothing to settle: a listing writes nothing."""
