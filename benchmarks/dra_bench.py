"""Benchmark (not a test): the live operator on DRA pools, every node with one DRANET slice.

    python benchmarks/dra_bench.py                       # 5000 and 10000 nodes
    python benchmarks/dra_bench.py --nodes 1000          # one size

For each size, in one run against one fresh kube-apiserver + etcd on 127.0.0.1:
- nodes shaped like operator_bench's (10-12 KB each) but with no EFA in allocatable, each with a
  Ready DRANET pod and one ResourceSlice of 32 EFA and 2 ENA devices (DRANET's EKS example's
  devices, renumbered: fabriccap_devtools.world), the aws-dranet chart's DeviceClass, and
  ``--claims`` ResourceClaims (default: one per 5 nodes, 2,000 at 10,000) allocated 4 EFA each
  as the scheduler writes them, whose devices the node's slice no longer lists (DRANET moved
  them into the pod);
- start: `fabriccap run` starting to every FabricCapability published, as a ratio to a bare
  LIST of all nodes, all ResourceSlices and all ResourceClaims (JSON-decoded) in the same run:
  every device goes through the class's CEL selector, so this is what CEL adds to a start;
- latency: a slice loses a device (the driver updates it in place) -> the pool's status shows
  MixedCounts, and back; median and p99;
- RSS of the operator process (current and peak, from /proc);
- with ``--quiet-seconds S``: S seconds in which nothing the operator reads is written, only a
  ConfigMap every second (what the node and leader Leases do in every real cluster): the
  operator's and kube-apiserver's CPU seconds, the operator's RSS, and the LISTs that replaced
  a watch without progress, by kind. Every watched kind is quiet then, and each would be
  listed again every 75 s unless its watch's bookmarks advance (``informers.NUDGE_SELECTOR``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bookmark_probe import write_elsewhere
from operator_bench import (
    NODES_PER_POOL,
    WHOLE_LIST_BYTES,
    all_published,
    free_port,
    gather_bounded,
    install_crd,
    node_body,
    rss_kib,
    wait_reason,
)
from realapi_bench import api_server_pid
from scale_bench import cpu_seconds, grown_by_kind, scrape

from fabriccap.kube.client import KubeClient, connect
from fabriccap.kube.paths import DEVICE_CLASSES, NODES, RESOURCE_CLAIMS, RESOURCE_SLICES
from fabriccap_devtools import world
from fabriccap_devtools.controlplane import LocalControlPlane
from fabriccap_devtools.launch import local_run_command
from fabriccap_devtools.seeding import creatable, create_daemon_set, create_node, create_pod

EFA = "vpc.amazonaws.com/efa"
DEVICES = 32
ENA = 2
CLAIMED = 4  # EFA devices per allocated claim, gone from the node's slice
CLAIMS_NAMESPACE = "default"


def dra_node_body(index: int, pool: str) -> dict[str, Any]:
    """operator_bench's node, advertising EFA only through DRA (nothing in allocatable)."""
    body = node_body(index, pool)
    for field in ("capacity", "allocatable"):
        body["status"][field] = {key: value for key, value in body["status"][field].items() if key != EFA}
    return body


def published_devices(node: str, claimed: bool) -> list[dict[str, Any]]:
    """The node's slice devices: all 32 EFA and 2 ENA, less the EFA a claim holds."""
    devices: list[dict[str, Any]] = world.resource_slice(node, efa=DEVICES, ena=ENA)["spec"]["devices"]
    return devices[CLAIMED:] if claimed else devices


