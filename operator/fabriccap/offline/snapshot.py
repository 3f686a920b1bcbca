"""Reading snapshots (``fabriccap.kube.kinds.snapshot_kubectl()``) into a fact index.

Input is hostile until proven otherwise: it is read by the one reader of users' files
(``fabriccap.inputfile``), with a bound (``DEFAULT_MAX_INPUT_BYTES``, raised with
``--max-input-size``), refusing devices, directories and sockets before a byte is read and
never waiting for a FIFO without a writer. YAML is composed within a node budget that counts
aliases at their expanded size (``fabriccap.core.documents``); nesting too deep for the
parser, integers too long to convert and strings that cannot be encoded are input errors,
not tracebacks.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any

import yaml

from fabriccap.core.documents import (
    DuplicateKeyError,
    RefusedDocumentError,
    UniqueKeyLoader,
    load_yaml_documents,
    lone_surrogate_at,
    may_hold_surrogates,
    unique_keys,
)
from fabriccap.core.facts import FactsError, FactsExtractor, IgnoredObjectError
from fabriccap.core.index import FactIndex
from fabriccap.core.workloads import learn_from_object
from fabriccap.inputfile import InputFileError, read_input_file, shown_path
from fabriccap.kube.kinds import BY_KIND, WatchedKind, namespace_and_name, object_key

logger = logging.getLogger(__name__)

# 512 MiB: twice the largest snapshot a 10,000-node cluster prints (~450 MB as JSON).
DEFAULT_MAX_INPUT_BYTES = 512 * 1024 * 1024
RAISE_THE_LIMIT = " (raise it with --max-input-size)"


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
            return [_encodable(json.loads(text, object_pairs_hook=unique_keys), text, source)]
        except RecursionError:
            raise SnapshotError(f"{source}: JSON nested too deeply to be a Kubernetes object") from None
        except json.JSONDecodeError as error:
            if stripped[0] == "[":
                raise SnapshotError(f"{source}: malformed JSON at line {error.lineno}: {error.msg}") from None
            json_error: json.JSONDecodeError | None = error
        except SnapshotError:
            raise
        except DuplicateKeyError as error:
            raise SnapshotError(f"{source}: {error}") from None
        except ValueError as error:  # e.g. an integer of thousands of digits (int-string limit)
            raise SnapshotError(f"{source}: unusable JSON value: {_first_line(error)}") from None
        else:  # pragma: no cover - returned above
            json_error = None
    else:
        json_error = None
    try:
        # Aliases, huge integers, unencodable strings and keys that are not strings are refused
        # as the document is composed (fabriccap.core.documents), before they cost anything.
        return load_yaml_documents(text, UniqueKeyLoader)
    except RecursionError:
        raise SnapshotError(f"{source}: YAML nested too deeply to be a Kubernetes object") from None
    except ValueError as error:  # yaml's int constructor hits the int-string limit as well
        if json_error is not None:
            raise SnapshotError(f"{source}: malformed JSON at line {json_error.lineno}: {json_error.msg}") from None
        raise SnapshotError(f"{source}: unusable YAML value: {_first_line(error)}") from None
    except yaml.YAMLError as error:
        if json_error is not None and not isinstance(error, RefusedDocumentError):
            raise SnapshotError(f"{source}: malformed JSON at line {json_error.lineno}: {json_error.msg}") from None
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or "syntax error"
        where = f" at line {mark.line + 1}" if mark is not None else ""
        if isinstance(error, RefusedDocumentError):
            raise SnapshotError(f"{source}{where}: {problem}") from None
        raise SnapshotError(f"{source}: malformed YAML{where}: {problem}") from None


def _encodable(document: Any, text: str, source: str) -> Any:
    """A parsed JSON document, refused when a string in it holds a lone surrogate: an API
    server never sends one (Go writes U+FFFD instead), and it fails wherever it is encoded."""
    if may_hold_surrogates(text):
        where = lone_surrogate_at(document)
        if where is not None:
            raise SnapshotError(
                f"{source}: the string at {where} holds a lone UTF-16 surrogate (an escape such as \\ud800"
                " alone), which is not text"
            )
    return document


def _objects(document: Any, source: str) -> Iterator[Mapping[str, Any]]:
    if not isinstance(document, Mapping) or not isinstance(document.get("kind"), str):
        raise SnapshotError(f"{source}: not a Kubernetes object or v1 List (no 'kind' field)")
    kind = document["kind"]
    # "List" (kubectl's v1 List, items of any kind) or "NodeList" (the API's, items of one kind).
    element_kind = kind.removesuffix("List")
    if element_kind != kind and (not element_kind or "items" in document):
        items = document.get("items")
        if items is None:
            return
        if not isinstance(items, list):
            raise SnapshotError(f"{source}: {kind}.items is not a list")
        implied_kind = element_kind or None
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


def _first_line(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def read_source(path: str, stdin: IO[bytes] | IO[str] | None = None, limit: int = DEFAULT_MAX_INPUT_BYTES) -> str:
    """The text of one ``-f``: what is not a file or a pipe is refused before it is read
    (``fabriccap.inputfile``), and no more than ``limit`` bytes are ever held."""
    try:
        raw = read_input_file(path, limit, stdin, hint=RAISE_THE_LIMIT)
    except InputFileError as error:
        raise SnapshotError(str(error)) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SnapshotError(f"{_source(path)}: not a text file (not UTF-8)") from None


def _source(path: str) -> str:
    return "<stdin>" if path == "-" else shown_path(path)


def add_bodies(
    facts: FactIndex,
    extractor: FactsExtractor,
    bodies: Iterable[Mapping[str, Any]],
    source: str,
    strict_quantities: bool = True,
    kinds: Mapping[str, WatchedKind] = BY_KIND,
) -> None:
    """Index the bodies of the watched kinds; a repeated object counts once (the last wins).

    A quantity out of range counts as 0 (the node fails its pool closed, as in the operator).
    One that is not a quantity at all never comes from an API server: in a snapshot
    (``strict_quantities``) that is an input error naming the object and the field (the
    row's problems that carry an ``input_error``).
    """
    for body in bodies:
        watched = kinds.get(str(body.get("kind")))
        if watched is None:
            # A Job, JobSet or claim template in the snapshot tells whose a pod is, or what it claims.
            learn_from_object(facts, body, extractor.on_refused)
            continue
        if not watched.wanted_by(extractor.config):
            continue  # as the operator, which does not watch it (Karpenter's kinds, turned off)
        try:
            held = watched.upsert(facts, extractor, body)
        except IgnoredObjectError as error:
            logger.warning("%s: ignoring %s", source, error)
            continue
        except FactsError as error:
            raise SnapshotError(f"{source}: {error}") from None
        if strict_quantities:
            for problem in watched.problems(held):
                if problem.input_error:
                    raise SnapshotError(f"{source}: {problem.input_error}")


def _check_identity(
    body: Mapping[str, Any], source: str, seen: dict[tuple[str, str], str], kinds: Mapping[str, WatchedKind]
) -> None:
    """What an API server guarantees and a hand-made snapshot may not: one object per name
    where the row says so (Nodes), and the API version the kind is read in."""
    watched = kinds.get(str(body.get("kind")))
    if watched is None:
        return
    _namespace, name = namespace_and_name(body)
    api_version = body.get("apiVersion")
    if api_version is not None and api_version not in watched.api_versions:
        raise SnapshotError(
            f"{source}: {watched.kind} {name}: apiVersion {api_version!r} is not {' or '.join(watched.api_versions)}"
        )
    if watched.unique_in_snapshots and name:
        key = (watched.kind, object_key(body))
        if key in seen:
            where = "earlier in it" if seen[key] == source else f"in {seen[key]}"
            raise SnapshotError(f"{source}: {watched.kind} {name} appears twice (also {where})")
        seen[key] = source


def load_snapshots(
    paths: Iterable[str],
    extractor: FactsExtractor,
    stdin: IO[bytes] | IO[str] | None = None,
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES,
    kinds: Mapping[str, WatchedKind] = BY_KIND,
    keep: Callable[[Mapping[str, Any]], bool] | None = None,
    kept: list[Mapping[str, Any]] | None = None,
) -> FactIndex:
    """The facts of every snapshot in ``paths``; the objects ``keep`` accepts are also appended
    to ``kept`` as they are (``explain`` of a workload: the workload object itself)."""
    facts = FactIndex()
    seen: dict[tuple[str, str], str] = {}
    read: list[tuple[str, Mapping[str, Any]]] = []
    for path in paths:
        source = _source(path)
        text = read_source(path, stdin, max_input_bytes)
        for document in _documents(text, source):
            bodies = list(_objects(document, source))
            for body in bodies:
                _check_identity(body, source, seen, kinds)
                if keep is not None and kept is not None and keep(body):
                    kept.append(body)
            read.extend((source, body) for body in bodies)
    # In the order of the watched kinds, whatever the files' order: DeviceClasses before the
    # ResourceSlices that are read with them. A stable sort: within a kind, the input's order.
    order = {kind: position for position, kind in enumerate(kinds)}
    read.sort(key=lambda item: order.get(str(item[1].get("kind")), len(order)))
    for source, body in read:
        add_bodies(facts, extractor, [body], source, kinds=kinds)
    return facts
