"""The NCCL transport parser (fabriccap.core.transport) on the corpus of real logs and on hostile input.

The corpus (tests/fixtures/nccl/corpus.yaml) is NCCL output that people posted publicly, each
with the verdict a careful engineer gives it; every entry is checked for the efa and aks-rdma
profiles. Hostile input is generated lazily: nothing here holds a gigabyte.
"""

from __future__ import annotations

import json
import random
import re
import sys
import threading
import tracemalloc
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest

from fabriccap.core import transport
from fabriccap.core.text import clean_text
from fabriccap.core.transport import (
    EVIDENCE_CHARS,
    MAX_LINE_BYTES,
    MAX_RANKS,
    MEMORY_BOUND_BYTES,
    RankVerdict,
    TransportReport,
    TransportScanner,
    Verdict,
    evidence_line,
    job_verdict,
    readable_text,
    scan,
    signature_for,
)
from support.nccl import CORPUS, CORPUS_DIR, REPO_ROOT, corpus_log, four_nodes_last_ranks_on_sockets
from support.nccl import nccl_lines as lines

EFA = signature_for("efa")
RDMA = signature_for("aks-rdma")
MiB = 1024 * 1024


def read(data: bytes, fabric: str = "efa", chunk: int | None = None) -> TransportReport:
    if chunk is None:
        return scan([data], signature_for(fabric))
    return scan((data[i : i + chunk] for i in range(0, len(data), chunk)), signature_for(fabric))


# --- The corpus ----------------------------------------------------------------------------


def test_the_corpus_lists_every_excerpt_once_with_a_source() -> None:
    listed = [entry["file"] for entry in CORPUS]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(path.name for path in CORPUS_DIR.glob("*.log"))
    assert len(listed) >= 30
    for entry in CORPUS:
        assert entry["source"].startswith("https://github.com/"), entry
        assert entry["verdict"] in {verdict.value for verdict in Verdict}, entry
        assert entry["aks-rdma"] in {verdict.value for verdict in Verdict}, entry
        assert entry["why"].strip(), entry
        text = (CORPUS_DIR / entry["file"]).read_bytes()
        assert 0 < len(text.splitlines()) <= 200, entry["file"]


def test_the_corpus_covers_every_verdict_for_both_profiles() -> None:
    for key in ("verdict", "aks-rdma"):
        shown = {entry[key] for entry in CORPUS}
        assert shown == {verdict.value for verdict in Verdict}, (key, shown)


@pytest.mark.parametrize(
    ("entry", "fabric", "key"),
    [
        pytest.param(entry, fabric, key, id=f"{entry['file']}-{fabric}")
        for entry in CORPUS
        for fabric, key in (("efa", "verdict"), ("aks-rdma", "aks-rdma"))
    ],
)
def test_corpus_verdict(entry: dict[str, Any], fabric: str, key: str) -> None:
    data = (CORPUS_DIR / entry["file"]).read_bytes()
    report = read(data, fabric)
    assert report.verdict.value == entry[key], (entry["why"], report)
    cleaned = [readable_text(line.decode("utf-8", errors="replace")) for line in data.splitlines()]
    # Every evidence line is a real line of the file (the part from NCCL's prefix on), cut and cleaned.
    for evidence in [report.evidence, *(rank.evidence for rank in report.ranks)]:
        if evidence:
            assert len(evidence) <= EVIDENCE_CHARS
            assert any(evidence in line for line in cleaned), evidence
    if report.verdict is not Verdict.UNKNOWN:
        assert report.evidence, report


@pytest.mark.parametrize("entry", CORPUS, ids=[entry["file"] for entry in CORPUS])
def test_corpus_versions_are_read_when_the_lines_show_them(entry: dict[str, Any]) -> None:
    report = read((CORPUS_DIR / entry["file"]).read_bytes())
    assert report.nccl_version == entry["nccl"]
    assert report.plugin_version == entry["aws_ofi_nccl"]


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096])
def test_corpus_verdicts_do_not_depend_on_how_the_bytes_arrive(chunk: int) -> None:
    for entry in CORPUS:
        data = (CORPUS_DIR / entry["file"]).read_bytes()
        assert read(data, chunk=chunk) == read(data), (entry["file"], chunk)


def test_corpus_with_windows_line_ends_reads_the_same() -> None:
    for entry in CORPUS:
        data = (CORPUS_DIR / entry["file"]).read_bytes()
        assert read(data.replace(b"\n", b"\r\n")).verdict.value == entry["verdict"], entry["file"]


# How logs reach a reader besides as NCCL wrote them. Each wraps every line of a corpus log.
def docker_json_file(line: bytes) -> bytes:
    """Docker's json-file logging driver and Fluent Bit: the line, with its newline, in "log"."""
    record = {"log": line.decode("utf-8", errors="replace") + "\n", "stream": "stdout", "time": "2024-05-02T10:00:00Z"}
    return json.dumps(record).encode()


def cloudwatch_export_of_fluent_bit(line: bytes) -> bytes:
    """A CloudWatch Logs export (``aws logs filter-log-events``): each event's "message" is the
    record Fluent Bit sent, as a JSON string, behind the event's timestamp."""
    return (
        b"1714644000000 "
        + json.dumps({"timestamp": 1714644000000, "message": docker_json_file(line).decode()}).encode()
    )


def journald_json(line: bytes) -> bytes:
    """``journalctl -o json``: the line in "MESSAGE"."""
    return json.dumps({"__REALTIME_TIMESTAMP": "1714644000000000", "MESSAGE": line.decode("utf-8", "replace")}).encode()


def coloured(line: bytes) -> bytes:
    """A colouring logger or a terminal capture: escapes inside NCCL's prefix and keywords."""
    line = re.sub(rb"^([^: ]+):", b"\x1b[1;34m\\1\x1b[0m:", line)
    return re.sub(rb"NCCL (INFO|WARN)", b"NCCL \x1b[32m\\1\x1b[0m\x1b]8;;\x07", line)


WRAPPERS = {"docker json-file": docker_json_file, "cloudwatch export": cloudwatch_export_of_fluent_bit}
WRAPPERS |= {"journald": journald_json, "ansi colours": coloured}
WRAPPERS |= {"coloured in docker json-file": lambda line: docker_json_file(coloured(line))}


@pytest.mark.parametrize("wrapper", WRAPPERS, ids=list(WRAPPERS))
def test_corpus_as_log_shippers_and_terminals_keep_it_reads_the_same(wrapper: str) -> None:
    """Every corpus log, each line wrapped as the shipper keeps it, gives the same report: the
    verdict, the ranks and their evidence (the line inside the record, without escapes)."""
    wrap = WRAPPERS[wrapper]
    for entry in CORPUS:
        data = (CORPUS_DIR / entry["file"]).read_bytes()
        wrapped = b"\n".join(wrap(line) for line in data.splitlines()) + b"\n"
        assert read(wrapped, chunk=4096) == read(data), (wrapper, entry["file"])


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_corpus_saved_as_utf16_reads_the_same(encoding: str) -> None:
    """PowerShell 5's ">" and Notepad save UTF-16 (with a byte-order mark: "utf-16"); without
    the mark each byte order is told by its NULs. Fed in chunks of any size, odd ones too."""
    for entry in CORPUS:
        data = (CORPUS_DIR / entry["file"]).read_bytes()
        wide = data.decode("utf-8", errors="replace").encode(encoding)
        expected = read(data.decode("utf-8", errors="replace").encode())
        for chunk in (1, 3, 4097, None):
            report = read(wide, chunk=chunk)
            assert (report.verdict, report.ranks) == (expected.verdict, expected.ranks), (
                encoding,
                entry["file"],
                chunk,
            )


def test_the_whole_corpus_as_one_log_is_socket_first() -> None:
    """Concatenated, the corpus holds every verdict; SPEC's order puts socket first."""
    data = b"".join((CORPUS_DIR / entry["file"]).read_bytes() + b"\n" for entry in CORPUS)
    report = read(data)
    assert report.verdict is Verdict.SOCKET
    assert {rank.verdict for rank in report.ranks} == set(Verdict)


def test_the_docs_cite_every_corpus_entry_and_no_other() -> None:
    docs = REPO_ROOT / "docs" / "transport.md"
    text = docs.read_text()
    listed = {entry["file"] for entry in CORPUS}
    assert set(re.findall(r"`([\w.\-]+\.log)`", text)) == listed


# --- The rules -----------------------------------------------------------------------------

H = "ip-10-0-0-1:41:52 [0] NCCL INFO "
W = "ip-10-0-0-1:41:52 [0] nccl_net_ofi_create_plugin:335 NCCL WARN "


