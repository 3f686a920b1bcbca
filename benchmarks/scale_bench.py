"""Benchmark (not a test): one operator replica on scalesim at the size of an EKS ultra cluster,
or its shards (``--shards N``: N processes, ``run --shard I --shards N``).

    python benchmarks/scale_bench.py --nodes 100000 --pods 1000000 --pools 5000 --churn-seconds 300
    python benchmarks/scale_bench.py --nodes 100000 --pods 1000000 --pools 5000 --churn-seconds 300 --shards 2
    python benchmarks/scale_bench.py --nodes 10000 --pods 100000 --pools 200 --churn-seconds 60 --faults

In one run, against one scalesim process holding the world (ScaleWorld: realistic bodies from
the demo world's builders; a plugin pod per node; workload pods, a fifth of them asking for
GPUs and half of those for the fabric; a few quiet pools without workload pods):

- baseline: the best plain client, in a child process of its own, median of 3 each: a paged
  LIST of every collection the operator lists, with the operator's page sizes (concurrently,
  as the operator does), and a streaming list (sendInitialEvents=true) of the same, each
  JSON-decoded as the operator decodes (``kube.client.decode_json``: orjson, which lists the
  100k world in 33 s where ``json.loads`` took 58); the baseline is the faster; the old
  unpaged LIST is kept for comparison while it fits;
- start: ``fabriccap run`` starting to every FabricCapability having a status (the time of the
  last first status write, as the simulator received it);
- idle and heartbeats: after the start's last FabricCapability write, the operator's CPU idle,
  then under heartbeats alone (700/s: conditions' heartbeat times and managedFields, nothing
  it reads): status writes (target 0) and CPU seconds per 1,000 heartbeats;
- churn: 700 node heartbeats/s + 1,000 pod creations/s (each deleted after --pod-lifetime)
  for --churn-seconds; status writes to the control pools (quiet pools that get heartbeats
  and no pods: any write there is a heartbeat's) must be 0; operator CPU in cores; probes on
  the probe pool (a node's EFA count flipped, a GPU pod without the fabric created and
  deleted) timed from the simulator committing the change to the status write that shows it,
  against the simulator's watch delivery p99 to the operator plus the debounce plus 250 ms;
- with --faults, while the churn goes on: a forced relist (410 on every watch), one malformed
  pod event, a 429 storm and a watch outage, each with the relists it caused, the writes,
  and what /healthz and the staleness metrics said meanwhile.

The last line is for machines (one line; wrapped here):
``nodes=N pods=M pools=P start_s=… baseline_s=… start_ratio=… peak_rss_mib=… heartbeat_writes=…
cpu_cores=… p99_s=… watch_p99_s=… debounce_s=…``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, NamedTuple

import aiohttp
from operator_bench import WHOLE_LIST_BYTES

from fabriccap.configfile import load_config
from fabriccap.controller.objects import OBJECT_WRITES_PER_SECOND
from fabriccap.core.shard import Shard
from fabriccap.kube.client import KubeClient, decode_json
from fabriccap.kube.credentials import load_credentials
from fabriccap.kube.errors import KubeError
from fabriccap.kube.kinds import kinds_for
from fabriccap_devtools.launch import free_loopback_port, local_run_command
from fabriccap_devtools.scalesim import Simulator
from fabriccap_devtools.scalesim.world import (
    CPU_POD_TEMPLATE,
    GPU_EFA_POD_TEMPLATE,
    GPU_TCP_POD_TEMPLATE,
    ScaleWorld,
    pool_name,
)

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
WAIT_SECONDS = 120.0  # a probe's effect, a relist: how long to wait before calling it lost
# A forced relist of every kind at once: 1,100,000 objects at 100,000 nodes, read together, took
# longer than WAIT_SECONDS, and the phases after it began while the pods were still being read.
RELIST_WAIT_SECONDS = 600.0
# The probes change one pool, each change as soon as the last one showed. Faster than its
# write budget (a burst of 10, then OBJECT_WRITES_PER_SECOND), the budget ran out after ~15
# changes and every later sample was the wait for a token (~1 s), not the operator's latency.
# So a change waits until its pool has earned one write since the last change showed, with
# room for the second write a Ready flip makes (the label's).
PROBE_SPACING_SECONDS = 1.5 / OBJECT_WRITES_PER_SECOND
# The old baseline, one unpaged GET per collection, is skipped when its response would not
# fit comfortably in memory as Python objects (~6x the JSON).
UNPAGED_LIMIT_BYTES = 1_500_000_000
# The operator's log lines that say how a collection was read (informers.py).
LISTING_LINE = re.compile(r"streaming list|in pages|no progress|listing again|expired|relist")
# The local time the operator's log records start with; its line at the end of its first
# listing (controller.main's all_listed), and the line of a status written (controller.writes).
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")
LISTED_LINE = re.compile(r"INFO fabriccap: listed \d+ nodes")
STATUS_WRITTEN_LINE = re.compile(r"INFO fabriccap\.controller\.writes: FabricCapability \S+: Ready=")


def rss_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def percentile(samples: list[float], quantile: float) -> float | None:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * quantile))] if ordered else None


# -- the baseline client (a child process: its own memory, nothing of the bench's)


def child_pid(pid: int) -> int:
    """The one child of a process (the operator under py-spy), waiting for it to appear."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise RuntimeError(f"process {pid} started no child in 30s")


class Listed(NamedTuple):
    path: str
    page_size: int
    optional: bool  # a kind the server may not serve (Karpenter's): a 404 is an empty list


def listed_paths(config_path: Path) -> list[Listed]:
    """Every collection the operator lists with this config."""
    config = load_config(str(config_path))
    return [
        Listed(path, watched.page_size, watched.optional)
        for watched in kinds_for(config)
        for _scope, path in watched.paths(config)
    ]


async def paged_listing(client: KubeClient, paths: list[Listed], unpaged: bool) -> int:
    async def one(listed: Listed) -> int:
        count = 0
        try:
            if unpaged:
                return len((await client.get(listed.path, max_body_bytes=WHOLE_LIST_BYTES)).get("items") or [])
            async for page in client.list_pages(listed.path, listed.page_size):
                count += len(page.get("items") or [])
        except KubeError as error:
            if not (listed.optional and error.status == 404):
                raise
        return count

    return sum(await asyncio.gather(*(one(listed) for listed in paths)))


