#!/usr/bin/env python3
"""Benchmark: ``fabriccap evaluate`` on a 10,000-node snapshot, against a bare ``json.load``.

    python benchmarks/evaluate_bench.py [--nodes 10000] [--pools 20] [--runs 3] [--keep FILE]

Builds a snapshot the way ``kubectl get nodes,pods,daemonsets -A -o json`` prints it for a big
EKS cluster (node bodies of ~18 KB as the API serves them: 40 images, full managedFields,
8 conditions, EKS/Karpenter labels; one aws-node pod per node, an EFA device-plugin pod per
accelerated node), then measures, each best of ``--runs`` in a fresh subprocess so that peak
RSS is per run:

- ``json.load`` of the file: the floor any tool reading the file pays;
- ``fabriccap.cli.commands.main(["evaluate", "-f", FILE, "-o", "json"])`` in-process, stdout to
  /dev/null, timed after imports (the same code path as the command);
- the ``fabriccap evaluate`` command itself, wall clock including interpreter start-up.

The figure that matters is evaluate / json.load (target: at most 1.5): reading facts out of
the parsed bodies, evaluating and printing must cost little next to parsing the JSON.
Results are recorded in docs/performance.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
GENERATOR = REPO_ROOT / "examples" / "generate_cluster.py"
TARGET_RATIO = 1.5


def load_generator() -> ModuleType:
    """examples/generate_cluster.py, whose body builders make realistic objects."""
    spec = importlib.util.spec_from_file_location("generate_cluster", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolves annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class PoolPlan:
    name: str
    instance_type: str
    provisioner: str  # "nodegroup" or "karpenter"


# A big training cluster: mostly accelerated pools, a few CPU pools for the system and
# data-loading workloads. Cycled to reach --pools.
POOL_PLANS: tuple[PoolPlan, ...] = (
    PoolPlan("p5-train-a", "p5.48xlarge", "nodegroup"),
    PoolPlan("p5-train-b", "p5.48xlarge", "nodegroup"),
    PoolPlan("p5-train-c", "p5.48xlarge", "nodegroup"),
    PoolPlan("p5-train-d", "p5.48xlarge", "nodegroup"),
    PoolPlan("p5-spot", "p5.48xlarge", "karpenter"),
    PoolPlan("p4d-research", "p4d.24xlarge", "nodegroup"),
    PoolPlan("p4d-batch", "p4d.24xlarge", "karpenter"),
    PoolPlan("trn1-train-a", "trn1.32xlarge", "nodegroup"),
    PoolPlan("trn1-train-b", "trn1.32xlarge", "nodegroup"),
    PoolPlan("g6-inference-a", "g6.2xlarge", "nodegroup"),
    PoolPlan("g6-inference-b", "g6.2xlarge", "karpenter"),
    PoolPlan("p5-eval", "p5.48xlarge", "nodegroup"),
    PoolPlan("cpu-system", "m7i.4xlarge", "nodegroup"),
    PoolPlan("cpu-data-a", "m7i.4xlarge", "nodegroup"),
    PoolPlan("cpu-data-b", "m7i.4xlarge", "nodegroup"),
    PoolPlan("cpu-data-c", "m7i.4xlarge", "karpenter"),
    PoolPlan("cpu-web-a", "m7i.4xlarge", "nodegroup"),
    PoolPlan("cpu-web-b", "m7i.4xlarge", "karpenter"),
    PoolPlan("p4d-legacy", "p4d.24xlarge", "nodegroup"),
    PoolPlan("trn1-eval", "trn1.32xlarge", "karpenter"),
)


def cluster_nodes(gen: ModuleType, node_count: int, pool_count: int) -> list[Any]:
    """NodeSpecs spread evenly over the pools, with a sprinkling of real-world trouble."""
    nodes = []
    for index in range(node_count):
        pool_index = index % pool_count
        plan = POOL_PLANS[pool_index % len(POOL_PLANS)]
        name = plan.name if pool_index < len(POOL_PLANS) else f"{plan.name}-{pool_index // len(POOL_PLANS)}"
        ordinal = index // pool_count
        maximum = gen.INSTANCE_SHAPES[plan.instance_type].efa_maximum
        efa = (maximum, maximum) if maximum else (-1, -1)
        if maximum and ordinal % 97 == 13:  # a node whose plugin lost devices
            efa = (maximum, maximum // 2)
        accelerated = plan.instance_type in gen.EFA_PLUGIN_INSTANCE_TYPES
        nodes.append(
            gen.NodeSpec(
                pool=name,
                provisioner=plan.provisioner,
                instance_type=plan.instance_type,
                ip=f"10.{pool_index}.{ordinal // 250}.{ordinal % 250 + 2}",
                zone=f"{gen.REGION}{'abcd'[ordinal % 4]}",
                efa_capacity=efa[0],
                efa_allocatable=efa[1],
                cordoned=ordinal % 211 == 7,
                plugin_pod=accelerated,
                created=gen.CLUSTER_CREATED + timedelta(days=pool_index, minutes=ordinal),
            )
        )
    return nodes


def snapshot_items(gen: ModuleType, nodes: Sequence[Any]) -> Iterator[dict[str, Any]]:
    detail = gen.BodyDetail(images=40, managed_fields=True, monitoring_conditions=True)
    for node in nodes:
        yield gen.node_body(node, detail)
    for node in nodes:
        yield gen.daemon_set_pod_body(gen.AWS_NODE_DAEMON_SET, node)
    plugin_nodes = [node for node in nodes if node.plugin_pod]
    for node in plugin_nodes:
        yield gen.daemon_set_pod_body(gen.EFA_DAEMON_SET, node)
    yield gen.daemon_set_body(gen.AWS_NODE_DAEMON_SET, len(nodes), len(nodes))
    yield gen.daemon_set_body(gen.EFA_DAEMON_SET, len(plugin_nodes), len(plugin_nodes))


@dataclass(frozen=True)
class SnapshotStats:
    nodes: int
    pods: int
    daemon_sets: int
    file_bytes: int
    node_body_bytes: int  # one node, compact JSON (as the API serves it)


def write_snapshot(path: Path, node_count: int, pool_count: int) -> SnapshotStats:
    """Stream the v1 List to ``path`` in kubectl's format (sorted keys, 4-space indent)."""
    gen = load_generator()
    nodes = cluster_nodes(gen, node_count, pool_count)
    counts = {"Node": 0, "Pod": 0, "DaemonSet": 0}
    node_body_bytes = 0
    with path.open("w", encoding="utf-8") as out:
        out.write('{\n    "apiVersion": "v1",\n    "items": [\n')
        for index, item in enumerate(snapshot_items(gen, nodes)):
            counts[item["kind"]] += 1
            if not node_body_bytes:
                node_body_bytes = len(json.dumps(item, separators=(",", ":")))
            text = json.dumps(item, indent=4, sort_keys=True)
            out.write(("" if index == 0 else ",\n") + "        " + text.replace("\n", "\n        "))
        out.write('\n    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n')
    return SnapshotStats(counts["Node"], counts["Pod"], counts["DaemonSet"], path.stat().st_size, node_body_bytes)


