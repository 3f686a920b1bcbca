"""Benchmark (not a test): the live operator on a local control plane at 1,000 and 5,000 nodes.

    python benchmarks/operator_bench.py                  # 1000 and 5000 nodes
    python benchmarks/operator_bench.py --nodes 1000     # one size

For each size, in one run against one fresh kube-apiserver + etcd on 127.0.0.1:
- start: time from `fabriccap run` starting to every FabricCapability published, as a ratio to
  a bare LIST of all nodes (one GET /api/v1/nodes, JSON-decoded) in the same run;
- latency: node status patch -> CR status reflecting it, median and p99 over N changes;
- burst: 1,000 relevant node patches at once -> how many evaluation rounds and status writes;
- quiet: status writes during 60 s of heartbeat-like node updates (target 0);
- RSS of the operator process (current and peak, from /proc).
Nodes carry realistic bodies (~40 images, 8 conditions, EKS labels, nodeInfo): 10-12 KB each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from fabriccap.core.api import ConditionType, condition_reason, status_written
from fabriccap.kube.client import KubeClient, connect
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import FABRIC_CAPABILITIES, NODES
from fabriccap_devtools.controlplane import LocalControlPlane
from fabriccap_devtools.launch import local_run_command
from fabriccap_devtools.seeding import create_daemon_set, create_node, create_pod

REPO = Path(__file__).resolve().parents[1]
EFA = "vpc.amazonaws.com/efa"
NODES_PER_POOL = 50
# The bound on an unpaged LIST of a whole collection, the bare-LIST baselines' read: 5,000 of
# these Nodes are ~85 MB of JSON, past the client's default bound on one answer (a page's,
# kube.exchanges.DEFAULT_MAX_BODY_BYTES), so these reads set their own.
WHOLE_LIST_BYTES = 4 * 1024 * 1024 * 1024
PLUGIN = "aws-efa-k8s-device-plugin"


def node_body(index: int, pool: str) -> dict[str, Any]:
    name = f"ip-10-{index // 250}-{index % 250}-{index % 7}.us-west-2.compute.internal"
    rng = random.Random(index)
    images = [
        {
            "names": [
                f"123456789012.dkr.ecr.us-west-2.amazonaws.com/team-{i}/training-image@sha256:{rng.getrandbits(256):064x}",
                f"123456789012.dkr.ecr.us-west-2.amazonaws.com/team-{i}/training-image:v{i}.{rng.randint(0, 99)}",
            ],
            "sizeBytes": rng.randint(10**7, 10**10),
        }
        for i in range(40)
    ]
    now = "2026-11-30T10:00:00Z"
    conditions = [
        {"type": t, "status": s, "lastHeartbeatTime": now, "lastTransitionTime": now, "reason": r, "message": m}
        for t, s, r, m in [
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ("KernelDeadlock", "False", "KernelHasNoDeadlock", "kernel has no deadlock"),
            ("ReadonlyFilesystem", "False", "FilesystemIsNotReadOnly", "Filesystem is not read-only"),
            ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
            (
                "ContainerRuntimeUnhealthy",
                "False",
                "ContainerRuntimeIsHealthy",
                "Container runtime on the node is functioning properly",
            ),
        ]
    ]
    resources = {
        "cpu": "192",
        "memory": "2097152000Ki",
        "pods": "100",
        "nvidia.com/gpu": "8",
        EFA: "32",
        "ephemeral-storage": "3758096384Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "eks.amazonaws.com/nodegroup": pool,
                "node.kubernetes.io/instance-type": "p5.48xlarge",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/region": "us-west-2",
                "topology.kubernetes.io/zone": "us-west-2a",
                "eks.amazonaws.com/capacityType": "ON_DEMAND",
                "eks.amazonaws.com/nodegroup-image": "ami-0123456789abcdef0",
                "nvidia.com/gpu.present": "true",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"providerID": f"aws:///us-west-2a/i-{index:017x}"},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": conditions,
            "images": images,
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{index // 250}.{index % 250}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "machineID": f"{rng.getrandbits(128):032x}",
                "systemUUID": f"ec2{rng.getrandbits(116):029x}",
                "bootID": f"{rng.getrandbits(128):032x}",
                "kernelVersion": "5.10.230-223.885.amzn2.x86_64",
                "osImage": "Amazon Linux 2",
                "containerRuntimeVersion": "containerd://1.7.23",
                "kubeletVersion": "v1.31.7-eks-473151a",
                "kubeProxyVersion": "v1.31.7-eks-473151a",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


async def gather_bounded(coroutines: list[Any], limit: int = 24) -> list[Any]:
    semaphore = asyncio.Semaphore(limit)

    async def run(coroutine: Any) -> Any:
        async with semaphore:
            return await coroutine

    return await asyncio.gather(*(run(c) for c in coroutines))


async def populate(client: KubeClient, count: int) -> tuple[list[dict[str, Any]], list[str]]:
    pools = [f"p5-bench-{i:03d}" for i in range((count + NODES_PER_POOL - 1) // NODES_PER_POOL)]
    bodies = [node_body(i, pools[i // NODES_PER_POOL]) for i in range(count)]
    await create_nodes_with_plugin(client, bodies)
    return bodies, pools


async def create_nodes_with_plugin(client: KubeClient, bodies: list[dict[str, Any]]) -> None:
    """The nodes, the EFA plugin's DaemonSet in kube-system and a Ready plugin pod on each node."""
    await gather_bounded([create_node(client, body) for body in bodies])
    ds = await create_daemon_set(
        client,
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": PLUGIN, "namespace": "kube-system", "labels": {"app.kubernetes.io/name": PLUGIN}},
            "spec": {
                "selector": {"matchLabels": {"name": PLUGIN}},
                "template": {
                    "metadata": {"labels": {"name": PLUGIN}},
                    "spec": {"containers": [{"name": "plugin", "image": "efa-plugin:v0.5.6"}]},
                },
            },
        },
    )
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    await gather_bounded(
        [
            create_pod(
                client,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{PLUGIN}-{i:05d}",
                        "namespace": "kube-system",
                        "labels": {"name": PLUGIN},
                        "ownerReferences": [
                            {
                                "apiVersion": "apps/v1",
                                "kind": "DaemonSet",
                                "name": PLUGIN,
                                "uid": ds["metadata"]["uid"],
                                "controller": True,
                            }
                        ],
                    },
                    "spec": {
                        "nodeName": body["metadata"]["name"],
                        "containers": [{"name": "plugin", "image": "efa-plugin:v0.5.6"}],
                    },
                    "status": ready,
                },
            )
            for i, body in enumerate(bodies)
        ]
    )