@pytest.mark.parametrize(
    ("log", "efa", "rdma"),
    [
        # The OFI plugin's network proves EFA only together with the provider it selected.
        (
            [
                H + "NET/OFI Selected provider is efa, fabric is efa-direct (found 16 nics)",
                H + "Using network Libfabric",
            ],
            "fabric",
            "other",
        ),
        ([H + "NET/OFI Selected Provider is efa (found 4 nics)", H + "Using network AWS Libfabric"], "fabric", "other"),
        ([H + "NET/OFI Selected Provider is efa-direct", H + "Using network Libfabric"], "fabric", "other"),
        ([H + "Using network Libfabric"], "unknown", "other"),
        (
            [H + "Using network AWS Libfabric", H + "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8"],
            "unknown",
            "other",
        ),
        ([H + "NET/OFI Selected Provider is tcp (found 1 nics)", H + "Using network Libfabric"], "other", "other"),
        ([H + "NET/OFI Selected Provider is sockets", H + "Using network AWS Libfabric"], "other", "other"),
        ([H + "NET/OFI Selected Provider is cxi"], "other", "other"),
        ([H + "NET/OFI Selected Provider is ofi_rxr;efa", H + "Using network AWS Libfabric"], "fabric", "other"),
        # NCCL 2.27+ also says which plugin it assigned to the communicator.
        (
            [
                H + "NET/OFI Selected provider is efa, fabric is efa (found 4 nics)",
                H + "Assigned NET plugin Libfabric to comm",
            ],
            "fabric",
            "other",
        ),
        ([H + "Failed to initialize NET plugin IB", H + "Assigned NET plugin Socket to comm"], "socket", "socket"),
        (
            [
                H + "NET/OFI Selected provider is efa, fabric is efa (found 4 nics)",
                H + "Failed to initialize NET plugin Libfabric",
            ],
            "unknown",
            "unknown",
        ),
        # NCCL's own transports.
        ([H + "Using network Socket"], "socket", "socket"),
        ([H + "Using network IB"], "other", "fabric"),
        ([H + "Using network IBext_v8"], "other", "fabric"),
        ([H + "Using internal Network Socket"], "socket", "socket"),
        ([H + "Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0"], "socket", "socket"),
        ([H + "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/3/GDRDMA"], "other", "fabric"),
        # nccl-rdma-sharp-plugins' UCX transports run over the same HCAs as its IBext.
        ([H + "Using network UCX"], "other", "fabric"),
        ([H + "Using network UCX-RMA"], "other", "fabric"),
        ([H + "Using network UCX_RMA"], "other", "fabric"),
        ([H + "Using network UCX-UCT-RD"], "other", "fabric"),
        ([H + "Channel 00/0 : 0[0] -> 8[0] [send] via NET/UCX-UCT/1"], "other", "fabric"),
        # One node: the fabric was chosen, and never used.
        (
            [
                H + "NET/OFI Selected provider is efa, fabric is efa (found 4 nics)",
                H + "Using network Libfabric",
                H + "comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0",
            ],
            "none",
            "unknown",
        ),
        ([H + "Using network IB", H + "comm 0x1 rank 0 nranks 1 cudaDev 0 busId 1000 - Init START"], "none", "none"),
        # Node-local communicators of a rank that chose sockets: a job of one node, or one whose
        # cross-node communicator comes later or past the bytes read (a tensor-parallel group
        # first; NVIDIA/nccl-tests#213, where each node formed its own world): never a pass.
        (
            [H + "Using network Socket", H + "comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0"],
            "unknown",
            "unknown",
        ),
        (
            [
                H + "Using network Socket",
                H + "Channel 00 : 0[0] -> 1[1] via P2P/IPC",
                H + "comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
            ],
            "unknown",
            "unknown",
        ),
        # A communicator of one next to a bigger one proves nothing about nodes.
        (
            [
                H + "Using network Socket",
                H + "comm 0x1 rank 3 nranks 16 cudaDev 3 busId 1000 - Init START",
                H + "comm 0x2 rank 0 nranks 1 cudaDev 3 busId 1000 - Init START",
            ],
            "socket",
            "socket",
        ),
        # Two nodes beat the single-node communicator.
        (
            [
                H + "Using network Socket",
                H + "comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8",
                H + "comm 0x2 rank 0 nRanks 16 nNodes 2 localRanks 8",
            ],
            "socket",
            "socket",
        ),
        # Plugin failures say what is not used, not what is.
        (
            [
                H + "NET/OFI Selected provider is efa, fabric is efa (found 4 nics)",
                W + "NET/OFI aws-ofi-nccl initialization failed",
            ],
            "unknown",
            "unknown",
        ),
        ([H + "NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin."], "unknown", "unknown"),
        ([H + "NET/Plugin: Failed to find ncclCollNetPlugin_v8 symbol."], "unknown", "unknown"),
        ([H + "cudaDriverVersion 12040", H + "Bootstrap : Using eth0:10.0.0.1<0>"], "unknown", "unknown"),
        (["The client socket has connected to [::ffff:127.0.0.1]:12355 via NET/Socket/0"], "unknown", "unknown"),
    ],
)
def test_rule(log: list[str], efa: str, rdma: str) -> None:
    assert read(lines(*log)).verdict.value == efa
    assert read(lines(*log), "aks-rdma").verdict.value == rdma


def test_a_plugin_failure_is_the_evidence_of_an_unknown_verdict() -> None:
    warn = "ip-10-0-0-1:41:52 [0] ofi_init:1339 NCCL WARN NET/OFI aws-ofi-nccl initialization failed"
    report = read(lines(H + "cudaDriverVersion 12040", warn))
    assert report.verdict is Verdict.UNKNOWN
    assert report.evidence == warn


@pytest.mark.parametrize(
    "log",
    [
        # NVIDIA/nccl#1357 (NCCL 2.19 - 2.25's chain, HPC-X's plugin): no v8 symbol, v6 loads.
        [
            "qh100-gpu20:39629:39686 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
            "qh100-gpu20:39629:39686 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v6 (v6)",
            "qh100-gpu20:39629:39686 [0] NCCL INFO P2P plugin IBext",
        ],
        # ROCm/rccl#1261 (NCCL 2.13 - 2.18's chain): no v6 symbol, v4 loads.
        [
            "node01:5646:5646 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v6 symbol.",
            "node01:5646:5646 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin (v4)",
        ],
        # NCCL 2.12 tries v5, then v4, and says nothing when v4 loads (src/net.cc).
        [H + "NET/Plugin: Failed to find ncclNetPlugin_v5 symbol."],
    ],
    ids=["nccl-1357", "rccl-1261", "nccl-2.12-v5"],
)
def test_a_plugin_that_loaded_an_older_interface_is_not_blamed(log: list[str]) -> None:
    report = read(lines(*log))
    assert (report.verdict, report.evidence) == (Verdict.UNKNOWN, "")


@pytest.mark.parametrize(
    "missing",
    [
        "NET/Plugin: Failed to find ncclNetPlugin_v4 symbol.",  # 2.12
        "NET/Plugin: Failed to find ncclNetPlugin symbol (v4 or v5).",  # 2.13 - 2.18
        "NET/Plugin: Failed to find ncclNetPlugin symbol (>= v5). ncclNetPlugin symbols v4 and lower are not"
        " supported.",  # 2.19 - 2.25
        "NET/Plugin: Failed to find ncclNetPlugin_v6 symbol.",  # 2.26 - 2.27, the last of v10 to v6
        "External network plugin /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so is unsupported",  # 2.28 - 2.30
    ],
)
def test_no_plugin_interface_at_all_is_the_evidence_of_an_unknown_verdict(missing: str) -> None:
    """The wording of the last interface version each NCCL tries (src/net.cc, src/plugin/net.cc
    and src/plugin/net/net_v*.cc at each tag); built in those formats."""
    report = read(lines(H + missing))
    assert (report.verdict, report.evidence) == (Verdict.UNKNOWN, H + missing)


# Lines built in released formats (no public excerpt of them was found for the corpus):
# aws-ofi-nccl >= 1.15 is C++, and its NCCL_OFI_WARN passes __PRETTY_FUNCTION__ as the file
# (include/nccl_ofi_log.h; v1.15.0 src/nccl_ofi_net.cpp:354, in nccl_net_ofi_create_plugin);
# NCCL 2.30.7 adds the function after its own warnings' file:line (src/debug.cc:345).
OFI_1_15_WARN = (
    "p5-0:212:212 [3] int nccl_net_ofi_create_plugin(nccl_net_ofi_plugin_t**):354"
    " NCCL WARN NET/OFI aws-ofi-nccl initialization failed"
)


def test_a_cpp_plugin_s_warning_is_its_process_s() -> None:
    provider = "p5-0:212:212 [3] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 4 nics)"
    report = read(lines(provider, OFI_1_15_WARN))
    assert [(rank.host, rank.pid, rank.device) for rank in report.ranks] == [("p5-0", 212, 3)]
    assert (report.verdict, report.evidence) == (Verdict.UNKNOWN, OFI_1_15_WARN)


