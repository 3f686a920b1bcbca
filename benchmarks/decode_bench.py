"""Benchmark (not a test): what the garbage collector costs while LIST pages become facts.

    python benchmarks/decode_bench.py                  # 100,000 pods, pages of 250
    python benchmarks/decode_bench.py --pods 20000

The operator's start is mostly decoding LIST pages and keeping a few facts of each object.
Each variant runs in a fresh interpreter: the workloads benchmark's pods (~2.5 KB of JSON,
GPU and CPU pods owned by Jobs), pre-encoded in pages, decoded and turned into facts by the
real extractor into a real FactStore, the facts kept (as the operator keeps them). The
baseline is the same work with the cyclic collector switched off, in the same run; the
operator's setting is ``controller.main.GC_THRESHOLDS`` with ``gc.freeze()`` at start.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time

from workloads_bench import pod_body

from fabriccap.controller.main import settle_heap, tune_garbage_collection
from fabriccap.controller.store import FactStore
from fabriccap.core.facts import FactsExtractor
from fabriccap.kube.kinds import BY_KIND
from support.configs import build_config

PAGE_SIZE = 250
VARIANTS = ("no collector (baseline)", "default thresholds", "operator's thresholds")


def pages(pods: int) -> list[bytes]:
    encoded = []
    for start in range(0, pods, PAGE_SIZE):
        items = [
            pod_body(index, f"node-{index % 10_000:05d}", gpu=index % 5 == 0, efa=index % 10 == 0)
            for index in range(start, min(start + PAGE_SIZE, pods))
        ]
        encoded.append(json.dumps({"kind": "PodList", "items": items}).encode())
    return encoded


def run_variant(variant: int, pods: int) -> float:
    encoded = pages(pods)
    extractor = FactsExtractor(build_config({"workloads": {"enabled": True}}))
    store = FactStore()
    upsert = BY_KIND["Pod"].upsert
    gc.collect()
    if variant == 0:
        gc.disable()
    elif variant == 2:
        tune_garbage_collection()
    started = time.perf_counter()
    for page in encoded:
        for item in json.loads(page)["items"]:
            upsert(store, extractor, item)
    if variant == 2:
        settle_heap()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--variant", type=int, choices=range(len(VARIANTS)), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant is not None:
        print(f"{run_variant(args.variant, args.pods):.4f}")
        return 0
    print(f"python {sys.version.split()[0]}; {args.pods:,} pods in pages of {PAGE_SIZE}, decoded into facts")
    seconds = []
    for variant, label in enumerate(VARIANTS):
        runs = [
            float(
                subprocess.run(
                    [sys.executable, __file__, "--pods", str(args.pods), "--variant", str(variant)],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )
            for _ in range(3)
        ]
        seconds.append(min(runs))
        print(f"{label:>24}: {min(runs):.2f} s (best of 3)   ratio {min(runs) / seconds[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