def install_crd(kubectl: list[str]) -> None:
    """Apply the FabricCapability CRD with `kubectl` (its argv, kubeconfig included) and wait for it."""
    crd = str(REPO / "crds" / "fabriccapabilities.yaml")
    subprocess.run([*kubectl, "apply", "--server-side", "-f", crd], check=True, capture_output=True)
    subprocess.run(
        [*kubectl, "wait", "--for=condition=Established", "--timeout=60s", "crd/fabriccapabilities.fabriccap.dev"],
        check=True,
        capture_output=True,
    )


def rss_kib(pid: int) -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(
            r"^(fabriccap_(?:status_writes_total|evaluations_total|evaluation_duration_seconds_(?:count|sum))"
            r"(\{[^}]*\})?) (\S+)$",
            line,
        )
        if match:
            values[match[1]] = float(match[3])
    return values


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def published(client: KubeClient) -> dict[str, dict[str, Any]]:
    for _ in range(100):
        try:
            page = await client.get(FABRIC_CAPABILITIES.collection())
            break
        except KubeError as error:  # 429 while the new CRD's storage initializes
            if error.status != 429:
                raise
            await asyncio.sleep(0.1)
    return {item["metadata"]["name"]: item for item in page["items"] if status_written(item)}


async def all_published(client: KubeClient, expected: set[str], operator: subprocess.Popen[bytes]) -> None:
    """Return once every expected FabricCapability exists with a status written (watched, not polled)."""
    with_status: set[str] = set()
    while True:
        try:
            page = await client.get(FABRIC_CAPABILITIES.collection())
        except KubeError as error:  # 429 while the new CRD's storage initializes
            if error.status != 429:
                raise
            await asyncio.sleep(0.1)
            continue
        version = page["metadata"]["resourceVersion"]
        with_status |= {o["metadata"]["name"] for o in page.get("items") or [] if status_written(o)}
        try:
            async for event in client.watch(FABRIC_CAPABILITIES.collection(), version):
                obj = event.get("object") or {}
                if event.get("type") in ("ADDED", "MODIFIED") and status_written(obj):
                    with_status.add(obj["metadata"]["name"])
                if expected <= with_status:
                    return
        except KubeError:  # the stream broke: list and watch again
            if operator.poll() is not None:
                raise RuntimeError("operator exited; see its log") from None
        if expected <= with_status:
            return