async def streaming_listing(client: KubeClient, paths: list[Listed]) -> int:
    """Each collection as a watch with sendInitialEvents=true, decoded line by line up to the
    initial-events-end bookmark."""
    credentials = client.credentials
    params = {
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "1800",
    }

    async def one(session: aiohttp.ClientSession, listed: Listed) -> int:
        count = 0
        path = listed.path
        async with session.get(credentials.server + path, params=params, headers=credentials.headers()) as response:
            if listed.optional and response.status == 404:
                return 0
            if response.status != 200:
                raise RuntimeError(f"streaming list of {path}: {response.status} {await response.text()}")
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = decode_json(line)
                    if event["type"] == "BOOKMARK":
                        annotations = event["object"]["metadata"].get("annotations") or {}
                        if annotations.get("k8s.io/initial-events-end") == "true":
                            return count
                    else:
                        count += 1
        return count

    connector = aiohttp.TCPConnector(ssl=credentials.ssl_context())
    async with aiohttp.ClientSession(connector=connector) as session:
        return sum(await asyncio.gather(*(one(session, listed) for listed in paths)))


def baseline_child(kubeconfig: str, config_path: str, mode: str) -> None:
    async def run() -> tuple[float, int]:
        paths = listed_paths(Path(config_path))
        # The best plain client on loopback does not ask for gzip: decompressing a 500-item page
        # of pods costs more than carrying it (and the API server's compression more again).
        async with KubeClient(load_credentials(kubeconfig), compression=False) as client:
            started = time.perf_counter()
            if mode == "streaming":
                items = await streaming_listing(client, paths)
            else:
                items = await paged_listing(client, paths, unpaged=mode == "unpaged")
            return time.perf_counter() - started, items

    cpu = time.process_time()
    seconds, items = asyncio.run(run())
    cpu_s = time.process_time() - cpu
    print(json.dumps({"seconds": seconds, "items": items, "peak_rss_mib": rss_mib(os.getpid())[1], "cpu_s": cpu_s}))


def not_listed(why: str) -> dict[str, Any]:
    """A baseline mode without a figure: failed, or not run."""
    return {"median_s": None, "failed": why, "peak_rss_mib": None}


