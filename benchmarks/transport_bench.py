"""Benchmark (not a test): transport at scale, the same cluster with transport off and on.

    python benchmarks/transport_bench.py                                   # 10,000 nodes, 20,000 GPU pods
    python benchmarks/transport_bench.py --nodes 200 --pods 400 --probes 3  # small, ~6 min

One fresh kube-apiserver + etcd on 127.0.0.1 holds nodes as in operator_bench (10-12 KB each,
EFA 32, a Ready plugin pod each; pools of 50) and GPU pods bound to them (8 GPUs each, half
with EFA 32; ~2.5 KB each, owned by Jobs), their containers running since the population.

A control plane without kubelets cannot serve ``pods/log``, so the operator reaches the API
server through the log front (fabriccap_devtools.logstub), in this process: it passes every
request on and answers ``pods/log`` itself with real NCCL excerpts of the corpus, chosen per pod
by a hash of its name (10 % sockets, 10 % cut before the choice, 80 % EFA: BENCH_LOGS). The
front counts what it answers and what it passes on; the API server does no work for a log
read here, which a kubelet would do in a cluster. Both runs go through the front.

Each run (transport off, then on, one operator each, the second after the first stopped):
- start: `fabriccap run` to every FabricCapability published;
- backlog (on): every pod's first read (their containers are past the first step, so they are
  due at once): how long, and the log requests per second meanwhile (bounded by readsPerSecond);
- steady: for ``--steady-seconds``, the requests per second the front passes on (API requests)
  and the log requests per second;
- probes (on): a new GPU pod requesting EFA on a quiet pool, its container started now (status
  written), whose log shows sockets: the time from the container's start to the pool's
  ``status.workloads.transport.socket.pods`` counting it, as a watch delivers it; the first read
  is ``readAfterSeconds[0]`` after the start (60 s by default: ``--first-read-seconds``);
- the operator's CPU seconds (user + system, /proc) and RSS (current and peak) at the end.
Results are printed as JSON; docs/performance.md records the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from operator_bench import (
    NODES_PER_POOL,
    all_published,
    create_nodes_with_plugin,
    gather_bounded,
    install_crd,
    node_body,
)
from workloads_bench import NAMESPACE, pod_body

from fabriccap.kube.client import KubeClient, connect
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import FABRIC_CAPABILITIES, PODS
from fabriccap_devtools.controlplane import LocalControlPlane
from fabriccap_devtools.launch import local_run_command
from fabriccap_devtools.logstub import BENCH_LOGS, LogStub, corpus_logs

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SOCKET_SHARE = BENCH_LOGS[0][0]  # the first hundredths of the hash go to the socket excerpt


def rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def running_status(started_at: str) -> dict[str, Any]:
    return {
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": True,
                    "restartCount": 0,
                    "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/ml/trainer:2026-11-30",
                    "state": {"running": {"startedAt": started_at}},
                }
            ],
        }
    }


async def create_running_pod(client: KubeClient, body: dict[str, Any], started_at: str) -> None:
    await client.create(PODS.collection(NAMESPACE), body)
    await client.merge_patch(PODS.status(body["metadata"]["name"], NAMESPACE), running_status(started_at))


async def populate(client: KubeClient, nodes: int, pods: int) -> tuple[list[str], list[str]]:
    """Nodes in pools of 50, the last pool kept for the probes; GPU pods on the others."""
    pools = [f"p5-tr-{i:03d}" for i in range((nodes + NODES_PER_POOL - 1) // NODES_PER_POOL)]
    bodies = [node_body(i, pools[i // NODES_PER_POOL]) for i in range(nodes)]
    await create_nodes_with_plugin(client, bodies)
    await client.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    names = [body["metadata"]["name"] for body in bodies]
    quiet = names[-NODES_PER_POOL:] if len(pools) > 1 else names
    busy = names[: len(names) - NODES_PER_POOL] if len(pools) > 1 else names
    started_at = rfc3339(time.time())
    await gather_bounded(
        [
            create_running_pod(
                client, pod_body(index, busy[index % len(busy)], gpu=True, efa=index % 2 == 0), started_at
            )
            for index in range(pods)
        ],
        limit=32,
    )
    return pools, quiet


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def rss_mib(pid: int) -> tuple[float, float]:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def socket_probe_name(probe: int) -> str:
    """A probe pod whose name hashes to the socket excerpt (BENCH_LOGS)."""
    suffix = 0
    while True:
        name = f"probe-{probe:03d}-{suffix}"
        if zlib.crc32(f"{NAMESPACE}/{name}".encode()) % 100 < SOCKET_SHARE:
            return name
        suffix += 1


def socket_pods(obj: dict[str, Any]) -> int:
    transport = ((obj.get("status") or {}).get("workloads") or {}).get("transport") or {}
    return int((transport.get("socket") or {}).get("pods") or 0)


async def wait_socket_pods(client: KubeClient, name: str, count: int, timeout: float) -> None:
    """Until the pool's socket count is ``count``, as a watch of it delivers the status."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obj = await client.get(FABRIC_CAPABILITIES.item(name))
        if socket_pods(obj) == count:
            return
        with contextlib.suppress(KubeError, TimeoutError):
            async with asyncio.timeout(max(deadline - time.monotonic(), 0.01)):
                async for event in client.watch(
                    FABRIC_CAPABILITIES.collection(),
                    obj["metadata"]["resourceVersion"],
                    field_selector=f"metadata.name={name}",
                ):
                    if event.get("type") == "ERROR":
                        # 410 Gone (the backlog outlasted the watch cache's history) or another
                        # refusal: its object is a Status; read the pool again and watch from there.
                        break
                    if socket_pods(event.get("object") or {}) == count:
                        return
    raise TimeoutError(f"{name}: socket pods never reached {count}")