def ready_reason(obj: dict[str, Any]) -> str:
    return str(condition_reason(obj.get("status"), ConditionType.READY))


async def wait_reason(client: KubeClient, name: str, reason: str, timeout: float = 30.0) -> float:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        obj = await client.get(FABRIC_CAPABILITIES.item(name))
        if status_written(obj) and ready_reason(obj) == reason:
            return time.perf_counter()
        await asyncio.sleep(0.01)
    raise TimeoutError(f"{name} never reached {reason}")


async def bench(count: int, changes: int, quiet_seconds: float) -> dict[str, Any]:
    results: dict[str, Any] = {"nodes": count}
    with tempfile.TemporaryDirectory(prefix="fabriccap-bench-") as tmp, LocalControlPlane(Path(tmp) / "cp") as cp:
        info = cp.info
        kubectl = [str(info.kubectl), f"--kubeconfig={info.kubeconfig}"]
        install_crd(kubectl)
        async with await connect(str(info.kubeconfig)) as client:
            started = time.perf_counter()
            bodies, pools = await populate(client, count)
            results["populate_s"] = time.perf_counter() - started
            # Warm the apiserver's watch cache.
            raw = await client.request("GET", NODES.collection(), max_body_bytes=WHOLE_LIST_BYTES)
            results["node_body_kib"] = len(json.dumps(raw["items"][0])) / 1024
            list_times = []
            for _ in range(3):
                started = time.perf_counter()
                listing = await client.get(NODES.collection(), max_body_bytes=WHOLE_LIST_BYTES)
                list_times.append(time.perf_counter() - started)
                assert len(listing["items"]) == count
            del listing, raw
            results["bare_list_s"] = min(list_times)

            metrics_port = free_port()
            config = Path(tmp) / "config.yaml"
            config.write_text("debounceSeconds: 0.2\n")
            log = (Path(tmp) / "operator.log").open("w")
            started = time.perf_counter()
            operator = subprocess.Popen(
                local_run_command(info.kubeconfig, config, metrics_port),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                expected = {f"efa-{pool}" for pool in pools}
                # A watch, not polling: a poller listing every object 20 times a second would
                # load the apiserver the operator is racing against.
                await asyncio.wait_for(all_published(client, expected, operator), timeout=600)
                results["start_s"] = time.perf_counter() - started
                results["start_ratio"] = results["start_s"] / results["bare_list_s"]
                await asyncio.sleep(1.0)
                results["rss_after_start_mib"], results["peak_rss_after_start_mib"] = (
                    v / 1024 for v in rss_kib(operator.pid)
                )

                # Latency: flip one node per pool to 16 (MixedCounts), then back (UniformCapability).
                latencies = []
                for i in range(changes):
                    pool_index = i % len(pools)
                    node = bodies[pool_index * NODES_PER_POOL]["metadata"]["name"]
                    name = f"efa-{pools[pool_index]}"
                    for value, reason in (("16", "MixedCounts"), ("32", "UniformCapability")):
                        patch = {"status": {"allocatable": {EFA: value}}}
                        sent = time.perf_counter()
                        await client.merge_patch(NODES.status(node), patch)
                        latencies.append(await wait_reason(client, name, reason) - sent)
                latencies.sort()
                results["latency_samples"] = len(latencies)
                results["latency_median_s"] = statistics.median(latencies)
                results["latency_p99_s"] = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]

                # Burst: 1,000 relevant patches at once (allocatable down on 1,000 nodes), then back.
                await asyncio.sleep(1.0)
                before = scrape(metrics_port)
                burst_nodes = [b["metadata"]["name"] for b in bodies[: min(1000, count)]]
                started = time.perf_counter()
                await gather_bounded(
                    [client.merge_patch(NODES.status(n), {"status": {"allocatable": {EFA: "0"}}}) for n in burst_nodes]
                )
                affected = {f"efa-{pools[i // NODES_PER_POOL]}" for i in range(len(burst_nodes))}
                while True:
                    current = await published(client)
                    if all(current[name]["status"]["advertisingNodes"] == 0 for name in affected):
                        break
                    await asyncio.sleep(0.05)
                results["burst_settle_s"] = time.perf_counter() - started
                await asyncio.sleep(1.0)
                after = scrape(metrics_port)
                results["burst_updates"] = len(burst_nodes)
                results["burst_pools"] = len(affected)
                key_rounds = "fabriccap_evaluation_duration_seconds_count"
                results["burst_evaluation_rounds"] = after[key_rounds] - before[key_rounds]
                results["burst_pool_evaluations"] = (
                    after["fabriccap_evaluations_total"] - before["fabriccap_evaluations_total"]
                )
                key_writes = 'fabriccap_status_writes_total{result="updated"}'
                results["burst_status_writes"] = after[key_writes] - before[key_writes]

                # Quiet: heartbeat-like updates (condition timestamps) for quiet_seconds.
                await asyncio.sleep(1.0)
                before = scrape(metrics_port)
                resource_versions = {n: o["metadata"]["resourceVersion"] for n, o in (await published(client)).items()}
                deadline = time.perf_counter() + quiet_seconds
                heartbeats = 0
                while time.perf_counter() < deadline:
                    batch = random.sample(bodies, min(20, len(bodies)))
                    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                    await gather_bounded(
                        [
                            client.merge_patch(
                                NODES.status(b["metadata"]["name"]),
                                {
                                    "status": {
                                        "conditions": [
                                            {**c, "lastHeartbeatTime": stamp} for c in b["status"]["conditions"]
                                        ]
                                    }
                                },
                            )
                            for b in batch
                        ]
                    )
                    heartbeats += len(batch)
                    await asyncio.sleep(0.1)
                await asyncio.sleep(1.0)
                after = scrape(metrics_port)
                now_versions = {n: o["metadata"]["resourceVersion"] for n, o in (await published(client)).items()}
                results["quiet_heartbeats"] = heartbeats
                results["quiet_status_writes"] = after[key_writes] - before[key_writes]
                results["quiet_cr_changes"] = sum(1 for n, v in now_versions.items() if resource_versions.get(n) != v)
                results["rss_end_mib"], results["peak_rss_mib"] = (v / 1024 for v in rss_kib(operator.pid))
            finally:
                operator.terminate()
                operator.wait(timeout=30)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, action="append", help="cluster size (repeatable; default 1000 and 5000)")
    parser.add_argument("--changes", type=int, default=30, help="node flips per size (2 samples each)")
    parser.add_argument("--quiet-seconds", type=float, default=60.0)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; python {sys.version.split()[0]}", flush=True)
    for count in args.nodes or [1000, 5000]:
        results = asyncio.run(bench(count, args.changes, args.quiet_seconds))
        print(
            json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in results.items()}, indent=1),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
