"""Benchmark (not a test): workload reporting at scale, pods watched cluster-wide.

    python benchmarks/workloads_bench.py                              # 10,000 nodes, 100,000 pods
    python benchmarks/workloads_bench.py --nodes 1000 --pods 10000    # smaller

In one run against one fresh kube-apiserver + etcd on 127.0.0.1:
- nodes as in operator_bench (10-12 KB each, EFA 32, a Ready plugin pod each), in pools of 50;
- pods bound to them: a fifth request 8 GPUs (half of those with EFA, half without: NCCL over
  TCP), the rest are CPU pods of the same shape (sidecars, services) that must cost nothing;
  every pod owned by a Job, with realistic labels, env and resources (~2.5 KB); the Jobs
  exist, created first (the churn's pods name Jobs that do not: their owner reads get 404s);
- start: `fabriccap run` starting to every FabricCapability published with its workloads, as a
  ratio to a bare LIST of all nodes plus a bare LIST of all pods, in the same run;
- churn: 50 pods/s created and 50/s deleted for 60 s (GPU pods with EFA, on every pool), while
  probe pods (GPUs, no EFA) on a quiet pool measure new pod -> the pool's withoutFabric count,
  as a watch of that FabricCapability delivers it, against the same probes reaching a watch of
  their node (the API server's own share under that load, the latency's baseline); a probe
  waits PROBE_SPACING_SECONDS first, so that it measures the operator and not its pool's
  write budget;
  status writes during the churn, per pool touched per debounce window;
- where each probe's time went (``probe_legs``, from the audit log's timestamps): its create
  reaching the API server and served, its delivery to the node's watcher, the operator up to
  its status PATCH, the PATCH served, and the status reaching the benchmark's watch;
- RSS of the operator (current and peak).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from operator_bench import (
    NODES_PER_POOL,
    WHOLE_LIST_BYTES,
    all_published,
    create_nodes_with_plugin,
    free_port,
    gather_bounded,
    install_crd,
    node_body,
    rss_kib,
    scrape,
)
from scale_bench import PROBE_SPACING_SECONDS, lane_waits
from scale_bench import scrape as scrape_all

from fabriccap.kube.client import KubeClient, connect
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import FABRIC_CAPABILITIES, NODES, PODS
from fabriccap_devtools import world
from fabriccap_devtools.controlplane import LocalControlPlane
from fabriccap_devtools.launch import local_run_command
from fabriccap_devtools.seeding import create_job

EFA = "vpc.amazonaws.com/efa"
GPU = "nvidia.com/gpu"
NAMESPACE = "ml"
DEBOUNCE = 0.2
# The issue's bound on a probe: its watch delivery p99 + the debounce + this.
PROBE_ALLOWANCE_SECONDS = 0.25
# A probe's legs, in order (``probe_legs``).
PROBE_LEGS = ("to_server", "create", "delivered", "operator", "patch", "to_bench")
PODS_PER_JOB = 8
JOBS_STARTED = "2026-11-30T09:00:00Z"
CONTROLLER_UID = world.JOB_CONTROLLER_LABELS[0]  # the one of the two a pod here carries


def pod_body(index: int, node: str, *, gpu: bool, efa: bool, name: str | None = None) -> dict[str, Any]:
    """A workload pod of Job ``job-<index // 8>``, with a made-up uid for it (``create_jobs``
    gives the pods the uid of the Job the API server created)."""
    job = f"job-{index // PODS_PER_JOB:06d}"
    limits = {"cpu": "4", "memory": "16Gi"}
    if gpu:
        limits[GPU] = "8"
    if efa:
        limits[EFA] = "32"
    pod_name = name or f"{job}-{index % PODS_PER_JOB}-{index:07d}"
    job_uid = f"{index // PODS_PER_JOB:08x}-0000-4000-8000-000000000000"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": NAMESPACE,
            "labels": {
                "app.kubernetes.io/name": "trainer" if gpu else "sidecar",
                "batch.kubernetes.io/job-name": job,
                "job-name": job,
                CONTROLLER_UID: job_uid,
                "team": f"team-{index % 17}",
            },
            "annotations": {"kubectl.kubernetes.io/default-container": "main"},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": job_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/ml/trainer:2026-11-30",
                    "command": ["torchrun", "--nnodes=2", "train.py"],
                    "env": [
                        {"name": "NCCL_DEBUG", "value": "WARN"},
                        {"name": "MASTER_PORT", "value": "29500"},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    ],
                    "resources": {"limits": limits, "requests": limits},
                    "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
                }
            ],
            "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}],
            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


async def create_jobs(client: KubeClient, pods: list[dict[str, Any]]) -> None:
    """The Jobs ``pods`` name, created before them (each from its first pod, as a user or a
    JobSet creates one), so that an owner read gets the Job and not a 404; the pods' owner
    references and controller-uid labels then carry the uid the API server gave it."""
    firsts: dict[str, dict[str, Any]] = {}
    for pod in pods:
        firsts.setdefault(pod["metadata"]["ownerReferences"][0]["name"], pod)
    created = await gather_bounded(
        [
            create_job(client, world.job(pod, job, uid="", pods=PODS_PER_JOB, started_at=JOBS_STARTED))
            for job, pod in firsts.items()
        ],
        limit=32,
    )
    uids = {job["metadata"]["name"]: job["metadata"]["uid"] for job in created}
    for pod in pods:
        owner = pod["metadata"]["ownerReferences"][0]
        owner["uid"] = pod["metadata"]["labels"][CONTROLLER_UID] = uids[owner["name"]]


async def populate(client: KubeClient, nodes: int, pods: int) -> tuple[list[dict[str, Any]], list[str]]:
    pools = [f"p5-wl-{i:03d}" for i in range((nodes + NODES_PER_POOL - 1) // NODES_PER_POOL)]
    bodies = [node_body(i, pools[i // NODES_PER_POOL]) for i in range(nodes)]

    await create_nodes_with_plugin(client, bodies)
    await client.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    # The last pool stays quiet (no churn): its withoutFabric moves only with the probes.
    busy = [body["metadata"]["name"] for body in bodies[: max(len(bodies) - NODES_PER_POOL, 1)]]
    workload = []
    for index in range(pods):
        gpu = index % 5 == 0
        workload.append(pod_body(index, busy[index % len(busy)], gpu=gpu, efa=gpu and index % 10 == 0))
    await create_jobs(client, workload)
    await gather_bounded([client.create(PODS.collection(NAMESPACE), body) for body in workload], limit=32)
    return bodies, pools


async def bare_list_seconds(client: KubeClient, path: str) -> float:
    """The fastest of three LISTs, by a client that does not ask for gzip (as scale_bench's
    baseline: on loopback the compression costs more than it saves)."""
    async with KubeClient(client.credentials, compression=False) as plain:
        await plain.request("GET", path, max_body_bytes=WHOLE_LIST_BYTES)
        times = []
        for _ in range(3):
            started = time.perf_counter()
            await plain.get(path, max_body_bytes=WHOLE_LIST_BYTES)
            times.append(time.perf_counter() - started)
    return min(times)


def without_fabric_of(obj: dict[str, Any]) -> int:
    return int(((obj.get("status") or {}).get("workloads") or {}).get("withoutFabric", {}).get("pods", -1))


async def without_fabric(client: KubeClient, name: str) -> int:
    return without_fabric_of(await client.get(FABRIC_CAPABILITIES.item(name)))


class CountWatch:
    """The quiet pool's withoutFabric count as a watch delivers it: the probes wait on this
    rather than polling the API server the operator is racing against (polling every 10 ms
    was 100 GETs/s on the same two cores)."""

    def __init__(self, client: KubeClient, name: str) -> None:
        self.client, self.name = client, name
        self.count = -1
        self.changed = asyncio.Event()
        self.task = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            obj = await self.client.get(FABRIC_CAPABILITIES.item(self.name))
            self._see(obj)
            try:
                async for event in self.client.watch(
                    FABRIC_CAPABILITIES.collection(),
                    obj["metadata"]["resourceVersion"],
                    field_selector=f"metadata.name={self.name}",
                ):
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._see(event.get("object") or {})
            except KubeError:  # the stream broke: read and watch again
                await asyncio.sleep(0.1)

    def _see(self, obj: dict[str, Any]) -> None:
        self.count = without_fabric_of(obj)
        self.changed.set()

    async def wait_for(self, count: int, timeout: float = 120.0) -> None:
        deadline = time.perf_counter() + timeout
        while self.count != count:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), max(deadline - time.perf_counter(), 0.001))

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


class ArrivalWatch:
    """When the probe pods reach a watcher of their own node: the API server's share of the
    probe latency under the same load, measured in the same run (the baseline)."""

    def __init__(self, client: KubeClient, node: str) -> None:
        self.client, self.selector = client, f"spec.nodeName={node}"
        self.arrived: dict[str, float] = {}
        self.ready = asyncio.Event()
        self.task = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        path = PODS.collection(NAMESPACE)
        while True:
            listed = await self.client.get(path, {"fieldSelector": self.selector, "limit": 1})
            self.ready.set()
            try:
                async for event in self.client.watch(
                    path, listed["metadata"]["resourceVersion"], field_selector=self.selector
                ):
                    if event.get("type") == "ADDED":
                        name = str(((event.get("object") or {}).get("metadata") or {}).get("name"))
                        self.arrived.setdefault(name, time.perf_counter())
            except KubeError:
                await asyncio.sleep(0.1)

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


def audited_at(event: dict[str, Any], stage: str) -> float | None:
    """An audit event's ``stage`` timestamp (requestReceivedTimestamp, stageTimestamp) as
    time.time() does (the API server runs on this machine's clock); None if it has none."""
    try:
        return datetime.datetime.fromisoformat(str(event.get(stage, "")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class ProbeTimes:
    """One probe, as time.time() does: the pod's create sent, its arrival at the watcher of its
    node (None: not seen there), and the new count seen by the watch of its FabricCapability."""

    name: str
    sent: float
    arrived: float | None
    seen: float


def probe_legs(cp: LocalControlPlane, probes: list[ProbeTimes], pool: str) -> dict[str, Any]:
    """Where each probe's time went, from the audit log's timestamps of its pod's create and of
    the operator's status PATCH that followed it: the request reaching the API server, the
    create served, its delivery to a watcher (the node's), the operator (its own delivery, the
    debounce, the round, the lane), the PATCH served, and its delivery to the bench's watch.
    The issue's bound counts one delivery; a probe's time holds two."""
    creates: dict[str, tuple[float, float]] = {}
    patches: list[tuple[float, float]] = []
    names = {probe.name for probe in probes}
    for event in cp.audit_events():
        target = event.get("objectRef") or {}
        received, completed = audited_at(event, "requestReceivedTimestamp"), audited_at(event, "stageTimestamp")
        if received is None or completed is None:
            continue
        if event.get("verb") == "create" and target.get("resource") == "pods" and target.get("name") in names:
            creates[str(target["name"])] = (received, completed)
        elif target.get("name") == pool and target.get("subresource") == "status" and event.get("verb") == "patch":
            patches.append((received, completed))
    patches.sort()
    legs: dict[str, list[float]] = {leg: [] for leg in PROBE_LEGS}
    each: list[tuple[float, dict[str, Any]]] = []
    for probe in probes:
        create = creates.get(probe.name)
        # The operator's first status PATCH after the create, and before the bench saw its count.
        patch = next((p for p in patches if create is not None and create[1] <= p[0] <= probe.seen), None)
        if create is None or patch is None or probe.arrived is None:
            continue
        times = dict(
            zip(
                PROBE_LEGS,
                (
                    create[0] - probe.sent,
                    create[1] - create[0],
                    probe.arrived - create[1],
                    patch[0] - probe.arrived,
                    patch[1] - patch[0],
                    probe.seen - patch[1],
                ),
                strict=True,
            )
        )
        for leg, seconds in times.items():
            legs[leg].append(seconds)
        total = probe.seen - probe.sent
        each.append(
            (total, {"probe": probe.name, "total_s": round(total, 3)} | {k: round(v, 3) for k, v in times.items()})
        )
    slowest = [split for _total, split in sorted(each, key=lambda probe: probe[0], reverse=True)[:3]]
    return {
        "probe_legs_split": len(each),
        "probe_legs_median_s": {leg: round(statistics.median(times), 3) for leg, times in legs.items() if times},
        "probe_legs_max_s": {leg: round(max(times), 3) for leg, times in legs.items() if times},
        "probe_legs_slowest": slowest,
    }


def median_and_slowest(samples: list[float]) -> tuple[float | None, float | None]:
    ordered = sorted(samples)
    if not ordered:
        return None, None
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def churn(client: KubeClient, nodes: list[str], seconds: float, rate: int) -> int:
    """``rate`` pods/s created and, after a lag, deleted again: GPU pods that ask for EFA."""
    created: list[str] = []
    made = 0
    started = time.perf_counter()
    tick = 0
    while time.perf_counter() - started < seconds:
        batch = [
            pod_body(10_000_000 + made + i, random.choice(nodes), gpu=True, efa=True, name=f"churn-{made + i:07d}")
            for i in range(rate)
        ]
        made += rate
        await gather_bounded([client.create(PODS.collection(NAMESPACE), body) for body in batch], limit=16)
        created.extend(body["metadata"]["name"] for body in batch)
        if len(created) > 2 * rate:
            doomed, created = created[:rate], created[rate:]
            await gather_bounded(
                [client.delete(PODS.item(name, NAMESPACE), body={"gracePeriodSeconds": 0}) for name in doomed],
                limit=16,
            )
        tick += 1
        await asyncio.sleep(max(started + tick - time.perf_counter(), 0))
    return made


async def bench(nodes: int, pods: int, churn_seconds: float, probes: int) -> dict[str, Any]:
    results: dict[str, Any] = {"nodes": nodes, "pods": pods, "gpu_pods": (pods + 4) // 5}
    with tempfile.TemporaryDirectory(prefix="fabriccap-wl-bench-") as tmp, LocalControlPlane(Path(tmp) / "cp") as cp:
        info = cp.info
        kubectl = [str(info.kubectl), f"--kubeconfig={info.kubeconfig}"]
        install_crd(kubectl)
        async with await connect(str(info.kubeconfig)) as client:
            started = time.perf_counter()
            bodies, pools = await populate(client, nodes, pods)
            results["populate_s"] = time.perf_counter() - started
            results["bare_list_nodes_s"] = await bare_list_seconds(client, NODES.collection())
            results["bare_list_pods_s"] = await bare_list_seconds(client, "/api/v1/pods")
            baseline = results["bare_list_nodes_s"] + results["bare_list_pods_s"]

            metrics_port = free_port()
            config = Path(tmp) / "config.yaml"
            config.write_text(f"debounceSeconds: {DEBOUNCE}\n")
            log = (Path(tmp) / "operator.log").open("w")
            started = time.perf_counter()
            operator = subprocess.Popen(
                local_run_command(info.kubeconfig, config, metrics_port), stdout=log, stderr=subprocess.STDOUT
            )
            try:
                expected = {f"efa-{pool}" for pool in pools}
                await asyncio.wait_for(all_published(client, expected, operator), timeout=1800)
                results["start_s"] = time.perf_counter() - started
                results["start_ratio"] = results["start_s"] / baseline
                await asyncio.sleep(2.0)
                results["rss_after_start_mib"], results["peak_rss_after_start_mib"] = (
                    value / 1024 for value in rss_kib(operator.pid)
                )
                first = await client.get(FABRIC_CAPABILITIES.item(f"efa-{pools[0]}"))
                results["pool0_workloads"] = first["status"].get("workloads", {}).get("withoutFabric")

                quiet_pool = f"efa-{pools[-1]}"
                quiet_nodes = [body["metadata"]["name"] for body in bodies[-NODES_PER_POOL:]]
                busy_nodes = [
                    body["metadata"]["name"] for body in bodies[: len(bodies) - NODES_PER_POOL]
                ] or quiet_nodes
                probe_pods = [
                    pod_body(20_000_000 + probe, quiet_nodes[0], gpu=True, efa=False, name=f"probe-{probe:04d}")
                    for probe in range(probes)
                ]
                await create_jobs(client, probe_pods)
                before, before_all = scrape(metrics_port), scrape_all(metrics_port)
                churn_task = asyncio.create_task(churn(client, busy_nodes, churn_seconds, 50))
                latencies: list[float] = []
                timed: list[ProbeTimes] = []
                baseline_count = await without_fabric(client, quiet_pool)
                counts = CountWatch(client, quiet_pool)
                arrivals = ArrivalWatch(client, quiet_nodes[0])
                await asyncio.wait_for(arrivals.ready.wait(), 60)
                api_latencies: list[float] = []
                for probe_pod in probe_pods:
                    name = probe_pod["metadata"]["name"]
                    # Each probe is two writes of one object (its pod created, then deleted):
                    # sent back to back they outran the object's write budget after its burst,
                    # and every later sample was the wait for a token (~1 s), not the latency.
                    await asyncio.sleep(PROBE_SPACING_SECONDS)
                    sent, sent_at = time.perf_counter(), time.time()
                    await client.create(PODS.collection(NAMESPACE), probe_pod)
                    await counts.wait_for(baseline_count + 1)
                    latencies.append(time.perf_counter() - sent)
                    arrived = arrivals.arrived.get(name)
                    if arrived is not None:
                        api_latencies.append(arrived - sent)
                    timed.append(
                        ProbeTimes(
                            name,
                            sent_at,
                            None if arrived is None else sent_at + arrived - sent,
                            sent_at + latencies[-1],
                        )
                    )
                    await client.delete(PODS.item(name, NAMESPACE), body={"gracePeriodSeconds": 0})
                    await counts.wait_for(baseline_count)
                    if churn_task.done():
                        break
                await counts.close()
                await arrivals.close()
                made = await churn_task
                await asyncio.sleep(2 * DEBOUNCE + 1.0)
                after, after_all = scrape(metrics_port), scrape_all(metrics_port)
                key = 'fabriccap_status_writes_total{result="updated"}'
                writes = after[key] - before[key]
                windows = churn_seconds / DEBOUNCE
                touched = len(pools) - 1 + (1 if latencies else 0)
                rounds = (
                    after["fabriccap_evaluation_duration_seconds_count"]
                    - before["fabriccap_evaluation_duration_seconds_count"]
                )
                evaluating = (
                    after["fabriccap_evaluation_duration_seconds_sum"]
                    - before["fabriccap_evaluation_duration_seconds_sum"]
                )
                evaluated = after["fabriccap_evaluations_total"] - before["fabriccap_evaluations_total"]
                median, slowest = median_and_slowest(latencies)
                api_median, api_slowest = median_and_slowest(api_latencies)
                results.update(
                    {
                        "churn_pods_created": made,
                        "churn_status_writes": writes,
                        "writes_per_pool_per_window": writes / (touched * windows),
                        # Where a probe's time goes: how many rounds, how long each evaluated,
                        # how many pools each took.
                        "churn_rounds": rounds,
                        "round_evaluation_mean_s": evaluating / rounds if rounds else None,
                        "pools_per_round": evaluated / rounds if rounds else None,
                        "probe_samples": len(latencies),
                        "probe_latency_median_s": median,
                        "probe_latency_p99_s": slowest,
                        # The same probes reaching a watcher of their node: what the API server
                        # alone takes under this load (the baseline), and the ratio to it.
                        "probe_api_latency_median_s": api_median,
                        "probe_api_latency_p99_s": api_slowest,
                        "probe_latency_median_ratio": median / api_median if median and api_median else None,
                        "probe_bound_s": api_slowest + DEBOUNCE + PROBE_ALLOWANCE_SECONDS if api_slowest else None,
                        # How long the churn's writes (the probes' among them) waited for their lane.
                        "churn_lane_waits": lane_waits(before_all, after_all),
                    }
                )
                results["rss_end_mib"], results["peak_rss_mib"] = (value / 1024 for value in rss_kib(operator.pid))
                results.update(probe_legs(cp, timed, quiet_pool))
            except KubeError as error:
                results["error"] = str(error)
            finally:
                operator.terminate()
                operator.wait(timeout=30)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--churn-seconds", type=float, default=60.0)
    parser.add_argument("--probes", type=int, default=40, help="probe pods measuring pod -> status latency")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; python {sys.version.split()[0]}", flush=True)
    results = asyncio.run(bench(args.nodes, args.pods, args.churn_seconds, args.probes))
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in results.items()}, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
