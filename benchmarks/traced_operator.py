"""The operator under tracemalloc, for finding what holds memory in a benchmark's run.

    python benchmarks/traced_operator.py OUT.json run --kubeconfig … (fabriccap's own arguments)

runs ``fabriccap`` with tracemalloc on. On SIGUSR1 it writes the Python allocations alive at
that moment to OUT.json: their total, and the largest places that made them (file:line, size,
count), twice: where the allocation itself was made (``top``, often inside json or pydantic),
and the innermost line of fabriccap that led to it (``top_fabriccap``: which of its structures
holds the memory); and the RSS before and after glibc's ``malloc_trim(0)`` gives back the free
memory it holds (the snapshot itself costs memory: compare two runs' figures, not one with its
RSS).
transport_bench.py's ``--tracemalloc DIR`` runs the operator so and compares two runs.
tracemalloc sees Python's live allocations only, not what the allocators keep after a free.
"""

from __future__ import annotations

import ctypes
import json
import runpy
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType
from typing import Any

TOP = 60
# Frames kept per allocation: enough to climb out of json, pydantic and the standard library
# to the fabriccap line that asked for it. It is slow: at 2,000 nodes and 10,000 pods the
# start took 119 s under it (the untraced one takes a few seconds), so trace small worlds.
FRAMES = 16


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def write_snapshot(out: Path) -> None:
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    stats = snapshot.statistics("lineno")
    top = [{"where": str(stat.traceback[0]), "size": stat.size, "count": stat.count} for stat in stats[:TOP]]
    report: dict[str, Any] = {"total": sum(stat.size for stat in stats), "top_fabriccap": by_fabriccap_line(snapshot)}
    report["rss_before_trim"] = rss_bytes()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    report["rss_after_trim"] = rss_bytes()
    out.write_text(json.dumps({**report, "top": top}, indent=1))


def by_fabriccap_line(snapshot: tracemalloc.Snapshot) -> list[dict[str, Any]]:
    """The live allocations summed by the innermost frame in fabriccap's package (the line of
    ours that made them, however deep in a library the allocation itself happened)."""
    sizes: dict[str, list[int]] = {}
    for stat in snapshot.statistics("traceback"):
        # A traceback runs from the oldest frame kept to the most recent: read it backwards.
        ours = next((frame for frame in reversed(stat.traceback) if "/fabriccap/" in frame.filename), None)
        where = f"{ours.filename.split('/fabriccap/', 1)[1]}:{ours.lineno}" if ours else "(outside fabriccap)"
        total = sizes.setdefault(where, [0, 0])
        total[0] += stat.size
        total[1] += stat.count
    ranked = sorted(sizes.items(), key=lambda item: -item[1][0])[:TOP]
    return [{"where": where, "size": size, "count": count} for where, (size, count) in ranked]


def main() -> None:
    out, arguments = Path(sys.argv[1]), sys.argv[2:]
    tracemalloc.start(FRAMES)

    def dump(_signal: int, _frame: FrameType | None) -> None:
        write_snapshot(out)

    signal.signal(signal.SIGUSR1, dump)
    sys.argv = ["fabriccap", *arguments]
    runpy.run_module("fabriccap", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
