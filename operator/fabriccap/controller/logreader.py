"""What NCCL chose, read from the pods' own logs (config.transport; docs/transport.md).

For each running accelerator container of a workload pod that requests the fabric or an
accelerator, the beginning of its log (``pods/log?container=…&limitBytes=maxBytes``) is read
once per run (pod UID, container, restart count), again at the configured steps after the
container started while no line decides the transport (``readAfterSeconds``: 1, 5, 15 and
60 minutes by default), then never again. A run first seen after some steps have passed gets
one read for all of them.

Each read streams: the body is taken in chunks of ``READ_CHUNK_BYTES``, each chunk goes
through one parser per fabric (``core.transport.TransportScanner``) and the reader hands the
event loop back after each one, so the pools' evaluation never waits more than one chunk's
work (about 1.5 ms at worst, benchmarks/transport_parser_bench.py). The read stops at the
first decisive line, or after ``maxBytes``; what it holds is one chunk and the parsers'
bounded state, never the log. What is kept is a verdict and one evidence line per pod
(``core.verdicts``), put in the index, which re-evaluates the pod's pool.

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

from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.store import FactStore
from fabriccap.core.config import Config
from fabriccap.core.facts import ContainerRun, WorkloadPodFacts
from fabriccap.core.index import NamespacedKey
from fabriccap.core.transport import RANK_BYTES, SIGNATURES, TransportScanner, memory_bound
from fabriccap.core.verdicts import ContainerRead, FabricVerdict, combine, read_failure_reason
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import pod_log

logger = logging.getLogger(__name__)

# The most log one step hands to the parsers before the loop runs again: 16 KiB of the worst
# input (every line one the rules read) is about 1.5 ms of CPU on this project's machines.
READ_CHUNK_BYTES = 16 * 1024
# One read may take this long in all (a kubelet that stalls), and stay silent this long.
READ_TIMEOUT_SECONDS = 60.0
READ_SILENCE_SECONDS = 20.0
# A heap of due reads keeps stale entries (a run that restarted, a pod gone) until they come
# up; it is rebuilt when they outnumber the live ones this much.
COMPACT_FACTOR = 4

RunKey = tuple[str, str, int, str]  # (pod uid, container, restart count, started at)


class ReadResult:
    """``fabriccap_transport_log_reads_total{result}``: how each read ended."""

    DECISIVE = "decisive"  # a line decided the transport for every fabric: read no more
    UNDECIDED = "undecided"  # read, nothing decisive yet: read again at the next step
    FORBIDDEN = "forbidden"  # 403: no RBAC get on pods/log
    NOT_FOUND = "not_found"  # 404: the pod or container is gone
    SERVER_ERROR = "server_error"  # 5xx: the API server or the kubelet failed
    FAILED = "failed"  # no answer, a broken stream, another HTTP status
    DROPPED = "dropped"  # the pod went while its log was read: nothing kept

    ALL = (DECISIVE, UNDECIDED, FORBIDDEN, NOT_FOUND, SERVER_ERROR, FAILED, DROPPED)


def result_of(error: KubeError) -> str:
    if error.status == 403:
        return ReadResult.FORBIDDEN
    if error.status == 404:
        return ReadResult.NOT_FOUND
    if error.status is not None and error.status >= 500:
        return ReadResult.SERVER_ERROR
    return ReadResult.FAILED


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


@dataclass(slots=True)
class TokenBucket:
    """``rate`` starts per second after a burst of ``burst``."""

    rate: float
    burst: float
    clock: Callable[[], float]
    tokens: float = -1.0
    refilled: float = 0.0

    def wait_seconds(self) -> float:
        """Take a token if there is one (0.0); else how long until there is."""
        now = self.clock()
        if self.tokens < 0:
            self.tokens, self.refilled = self.burst, now
        self.tokens = min(self.burst, self.tokens + (now - self.refilled) * self.rate)
        self.refilled = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


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
    # Bytes handed to the parsers so far: what a test compares with the loop's progress.
    bytes_scanned: int = 0

    def __post_init__(self) -> None:
        settings = self.config.transport
        self.fabrics = tuple(profile.name for profile in self.config.enabled_fabrics if profile.name in SIGNATURES)
        self._bucket = TokenBucket(settings.reads_per_second, max(1.0, settings.reads_per_second), self.clock)
        # The parsers' share of maxBytes, after the chunk in hand and one kept line each: a
        # smaller maxBytes tracks fewer ranks, so one read never holds more than maxBytes.
        room = settings.max_bytes - READ_CHUNK_BYTES - memory_bound(0) * max(1, len(self.fabrics))
        self.max_ranks = max(1, room // (RANK_BYTES * max(1, len(self.fabrics))))
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
        """A pod that requests the fabric or an accelerator (a resource some profile cares
        about, or a claim), with running accelerator containers (facts.containers)."""
        return bool(facts.containers) and (bool(facts.requests) or bool(facts.claims))

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
            while (wait := self._bucket.wait_seconds()) > 0:
                await asyncio.sleep(wait)
            if not self._live(key, container, run_key):
                continue
            read = asyncio.create_task(self._read(key, container, run_key), name="log read")
            self._in_flight[(key, container)] = read
            await asyncio.wait([read])
            if self._in_flight.get((key, container)) is read:
                del self._in_flight[(key, container)]
            if read.cancelled():
                self.metrics.transport_log_reads.labels(result=ReadResult.DROPPED).inc()

    async def close(self) -> None:
        self._ready.clear()
        for task in [*self._in_flight.values(), *self._workers]:
            task.cancel()
        await asyncio.gather(*self._in_flight.values(), *self._workers, return_exceptions=True)
        self._in_flight.clear()

    # -- one read

    async def _read(self, key: NamespacedKey, container: str, run_key: RunKey) -> None:
        namespace, name = key
        settings = self.config.transport
        scanners = [TransportScanner(SIGNATURES[fabric], self.max_ranks) for fabric in self.fabrics]
        query = {"container": container, "limitBytes": settings.max_bytes}
        try:
            async with self.client.stream(
                pod_log(namespace, name),
                query,
                max_bytes=settings.max_bytes,
                chunk_bytes=READ_CHUNK_BYTES,
                timeout=READ_TIMEOUT_SECONDS,
                read_timeout=READ_SILENCE_SECONDS,
            ) as chunks:
                async for chunk in chunks:
                    decisive = [scanner.feed(chunk) for scanner in scanners]
                    self.bytes_scanned += len(chunk)
                    self.metrics.transport_log_bytes.inc(len(chunk))
                    if all(decisive):
                        break
                    await asyncio.sleep(0)  # the loop runs between two chunks
        except KubeError as error:
            self._done(key, container, run_key, ContainerRead((), read_failure_reason(error.status, _message(error))))
            self._count(result_of(error), error)
            return
        except ValueError as error:  # a name that cannot be a path: no read can succeed
            self._done(key, container, run_key, ContainerRead((), read_failure_reason(None, str(error))), final=True)
            self._count(ReadResult.FAILED, KubeError(str(error)))
            return
        except Exception as error:  # in a task nobody awaits for its result: say it, fail closed
            logger.exception("reading the log of %s/%s container %s failed unexpectedly", namespace, name, container)
            self._done(key, container, run_key, ContainerRead((), read_failure_reason(None, type(error).__name__)))
            self._count(ReadResult.FAILED)
            return
        reports = [scanner.finish() for scanner in scanners]
        read = ContainerRead(
            tuple(
                FabricVerdict(fabric, report.verdict, report.evidence, scanner.decisive)
                for fabric, report, scanner in zip(self.fabrics, reports, scanners, strict=True)
            )
        )
        decided = read.decided(self.fabrics)
        self._done(key, container, run_key, read, final=decided)
        self._count(ReadResult.DECISIVE if decided else ReadResult.UNDECIDED)

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
        reads = [run.read for run in pod.runs.values() if run.read is not None]
        self.store.put_transport(key, combine(pod.uid, self.fabrics, reads))

    def _count(self, result: str, error: KubeError | None = None) -> None:
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


def _message(error: KubeError) -> str:
    """The API server's message without the ``GET path: status`` the client put before it."""
    text = str(error)
    head, separator, rest = text.partition(": ")
    if separator and head.startswith("GET "):
        code, _, message = rest.partition(" ")
        return message if code.isdigit() else rest
    return text
