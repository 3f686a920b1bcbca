"""Reading snapshots (``kubectl get nodes,pods,daemonsets,resourceslices -A -o json``) into a fact index.

Input is hostile until proven otherwise: it is read with a bound (``DEFAULT_MAX_INPUT_BYTES``,
raised with ``--max-input-size``), devices that never end (``/dev/zero``, ``/dev/urandom``)
are refused before a byte is read, a FIFO without a writer is not waited for, and nesting
too deep for the parser or integers too long to convert are input errors, not tracebacks.
"""

from __future__ import annotations

import json
import logging
import os
import select
import stat
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

import yaml

from fabriccap.core.facts import FactsError, FactsExtractor, IgnoredObjectError, object_name
from fabriccap.core.index import FactIndex
from fabriccap.core.workloads import learn_from_object
from fabriccap.kube.kinds import BY_KIND

logger = logging.getLogger(__name__)

# 512 MiB: twice the largest snapshot a 10,000-node cluster prints (~450 MB as JSON).
DEFAULT_MAX_INPUT_BYTES = 512 * 1024 * 1024
# A pipe that sends nothing for this long is given up on (its writer hangs, or never came).
PIPE_IDLE_SECONDS = 60.0
# How long a FIFO without a writer is given to get one before it counts as empty input.
NO_WRITER_GRACE_SECONDS = 1.0
_CHUNK = 1024 * 1024


class SnapshotError(ValueError):
    """Unusable input; the message names the file and the problem."""


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"


def _too_large(source: str, limit: int) -> SnapshotError:
    return SnapshotError(f"{source}: larger than the input limit of {_size(limit)} (raise it with --max-input-size)")


def _documents(text: str, source: str) -> list[Any]:
    stripped = text.lstrip()
    if not stripped:
        raise SnapshotError(f"{source}: empty input")
    # JSON first: it is what kubectl prints, and json is an order of magnitude faster than
    # YAML on a 10,000-node snapshot.
    if stripped[0] in "{[":
        try:
            return [json.loads(text)]
        except RecursionError:
            raise SnapshotError(f"{source}: JSON nested too deeply to be a Kubernetes object") from None
        except json.JSONDecodeError as error:
            if stripped[0] == "[":
                raise SnapshotError(f"{source}: malformed JSON at line {error.lineno}: {error.msg}") from None
            json_error: json.JSONDecodeError | None = error
        except ValueError as error:  # e.g. an integer of thousands of digits (int-string limit)
            raise SnapshotError(f"{source}: unusable JSON value: {_first_line(error)}") from None
        else:  # pragma: no cover - returned above
            json_error = None
    else:
        json_error = None
    try:
        return [document for document in yaml.safe_load_all(text) if document is not None]
    except RecursionError:
        raise SnapshotError(f"{source}: YAML nested too deeply to be a Kubernetes object") from None
    except ValueError as error:  # yaml's int constructor hits the int-string limit as well
        if json_error is not None:
            raise SnapshotError(f"{source}: malformed JSON at line {json_error.lineno}: {json_error.msg}") from None
        raise SnapshotError(f"{source}: unusable YAML value: {_first_line(error)}") from None
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


