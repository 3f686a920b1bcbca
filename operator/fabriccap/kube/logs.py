"""One read of one container's log, streamed through the NCCL parser: what the operator's log
reader (``controller.logreader``) schedules and a live ``fabriccap explain`` does once.

The body of ``GET pods/{name}/log?container=…&limitBytes=…`` is taken ``READ_CHUNK_BYTES`` at
a time, whatever the server sends and never more than ``max_bytes`` in all; each chunk goes
through one parser per fabric, and the event loop runs between two chunks, so the work one
step does is bounded (about 1.5 ms at worst: benchmarks/transport_parser_bench.py). The read
stops once every parser says that the job's verdict is settled
(``TransportScanner.decisive``). What it returns is a verdict and an evidence line per fabric,
or why the log could not be read: never the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from fabriccap.core.ratelimit import TokenBucket
from fabriccap.core.transport import MAX_LINE_BYTES, RANK_BYTES, SIGNATURES, TransportScanner
from fabriccap.core.verdicts import ContainerRead, FabricVerdict, read_failure_reason
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import pod_log

# The most log one step hands to the parsers before the loop runs again: 16 KiB of the worst
# input (every line one the rules read) is about 1.5 ms of CPU on this project's machines.
READ_CHUNK_BYTES = 16 * 1024
# One read may take this long in all (a kubelet that stalls), and stay silent this long.
READ_TIMEOUT_SECONDS = 60.0
READ_SILENCE_SECONDS = 20.0


class ReadResult:
    """How a read ended: ``fabriccap_transport_log_reads_total{result}``."""

    DECISIVE = "decisive"  # the lines settled the transport for every fabric: read no more
    UNDECIDED = "undecided"  # read, nothing decisive yet: read again at the next step
    FORBIDDEN = "forbidden"  # 403: no RBAC get on pods/log
    NOT_FOUND = "not_found"  # 404: the pod or container is gone
    SERVER_ERROR = "server_error"  # 5xx: the API server or the kubelet failed
    FAILED = "failed"  # no answer, a broken stream, another HTTP status
    DROPPED = "dropped"  # the pod went while its log was read: nothing kept

    ALL = (DECISIVE, UNDECIDED, FORBIDDEN, NOT_FOUND, SERVER_ERROR, FAILED, DROPPED)


@dataclass(frozen=True, slots=True)
class ReadOutcome:
    read: ContainerRead
    result: str  # a ReadResult
    error: KubeError | None = None
    bytes: int = 0  # of log handed to the parsers
    permanent: bool = False  # no read of this container can ever succeed (its name is no path)

    @property
    def final(self) -> bool:
        """Nothing more to read in this run of the container."""
        return self.result == ReadResult.DECISIVE or self.permanent


def result_of(error: KubeError) -> str:
    if error.status == 403:
        return ReadResult.FORBIDDEN
    if error.status == 404:
        return ReadResult.NOT_FOUND
    if error.status is not None and error.status >= 500:
        return ReadResult.SERVER_ERROR
    return ReadResult.FAILED


def max_ranks_for(max_bytes: int, fabrics: int) -> int:
    """How many ranks each parser may track so that one read (the chunk in hand, one kept line
    and the ranks of each parser) never holds more than ``max_bytes``."""
    parsers = max(1, fabrics)
    room = max_bytes - READ_CHUNK_BYTES - MAX_LINE_BYTES * parsers
    return max(1, room // (RANK_BYTES * parsers))


def api_message(error: KubeError) -> str:
    """The API server's message, without the ``GET path: status`` the client put before it."""
    text = str(error)
    head, separator, rest = text.partition(": ")
    if separator and head.startswith("GET "):
        code, _, message = rest.partition(" ")
        return message if code.isdigit() else rest
    return text


async def read_container_log(
    client: KubeClient,
    namespace: str,
    pod: str,
    container: str,
    fabrics: Sequence[str],
    max_bytes: int,
    progress: Callable[[int], None] = lambda _size: None,
) -> ReadOutcome:
    """Read the beginning of one container's log for ``fabrics`` (names of SIGNATURES).
    ``progress`` is told the size of each chunk as it is parsed. A failed read is an outcome,
    not an exception; cancelling it drops the connection."""
    scanners = [TransportScanner(SIGNATURES[fabric], max_ranks_for(max_bytes, len(fabrics))) for fabric in fabrics]
    parsed = 0
    stopped_early = False
    try:
        path = pod_log(namespace, pod)
    except ValueError as error:  # a name that cannot be a path: no read can succeed
        reason = read_failure_reason(None, str(error))
        return ReadOutcome(ContainerRead((), reason), ReadResult.FAILED, KubeError(str(error)), permanent=True)
    try:
        async with client.stream(
            path,
            {"container": container, "limitBytes": max_bytes},
            max_bytes=max_bytes,
            chunk_bytes=READ_CHUNK_BYTES,
            timeout=READ_TIMEOUT_SECONDS,
            read_timeout=READ_SILENCE_SECONDS,
        ) as chunks:
            async for chunk in chunks:
                decisive = [scanner.feed(chunk) for scanner in scanners]
                parsed += len(chunk)
                progress(len(chunk))
                if all(decisive):
                    stopped_early = True
                    break
                await asyncio.sleep(0)  # the loop runs between two chunks
    except KubeError as error:
        reason = read_failure_reason(error.status, api_message(error))
        return ReadOutcome(ContainerRead((), reason), result_of(error), error, parsed)
    # Only a body that ended by itself, short of max_bytes (and of limitBytes), ends its last
    # line; at the limit or after an early stop the line in hand is cut.
    end_of_stream = not stopped_early and parsed < max_bytes
    reports = [scanner.finish(end_of_stream) for scanner in scanners]
    read = ContainerRead(tuple(FabricVerdict.from_report(report) for report in reports))
    result = ReadResult.DECISIVE if read.decided(fabrics) else ReadResult.UNDECIDED
    return ReadOutcome(read, result, None, parsed)


async def take_token(
    bucket: TokenBucket, clock: Callable[[], float], sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
) -> None:
    """Wait until ``bucket`` gives a token, and take it."""
    while not bucket.allows(clock()):
        await sleep(bucket.next_token(clock()))
