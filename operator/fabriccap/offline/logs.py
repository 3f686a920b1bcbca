"""The pod logs a live ``fabriccap evaluate`` or ``explain`` reads, as the operator reads them.

With transport on (config.transport), the operator reads the beginning of each running
accelerator container's log of the pods that request the fabric or an accelerator
(``core.workloads.log_is_read``) and publishes what NCCL chose (docs/transport.md). A live
``evaluate`` reads the same pods' logs once (``cluster_log_pods``), and ``explain`` its pool's
or workload's pods', through the operator's one read (``kube.logs.read_container_log``), at the
config's ``maxConcurrentReads`` and ``readsPerSecond``; each pod's verdicts go in the index by
``FactIndex.put_transport``, as the operator's reader puts them, so the evaluation counts them.

A user waits for these, so they are bounded as the owner reads are (``offline.owners``): at
most ``max_pods`` pods (the first by name), each container's read within
``LOG_READ_TIMEOUT_SECONDS`` and all of them within ``MAX_LOG_READ_SECONDS``. A pod the bounds
leave out, or whose read fails (403, 404, 500, no answer), is ``unknown`` with why, as a pod the
operator could not read: never a clean ``0`` of sockets. ``unread_lines`` says them on stderr,
one line per reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fabriccap.core.config import Config
from fabriccap.core.index import FactIndex, NamespacedKey
from fabriccap.core.text import clean_text
from fabriccap.core.transport import SIGNATURES, Verdict
from fabriccap.core.verdicts import REASON_CHARS, ContainerRead, combine
from fabriccap.core.workloads import log_is_read
from fabriccap.offline.owners import MAX_CLUSTER_READ_SECONDS, MAX_REASON, commonest_reasons

if TYPE_CHECKING:
    from fabriccap.core.ratelimit import TokenBucket
    from fabriccap.kube.client import KubeClient
    from fabriccap.kube.logs import ReadOutcome

# A whole cluster's pods: the operator reads them all, in the background, at readsPerSecond
# (10 by default); a user waits, so at most this many pods (a minute at that rate), by name.
MAX_CLUSTER_LOG_PODS = 600
# One container's read: the operator gives it 60 s (kube.logs.READ_TIMEOUT_SECONDS), a user
# less; all of one command's log reads, as long as its owner reads.
LOG_READ_TIMEOUT_SECONDS = 20.0
MAX_LOG_READ_SECONDS = MAX_CLUSTER_READ_SECONDS
# What stderr says for a refused read: its API message names each pod, so the line names what
# to grant instead, as the operator's warning does (controller.logreader).
FORBIDDEN = "403 Forbidden: grant get on pods/log (the chart's transport.enabled)"
GONE = "404 Not Found: the pod or its container is gone"


def cluster_log_pods(facts: FactIndex) -> list[NamespacedKey]:
    """The pods whose logs the operator reads (``log_is_read``, of those with a container
    running), by name: which ones a bound leaves out is the same from one run to the next."""
    return sorted(key for key, pod in facts.workload_pods.items() if pod.containers and log_is_read(pod))


@dataclass
class PodLogReads:
    """Reads pods' logs into ``facts`` once, within ``max_pods`` and ``max_seconds``."""

    client: KubeClient
    config: Config
    facts: FactIndex
    max_pods: int
    # Said of each pod the count leaves out: ``a live evaluate reads at most 600 pods' logs``.
    bound: str
    max_seconds: float = MAX_LOG_READ_SECONDS
    read_timeout: float = LOG_READ_TIMEOUT_SECONDS
    # Why a pod's transport was left unknown (a bound, or a container's read that failed), by pod.
    unread: dict[NamespacedKey, str] = field(default_factory=dict)

    async def read(self, pods: Sequence[NamespacedKey]) -> None:
        """Read the logs of ``pods`` (the first ``max_pods``), and put each pod's verdicts in
        ``facts``; a pod left out gets its ``bound`` as its reason."""
        from fabriccap.core.ratelimit import TokenBucket

        settings = self.config.transport
        fabrics = [profile.name for profile in self.config.enabled_fabrics if profile.name in SIGNATURES]
        bucket = TokenBucket(settings.reads_per_second, max(1.0, settings.reads_per_second))
        slots = asyncio.Semaphore(settings.max_concurrent_reads)
        deadline = asyncio.get_running_loop().time() + self.max_seconds

        async def read_pod(key: NamespacedKey) -> None:
            pod = self.facts.workload_pods.get(key)
            if pod is None:
                return
            outcomes = await asyncio.gather(
                *(self._read_container(key, run.name, fabrics, bucket, slots, deadline) for run in pod.containers)
            )
            reads: list[ContainerRead | None] = [read for read, _ in outcomes]
            reads += [None] * pod.unread_containers  # past the cap: never fabric
            transport = combine(pod.uid, fabrics, reads)
            why = next((why for _, why in outcomes if why), None)
            # Said unread only when that left its verdict unknown: another container's log
            # that shows sockets makes the pod's verdict sockets, counted (review 66f F6).
            if why is not None and all(entry.verdict is Verdict.UNKNOWN for entry in transport.verdicts):
                self.unread[key] = why
            self.facts.put_transport(key, transport)

        await asyncio.gather(*(read_pod(key) for key in pods[: self.max_pods]))
        for key in pods[self.max_pods :]:
            pod = self.facts.workload_pods.get(key)
            if pod is not None:
                self.unread[key] = self.bound
                self.facts.put_transport(key, combine(pod.uid, fabrics, [ContainerRead((), self.bound[:REASON_CHARS])]))

    async def _read_container(
        self,
        key: NamespacedKey,
        container: str,
        fabrics: Sequence[str],
        bucket: TokenBucket,
        slots: asyncio.Semaphore,
        deadline: float,
    ) -> tuple[ContainerRead, str | None]:
        """One container's read, and why it told nothing (for stderr), None when it told."""
        from fabriccap.kube.logs import read_container_log, take_token

        loop = asyncio.get_running_loop()
        late = f"not read within {self.max_seconds:.3g} s"
        async with slots:
            try:
                async with asyncio.timeout(max(0.0, deadline - loop.time())):
                    await take_token(bucket, time.monotonic)
                async with asyncio.timeout(max(0.0, min(self.read_timeout, deadline - loop.time()))):
                    outcome = await read_container_log(
                        self.client, key[0], key[1], container, fabrics, self.config.transport.max_bytes
                    )
            except TimeoutError:
                why = late if loop.time() >= deadline else f"no answer within {self.read_timeout:.3g} s"
                return ContainerRead((), why), why
        return outcome.read, _why(outcome)

    def unread_lines(self) -> list[str]:
        """What was left unread, one line per reason (the commonest first, at most
        ``offline.owners.MAX_UNREAD_LINES``), and what that does to the answer."""
        return [_unread_line(why, len(pods)) for why, pods in commonest_reasons(self.unread)]


