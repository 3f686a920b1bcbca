"""Benchmark (not a test): the bytes the publisher keeps per pool, and per GPU pod with its judgement.

    python benchmarks/pool_memory_bench.py                  # 500 one-node pools, 2,000 GPU pods; ~1.5 min
    python benchmarks/pool_memory_bench.py --pools 400 --pods 4000

memory_bench.py measures the facts kept per object; this measures what the operator keeps
per pool once it has published it, and per GPU pod once a round has judged it. The real
``Publisher`` runs in-process against the fake API server of the tests (tests/support), with
tracemalloc on (16 frames):
- ``--pools`` pools of one EFA node each are started and written: the evaluation memo, the
  published status, the object's state, its metrics;
- then ``--pods`` Job-owned GPU pods asking for EFA are put on one 50-node pool and a round
  judges them: their facts, the index's maps, the memo's judgements.

Each phase prints its live bytes per pool (or pod) by the innermost fabriccap line that
allocated them, after a collection. What the fake API server itself holds (its copy of every
object) is left out: it is the cluster's, not the operator's. The figures are Python's live
allocations: the RSS adds the allocators' free space, which scale_bench.py measures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tracemalloc
from collections import Counter
from pathlib import Path

# The fake API server and its publisher set-up are the tests' (tests/support).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fabriccap_devtools.world import workload_pod
from support.publishing import Setup, healthy, publishing, start

FRAMES = 16
TOP = 12
POD_POOL_NODES = 50
PODS_PER_JOB = 8
PACKAGE = "/fabriccap/"
SETTLE_ROUNDS, SETTLE_SECONDS = 100, 0.05
# The fake API server and the bodies the world's builders make: they stand for the cluster.
CLUSTER = (str(Path(__file__).resolve().parents[1] / "tests" / "support"), "/fabriccap_devtools/")


def where(traceback: tracemalloc.Traceback) -> str | None:
    """The innermost fabriccap line that led to an allocation; None for the cluster's."""
    for frame in reversed(traceback):  # from the most recent frame outwards
        if frame.filename.startswith(CLUSTER[0]) or CLUSTER[1] in frame.filename:
            return None
        if PACKAGE in frame.filename:
            return f"{frame.filename.split(PACKAGE, 1)[1]}:{frame.lineno}"
    return "(outside fabriccap)"


def report(label: str, before: tracemalloc.Snapshot, count: int) -> None:
    gc.collect()
    after = tracemalloc.take_snapshot()
    by_line: Counter[str] = Counter()
    for stat in after.compare_to(before, "traceback"):
        line = where(stat.traceback)
        if line is not None:
            by_line[line] += stat.size_diff
    total = sum(by_line.values())
    print(f"{label}: {total / count:,.0f} bytes each over {count:,} (the fake cluster's objects left out)")
    for line, size in by_line.most_common(TOP):
        print(f"  {size / count:8,.0f}  {line}")


async def settle(setup: Setup) -> None:
    """Until the writes and what they started (their tasks, the client's requests) are over:
    what is still alive then is what the operator keeps."""
    await setup.publisher.finish_writes()
    for _ in range(SETTLE_ROUNDS):
        if len(asyncio.all_tasks()) <= 1:  # this one
            break
        await asyncio.sleep(SETTLE_SECONDS)


async def measure(pools: int, pods: int) -> None:
    async with publishing() as setup:
        for index in range(pools):
            setup.add(healthy(f"p{index:05d}", f"n{index:05d}"))
        nodes = [f"gpu-{index:03d}" for index in range(POD_POOL_NODES)]
        setup.add(healthy("gpu", *nodes))
        gc.collect()
        before = tracemalloc.take_snapshot()
        await start(setup)
        await settle(setup)
        report("per pool, published", before, pools + 1)

        bodies = [
            workload_pod(
                nodes[index % len(nodes)],
                f"job-{index // PODS_PER_JOB:06d}-{index % PODS_PER_JOB}",
                efa=32,
                owner={
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": f"job-{index // PODS_PER_JOB:06d}",
                    "uid": f"uid-{index // PODS_PER_JOB:06d}",
                    "controller": True,
                },
            )
            for index in range(pods)
        ]
        gc.collect()
        before = tracemalloc.take_snapshot()
        setup.add(bodies)
        del bodies  # the informers drop the bodies too: only what the operator keeps counts
        await setup.publisher.reconcile_once()
        await settle(setup)
        report("per GPU pod, judged (the strings it keeps of its body left out)", before, pods)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pools", type=int, default=500)
    parser.add_argument("--pods", type=int, default=2_000)
    args = parser.parse_args()
    tracemalloc.start(FRAMES)
    asyncio.run(measure(args.pools, args.pods))
    return 0


if __name__ == "__main__":
    sys.exit(main())