def _first_line(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _read_stream(stream: IO[str], source: str, limit: int) -> str:
    text = stream.read(limit + 1)
    if len(text.encode("utf-8", errors="replace")) > limit:
        raise _too_large(source, limit)
    return text


def _read_pipe(descriptor: int, source: str, limit: int) -> bytes:
    """Read a FIFO or pipe (opened non-blocking) to its end, bounded in size and in silence.

    With no writer at all a read returns end-of-file at once; with a writer that has not
    written yet it would block (EAGAIN here). A named FIFO's writer may still be opening it
    when we look, so an end-of-file before any data is trusted only after a short grace.
    """
    chunks: list[bytes] = []
    total = 0
    opened = idle_since = time.monotonic()
    while True:
        try:
            chunk = os.read(descriptor, _CHUNK)
        except BlockingIOError:  # a writer is there, nothing to read yet
            select.select([descriptor], [], [], 1.0)
            if time.monotonic() - idle_since > PIPE_IDLE_SECONDS:
                raise SnapshotError(f"{source}: no data for {PIPE_IDLE_SECONDS:.0f}s; giving up on the pipe") from None
            continue
        if not chunk:
            if not chunks and time.monotonic() - opened < NO_WRITER_GRACE_SECONDS:
                time.sleep(0.05)  # no writer yet: it may be opening the FIFO right now
                continue
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise _too_large(source, limit)
        chunks.append(chunk)
        idle_since = time.monotonic()


def read_source(path: str, stdin: IO[str] | None = None, limit: int = DEFAULT_MAX_INPUT_BYTES) -> str:
    if path == "-":
        return _read_stream(stdin or sys.stdin, "<stdin>", limit)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise SnapshotError(f"{path}: no such file") from None
    except OSError as error:
        raise SnapshotError(f"{path}: cannot read: {error.strerror or error}") from None
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        raise SnapshotError(f"{path}: is a directory")
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        kind = "character device" if stat.S_ISCHR(mode) else "block device" if stat.S_ISBLK(mode) else "socket"
        raise SnapshotError(f"{path}: is a {kind}, not a file; pass a file, a pipe, or - for standard input")
    if stat.S_ISREG(mode) and info.st_size > limit:
        raise _too_large(path, limit)
    try:
        if stat.S_ISFIFO(mode):
            # Non-blocking open: a FIFO nobody writes to must not hang the command.
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                raw = _read_pipe(descriptor, path, limit)
            finally:
                os.close(descriptor)
        else:
            with open(path, "rb") as handle:
                raw = handle.read(limit + 1)  # the size may have grown since stat
            if len(raw) > limit:
                raise _too_large(path, limit)
        return raw.decode("utf-8")
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
            # A Job, JobSet or claim template in the snapshot tells whose a pod is, or what it claims.
            learn_from_object(facts, body, extractor.on_refused)
            continue
        if not watched.wanted_by(extractor.config):
            continue  # as the operator, which does not watch it (Karpenter's kinds, turned off)
        try:
            watched.upsert(facts, extractor, body)
        except IgnoredObjectError as error:
            logger.warning("%s: ignoring %s", source, error)
            continue
        except FactsError as error:
            raise SnapshotError(f"{source}: {error}") from None
        if strict_quantities and watched.kind == "ResourceSlice":
            name = object_name((body.get("metadata") or {}).get("name"))
            problem = facts.slices[name].problem if name in facts.slices else None
            if problem:
                raise SnapshotError(f"{source}: {problem}")
        if strict_quantities and watched.kind == "Node":
            name = object_name((body.get("metadata") or {}).get("name"))
            for entry in facts.nodes[name].unusable:
                if entry.malformed:
                    raise SnapshotError(f"{source}: Node {name}: {entry.problem}")


def _check_identity(body: Mapping[str, Any], source: str, seen_nodes: dict[str, str]) -> None:
    """What an API server guarantees and a hand-made snapshot may not: one Node per name, and
    the API version the kind is read in."""
    watched = BY_KIND.get(str(body.get("kind")))
    if watched is None:
        return
    name = str((body.get("metadata") or {}).get("name", "")) if isinstance(body.get("metadata"), Mapping) else ""
    api_version = body.get("apiVersion")
    if api_version is not None and api_version != watched.resource.api_version:
        raise SnapshotError(
            f"{source}: {watched.kind} {name}: apiVersion {api_version!r} is not {watched.resource.api_version}"
        )
    if watched.kind == "Node" and name:
        if name in seen_nodes:
            where = "earlier in it" if seen_nodes[name] == source else f"in {seen_nodes[name]}"
            raise SnapshotError(f"{source}: Node {name} appears twice (also {where})")
        seen_nodes[name] = source


def load_snapshots(
    paths: Iterable[str],
    extractor: FactsExtractor,
    stdin: IO[str] | None = None,
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> FactIndex:
    facts = FactIndex()
    seen_nodes: dict[str, str] = {}
    for path in paths:
        source = "<stdin>" if path == "-" else path
        text = read_source(path, stdin, max_input_bytes)
        for document in _documents(text, source):
            bodies = list(_objects(document, source))
            for body in bodies:
                _check_identity(body, source, seen_nodes)
            add_bodies(facts, extractor, bodies, source)
    return facts
