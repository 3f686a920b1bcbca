"""Benchmark (not a test): real nodes, as the kubelet's defaults have them. Root only.

    python benchmarks/realnodes_bench.py                  # 2 nodes, 5 health changes each way
    python benchmarks/realnodes_bench.py --cold-images    # also the node images from empty Go caches

In one run:
- cold images (optional): the Go programs and OCI tarballs built with an empty GOCACHE and
  GOMODCACHE (module downloads included) into a scratch cache;
- cached setup: control plane + N kubelets Ready, then the test EFA plugin's DaemonSet until
  every Node advertises its devices (binaries and images cached);
- memory: RSS per node (kubelet, containerd, shims, the pods' processes: the plugin and its
  pause), and of the control plane's servers;
- latency: a device turns unhealthy (and back) on node 1: the file written -> the Node's
  allocatable changes (plugin -> kubelet -> apiserver), and that Node event -> the
  FabricCapability's Ready changes (operator), both as seen by one watching process.
The kubelets run with their default nodeStatusUpdateFrequency (10 s) and the operator with
its default config.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fabriccap.kube.client import KubeClient, connect
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import DAEMON_SETS, FABRIC_CAPABILITIES, NODES
from fabriccap_devtools import efaplugin
from fabriccap_devtools.controlplane import LocalControlPlane, host
from fabriccap_devtools.controlplane.images import ensure_images
from fabriccap_devtools.controlplane.nodes import NodeFleet, node_specs
from fabriccap_devtools.launch import local_run_command
from fabriccap_devtools.world import KUBE_SYSTEM

EFA = "vpc.amazonaws.com/efa"
DEVICES = 4
POOL = "bench-p5"
FCAP = f"efa-{POOL}"
TIMEOUT = 120.0
STATUS_PERIOD_SECONDS = 10  # the kubelet's default nodeStatusUpdateFrequency, which the nodes keep


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def cold_images() -> float:
    with tempfile.TemporaryDirectory(prefix="fabriccap-cold-") as scratch:
        env = {
            "FABRICCAP_CACHE_DIR": f"{scratch}/cache",
            "GOCACHE": f"{scratch}/gocache",
            "GOMODCACHE": f"{scratch}/mod",
        }
        saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)
        try:
            started = time.monotonic()
            ensure_images()
            elapsed = time.monotonic() - started
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            # The module cache is read-only by design.
            subprocess.run(["chmod", "-R", "u+w", scratch], check=False)
    return elapsed


class Watch:
    """Arrival times of every event on a few collections, in this process."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.events: list[tuple[float, str, dict[str, Any]]] = []
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self, *paths: str) -> None:
        for path in paths:
            body = await self._list(path)
            self.tasks.append(asyncio.create_task(self._watch(path, body["metadata"]["resourceVersion"])))

    async def _watch(self, path: str, version: str) -> None:
        while True:
            try:
                async for event in self.client.watch(path, version, timeout_seconds=300):
                    obj = event.get("object") or {}
                    version = obj.get("metadata", {}).get("resourceVersion", version)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self.events.append((time.monotonic(), path, obj))
            except KubeError:
                version = (await self._list(path))["metadata"]["resourceVersion"]

    async def _list(self, path: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                body: dict[str, Any] = await self.client.get(path)
                return body
            except KubeError as error:
                # A CRD just Established may answer "storage is (re)initializing" for a moment.
                if error.status != 429 or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def first(self, path: str, since: float, predicate: Callable[[dict[str, Any]], bool]) -> float:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            for at, where, obj in self.events:
                if where == path and at >= since and predicate(obj):
                    return at
            await asyncio.sleep(0.02)
        raise TimeoutError(f"nothing on {path} matched within {TIMEOUT:.0f}s")

    def stop(self) -> None:
        for task in self.tasks:
            task.cancel()


def allocatable(name: str, value: int) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: (
        obj["metadata"]["name"] == name and (obj.get("status") or {}).get("allocatable", {}).get(EFA) == str(value)
    )


def pool_ready(status: str) -> Callable[[dict[str, Any]], bool]:
    def matches(obj: dict[str, Any]) -> bool:
        conditions = (obj.get("status") or {}).get("conditions") or []
        return obj["metadata"]["name"] == FCAP and any(
            c["type"] == "Ready" and c["status"] == status for c in conditions
        )

    return matches


async def measure(control_plane: LocalControlPlane, fleet: NodeFleet, samples: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    async with await connect(str(control_plane.kubeconfig)) as client:
        watch = Watch(client)
        await watch.start(NODES.collection(), FABRIC_CAPABILITIES.collection())
        applied = time.monotonic()
        await client.create(DAEMON_SETS.collection(KUBE_SYSTEM), efaplugin.daemon_set(devices=DEVICES))
        advertised = [await watch.first(NODES.collection(), applied, allocatable(n, DEVICES)) for n in fleet.nodes]
        results["plugin DaemonSet -> every Node advertises"] = max(advertised) - applied
        operator = subprocess.Popen(
            local_run_command(control_plane.kubeconfig), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            await watch.first(FABRIC_CAPABILITIES.collection(), applied, pool_ready("True"))
            results["memory"] = memory(control_plane, fleet)
            node = next(iter(fleet.nodes.values()))
            to_node: list[float] = []
            to_cr: list[float] = []
            for _ in range(samples):
                for devices, healthy, ready in ((["efa3"], DEVICES - 1, "False"), ([], DEVICES, "True")):
                    # At a random point of the kubelet's status period: right after the last
                    # change was posted, every sample would wait the whole period.
                    await asyncio.sleep(random.uniform(0, STATUS_PERIOD_SECONDS))
                    written = time.monotonic()
                    efaplugin.set_unhealthy(node.efa_state_dir, devices)
                    node_at = await watch.first(NODES.collection(), written, allocatable(node.name, healthy))
                    cr_at = await watch.first(FABRIC_CAPABILITIES.collection(), node_at, pool_ready(ready))
                    to_node.append(node_at - written)
                    to_cr.append(cr_at - node_at)
            results["health change -> Node status"] = to_node
            results["Node status -> FabricCapability"] = to_cr
        finally:
            operator.terminate()
            operator.wait(10)
            watch.stop()
    return results


def memory(control_plane: LocalControlPlane, fleet: NodeFleet) -> dict[str, float]:
    found: dict[str, float] = {}
    for node in fleet.nodes.values():
        shims = host.processes_mentioning(str(node.containerd_socket), command_prefix="containerd-shim")
        pods = host.cgroup_processes(node.cgroup)
        parts = {
            "kubelet": rss_mib([node.processes["kubelet"].pid]),
            "containerd": rss_mib([node.processes["containerd"].pid]),
            f"shims ({len(shims)})": rss_mib(shims),
            f"pod processes ({len(pods)})": rss_mib(pods),
        }
        found[node.name] = sum(parts.values())
        found.update({f"{node.name} {part}": value for part, value in parts.items()})
    for name, pid in control_plane.info.pids.items():
        found[name] = rss_mib([pid])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--samples", type=int, default=5, help="health changes each way")
    parser.add_argument("--cold-images", action="store_true")
    args = parser.parse_args()
    missing = host.missing_prerequisites()
    if missing:
        print(f"error: real nodes need {'; '.join(missing)}", file=sys.stderr)
        return 2
    if args.cold_images:
        print(f"node images from empty Go caches: {cold_images():.1f} s", flush=True)
    ensure_images()
    with tempfile.TemporaryDirectory(prefix="fabriccap-bench-") as scratch:
        control_plane = LocalControlPlane(Path(scratch) / "cp", nodes=node_specs(args.nodes, pool=POOL))
        started = time.monotonic()
        control_plane.start()
        try:
            setup = time.monotonic() - started
            crd = Path(__file__).resolve().parents[1] / "crds" / "fabriccapabilities.yaml"
            subprocess.run(
                [
                    str(control_plane.kubectl),
                    f"--kubeconfig={control_plane.kubeconfig}",
                    "apply",
                    "--server-side",
                    "-f",
                    str(crd),
                ],
                check=True,
                capture_output=True,
            )
            results = asyncio.run(measure(control_plane, control_plane.fleet, args.samples))
        finally:
            stopping = time.monotonic()
            control_plane.stop()
            teardown = time.monotonic() - stopping
    print(f"control plane + {args.nodes} nodes Ready (cached): {setup:.1f} s")
    rollout = results["plugin DaemonSet -> every Node advertises"]
    print(f"plugin DaemonSet -> every Node advertises {DEVICES}: {rollout:.1f} s")
    print(f"teardown: {teardown:.1f} s")
    for name, mib in results["memory"].items():
        print(f"RSS {name}: {mib:.0f} MiB")
    for key in ("health change -> Node status", "Node status -> FabricCapability"):
        values = results[key]
        print(
            f"{key}: median {statistics.median(values):.2f} s, min {min(values):.2f} s, max {max(values):.2f} s"
            f" ({len(values)} changes)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