@pytest.mark.parametrize(
    ("line", "device"),
    [
        (OFI_1_15_WARN, "3"),
        ("node-1:41:97 [5] init.cc:1790 (ncclCommInitRankFunc) NCCL WARN Cuda failure 'out of memory'", "5"),
    ],
    ids=["aws-ofi-nccl-1.15", "nccl-2.30.7"],
)
def test_the_prefix_of_every_released_warning_format_is_found(line: str, device: str) -> None:
    marker = list(transport._MARKER.finditer(line))
    assert len(marker) == 1 and marker[0]["dev"] == device
    assert line[marker[0].end() :].startswith(("NET/OFI", "Cuda failure"))


def test_the_provider_is_per_process_not_per_host() -> None:
    other_process = "ip-10-0-0-1:42:53 [1] NCCL INFO "
    report = read(lines(H + "NET/OFI Selected Provider is efa", other_process + "Using network Libfabric"))
    assert [rank.verdict for rank in report.ranks] == [Verdict.UNKNOWN, Verdict.UNKNOWN]


def test_the_provider_applies_to_every_gpu_of_its_process() -> None:
    """nccl-tests -g 8: one process, the plugin logs once (device 0), every device uses it."""
    same_process = "ip-10-0-0-1:41:53 [5] NCCL INFO "
    report = read(lines(H + "NET/OFI Selected Provider is efa", same_process + "Using network Libfabric"))
    assert {(rank.device, rank.verdict) for rank in report.ranks} == {(0, Verdict.UNKNOWN), (5, Verdict.FABRIC)}
    assert report.verdict is Verdict.FABRIC


def test_job_verdict_order_is_socket_other_fabric_none() -> None:
    def rank(verdict: Verdict) -> RankVerdict:
        return RankVerdict("h", 1, 0, None, verdict, verdict.value)

    assert job_verdict([rank(Verdict.NONE), rank(Verdict.FABRIC), rank(Verdict.SOCKET)]) == (Verdict.SOCKET, "socket")
    assert job_verdict([rank(Verdict.NONE), rank(Verdict.FABRIC), rank(Verdict.OTHER)]) == (Verdict.OTHER, "other")
    assert job_verdict([rank(Verdict.UNKNOWN), rank(Verdict.NONE), rank(Verdict.FABRIC)]) == (Verdict.FABRIC, "fabric")
    assert job_verdict([rank(Verdict.UNKNOWN), rank(Verdict.NONE)]) == (Verdict.NONE, "none")
    assert job_verdict([rank(Verdict.UNKNOWN)]) == (Verdict.UNKNOWN, "unknown")
    assert job_verdict([]) == (Verdict.UNKNOWN, "")


def test_an_unknown_fabric_name_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(KeyError, match="efa, aks-rdma"):
        signature_for("slingshot")


# --- Prefixes and interleaving -------------------------------------------------------------


@pytest.mark.parametrize(
    "wrapper",
    [
        "{}",
        "[1,3]<stdout>:{}",  # mpirun --tag-output
        "(RayTrainWorker pid=954, ip=10.67.132.202) {} [repeated 15x across cluster]",  # Ray
        "[3] {}",  # srun --label
        "worker-3: {}",  # pdsh, MPIJob launchers
        "[pod/train-worker-3/pytorch] {}",  # kubectl logs --prefix
        "2024-05-01T10:00:00.123456789Z {}",  # kubectl logs --timestamps
        "  | 2024-12-04T07:19:43.480Z | {}",  # CloudWatch console
        "2025-05-16T16:39:51.208-07:00{} | {}",  # CloudWatch copy that repeats the line
        "\x1b[32m{}\x1b[0m",  # colour
    ],
)
def test_launcher_prefixes_keep_the_rank(wrapper: str) -> None:
    log = [
        wrapper.replace("{}", "train-worker-3:954:3133 [6] NCCL INFO Using network Socket"),
        wrapper.replace(
            "{}", "train-worker-3:954:3133 [6] NCCL INFO comm 0x7f rank 14 nRanks 16 nNodes 2 localRanks 8"
        ),
    ]
    report = read(lines(*log))
    assert report.verdict is Verdict.SOCKET
    assert [(rank.host, rank.pid, rank.device, rank.rank) for rank in report.ranks] == [("train-worker-3", 954, 6, 14)]
    assert report.evidence == "train-worker-3:954:3133 [6] NCCL INFO Using network Socket" + (
        " [repeated 15x across cluster]" if "repeated" in wrapper else ""
    )


def test_interleaved_ranks_of_two_hosts_keep_their_own_verdicts() -> None:
    a, b = "node-a:100:110 [0] NCCL INFO ", "node-b:200:210 [0] NCCL INFO "
    log = lines(
        a + "NET/OFI Selected provider is efa, fabric is efa (found 4 nics)",
        b + "NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.",
        a + "Using network Libfabric",
        b + "Using network Socket",
        b + "comm 0x2 rank 8 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
        a + "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
    )
    report = read(log)
    verdicts = {(rank.host, rank.rank): rank.verdict for rank in report.ranks}
    assert verdicts == {("node-a", 0): Verdict.FABRIC, ("node-b", 8): Verdict.SOCKET}
    assert report.verdict is Verdict.SOCKET
    assert report.evidence == "node-b:200:210 [0] NCCL INFO Using network Socket"


def test_unprefixed_lines_count_for_no_rank_but_give_versions() -> None:
    report = read(lines("NCCL version 2.4.6+cuda10.0", "NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.14.2"))
    assert (report.nccl_version, report.plugin_version) == ("2.4.6+cuda10.0", "1.14.2")
    assert report.ranks == ()


# --- Early stop ----------------------------------------------------------------------------


def test_the_scanner_says_decisive_when_its_node_s_only_rank_decides_and_not_before() -> None:
    log = [
        H + "NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)",
        H + "Using network Libfabric",
        H + "comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 1 localRank 0 MNNVL 0",  # a node-local communicator
        H + "comm 0x2 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
        H + "Channel 00/0 : 0[0] -> 1[0] [send] via NET/Libfabric/0/GDRDMA",
    ]
    scanner = TransportScanner(EFA)
    answers = [scanner.feed((line + "\n").encode()) for line in log]
    assert answers == [False, False, False, True, True]
    assert scanner.report().verdict is Verdict.FABRIC


def test_a_settled_scanner_still_reads_a_later_socket_communicator_of_a_proven_rank() -> None:
    """The node's only rank proved the fabric: the job is settled and a reader may stop. NCCL
    chooses the network per communicator (2.27's per-communicator plugin, src/plugin/net.cc),
    so a later one can fall back to sockets; a reader that reads on (``fabriccap transport``,
    the whole file) still sees it, and the rank becomes ``socket``."""
    log = [
        H + "NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)",
        H + "Using network Libfabric",
        H + "comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
        H + "Channel 00/0 : 0[0] -> 1[0] [send] via NET/Libfabric/0/GDRDMA",
        H + "Assigned NET plugin Socket to comm",
        H + "comm 0x2 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
        H + "Assigned NET plugin Libfabric to comm",
    ]
    scanner = TransportScanner(EFA)
    answers = [scanner.feed((line + "\n").encode()) for line in log]
    assert answers == [False, False, True, True, True, True, True]
    report = scanner.report()
    assert report.verdict is Verdict.SOCKET and report.evidence.endswith("Assigned NET plugin Socket to comm")


# One p4d node of aws/aws-ofi-nccl#715 (SageMaker, aws-ofi-nccl 1.11.0-aws): the plugin came up in
# pid 17773 and failed in pids 17774 and 17780, which fell back to sockets. Lines as posted in
# turns 2 and 5 (CloudWatch columns removed); the "comm … localRanks" lines are NCCL >= 2.20's
# format (src/init.cc). The failing processes print their choice after ~20 KiB of the healthy
# one's channel set-up, past the first 16 KiB a reader hands the parser at once.
FABRIC_PROCESS = "algo-1:17773:17846 [0] NCCL INFO "


def one_node_fabric_then_socket_processes(local_ranks: int = 8) -> bytes:
    announced = f"nNodes 2 localRanks {local_ranks}"
    fabric = [
        FABRIC_PROCESS + "NET/OFI Selected Provider is efa (found 4 nics)",
        FABRIC_PROCESS + "Using network AWS Libfabric",
        FABRIC_PROCESS + f"comm 0x5580e120bac0 rank 0 nRanks 16 {announced} localRank 0 MNNVL 0",
    ]
    for channel in range(32):
        fabric.append(FABRIC_PROCESS + f"Channel {channel:02d}/0 : 0[0] -> 1[1] via P2P/IPC/read")
        receive = f"Channel {channel:02d}/0 : 15[7] -> 0[0] [receive] via NET/AWS Libfabric/0/GDRDMA"
        fabric.append(FABRIC_PROCESS + receive)
    padding = [
        f"algo-1:{17773 + device}:{17850 + device} [{device}] NCCL INFO Channel {channel:02d}/0 : "
        f"{device}[{device}] -> {device + 1}[{device + 1}] via P2P/IPC/read"
        for device in range(2, 7)
        for channel in range(32)
    ]
    socket = [
        "algo-1:17774:17853 [1] nccl_net_ofi_create_plugin:259 NCCL WARN NET/OFI aws-ofi-nccl initialization failed",
        "algo-1:17780:17851 [7] NCCL INFO Using network Socket",
        "algo-1:17774:17853 [1] NCCL INFO Using network Socket",
        f"algo-1:17774:17853 [1] NCCL INFO comm 0x55d0c1a2b3c0 rank 1 nRanks 16 {announced} localRank 1 MNNVL 0",
        f"algo-1:17780:17851 [7] NCCL INFO comm 0x55f1e2d3c4b0 rank 7 nRanks 16 {announced} localRank 7 MNNVL 0",
    ]
    return lines(*fabric, *padding, *socket)


