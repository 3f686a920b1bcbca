"""Benchmark (not a test): what a watch line costs the operator, per event.

    nice -n 10 python benchmarks/watch_event_bench.py

Every watch line used to be JSON-decoded; since issue 27 (round 3 L5, L6, L11) each decoded
line is also checked before anything reads it (``informers.read_event``) and its version is
compared as a number with the view's (plausibility, progress). Since issue 26 two kinds of line
are not decoded (``kube.unread``): a new pod of no fabric (``UnreadRule``) and a Node change
that moved only what a heartbeat moves (``UnchangedRule``). This prints, per event, for the
bodies the 100,000-node benchmark serves (scalesim's world: a Node of ~40 images with the EKS
node monitoring agent's conditions, a Job's pod of no fabric), each written as kube-apiserver
writes a line: the decode every decoded line pays, the node's facts, and what each rule costs
on a line it leaves undecoded and on one it lets through. Ratios are to the decode of the same
line by the operator's decoder (``kube.client.decode_json``: orjson since acf8879; json.loads
before, which took about twice as long), measured in the same run. Best of 5 repeats.

Then the stream's reader (``kube.client.watch_lines``), per line of a body of those pods cut
as aiohttp's HTTP parser hands it over, against the reader it replaced (908e477), with the most
each held at once.

Last, what a streaming list does with each line besides decoding it and keeping its facts
(``ListWatch._stream_list``: the event's check, the count, the trimmer), for a stream of four
undecoded pods to one decoded, against the decode of the served GPU pod line. For an A/B of the
informer, run this file from one checkout with PYTHONPATH at another's ``operator``.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import timeit
import tracemalloc
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabriccap.controller.informers import INITIAL_EVENTS_END, ListWatch, read_event
from fabriccap.controller.memory import MemoryTrimmer
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.core.config import default_config
from fabriccap.core.facts import FactsExtractor
from fabriccap.kube.client import decode_json, watch_lines
from fabriccap.kube.kinds import BY_KIND
from fabriccap.kube.unread import UnchangedRule, UnreadEvent, UnreadRule
from fabriccap.kube.versions import version_number as resource_version_number  # what _advances and _check_plausible use
from fabriccap_devtools.scalesim import Simulator
from fabriccap_devtools.scalesim.world import CPU_POD_TEMPLATE, NODE_TEMPLATE, ScaleWorld

REPEATS = 5
EVENTS = 5_000


def per_event(statement: Callable[[], object], number: int = EVENTS) -> float:
    return min(timeit.repeat(statement, number=number, repeat=REPEATS)) / number


def template(name: str) -> dict[str, Any]:
    """One of the simulator's templates, its variables filled in as a heartbeat at ``T0``."""
    [found] = [t for t in ScaleWorld(nodes=10, pods=10).spec()["templates"] if t["name"] == name]
    text = json.dumps(found["body"]).replace("@@HB@@", "2026-11-30T10:00:00Z").replace("@@EFA@@", "32")
    body: dict[str, Any] = json.loads(text.replace("@@", "x"))
    return body


def go_line(event_type: str, body: dict[str, Any], version: int) -> bytes:
    """As kube-apiserver writes a watch line (no spaces), with its newline, as the client's reader
    hands it over (``kube.client.watch_lines``)."""
    served = {**body, "metadata": {**body["metadata"], "resourceVersion": str(version)}}
    return json.dumps({"type": event_type, "object": served}, separators=(",", ":")).encode() + b"\n"


def served_pod_lines(rule: UnreadRule) -> tuple[bytes, bytes]:
    """A pod line of no fabric and one of a GPU pod, as scalesim serves them in a streaming list:
    with the server's metadata and the managedFields a real API server adds (their
    ``k:{\\"uid\\":...}`` keys put dozens of backslashes in every pod), which the templates
    above do not have."""
    with tempfile.TemporaryDirectory() as directory:
        spec = ScaleWorld(nodes=4, pods=40, pools=1).spec()
        with Simulator(Path(directory) / "sim", world=spec, plain_http=True) as simulator:
            query = "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
            lines: list[bytes] = []
            with urllib.request.urlopen(f"{simulator.info.server}/api/v1/pods?{query}", timeout=30) as stream:
                for line in stream:
                    if b'"BOOKMARK"' in line:
                        break
                    lines.append(line)
    undecoded = next(line for line in lines if rule.unread(line) is not None)
    gpu = next(line for line in lines if b'"nvidia.com/gpu"' in line)
    return undecoded, gpu


def heartbeat(body: dict[str, Any], second: int) -> dict[str, Any]:
    beat: dict[str, Any] = json.loads(json.dumps(body))
    at = f"2026-11-30T10:{second // 60 % 60:02d}:{second % 60:02d}Z"
    for condition in beat["status"]["conditions"]:
        condition["lastHeartbeatTime"] = at
    for entry in beat["metadata"].get("managedFields") or []:
        entry["time"] = at
    return beat


