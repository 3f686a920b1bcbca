"""YAML and JSON documents from users' files, loaded within bounds.

A snapshot or a config file is hostile until proven otherwise, and a small one can be the most
costly: PyYAML shares what an alias names, so 7.5 KB of aliases (a pod whose 1,000 containers
share one 1,000-variable list, repeated 200 times) parse in milliseconds and then cost minutes
to every walk of the result. ``BoundedLoader`` refuses such a document while composing it, by
a node budget that counts each alias at the size of what it names (``node_budget``). It also
refuses what no Kubernetes object holds and would only fail later, far from its line:

- nesting deeper than ``MAX_NESTING_DEPTH``;

- a mapping key that is not a string (``? [a, b]: x``, ``1: x``);
- an integer beyond 64 bits: ``0xfff…`` of 5,000 digits, or base 60 (``59:59:…``), passes
  YAML, since Python's limit on integer digits applies to decimal only, and then fails every
  conversion back to text;
- a string holding a lone UTF-16 surrogate (``"\\ud800"``): it cannot be encoded, so it fails
  wherever it is hashed, written or printed.

JSON cannot alias and Python's parser bounds its integers, but ``"\\ud800"`` decodes there too:
``lone_surrogate_at`` finds it in a parsed document.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from fabriccap.core.text import clean_text

if yaml.__with_libyaml__:
    from yaml._yaml import CParser

# Nodes a document may expand to, aliases counted at their expanded size: a constant for the
# small files whose anchors are a convenience (a config's shared selector), plus two per input
# character. No YAML text composes to more nodes than characters without an alias, so nothing
# written out in full ever meets the bound.
NODE_BUDGET_BASE = 100_000
NODES_PER_CHARACTER = 2
# Kubernetes numbers are int64 (or float64). A numeric scalar longer than this is refused
# before it is converted, so base 60 (``1:59:59:…``, quadratic to convert) costs nothing.
MAX_NUMBER_CHARACTERS = 256
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Kubernetes objects nest a few dozen levels (a CRD's schema the most); composing is
# recursive, so a deeper document is refused here rather than by Python's recursion limit.
MAX_NESTING_DEPTH = 256
_TOO_DEEP = f"nested too deeply (more than {MAX_NESTING_DEPTH} levels)"

_SURROGATE = re.compile(r"[\ud800-\udfff]")
# JSON and YAML spell a surrogate only as an escape (``\ud83d``); a text without one holds none.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]|\\U0000[dD][89a-fA-F]")
_MERGE_TAG = "tag:yaml.org,2002:merge"
_TYPE_NAMES = {
    dict: "a mapping",
    list: "a sequence",
    int: "an integer",
    bool: "a boolean",
    float: "a number",
    type(None): "null",
    bytes: "binary data",
}


def node_budget(characters: int) -> int:
    """How many nodes a YAML text of ``characters`` characters may expand to."""
    return NODE_BUDGET_BASE + NODES_PER_CHARACTER * characters


class RefusedDocumentError(yaml.MarkedYAMLError):
    """A document this module refuses (not a YAML syntax error): its ``problem`` says why and
    ``problem_mark`` where, so it is worth showing whole."""

    def __init__(self, problem: str, mark: Any) -> None:  # PyYAML's Mark, or libyaml's
        super().__init__(problem=problem, problem_mark=mark)


def _kind_of(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), f"a {type(value).__name__}")


class _PythonEvents(Reader, Scanner, Parser):
    """PyYAML's own parser, where PyYAML was built without libyaml (a source install)."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)


