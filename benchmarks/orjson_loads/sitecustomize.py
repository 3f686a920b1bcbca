"""A measurement, not the product: every ``json.loads`` in a process started with this directory
on ``PYTHONPATH`` decodes with orjson (a development dependency).

    PYTHONPATH=benchmarks/orjson_loads python benchmarks/scale_bench.py --nodes 100000 \\
        --pods 1000000 --pools 5000 --baseline-runs 1 --no-unpaged --no-paged --start-only

Every process of the run inherits it: the benchmark, its baseline client and the operator. It
answers two questions: how fast the best plain client lists when it decodes with the fastest
decoder on PyPI, and what the operator's start would be with it (docs/performance.md, "The best
client decodes faster than the baseline does"). A call with arguments json.loads takes and
orjson does not (``object_hook=``, ...) still goes to json.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_json_loads = json.loads


def _loads(s: str | bytes | bytearray, **kwargs: Any) -> Any:
    if kwargs:
        return _json_loads(s, **kwargs)
    return orjson.loads(s)


json.loads = _loads