async def run_operator(
    client: KubeClient,
    stub: LogStub,
    directory: Path,
    pools: list[str],
    quiet: list[str],
    pods: int,
    transport: bool,
    args: argparse.Namespace,
) -> dict[str, Any]:
    label = "on" if transport else "off"
    config: dict[str, Any] = {"debounceSeconds": 0.2}
    if transport:
        steps = [args.first_read_seconds, *(step for step in (300, 900, 3600) if step > args.first_read_seconds)]
        config["transport"] = {"enabled": True, "readAfterSeconds": steps}
    config_file = directory / f"config-{label}.yaml"
    config_file.write_text(json.dumps(config))
    log = (directory / f"operator-{label}.log").open("w")
    results: dict[str, Any] = {}
    before_logs, before_forwarded = stub.stats.requests, stub.stats.forwarded
    started = time.monotonic()
    command = local_run_command(stub.kubeconfig_for(directory / "front.kubeconfig"), config_file)
    traced = Path(args.tracemalloc) / f"operator-{label}.json" if args.tracemalloc else None
    if traced is not None:  # [python, -m, fabriccap, run, …] → the traced wrapper
        command = [command[0], str(Path(__file__).with_name("traced_operator.py")), str(traced), *command[3:]]
    operator = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        await asyncio.wait_for(all_published(client, {f"efa-{pool}" for pool in pools}, operator), timeout=3600)
        results["start_s"] = time.monotonic() - started
        if transport:
            # Every pod's first read: due at once (their containers are past the first step).
            # The RSS against the reads done, every 10 s: its slope is what one more verdict
            # costs, apart from what the first reads cost once.
            samples: list[tuple[int, float]] = []
            sampled = 0.0
            while stub.stats.requests - before_logs < pods:
                if time.monotonic() - started > args.backlog_timeout:
                    results["backlog_unfinished_reads"] = pods - (stub.stats.requests - before_logs)
                    break
                if time.monotonic() - sampled >= 10.0:
                    samples.append((stub.stats.requests - before_logs, rss_mib(operator.pid)[0]))
                    sampled = time.monotonic()
                await asyncio.sleep(1.0)
            results["rss_marginal_bytes_per_read"] = marginal_bytes_per_read(samples, pods)
            backlog = time.monotonic() - started
            results["backlog_s"] = backlog
            results["backlog_log_requests_per_s"] = (stub.stats.requests - before_logs) / backlog
        window_logs, window_forwarded, window_started = stub.stats.requests, stub.stats.forwarded, time.monotonic()
        await asyncio.sleep(args.steady_seconds)
        window = time.monotonic() - window_started
        results["steady_forwarded_requests_per_s"] = (stub.stats.forwarded - window_forwarded) / window
        results["steady_log_requests_per_s"] = (stub.stats.requests - window_logs) / window
        if transport and args.probes:
            latencies = []
            quiet_pool = f"efa-{pools[-1]}"
            for probe in range(args.probes):
                name = socket_probe_name(probe)
                started_at = time.time()
                body = pod_body(30_000_000 + probe, quiet[probe % len(quiet)], gpu=True, efa=True, name=name)
                await create_running_pod(client, body, rfc3339(started_at))
                await wait_socket_pods(client, quiet_pool, 1, timeout=args.first_read_seconds + 600)
                latencies.append(time.time() - started_at)
                await client.delete(PODS.item(name, NAMESPACE), body={"gracePeriodSeconds": 0})
                await wait_socket_pods(client, quiet_pool, 0, timeout=120)
            results["probe_start_to_verdict_s"] = [round(latency, 2) for latency in latencies]
        results["log_requests"] = stub.stats.requests - before_logs
        results["forwarded_requests"] = stub.stats.forwarded - before_forwarded
        results["cpu_s"] = cpu_seconds(operator.pid)
        results["rss_mib"], results["peak_rss_mib"] = rss_mib(operator.pid)
        if traced is not None:
            results["traced_python_mib"] = await traced_total(operator, traced)
    finally:
        operator.terminate()
        operator.wait(timeout=30)
    return results