def _why(outcome: ReadOutcome) -> str | None:
    """Why a read told nothing, one reason for every pod it befalls; None when it told."""
    if not outcome.read.failed:
        return None
    from fabriccap.kube.logs import ReadResult

    if outcome.result == ReadResult.FORBIDDEN:
        return FORBIDDEN
    if outcome.result == ReadResult.NOT_FOUND:
        return GONE
    return outcome.read.reason


def _unread_line(why: str, pods: int) -> str:
    return (
        f"not read ({clean_text(why, MAX_REASON)}): {pods} pods' logs: their transport is unknown"
        " (status.workloads.transport.readErrors), not counted as sockets or the fabric"
    )


async def read_cluster_logs(client: KubeClient, config: Config, facts: FactIndex) -> list[str]:
    """A live ``evaluate``: the logs the operator would read (``cluster_log_pods``), at most
    ``MAX_CLUSTER_LOG_PODS`` pods; what was left unread, one line per reason."""
    reads = PodLogReads(
        client,
        config,
        facts,
        max_pods=MAX_CLUSTER_LOG_PODS,
        bound=f"a live evaluate reads at most {MAX_CLUSTER_LOG_PODS} pods' logs",
    )
    await reads.read(cluster_log_pods(facts))
    return reads.unread_lines()
