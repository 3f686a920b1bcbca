#!/usr/bin/env python3
"""Benchmark: ``fabriccap evaluate`` with 1,000 Karpenter NodePools against the same snapshot without them.

    python benchmarks/nodepools_bench.py [--nodes 2000] [--pools 20] [--nodepools 1000] [--runs 3]

Writes the cluster snapshot of ``evaluate_bench.py`` (realistic node bodies, plugin pods), and
beside it a List of ``--nodepools`` NodePools and their EC2NodeClasses shaped like the real ones
in tests/fixtures/karpenter/ (GPU and Neuron families, sizes, generations, Auto Mode keys,
minValues, pinned EFA interfaces). Every NodePool's requirements differ (a generation bound and
a team label of its own), so the per-requirements cache is missed by every one of them: the
worst case, each NodePool evaluated against the full catalog once. Then, in the same run, each
best of ``--runs`` in a fresh subprocess:

- ``fabriccap evaluate -f cluster.json -o json``;
- ``fabriccap evaluate -f cluster.json -f nodepools.json -o json``;

and prints the seconds of each and their ratio. Then, in one more process, what the operator
pays: the facts of both inputs are loaded once, and ``core.evaluate.evaluate`` (the function
the operator runs every round) is timed round after round, without the NodePools and then with
them. The first round with them fills the per-requirements caches; the later ones are the
operator's steady state, and the NodePools' share of such a round is what they cost it.
Recorded in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import evaluate_bench

TYPE = "node.kubernetes.io/instance-type"
FAMILY = "karpenter.k8s.aws/instance-family"
CATEGORY = "karpenter.k8s.aws/instance-category"
GENERATION = "karpenter.k8s.aws/instance-generation"
SIZE = "karpenter.k8s.aws/instance-size"

# Requirement shapes of real NodePools (tests/fixtures/karpenter/), cycled.
SHAPES: tuple[list[dict[str, Any]], ...] = (
    [{"key": TYPE, "operator": "In", "values": ["p5.48xlarge", "p5e.48xlarge"]}],
    [{"key": FAMILY, "operator": "In", "values": ["trn1"]}],
    [
        {"key": CATEGORY, "operator": "In", "values": ["g", "p"]},
        {"key": "karpenter.k8s.aws/instance-gpu-manufacturer", "operator": "In", "values": ["nvidia"]},
    ],
    [
        {"key": FAMILY, "operator": "In", "values": ["g5", "g6", "g6e", "g7e"]},
        {"key": SIZE, "operator": "NotIn", "values": ["xlarge", "2xlarge"]},
        {"key": "karpenter.k8s.aws/instance-hypervisor", "operator": "In", "values": ["nitro"]},
    ],
    [{"key": "eks.amazonaws.com/instance-category", "operator": "In", "values": ["inf", "trn"]}],
    [
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["3"]},
        {"key": "karpenter.k8s.aws/instance-memory", "operator": "Gt", "values": ["8191"]},
    ],
    [
        {"key": TYPE, "operator": "In", "values": ["p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"]},
        {"key": FAMILY, "operator": "Exists", "minValues": 2},
    ],
    [
        {"key": CATEGORY, "operator": "In", "values": ["c", "m", "r"]},
        {"key": GENERATION, "operator": "Gt", "values": ["2"]},
    ],
)


def node_pool_items(count: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for index in range(count):
        requirements = [
            *SHAPES[index % len(SHAPES)],
            {"key": GENERATION, "operator": "Gte", "values": [str(index % 5)]},
            {"key": "team", "operator": "In", "values": [f"team-{index}"]},  # unique: no cache hit
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
        ]
        name = f"np-{index:04d}"
        node_class = f"class-{index % 10}"
        items.append(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": name, "generation": 1},
                "spec": {
                    "template": {
                        "metadata": {"labels": {"team": f"team-{index}"}},
                        "spec": {
                            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class},
                            "requirements": requirements,
                        },
                    },
                    "limits": {"cpu": "1000"},
                },
            }
        )
    for index in range(10):
        spec: dict[str, Any] = {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole"}
        if index == 9:  # one class pins EFA interfaces
            spec["networkInterfaces"] = [
                {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
                {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"},
            ]
        items.append(
            {
                "apiVersion": "karpenter.k8s.aws/v1",
                "kind": "EC2NodeClass",
                "metadata": {"name": f"class-{index}"},
                "spec": spec,
            }
        )
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pools", type=int, default=20)
    parser.add_argument("--nodepools", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fabriccap-nodepools-bench-") as scratch:
        cluster = Path(scratch) / "cluster.json"
        nodepools = Path(scratch) / "nodepools.json"
        stats = evaluate_bench.write_snapshot(cluster, args.nodes, args.pools)
        items = node_pool_items(args.nodepools)
        nodepools.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        print(f"machine: {evaluate_bench.machine_description()}")
        print(
            f"snapshot: {stats.nodes:,} nodes in {args.pools} pools, {stats.pods:,} pods; plus {args.nodepools:,}"
            f" NodePools (each with requirements of its own) and 10 EC2NodeClasses"
            f" ({nodepools.stat().st_size / 1e6:.1f} MB)"
        )
        print(f"best of {args.runs}, each run a fresh process (load average {os.getloadavg()[0]:.1f}):")
        without = evaluate_bench.report("evaluate -f cluster.json", measure(["-f", str(cluster)], args.runs))
        with_pools = evaluate_bench.report(
            "evaluate -f cluster.json -f nodepools.json",
            measure(["-f", str(cluster), "-f", str(nodepools)], args.runs),
        )
        print(
            f"ratio with / without the NodePools: wall {with_pools.seconds / without.seconds:.2f},"
            f" cpu {with_pools.cpu_seconds / without.cpu_seconds:.2f};"
            f" the NodePools cost {with_pools.cpu_seconds - without.cpu_seconds:+.2f} s cpu"
            f" ({(with_pools.cpu_seconds - without.cpu_seconds) / args.nodepools * 1000:.2f} ms each)"
        )
        output = evaluate_bench.spawn([sys.executable, __file__, "--rounds", str(cluster), str(nodepools)])[0]
        for memo, rounds in json.loads(output).items():
            bare, cold, warm = min(rounds["without"]), rounds["with"][0], min(rounds["with"][1:])
            print(
                f"one evaluation round over every pool, {memo}, cpu (best of {len(rounds['without'])}):"
                f" without the NodePools {bare:.3f} s; with them {cold:.3f} s the first time, then {warm:.3f} s;"
                f" the NodePools' share: {max(warm - bare, 0.0) / warm:.1%} of a later round"
                f" ({(warm - bare) * 1000:+.1f} ms), {(cold - bare) / cold:.1%} of the first"
            )
    return 0


def evaluation_rounds(cluster: str, nodepools: str, count: int = 5) -> None:
    """Print the CPU seconds of ``count`` evaluation rounds without, then with, the NodePools:
    as ``fabriccap evaluate`` runs one (no memo), and as the operator's full rounds do (its memo
    of the rounds before, which keeps each NodePool's verdict while what it is made of holds)."""
    import time

    from fabriccap.configfile import load_config
    from fabriccap.core.evaluate import EvaluationMemo, evaluate
    from fabriccap.core.facts import FactsExtractor
    from fabriccap.offline.snapshot import load_snapshots

    config = load_config(None)
    without = load_snapshots([cluster], FactsExtractor(config))
    with_pools = load_snapshots([cluster, nodepools], FactsExtractor(config))
    seconds: dict[str, dict[str, list[float]]] = {}
    for memo_label, memo_of in (("no memo (evaluate)", lambda: None), ("the operator's memo", EvaluationMemo)):
        seconds[memo_label] = {}
        for label, facts in (("without", without), ("with", with_pools)):
            memo = memo_of()
            samples = []
            for _ in range(count):
                started = time.process_time()
                evaluate(config, facts, memo=memo)
                samples.append(time.process_time() - started)
            seconds[memo_label][label] = samples
    print(json.dumps(seconds))


def measure(files: list[str], runs: int) -> list[evaluate_bench.Run]:
    results = []
    for _ in range(runs):
        output = evaluate_bench.spawn([sys.executable, __file__, "--child", *files])[0]
        reported = json.loads(output)
        results.append(evaluate_bench.Run(reported["seconds"], reported["cpu_seconds"], reported["peak_rss_kib"]))
    return results


def child(files: list[str]) -> None:
    import resource
    import time
    from contextlib import redirect_stdout

    from fabriccap.cli import commands as cli

    with open(os.devnull, "w", encoding="utf-8") as sink, redirect_stdout(sink):
        started, cpu_started = time.perf_counter(), time.process_time()
        code = cli.main(["evaluate", *files, "-o", "json"])
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    if code != 0:
        raise SystemExit(f"fabriccap evaluate exited {code}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": elapsed, "cpu_seconds": cpu, "peak_rss_kib": peak}))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == "--rounds":
        evaluation_rounds(sys.argv[2], sys.argv[3])
        sys.exit(0)
    sys.exit(main())