async def populate(client: KubeClient, count: int, claims: int) -> tuple[list[str], list[str], dict[str, str]]:
    """Nodes, the DRANET DaemonSet with a Ready pod per node, one slice per node, and ``claims``
    allocated claims on the first nodes."""
    pools = [f"p5-dra-{i:03d}" for i in range((count + NODES_PER_POOL - 1) // NODES_PER_POOL)]
    bodies = [dra_node_body(i, pools[i // NODES_PER_POOL]) for i in range(count)]
    uids: dict[str, str] = {}

    async def create(body: dict[str, Any]) -> None:
        created = await create_node(client, body)
        uids[created["metadata"]["name"]] = created["metadata"]["uid"]

    await gather_bounded([create(body) for body in bodies])
    await client.create(DEVICE_CLASSES.collection(), world.efa_device_class())
    driver = await create_daemon_set(client, world.dranet_daemon_set())
    names = [body["metadata"]["name"] for body in bodies]
    pods = []
    for index, name in enumerate(names):
        pod = world.pod(
            name, daemon_set_name=world.DRANET_DS, labels={"app": world.DRANET_DS}, name=f"aws-dranet-{index:05d}"
        )
        pod["metadata"]["ownerReferences"][0]["uid"] = driver["metadata"]["uid"]
        pods.append(create_pod(client, pod))
    await gather_bounded(pods)
    slice_names: dict[str, str] = {}

    claimed = set(names[:claims])

    async def publish(name: str) -> None:
        body = world.resource_slice(name, efa=DEVICES, ena=ENA)
        body["spec"]["devices"] = published_devices(name, name in claimed)
        body["metadata"]["ownerReferences"][0]["uid"] = uids[name]
        created = await client.create(RESOURCE_SLICES.collection(), creatable(body))
        slice_names[name] = created["metadata"]["name"]

    async def allocate(index: int, node: str) -> None:
        held = [device["name"] for device in world.resource_slice(node, efa=CLAIMED)["spec"]["devices"]]
        body = world.allocated_claim(node, held, name=f"job-{index:05d}-efa", namespace=CLAIMS_NAMESPACE)
        status = body.pop("status")
        await client.create(RESOURCE_CLAIMS.collection(CLAIMS_NAMESPACE), creatable(body))
        await client.merge_patch(
            RESOURCE_CLAIMS.item(body["metadata"]["name"], CLAIMS_NAMESPACE) + "/status", {"status": status}
        )

    await gather_bounded([publish(name) for name in names])
    await gather_bounded([allocate(index, name) for index, name in enumerate(names[:claims])])
    return names, pools, slice_names


async def bare_list_seconds(client: KubeClient, path: str, count: int) -> float:
    await client.request("GET", path, max_body_bytes=WHOLE_LIST_BYTES)  # warm the apiserver's watch cache
    times = []
    for _ in range(3):
        started = time.perf_counter()
        listing = await client.get(path, max_body_bytes=WHOLE_LIST_BYTES)
        times.append(time.perf_counter() - started)
        assert len(listing["items"]) == count, (path, len(listing["items"]))
    return min(times)


async def quiet(client: KubeClient, operator: int, apiserver: int, metrics_port: int, seconds: float) -> dict[str, Any]:
    """What ``seconds`` in which nothing the operator reads changes cost (see the docstring)."""
    before, cpu_before, api_before = scrape(metrics_port), cpu_seconds(operator), cpu_seconds(apiserver)
    await write_elsewhere(client, seconds)
    after = scrape(metrics_port)
    rss, peak = (value / 1024 for value in rss_kib(operator))
    return {
        "quiet_s": seconds,
        "quiet_operator_cpu_s": cpu_seconds(operator) - cpu_before,
        "quiet_apiserver_cpu_s": cpu_seconds(apiserver) - api_before,
        "quiet_relists_by_kind": grown_by_kind(before, after, "fabriccap_watch_relists_total{"),
        "quiet_rss_end_mib": rss,
        "quiet_peak_rss_mib": peak,
    }


async def bench(count: int, changes: int, claims: int, quiet_seconds: float = 0.0) -> dict[str, Any]:
    results: dict[str, Any] = {"nodes": count, "devices_per_slice": DEVICES + ENA, "claims": claims}
    with tempfile.TemporaryDirectory(prefix="fabriccap-dra-bench-") as tmp, LocalControlPlane(Path(tmp) / "cp") as cp:
        info = cp.info
        kubectl = [str(info.kubectl), f"--kubeconfig={info.kubeconfig}"]
        install_crd(kubectl)
        async with await connect(str(info.kubeconfig)) as client:
            started = time.perf_counter()
            names, pools, slice_names = await populate(client, count, claims)
            results["populate_s"] = time.perf_counter() - started
            sample = await client.get(RESOURCE_SLICES.item(slice_names[names[0]]))
            results["slice_body_kib"] = len(json.dumps(sample)) / 1024
            results["bare_list_nodes_s"] = await bare_list_seconds(client, NODES.collection(), count)
            results["bare_list_slices_s"] = await bare_list_seconds(client, RESOURCE_SLICES.collection(), count)
            results["bare_list_claims_s"] = await bare_list_seconds(client, RESOURCE_CLAIMS.collection(), claims)
            baseline = results["bare_list_nodes_s"] + results["bare_list_slices_s"] + results["bare_list_claims_s"]

            metrics_port = free_port()
            config = Path(tmp) / "config.yaml"
            config.write_text("debounceSeconds: 0.2\n")
            log = (Path(tmp) / "operator.log").open("w")
            started = time.perf_counter()
            operator = subprocess.Popen(
                local_run_command(info.kubeconfig, config, metrics_port), stdout=log, stderr=subprocess.STDOUT
            )
            try:
                expected = {f"efa-{pool}" for pool in pools}
                await asyncio.wait_for(all_published(client, expected, operator), timeout=900)
                results["start_s"] = time.perf_counter() - started
                results["start_ratio"] = results["start_s"] / baseline
                first = f"efa-{pools[0]}"
                await wait_reason(client, first, "UniformCapability", timeout=60)
                await asyncio.sleep(1.0)
                results["rss_after_start_mib"], results["peak_rss_after_start_mib"] = (
                    value / 1024 for value in rss_kib(operator.pid)
                )

                # A slice loses a device in place (what DRANET does when an EFA disappears),
                # then gets it back; one node per pool, round robin.
                latencies = []
                for change in range(changes):
                    pool_index = change % len(pools)
                    node = names[pool_index * NODES_PER_POOL]
                    name = f"efa-{pools[pool_index]}"
                    devices = published_devices(node, node in names[:claims])
                    for shown, reason in ((devices[1:], "MixedCounts"), (devices, "UniformCapability")):
                        sent = time.perf_counter()
                        await client.merge_patch(RESOURCE_SLICES.item(slice_names[node]), {"spec": {"devices": shown}})
                        latencies.append(await wait_reason(client, name, reason) - sent)
                latencies.sort()
                results["latency_samples"] = len(latencies)
                results["latency_median_s"] = statistics.median(latencies)
                results["latency_p99_s"] = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
                results["rss_end_mib"], results["peak_rss_mib"] = (value / 1024 for value in rss_kib(operator.pid))
                if quiet_seconds:
                    apiserver = api_server_pid(cp.directory)
                    results.update(await quiet(client, operator.pid, apiserver, metrics_port, quiet_seconds))
            finally:
                operator.terminate()
                operator.wait(timeout=30)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, action="append", help="cluster size (repeatable; default 5000 and 10000)")
    parser.add_argument("--changes", type=int, default=30, help="slice changes per size (2 samples each)")
    parser.add_argument("--claims", type=int, help="allocated ResourceClaims (default: one per 5 nodes)")
    parser.add_argument("--quiet-seconds", type=float, default=0.0, help="then nothing read changes for this long")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; python {sys.version.split()[0]}", flush=True)
    for count in args.nodes or [5000, 10000]:
        claims = args.claims if args.claims is not None else count // 5
        results = asyncio.run(bench(count, args.changes, min(claims, count), args.quiet_seconds))
        print(
            json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in results.items()}, indent=1),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
