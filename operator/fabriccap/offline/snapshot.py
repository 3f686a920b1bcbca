"""Reading snapshots (``kubectl get nodes,pods,daemonsets -A -o json``) into a fact index."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import yaml

from fabriccap.core.facts import FactsError, FactsExtractor
from fabriccap.core.index import FactIndex
from fabriccap.kube.kinds import BY_KIND


class SnapshotError(ValueError):
    """Unusable input; the message names the file and the problem."""


def _documents(text: str, source: str) -> list[Any]:
    stripped = text.lstrip()
    if not stripped:
        raise SnapshotError(f"{source}: empty input")
    # JSON first: it is what kubectl prints, and json is an order of magnitude faster than
    # YAML on a 10,000-node snapshot.
    if stripped[0] in "{[":
        try:
            return [json.loads(text)]
        except json.JSONDecodeError as error:
            if stripped[0] == "[":
                raise SnapshotError(f"{source}: malformed JSON at line {error.lineno}: {error.msg}") from None
            json_error: json.JSONDecodeError | None = error
        else:  # pragma: no cover - returned above
            json_error = None
    else:
        json_error = None
    try:
        return [document for document in yaml.safe_load_all(text) if document is not None]
    except yaml.YAMLError as error:
        if json_error is not None:
            raise SnapshotError(f"{source}: malformed JSON at line {json_error.lineno}: {json_error.msg}") from None
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or "syntax error"
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SnapshotError(f"{source}: malformed YAML{where}: {problem}") from None


def _objects(document: Any, source: str) -> Iterator[Mapping[str, Any]]:
    if not isinstance(document, Mapping) or not isinstance(document.get("kind"), str):
        raise SnapshotError(f"{source}: not a Kubernetes object or v1 List (no 'kind' field)")
    kind = document["kind"]
    if kind == "List" or (kind.endswith("List") and "items" in document):
        items = document.get("items")
        if items is None:
            return
        if not isinstance(items, list):
            raise SnapshotError(f"{source}: {kind}.items is not a list")
        implied_kind = kind.removesuffix("List") if kind != "List" else None
        for index, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise SnapshotError(f"{source}: items[{index}] is not an object")
            if "kind" not in item and implied_kind:
                # Typed lists (NodeList from the API) leave kind off their items.
                item = {**item, "kind": implied_kind}
            if not isinstance(item.get("kind"), str):
                raise SnapshotError(f"{source}: items[{index}] is not a Kubernetes object (no 'kind' field)")
            yield item
    else:
        yield document


def read_source(path: str, stdin: IO[str] | None = None) -> str:
    if path == "-":
        return (stdin or sys.stdin).read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SnapshotError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SnapshotError(f"{path}: is a directory") from None
    except UnicodeDecodeError:
        raise SnapshotError(f"{path}: not a text file (not UTF-8)") from None
    except OSError as error:
        raise SnapshotError(f"{path}: cannot read: {error.strerror or error}") from None


def add_bodies(
    facts: FactIndex,
    extractor: FactsExtractor,
    bodies: Iterable[Mapping[str, Any]],
    source: str,
    strict_quantities: bool = True,
) -> None:
    """Index the bodies of the watched kinds; a repeated object counts once (the last wins).

    A quantity out of range counts as 0 (the node fails its pool closed, as in the operator).
    One that is not a quantity at all never comes from an API server: in a snapshot
    (``strict_quantities``) that is an input error naming the node and the field.
    """
    for body in bodies:
        watched = BY_KIND.get(str(body.get("kind")))
        if watched is None:
            continue
        try:
            watched.upsert(facts, extractor, body)
        except FactsError as error:
            raise SnapshotError(f"{source}: {error}") from None
        if strict_quantities and watched.kind == "Node":
            name = str((body.get("metadata") or {}).get("name"))
            for entry in facts.nodes[name].unusable:
                if entry.malformed:
                    raise SnapshotError(f"{source}: Node {name}: {entry.problem}")


def load_snapshots(paths: Iterable[str], extractor: FactsExtractor, stdin: IO[str] | None = None) -> FactIndex:
    facts = FactIndex()
    for path in paths:
        source = "<stdin>" if path == "-" else path
        text = read_source(path, stdin)
        for document in _documents(text, source):
            add_bodies(facts, extractor, _objects(document, source), source)
    return facts