def chunked(data: bytes, size: int) -> Iterator[bytes]:
    return (data[start : start + size] for start in range(0, len(data), size))


def test_a_fabric_rank_does_not_settle_the_job_while_ranks_its_node_announced_are_undecided() -> None:
    """Stopping at rank 0's decisive fabric line would miss two socket processes of its node:
    the read goes on to them, and ends with the verdict of the whole log."""
    log = one_node_fabric_then_socket_processes()
    assert len(log) > 16 * 1024
    early = scan(chunked(log, 16 * 1024), EFA, stop_when_decisive=True)
    assert early.verdict is Verdict.SOCKET and early.decisive
    assert early.verdict is read(log).verdict
    assert "Using network Socket" in early.evidence


COMM_OF_TWO_LOCAL_RANKS = "comm 0x1 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0"


def test_every_rank_the_node_announced_decided_settles_the_job() -> None:
    """localRanks 2: once both ranks proved the fabric, the job is settled."""
    second = "ip-10-0-0-1:42:53 [1] NCCL INFO "
    provider = "NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)"
    scanner = TransportScanner(EFA)
    for head in (H, second):
        assert not scanner.feed(lines(head + provider))
        decided = scanner.feed(lines(head + "Using network Libfabric", head + COMM_OF_TWO_LOCAL_RANKS))
    assert decided and scanner.report().verdict is Verdict.FABRIC


def test_an_other_rank_does_not_settle_the_job_while_its_node_has_undecided_ranks() -> None:
    """``other`` comes after ``socket`` in the job's order: a later rank may still show sockets."""
    second = "ip-10-0-0-1:42:53 [1] NCCL INFO "
    scanner = TransportScanner(EFA)
    assert not scanner.feed(lines(H + "Using network IB", H + COMM_OF_TWO_LOCAL_RANKS))
    assert scanner.feed(lines(second + "Using network Socket", second + COMM_OF_TWO_LOCAL_RANKS))
    assert scanner.report().verdict is Verdict.SOCKET


def test_a_log_older_than_2_20_is_settled_by_its_first_decided_rank() -> None:
    """NCCL before 2.20 prints no localRanks: nothing says how many ranks are to come, so the
    first decided rank settles the job, as docs/transport.md says (a later socket rank is missed)."""
    log = b"NCCL version 2.18.5+cuda12.2\n" + one_node_fabric_then_socket_processes().replace(b" localRanks 8", b"")
    early = scan(chunked(log, 16 * 1024), EFA, stop_when_decisive=True)
    assert early.verdict is Verdict.FABRIC and early.decisive


@pytest.mark.parametrize("version", ["NCCL version 2.21.5+cuda12.4\n", ""], ids=["2.21", "no version line"])
def test_a_log_without_rank_counts_is_not_settled_unless_it_says_it_is_older_than_2_20(version: str) -> None:
    """A 2.20 log shows no localRanks when its communicator lines are not logged
    (``NCCL_DEBUG_SUBSYS=NET``; they are INIT's), and a worker's log has no version line (rank
    0's process prints it): a decided rank settles nothing, and the socket rank is read."""
    log = version.encode() + one_node_fabric_then_socket_processes().replace(b" localRanks 8", b"")
    early = scan(chunked(log, 16 * 1024), EFA, stop_when_decisive=True)
    assert early.verdict is Verdict.SOCKET, early


def test_a_rank_the_log_has_shown_keeps_it_from_settling_whatever_its_node_announced() -> None:
    """The first communicator is a pair across nodes (``localRanks 1``, as a ``send``/``recv``
    pair or a 2-stage pipeline group makes): rank 0's fabric is not the node's last word while
    rank 7, whose lines came before, has proved nothing; its sockets come later."""
    prefix = [f"p5-worker-0:10{device}:20{device} [{device}] NCCL INFO " for device in range(8)]
    log = lines(
        *(prefix[device] + "NET/OFI Selected Provider is efa (found 4 nics)" for device in range(7)),
        prefix[7] + "NET/Plugin: Could not find: libnccl-net.so.",
        prefix[0] + "Using network Libfabric",
        prefix[0] + "comm 0x9 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
        *(f"[rank0] pipeline stage 0 warm-up step {step}" for step in range(40)),
        prefix[7] + "Using network Socket",
        prefix[7] + "comm 0x7 rank 7 nRanks 16 nNodes 2 localRanks 8 localRank 7 MNNVL 0",
    )
    early = scan(chunked(log, 256), EFA, stop_when_decisive=True)
    assert early.verdict is Verdict.SOCKET, early


def mpirun_host(host: str, network: str, first_rank: int) -> tuple[list[str], list[str]]:
    """One host's two ranks as mpirun's output prefixes them: (network lines, comm lines). A
    socket host's first line is the OFI plugin failing, as on a node without EFA."""
    network_lines, comm_lines = [], []
    for local in range(2):
        rank = first_rank + local
        head = f"[1,{rank}]<stdout>:{host}:{40 + local}:{50 + local} [{local}] "
        if network == "Socket":
            network_lines.append(
                head + "nccl_net_ofi_create_plugin:259 NCCL WARN NET/OFI aws-ofi-nccl initialization failed"
            )
        else:
            network_lines.append(
                head + "NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)"
            )
        network_lines.append(head + f"NCCL INFO Using network {network}")
        comm_lines.append(
            head + f"NCCL INFO comm 0x1 rank {rank} nRanks 4 nNodes 2 localRanks 2 localRank {local} MNNVL 0"
        )
    return network_lines, comm_lines


def test_a_log_of_two_hosts_settles_only_once_as_many_hosts_as_nnodes_announced() -> None:
    """mpirun's output with the launcher a worker holds every host's lines: host A's two ranks
    proving the fabric settled the job, and the reader stopped before host B's socket lines
    (review 61, F2). The log named two hosts and nNodes 2 said two nodes: it reads on."""
    a_network, a_comm = mpirun_host("node-a", "Libfabric", 0)
    b_network, b_comm = mpirun_host("node-b", "Socket", 2)
    # Every rank opens its network before the comm lines, which need all ranks (bootstrap).
    first, rest = lines(*a_network, *b_network[:1], *a_comm), lines(*b_network[1:], *b_comm)
    early = scan([first, rest], EFA, stop_when_decisive=True)
    assert (early.verdict, early.decisive) == (Verdict.SOCKET, True)
    assert early.verdict is scan([first + rest], EFA).verdict
    b_fabric_network, b_fabric_comm = mpirun_host("node-b", "Libfabric", 2)
    scanner = TransportScanner(EFA)
    assert not scanner.feed(lines(*a_network, *b_fabric_network, *a_comm))
    assert scanner.feed(lines(*b_fabric_comm)) and scanner.report().verdict is Verdict.FABRIC


def test_a_host_whose_first_line_comes_after_the_others_settled_is_not_read() -> None:
    """The limit docs/transport.md states: until a second host shows, the log is one host's."""
    a_network, a_comm = mpirun_host("node-a", "Libfabric", 0)
    b_network, b_comm = mpirun_host("node-b", "Socket", 2)
    early = scan([lines(*a_network, *a_comm), lines(*b_network, *b_comm)], EFA, stop_when_decisive=True)
    assert (early.verdict, early.decisive) == (Verdict.FABRIC, True)


def gb200_host(host: str, network: str, ranks: int, domains: int) -> list[str]:
    """The first host's 4 ranks (one process each) of a job of ``ranks`` ranks over
    ``domains`` NVLink domains of GB200 hosts (4 GPUs each), NCCL 2.27 with multi-node NVLink:
    each rank's MNNVL line (as in NVIDIA/nccl#1769) and communicator line (``src/init.cc``),
    whose nNodes counts NVLink domains and whose localRanks are its domain's ranks."""
    local = ranks // domains
    return [
        line
        for device in range(4)
        for line in (
            f"{host}:{100 + device}:{200 + device} [{device}] NCCL INFO MNNVL busId 0x{device + 8}01000 fabric UUID"
            " 3143b15bc2cd192b.28cc9b5473fb5b93 cliqueId 0x7ffe state 3 healthMask 0x0",
            f"{host}:{100 + device}:{200 + device} [{device}] NCCL INFO Using network {network}",
            f"{host}:{100 + device}:{200 + device} [{device}] NCCL INFO comm 0x1 rank {device} nRanks {ranks}"
            f" nNodes {domains} localRanks {local} localRank {device} MNNVL 1",
        )
    ]


