"""Benchmark (not a test): the bytes the operator keeps per Node and per pod, by kind of pod.

    python benchmarks/memory_bench.py                       # 20,000 nodes, 10 pods a node
    python benchmarks/memory_bench.py --nodes 5000 --pods-per-node 10

Issue 26 asks for memory per object. This feeds realistic bodies (the demo world's Nodes with
40 images and the EKS node monitoring agent's conditions, its device-plugin pods, and training
pods owned by Jobs: a fifth asking for GPUs and EFA, the rest for neither), each JSON-encoded
and decoded again as a watch line is, through the real extractor into a real FactStore, kind
by kind, and measures with tracemalloc what stays alive after each kind: the facts, the
index's maps, and the strings they keep of the decoded bodies. The bodies themselves are
dropped after each object, as the informers drop them. Nothing here is the operator's
evaluation or its published objects (per pool, not per object).

Last, the Event outbox: a FabricNotRequested Warning for each GPU pod's owner (one Job a pod),
built as the operator builds them, from one wording of a pool's evaluated status
(``not_requested_wording``) that every owner's Event shares, first queued (what a start
leaves while the Warnings leave at 20 a second), then sent (the record that keeps each
problem warned once). And the retry an owner's read keeps when it failed on its own (a
500; a read that gets no answer waits in the queue with the others and keeps none).

Then a relist of every pod (``WatchedKind.unlisted``): what it keeps, per pod held as it
begins, of the keys it has yet to name, against the sets of them it kept before (the baseline,
built here); and the seconds that crossing off every pod listed takes with each, the listing
in the API server's order (by namespace and name) and shuffled.

Each figure is bytes per object: (live bytes after the kind's objects - before) / objects.
``--pods-per-node`` sets the mix: a node's plugin pod plus that many workload pods, one in five
asking for GPUs and EFA. The figures are Python's live allocations; the process's RSS adds the
allocators' free space and the interpreter, which scale_bench.py measures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

# The config builder is the tests' (tests/support): run from a checkout, no PYTHONPATH needed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from workloads_bench import pod_body

from fabriccap.controller.events import EventRecorder, WorkloadEventOutbox
from fabriccap.controller.lookups import LOOKUP_BACKOFF
from fabriccap.controller.ratelimit import Backoff
from fabriccap.controller.store import FactStore
from fabriccap.core.evaluate import evaluate
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.workloads import LookupKey, not_requested_wording, top_owner
from fabriccap.kube.kinds import BY_KIND, namespace_and_name
from fabriccap_devtools import world
from support.configs import build_config

NODES_PER_POOL = 20


def node_name(index: int) -> str:
    return f"ip-10-{index >> 16 & 255}-{index >> 8 & 255}-{index & 255}.us-west-2.compute.internal"


def nodes(count: int) -> Iterator[dict[str, Any]]:
    for index in range(count):
        yield world.node(node_name(index), pool=f"p5-pool-{index // NODES_PER_POOL:05d}", images=40, heavy=True)


def plugin_pods(count: int) -> Iterator[dict[str, Any]]:
    for index in range(count):
        (body,) = world.plugin_pods([node_name(index)])
        body["metadata"]["name"] = f"efa-device-plugin-{index:07d}"
        yield body


def workload_pods(count: int, node_count: int, *, gpu: bool) -> Iterator[dict[str, Any]]:
    # GPU pods take the indices a fifth apart, CPU pods the rest, so names never collide.
    for index in range(count):
        number = index * 5 if gpu else index + index // 4 + 1
        yield pod_body(number, node_name(number % node_count), gpu=gpu, efa=gpu)


def live_bytes() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def measure(
    label: str, bodies: Iterator[dict[str, Any]], count: int, keep: Callable[[dict[str, Any]], object]
) -> tuple[str, int, float]:
    before = live_bytes()
    for body in bodies:
        keep(json.loads(json.dumps(body)))  # decoded as a watch line is: every string its own
    return label, count, (live_bytes() - before) / max(count, 1)


def outbox_rows(store: FactStore, extractor: FactsExtractor) -> list[tuple[str, int, float]]:
    """Bytes per owner warned: queued in the outbox, then recorded as sent."""
    config = extractor.config
    (capability, *_) = evaluate(config, store).capabilities
    profile = config.enabled_fabrics[0]
    owners = list({facts.owner for facts in store.workload_pods.values()})
    # A rate of ~0 and no burst: the sender never sends, so it needs no recorder.
    outbox = WorkloadEventOutbox(cast(EventRecorder, None), leading=lambda: True, rate=1e-9, burst=0)

    async def queue_then_send() -> tuple[float, float]:
        before = live_bytes()
        wording = not_requested_wording(profile, capability.name, capability.status)
        outbox.offer(wording.event(owner, pods=8) for owner in owners)
        queued = live_bytes()
        for key in list(outbox._queue):  # what the sender does with each it sent
            outbox._sent(outbox._unqueue(key))
        sent = live_bytes()
        await outbox.close()
        return queued - before, sent - before

    queued, sent = asyncio.run(queue_then_send())
    count = max(len(owners), 1)
    return [
        ("Warning queued, per owner", len(owners), queued / count),
        ("Warning sent, per owner", len(owners), sent / count),
    ]


def failed_read_row(store: FactStore) -> tuple[str, int, float]:
    """Bytes per owner whose read failed on its own (a 500): its retry, kept until it is read."""
    keys = {key for pod in store.workload_pods.values() if (key := top_owner(pod, store)[1]) is not None}
    retries: Backoff[LookupKey] = Backoff(LOOKUP_BACKOFF)
    before = live_bytes()
    for key in keys:
        retries.failed(key)  # what LookupResolver does with a read refused so
    return "owner read failed, per owner", len(keys), (live_bytes() - before) / max(len(keys), 1)


def sets_per_facet(store: FactStore) -> tuple[set[Any], ...]:
    """The baseline: what a relist of every pod kept before 1b82ebc, a set of keys per facet."""
    return tuple(set(store.held(facet.table)) for facet in BY_KIND["Pod"].facets)


def relist_rows(store: FactStore) -> list[tuple[str, int, float]]:
    """Bytes per pod held of what a relist keeps to find the pods it did not name (the
    baseline: a set per facet, as before)."""
    pod_kind = BY_KIND["Pod"]
    held = sum(len(store.held(facet.table)) for facet in pod_kind.facets)
    before = live_bytes()
    unlisted = pod_kind.unlisted(store, None)
    kept = live_bytes() - before
    as_sets = sets_per_facet(store)
    kept_as_sets = live_bytes() - before - kept
    del unlisted, as_sets
    return [
        ("relist's keys, per pod held", held, kept / max(held, 1)),
        ("the same as sets (baseline)", held, kept_as_sets / max(held, 1)),
    ]


def cross_off_seconds(store: FactStore, listed: list[tuple[str, str]]) -> None:
    """Print what crossing off every pod listed costs, with the sorted keys and with sets."""
    pod_kind = BY_KIND["Pod"]
    bodies = [{"metadata": {"namespace": namespace, "name": name}} for namespace, name in listed]
    shuffled = bodies[:]
    random.Random(26).shuffle(shuffled)

    def timed(order: list[dict[str, Any]], as_sets: bool) -> float:
        unlisted: Any = sets_per_facet(store) if as_sets else pod_kind.unlisted(store, None)
        started = time.perf_counter()
        for body in order:
            pod_kind.cross_off(unlisted, pod_kind.keys(body))
        return time.perf_counter() - started

    baseline = timed(bodies, as_sets=True)
    print(f"crossing off {len(bodies):,} pods listed (tracemalloc off):")
    print(f"  sets (baseline)           {baseline:7.3f} s  1.00x")
    for label, order in (("sorted keys, in order", bodies), ("sorted keys, shuffled", shuffled)):
        seconds = timed(order, as_sets=False)
        print(f"  {label:<25} {seconds:7.3f} s  {seconds / baseline:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--pods-per-node", type=int, default=10)
    args = parser.parse_args()
    gpu_pods = args.nodes * args.pods_per_node // 5
    cpu_pods = args.nodes * args.pods_per_node - gpu_pods
    extractor = FactsExtractor(build_config({"workloads": {"enabled": True}}))
    store = FactStore()
    node_kind, pod_kind = BY_KIND["Node"], BY_KIND["Pod"]

    def keep_node(body: dict[str, Any]) -> object:
        return node_kind.upsert(store, extractor, body)

    def keep_pod(body: dict[str, Any]) -> object:
        return pod_kind.upsert(store, extractor, body)

    tracemalloc.start(1)
    rows = [
        measure("Node (EKS, 40 images)", nodes(args.nodes), args.nodes, keep_node),
        measure("device-plugin pod", plugin_pods(args.nodes), args.nodes, keep_pod),
        measure("GPU + EFA pod (Job-owned)", workload_pods(gpu_pods, args.nodes, gpu=True), gpu_pods, keep_pod),
        measure("pod of no fabric", workload_pods(cpu_pods, args.nodes, gpu=False), cpu_pods, keep_pod),
    ]
    rows += outbox_rows(store, extractor)
    rows.append(failed_read_row(store))
    rows += relist_rows(store)
    # Every pod a relist names, in the API server's order (namespace, name): the plugin pods
    # and the GPU pods held, and the pods of no fabric.
    no_fabric = workload_pods(cpu_pods, args.nodes, gpu=False)
    listed = sorted([*store.pods, *store.workload_pods, *(namespace_and_name(body) for body in no_fabric)])
    tracemalloc.stop()
    held = {"nodes": len(store.nodes), "plugin pods": len(store.pods), "workload pods": len(store.workload_pods)}
    print(f"python {sys.version.split()[0]}; held after the run: {held}")
    print(f"{'object':<28} {'count':>9} {'bytes each':>11} {'MiB in all':>11}")
    for label, count, each in rows:
        print(f"{label:<28} {count:>9,} {each:>11.0f} {each * count / 2**20:>11.1f}")
    at_target = (rows[0][2] * 100_000 + rows[1][2] * 100_000 + rows[2][2] * 200_000 + rows[3][2] * 800_000) / 2**20
    print(f"at 100,000 nodes (a plugin pod each), 200,000 GPU pods and 800,000 others: {at_target:.0f} MiB of facts")
    cross_off_seconds(store, listed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
