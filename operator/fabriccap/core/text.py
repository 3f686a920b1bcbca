"""Text that others wrote, bounded and made safe before the operator repeats it.

Pod names, owner kinds and names, label values, scheduler messages: anyone who can create a pod
or label a node chooses them, and the API server checks some of them only loosely (an owner
reference's name and kind just must not be empty). The operator repeats such text in statuses,
Events, log lines, metric labels and terminals, so each piece is cleaned once, where the facts
are made (``clean_text``), and never grows past a stated limit: a 600,000-character owner name
made 600 KB Events, and a newline in one forged a complete line of the operator's log.

Two treatments, for two audiences:

- ``clean_text`` for what the operator writes (facts, and through them statuses, Events, metric
  labels): escape sequences and control characters are removed, line breaks become one space,
  and the result is cut to its limit with an ellipsis.
- ``escape_controls`` for what a person reads (log lines, terminal tables): control characters
  are shown, not obeyed (``\\n``, ``\\x1b``), so nothing can end a log record early or drive the
  terminal. kubectl does the same to what it prints (``^[`` for ESC; kubernetes#112553).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

ELLIPSIS = "..."

# The limits of the things the API server itself names: the text cut to them loses nothing
# an API server could have stored.
MAX_NAME = 253  # an object name: a DNS-1123 subdomain
MAX_NAMESPACE = 63  # a namespace: a DNS-1123 label
MAX_LABEL_VALUE = 63
MAX_KIND = 63  # a kind: its lower case is a DNS-1035 label
MAX_API_VERSION = 317  # a group (a DNS subdomain, 253) "/" a version (a DNS label, 63)
MAX_UID = 64  # a UID is a UUID (36 characters); room for other formats, none for payloads
MAX_MESSAGE = 1024  # the API server refuses longer Event messages; a scheduler message is cut to it

# ECMA-48 escape sequences, in their 7-bit (ESC ...) and 8-bit (C1) forms: CSI (colours, cursor
# moves, screen clears), the string commands OSC/DCS/SOS/PM/APC up to their terminator (window
# titles, hyperlinks, clipboard writes), and the two-character escapes (ESC 7, ESC ( B, ...).
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]"
)
_LINE_BREAKS = re.compile(r"[\t\n\v\f\r\x1c-\x1e\x85\u2028\u2029]+")
# C0 and C1 controls, DEL, the bidirectional overrides and isolates (they reorder what a
# terminal shows: "Trojan Source"), and lone surrogates (they cannot be encoded as UTF-8).
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")
_UNSAFE_OR_BREAK = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_SHOWN = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def is_decimal(text: str) -> bool:
    """Whether ``text`` is a non-negative integer as Go's strconv reads one: ASCII digits only.
    ``str.isdigit()`` is true of "²" and "①" too, which ``int()`` refuses: a value from the
    cluster checked with it alone ended what read it (a watch, a round of every pool)."""
    return text.isascii() and text.isdigit()


def first_named(names: Sequence[str], limit: int, separator: str = ", ") -> str:
    """The first ``limit`` of ``names``, the others counted: ``a, b (+3 more)``. How messages
    name a list that could be long (nodes, types, rules, drivers)."""
    shown = separator.join(names[:limit])
    return f"{shown} (+{len(names) - limit} more)" if len(names) > limit else shown


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with an ellipsis."""
    if len(text) <= limit:
        return text
    return text[: max(limit - len(ELLIPSIS), 0)] + ELLIPSIS[:limit]


def clean_text(value: object, limit: int) -> str:
    """``value`` as text with no escape sequence, control character or line break, at most
    ``limit`` characters long. The same input always gives the same output, so names cleaned
    on both sides of a comparison (a node's, a pod's ``spec.nodeName``) still match."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit and text.isprintable():
        return text  # nearly every string: no copy, no regular expression
    # Only a bounded prefix is examined, so the work is O(limit) however long the input;
    # escape sequences removed from it can only make the result shorter.
    text = text[: limit * 4 + 64]
    text = _ESCAPE_SEQUENCE.sub("", text)
    text = _LINE_BREAKS.sub(" ", text)
    text = _SURROGATES.sub("\ufffd", text)
    text = _UNSAFE.sub("", text)
    return cut(text, limit)


def escape_controls(text: str) -> str:
    """``text`` with every control character shown as an escape (``\\n``, ``\\x1b``,
    ``\\u202e``): one log record stays one line, and a terminal prints what it is given
    instead of obeying it. Idempotent: an escaped text has nothing left to escape."""
    if text.isprintable():
        return text
    return _UNSAFE_OR_BREAK.sub(_shown, text)


def _shown(match: re.Match[str]) -> str:
    character = match.group()
    if character in _SHOWN:
        return _SHOWN[character]
    code = ord(character)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
