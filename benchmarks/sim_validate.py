"""Benchmark (not a test): is the simulator faithful? The existing benchmarks, run unchanged on
kube-apiserver and on scalesim, side by side.

    python benchmarks/sim_validate.py                         # operator_bench at 10,000 nodes
    python benchmarks/sim_validate.py --bench workloads       # workloads_bench at 10,000 / 100,000
    python benchmarks/sim_validate.py --nodes 1000 --order sim,real

Each backend runs the same benchmark code (``operator_bench.bench`` or ``workloads_bench.bench``):
the same bodies created through the same client, the same operator command, the same
measurements. The only difference is the server: a fresh local control plane (kube-apiserver
+ etcd), or a fresh scalesim process with no world, which the benchmark populates through the
API like the real one. The table at the end gives each operator-side figure on both and the
difference in percent (target: within 15%).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import operator_bench
import workloads_bench

from fabriccap_devtools.scalesim import Simulator

# The figures compared, per benchmark: the operator's side (the baselines are listed too, to
# show what each server itself costs).
COMPARED = {
    "operator": [
        "bare_list_s",
        "start_s",
        "start_ratio",
        "rss_after_start_mib",
        "peak_rss_after_start_mib",
        "latency_median_s",
        "latency_p99_s",
        "burst_evaluation_rounds",
        "burst_status_writes",
        "quiet_status_writes",
        "rss_end_mib",
        "peak_rss_mib",
        "node_body_kib",
    ],
    "workloads": [
        "bare_list_nodes_s",
        "bare_list_pods_s",
        "start_s",
        "start_ratio",
        "rss_after_start_mib",
        "peak_rss_after_start_mib",
        "probe_latency_median_s",
        "probe_latency_p99_s",
        "probe_api_latency_median_s",
        "probe_api_latency_p99_s",
        "churn_status_writes",
        "writes_per_pool_per_window",
        "churn_rounds",
        "rss_end_mib",
        "peak_rss_mib",
    ],
}


class SimulatorAsControlPlane:
    """What the benchmarks use of a LocalControlPlane (``.info.kubeconfig``), from scalesim."""

    def __init__(self, directory: Path) -> None:
        self.simulator = Simulator(directory)

    def __enter__(self) -> SimulatorAsControlPlane:
        self.simulator.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.simulator.stop()

    @property
    def info(self) -> SimpleNamespace:
        return SimpleNamespace(kubeconfig=self.simulator.kubeconfig, kubectl=Path("/bin/false"))


@contextlib.contextmanager
def backend(name: str) -> Iterator[None]:
    """Point both benchmark modules at the simulator (the CRD is built in: nothing to apply)."""
    if name == "real":
        yield
        return
    modules = (operator_bench, workloads_bench)
    saved = [(module, module.LocalControlPlane, module.install_crd) for module in modules]
    try:
        for module in modules:
            setattr(module, "LocalControlPlane", SimulatorAsControlPlane)  # noqa: B010 (module globals)
            setattr(module, "install_crd", lambda _kubectl: None)  # noqa: B010
        yield
    finally:
        for module, control_plane, install in saved:
            setattr(module, "LocalControlPlane", control_plane)  # noqa: B010
            setattr(module, "install_crd", install)  # noqa: B010


def load_average() -> float:
    return os.getloadavg()[0]


def run(bench: str, server: str, args: argparse.Namespace) -> dict[str, Any]:
    print(f"--- {bench} on {server}: load average {load_average():.2f}", flush=True)
    started = time.perf_counter()
    with backend(server):
        if bench == "operator":
            results = asyncio.run(operator_bench.bench(args.nodes, args.changes, args.quiet_seconds))
        else:
            results = asyncio.run(workloads_bench.bench(args.nodes, args.pods, args.churn_seconds, args.probes))
    results["wall_s"] = time.perf_counter() - started
    results["load_after"] = load_average()
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in results.items()}, indent=1), flush=True)
    return results


def difference(real: Any, simulated: Any) -> str:
    if not isinstance(real, int | float) or not isinstance(simulated, int | float):
        return ""
    if real == 0:
        return "0%" if simulated == 0 else "n/a"
    return f"{(simulated - real) / real * 100:+.0f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", choices=["operator", "workloads"], default="operator")
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--quiet-seconds", type=float, default=60.0)
    parser.add_argument("--churn-seconds", type=float, default=60.0)
    parser.add_argument("--probes", type=int, default=40)
    parser.add_argument("--order", default="real,sim", help="which server first (the machine warms up)")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; python {sys.version.split()[0]}", flush=True)
    results = {server: run(args.bench, server, args) for server in args.order.split(",")}
    real, simulated = results.get("real", {}), results.get("sim", {})
    print(f"\n| {args.bench}_bench, {args.nodes} nodes | kube-apiserver | scalesim | difference |")
    print("|---|---:|---:|---:|")
    for key in COMPARED[args.bench]:
        real_value, simulated_value = real.get(key), simulated.get(key)
        shown = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in (real_value, simulated_value)]
        print(f"| {key} | {shown[0]} | {shown[1]} | {difference(real_value, simulated_value)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