class BoundedLoader(Composer, SafeConstructor, Resolver):
    """PyYAML's safe loader with the bounds above; subclasses may refuse keys
    (``refuse_key``), as the config's loader does duplicates.

    The events come from libyaml's parser (about 25 times faster than PyYAML's own scanner,
    which takes a second for the 150 KB of a hostile file); composing them into nodes stays
    here, in Python, where the budget is kept."""

    def __init__(self, stream: str) -> None:
        self._events: CParser | _PythonEvents = CParser(stream) if yaml.__with_libyaml__ else _PythonEvents(stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self.node_budget = node_budget(len(stream))
        self.nodes_expanded = 0
        self.depth = 0
        # Expanded size of each anchored node of the current document, known once it is
        # composed: an alias to an anchor missing here sits inside the node it names.
        self.anchor_sizes: dict[str, int] = {}

    def check_event(self, *choices: type[yaml.Event]) -> bool:
        return bool(self._events.check_event(*choices))

    def peek_event(self) -> yaml.Event | None:
        return self._events.peek_event()

    def get_event(self) -> yaml.Event | None:
        return self._events.get_event()

    def dispose(self) -> None:
        self._events.dispose()

    def _spend(self, nodes: int, mark: Any) -> None:
        self.nodes_expanded += nodes
        if self.nodes_expanded > self.node_budget:
            raise RefusedDocumentError(
                f"the input expands to more than {self.node_budget:,} nodes through its YAML aliases "
                "(each alias repeats what it names; the limit grows with the input's size)",
                mark,
            )

    def compose_document(self) -> Node | None:
        self.anchor_sizes = {}
        return super().compose_document()

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()
        if not isinstance(event, yaml.NodeEvent):  # pragma: no cover - the parser guarantees one
            return super().compose_node(parent, index)
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)  # refuses an undefined alias
            size = self.anchor_sizes.get(str(event.anchor))
            if size is None:
                raise RefusedDocumentError(
                    f"alias *{event.anchor} sits inside the node it names (a structure that contains itself)",
                    event.start_mark,
                )
            self._spend(size, event.start_mark)
            return node
        before = self.nodes_expanded
        self._spend(1, event.start_mark)
        self.depth += 1
        if self.depth > MAX_NESTING_DEPTH:
            raise RefusedDocumentError(_TOO_DEEP, event.start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        if event.anchor is not None:
            self.anchor_sizes[event.anchor] = self.nodes_expanded - before
        return node

    def refuse_key(self, key: str, key_node: Node, seen: dict[str, Node]) -> None:
        """Called for each key of a mapping before its merge keys are applied; ``seen`` holds
        the keys before it."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        # ``!!map scalar`` reaches here with a scalar node: the base refuses it with its line.
        if isinstance(node, MappingNode):
            seen: dict[str, Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue  # ``<<: *base``: the keys merged in are checked where they are written
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, str):
                    raise RefusedDocumentError(
                        f"a mapping key must be a string, not {_kind_of(key)}", key_node.start_mark
                    )
                self.refuse_key(key, key_node, seen)
                seen[key] = key_node
        mapping: dict[Hashable, Any] = super().construct_mapping(node, deep=deep)
        return mapping

    def construct_yaml_str(self, node: ScalarNode) -> str:
        value: str = super().construct_yaml_str(node)
        # Only an escape (a double-quoted scalar) can spell a surrogate: the reader refuses them
        # in the text itself.
        if node.style == '"' and _SURROGATE.search(value):
            raise RefusedDocumentError(
                "a string holds a lone UTF-16 surrogate (an escape such as \\ud800 alone), which is not text",
                node.start_mark,
            )
        return value

    def _number_text(self, node: ScalarNode) -> None:
        text = self.construct_scalar(node)
        if len(text) > MAX_NUMBER_CHARACTERS:
            raise RefusedDocumentError(
                f"a number of {len(text):,} characters is out of range (at most {MAX_NUMBER_CHARACTERS})",
                node.start_mark,
            )

    def construct_yaml_int(self, node: ScalarNode) -> int:
        self._number_text(node)
        value: int = super().construct_yaml_int(node)
        if not INT64_MIN <= value <= INT64_MAX:
            raise RefusedDocumentError("an integer beyond 64 bits is out of range", node.start_mark)
        return value

    def construct_yaml_float(self, node: ScalarNode) -> float:
        self._number_text(node)
        value: float = super().construct_yaml_float(node)
        return value

    # The constructors by tag, as SafeLoader's, with these three replaced (the table holds
    # functions, so overriding a method alone would not change what runs).
    yaml_constructors = {
        **SafeConstructor.yaml_constructors,
        "tag:yaml.org,2002:str": construct_yaml_str,
        "tag:yaml.org,2002:int": construct_yaml_int,
        "tag:yaml.org,2002:float": construct_yaml_float,
    }


def duplicate_key(key: str) -> str:
    """The one rule for a key given twice in one mapping, in a config or a snapshot, YAML or
    JSON: refused, never last-wins. A reader sees the first value; the tool would use the last
    (a Node's ``efa: "0"`` then ``efa: "32"`` would be Ready), and a misplaced override goes
    unnoticed. Hand edits and merges are where duplicates come from, and where this matters."""
    return f"duplicate key {clean_text(key, 120)!r}"


class UniqueKeyLoader(BoundedLoader):
    """The bounded loader refusing duplicate keys (``duplicate_key``), with the lines of both."""

    def refuse_key(self, key: str, key_node: Node, seen: dict[str, Node]) -> None:
        if key in seen:
            raise RefusedDocumentError(
                f"{duplicate_key(key)} (first at line {seen[key].start_mark.line + 1})", key_node.start_mark
            )


class DuplicateKeyError(ValueError):
    """A JSON object with a key given twice (``unique_keys``); the message is ``duplicate_key``'s."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook`` for the ``duplicate_key`` rule. json keeps no
    line, so the refusal names the key only."""
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"{duplicate_key(key)} in a JSON object")
            seen.add(key)
    return mapping


def load_yaml_documents(text: str, loader: type[BoundedLoader] = BoundedLoader) -> list[Any]:
    """Every document of ``text``, empty ones left out. Raises ``yaml.YAMLError``
    (``RefusedDocumentError`` for what the bounds refuse), ``ValueError`` or ``RecursionError``."""
    reading = loader(text)
    try:
        documents = []
        while reading.check_node():  # PyYAML's load_all, typed
            document = reading.construct_document(reading.get_node())
            if document is not None:
                documents.append(document)
        return documents
    except yaml.MarkedYAMLError as error:
        # libyaml's scanner reads flow collections ahead and has a depth limit of its own (1,000
        # levels), which it may reach before the composer reaches ours: the same refusal.
        if error.problem and "maximum nesting depth" in error.problem:
            raise RefusedDocumentError(_TOO_DEEP, error.problem_mark) from None
        raise
    finally:
        reading.dispose()


def load_yaml_document(text: str, loader: type[BoundedLoader] = BoundedLoader) -> Any:
    """The one document of ``text`` (None when empty); raises as ``load_yaml_documents``, and
    ``yaml.YAMLError`` when there is more than one."""
    documents = load_yaml_documents(text, loader)
    if len(documents) > 1:
        raise RefusedDocumentError("expected one YAML document, found more", None)
    return documents[0] if documents else None


def may_hold_surrogates(text: str) -> bool:
    """Whether a JSON or YAML text spells a surrogate at all (a cheap test before a walk)."""
    return _SURROGATE_ESCAPE.search(text) is not None


# A place in a document: its parent's place and its key (or index) there; None is the top.
_Where = tuple["_Where", str | int] | None
MAX_SHOWN_KEY = 63


def lone_surrogate_at(document: Any) -> str | None:
    """Where the first string holding a lone surrogate is in a parsed JSON document (keys
    included), as ``items[0].metadata.labels``; None when there is none. A surrogate pair is
    one character once decoded, so any surrogate left is alone."""
    # Iterative: JSON nests as deep as the parser allowed, deeper than Python's recursion. Each
    # entry links to its parent's, so the path is spelt only for the string found.
    stack: list[tuple[_Where, Any]] = [(None, document)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return _spelt(where)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str) and _SURROGATE.search(key):
                    return f"{_spelt(where)}, a key"
                stack.append(((where, key), item))
        elif isinstance(value, list):
            stack.extend(((where, index), item) for index, item in enumerate(value))
    return None


def _spelt(where: _Where) -> str:
    parts: list[str] = []
    while where is not None:
        where, key = where
        if isinstance(key, int):
            parts.append(f"[{key}]")
        else:
            # The key is the input's: shown bounded, and encodable even when it is the culprit.
            shown = key.encode("ascii", "backslashreplace").decode("ascii")
            shown = shown if len(shown) <= MAX_SHOWN_KEY and shown.isprintable() else repr(shown[:MAX_SHOWN_KEY])
            parts.append(f".{shown}")
    return "".join(reversed(parts)).removeprefix(".") or "(top level)"
