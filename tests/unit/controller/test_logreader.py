"""The log reader (controller.logreader) against a fake API server that streams pods' logs:
what it reads and when, what it keeps, and what hostile logs and failing reads cost.

Real parts where it matters: the real client streams over HTTP from an aiohttp server in the
same process, the real store and evaluation take the verdicts. Nothing here is timed: memory
is measured with tracemalloc, the loop's share by counting the bytes parsed between two turns
of a heartbeat task, concurrency by the server's own count of open streams, the rate by the
token bucket on a fake clock.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import logging
import random
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from fabriccap.controller.logreader import LogReader, read_steps
from fabriccap.controller.memory import MemoryTrimmer
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.store import FactStore
from fabriccap.core.config import Config, build_config
from fabriccap.core.evaluate import evaluate
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.index import WORKLOAD_POD_FACTS
from fabriccap.core.transport import Verdict, signature_for
from fabriccap.kube import logs
from fabriccap.kube.client import KubeClient
from fabriccap.kube.logs import READ_CHUNK_BYTES, ReadResult
from fabriccap.kube.paths import pod_log
from fabriccap.offline.snapshot import add_bodies
from fabriccap.offline.transport import read_logs
from fabriccap_devtools.world import workload_pod
from support.builders import healthy_pool
from support.fakeapi import FakeApi, LogScript, eventually, fake_api
from support.nccl import corpus_log, four_nodes_last_ranks_on_sockets, nccl_lines

MiB = 1024 * 1024
SOCKET_LOG = corpus_log("nccl-tests-166-channels-socket.log")
FABRIC_LOG = corpus_log("nccl-527-p4d-efa-1.4.log")
MARKER = "fabriccap-test-marker-7d1f: this line of the log must never leave the pod"
H = "ip-10-0-0-1:41:52 [0] NCCL INFO "


def settings(**transport: Any) -> Config:
    return build_config({"transport": {"enabled": True, "readAfterSeconds": [0], **transport}})


def now_rfc3339(offset: float = 0.0) -> str:
    return datetime.fromtimestamp(datetime.now(UTC).timestamp() + offset, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Rig:
    api: FakeApi
    client: KubeClient
    store: FactStore
    config: Config
    metrics: OperatorMetrics
    reader: LogReader

    def add_pod(self, name: str, log: LogScript | None = None, **kwargs: Any) -> dict[str, Any]:
        body = workload_pod(
            "n1", name, efa=kwargs.pop("efa", 32), started_at=kwargs.pop("started_at", now_rfc3339()), **kwargs
        )
        if log is not None:
            self.api.logs[pod_log("ml", name)] = log
        add_bodies(self.store, FactsExtractor(self.config), [body], "test")
        return body

    def reads(self, result: str) -> float:
        return float(self.metrics.transport_log_reads.labels(result=result)._value.get())

    def verdict(self, name: str) -> tuple[Verdict, str, str] | None:
        known = self.store.transport.get(("ml", name))
        if known is None:
            return None
        chosen = known.of("efa")
        assert chosen is not None
        return chosen.verdict, chosen.evidence, known.reason

    def log_requests(self, name: str) -> list[dict[str, str]]:
        return [query for path, query in self.api.log_reads if path == pod_log("ml", name)]


@asynccontextmanager
async def rig(config: Config | None = None) -> AsyncIterator[Rig]:
    config = config or settings()
    async with fake_api() as (api, client):
        store = FactStore()
        add_bodies(store, FactsExtractor(config), healthy_pool(nodes=1), "test")
        store.listed.set()
        metrics = OperatorMetrics()
        reader = LogReader(config, store, client, metrics)
        task = asyncio.create_task(reader.run())
        try:
            yield Rig(api, client, store, config, metrics, reader)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await reader.close()


def chunks_of(data: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


# --- What is read, and what is kept --------------------------------------------------------


async def test_a_socket_log_gives_a_socket_verdict_with_its_line() -> None:
    async with rig() as r:
        r.add_pod("socket-0", LogScript(chunks=lambda: [SOCKET_LOG]))
        await eventually(lambda: r.verdict("socket-0") is not None, "a verdict")
        verdict, evidence, reason = r.verdict("socket-0") or (None, "", "")
        assert verdict is Verdict.SOCKET and "via NET/Socket" in evidence and reason == ""
        (query,) = r.log_requests("socket-0")
        assert query == {"container": "node", "limitBytes": str(4 * MiB)}
        assert r.reads(ReadResult.DECISIVE) == 1
        # Decided: no step reads it again (the worker lets go of the read just after its verdict).
        await eventually(lambda: r.reader.pending == 0, "the read finished")
        assert r.reader._pods[("ml", "socket-0")].runs["node"].steps == []
        assert len(r.log_requests("socket-0")) == 1


async def test_the_verdict_reaches_the_pools_status() -> None:
    async with rig() as r:
        r.add_pod("socket-0", LogScript(chunks=lambda: [SOCKET_LOG]))
        r.add_pod("fabric-0", LogScript(chunks=lambda: [FABRIC_LOG]))
        await eventually(lambda: len(r.store.transport) == 2, "two verdicts")
        status = evaluate(r.config, r.store).capabilities[0].status
        assert status.workloads is not None and status.workloads.transport is not None
        assert (status.workloads.transport.socket.pods, status.workloads.transport.fabric.pods) == (1, 1)
        assert [o.problem for o in status.workloads.offenders] == ["FabricNotUsed"]


async def test_the_read_stops_at_the_first_decisive_line() -> None:
    """A decisive excerpt, then an endless log: the reader parses the excerpt and at most one
    chunk more, and drops the connection."""

    def endless() -> Iterator[bytes]:
        yield SOCKET_LOG
        while True:
            yield b"step 1 loss 0.5\n" * 4096

    async with rig() as r:
        r.add_pod("socket-0", LogScript(chunks=endless, honour_limit=False))
        await eventually(lambda: r.verdict("socket-0") is not None, "a verdict")
        assert r.reader.bytes_scanned <= len(SOCKET_LOG) + READ_CHUNK_BYTES
        await eventually(lambda: r.api.log_streams == 0, "the stream to be dropped")


# One p4d node of aws/aws-ofi-nccl#715 (SageMaker, aws-ofi-nccl 1.11.0-aws): the plugin came up
# in pid 17773 and failed in pids 17774 and 17780, which fell back to sockets (lines as posted in
# turns 2 and 5; "comm … localRanks 8" is NCCL >= 2.20's format, src/init.cc). The socket lines
# come after more than a read chunk of the healthy process's channel set-up.
FABRIC_PROCESS = "algo-1:17773:17846 [0] NCCL INFO "
FABRIC_THEN_SOCKET_PROCESSES = nccl_lines(
    FABRIC_PROCESS + "NET/OFI Selected Provider is efa (found 4 nics)",
    FABRIC_PROCESS + "Using network AWS Libfabric",
    FABRIC_PROCESS + "comm 0x5580e120bac0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
    *(
        FABRIC_PROCESS
        + f"Channel {channel:02d}/0 : {peer}[{peer - 8}] -> 0[0] [receive] via NET/AWS Libfabric/{channel % 4}/GDRDMA"
        for channel in range(32)
        for peer in range(8, 16)
    ),
    "algo-1:17774:17853 [1] nccl_net_ofi_create_plugin:259 NCCL WARN NET/OFI aws-ofi-nccl initialization failed",
    "algo-1:17774:17853 [1] NCCL INFO Using network Socket",
    "algo-1:17774:17853 [1] NCCL INFO comm 0x55d0c1a2b3c0 rank 1 nRanks 16 nNodes 2 localRanks 8 localRank 1 MNNVL 0",
)


async def test_a_later_socket_process_of_the_pod_makes_it_socket_as_the_offline_command_says() -> None:
    """Rank 0 decides fabric first, but its node announced 8 ranks: the read goes on and finds
    the process that fell back to sockets, as ``fabriccap transport`` on the same bytes does."""
    assert len(FABRIC_THEN_SOCKET_PROCESSES) > READ_CHUNK_BYTES
    offline = read_logs(["-"], signature_for("efa"), io.BytesIO(FABRIC_THEN_SOCKET_PROCESSES))
    async with rig() as r:
        r.add_pod("mixed-0", LogScript(chunks=lambda: [FABRIC_THEN_SOCKET_PROCESSES]))
        await eventually(lambda: r.verdict("mixed-0") is not None, "a verdict")
        verdict, evidence, _ = r.verdict("mixed-0") or (None, "", "")
        assert verdict is Verdict.SOCKET is offline.verdict
        assert evidence == offline.evidence
        assert r.reads(ReadResult.DECISIVE) == 1


# One process of a p5 node whose first communicator runs on EFA and whose next one, after more
# than a read chunk of the first's channel set-up, fell back to sockets: NCCL >= 2.27
# initialises the plugin per communicator, and one that fails to initialise is disabled for the
# next (NVIDIA/nccl src/plugin/net.cc: "Failed to initialize NET plugin %s", "Assigned NET plugin
# %s to comm"; "Using network %s" and "comm %p … nNodes %d localRanks %d …" from src/init.cc).
P5_PROCESS = "p5-worker-1:212:298 [3] NCCL INFO "
ONE_PROCESS_FABRIC_THEN_SOCKET_COMMUNICATOR = nccl_lines(
    P5_PROCESS + "NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)",
    P5_PROCESS + "Assigned NET plugin Libfabric to comm",
    P5_PROCESS + "Using network Libfabric",
    P5_PROCESS + "comm 0x55d0c1a2b3c0 rank 11 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0",
    *(
        P5_PROCESS
        + f"Channel {channel:02d}/0 : {peer}[{peer - 8}] -> 11[3] [receive] via NET/Libfabric/{channel % 4}/GDRDMA"
        for channel in range(32)
        for peer in range(8, 16)
    ),
    P5_PROCESS + "Failed to initialize NET plugin Libfabric",
    P5_PROCESS + "Assigned NET plugin Socket to comm",
    P5_PROCESS + "Using network Socket",
    P5_PROCESS + "comm 0x55d0c1f00000 rank 11 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0",
)


async def test_a_later_socket_communicator_of_a_fabric_process_makes_the_pod_socket_as_the_offline_command_says() -> (
    None
):
    """The process proved the fabric first; its later communicator over sockets makes it
    ``socket`` all the same, in the operator's streamed read as in ``fabriccap transport`` (its
    node announced 8 ranks and the log holds one, so its fabric does not settle the job)."""
    assert ONE_PROCESS_FABRIC_THEN_SOCKET_COMMUNICATOR.index(b"Assigned NET plugin Socket") > READ_CHUNK_BYTES
    offline = read_logs(["-"], signature_for("efa"), io.BytesIO(ONE_PROCESS_FABRIC_THEN_SOCKET_COMMUNICATOR))
    async with rig() as r:
        r.add_pod("mixed-0", LogScript(chunks=lambda: [ONE_PROCESS_FABRIC_THEN_SOCKET_COMMUNICATOR]))
        await eventually(lambda: r.verdict("mixed-0") is not None, "a verdict")
        verdict, evidence, _ = r.verdict("mixed-0") or (None, "", "")
        assert verdict is Verdict.SOCKET is offline.verdict
        assert evidence == offline.evidence


async def test_ranks_past_the_read_s_bound_keep_the_pod_from_fabric() -> None:
    """At maxBytes 256Ki the one parser tracks 29 ranks (``max_ranks_for``): a launcher-as-worker
    log of 32 ranks whose last three fell back to sockets is published ``unknown``, saying how
    much was not read, never ``fabric``; ``fabriccap transport`` tracks them all and says socket."""
    log = four_nodes_last_ranks_on_sockets()
    assert logs.max_ranks_for(256 * 1024, 1) == 29
    assert read_logs(["-"], signature_for("efa"), io.BytesIO(log)).verdict is Verdict.SOCKET
    async with rig(settings(maxBytes="256Ki")) as r:
        r.add_pod("launcher-0", LogScript(chunks=lambda: [log]))
        await eventually(lambda: r.verdict("launcher-0") is not None, "a verdict")
        verdict, evidence, _ = r.verdict("launcher-0") or (None, "", "")
        assert verdict is Verdict.UNKNOWN
        assert "NCCL lines of ranks past the first 29 were not read" in evidence
        assert r.reads(ReadResult.UNDECIDED) == 1


async def test_a_fabric_log_whose_only_announced_rank_proved_is_read_once() -> None:
    """The node's only rank (localRanks 1) proved the fabric: the job is settled, and the next
    step does not read the log again (SPEC: reads go on while no verdict is found, then stop).
    A later communicator of it over sockets is left unread: docs/transport.md says so."""
    only_rank_on_the_fabric = nccl_lines(
        P5_PROCESS + "NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)",
        P5_PROCESS + "Using network Libfabric",
        P5_PROCESS + "comm 0x55d0c1a2b3c0 rank 1 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
    )
    async with rig(settings(readAfterSeconds=[0, 0.1])) as r:
        r.add_pod("fabric-0", LogScript(chunks=lambda: [only_rank_on_the_fabric]), started_at=now_rfc3339(2))
        await eventually(lambda: r.reads(ReadResult.DECISIVE) == 1, "a decisive read")
        await asyncio.sleep(0.3)  # the second step's read would be due by now, if there were one
        assert (r.verdict("fabric-0") or (None,))[0] is Verdict.FABRIC
        assert r.reads(ReadResult.UNDECIDED) == 0 and len(r.log_requests("fabric-0")) == 1


async def test_the_line_limitbytes_cuts_is_not_read_as_a_whole_line() -> None:
    """The kubelet stops the body at limitBytes, here inside rank 3's "Using network AWS
    Libfabric" (aws/aws-ofi-nccl#715's lines, after a chatty start). Read as whole, "AWS Lib"
    would be another network, for good: every step reads the same first maxBytes."""
    rank_2, rank_3 = "algo-1:18564:18638 [2] NCCL INFO ", "algo-1:18565:18637 [3] NCCL INFO "
    nccl = nccl_lines(
        rank_2 + "NET/OFI Selected Provider is efa (found 4 nics)",
        rank_3 + "NET/OFI Selected Provider is efa (found 4 nics)",
        rank_2 + "Using network AWS Libfabric",
        rank_3 + "Using network AWS Libfabric",
    )
    cut_at = nccl.rindex(b"Using network AWS Lib") + len(b"Using network AWS Lib")
    download = b"Downloading shards: model-00003-of-00030.safetensors  41%| 2.01G/4.90G [00:12<00:17, 168MB/s]\n"
    max_bytes = 4 * MiB
    head = download * ((max_bytes - cut_at) // len(download))
    head += b"x" * (max_bytes - cut_at - len(head) - 1) + b"\n"
    log = head + nccl
    assert log[:max_bytes].endswith(b"Using network AWS Lib")
    async with fake_api() as (api, client):
        api.logs[pod_log("ml", "train-0")] = LogScript(chunks=lambda: [log])
        outcome = await logs.read_container_log(client, "ml", "train-0", "node", ("efa",), max_bytes)
    (verdict,) = outcome.read.verdicts
    assert outcome.bytes == max_bytes and outcome.result == ReadResult.UNDECIDED
    assert verdict.verdict is Verdict.FABRIC  # rank 2's choice; rank 3's is past the limit
    assert verdict.evidence.endswith("Using network AWS Libfabric")


async def test_an_undecided_log_is_read_again_at_each_step_then_never() -> None:
    async with rig(settings(readAfterSeconds=[0, 0.1, 0.2])) as r:
        # Starting "in a second" (RFC 3339 has whole seconds): the reader counts from now.
        r.add_pod("quiet-0", LogScript(chunks=lambda: [b"loading the model\n"]), started_at=now_rfc3339(2))
        await eventually(lambda: r.reads(ReadResult.UNDECIDED) == 3, "three reads")
        await asyncio.sleep(0.3)  # a fourth read would be due by now, if there were one
        assert len(r.log_requests("quiet-0")) == 3
        assert r.verdict("quiet-0") == (Verdict.UNKNOWN, "", "")


async def test_steps_already_past_are_one_read() -> None:
    assert read_steps(0.0, (60, 300, 900)) == [60, 300, 900]
    assert read_steps(400.0, (60, 300, 900)) == [400.0, 900]
    assert read_steps(4000.0, (60, 300, 900)) == [4000.0]
    async with rig(settings(readAfterSeconds=[60, 300, 3600])) as r:
        r.add_pod("old-0", LogScript(chunks=lambda: [b"nothing yet\n"]), started_at=now_rfc3339(-600))
        await eventually(lambda: r.reads(ReadResult.UNDECIDED) == 1, "one read now")
        assert len(r.log_requests("old-0")) == 1
        (run,) = r.reader._pods[("ml", "old-0")].runs.values()
        assert run.steps == [3600]  # the next one, in the future


async def test_a_restarted_container_is_read_again_and_its_new_log_decides() -> None:
    async with rig() as r:
        body = r.add_pod("restarting-0", LogScript(chunks=lambda: [SOCKET_LOG]))
        await eventually(lambda: r.verdict("restarting-0") is not None, "the first run's verdict")
        assert (r.verdict("restarting-0") or (None,))[0] is Verdict.SOCKET
        r.api.logs[pod_log("ml", "restarting-0")] = LogScript(chunks=lambda: [FABRIC_LOG])
        body["status"]["containerStatuses"][0].update(restartCount=1, state={"running": {"startedAt": now_rfc3339()}})
        add_bodies(r.store, FactsExtractor(r.config), [body], "test")
        await eventually(lambda: (r.verdict("restarting-0") or (None,))[0] is Verdict.FABRIC, "the new run's verdict")
        assert len(r.log_requests("restarting-0")) == 2


async def test_a_restart_through_crashloopbackoff_drops_the_old_runs_verdict_when_the_new_run_starts() -> None:
    """The kubelet restarts a crashed container through a waiting state (running, waiting:
    CrashLoopBackOff, running with restartCount+1). While it waits, its last run's verdict
    stands; once the new run starts, that verdict goes, and the new run is unknown until read."""
    async with rig(settings(readAfterSeconds=[60])) as r:
        body = r.add_pod("crashloop-0", LogScript(chunks=lambda: [FABRIC_LOG]), started_at=now_rfc3339(-120))
        await eventually(lambda: (r.verdict("crashloop-0") or (None,))[0] is Verdict.FABRIC, "the first run's verdict")
        r.api.logs[pod_log("ml", "crashloop-0")] = LogScript(chunks=lambda: [SOCKET_LOG])
        (status,) = body["status"]["containerStatuses"]
        status.update(
            restartCount=1,
            state={"waiting": {"reason": "CrashLoopBackOff"}},
            lastState={"terminated": {"exitCode": 1, "reason": "Error"}},
        )
        add_bodies(r.store, FactsExtractor(r.config), [body], "test")
        assert (r.verdict("crashloop-0") or (None,))[0] is Verdict.FABRIC  # nothing runs: the last read stands
        status.update(state={"running": {"startedAt": now_rfc3339()}})
        add_bodies(r.store, FactsExtractor(r.config), [body], "test")
        assert (r.verdict("crashloop-0") or (None,))[0] is Verdict.UNKNOWN
        (run,) = r.reader._pods[("ml", "crashloop-0")].runs.values()
        assert run.key[2] == 1 and run.read is None and run.steps == [60]  # read at its first step
        assert len(r.log_requests("crashloop-0")) == 1


async def test_a_pod_with_a_log_that_cannot_be_read_is_unknown_never_fabric() -> None:
    """Two accelerator containers: one log shows EFA, the other cannot be read (403). The
    unread one could have shown sockets, so the pod is unknown with the reason, and counted so."""
    async with rig() as r:
        r.api.logs[f"{pod_log('ml', 'pair-0')}?container=node"] = LogScript(chunks=lambda: [FABRIC_LOG])
        r.api.logs[f"{pod_log('ml', 'pair-0')}?container=rank-1"] = LogScript(status=403, message="forbidden")
        body = workload_pod("n1", "pair-0", efa=32, started_at=now_rfc3339())
        (container,) = body["spec"]["containers"]
        (status,) = body["status"]["containerStatuses"]
        body["spec"]["containers"].append({**container, "name": "rank-1"})
        body["status"]["containerStatuses"].append({**status, "name": "rank-1"})
        add_bodies(r.store, FactsExtractor(r.config), [body], "test")
        await eventually(lambda: len(r.log_requests("pair-0")) == 2 and r.reader.pending == 0, "both reads")
        await eventually(lambda: r.verdict("pair-0") is not None, "an outcome")
        verdict, evidence, reason = r.verdict("pair-0") or (None, "", "")
        assert (verdict, evidence) == (Verdict.UNKNOWN, "") and reason.startswith("403 Forbidden")
        read = r.reader._pods[("ml", "pair-0")].runs["node"].read  # the readable log did show EFA
        assert read is not None and (fabric := read.of("efa")) is not None and fabric.verdict is Verdict.FABRIC
        assert r.reads(ReadResult.FORBIDDEN) == 1 and r.reads(ReadResult.DECISIVE) + r.reads(ReadResult.UNDECIDED) == 1
        transport = evaluate(r.config, r.store).capabilities[0].status.workloads.transport  # type: ignore[union-attr]
        assert transport is not None and (transport.fabric.pods, transport.unknown.pods) == (0, 1)


async def test_a_pod_that_asks_for_nothing_is_not_read() -> None:
    async with rig() as r:
        r.add_pod("cpu-0", LogScript(chunks=lambda: [SOCKET_LOG]), gpu=None, efa=None, env={"FI_PROVIDER": "efa"})
        r.add_pod("gpu-0", LogScript(chunks=lambda: [SOCKET_LOG]), efa=None)
        await eventually(lambda: r.verdict("gpu-0") is not None, "the GPU pod's verdict")
        assert r.log_requests("cpu-0") == []


async def test_a_pod_deleted_mid_read_is_dropped() -> None:
    gate = asyncio.Event()
    async with rig() as r:
        r.add_pod("leaving-0", LogScript(chunks=lambda: [b"x" * 1000, SOCKET_LOG], gate=gate))
        await eventually(lambda: r.api.log_streams == 1, "the read under way")
        r.store.remove(WORKLOAD_POD_FACTS, ("ml", "leaving-0"))
        await eventually(lambda: r.reads(ReadResult.DROPPED) == 1, "the read dropped")
        gate.set()
        await eventually(lambda: r.api.log_streams == 0, "the stream closed")
        assert ("ml", "leaving-0") not in r.store.transport
        assert ("ml", "leaving-0") not in r.reader._pods
        assert r.reads(ReadResult.DECISIVE) == 0


# --- Failing reads -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "message", "result"),
    [
        (403, 'pods "p" is forbidden: User "system:serviceaccount:x:y" cannot get resource "pods/log"', "forbidden"),
        (404, 'pods "p" not found', "not_found"),
        (500, "Get https://10.0.0.1:10250/containerLogs/ml/p/node: dial tcp: connection refused", "server_error"),
    ],
)
async def test_a_refused_read_is_unknown_with_its_reason_and_the_reader_goes_on(
    status: int, message: str, result: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with rig() as r:
        r.add_pod("refused-0", LogScript(status=status, message=message))
        await eventually(lambda: r.verdict("refused-0") is not None, "an outcome")
        verdict, _, reason = r.verdict("refused-0") or (None, "", "")
        assert verdict is Verdict.UNKNOWN
        assert reason.startswith(f"{status} ") and message[:40] in reason
        assert r.reads(result) == 1
        transport = evaluate(r.config, r.store).capabilities[0].status.workloads.transport  # type: ignore[union-attr]
        assert transport is not None and [(e.reason, e.pods) for e in transport.read_errors] == [(reason, 1)]
        # The reader carries on with the next pod.
        r.add_pod("fine-0", LogScript(chunks=lambda: [FABRIC_LOG]))
        await eventually(lambda: r.verdict("fine-0") is not None, "the next pod's verdict")
    assert sum(record.levelno == logging.WARNING for record in caplog.records) == 1


async def test_a_server_that_never_answers_is_a_failed_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "READ_SILENCE_SECONDS", 0.2)
    async with rig() as r:
        r.add_pod("silent-0", LogScript(silent=True))
        await eventually(lambda: r.verdict("silent-0") is not None, "an outcome")
        assert (r.verdict("silent-0") or (None,))[0] is Verdict.UNKNOWN
        assert r.reads(ReadResult.FAILED) == 1


# --- Hostile logs: memory per read, and the loop's share -----------------------------------


def gibibyte() -> Iterator[bytes]:
    block = (b"[rank3] epoch 3 step 17 loss 0.4213 lr 1e-4 " * 1500)[: 64 * 1024]
    for _ in range(16 * 1024):
        yield block


def hundred_megabytes_without_newline() -> Iterator[bytes]:
    yield H.encode() + b"Using network Socket"
    for _ in range(1600):
        yield b"y" * (64 * 1024)


def binary_noise() -> Iterator[bytes]:
    noise = random.Random(11)
    for _ in range(256):
        yield noise.randbytes(64 * 1024)


def ansi_escapes() -> Iterator[bytes]:
    line = b"\x1b[31m\x1b]0;title\x07" + H.encode() + b"\x1b[1mUsing network \x1b[0mSocket\x1b[K\r\n"
    for _ in range(2048):
        yield line * 32


def ten_megabyte_lines() -> Iterator[bytes]:
    for _ in range(10):
        yield H.encode() + b"Using network Socket "
        for _ in range(160):
            yield b"z" * (64 * 1024)
        yield b"\n"


def never_writes() -> Iterator[bytes]:
    return iter(())


HOSTILE = {
    "1 GiB": gibibyte,
    "100 MB without a newline": hundred_megabytes_without_newline,
    "binary noise": binary_noise,
    "ANSI escapes": ansi_escapes,
    "10 MB lines": ten_megabyte_lines,
    "a container that never writes": never_writes,
}


@pytest.mark.parametrize("shape", list(HOSTILE))
async def test_a_hostile_log_costs_at_most_max_bytes_and_never_holds_the_loop(shape: str) -> None:
    """The server ignores limitBytes (a hostile or broken kubelet): the reader stops at
    maxBytes by itself. Everything the process allocates during the read is traced, the fake
    server's chunks and aiohttp's buffers included, and stays under maxBytes; between two turns
    of a heartbeat on the same loop the reader parses at most one chunk."""
    config = settings(maxBytes="4Mi", maxConcurrentReads=1)
    max_bytes = config.transport.max_bytes
    async with rig(config) as r:
        parsed_at_each_turn: list[int] = []
        stop = asyncio.Event()

        async def heartbeat() -> None:
            while not stop.is_set():
                parsed_at_each_turn.append(r.reader.bytes_scanned)
                await asyncio.sleep(0)

        beating = asyncio.create_task(heartbeat())
        tracemalloc.start()
        try:
            r.add_pod("hostile-0", LogScript(chunks=HOSTILE[shape], honour_limit=False))
            await eventually(lambda: r.verdict("hostile-0") is not None, "an outcome", timeout=60)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            stop.set()
            await beating
        verdict, evidence, _ = r.verdict("hostile-0") or (None, "", "")
        assert r.reader.bytes_scanned <= max_bytes
        assert peak < max_bytes, f"{shape}: {peak / MiB:.2f} MiB traced"
        steps = [later - earlier for earlier, later in itertools.pairwise(parsed_at_each_turn)]
        assert max(steps, default=0) <= READ_CHUNK_BYTES, shape
        assert all(character.isprintable() for character in evidence)
        assert len(evidence) <= 200
        if shape == "ANSI escapes":
            assert verdict is Verdict.SOCKET and "\x1b" not in evidence
        print(f"{shape}: {r.reader.bytes_scanned / MiB:.2f} MiB read, {peak / MiB:.2f} MiB traced peak, {verdict}")


# --- Bounds: concurrency and rate ----------------------------------------------------------


async def test_reads_in_flight_never_exceed_the_bound() -> None:
    gate = asyncio.Event()
    async with rig(settings(maxConcurrentReads=3, readsPerSecond=1000)) as r:
        for index in range(12):
            r.add_pod(f"p-{index}", LogScript(chunks=lambda: [b"loading\n", SOCKET_LOG], gate=gate))
        await eventually(lambda: r.api.log_streams == 3, "three reads under way")
        await asyncio.sleep(0.1)  # a fourth would have started by now, if the bound allowed it
        assert r.api.most_log_streams == 3
        gate.set()
        await eventually(lambda: len(r.store.transport) == 12, "every pod read")
        assert r.api.most_log_streams == 3


async def test_the_reads_free_memory_goes_back_when_a_burst_of_reads_ends() -> None:
    trims: list[int] = []
    async with rig(settings(maxConcurrentReads=3, readsPerSecond=1000)) as r:
        r.reader.trimmer = MemoryTrimmer(trim=trims.append, min_work=10)
        for index in range(12):
            r.add_pod(f"p-{index}", LogScript(chunks=lambda: [SOCKET_LOG]))
        await eventually(lambda: len(r.store.transport) == 12 and r.reader.pending == 0, "every pod read")
        await eventually(lambda: trims == [0], "one trim, after the burst")
        r.add_pod("p-late", LogScript(chunks=lambda: [SOCKET_LOG]))
        await eventually(lambda: r.verdict("p-late") is not None and r.reader.pending == 0, "one more read")
        await asyncio.sleep(0.05)
        assert trims == [0]  # one read is not worth another


# --- The log itself stays in the pod -------------------------------------------------------


async def test_no_line_of_the_log_but_the_evidence_leaves_the_reader(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    log = nccl_lines(MARKER) + SOCKET_LOG + nccl_lines(MARKER)
    async with rig() as r:
        r.add_pod("marked-0", LogScript(chunks=lambda: chunks_of(log, 7)))
        r.add_pod("refused-0", LogScript(status=500, message="kubelet is down"))
        await eventually(lambda: len(r.store.transport) == 2, "two outcomes")
        evaluation = evaluate(r.config, r.store)
        shown = [
            caplog.text,
            str([capability.status.to_json() for capability in evaluation.capabilities]),
            str([event.message for event in evaluation.workload_events]),
            r.metrics.exposition().decode(),
            str(r.store.transport),
        ]
    assert "Socket" in shown[1] or "socket" in shown[1]  # the control: the verdict is there
    assert not [text for text in shown if "fabriccap-test-marker-7d1f" in text]