class ParsedReads:
    """A watch body as aiohttp's HTTP parser hands it to the stream's reader: an API server
    writes an HTTP chunk per event, and each TLS read of ``read_bytes`` is cut into the parts of
    the chunks it holds (one bytes each). ``readchunk`` gives them one by one (what
    ``watch_lines`` reads); ``iter_any`` joins those of one read (what the old reader read)."""

    def __init__(self, lines: Sequence[bytes], read_bytes: int) -> None:
        self.reads: list[list[bytes]] = [[]]
        room = read_bytes
        for line in lines:
            at = 0
            while at < len(line):
                if room == 0:
                    self.reads.append([])
                    room = read_bytes
                part = line[at : at + room]
                self.reads[-1].append(part)
                at += len(part)
                room -= len(part)
        self.pieces = iter([piece for read in self.reads for piece in read])

    async def readchunk(self) -> tuple[bytes, bool]:
        piece = next(self.pieces, b"")
        return piece, bool(piece)

    async def iter_any(self) -> AsyncIterator[bytes]:
        for read in self.reads:
            yield read[0] if len(read) == 1 else b"".join(read)


async def lines_before(reads: ParsedReads) -> AsyncIterator[bytes]:
    """The watch's reader before 908e477, the baseline: each read joined, added to what was left
    of the last line, and split into all its lines at once."""
    buffer = b""
    async for chunk in reads.iter_any():
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield line


async def lines_now(reads: ParsedReads) -> AsyncIterator[bytes]:
    async for line in watch_lines(reads, "/api/v1/pods"):
        if not line.isspace():
            yield line


def reader_rows(lines: Sequence[bytes]) -> None:
    """Per line, the reader's time and the most it held at once (tracemalloc's peak, over the
    body it reads), for the old reader and ``watch_lines``, at the operator's 64 KiB TLS reads
    and at asyncio's default 256 KiB."""
    print(f"The stream's reader, {len(lines):,} lines of the two pods above (4 of no fabric to 1 GPU pod):")
    for read_bytes in (64 * 1024, 256 * 1024):
        timed: dict[str, tuple[float, int]] = {}
        for name, reader in (("before 908e477 (the baseline)", lines_before), ("watch_lines", lines_now)):
            best = float("inf")
            for _ in range(REPEATS):
                reads = ParsedReads(lines, read_bytes)
                began = time.perf_counter()
                assert asyncio.run(_count(reader(reads))) == len(lines)
                best = min(best, time.perf_counter() - began)
            tracemalloc.start()
            reads = ParsedReads(lines, read_bytes)
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            asyncio.run(_count(reader(reads)))
            peak = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.stop()
            timed[name] = (best / len(lines), peak)
        baseline = timed["before 908e477 (the baseline)"][0]
        for name, (seconds, peak) in timed.items():
            print(
                f"  {read_bytes // 1024} KiB reads, {name:<30} {seconds * 1e6:6.2f} us/line"
                f"  {seconds / baseline:5.2f}x  held at most {peak / 1024:7.1f} KiB"
            )


async def _count(lines: AsyncIterator[bytes]) -> int:
    """How many lines the reader gave, each dropped as it came."""
    count = 0
    async for _ in lines:
        count += 1
    return count


class _ListedLines:
    """A client whose streaming list gives ``lines`` as ``KubeClient.watch`` yields them."""

    def __init__(self, lines: Sequence[Any]) -> None:
        self.lines = lines

    async def watch(self, *_args: Any, on_open: Callable[[], None], **_kwargs: Any) -> AsyncIterator[Any]:
        on_open()
        for line in self.lines:
            yield line


@dataclass(kw_only=True)
class _FactlessListWatch(ListWatch):
    """A streaming list of pods whose objects keep no facts: only the informer's own work."""

    @property
    def kind(self) -> str:
        return "pod"

    @property
    def object_kind(self) -> str:
        return "Pod"

    def _apply_listed(self, body: Mapping[str, Any]) -> str:
        return "applied"

    def _begin_listing(self) -> None:
        pass

    def _listed(self, version: str) -> None:
        pass