def marginal_bytes_per_read(samples: list[tuple[int, float]], pods: int) -> float | None:
    """The least-squares slope of RSS (MiB) over reads done, in bytes a read, from the samples
    past the first quarter of the backlog (the first reads pay the allocators' one-off growth)."""
    late = [(float(reads), rss) for reads, rss in samples if reads >= pods / 4]
    if len(late) < 3:
        return None
    mean_x = sum(x for x, _ in late) / len(late)
    mean_y = sum(y for _, y in late) / len(late)
    spread = sum((x - mean_x) ** 2 for x, _ in late)
    if spread == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in late) / spread * 2**20


async def traced_total(operator: subprocess.Popen[bytes], out: Path) -> float:
    """Ask the traced operator for its snapshot (SIGUSR1) and return its Python total, MiB."""
    out.unlink(missing_ok=True)
    operator.send_signal(signal.SIGUSR1)
    for _ in range(600):
        if out.exists():
            with contextlib.suppress(ValueError):
                return float(json.loads(out.read_text())["total"]) / 2**20
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no tracemalloc snapshot in {out}")


def compare_snapshots(directory: Path) -> None:
    """The places whose live allocations grew most from the run without transport to the run
    with it, per GPU pod is for the reader to divide."""
    off, on = (json.loads((directory / f"operator-{label}.json").read_text()) for label in ("off", "on"))
    before = {entry["where"]: entry for entry in off["top"]}
    grown = sorted(
        ((entry["size"] - before.get(entry["where"], {}).get("size", 0), entry) for entry in on["top"]),
        key=lambda pair: -pair[0],
    )
    for label, report in (("off", off), ("on", on)):
        print(
            f"{label}: python live {report['total'] / 2**20:.1f} MiB;"
            f" RSS {report['rss_before_trim'] / 2**20:.1f} MiB, after malloc_trim(0)"
            f" {report['rss_after_trim'] / 2**20:.1f} MiB"
        )
    for growth, entry in grown[:25]:
        print(f"{growth / 1024:10.1f} KiB  {entry['count']:8d} blocks  {entry['where']}")


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"nodes": args.nodes, "gpu_pods": args.pods}
    with (
        tempfile.TemporaryDirectory(prefix="fabriccap-transport-bench-") as tmp,
        LocalControlPlane(Path(tmp) / "cp") as cp,
    ):
        info = cp.info
        install_crd([str(info.kubectl), f"--kubeconfig={info.kubeconfig}"])
        async with await connect(str(info.kubeconfig)) as client:
            started = time.monotonic()
            pools, quiet = await populate(client, args.nodes, args.pods)
            results["populate_s"] = time.monotonic() - started
            with LogStub(info.kubeconfig, corpus_logs(prefix=b"[rank0] loading checkpoint shard 1/4\n" * 200)) as stub:
                for transport in (False, True):
                    results[f"transport_{'on' if transport else 'off'}"] = await run_operator(
                        client, stub, Path(tmp), pools, quiet, args.pods, transport, args
                    )
                results["log_bytes_served"] = stub.stats.bytes
    return results