@pytest.mark.parametrize(
    ("network", "domains", "expected"),
    [
        ("Libfabric", 1, Verdict.NONE),  # 2 hosts, one NVLink domain: no network
        ("Socket", 1, Verdict.UNKNOWN),  # past the domain it would be TCP: not proved to use none
        ("Libfabric", 2, Verdict.UNKNOWN),  # over two domains: the OFI plugin, provider not shown
        ("Socket", 2, Verdict.SOCKET),
    ],
)
def test_multi_node_nvlink_counts_an_nvlink_domain_as_one_node(network: str, domains: int, expected: Verdict) -> None:
    report = read(lines(*gb200_host("gb200-a", network, 8 * domains, domains)))
    assert report.verdict is expected, report
    assert len(report.ranks) == 4


def test_multi_node_nvlink_over_the_fabric_reads_a_pod_s_log_to_its_end() -> None:
    """16 ranks over 2 domains of 2 hosts: this pod's 4 ranks over EFA are fabric, but its log
    holds fewer ranks than its domain's localRanks (8), so a reader does not stop early: a
    later rank could still show sockets."""
    provider = [
        f"gb200-a:{100 + device}:{200 + device} [{device}] NCCL INFO NET/OFI Selected provider is efa, fabric is efa"
        for device in range(4)
    ]
    scanner = TransportScanner(EFA)
    assert not scanner.feed(lines(*provider, *gb200_host("gb200-a", "Libfabric", 16, 2)))
    assert scanner.finish().verdict is Verdict.FABRIC


def one_process_without_its_plugin(cross_node_ranks: int = 0) -> list[str]:
    """A p5 pod's 8 processes, NCCL 2.21: aws-ofi-nccl failed in process 7 only (as in
    aws/aws-ofi-nccl#715 and #889), which chose Socket; the first communicator is the
    tensor-parallel group inside the node, and the first ``cross_node_ranks`` ranks have printed
    their data-parallel one across 2 nodes (the log cut there, as a read at its limit is)."""
    prefix = [f"p5-worker-0:10{device}:20{device} [{device}] NCCL INFO " for device in range(8)]
    return [
        *(prefix[device] + "NET/OFI Selected Provider is efa (found 4 nics)" for device in range(7)),
        "p5-worker-0:107:207 [7] nccl_net_ofi_init:1444 NCCL WARN NET/OFI aws-ofi-nccl initialization failed",
        *(prefix[device] + "Using network AWS Libfabric" for device in range(7)),
        prefix[7] + "Using network Socket",
        *(prefix[d] + f"comm 0x1{d} rank {d} nRanks 8 nNodes 1 localRanks 8 localRank {d} MNNVL 0" for d in range(8)),
        *(
            prefix[d] + f"comm 0x2{d} rank {d} nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0"
            for d in range(cross_node_ranks)
        ),
    ]


@pytest.mark.parametrize("cross_node_ranks", [0, 7], ids=["tensor-parallel group only", "ranks 0-6 across nodes"])
def test_a_process_on_sockets_keeps_its_pod_from_passing_on_the_others_ranks(cross_node_ranks: int) -> None:
    """Rank 7 is unknown (node-local on Socket); the others' none (or fabric) must not pass the
    job: its communicator across nodes would go over TCP."""
    report = read(lines(*one_process_without_its_plugin(cross_node_ranks)))
    assert report.verdict is Verdict.UNKNOWN, report
    assert report.evidence == "p5-worker-0:107:207 [7] NCCL INFO Using network Socket"
    assert report.could_fall_back
    assert {rank.verdict for rank in report.ranks} == {
        Verdict.NONE if cross_node_ranks == 0 else Verdict.FABRIC,
        Verdict.UNKNOWN,
    }


def test_a_decided_rank_ignores_later_lines() -> None:
    scanner = TransportScanner(EFA)
    assert scanner.feed(lines(H + "Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0"))
    scanner.feed(lines(H + "comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8"))
    assert scanner.report().verdict is Verdict.SOCKET


def test_scan_stops_reading_at_the_first_decisive_chunk() -> None:
    consumed: list[int] = []

    def chunks() -> Iterator[bytes]:
        for index in range(10_000):
            consumed.append(index)
            if index == 3:
                yield lines(H + "Using network Socket", H + "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8")
            else:
                yield b"epoch 1 step 20 loss 0.25\n" * 100

    report = scan(chunks(), EFA, stop_when_decisive=True)
    assert report.verdict is Verdict.SOCKET and report.decisive
    assert consumed == [0, 1, 2, 3]


# Two processes of a p4d node with aws-ofi-nccl 1.11.0-aws, as posted in aws/aws-ofi-nccl#715
# ("NET/OFI Selected Provider is efa (found 4 nics)", "Using network AWS Libfabric"); the channel
# line is NCCL 2.12 - 2.19's format, which prints no localRanks, so with rank 0's version line in
# such a release rank 2's line settles the job.
PRE_2_20 = "NCCL version 2.18.3+cuda12.2"
RANK_2 = "algo-1:18564:18638 [2] NCCL INFO "
RANK_3 = "algo-1:18565:18637 [3] NCCL INFO "


def test_scan_stopped_early_drops_the_line_its_last_chunk_ended_in() -> None:
    """The chunk that settles the job ends inside rank 3's "Using network AWS Libfabric": read
    as a whole line, "AWS Lib" would be another network, and ``other`` outranks ``fabric``."""
    settled = lines(
        PRE_2_20,
        RANK_2 + "NET/OFI Selected Provider is efa (found 4 nics)",
        RANK_2 + "Using network AWS Libfabric",
        RANK_2 + "Channel 00/0 : 2[2] -> 10[2] [send] via NET/AWS Libfabric/0/GDRDMA",
    )
    cut = (RANK_3 + "Using network AWS Lib").encode()
    rest = lines(
        "fabric",
        RANK_3 + "NET/OFI Selected Provider is efa (found 4 nics)",
        RANK_3 + "Channel 00/0 : 3[3] -> 11[3] [send] via NET/AWS Libfabric/0/GDRDMA",
    )
    early = scan([settled + cut, rest], EFA, stop_when_decisive=True)
    assert early.decisive and early.verdict is Verdict.FABRIC is read(settled + cut + rest).verdict
    assert [rank.pid for rank in early.ranks] == [18564]  # the chunk of rank 3's first line was not read on
    assert not any(rank.evidence.endswith("AWS Lib") for rank in early.ranks)


def test_a_last_line_without_a_newline_counts_at_the_end_of_the_stream_only() -> None:
    log = lines(RANK_2 + "NET/OFI Selected Provider is efa (found 4 nics)") + (RANK_2 + "Using network Socket").encode()
    whole, cut = TransportScanner(EFA), TransportScanner(EFA)
    whole.feed(log)
    cut.feed(log)
    assert whole.finish().verdict is Verdict.SOCKET
    assert cut.finish(end_of_stream=False).verdict is Verdict.UNKNOWN


def test_a_single_node_log_is_never_decisive() -> None:
    scanner = TransportScanner(RDMA)
    assert not scanner.feed(lines(H + "Using network IB", H + "comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8"))
    assert scanner.finish().verdict is Verdict.NONE


def test_node_local_communicators_on_sockets_are_not_a_pass_until_one_crosses_nodes() -> None:
    """A multi-node job whose first communicator is node-local (a tensor-parallel group): NCCL
    chose sockets, and no line yet says whether the job crosses nodes. ``none`` would pass it
    for good when the cross-node communicator is past the bytes read; it stays ``unknown``, with
    the network line as evidence, until that communicator shows."""
    tensor_parallel = [H + "Using network Socket", H + "comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0"]
    so_far = read(lines(*tensor_parallel))
    assert so_far.verdict is Verdict.UNKNOWN and so_far.evidence.endswith("NCCL INFO Using network Socket")
    world = [H + "Using network Socket", H + "comm 0x2 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0"]
    assert read(lines(*tensor_parallel, *world)).verdict is Verdict.SOCKET


# --- Several communicators of one process ----------------------------------------------------