def listing_bookkeeping(decoded_per_five: int = 1, objects: int = 500_000) -> float:
    """Seconds per line of a streaming list's own work (best of REPEATS)."""
    lines: list[Any] = []
    for index in range(objects):
        version = str(1_000 + index)
        if index % 5 < decoded_per_five:
            metadata = {"name": f"train-{index}", "namespace": "ml", "resourceVersion": version}
            lines.append({"type": "ADDED", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": metadata}})
        else:
            lines.append(UnreadEvent(version))
    end = {"kind": "Pod", "metadata": {"resourceVersion": "9999999", "annotations": {INITIAL_EVENTS_END: "true"}}}
    lines.append({"type": "BOOKMARK", "object": end})

    async def once() -> float:
        listing = _FactlessListWatch(
            client=_ListedLines(lines),  # type: ignore[arg-type]  # only its watch is called
            path="/api/v1/pods",
            metrics=OperatorMetrics(),
            trimmer=MemoryTrimmer(trim=None),
        )
        began = time.perf_counter()
        await listing._stream_list()
        return time.perf_counter() - began

    return min(asyncio.run(once()) for _ in range(REPEATS)) / objects


def row(what: str, seconds: float, decode: float) -> str:
    return f"  {what:<58} {seconds * 1e6:7.1f} us  {seconds / decode:5.2f}x the decode"


def main() -> int:
    extractor = FactsExtractor(default_config())
    node = template(NODE_TEMPLATE)
    beats = [go_line("MODIFIED", heartbeat(node, second), 1000 + second) for second in range(64)]
    changed: dict[str, Any] = json.loads(json.dumps(node))
    changed["status"]["allocatable"]["vpc.amazonaws.com/efa"] = "16"
    change_line = go_line("MODIFIED", changed, 999)
    decode = per_event(lambda: decode_json(beats[0]))
    decoded = json.loads(beats[0])
    facts = per_event(lambda: extractor.node(decoded["object"]))
    check = per_event(lambda: read_event(decoded, "Node"), EVENTS * 4)
    compare = per_event(lambda: (resource_version_number("123456"), resource_version_number("123455")), EVENTS * 4)

    heartbeats = BY_KIND["Node"].unread_rule(extractor)
    assert isinstance(heartbeats, UnchangedRule)
    assert heartbeats.unread(beats[0]) is None
    heartbeats.settled("MODIFIED", decoded["object"], applied=True)
    turn = iter(range(10**9))
    assert heartbeats.unread(beats[1]) is not None, "a heartbeat must be left undecoded"
    left = per_event(lambda: heartbeats.unread(beats[1 + next(turn) % 63]))
    through = per_event(lambda: heartbeats.unread(change_line))
    heartbeats.settled("MODIFIED", changed, applied=False)

    print(f"Node MODIFIED line (scalesim's node template): {len(beats[0])} bytes")
    print(row("decode_json (orjson)", decode, decode))
    print(row("FactsExtractor.node", facts, decode))
    print(row("read_event + resourceVersion compare", check + compare, decode))
    print(row("UnchangedRule on a heartbeat (left undecoded)", left, decode))
    print(row("UnchangedRule on a change (decoded after it)", through, decode))
    print(
        f"  a heartbeat: decode + facts + checks {(decode + facts + check + compare) * 1e6:.1f} us -> "
        f"{left * 1e6:.1f} us ({left / (decode + facts + check + compare):.0%})"
    )

    pod = template(CPU_POD_TEMPLATE)
    pod_line = go_line("ADDED", pod, 77)
    pods = BY_KIND["Pod"].unread_rule(FactsExtractor(default_config()))
    assert isinstance(pods, UnreadRule) and pods.unread(pod_line) is not None
    pod_decode = per_event(lambda: decode_json(pod_line))
    print(f"Pod ADDED line of no fabric (scalesim's CPU pod): {len(pod_line)} bytes")
    print(row("decode_json (orjson)", pod_decode, pod_decode))
    print(row("UnreadRule (left undecoded)", per_event(lambda: pods.unread(pod_line)), pod_decode))

    served, gpu_line = served_pod_lines(pods)
    served_decode = per_event(lambda: decode_json(served))
    print(f"Pod ADDED line of no fabric as scalesim serves it (managedFields): {len(served)} bytes")
    print(row("decode_json (orjson)", served_decode, served_decode))
    print(row("UnreadRule (left undecoded)", per_event(lambda: pods.unread(served)), served_decode))
    gpu_decode = per_event(lambda: decode_json(gpu_line))
    assert pods.unread(gpu_line) is None, "a GPU pod must be decoded"
    print(f"Pod ADDED line of a GPU pod as scalesim serves it: {len(gpu_line)} bytes")
    print(row("decode_json (orjson)", gpu_decode, gpu_decode))
    print(row("UnreadRule (decoded after it)", per_event(lambda: pods.unread(gpu_line)), gpu_decode))
    reader_rows([served, served, served, served, gpu_line] * 4_000)
    print("A streaming list's own work per line, four undecoded pods to one decoded, no facts kept:")
    print(row("ListWatch._stream_list (check, count, trimmer)", listing_bookkeeping(), gpu_decode))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