# ---------------------------------------------------------------------------------------
# Measured work, each run in a fresh interpreter (this script with --child)


def child_json_load(path: str) -> tuple[float, float]:
    started, cpu_started = time.perf_counter(), time.process_time()
    with open(path, encoding="utf-8") as snapshot:
        json.load(snapshot)
    return time.perf_counter() - started, time.process_time() - cpu_started


def child_evaluate(path: str) -> tuple[float, float]:
    from contextlib import redirect_stdout

    from fabriccap.cli import commands as cli

    with open(os.devnull, "w", encoding="utf-8") as sink, redirect_stdout(sink):
        started, cpu_started = time.perf_counter(), time.process_time()
        code = cli.main(["evaluate", "-f", path, "-o", "json"])
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    if code != 0:
        raise SystemExit(f"fabriccap evaluate exited {code}")
    return elapsed, cpu


CHILDREN = {"json-load": child_json_load, "evaluate": child_evaluate}


def run_child(kind: str, path: str) -> None:
    seconds, cpu_seconds = CHILDREN[kind](path)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds, "peak_rss_kib": peak_kib}))


@dataclass(frozen=True)
class Run:
    seconds: float  # wall clock of the work itself (in-process) or of the whole process (command)
    # CPU time (user + system) of the same span. On a shared machine other processes stretch
    # wall clock; CPU time barely moves, so it is the steadier figure to compare.
    cpu_seconds: float
    peak_rss_kib: int


