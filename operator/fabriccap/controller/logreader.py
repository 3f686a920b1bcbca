"""What NCCL chose, read from the pods' own logs (config.transport; docs/transport.md).

For each running accelerator container of a workload pod that requests the fabric or an
accelerator, the beginning of its log (``pods/log?container=…&limitBytes=maxBytes``) is read
once per run (pod UID, container, restart count), again at the configured steps after the
container started while no line decides the transport (``readAfterSeconds``: 1, 5, 15 and
60 minutes by default), then never again. A run first seen after some steps have passed gets
one read for all of them.

Each read (``kube.logs.read_container_log``) streams: the body is taken in chunks of 16 KiB,
each goes through one parser per fabric (``core.transport.TransportScanner``) and the event
loop runs between two chunks, so the pools' evaluation never waits more than one chunk's work
(about 3.4 ms at worst, ``benchmarks/transport_parser_bench.py --shapes``). The read stops once the job's
verdict is settled (``TransportScanner.decisive``), or after ``maxBytes``; what it
holds is one chunk and the parsers' bounded state, never the log. What is kept is a verdict and
one evidence line per pod (``core.verdicts``), put in the index, which re-evaluates the pod's
pool.

Reads are bounded: at most ``maxConcurrentReads`` in flight, started at ``readsPerSecond``
after a burst of as many (a token bucket), by a few workers rather than a task per pod. A read
refused (403), of a pod or container gone (404) or failed (500, no answer) leaves the
container ``unknown`` with the reason kept for the status; the next step reads again. A pod
deleted while its log is read is dropped: the read is cancelled and nothing of it is kept.

Every replica reads, as every replica watches: a standby that becomes leader publishes
verdicts it already has.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from fabriccap.controller.memory import MemoryTrimmer
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.store import FactStore
from fabriccap.core.config import Config
from fabriccap.core.facts import ContainerRun, WorkloadPodFacts
from fabriccap.core.index import NamespacedKey
from fabriccap.core.ratelimit import TokenBucket
from fabriccap.core.transport import SIGNATURES
from fabriccap.core.verdicts import ContainerRead, combine, read_failure_reason
from fabriccap.core.workloads import log_is_read
from fabriccap.kube.client import KubeClient
from fabriccap.kube.logs import ReadOutcome, ReadResult, read_container_log, take_token

logger = logging.getLogger(__name__)

# A heap of due reads keeps stale entries (a run that restarted, a pod gone) until they come
# up; it is rebuilt when they outnumber the live ones this much.
COMPACT_FACTOR = 4

RunKey = tuple[str, str, int, str]  # (pod uid, container, restart count, started at)


def seconds_since_epoch(timestamp: str) -> float | None:
    """An RFC 3339 time (``2026-01-01T00:00:00Z``) as Unix seconds; None when it is not one."""
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def read_steps(age: float, steps: tuple[float, ...]) -> list[float]:
    """The read steps still to come for a container ``age`` seconds old, as seconds after its
    start: the steps already past are one read, now."""
    past = [step for step in steps if step <= age]
    return ([age] if past else []) + [step for step in steps if step > age]


@dataclass(slots=True)
class _Run:
    """One run of one container: the steps left, and what its last read found."""

    key: RunKey
    started: float  # Unix seconds
    steps: list[float]  # seconds after the start, ascending; the first is the next read
    read: ContainerRead | None = None


@dataclass(slots=True)
class _Pod:
    uid: str
    namespace: str
    name: str
    runs: dict[str, _Run] = field(default_factory=dict)  # by container name


@dataclass
class LogReader:
    config: Config
    store: FactStore
    client: KubeClient
    metrics: OperatorMetrics
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    _pods: dict[NamespacedKey, _Pod] = field(default_factory=dict)
    # (due, sequence, pod, container, run): when each run's next read is due (monotonic).
    _due: list[tuple[float, int, NamespacedKey, str, RunKey]] = field(default_factory=list)
    _sequence: itertools.count[int] = field(default_factory=itertools.count)
    _ready: deque[tuple[NamespacedKey, str, RunKey]] = field(default_factory=deque)
    _workers: set[asyncio.Task[None]] = field(default_factory=set)
    _in_flight: dict[tuple[NamespacedKey, str], asyncio.Task[None]] = field(default_factory=dict)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _bucket: TokenBucket | None = None
    _said: set[str] = field(default_factory=set)  # results already logged at WARNING
    # The reads' freed buffers go back to the system when a burst of reads ends (memory.py).
    trimmer: MemoryTrimmer = field(default_factory=MemoryTrimmer)
    # Bytes handed to the parsers so far: what a test compares with the loop's progress.
    bytes_scanned: int = 0

    def __post_init__(self) -> None:
        settings = self.config.transport
        self.fabrics = tuple(profile.name for profile in self.config.enabled_fabrics if profile.name in SIGNATURES)
        self._bucket = TokenBucket(settings.reads_per_second, max(1.0, settings.reads_per_second))
        for result in ReadResult.ALL:
            self.metrics.transport_log_reads.labels(result=result)
        self.store.on_workload_pod = self.pod_changed
        for key, facts in list(self.store.workload_pods.items()):
            self.pod_changed(key, facts)

    # -- what to read, from the pods' facts

    def pod_changed(self, key: NamespacedKey, facts: WorkloadPodFacts | None) -> None:
        """The store's hook: a workload pod's facts changed, or it went (None)."""
        known = self._pods.get(key)
        if facts is None or not self._wanted(facts):
            if known is not None:
                self._forget(key)
            return
        if known is not None and known.uid != facts.uid:
            self._forget(key)
            known = None
        if known is None:
            if not facts.containers:
                return  # nothing runs yet: nothing to read, and no verdict of it published
            known = self._pods[key] = _Pod(facts.uid, facts.namespace, facts.name)
        running = {run.name: run for run in facts.containers}
        changed = False
        for name in [name for name in known.runs if name not in running]:
            # Stopped: its last read stays until the container runs again (a new run).
            run = known.runs[name]
            run.steps.clear()
            self._cancel(key, name)
        for container in running.values():
            run_key = (facts.uid, container.name, container.restarts, container.started_at)
            current = known.runs.get(container.name)
            if current is not None and current.key == run_key:
                continue
            if current is not None:  # restarted: a new log, read from its start
                self._cancel(key, container.name)
                changed = changed or current.read is not None
            known.runs[container.name] = self._new_run(run_key, container)
            self._schedule(key, container.name)
        if changed:
            self._publish(key)

    @staticmethod
    def _wanted(facts: WorkloadPodFacts) -> bool:
        """A pod whose logs are read (``core.workloads.log_is_read``). One whose accelerator
        containers (facts.containers) all stopped stays known, its runs stopped: the kubelet
        restarts a crashed container through a waiting state (CrashLoopBackOff), and the new run
        must replace the old run's verdict when it starts, as any restart does, not keep it
        until its first read."""
        return log_is_read(facts)

    def _new_run(self, key: RunKey, container: ContainerRun) -> _Run:
        now = self.wall()
        started = seconds_since_epoch(container.started_at)
        if started is None or started > now:
            started = now  # an unreadable or future start: count from now
        return _Run(key, started, read_steps(now - started, self.config.transport.read_after_seconds))

    def _schedule(self, key: NamespacedKey, container: str) -> None:
        pod = self._pods.get(key)
        run = pod.runs.get(container) if pod is not None else None
        if run is None or not run.steps:
            return
        due = self.clock() + max(0.0, run.started + run.steps[0] - self.wall())
        heapq.heappush(self._due, (due, next(self._sequence), key, container, run.key))
        if len(self._due) > COMPACT_FACTOR * max(len(self._pods), 256):
            self._due = [entry for entry in self._due if self._live(entry[2], entry[3], entry[4])]
            heapq.heapify(self._due)
        self._wake.set()

    def _live(self, key: NamespacedKey, container: str, run_key: RunKey) -> bool:
        pod = self._pods.get(key)
        run = pod.runs.get(container) if pod is not None else None
        return run is not None and run.key == run_key and bool(run.steps)

    def _forget(self, key: NamespacedKey) -> None:
        pod = self._pods.pop(key, None)
        for name in pod.runs if pod is not None else ():
            self._cancel(key, name)

    def _cancel(self, key: NamespacedKey, container: str) -> None:
        task = self._in_flight.pop((key, container), None)
        if task is not None:
            task.cancel()

    # -- the loop

    async def run(self) -> None:
        """Start the reads as they fall due; never returns. The first wait for the first
        listing: a start reads nothing while the LISTs that feed the evaluation run."""
        await self.store.listed.wait()
        while True:
            now = self.clock()
            while self._due and self._due[0][0] <= now:
                _, _, key, container, run_key = heapq.heappop(self._due)
                if self._live(key, container, run_key) and (key, container) not in self._in_flight:
                    self._ready.append((key, container, run_key))
            self._start_workers()
            timeout = self._due[0][0] - now if self._due else None
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    def _start_workers(self) -> None:
        while self._ready and len(self._workers) < self.config.transport.max_concurrent_reads:
            worker = asyncio.create_task(self._work(), name="log reads")
            self._workers.add(worker)
            worker.add_done_callback(self._workers.discard)

    async def _work(self) -> None:
        assert self._bucket is not None
        while self._ready:
            key, container, run_key = self._ready.popleft()
            if not self._live(key, container, run_key) or (key, container) in self._in_flight:
                continue
            await take_token(self._bucket, self.clock)
            if not self._live(key, container, run_key):
                continue
            read = asyncio.create_task(self._read(key, container, run_key), name="log read")
            self._in_flight[(key, container)] = read
            await asyncio.wait([read])
            if self._in_flight.get((key, container)) is read:
                del self._in_flight[(key, container)]
            if read.cancelled():
                self.metrics.transport_log_reads.labels(result=ReadResult.DROPPED).inc()
            self.trimmer.done()
            if not self._ready and not self._in_flight:
                self.trimmer.idle()

    async def close(self) -> None:
        self._ready.clear()
        for task in [*self._in_flight.values(), *self._workers]:
            task.cancel()
        await asyncio.gather(*self._in_flight.values(), *self._workers, return_exceptions=True)
        self._in_flight.clear()

    # -- one read

    async def _read(self, key: NamespacedKey, container: str, run_key: RunKey) -> None:
        namespace, name = key
        try:
            outcome = await read_container_log(
                self.client,
                namespace,
                name,
                container,
                self.fabrics,
                self.config.transport.max_bytes,
                progress=self._parsed,
            )
        except Exception as error:  # in a task nobody awaits for its result: say it, fail closed
            logger.exception("reading the log of %s/%s container %s failed unexpectedly", namespace, name, container)
            outcome = ReadOutcome(ContainerRead((), read_failure_reason(None, type(error).__name__)), ReadResult.FAILED)
        self._done(key, container, run_key, outcome.read, final=outcome.final)
        self._count(outcome)

    def _parsed(self, size: int) -> None:
        self.bytes_scanned += size
        self.metrics.transport_log_bytes.inc(size)

    def _done(
        self, key: NamespacedKey, container: str, run_key: RunKey, read: ContainerRead, final: bool = False
    ) -> None:
        pod = self._pods.get(key)
        run = pod.runs.get(container) if pod is not None else None
        if run is None or run.key != run_key:
            return  # the pod went, or the container restarted meanwhile: another log now
        run.read = read
        if run.steps:
            run.steps.pop(0)
        if final:
            run.steps.clear()
        self._publish(key)
        self._schedule(key, container)

    def _publish(self, key: NamespacedKey) -> None:
        pod = self._pods[key]
        # Every running container counts, read or not: one not read yet keeps the pod from
        # ``fabric`` (combine). A stopped one's last read stands for it until it runs again.
        facts = self.store.workload_pods.get(key)
        unread = [None] * (facts.unread_containers if facts is not None else 0)
        reads = [run.read for run in pod.runs.values()] + unread
        self.store.put_transport(key, combine(pod.uid, self.fabrics, reads))

    def _count(self, outcome: ReadOutcome) -> None:
        result, error = outcome.result, outcome.error
        self.metrics.transport_log_reads.labels(result=result).inc()
        if error is None:
            return
        # Once at WARNING per kind of failure, then quietly: a cluster without the RBAC answers
        # 403 to every read. The API server's message names the pod or the rule, never the log.
        level = logging.DEBUG if result in self._said else logging.WARNING
        self._said.add(result)
        hint = " (grant get on pods/log: the chart's transport.enabled)" if result == ReadResult.FORBIDDEN else ""
        logger.log(level, "reading a pod's log failed: %s%s; its transport stays unknown", error, hint)

    @property
    def pending(self) -> int:
        """Reads due or in flight (tests and benchmarks wait for none)."""
        return len(self._ready) + len(self._in_flight)