# NCCL chooses the network per communicator: ncclNetInit runs for each one, honouring its
# config.netName (NCCL >= 2.19), and since 2.27 initialises and assigns the plugin per
# communicator; a plugin that fails to initialise for one is disabled and the communicator takes
# the next, IB or Socket (NVIDIA/nccl src/plugin/net.cc, ncclNetInit, ncclNetPluginInit: "Failed
# to initialize NET plugin %s", ncclNetPluginAssignToComm: "Assigned NET plugin %s to comm").
# "Using network %s" and "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL
# %d" are src/init.cc's; the provider line is aws-ofi-nccl >= 1.14's (src/nccl_ofi_net.cpp).
P = "p5-worker-1:212:298 [3] NCCL INFO "
FABRIC_COMM = [
    P + "NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)",
    P + "Initialized NET plugin Libfabric",
    P + "Assigned NET plugin Libfabric to comm",
    P + "Using network Libfabric",
    P + "comm 0x55d0c1a2b3c0 rank 11 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0",
]
SOCKET_COMM = [
    P + "Failed to initialize NET plugin Libfabric",
    P + "Initialized NET plugin Socket",
    P + "Assigned NET plugin Socket to comm",
    P + "Using network Socket",
    P + "comm 0x55d0c1f00000 rank 11 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0",
]
# A communicator of the node's 8 ranks only (a tensor-parallel group): whatever its network, it
# carries nothing between nodes.
NODE_LOCAL_SOCKET_COMM = [
    P + "Assigned NET plugin Socket to comm",
    P + "Using network Socket",
    P + "comm 0x55d0c2000000 rank 3 nRanks 8 nNodes 1 localRanks 8 localRank 3 MNNVL 0",
]


def test_the_verdict_does_not_depend_on_the_order_of_a_process_s_communicators() -> None:
    """A rank's verdict is the worst network its communicators proved to cross nodes: one
    communicator over sockets makes it ``socket`` whether it came before or after the fabric's
    one, as two processes printing them would. A node-local communicator proves nothing. (The
    node announces 8 ranks and the log holds one: nothing settles the job before both
    communicators are read, unless a socket does.)"""
    other_process = [line.replace("p5-worker-1:212:298", "p5-worker-1:213:299") for line in SOCKET_COMM]
    for log, expected in [
        (FABRIC_COMM + SOCKET_COMM, Verdict.SOCKET),
        (SOCKET_COMM + FABRIC_COMM, Verdict.SOCKET),
        (FABRIC_COMM + other_process, Verdict.SOCKET),
        (FABRIC_COMM + NODE_LOCAL_SOCKET_COMM, Verdict.FABRIC),
        (NODE_LOCAL_SOCKET_COMM + FABRIC_COMM, Verdict.FABRIC),
    ]:
        data = lines(*log)
        whole = read(data)
        assert whole.verdict is expected, log
        assert read(data, chunk=7).verdict is expected  # fed in any pieces
        early = scan([data[i : i + 64] for i in range(0, len(data), 64)], EFA, stop_when_decisive=True)
        assert early.verdict is expected, log  # stopping early agrees with the whole read


# A second process of the same node; with localRanks 2 the two ranks are all the node holds.
Q = "p5-worker-1:213:299 [4] NCCL INFO "
FABRIC_COMM_OF_TWO = [line.replace("localRanks 8", "localRanks 2") for line in FABRIC_COMM]
SOCKET_COMM_OF_TWO = [line.replace("localRanks 8", "localRanks 2") for line in SOCKET_COMM]
OTHER_PROCESS_FABRIC_COMM_OF_TWO = [line.replace(P, Q) for line in FABRIC_COMM_OF_TWO]


def test_a_socket_communicator_of_a_proven_rank_before_the_node_s_other_ranks_prove_is_seen() -> None:
    """Rank P proved the fabric, then opened a communicator over sockets while rank Q had not
    proved yet: the job is not settled at P's fabric, so an early stop reads P's sockets, and
    the verdict is the whole log's. Once both announced ranks proved the fabric the job is
    settled, and a later socket communicator is past the read (docs/transport.md); the whole
    log (``fabriccap transport``) still shows it."""
    seen = lines(*FABRIC_COMM_OF_TWO, *SOCKET_COMM_OF_TWO, *OTHER_PROCESS_FABRIC_COMM_OF_TWO)
    early = scan([seen[i : i + 64] for i in range(0, len(seen), 64)], EFA, stop_when_decisive=True)
    assert early.decisive and early.verdict is Verdict.SOCKET is read(seen).verdict
    assert early.evidence.endswith("Using network Socket")

    past_the_read = lines(*FABRIC_COMM_OF_TWO, *OTHER_PROCESS_FABRIC_COMM_OF_TWO, *SOCKET_COMM_OF_TWO)
    early = scan([past_the_read[i : i + 64] for i in range(0, len(past_the_read), 64)], EFA, stop_when_decisive=True)
    assert early.decisive and early.verdict is Verdict.FABRIC
    assert read(past_the_read).verdict is Verdict.SOCKET


def test_a_rank_s_evidence_is_the_line_of_its_worst_communicator() -> None:
    (rank,) = read(lines(*FABRIC_COMM, *SOCKET_COMM, *FABRIC_COMM)).ranks
    assert rank.verdict is Verdict.SOCKET
    assert rank.evidence.endswith("Using network Socket")


# --- Hostile input -------------------------------------------------------------------------


def test_empty_input() -> None:
    for data in (b"", b"\n", b"\r\n\r\n", b"   "):
        report = read(data)
        assert (report.verdict, report.evidence, report.ranks) == (Verdict.UNKNOWN, "", ())


def test_ansi_escapes_and_control_characters_never_reach_the_evidence() -> None:
    dirty = (
        "\x1b[1;31mnode-1\x1b[0m:7:8 [0] NCCL INFO \x1b]0;title\x07Using network Socket\x00\x07\x1b[2K\u202e\x08\x7f"
    )
    report = read(lines(dirty, "node-1:7:8 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8"))
    assert report.verdict is Verdict.SOCKET
    assert report.evidence == "node-1:7:8 [0] NCCL INFO Using network Socket"


def test_a_utf16_log_after_a_utf8_one_is_told_apart() -> None:
    """Each log of a reader (``next_log``) is sniffed afresh."""
    scanner = TransportScanner(EFA)
    scanner.feed(lines(H + "Using network Libfabric"))
    scanner.next_log()
    scanner.feed(
        lines(H + "Using network Socket", H + "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8")
        .decode()
        .encode("utf-16")
    )
    assert scanner.finish().verdict is Verdict.SOCKET


def test_an_unterminated_escape_hides_nothing_after_its_line() -> None:
    data = b"\x1b]0;tqdm 3%|###\n" + lines(
        H + "Using network Socket", H + "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8"
    )
    assert read(data).verdict is Verdict.SOCKET


@pytest.mark.parametrize(
    "line",
    [
        H + "Using network Socket {}",  # a record with no log field
        H + "Using network Socket " + '{"a":' * 5000 + "1" + "}" * 5000,  # deeper than the interpreter goes
        H + 'Using network Socket {"log": 5}',  # a field that is not text
        '{"log": "' + H + 'Using network Socket"',  # no closing brace
    ],
    ids=["empty record", "deep record", "field not text", "not closed"],
)
def test_lines_that_are_no_log_record_are_read_as_they_are(line: str) -> None:
    """Read as a line of its own (not a network line: it does not end with the name), and the
    reader goes on to the next line."""
    assert (
        read(lines(line, H + "Using network Socket", H + "comm 0x1 rank 0 nRanks 16 nNodes 2")).verdict
        is Verdict.SOCKET
    )


@pytest.mark.parametrize(
    "line",
    [
        H + "\x1b[32mUsing network \x1b[31mSocket\x1b(B\x1b[m",  # tput setaf / sgr0 (xterm's sgr0: ESC ( B)
        "node-a:41:52 [0] NCCL \x1b[32mINFO\x1b(B\x1b[m Using network Socket",
    ],
    ids=["around the network", "around the level"],
)
def test_terminfo_colours_hide_no_network(line: str) -> None:
    report = read(lines(line, line.split(" NCCL ")[0] + " NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 1"))
    assert report.verdict is Verdict.SOCKET, report
    assert report.evidence.endswith("Using network Socket")


@pytest.mark.parametrize(
    "line",
    [
        "\x1b[1mNCCL\x1b(B\x1b[m INFO Using network Socket",  # tput bold / sgr0 around the word
        "NCCL \x1b[38:5:196mINFO\x1b[m Using network Socket",  # grep --color's colour form
    ],
    ids=["sgr0 around NCCL", "colon colour"],
)
def test_colours_around_nccl_and_its_level_hide_no_rank(line: str) -> None:
    """Rank 0 proves the fabric; rank 1's network line is coloured. Hidden, rank 1 would be
    unknown and the job would pass on rank 0's fabric."""
    rank0, rank1 = "node-a:1:2 [0] ", "node-a:42:43 [1] "
    log = lines(
        rank0 + "NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 4 nics)",
        rank0 + "NCCL INFO Using network Libfabric",
        rank0 + "NCCL INFO comm 0x1 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0",
        rank1 + line,
        rank1 + "NCCL INFO comm 0x1 rank 1 nRanks 4 nNodes 2 localRanks 2 localRank 1 MNNVL 0",
    )
    for data in (log, b"\n".join(docker_json_file(entry) for entry in log.splitlines()) + b"\n"):
        assert read(data).verdict is Verdict.SOCKET