def ratio(on: float, off: float) -> float | None:
    return on / off if off else None


def versus_baseline(results: dict[str, Any]) -> dict[str, Any]:
    """Transport on against its baseline in the same run (transport off, same cluster, same
    front): each figure with its seconds or MiB, and their ratio."""
    off, on = results["transport_off"], results["transport_on"]
    pods = results["gpu_pods"]
    compared: dict[str, Any] = {}
    for name in ("start_s", "cpu_s", "rss_mib", "peak_rss_mib", "steady_forwarded_requests_per_s"):
        compared[name] = {"off": off[name], "on": on[name], "ratio": ratio(on[name], off[name])}
    # The target: at most one log request per pod per retry step, and RSS grown by no more
    # than the verdicts kept (a verdict, an evidence line of 200 characters, the run's state).
    compared["log_requests_per_pod"] = on["log_requests"] / pods if pods else None
    compared["rss_growth_bytes_per_pod"] = (on["rss_mib"] - off["rss_mib"]) * 1024 * 1024 / pods if pods else None
    compared["rss_marginal_bytes_per_read"] = on.get("rss_marginal_bytes_per_read")
    return compared


def print_table(compared: dict[str, Any]) -> None:
    print("transport on vs off (baseline: the same run with transport off):")
    for name, figures in compared.items():
        if isinstance(figures, dict):
            shown = "-" if figures["ratio"] is None else f"{figures['ratio']:.2f}x"
            print(f"  {name:34} off {figures['off']:10.3f}  on {figures['on']:10.3f}  ratio {shown}")
        else:
            print(f"  {name:34} {'-' if figures is None else f'{figures:.3f}'}")


def rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [rounded(item) for item in value]
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=20_000, help="GPU pods, half requesting EFA")
    parser.add_argument("--steady-seconds", type=float, default=60.0)
    parser.add_argument("--probes", type=int, default=5, help="new pods timed from container start to verdict")
    parser.add_argument(
        "--first-read-seconds", type=float, default=60.0, help="readAfterSeconds[0] (default 60, the product's)"
    )
    parser.add_argument(
        "--tracemalloc",
        metavar="DIR",
        help="run the operator under tracemalloc; compare its snapshots (off, on) in DIR",
    )
    parser.add_argument("--backlog-timeout", type=float, default=3600.0, help="give up waiting for the first reads")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; python {sys.version.split()[0]}", flush=True)
    started = time.monotonic()
    results = asyncio.run(bench(args))
    results["versus_baseline"] = versus_baseline(results)
    results["bench_s"] = time.monotonic() - started
    print(json.dumps(rounded(results), indent=1), flush=True)
    print_table(results["versus_baseline"])
    if args.tracemalloc:
        compare_snapshots(Path(args.tracemalloc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
