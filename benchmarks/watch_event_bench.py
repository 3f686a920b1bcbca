"""Benchmark (not a test): what the checks on every watch line cost, per event.

    nice -n 10 python benchmarks/watch_event_bench.py

Every watch line is JSON-decoded; since issue 27 (round 3 L5, L6, L11) each decoded line is
also checked before anything reads it (``informers.read_event``: an object, a known type, an
``object`` and a ``metadata`` map, the watched kind, a resourceVersion) and its version is
compared as a number with the view's (plausibility, progress). This prints both per event for a
realistic Node (the body ``operator_bench.py`` creates: ~40 images, 8 conditions, EKS labels),
and the checks as a share of the decode every event pays anyway. Best of 5 repeats.
"""

from __future__ import annotations

import json
import timeit

from operator_bench import node_body

from fabriccap.controller.informers import _number as resource_version_number  # what _advances and _check_plausible use
from fabriccap.controller.informers import read_event

REPEATS = 5
EVENTS = 20_000


def per_event(statement: object, number: int) -> float:
    assert callable(statement)
    return min(timeit.repeat(statement, number=number, repeat=REPEATS)) / number


def main() -> int:
    body = node_body(7, "p5")
    body.setdefault("apiVersion", "v1")
    body.setdefault("kind", "Node")
    body["metadata"]["resourceVersion"] = "123456"
    line = json.dumps({"type": "MODIFIED", "object": body})
    decoded = json.loads(line)
    decode = per_event(lambda: json.loads(line), EVENTS // 10)
    check = per_event(lambda: read_event(decoded, "Node"), EVENTS)
    compare = per_event(lambda: (resource_version_number("123456"), resource_version_number("123455")), EVENTS)
    print(f"Node event line: {len(line)} bytes")
    print(f"json.loads (every event, before and after): {decode * 1e6:.1f} us/event")
    print(f"read_event: {check * 1e6:.2f} us/event; resourceVersion compare: {compare * 1e6:.2f} us/event")
    print(f"checks / decode: {(check + compare) / decode:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