def test_a_line_of_colours_without_a_level_is_searched_in_time_linear_in_its_length() -> None:
    """A hang guard, not a benchmark: ``NCCL`` and a mebibyte of colour resets with no level (a
    hostile pod; the CLI reads 1 MiB chunks). Two greedy runs of colours around the blank made
    the search try every split of them: 0.86 s for 16 KiB, about 50 minutes for this line.
    Possessive runs take milliseconds; the guard allows a thousand times that."""
    line = b"NCCL" + b"\x1b[m" * (MiB // 3) + b"x\n" + lines(H + "Using network Socket")
    outcome: list[TransportReport] = []
    worker = threading.Thread(target=lambda: outcome.append(read(line)), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert outcome and outcome[0].verdict is Verdict.SOCKET, "the search did not end within 60 s"


def test_a_fluent_bit_record_past_the_kept_prefix_is_read_by_its_log_field() -> None:
    """Fluent Bit's kubernetes filter adds the pod's labels and annotations (on by default), and
    a record can outgrow the kept prefix of a line: its log field, first, is still read."""
    metadata = {"kubernetes": {"labels": {f"label-{n}": "x" * 40 for n in range(100)}}}
    records = [
        json.dumps({"log": text + "\n", "stream": "stderr", **metadata})
        for text in (H + "Using network Socket", H + "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 1")
    ]
    assert all(len(record) > MAX_LINE_BYTES for record in records)
    report = read(("\n".join(records) + "\n").encode())
    assert (report.verdict, report.evidence) == (Verdict.SOCKET, H + "Using network Socket")
    assert report.lines_cut == 2


def test_a_cut_record_whose_kept_prefix_ends_on_a_brace_is_read_by_its_log_field() -> None:
    """A record cut where its kept prefix happens to end on "}" (of a nested object) is no
    whole record: it is read by its log field as any cut record is."""
    text = H + "Using network Socket"
    head = json.dumps({"log": text + "\n", "stream": "stderr"})[:-1] + ', "kubernetes": {"labels": {'
    labels = ""
    while len(head) + len(labels) < MAX_LINE_BYTES - 40:
        labels += f'"l{len(labels)}": "x", '
    nested = labels + '"last": {"a": "b"}'
    record = head + nested
    record += " " * (MAX_LINE_BYTES - len(record) - 1) + "}" + ', "more": "' + "y" * 200 + '"}}}'
    assert record.encode()[:MAX_LINE_BYTES].endswith(b"}") and len(record) > MAX_LINE_BYTES
    report = read(
        (record + "\n" + json.dumps({"log": H + "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 1"}) + "\n").encode()
    )
    assert (report.verdict, report.evidence) == (Verdict.SOCKET, text)


def test_a_pre_2_20_pod_log_whose_interior_ranks_never_prove_still_settles() -> None:
    """NCCL 2.8.3 (the corpus's EKS README excerpt): the ranks inside the node are none by rule 7
    and never proved; the log announces no ranks, so its first proven rank settles it."""
    data = corpus_log("aws-efa-eks-readme-p4d-mpijob-efa.log")
    early = scan(chunked(data, 1024), EFA, stop_when_decisive=True)
    assert early.decisive and early.verdict is Verdict.FABRIC


def test_evidence_is_cut_and_clean() -> None:
    line = "h:1:2 [0] NCCL INFO Using network Socket " + "\u202e\x1b[31mX\x1b[0m\t" * 300
    evidence = evidence_line(line)
    assert len(evidence) == EVIDENCE_CHARS
    assert all(char.isprintable() for char in evidence)
    assert "\u202e" not in evidence and "\x1b" not in evidence


def test_line_and_paragraph_separators_leave_evidence_as_one_line() -> None:
    """U+2028 and U+2029 (Zl, Zp) break the line in a terminal and an editor: after one, a log's
    author could forge a line of its own in the evidence. Each becomes a space, as clean_text
    turns line breaks into one, so evidence is clean_text-clean (hostile review 63 F2)."""
    assert readable_text("a\u2028b\u2029c") == "a b c"
    forged = "\u2028\u20292026-12-07 ERROR fabriccap: forged"
    report = read(lines("h1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0 " + forged))
    assert report.verdict is Verdict.SOCKET
    for evidence in (report.evidence, *(rank.evidence for rank in report.ranks)):
        assert evidence.endswith("via NET/Socket/0   2026-12-07 ERROR fabriccap: forged"), evidence
        assert evidence == clean_text(evidence, EVIDENCE_CHARS)


def test_every_unicode_format_surrogate_and_private_character_is_removed() -> None:
    hidden = [chr(point) for point in range(0x110000) if unicodedata.category(chr(point)) in ("Cf", "Cs", "Co")]
    assert len(hidden) > 100_000
    assert readable_text("a" + "".join(hidden) + "b") == "ab"
    assert readable_text("ünïcode ✓ 日本 \U0001f600") == "ünïcode ✓ 日本 \U0001f600"


def test_binary_noise_around_real_lines() -> None:
    noise = random.Random(7).randbytes(16 * MiB)
    real = lines(H + "Using network Socket", H + "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8")
    data = noise[: 8 * MiB] + b"\n" + real + noise[8 * MiB :]
    report = read(data, chunk=MiB)
    assert report.verdict is Verdict.SOCKET
    for rank in report.ranks:
        assert all(char.isprintable() for char in rank.evidence), rank
    assert len(report.ranks) <= MAX_RANKS


def test_ten_megabyte_lines_are_read_by_their_prefix() -> None:
    long_tail = b"x" * (10 * MiB)
    data = (
        H.encode() + b"Using network Socket " + long_tail + b"\n"  # too long to be the network line
        + long_tail + b" " + H.encode() + b"Using network IB\n"  # its prefix is beyond the kept part
        + H.encode() + b"comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8\n"
    )  # fmt: skip
    for chunk in (None, MiB, 3 * MiB + 1):
        report = read(data, chunk=chunk)
        assert report.verdict is Verdict.UNKNOWN, chunk  # neither overlong line names a network
        assert report.lines_cut == 2, chunk
        assert report.lines_read <= 3, chunk


def test_one_hundred_megabytes_without_a_newline_keep_a_bounded_prefix() -> None:
    def chunks() -> Iterator[bytes]:
        yield H.encode() + b"Using network Socket"
        block = bytes(range(32, 127)) * (MiB // 95)
        for _ in range(100):
            yield block
        yield b"\n" + lines(H + "Using network IB", H + "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8")

    tracemalloc.start()
    try:
        scanner = TransportScanner(EFA)
        for chunk in chunks():
            scanner.feed(chunk)
        report = scanner.finish()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.lines_cut == 1
    assert report.verdict is Verdict.OTHER  # the line after the 100 MB one is read, from its start
    # The chunks themselves are the caller's (one block of 1 MiB, traced as it is built).
    assert peak < MEMORY_BOUND_BYTES + 2 * MiB, peak


def test_one_gibibyte_streamed_in_chunks_in_bounded_memory() -> None:
    """1 GiB of a chatty training log with NCCL lines in it, generated lazily: memory stays
    within the bound and only the NCCL lines are decoded. benchmarks/transport_parser_bench.py times
    the same input."""
    block, blocks = chatty_training_log_block(), 1024
    nccl_lines_per_block = block.count(b"NCCL INFO")
    decisive = lines(H + "comm 0x1 rank 0 nRanks 64 nNodes 8 localRanks 8 localRank 0 MNNVL 0")

    tracemalloc.start()
    try:
        scanner = TransportScanner(EFA)
        for _ in range(blocks):
            scanner.feed(block)
        scanner.feed(decisive)
        report = scanner.finish()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.verdict is Verdict.SOCKET
    assert report.lines_read == blocks * nccl_lines_per_block + 1
    assert peak < MEMORY_BOUND_BYTES, peak


def test_a_utf16_stream_is_read_in_bounded_memory() -> None:
    """64 MiB of the same log in UTF-16, fed in 1 MiB chunks: its text is decoded a slice at a
    time, so the scanner holds no copy of a chunk."""
    block = chatty_training_log_block().decode().encode("utf-16-le")
    chunks = [block[start : start + MiB] for start in range(0, len(block), MiB)]
    tracemalloc.start()
    try:
        scanner = TransportScanner(EFA)
        for _ in range(32):
            for chunk in chunks:
                scanner.feed(chunk)
        scanner.feed(lines(H + "comm 0x1 rank 0 nRanks 64 nNodes 8 localRanks 8").decode().encode("utf-16-le"))
        report = scanner.finish()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.verdict is Verdict.SOCKET
    assert peak < MEMORY_BOUND_BYTES // 2, peak


def chatty_training_log_block() -> bytes:
    """1 MiB of a training log: eight NCCL lines, then loss lines; its last line goes on in the
    next block, as lines do in a stream."""
    noise = b"".join(
        f"[rank{step % 8}] epoch 3 step {step} loss {step / 7:.4f} lr 1e-4 grad_norm 0.93 tokens/s 48213\n".encode()
        for step in range(15_000)
    )
    nccl = lines(*(f"train-{node}:1{node}:2 [0] NCCL INFO Using network Socket" for node in range(8)))
    block = (nccl + noise)[:MiB]
    assert len(block) == MiB
    return block


# --- Work, counted: every search the scanner makes over the input, and how far it goes --------


class SearchMeter:
    """Counts the bytes the scanner's searches go over: each regular expression the scanner
    searches the input with, and ``rfind`` on the chunks it is fed, is wrapped, and a search
    counts its span up to where it stopped (a forward search to its match's end, a backward
    one from its end to what it found; to the span's far end when nothing is found). This is
    the work the scanner does in C; the Python work per line is bounded by MAX_LINE_BYTES and
    counted as one more pass over the line. Deterministic: no clock."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.examined = 0
        meter = self

        class Pattern:
            def __init__(self, pattern: re.Pattern[bytes]) -> None:
                self.pattern = pattern

            def search(self, data: bytes, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[bytes] | None:
                found = self.pattern.search(data, pos, endpos)
                meter.examined += (found.end() if found else min(endpos, len(data))) - pos
                return found

            def sub(self, replacement: bytes, data: bytes) -> bytes:
                meter.examined += len(data)
                return self.pattern.sub(replacement, data)

        for name in ("_LINE_BREAK", "_INTERESTING", "_RULE_WORDS", "_ESCAPES_BYTES"):
            monkeypatch.setattr(transport, name, Pattern(getattr(transport, name)))

        class Chunk(bytes):
            def rfind(self, sub: Any, start: Any = 0, end: Any = None) -> int:
                stop = len(self) if end is None else end
                found = super().rfind(sub, start, stop)
                meter.examined += stop - (found if found >= 0 else start)
                return found

        self.chunk_type = Chunk

    def per_byte(self, data: bytes, chunk: int | None = None) -> float:
        """The scanner's work per input byte on ``data``, fed whole or in chunks."""
        self.examined = 0
        size = len(data) if chunk is None else chunk
        scan((self.chunk_type(data[i : i + size]) for i in range(0, len(data), size)), EFA)
        return self.examined / len(data)


# Each byte is gone over by the line-break search, the keyword search, the two searches back to
# its line's start and the one forward to its end, and once more when its line is read.
EXAMINED_PER_BYTE = 6


def test_work_grows_linearly_with_the_input_even_when_every_line_is_nccl(monkeypatch: pytest.MonkeyPatch) -> None:
    """A search that looked back to the chunk's start at every line went over the chunk once per
    line: 4x the lines, 16x the work. Counted, not timed: the work per byte is the same for
    10,000 and 40,000 lines, and in chunks of any size."""
    meter = SearchMeter(monkeypatch)
    line = b"ip-10-0-0-1:41:52 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n"
    small, large = meter.per_byte(line * 10_000), meter.per_byte(line * 40_000)
    assert small <= EXAMINED_PER_BYTE, small
    assert large <= small * 1.001, (small, large)
    for chunk in (1, 100, 4096, MiB):
        assert meter.per_byte(line * 10_000, chunk) <= EXAMINED_PER_BYTE, chunk


@pytest.mark.parametrize(
    "shape",
    [
        "carriage returns only",
        "no line breaks",
        "one keyword per line",
        "keywords late in long lines",
        "noise",
        "escapes on every line",
        "escapes inside every keyword",
    ],
)
def test_work_per_byte_is_bounded_whatever_the_shape(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    meter = SearchMeter(monkeypatch)
    data = {
        "carriage returns only": (H + "Using network Socket\r").encode() * 20_000,
        "no line breaks": b"NCCL INFO " * 200_000,
        "one keyword per line": b"x NCCL INFO y\n" * 100_000,
        "keywords late in long lines": (b"z" * 8000 + b" NCCL INFO Using network Socket\n") * 200,
        "noise": random.Random(3).randbytes(2 * MiB),
        "escapes on every line": b"\x1b[32mstep 1 loss 0.3127\x1b[0m \x1b[2K\r" * 50_000,
        "escapes inside every keyword": (coloured((H + "Using network Socket").encode()) + b"\n") * 20_000,
    }[shape]
    for chunk in (None, 1000, 65536):
        assert meter.per_byte(data, chunk) <= EXAMINED_PER_BYTE, (shape, chunk)


def test_many_ranks_are_bounded_and_counted() -> None:
    data = b"".join(f"host-{index}:1:2 [0] NCCL INFO Using network Socket\n".encode() for index in range(5000))
    report = read(data)
    assert len(report.ranks) == MAX_RANKS
    assert report.ranks_dropped == 5000 - MAX_RANKS
    assert report.verdict is Verdict.SOCKET


def test_ranks_past_the_bound_keep_the_job_from_fabric() -> None:
    """The scanner tracks the first 29 ranks (the bound of a 256Ki read): the 3 socket ranks
    are past it, so the job is not proven ``fabric``; it is ``unknown`` and says why."""
    scanner = TransportScanner(EFA, max_ranks=29)
    scanner.feed(four_nodes_last_ranks_on_sockets())
    report = scanner.finish()
    assert report.ranks_dropped > 0 and {rank.verdict for rank in report.ranks} == {Verdict.FABRIC}
    assert report.verdict is Verdict.UNKNOWN and not report.decisive
    assert f"{report.ranks_dropped} NCCL lines of ranks past the first 29 were not read" in report.evidence
    assert len(report.evidence) <= EVIDENCE_CHARS
    # Every rank tracked: the sockets show, as they do in ``fabriccap transport``'s whole read.
    assert read(four_nodes_last_ranks_on_sockets()).verdict is Verdict.SOCKET


def test_ranks_past_the_bound_leave_a_proven_socket_and_keep_the_job_from_none() -> None:
    on_sockets = TransportScanner(EFA, max_ranks=29)
    on_sockets.feed(four_nodes_last_ranks_on_sockets(socket_ranks=6))  # 3 tracked, 3 past the bound
    report = on_sockets.finish()
    assert report.ranks_dropped > 0 and report.verdict is Verdict.SOCKET
    single_node = [
        RankVerdict("h", pid, 0, pid, Verdict.NONE, f"h:{pid}:1 [0] NCCL INFO comm 0x1 rank {pid} nRanks 2 nNodes 1")
        for pid in range(2)
    ]
    assert job_verdict(single_node)[0] is Verdict.NONE
    assert job_verdict(single_node, ranks_dropped=1)[0] is Verdict.UNKNOWN


def test_worst_case_ranks_stay_within_the_stated_memory_bound() -> None:
    """MAX_RANKS ranks, each with the longest host and every evidence line it can keep, in
    characters outside the BMP (4 bytes each in a Python string)."""
    wide = "\U0001f600"
    tail = wide * 400

    def rank_lines(index: int) -> bytes:
        host = f"{index:04d}" + wide * 249
        prefix = f"{host}:{index}:1 [0] NCCL INFO "
        return lines(
            f"{prefix}NET/OFI Selected Provider is efa {tail}",
            f"{prefix}NET/Plugin: No plugin found {tail}",
            f"{prefix}comm 0x1 rank {index} nranks 2 cudaDev 0 {tail}",
            f"{prefix}Channel 00 : 0[0] -> 1[1] via P2P/IPC {tail}",
            f"{prefix}comm 0x1 rank {index} nranks 2 cudaDev 0 busId 1 - Init COMPLETE {tail}",
            f"{prefix}ncclCommInitRank comm 0x2 rank {index} nRanks 2 nNodes 1 localRanks 2 {tail}",
            f"{prefix}Using network AWS Libfabric",
        )

    tracemalloc.start()
    try:
        scanner = TransportScanner(EFA)
        for index in range(MAX_RANKS):
            scanner.feed(rank_lines(index))
        retained, _ = tracemalloc.get_traced_memory()
        report = scanner.report()
    finally:
        tracemalloc.stop()
    assert len(report.ranks) == MAX_RANKS and report.ranks_dropped == 0
    assert report.verdict is Verdict.NONE
    print(f"{MAX_RANKS} worst-case ranks retain {retained / MiB:.2f} MiB (bound {MEMORY_BOUND_BYTES / MiB:.2f} MiB)")
    assert retained < MEMORY_BOUND_BYTES, retained


def test_kept_line_prefix_is_the_stated_bound() -> None:
    scanner = TransportScanner(EFA)
    scanner.feed(b"y" * (MAX_LINE_BYTES * 3))
    assert len(scanner._partial) == MAX_LINE_BYTES