def baseline(
    kubeconfig: Path, config_path: Path, mode: str, runs: int, server_pid: int | None = None
) -> dict[str, Any]:
    """The median of ``runs`` listings by the plain client, each in a child process; with the
    CPU its client and (given ``server_pid``) the server it reads spent in the median's run."""
    results = []
    for _ in range(runs):
        server_cpu = cpu_seconds(server_pid) if server_pid is not None else 0.0
        child = subprocess.run(
            [
                sys.executable,
                __file__,
                "--baseline-child",
                mode,
                "--kubeconfig",
                str(kubeconfig),
                "--config",
                str(config_path),
            ],
            check=False,
            capture_output=True,
            text=True,
        )
        if child.returncode != 0:
            # Recorded, not fatal: at 1,000,000 pods a paged LIST outlasts its snapshot (the
            # continue token expires: 410), as it would against etcd's compaction.
            last = (child.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"the {mode} baseline failed ({child.returncode}): {last[:300]}", flush=True)
            return not_listed(last[:300])
        results.append(
            {
                **json.loads(child.stdout.strip().splitlines()[-1]),
                "server_cpu_s": cpu_seconds(server_pid) - server_cpu if server_pid is not None else None,
            }
        )
    seconds = [result["seconds"] for result in results]
    # The run whose time is the median's: its CPU, the client's and the server's, says what
    # the machine's cores were doing for it (``cpu_floor``).
    middle = sorted(results, key=lambda result: result["seconds"])[(len(results) - 1) // 2]
    return {
        "median_s": statistics.median(seconds),
        "runs_s": [round(value, 2) for value in seconds],
        "items": results[0]["items"],
        "peak_rss_mib": max(result["peak_rss_mib"] for result in results),
        "client_cpu_s": middle["cpu_s"],
        "server_cpu_s": middle["server_cpu_s"],
    }


# -- the operator's side


class OperatorProcess:
    """``fabriccap run``, perhaps under py-spy: ``pid`` is the operator's own process."""

    def __init__(self, process: subprocess.Popen[bytes], pid: int) -> None:
        self.process, self.pid = process, pid

    def poll(self) -> int | None:
        return self.process.poll()

    def stop(self) -> None:
        # The operator first: py-spy writes its profile when its target exits.
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


class Shards:
    """The operator's processes: one, or one per shard (``--shards``), measured together."""

    def __init__(self, members: list[OperatorProcess]) -> None:
        self.members = members

    @property
    def pid(self) -> int:
        """The one process (the fault and profile measurements watch one)."""
        (only,) = self.members
        return only.pid

    def exited(self) -> bool:
        return any(member.poll() is not None for member in self.members)

    def stop(self) -> None:
        for member in self.members:
            member.stop()

    def cpu_seconds(self) -> float:
        return sum(self.cpu_each())

    def cpu_each(self) -> list[float]:
        return [cpu_seconds(member.pid) for member in self.members]

    def rss(self) -> tuple[float, float, list[float]]:
        """(the largest VmRSS, the largest VmHWM, every VmHWM) in MiB: the targets are per replica."""
        each = [rss_mib(member.pid) for member in self.members]
        return max(now for now, _ in each), max(peak for _, peak in each), [round(peak, 1) for _, peak in each]


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except OSError as error:
        return 0, str(error)


def scrape(port: int) -> dict[str, float]:
    """The operator's metrics, ``name{labels}`` -> value, asked for as Prometheus asks (gzip)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept-Encoding": "gzip"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
            gzipped = response.headers.get("Content-Encoding") == "gzip"
    except OSError:  # HTTPError included: no figures
        return {}
    text = (gzip.decompress(body) if gzipped else body).decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r"^(fabriccap_[a-z_]+(?:\{[^}]*\})?) (\S+)$", line)
        if match:
            values[match[1]] = float(match[2])
    return values


def histogram_growth(
    before: dict[str, float], after: dict[str, float], name: str, labels: str = ""
) -> dict[str, float]:
    """What one histogram series gained between two scrapes: how many, their mean, and the
    bounds of the buckets that hold the 99th percentile and the largest (absent: above the last
    bound). ``labels`` is the series' other labels as exposed, before ``le`` (``lane="urgent",``)."""

    def grew(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    selector = f"{{{labels.rstrip(',')}}}" if labels else ""
    count = grew(f"{name}_count{selector}")
    if count <= 0:
        return {"count": 0}
    prefix = f"{name}_bucket{{{labels}le="
    buckets = sorted(
        (float(key[len(prefix) :].split('"', 2)[1]), grew(key))
        for key in after
        if key.startswith(prefix) and 'le="+Inf"' not in key
    )
    figures = {"count": count, "mean_s": grew(f"{name}_sum{selector}") / count}
    p99_bound = next((bound for bound, seen in buckets if seen >= 0.99 * count), None)
    max_bound = next((bound for bound, seen in buckets if seen >= count), None)
    figures |= {
        key: bound for key, bound in (("p99_at_most_s", p99_bound), ("max_at_most_s", max_bound)) if bound is not None
    }
    return figures


def round_figures(before: dict[str, float], after: dict[str, float]) -> dict[str, float | None]:
    """The publisher's rounds between two scrapes (shard 0's): how many, how long their
    evaluation took, and how many pools each evaluated."""
    evaluation = histogram_growth(before, after, "fabriccap_evaluation_duration_seconds")
    rounds = evaluation["count"]
    if rounds <= 0:
        return {"rounds": 0}
    return {
        "rounds": rounds,
        "evaluation_mean_s": evaluation["mean_s"],
        "evaluation_p99_at_most_s": evaluation.get("p99_at_most_s"),
        "evaluation_max_at_most_s": evaluation.get("max_at_most_s"),
        "pools_per_round": (
            after.get("fabriccap_evaluations_total", 0.0) - before.get("fabriccap_evaluations_total", 0.0)
        )
        / rounds,
    }


def lane_waits(before: dict[str, float], after: dict[str, float]) -> dict[str, dict[str, float]]:
    """How long the writes waited for their lanes between two scrapes, per lane that wrote."""
    lanes = sorted({label_value(key, "lane") for key in after if key.startswith("fabriccap_status_write_wait")})
    waits = {
        lane: histogram_growth(before, after, "fabriccap_status_write_wait_seconds", f'lane="{lane}",')
        for lane in lanes
    }
    return {lane: figures for lane, figures in waits.items() if figures["count"]}


def status_writes(simulator: Simulator) -> int:
    writes = simulator.stats()["sink"]["writes"]
    return int(writes.get("update fabriccapabilities.fabriccap.dev/status", 0))


def ready_reason(status: dict[str, Any] | None) -> str | None:
    for condition in (status or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("reason"))
    return None


def without_fabric(status: dict[str, Any] | None) -> int | None:
    value = (((status or {}).get("workloads") or {}).get("withoutFabric") or {}).get("pods")
    return None if value is None else int(value)


def wait_for_write(
    simulator: Simulator, name: str, since_ns: int, shows: Callable[[dict[str, Any] | None], bool]
) -> int | None:
    """The arrival time (unix ns) of the first status write of ``name`` since ``since_ns`` that
    shows the change, or None if none came in WAIT_SECONDS."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        for write in simulator.status_writes(since_ns, name):
            if shows(write["status"]):
                return int(write["at"])
        time.sleep(0.02)
    return None


def latest_status(simulator: Simulator, name: str) -> dict[str, Any] | None:
    writes = simulator.status_writes(0, name)
    return writes[-1]["status"] if writes else None


class Probes:
    """Changes on the probe pool, each timed from its commit in the simulator to the status
    write that shows it: a node's EFA count flipped (Ready: MixedCounts and back), a GPU pod
    without the fabric created and deleted (withoutFabric +1 and back)."""

    def __init__(self, simulator: Simulator, world: ScaleWorld) -> None:
        self.simulator = simulator
        self.capability = f"efa-{pool_name(0)}"
        self.nodes = world.nodes_of_pool(0)
        self.namespace = world.namespace
        self.samples: list[float] = []
        self.node_samples: list[float] = []  # a node's change to its pool's status
        self.lost = 0
        self.count = 0
        self.efa = "32"
        self.next_change = 0.0  # monotonic: when the probe pool may change again (its write budget)

    def _paced(self) -> None:
        time.sleep(max(self.next_change - time.monotonic(), 0.0))

    def _timed(self, committed: dict[str, Any], shows: Callable[[dict[str, Any] | None], bool]) -> float | None:
        arrived = wait_for_write(self.simulator, self.capability, int(committed["at"]), shows)
        self.next_change = time.monotonic() + PROBE_SPACING_SECONDS
        if arrived is None:
            self.lost += 1
            return None
        seconds = (arrived - int(committed["at"])) / 1e9
        self.samples.append(seconds)
        return seconds

    def node(self) -> None:
        self.efa = "16" if self.efa == "32" else "32"
        expected = "MixedCounts" if self.efa == "16" else "UniformCapability"
        self._paced()
        committed = self.simulator.post(
            "/probe/vars", {"resource": "nodes", "name": self.nodes[0], "vars": {"EFA": self.efa}}
        )
        seconds = self._timed(committed, lambda status: ready_reason(status) == expected)
        if seconds is not None:
            self.node_samples.append(seconds)

    def pod(self) -> None:
        base = without_fabric(latest_status(self.simulator, self.capability)) or 0
        name = f"probe-{self.count:05d}"
        self.count += 1
        self._paced()
        committed = self.simulator.post(
            "/probe/create",
            {
                "template": GPU_TCP_POD_TEMPLATE,
                "namespace": self.namespace,
                "name": name,
                "node": self.nodes[-1],
                "vars": {"JOB": f"probe-job-{name}", "JOBUID": f"00000000-0000-4000-8000-{self.count:012d}"},
            },
        )
        self._timed(committed, lambda status: without_fabric(status) == base + 1)
        self._paced()
        committed = self.simulator.post(
            "/probe/delete", {"resource": "pods", "namespace": self.namespace, "name": name}
        )
        self._timed(committed, lambda status: without_fabric(status) == base)

    def one_round(self) -> None:
        self.node()
        self.pod()


def list_requests(simulator: Simulator) -> dict[str, int]:
    """The operator's listings by resource: LIST pages, and streaming lists that reached the
    end of their initial events."""
    stats = simulator.stats()
    counts = {key.split(" ", 1)[1]: int(value) for key, value in stats["requests"].items() if key.startswith("LIST ")}
    for record in stats.get("initialStreams") or []:
        if not record["bench"]:
            counts[record["resource"]] = counts.get(record["resource"], 0) + 1
    return counts


def writes_settled(simulator: Simulator, started_ns: int, quiet: float = 2.0, limit: float = 120.0) -> float | None:
    """Seconds from the operator's start to its start's last write of a FabricCapability (a
    ready label, which follows its status's Events): when the sink's count of those writes last
    moved, once it has not moved for ``quiet`` seconds (polled every 0.1 s; None: still moving
    after ``limit``). Not every Event: the workloads' Warnings go on at their own pace. Called
    before any churn starts."""
    moved_total, moved_ns = -1, time.time_ns()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        writes = simulator.stats()["sink"]["writes"]
        total = sum(int(count) for key, count in writes.items() if "fabriccapabilities" in key)
        now = time.time_ns()
        if total != moved_total:
            moved_total, moved_ns = total, now
        elif now - moved_ns >= quiet * 1e9:
            return (moved_ns - started_ns) / 1e9
        time.sleep(0.1)
    return None


def first_logged(directory: Path, started_ns: int, lines: Mapping[str, re.Pattern[str]]) -> dict[str, float | None]:
    """For each of ``lines``, seconds from the operator's start to the first log line it finds
    (None: none yet), in one read of the logs."""
    found: dict[str, float | None] = dict.fromkeys(lines)
    for path in sorted(directory.glob("operator-*.log")):
        for text in path.read_text(errors="replace").splitlines():
            at = LOG_TIME.match(text)
            if at is None:
                continue
            for key, line in lines.items():
                if found[key] is None and line.search(text, at.end()):
                    logged = time.mktime(time.strptime(at.group(1), "%Y-%m-%d %H:%M:%S")) + int(at.group(2)) / 1000
                    found[key] = logged - started_ns / 1e9
    return found


def label_value(key: str, label: str) -> str:
    """The value of ``label`` in a scraped series' key (``name{label="value",...}``)."""
    return key.split(f'{label}="', 1)[1].split('"', 1)[0]


def relists(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {kind: after[kind] - before.get(kind, 0) for kind in after if after[kind] - before.get(kind, 0)}


def grown(before: dict[str, float], after: dict[str, float], prefix: str) -> dict[str, float]:
    """The series of ``prefix`` that moved between two scrapes, by how much."""
    return {
        key: after[key] - before.get(key, 0.0)
        for key in after
        if key.startswith(prefix) and after[key] != before.get(key, 0.0)
    }


def grown_by_kind(before: dict[str, float], after: dict[str, float], prefix: str) -> dict[str, int]:
    """The series of ``prefix`` that moved between two scrapes, by their ``kind`` label."""
    return {label_value(key, "kind"): int(moved) for key, moved in grown(before, after, prefix).items()}


def expirations(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    """The operator's watches that ended in 410 between two scrapes, by kind."""
    return grown_by_kind(before, after, "fabriccap_watch_expirations_total{")


def churn_spec(world: ScaleWorld, args: argparse.Namespace, seconds: float, pods: bool = True) -> dict[str, Any]:
    counts = world.workload_counts()
    total = sum(counts.values()) or 1
    spec: dict[str, Any] = {"seconds": seconds, "heartbeatsPerSecond": args.heartbeats}
    if pods and args.pod_creates > 0:
        job_vars = {"JOB": "churn-job-{job}", "JOBUID": "c0000000-0000-4000-8000-{job12}"}
        spec.update(
            {
                "podCreatesPerSecond": args.pod_creates,
                "podLifetimeSeconds": args.pod_lifetime,
                "podNamespace": world.namespace,
                "podNodes": world.busy_nodes,
                "podTemplates": [
                    {"template": template, "weight": counts[template] / total or 1e-9, "vars": job_vars}
                    for template in (GPU_EFA_POD_TEMPLATE, GPU_TCP_POD_TEMPLATE, CPU_POD_TEMPLATE)
                ],
            }
        )
    return spec


class HealthSampler:
    """/healthz and the staleness metrics once a second, in a thread, while a fault lasts."""

    def __init__(self, health_port: int, metrics_port: int) -> None:
        self.health_port, self.metrics_port = health_port, metrics_port
        self.samples: list[dict[str, Any]] = []

    def sample(self, started: float) -> None:
        code, _ = http_get(f"http://127.0.0.1:{self.health_port}/healthz", timeout=5)
        metrics = scrape(self.metrics_port)
        now = time.time()
        connected = {
            label_value(key, "kind"): value
            for key, value in metrics.items()
            if key.startswith("fabriccap_watch_connected{")
        }
        ages = {
            label_value(key, "kind"): round(now - value, 1)
            for key, value in metrics.items()
            if key.startswith("fabriccap_watch_last_event_timestamp_seconds{")
        }
        self.samples.append(
            {"t": round(time.monotonic() - started, 1), "healthz": code, "connected": connected, "age_s": ages}
        )

    def summary(self) -> dict[str, Any]:
        codes = [sample["healthz"] for sample in self.samples]
        disconnected = [sample["t"] for sample in self.samples if any(v == 0 for v in sample["connected"].values())]
        failing = [sample["t"] for sample in self.samples if sample["healthz"] != 200]
        return {
            "samples": len(self.samples),
            "healthz_codes": sorted(set(codes)),
            "healthz_failing_s": [failing[0], failing[-1]] if failing else None,
            "watch_disconnected_s": [disconnected[0], disconnected[-1]] if disconnected else None,
            "max_age_s": max((max(s["age_s"].values(), default=0) for s in self.samples), default=None),
        }


def sample_for(sampler: HealthSampler, seconds: float) -> None:
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        sampler.sample(started)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started) % 1.0))


def faults(
    simulator: Simulator,
    world: ScaleWorld,
    args: argparse.Namespace,
    operator: Shards,
    health_port: int,
    metrics_port: int,
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    watched = ["nodes", "pods", "daemonsets", "resourceslices"]

    # A forced relist under heartbeats alone: whatever it writes, it caused.
    simulator.post("/churn", churn_spec(world, args, 0, pods=False))
    time.sleep(5)
    writes, lists, rss = status_writes(simulator), list_requests(simulator), rss_mib(operator.pid)[0]
    metrics = scrape(metrics_port)
    simulator.post("/fault/expire", {"resources": watched})
    started = time.monotonic()
    relisted_in = None
    while time.monotonic() < started + RELIST_WAIT_SECONDS:
        if {"nodes", "pods"} <= set(relists(lists, list_requests(simulator))):
            relisted_in = round(time.monotonic() - started, 1)
            break
        time.sleep(0.5)
    time.sleep(10 + 2 * args.debounce)
    results["relist_410"] = {
        "relists": relists(lists, list_requests(simulator)),
        "nodes_and_pods_listed_in_s": relisted_in,  # None: not within RELIST_WAIT_SECONDS
        "expirations": expirations(metrics, scrape(metrics_port)),
        "status_writes": status_writes(simulator) - writes,
        "rss_before_mib": round(rss, 1),
        "rss_after_mib": round(rss_mib(operator.pid)[0], 1),
    }
    time.sleep(20)
    results["relist_410"]["rss_30s_later_mib"] = round(rss_mib(operator.pid)[0], 1)
    simulator.request("DELETE", "/churn")

    # The rest under full churn.
    simulator.post("/churn", churn_spec(world, args, 0))
    time.sleep(10)
    probes = Probes(simulator, world)

    lists, metrics = list_requests(simulator), scrape(metrics_port)
    simulator.post("/fault/malformed", {"resource": "pods", "count": 1})
    time.sleep(10)
    probes.one_round()
    results["malformed_event"] = {
        "sent": simulator.stats()["faults"].get("malformed events sent", 0),
        "relists": relists(lists, list_requests(simulator)),
        "expirations": expirations(metrics, scrape(metrics_port)),
        "probe_after_s": [round(sample, 3) for sample in probes.samples[-3:]],
    }

    sampler = HealthSampler(health_port, metrics_port)
    before = scrape(metrics_port)
    lists = list_requests(simulator)
    simulator.post("/fault/throttle", {"seconds": 30, "fraction": 1.0})
    sample_for(sampler, 40)
    after = scrape(metrics_port)
    refused = {
        key: after[key] - before.get(key, 0)
        for key in after
        if key.startswith("fabriccap_api_errors_total") and '"429"' in key and after[key] - before.get(key, 0)
    }
    probes.one_round()
    results["throttle_429_30s"] = {
        "operator_429s": refused,
        "relists": relists(lists, list_requests(simulator)),
        "expirations": expirations(before, scrape(metrics_port)),
        "health": sampler.summary(),
        "probe_after_s": [round(sample, 3) for sample in probes.samples[-3:]],
    }

    sampler = HealthSampler(health_port, metrics_port)
    lists, metrics = list_requests(simulator), scrape(metrics_port)
    simulator.post("/fault/outage", {"seconds": args.outage_seconds})
    sample_for(sampler, args.outage_seconds + 30)
    probes.one_round()
    results[f"outage_{args.outage_seconds:.0f}s"] = {
        "relists": relists(lists, list_requests(simulator)),
        "expirations": expirations(metrics, scrape(metrics_port)),
        "health": sampler.summary(),
        "probe_after_s": [round(sample, 3) for sample in probes.samples[-3:]],
        "lost_probes": probes.lost,
    }
    simulator.request("DELETE", "/churn")
    return results


def env_setting(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--operator-env``, as a pair."""
    key, equals, value = text.partition("=")
    if not key or not equals:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def start_operators(
    args: argparse.Namespace, simulator: Simulator, config_path: Path, directory: Path
) -> tuple[Shards, int, int, list[IO[str]]]:
    """``fabriccap run`` once, or once per shard; the ports are shard 0's (faults run unsharded)."""
    members: list[OperatorProcess] = []
    logs: list[IO[str]] = []
    ports: list[tuple[int, int]] = []
    for index in range(args.shards):
        metrics_port, health_port = free_loopback_port(), free_loopback_port()
        ports.append((metrics_port, health_port))
        shard = Shard(index=index, count=args.shards)
        command = local_run_command(simulator.kubeconfig, config_path, metrics_port, health_port, shard=shard)
        if args.tracemalloc:
            # The same command under tracemalloc (traced_operator.py): python, the script, its
            # output, then fabriccap's own arguments in place of "-m fabriccap".
            traced = Path(__file__).with_name("traced_operator.py")
            command = [command[0], str(traced), args.tracemalloc, *command[3:]]
        if args.profile:
            # py-spy samples the operator from outside (its own CPU is not the operator's);
            # raw output is one collapsed stack per line with its sample count. Blocking mode
            # pauses the process for each sample: --nonblocking read stacks mid-change and put
            # 40% of a start in json.loads, more than decoding everything costs.
            profiler = Path(sys.executable).parent / "py-spy"
            record = [str(profiler), "record", "--rate", "25", "--format", "raw"]
            command = [*record, "-o", args.profile, "--", *command]
        log = (directory / f"operator-{index}.log").open("w")
        logs.append(log)
        # The operator's own environment (--operator-env): the baseline client keeps this one.
        env = {**os.environ, **dict(args.operator_env)}
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        members.append(OperatorProcess(process, child_pid(process.pid) if args.profile else process.pid))
    return Shards(members), ports[0][0], ports[0][1], logs


def log_tail(directory: Path, lines: int = 30) -> str:
    """The last lines of each operator's log in ``directory``."""
    tails = []
    for path in sorted(directory.glob("operator-*.log")):
        tails.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
    return "\n".join(tails)


def traced_snapshot(pid: int, out: Path) -> dict[str, Any]:
    """Ask the operator under traced_operator.py for its live allocations; its summary."""
    out.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        time.sleep(1)
        with contextlib.suppress(FileNotFoundError, ValueError):
            report = json.loads(out.read_text())
            mib = 2**20
            return {
                "python_live_mib": report["total"] / mib,
                "rss_before_trim_mib": report["rss_before_trim"] / mib,
                "rss_after_trim_mib": report["rss_after_trim"] / mib,
                # Which of the operator's lines hold the most (traced_operator.py's by_fabriccap_line).
                "top_fabriccap_mib": [
                    (place["where"], round(place["size"] / mib, 2), place["count"])
                    for place in report.get("top_fabriccap", [])[:25]
                ],
            }
    raise RuntimeError(f"no tracemalloc snapshot in {out} after 600 s")


def bench(args: argparse.Namespace) -> dict[str, Any]:
    world = ScaleWorld(
        nodes=args.nodes, pods=args.pods, pools=args.pools, quiet_pools=max(2, args.pools // 100), gpu_share=0.2
    )
    results: dict[str, Any] = {
        "nodes": args.nodes,
        "pods": args.pods,
        "pools": args.pools,
        "shards": args.shards,
        "load_before": os.getloadavg()[0],
    }
    with tempfile.TemporaryDirectory(prefix="fabriccap-scale-") as scratch:
        directory = Path(scratch)
        started = time.perf_counter()
        spec = world.spec()
        results["world_s"] = time.perf_counter() - started
        config_path = directory / "config.yaml"
        config_path.write_text(f"debounceSeconds: {args.debounce}\nstaleAfterSeconds: {args.stale_after}\n")
        started = time.perf_counter()
        with Simulator(directory / "sim", world=spec, read_lag_period_seconds=args.read_lag) as simulator:
            del spec
            results["simulator_load_s"] = time.perf_counter() - started
            results["simulator_rss_mib"] = rss_mib(simulator.info.pid)[0]
            bench_kubeconfig = simulator.info.bench_kubeconfig

            print(f"world loaded: {results['simulator_load_s']:.1f}s; baseline...", flush=True)
            paged = (
                baseline(bench_kubeconfig, config_path, "paged", args.baseline_runs, simulator.info.pid)
                if args.paged
                else not_listed("not run (--no-paged)")
            )
            streaming = baseline(bench_kubeconfig, config_path, "streaming", args.baseline_runs, simulator.info.pid)
            results["baseline_paged"] = paged
            results["baseline_streaming"] = streaming
            estimated_bytes = args.nodes * 17_000 + (args.pods + args.nodes) * 6_000
            if args.unpaged and estimated_bytes < UNPAGED_LIMIT_BYTES:
                results["baseline_unpaged_old"] = baseline(
                    bench_kubeconfig, config_path, "unpaged", args.baseline_runs, simulator.info.pid
                )
            succeeded = [mode["median_s"] for mode in (paged, streaming) if mode["median_s"] is not None]
            if not succeeded:
                raise RuntimeError("no baseline client could list the collections")
            baseline_s = min(succeeded)
            results["baseline_s"] = baseline_s

            print("baseline done; starting the operator", flush=True)
            simulator.post("/stats/reset", {})
            simulator_cpu = cpu_seconds(simulator.info.pid)
            started_ns = time.time_ns()
            operator, metrics_port, health_port, logs = start_operators(args, simulator, config_path, directory)
            try:
                deadline = time.monotonic() + 3600
                while True:
                    count, last_first = simulator.published()
                    if count >= args.pools:
                        break
                    if operator.exited():
                        # The scratch directory goes with the run: its log's end goes with the error.
                        raise RuntimeError(f"the operator exited; its log ended:\n{log_tail(directory)}")
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"only {count} of {args.pools} pools published after an hour")
                    time.sleep(0.1)
                results["start_s"] = (last_first - started_ns) / 1e9
                results["start_ratio"] = results["start_s"] / baseline_s
                results["start_ratio_paged"] = results["start_s"] / paged["median_s"] if paged["median_s"] else None
                # The start's parts: the listing, the first round's evaluation (and the owners'
                # reads before it), then its writes.
                results.update(
                    first_logged(
                        directory,
                        started_ns,
                        {"start_listed_s": LISTED_LINE, "start_first_write_s": STATUS_WRITTEN_LINE},
                    )
                )
                results["start_cpu_s"] = operator.cpu_seconds()
                results["start_cpu_s_by_shard"] = operator.cpu_each()
                results["start_simulator_cpu_s"] = cpu_seconds(simulator.info.pid) - simulator_cpu
                # Before the idle is measured too: the Events and labels after the statuses
                # took the first seconds of its window (0.20 cores "idle" at 100,000 nodes).
                results["start_writes_done_s"] = writes_settled(simulator, started_ns)
                time.sleep(5)
                rss_now, rss_peak, results["peak_rss_after_start_mib_by_shard"] = operator.rss()
                results["rss_after_start_mib"], results["peak_rss_after_start_mib"] = rss_now, rss_peak
                results["start_lists"] = list_requests(simulator)
                print(f"started in {results['start_s']:.1f}s (baseline {baseline_s:.1f}s)", flush=True)
                if args.tracemalloc:
                    results["tracemalloc_after_start"] = traced_snapshot(operator.pid, Path(args.tracemalloc))
                if args.start_only:
                    results["peak_rss_mib"] = results["peak_rss_after_start_mib"]
                    results["load_after"] = os.getloadavg()[0]
                    return results

                # Idle, then heartbeats alone.
                cpu, wall = operator.cpu_seconds(), time.monotonic()
                time.sleep(args.idle_seconds)
                idle_cores = (operator.cpu_seconds() - cpu) / (time.monotonic() - wall)
                writes = status_writes(simulator)
                cpu, wall = operator.cpu_seconds(), time.monotonic()
                simulator.post("/churn", churn_spec(world, args, args.heartbeat_seconds, pods=False))
                time.sleep(args.heartbeat_seconds + 2 * args.debounce + 2)
                heartbeat_wall = time.monotonic() - wall
                heartbeat_cpu = operator.cpu_seconds() - cpu
                heartbeats = simulator.request("DELETE", "/churn")["counts"].get("node heartbeats", 0)
                results["idle_cores"] = idle_cores
                results["heartbeats"] = heartbeats
                results["heartbeat_only_status_writes"] = status_writes(simulator) - writes
                results["heartbeat_cores"] = heartbeat_cpu / heartbeat_wall
                results["cpu_s_per_1000_heartbeats"] = (
                    (heartbeat_cpu - idle_cores * heartbeat_wall) / heartbeats * 1000 if heartbeats else None
                )

                # Churn, with probes on the probe pool and control pools that only get heartbeats.
                print(f"churn for {args.churn_seconds:.0f}s", flush=True)
                controls = {f"efa-{pool_name(pool)}" for pool in range(1, world.quiet_pools)}
                simulator.post("/stats/reset", {})
                rss_before_scrape = operator.rss()
                started_scrape = time.monotonic()
                rounds_before = scrape(metrics_port)
                results["first_scrape"] = {
                    "seconds": time.monotonic() - started_scrape,
                    "rss_before_mib": rss_before_scrape[:2],
                    "rss_after_mib": operator.rss()[:2],
                }
                churn_started_ns = time.time_ns()
                cpu, wall = operator.cpu_seconds(), time.monotonic()
                simulator.post("/churn", churn_spec(world, args, args.churn_seconds))
                probes = Probes(simulator, world)
                time.sleep(min(10.0, args.churn_seconds / 4))  # into the steady state first
                while time.monotonic() - wall < args.churn_seconds and probes.count < args.probes:
                    probes.one_round()
                while time.monotonic() - wall < args.churn_seconds:
                    time.sleep(0.5)
                churn_wall = time.monotonic() - wall
                churn_cpu = operator.cpu_seconds() - cpu
                churn = simulator.request("DELETE", "/churn")
                time.sleep(2 * args.debounce + 2)
                stats = simulator.stats()
                writes_during = simulator.status_writes(churn_started_ns)
                results["churn"] = churn["counts"]
                results["churn_seconds"] = churn["seconds"]
                results["cpu_cores"] = churn_cpu / churn_wall
                results["churn_status_writes"] = len(writes_during)
                rounds_after = scrape(metrics_port)
                results["rounds"] = round_figures(rounds_before, rounds_after)
                results["lane_waits"] = lane_waits(rounds_before, rounds_after)
                # Writes of the probe pool against the changes the probes made (3 a round):
                # more than one a change spends the object's write budget (1 a second).
                results["probe_pool_writes"] = sum(1 for write in writes_during if write["name"] == probes.capability)
                if args.tracemalloc:  # what the churn left: compare with the snapshot after start
                    results["tracemalloc_after_churn"] = traced_snapshot(operator.pid, Path(args.tracemalloc))
                results["probe_changes"] = 3 * probes.count
                results["probe_pool_timeline"] = [
                    {
                        "after_s": round((int(write["at"]) - churn_started_ns) / 1e9, 3),
                        "ready": ready_reason(write["status"]),
                        "withoutFabric": without_fabric(write["status"]),
                        "workloads": sorted((write["status"].get("workloads") or {}).items())[:4],
                    }
                    for write in writes_during
                    if write["name"] == probes.capability
                ][:40]
                results["control_pool_writes"] = sum(1 for write in writes_during if write["name"] in controls)
                results["heartbeat_writes"] = results["heartbeat_only_status_writes"] + results["control_pool_writes"]
                results["probe_samples"] = len(probes.samples)
                results["probes_lost"] = probes.lost
                results["p50_s"] = percentile(probes.samples, 0.5)
                results["p99_s"] = percentile(probes.samples, 0.99)
                results["node_probe_samples"] = len(probes.node_samples)
                results["node_probe_p50_s"] = percentile(probes.node_samples, 0.5)
                results["node_probe_p99_s"] = percentile(probes.node_samples, 0.99)
                results["watch_delivery"] = stats["delivery"]
                results["watch_p99_s"] = stats["delivery"]["all"]["p99"]
                # Each event to the moment the operator took its bytes off its socket: what the
                # delivery above cannot see (scalesim's readlag.go). Not the bound's term, which is
                # the server's part; the difference is the operator's own wait to read.
                results["watch_read_delivery"] = stats.get("readDelivery") or {}
                results["target_p99_s"] = results["watch_p99_s"] + args.debounce + 0.25
                results["operator_requests_during_churn"] = stats["requests"]
                rss_now, rss_peak, results["peak_rss_mib_by_shard"] = operator.rss()
                results["rss_after_churn_mib"], results["peak_rss_mib"] = rss_now, rss_peak
                results["simulator_cpu_s"] = cpu_seconds(simulator.info.pid)

                if args.faults:
                    print("faults", flush=True)
                    results["faults"] = faults(simulator, world, args, operator, health_port, metrics_port)
                    results["rss_after_faults_mib"], results["peak_rss_mib"], _ = operator.rss()
            finally:
                operator.stop()
                for log in logs:
                    log.close()
                logged = [
                    path.read_text(errors="replace").splitlines() for path in sorted(directory.glob("operator-*.log"))
                ]
                results["operator_log_tail"] = [line for lines in logged for line in lines[-5:]]
                # How each collection was read, and why one was read again or in pages.
                results["operator_listing_lines"] = [
                    line[:300] for lines in logged for line in lines if LISTING_LINE.search(line)
                ][:40]
    results["load_after"] = os.getloadavg()[0]
    return results


def cpu_floor(results: Mapping[str, Any], best: Mapping[str, Any]) -> str:
    """What the start's CPU allows on this machine: the operator's and the simulator's CPU
    seconds in the start, spread over every core, is the shortest the start could take here
    however the operator's work were arranged (the baseline's own CPU beside it)."""
    operator_cpu, simulator_cpu = results.get("start_cpu_s"), results.get("start_simulator_cpu_s")
    if operator_cpu is None or simulator_cpu is None:
        return "CPU in the start: n/a"
    cores = os.cpu_count() or 1
    floor = (operator_cpu + simulator_cpu) / cores
    return (
        f"CPU in the start: operator {operator_cpu:.1f} s + simulator {simulator_cpu:.1f} s; on {cores} cores no start "
        f"could take less than {floor:.2f} s here = {floor / results['baseline_s']:.2f}x the baseline (whose client "
        f"used {best.get('client_cpu_s') or 0:.1f} s and the simulator {best.get('server_cpu_s') or 0:.1f} s of CPU)"
    )


def profile_summary(path: Path, top: int = 15) -> str:
    """The functions where the operator spent its samples (py-spy's raw output: one collapsed
    stack per line, its sample count last): by self time and by time inside them."""
    own: dict[str, int] = {}
    inside: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        # "function (file:line)" -> "function (file)": a function is one entry whatever line ran.
        frames = [re.sub(r":\d+\)$", ")", frame) for frame in stack.split(";")]
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            inside[frame] = inside.get(frame, 0) + count
    if not total:
        return f"profile {path}: no samples"

    def table(counts: dict[str, int]) -> list[str]:
        ranked = sorted(counts.items(), key=lambda item: -item[1])[:top]
        return [f"  {count / total:6.1%}  {frame}" for frame, count in ranked]

    return "\n".join([f"profile {path}: {total} samples", "self:", *table(own), "inside (inclusive):", *table(inside)])


def summary(results: dict[str, Any], debounce: float) -> str:
    """The figures for people: seconds, each beside its ratio to what this run measured as the
    baseline (the best plain client) or the target."""

    def ratio(value: float | None, base: float | None) -> str:
        return "n/a" if value is None or not base else f"{value / base:.2f}x"

    def seconds(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f} s"

    paged, streaming = results["baseline_paged"], results["baseline_streaming"]
    best = "streaming" if results["baseline_s"] == streaming["median_s"] else "paged"
    base_rss = results["baseline_" + best]["peak_rss_mib"]
    target = results.get("target_p99_s")
    lines = [
        f"size: {results['nodes']} nodes, {results['pods']} pods, {results['pools']} pools "
        f"(load average {results['load_before']:.1f} before, {results['load_after']:.1f} after)",
        f"baseline: {best} list {seconds(results['baseline_s'])} (median; paged {seconds(paged['median_s'])}, "
        f"streaming {seconds(streaming['median_s'])}"
        + (
            f", old unpaged {seconds(results['baseline_unpaged_old']['median_s'])})"
            if "baseline_unpaged_old" in results
            else ")"
        ),
        f"start: {seconds(results.get('start_s'))} = {ratio(results.get('start_s'), results['baseline_s'])} the "
        f"baseline ({ratio(results.get('start_s'), paged['median_s'])} the paged list); the first listing ended "
        f"at {seconds(results.get('start_listed_s'))} ({ratio(results.get('start_listed_s'), results['baseline_s'])} "
        f"the baseline), the first status was written at {seconds(results.get('start_first_write_s'))}"
        + (
            f", its last FabricCapability write (a ready label) at {seconds(results['start_writes_done_s'])}"
            if results.get("start_writes_done_s") is not None
            else ""
        ),
        cpu_floor(results, results["baseline_" + best]),
        f"node probe (EFA count -> status): p50 {seconds(results.get('node_probe_p50_s'))}, "
        f"p99 {seconds(results.get('node_probe_p99_s'))} over {results.get('node_probe_samples')}; all probes p99 "
        f"{seconds(results.get('p99_s'))} = {ratio(results.get('p99_s'), target)} the target {seconds(target)} "
        f"(watch delivery p99 {seconds(results.get('watch_p99_s'))} + debounce {debounce} s + 0.25 s)",
        f"RSS: peak {results.get('peak_rss_mib', 0):.1f} MiB = {ratio(results.get('peak_rss_mib'), base_rss)} the "
        f"baseline client's peak {base_rss:.1f} MiB; after start {results.get('rss_after_start_mib', 0):.1f} MiB",
        f"writes: {results.get('heartbeat_writes')} caused by heartbeats (target 0); "
        f"{results.get('churn_status_writes')} status writes in {results.get('churn_seconds', 0):.0f} s of churn",
        f"CPU: {results.get('cpu_cores', 0):.2f} cores under churn, idle {results.get('idle_cores', 0):.2f}; "
        f"{results.get('cpu_s_per_1000_heartbeats') or 0:.2f} CPU s per 1,000 heartbeats",
    ]
    read = results.get("watch_read_delivery") or {}
    if (read.get("all") or {}).get("count"):
        kinds = sorted(kind for kind, summary in read.items() if kind != "all" and summary["count"])
        by_kind = ", ".join(f"{kind} {seconds(read[kind]['p99'])}" for kind in kinds)
        lines.append(
            f"watch delivery to the operator's read: p50 {seconds(read['all']['p50'])}, p99 "
            f"{seconds(read['all']['p99'])}, max {seconds(read['all']['max'])} over {read['all']['count']} events "
            f"(p99 by kind: {by_kind})"
        )
    rounds = results.get("rounds") or {}
    if rounds.get("rounds"):
        lines.append(
            f"rounds under churn: {rounds['rounds']:.0f}, {rounds['pools_per_round']:.0f} pools each; evaluation "
            f"mean {seconds(rounds['evaluation_mean_s'])}, p99 at most {seconds(rounds['evaluation_p99_at_most_s'])}, "
            f"the slowest at most {seconds(rounds.get('evaluation_max_at_most_s'))}"
        )
    for lane, wait in (results.get("lane_waits") or {}).items():
        lines.append(
            f"writes waiting for the {lane} lane under churn: {wait['count']:.0f}, mean {seconds(wait['mean_s'])},"
            f" p99 at most {seconds(wait.get('p99_at_most_s'))},"
            f" the longest at most {seconds(wait.get('max_at_most_s'))}"
        )
    if results["shards"] > 1:
        lines.append(
            f"shards: {results['shards']} processes; peak RSS by shard "
            f"{results.get('peak_rss_mib_by_shard') or results.get('peak_rss_after_start_mib_by_shard')} MiB, "
            f"start CPU by shard {[round(cpu, 1) for cpu in results.get('start_cpu_s_by_shard', [])]} s; "
            "CPU figures are all the shards' together"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--pools", type=int, default=200)
    parser.add_argument("--churn-seconds", type=float, default=60.0)
    parser.add_argument("--heartbeats", type=float, default=700.0, help="node heartbeats per second")
    parser.add_argument("--pod-creates", type=float, default=1000.0, help="pod creations per second")
    parser.add_argument("--pod-lifetime", type=float, default=30.0, help="seconds before a churn pod is deleted")
    parser.add_argument("--probes", type=int, default=60, help="probe rounds at most (3 samples each)")
    parser.add_argument("--debounce", type=float, default=0.2)
    parser.add_argument("--stale-after", type=float, default=150.0, help="the operator's staleAfterSeconds")
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--heartbeat-seconds", type=float, default=30.0)
    parser.add_argument("--baseline-runs", type=int, default=3)
    parser.add_argument(
        "--unpaged", action=argparse.BooleanOptionalAction, default=True, help="the old unpaged baseline too"
    )
    parser.add_argument(
        "--paged",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the paged-LIST baseline (at 1,000,000 pods it outlasts the simulator's 5-minute snapshot: 410)",
    )
    parser.add_argument("--faults", action="store_true", help="relist, malformed event, 429 storm, outage")
    parser.add_argument(
        "--read-lag",
        type=float,
        metavar="SECONDS",
        help="time each event to the operator's read of it, sampling every SECONDS (scalesim's readlag.go; "
        "it costs the simulator CPU the operator shares: 0.02 doubled it at 100,000 nodes)",
    )
    parser.add_argument("--outage-seconds", type=float, default=60.0)
    parser.add_argument("--start-only", action="store_true", help="stop after the start figures")
    parser.add_argument(
        "--operator-env",
        action="append",
        type=env_setting,
        default=[],
        metavar="KEY=VALUE",
        help="set in the operator's environment only (e.g. PYTHONMALLOC=malloc); repeatable",
    )
    parser.add_argument(
        "--profile",
        help="record the operator with py-spy (pip install py-spy) into this file (raw collapsed stacks)",
    )
    parser.add_argument(
        "--tracemalloc",
        help="run the operator under tracemalloc (traced_operator.py) and write its live allocations after start"
        " and after the churn to this file (slow: compare memory, not time)",
    )
    parser.add_argument(
        "--shards",
        type=int,
        default=1,
        help="run this many operator processes, --shard 0..N-1 of N (figures: the largest replica's RSS, all CPU)",
    )
    parser.add_argument("--baseline-child", choices=["paged", "streaming", "unpaged"], help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.shards > 1 and (args.faults or args.profile or args.tracemalloc):
        parser.error("--faults, --profile and --tracemalloc watch one operator process: not with --shards")
    if args.profile and args.tracemalloc:
        parser.error("--profile and --tracemalloc: one at a time (tracemalloc slows what py-spy would sample)")
    if args.baseline_child:
        baseline_child(args.kubeconfig, args.config, args.baseline_child)
        return 0
    print(
        f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}; python {sys.version.split()[0]}",
        flush=True,
    )
    results = bench(args)
    print(json.dumps(results, indent=1, default=str), flush=True)
    print(summary(results, args.debounce), flush=True)
    if args.profile:
        print(profile_summary(Path(args.profile)), flush=True)

    def figure(key: str, digits: int = 3) -> str:
        value = results.get(key)
        return "n/a" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    print(
        f"nodes={args.nodes} pods={args.pods} pools={args.pools} shards={args.shards} start_s={figure('start_s', 2)} "
        f"baseline_s={figure('baseline_s', 2)} start_ratio={figure('start_ratio', 2)} "
        f"peak_rss_mib={figure('peak_rss_mib', 1)} heartbeat_writes={figure('heartbeat_writes')} "
        f"cpu_cores={figure('cpu_cores', 2)} p99_s={figure('p99_s')} watch_p99_s={figure('watch_p99_s')} "
        f"debounce_s={args.debounce}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