def spawn(argv: Sequence[str]) -> tuple[str, float, resource.struct_rusage]:
    """Run a process; (stdout, wall seconds, its own resource usage from wait4)."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {process.returncode}")
    return output, wall, usage


def measure_in_process(kind: str, path: Path, runs: int) -> list[Run]:
    results = []
    for _ in range(runs):
        output = spawn([sys.executable, __file__, "--child", kind, str(path)])[0]
        reported = json.loads(output)
        results.append(Run(reported["seconds"], reported["cpu_seconds"], reported["peak_rss_kib"]))
    return results


def measure_command(path: Path, runs: int) -> list[Run]:
    command = shutil.which("fabriccap") or str(Path(sys.executable).with_name("fabriccap"))
    results = []
    for _ in range(runs):
        output, wall, usage = spawn([command, "evaluate", "-f", str(path), "-o", "json"])
        if not json.loads(output)["items"]:
            raise SystemExit("fabriccap evaluate found no pool in the benchmark snapshot")
        results.append(Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss))
    return results


def machine_description() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cores} cores ({model}), Python {platform.python_version()}, {platform.system()} {platform.release()}"


def _mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


@dataclass(frozen=True)
class Best:
    seconds: float
    cpu_seconds: float
    peak_rss_kib: int


def report(label: str, runs: list[Run]) -> Best:
    best = Best(
        min(run.seconds for run in runs),
        min(run.cpu_seconds for run in runs),
        max(run.peak_rss_kib for run in runs),  # the worst peak: what to provision for
    )
    each = " ".join(f"{run.seconds:.2f}" for run in runs)
    print(
        f"  {label:<42} wall {best.seconds:6.2f} s (runs: {each})  cpu {best.cpu_seconds:6.2f} s  "
        f"peak RSS {_mib(best.peak_rss_kib)}"
    )
    return best


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pools", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", metavar="FILE", help="write the snapshot here and keep it (default: a temp file)")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_child(*args.child)
        return 0

    with tempfile.TemporaryDirectory(prefix="fabriccap-bench-") as scratch:
        path = Path(args.keep) if args.keep else Path(scratch) / "snapshot.json"
        started = time.perf_counter()
        stats = write_snapshot(path, args.nodes, args.pools)
        print(f"machine: {machine_description()}")
        print(
            f"snapshot: {stats.nodes:,} nodes in {args.pools} pools, {stats.pods:,} pods, {stats.daemon_sets} "
            f"DaemonSets; {stats.file_bytes / 1e6:,.1f} MB as kubectl prints it; one node body "
            f"{stats.node_body_bytes / 1024:.1f} KiB compact (written in {time.perf_counter() - started:.0f} s)"
        )
        print(f"best of {args.runs}, each run a fresh process (load average {os.getloadavg()[0]:.1f}):")
        load = report("json.load(file)", measure_in_process("json-load", path, args.runs))
        evaluate = report("fabriccap evaluate -o json (in-process)", measure_in_process("evaluate", path, args.runs))
        command = report("fabriccap evaluate -o json (command, wall)", measure_command(path, args.runs))
        ratio = evaluate.seconds / load.seconds
        cpu_ratio = evaluate.cpu_seconds / load.cpu_seconds
        verdict = "ok" if max(ratio, cpu_ratio) <= TARGET_RATIO else "ABOVE TARGET"
        print(
            f"ratio evaluate / json.load: wall {ratio:.2f}, cpu {cpu_ratio:.2f} (target <= {TARGET_RATIO}: {verdict})"
        )
        print(f"command start-up and imports: {command.cpu_seconds - evaluate.cpu_seconds:+.2f} s cpu over in-process")
        print(f"load average after the runs: {' '.join(f'{load:.1f}' for load in os.getloadavg())}")
    return 0 if max(ratio, cpu_ratio) <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
