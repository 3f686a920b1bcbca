"""Benchmark (not a test): one evaluation of every pool, as the operator's first round makes it.

    python benchmarks/round_bench.py                  # 5,000 one-node pools; ~1 min
    python benchmarks/round_bench.py --pools 1000 --runs 9

``--pools`` pools of one EFA node each (a Ready plugin pod per node), each running one Job's
GPU pod that does not ask for the fabric: every pool has a FabricNotRequested Event to word,
as at a 100,000-node start where every pool runs jobs over TCP. In one process:
- the baseline: ``evaluate(..., preview=True)``, the same evaluation without the Events (what
  the operator's preview before its first round computes);
- the round: ``evaluate(...)`` with no problem warned before, every pool's Event built.

Each is the median of ``--runs`` (no memo: every run evaluates every pool afresh). The ratio
round / preview is what wording the Events adds to a round.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from fabriccap.controller.store import FactStore
from fabriccap.core.config import build_config
from fabriccap.core.evaluate import Evaluation, evaluate
from fabriccap.core.facts import FactsExtractor
from fabriccap.kube.kinds import BY_KIND
from fabriccap_devtools.world import daemon_set, node, owner_reference, plugin_pods, workload_pod


def median_seconds(run: Callable[[], Evaluation], runs: int) -> tuple[float, Evaluation]:
    times: list[float] = []
    result = None
    for _ in range(runs):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    assert result is not None
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pools", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    config = build_config({})
    store, extractor = FactStore(), FactsExtractor(config)
    bodies = [daemon_set()]
    for index in range(args.pools):
        name = f"node-{index:06d}"
        bodies += [node(name, efa=32, pool=f"pool-{index:06d}"), *plugin_pods([name])]
        owner = owner_reference("Job", "batch/v1", f"job-{index:06d}")
        bodies.append(workload_pod(name, f"job-{index:06d}-0", efa=None, owner=owner))
    for body in bodies:
        BY_KIND[str(body["kind"])].upsert(store, extractor, body)
    preview, _ = median_seconds(lambda: evaluate(config, store, preview=True), args.runs)
    round_seconds, result = median_seconds(lambda: evaluate(config, store), args.runs)
    print(f"pools={args.pools} runs={args.runs} events={len(result.workload_events)}")
    print(f"preview (no Events): {preview:.3f} s, {preview / args.pools * 1e6:.0f} us a pool")
    print(f"round (every Event worded): {round_seconds:.3f} s = {round_seconds / preview:.2f}x the preview")


if __name__ == "__main__":
    main()
