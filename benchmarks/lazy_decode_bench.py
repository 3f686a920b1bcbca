"""Benchmark (not a test): would a lazy JSON decoder shorten the 100,000-node start?

    python -m venv /tmp/sj && /tmp/sj/bin/pip install pysimdjson          # not a dependency
    PYTHONPATH=operator:/tmp/sj/lib/python3.11/site-packages python benchmarks/lazy_decode_bench.py

The start decodes every Node line and every GPU pod's (``kube.client.decode_json``, orjson),
and most of a served Node is what no fact reads: ``status.images`` and ``metadata.managedFields``
(the pods' managedFields too). simdjson (pysimdjson's DOM parser) validates a whole document
first and builds Python objects only for what is asked, so the question is whether building
everything but those two costs less than orjson building everything. This prints, per line
as scalesim serves it in a streaming list (its world's Node and GPU pod, with the server's
metadata and managedFields), orjson's decode against simdjson's parse alone and its parse plus
the pruned objects (everything orjson builds, less those two keys; checked equal to orjson's
result with them dropped). Ratios are to orjson on the same line, in the same run; best of 5.
"""

from __future__ import annotations

import importlib
import tempfile
import timeit
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fabriccap.kube.client import decode_json
from fabriccap_devtools.scalesim import Simulator
from fabriccap_devtools.scalesim.world import ScaleWorld

REPEATS = 5
NUMBER = 2_000
# What no fact reads, by the top-level field it sits under (facts.py reads neither).
UNREAD_KEYS = {"metadata": frozenset({"managedFields"}), "status": frozenset({"images"})}
STREAMING_LIST = "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"


def served_lines() -> tuple[bytes, bytes]:
    """A Node line and a GPU pod line of a streaming list, as scalesim serves them."""
    with tempfile.TemporaryDirectory() as directory:
        spec = ScaleWorld(nodes=4, pods=40, pools=1).spec()
        with Simulator(Path(directory) / "sim", world=spec, plain_http=True) as simulator:
            found: dict[str, bytes] = {}
            for kind, path, mark in (
                ("node", "/api/v1/nodes", b'"Node"'),
                ("pod", "/api/v1/pods", b'"nvidia.com/gpu"'),
            ):
                with urllib.request.urlopen(f"{simulator.info.server}{path}?{STREAMING_LIST}", timeout=30) as stream:
                    found[kind] = next(line for line in stream if mark in line and b'"BOOKMARK"' not in line)
    return found["node"], found["pod"]


def pruned_decoder(simdjson: Any) -> Callable[[bytes], dict[str, Any]]:
    """simdjson's parse, building every value but the unread keys. Keys are walked and indexed:
    ``items()`` would build each value whole."""
    parser = simdjson.Parser()

    def built(value: Any) -> Any:
        if hasattr(value, "as_dict"):
            return value.as_dict()
        return value.as_list() if hasattr(value, "as_list") else value

    def decode(line: bytes) -> dict[str, Any]:
        document = parser.parse(line)
        event: dict[str, Any] = {}
        for key in document:
            if key != "object":
                event[key] = built(document[key])
                continue
            body, kept = document[key], {}
            for field in body:
                value, unread = body[field], UNREAD_KEYS.get(field)
                if unread is not None and hasattr(value, "as_dict"):
                    kept[field] = {name: built(value[name]) for name in value if name not in unread}
                else:
                    kept[field] = built(value)
                del value
            event[key] = kept
            del body
        del document  # the parser is reused: no proxy of this document may outlive the call
        return event

    return decode


def without_unread(event: dict[str, Any]) -> dict[str, Any]:
    for field, keys in UNREAD_KEYS.items():
        part = event["object"].get(field)
        for key in keys if isinstance(part, dict) else ():
            part.pop(key, None)
    return event


def per_line(statement: Callable[[], object]) -> float:
    return min(timeit.repeat(statement, number=NUMBER, repeat=REPEATS)) / NUMBER


def main() -> int:
    try:
        simdjson = importlib.import_module("simdjson")
    except ImportError:
        print("pysimdjson is not installed (it is not a dependency): see this file's docstring")
        return 2
    node, pod = served_lines()
    decode = pruned_decoder(simdjson)
    parser = simdjson.Parser()
    for what, line in (("Node", node), ("GPU pod", pod)):
        if decode(line) != without_unread(decode_json(line)):
            print(f"{what}: the pruned decode differs from orjson's")
            return 1
        baseline = per_line(lambda: decode_json(line))  # noqa: B023 - called at once, in this iteration
        parse_only = per_line(lambda: parser.parse(line) and None)  # noqa: B023
        pruned = per_line(lambda: decode(line))  # noqa: B023
        print(f"{what} line of {len(line):,} bytes: orjson {baseline * 1e6:.1f} us")
        print(f"  simdjson parse alone   {parse_only * 1e6:6.1f} us = {parse_only / baseline:.2f}x")
        print(f"  simdjson parse, pruned {pruned * 1e6:6.1f} us = {pruned / baseline:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
