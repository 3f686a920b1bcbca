"""What NCCL chose for its network, read from NCCL's own log (``NCCL_DEBUG=INFO``).

Requesting a fabric is not using it: an image without the aws-ofi-nccl plugin, or with
``FI_PROVIDER`` pointing elsewhere, holds its EFA devices and still runs NCCL over
``NET/Socket``. NCCL's log is the only record of the choice. This module turns log text into a
verdict per rank and per job; docs/transport.md lists each rule with the NCCL and aws-ofi-nccl
versions it covers and the corpus entries (tests/fixtures/nccl) that show it.

Pure: no I/O, no clock. ``TransportScanner`` takes bytes in chunks as they arrive (a streamed
HTTP body, a file, a pipe), splits lines itself and keeps a bounded prefix of each, so no input
can make it hold more than ``MEMORY_BOUND_BYTES`` (the text of one line, the per-rank facts and
their evidence lines), whatever its size or shape. It says when the job's verdict is settled
(``TransportScanner.decisive``: a rank proved sockets, or every rank the log announces proved a
verdict), the one rule by which a reader may stop early. It reads logs as they are kept, not
only as NCCL wrote them: in UTF-16, coloured with ANSI escapes, or a JSON record a line
(docs/transport.md, "What reaches the parser").

A log is hostile input: anyone who can create a pod can print anything. Every evidence line is
decoded leniently, stripped of ANSI escapes and control characters and cut to
``EVIDENCE_CHARS`` characters before it leaves this module. A pod can still fake its own
verdict by printing NCCL-looking lines; the verdict describes the log, not the hardware.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from fabriccap.core.text import clean_text

# The kept prefix of one line. NCCL's lines are well under 1 KiB and everything the rules read
# (the prefix, the message's first words) is at their start; the rest of a longer line is
# counted and dropped, never held.
MAX_LINE_BYTES = 4096
# Ranks (host, pid, device) tracked per scanner: a pod's 8 or 16, or every rank of a 32-node job
# of 8 GPUs in one combined log; lines of further ranks are counted in ``ranks_dropped``, and
# keep the job from ``fabric`` and ``none`` (``job_verdict``).
MAX_RANKS = 256
EVIDENCE_CHARS = 200
# One rank at worst: its host name (253 characters) and five evidence lines of EVIDENCE_CHARS
# characters, all outside the BMP (4 bytes each), its process's two lines, and the objects
# themselves; tests/unit/core/test_transport_parser.py measures it with tracemalloc.
RANK_BYTES = 8 * 1024
MEMORY_BOUND_BYTES = MAX_LINE_BYTES + MAX_RANKS * RANK_BYTES  # 2 MiB and 4 KiB


def memory_bound(max_ranks: int = MAX_RANKS) -> int:
    """The most a scanner tracking at most ``max_ranks`` ranks holds, whatever its input."""
    return MAX_LINE_BYTES + max_ranks * RANK_BYTES


class Verdict(StrEnum):
    FABRIC = "fabric"  # NCCL's network is the fabric (EFA: the OFI plugin over provider efa)
    SOCKET = "socket"  # NET/Socket: TCP
    OTHER = "other"  # another network: IB on an EFA pool, a libfabric provider that is not the fabric
    NONE = "none"  # no network at all: one node
    UNKNOWN = "unknown"  # the lines do not say


# SPEC: the job's verdict is the first of these that any rank shows, else unknown.
JOB_VERDICT_ORDER: tuple[Verdict, ...] = (Verdict.SOCKET, Verdict.OTHER, Verdict.FABRIC, Verdict.NONE)
# What the job's verdict may be only when every rank was read: a rank not read (past a
# scanner's bound, ``ranks_dropped``; in a container whose log was not read, core.verdicts
# ``combine``) could show sockets, which comes first. ``socket`` and ``other`` stand on the line
# that shows them: either already makes a pod that requests the fabric an offender.
UNPROVEN_WITHOUT_EVERY_RANK = frozenset({Verdict.FABRIC, Verdict.NONE})


@dataclass(frozen=True)
class FabricSignature:
    """What counts as a fabric's network in NCCL's log.

    ``networks``: NCCL network names (``Using network X``, ``via NET/X/…``) that are the fabric
    by themselves. ``providers``: libfabric providers that make the OFI plugin's network
    (``AWS Libfabric``, ``Libfabric``) the fabric; the network name alone proves nothing, since
    the same plugin runs over ``tcp``, ``sockets`` or ``cxi``.
    """

    name: str
    networks: re.Pattern[str] | None = None
    providers: frozenset[str] = frozenset()

    def is_fabric_network(self, network: str) -> bool:
        return self.networks is not None and self.networks.fullmatch(network) is not None

    def is_fabric_provider(self, provider: str) -> bool:
        # Older libfabric spelled layered providers "tcp;ofi_rxm" or "ofi_rxr;efa".
        return any(part in self.providers for part in provider.casefold().split(";"))


SIGNATURES: Mapping[str, FabricSignature] = {
    "efa": FabricSignature(name="efa", providers=frozenset({"efa", "efa-direct"})),
    # NCCL's own verbs transport is "IB" for InfiniBand and RoCE alike; NVIDIA's
    # nccl-rdma-sharp-plugins (HPC-X, the Azure HPC images) name theirs "IBext" / "IBext_v8"
    # (src/ib_plugin.c), and its UCX transports, chosen with NCCL_PLUGIN_P2P=ucx|ucx_rma|ucx_uct|
    # ucx_uct_read (src/p2p_plugin.c), run over the same HCAs (UCX_NET_DEVICES is set to the IB
    # device, src/ucx_plugin.c; rc_mlx5 for UCT, src/ucx_uct_lib.c): "UCX" (src/ucx_plugin.c),
    # "UCX_RMA" up to v2.1.0 and "UCX-RMA" since (src/ucx_rma_plugin.c), "UCX-UCT" and
    # "UCX-UCT-RD" since 2024 (src/ucx_uct_plugin.c, src/ucx_uct_rd_plugin.c).
    "aks-rdma": FabricSignature(
        name="aks-rdma", networks=re.compile(r"IB(?:ext(?:_v\d+)?)?|UCX(?:[-_]RMA|-UCT(?:-RD)?)?")
    ),
}


def signature_for(name: str) -> FabricSignature:
    """The built-in signature of a fabric profile; KeyError naming the known ones."""
    try:
        return SIGNATURES[name]
    except KeyError:
        known = ", ".join(SIGNATURES)
        raise KeyError(f"no NCCL transport signature for fabric {name!r} (known: {known})") from None


# --- Text cleaning -------------------------------------------------------------------------

# An unterminated string escape (OSC, DCS) ends with its line: it never swallows the lines after
# it (the scanner strips a line's bytes of escapes: ``_ESCAPES_BYTES``).
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
    r"|\x1b\][^\x07\x1b\r\n]*(?:\x07|\x1b\\)?"  # OSC: titles, hyperlinks
    r"|\x1b[P^_][^\x1b\r\n]*(?:\x1b\\)?"  # DCS, PM, APC strings
    r"|\x1b[ -/]+[0-~]"  # nF: character sets ("\x1b(B", in terminfo's sgr0)
    r"|\x1b[@-Z\\-_]?"  # two-character escapes, or a lone ESC
)
# A colour as a JSON record writes it ("\u001b[32m"): a colouring logger's output kept by a
# log shipper.
_JSON_CSI = rb"\\u001[bB]\[[0-?]*[ -/]*[@-~]"
# Both in a line's bytes, which the scanner strips before its rules read the line: a colouring
# logger or a terminal capture puts them inside the words the rules look for.
_ESCAPES_BYTES = re.compile(_ANSI.pattern.encode("ascii") + b"|" + _JSON_CSI)
_C0_C1 = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Unicode's format characters (Cf: bidi overrides and isolates, zero-width characters, tags),
# surrogates and private use: they reorder or hide what a reader sees. A test checks that this
# covers every such character of the running Python's Unicode database.
_FORMAT = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ud800-\uf8ff\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f\U000f0000-\U0010ffff]"
)


def readable_text(text: str) -> str:
    """``text`` without ANSI escapes or control characters: tabs and line or paragraph
    separators become spaces, and Unicode format characters (bidi overrides that reorder what a
    reader sees) are dropped."""
    # The tests first: nearly every line has none of these, and a search is cheaper than a copy.
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\t" in text:
        text = text.replace("\t", " ")
    if _C0_C1.search(text):
        text = _C0_C1.sub("", text)
    if not text.isascii():
        text = _FORMAT.sub("", text)
        # Unicode's line and paragraph separators (Zl, Zp): a terminal or an editor breaks the
        # line at them, so the rest of an evidence line would read as a line of its own.
        # (str.replace: str.translate took 3x as long on such a line.)
        if "\u2028" in text:
            text = text.replace("\u2028", " ")
        if "\u2029" in text:
            text = text.replace("\u2029", " ")
    return text


def evidence_line(text: str) -> str:
    """A line as it may reach a status, an Event or a metric label: cleaned, stripped, at most
    ``EVIDENCE_CHARS`` characters. After the parser's own cleaning (what its rules read), the
    operator's rule for all text others wrote (core.text.clean_text) has the last word."""
    return clean_text(readable_text(text).strip(), EVIDENCE_CHARS)


# --- Line patterns (docs/transport.md gives each one's versions) ---------------------------

# NCCL's prefix since 2.0: "host:pid:tid [cudaDev] NCCL INFO msg". Warnings (and traces) put
# where they come from before "NCCL WARN": "file.cc:line" (NCCL 2.0 - 2.30.4, and every
# plugin's warning through ncclDebugLog), "file.cc:line (function)" for NCCL 2.30.7's own
# (NVIDIA/nccl v2.30.7-1 src/debug.cc:345, "[%d] %s:%d (%s) NCCL WARN"), and a C++ plugin's
# __PRETTY_FUNCTION__ as the "file", blanks and all: aws-ofi-nccl >= 1.15 (C++ since 1.15.0,
# include/nccl_ofi_log.h) prints "[3] int nccl_net_ofi_create_plugin(nccl_net_ofi_plugin_t**):354
# NCCL WARN NET/OFI ...". That part never holds " [" and a digit, the start of another marker,
# so each candidate's search ends at the next one and the work stays linear in the line; it is
# tried last, so an INFO line is matched as before. Launchers wrap the prefix ("[1,3]<stdout>:",
# "(RayTrainWorker pid=1) ", "[0] ", CloudWatch's "  | time | "), so it is searched for, not
# anchored: first the marker after the device (a literal " [" rejects most positions at once),
# then the head just before it. A host is anything without blanks or colons, even empty or
# redacted ("<cluster_name>").
_MARKER = re.compile(
    r" \[(?P<dev>\d{1,5})\] (?:(?:(?! \[\d).){1,300}?:\d{1,7}(?: \([^)]{0,200}\))? )??"
    r"NCCL (?:INFO|WARN|TRACE|ABORT) ?"
)
_HEAD = re.compile(r"(?P<host>[^\s:]{0,253}):(?P<pid>\d{1,10}):\d{1,10}$")
_HEAD_REACH = 280  # the longest head: a 253-character host and two 10-digit numbers


def last_marker(text: str) -> re.Match[str] | None:
    """The last of NCCL's prefixes on a line (up to its level): log shippers that repeat a line
    after a separator (CloudWatch's "time<line> | <line>") leave the cleanest copy at the end."""
    markers = list(_MARKER.finditer(text))  # a kept line is at most MAX_LINE_BYTES long
    return markers[-1] if markers else None


# The few facts printed without that prefix: "NCCL version 2.4.6+cuda10.0" on its own line,
# aws-ofi-nccl's own test programs ("INFO: Function: ofi_init Line: 686: NET/OFI …"), and
# lines whose launcher replaced the prefix.
_UNPREFIXED = re.compile(r"NCCL (?:INFO|WARN) |NCCL version |NET/OFI ")
# Ray deduplicates repeated lines and says so at their end.
_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]$")


def _unprefixed_message(text: str, found: re.Match[str]) -> str:
    """The message of a line without NCCL's prefix (``_UNPREFIXED`` found in it)."""
    return text[found.end() :] if found.group().startswith(("NCCL INFO", "NCCL WARN")) else text


def _bare(message: str) -> str:
    """A message as the rules read it: stripped, without Ray's repeat count."""
    message = message.strip()
    return _RAY_REPEATED.sub("", message) if "repeated" in message else message


_USING_NETWORK = re.compile(
    r"^(?:Using (?:internal )?[Nn]etwork (?P<name>[A-Za-z0-9_.\- ]{1,64}?)"
    r"|Assigned NET plugin (?P<assigned>[A-Za-z0-9_.\- ]{1,64}?) to comm)\s*$"
)
_VIA_NET = re.compile(r"\bvia NET/(?P<name>[^/]{1,64})/\d")
_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is (?P<provider>[^\s,()]{1,64})")
_NODES = re.compile(r"\bnNodes (?P<nodes>\d{1,7})\b")
_RANKS = re.compile(r"\brank (?P<rank>\d{1,7}) n[Rr]anks (?P<nranks>\d{1,7})\b")
# NCCL >= 2.20 prints "comm 0x… rank r nRanks n nNodes k localRanks N …": N ranks of that
# communicator run on this rank's node, so a log of one node announces how many ranks it holds.
_LOCAL_RANKS = re.compile(r"\blocalRanks (?P<local>\d{1,7})\b")
_INIT_COMPLETE = re.compile(r"\bInit COMPLETE\b")
_LOCAL_CHANNEL = re.compile(r"\bvia (?:P2P|SHM|direct shared memory)")
# The OFI plugin failed after it had chosen a provider: NCCL falls back to its own transports.
_PLUGIN_INIT_FAILED = re.compile(
    r"NET/OFI (?:aws-ofi-nccl initialization failed|Initializing plugin failed|Only EFA provider is supported"
    r"|Couldn't find any optimal provider|Could not find any optimal provider|OFI fi_getinfo\(\) call failed"
    r"|No eligible providers were found)"
    r"|^Failed to initialize NET plugin (?:AWS )?Libfabric\b"
)
# No network plugin at all, in NCCL's wordings from 2.3 to 2.30: no library, or a library with
# no plugin interface this NCCL takes. For the latter only the wording of the last version NCCL
# tries counts: "Failed to find ncclNetPlugin_v4 symbol." (2.12 tries v5, then v4), "... symbol
# (v4 or v5)." (2.13 - 2.18), "... symbol (>= v5). ncclNetPlugin symbols v4 and lower are not
# supported." (2.19 - 2.25), "Failed to find ncclNetPlugin_v6 symbol." (2.26 - 2.27 try v10 down
# to v6), "External network plugin X is unsupported" (2.28 - 2.30; NVIDIA/nccl src/net.cc,
# src/plugin/net.cc and src/plugin/net/net_v*.cc at each tag). Any other version's "Failed to
# find" is followed by an older one that loads: "Failed to find ncclNetPlugin_v8 symbol." then
# "Loaded net plugin NCCL RDMA Plugin v6 (v6)" (NVIDIA/nccl#1357), "..._v6 symbol." then "Loaded
# net plugin NCCL RDMA Plugin (v4)" (ROCm/rccl#1261). ncclCollNetPlugin symbols are a different,
# optional plugin interface and are not listed.
_PLUGIN_MISSING = re.compile(
    r"NET/Plugin ?: (?:No plugin found|Plugin load (?:\([^)]{0,256}\) )?returned|dlerror=|Could not find:"
    r"|Failed to find ncclNetPlugin(?: symbol \(|_v4 symbol|_v6 symbol)|Using internal network plugin)"
    r"|Unable to load libnccl-net\.so|Using internal net plugin|^External network plugin .* is unsupported$"
)
# A plugin loaded (NCCL 2.13 - 2.30): no plugin-missing line before it, of the same rank, holds
# any more. It follows the versions not found, and since 2.27 NCCL_NET_PLUGIN may list several
# libraries, tried in turn (src/plugin/net.cc).
_PLUGIN_LOADED = re.compile(r"NET/Plugin ?: Loaded net plugin ")
_NCCL_VERSION = re.compile(r"NCCL version (?P<version>\d{1,3}\.\d{1,3}\.\d{1,3}[0-9A-Za-z.+\-]{0,30})")
_PLUGIN_VERSION = re.compile(r"aws-ofi-nccl (?P<version>\d{1,3}\.\d{1,3}\.\d{1,3}[0-9A-Za-z.\-]{0,20})")

_SOCKET = "socket"
# aws-ofi-nccl's network: "AWS Libfabric" up to 1.12 (and in its Neuron build), "Libfabric" since.
_OFI_NETWORK = re.compile(r"(?:AWS )?Libfabric", re.IGNORECASE)
_LINE_BREAK = re.compile(rb"[\r\n]")
# Lines that can matter contain one of these; others are skipped without being decoded. A colour
# may stand around the level ("NCCL \x1b[32mINFO\x1b[0m", raw or in a JSON record). Every branch
# starts with the literal "N", which keeps the search at C speed: a branch that starts with
# anything else (an escape) makes the engine try the pattern at every byte, 30 times slower.
# The runs of colours (CSI, and nF such as sgr0's "ESC ( B") are possessive ("*+"): with a plain
# "*" the two runs around the blank could split k colours k ways, and a line of "NCCL" and
# thousands of colours with no level cost the square of its length (0.86 s for 16 KiB; now
# 0.3 ms). No colour starts with a blank or a letter, so possession loses no match.
_COLOURS = rb"(?:(?:\x1b|\\u001[bB])(?:\[[0-?]*[ -/]*[@-~]|[ -/]+[0-~]))*+"
_INTERESTING = re.compile(rb"NCCL" + _COLOURS + rb" " + _COLOURS + rb"(?:INFO|WARN|TRACE|ABORT|version)|NET/OFI ")
# ... and one of the words some rule reads: most of NCCL's own lines (topology, tuning) have none.
_RULE_WORDS = re.compile(rb"etwork|NET plugin|via |NET/|anks |libnccl-net|internal net|version|aws-ofi")


# --- Per-rank facts ------------------------------------------------------------------------


@dataclass(frozen=True)
class RankVerdict:
    host: str
    pid: int | None
    device: int | None
    rank: int | None  # NCCL's rank, once a "rank N nranks M" line names it
    verdict: Verdict
    evidence: str
    # Unknown over a network that is not the fabric (``_Rank.could_fall_back``): like a rank not
    # read, it keeps the job from fabric and none (``job_verdict``).
    could_fall_back: bool = False


@dataclass(frozen=True)
class TransportReport:
    fabric: str
    verdict: Verdict
    evidence: str
    ranks: tuple[RankVerdict, ...]
    nccl_version: str | None
    plugin_version: str | None
    decisive: bool  # the job's verdict is settled: a reader may stop (TransportScanner.decisive)
    ranks_dropped: int  # lines of ranks past MAX_RANKS, ignored
    lines_cut: int  # lines longer than MAX_LINE_BYTES, read by their prefix
    lines_read: int  # lines decoded and matched; the others were skipped by a byte search

    @property
    def could_fall_back(self) -> bool:
        """A rank could fall back (``RankVerdict.could_fall_back``): so could the job."""
        return any(rank.could_fall_back for rank in self.ranks)

    def as_dict(self) -> dict[str, object]:
        """SPEC's ``-o json`` shape, plus the versions and what was left out."""
        return {
            "verdict": self.verdict.value,
            "evidence": self.evidence,
            "ranks": [
                {
                    "host": entry.host,
                    "rank": entry.rank,
                    "pid": entry.pid,
                    "device": entry.device,
                    "verdict": entry.verdict.value,
                    "evidence": entry.evidence,
                }
                for entry in self.ranks
            ],
            "fabric": self.fabric,
            "ncclVersion": self.nccl_version,
            "pluginVersion": self.plugin_version,
            "ranksDropped": self.ranks_dropped,
            "linesCut": self.lines_cut,
        }


@dataclass
class _Process:
    """What one process printed once for all its GPUs: the plugin's provider, or its failure."""

    provider: str | None = None
    provider_line: str = ""
    failure_line: str = ""  # the plugin failed (after choosing a provider, if it did)


@dataclass
class _Rank:
    """One rank's facts. NCCL chooses the network per communicator (``ncclConfig_t.netName``
    since 2.19; since 2.27 the plugin is initialised and assigned per communicator, and one
    that fails to initialise for a communicator falls back: NVIDIA/nccl src/plugin/net.cc,
    "Assigned NET plugin %s to comm", "Failed to initialize NET plugin %s"), so one process can
    run one communicator over the fabric and a later one over sockets. The network facts below
    are its current communicator's; ``worst`` keeps the worst network any of its communicators
    proved to cross nodes, whatever their order."""

    host: str
    pid: int | None
    device: int | None
    process: _Process
    rank: int | None = None
    # The current communicator: its network ("Using network X", "Assigned NET plugin X to
    # comm"), a channel of it through the network (proof of use between nodes), its nNodes
    # (NCCL >= 2.20 prints it) and that line.
    network: str | None = None
    network_line: str = ""
    via_net_line: str = ""
    comm_nodes: int | None = None
    nodes_line: str = ""
    max_nodes: int | None = None  # largest nNodes of all its communicators
    max_comm_ranks: int | None = None  # largest communicator size it printed
    comm_line: str = ""
    local_channels: bool = False  # channels through P2P/SHM were printed
    init_complete_line: str = ""
    missing_plugin_line: str = ""
    # The worst (first in JOB_VERDICT_ORDER) of its communicators' networks proved to cross
    # nodes, with its evidence: no later line makes it better, a later communicator can make it
    # worse.
    worst: tuple[Verdict, str] | None = field(default=None)

    def verdict(self, signature: FabricSignature) -> tuple[Verdict, str]:
        """The rank's verdict and evidence: the worst network its communicators proved to
        cross nodes, else what its current communicator says so far."""
        if self.worst is not None:
            return self.worst
        verdict, evidence, _ = self.communicator(signature)
        return verdict, evidence

    def new_communicator(self) -> None:
        """A network line after the current communicator printed its nodes or channels opens
        the next communicator: it is judged on its own nNodes and channels."""
        if self.network is not None and (self.comm_nodes is not None or self.via_net_line):
            self.comm_nodes, self.via_net_line = None, ""

    def communicator(self, signature: FabricSignature) -> tuple[Verdict, str, bool]:
        """(verdict, evidence, proven) of the current communicator; proven: its network is known
        and crosses nodes, so no later line of it changes that."""
        multi_node = self._multi_node()
        if self.network is not None:
            kind = classify_network(signature, self.network, self.process.provider)
            if multi_node is False:
                # Node-local so far. NCCL names the network each communicator would take across
                # nodes: when that is sockets or another network, nothing in the log tells a job
                # of one node from one whose cross-node communicator comes later (a tensor-
                # parallel or HSDP shard group is created first) or past the bytes read, so
                # ``none`` would pass a job that falls back to sockets: it stays unknown. A
                # process alone in every communicator it joined (nRanks 1: a one-GPU job, the
                # corpus's nccl-1267 and nccl-1653) has no peer to reach by any network: none.
                if self._off_the_fabric_alone_on_its_node(kind):
                    return Verdict.UNKNOWN, self.network_line, False
                return Verdict.NONE, self._single_node_line(), False
            evidence = self.via_net_line or self.network_line
            if kind is Verdict.UNKNOWN:  # the OFI plugin, provider not shown
                return kind, evidence, False
            return kind, evidence, multi_node is True
        if multi_node is False:
            return Verdict.NONE, self._single_node_line(), False
        process = self.process
        if process.provider is not None and not process.failure_line:
            if signature.is_fabric_provider(process.provider):
                return Verdict.UNKNOWN, process.provider_line, False  # chosen, not yet used
            # The plugin runs over another provider; if it fails later NCCL falls back to its
            # own IB or Socket transport, neither of them the fabric either.
            return Verdict.OTHER, process.provider_line, False
        return Verdict.UNKNOWN, process.failure_line or self.missing_plugin_line or process.provider_line, False

    def _off_the_fabric_alone_on_its_node(self, kind: Verdict) -> bool:
        """Its communicators so far stay on its node, over a network (of ``kind``) that is not
        the fabric, and it has peers: ``unknown`` (``communicator``)."""
        return kind in _NOT_THE_FABRIC and self.max_comm_ranks != 1

    def could_fall_back(self, signature: FabricSignature) -> bool:
        """Unknown over a network that is not the fabric: no communicator of it crossed nodes
        yet, and one that does later would cross them over that network. Another rank's
        ``none`` or ``fabric`` says nothing of it: the job is not proved to pass."""
        if self.worst is not None or self.network is None or self._multi_node() is not False:
            return False
        return self._off_the_fabric_alone_on_its_node(classify_network(signature, self.network, self.process.provider))

    def _multi_node(self) -> bool | None:
        """Whether the current communicator crosses nodes (None: not known yet)."""
        if self.via_net_line:
            return True
        if self.comm_nodes is not None:
            return self.comm_nodes > 1
        if self.max_nodes is not None:
            # Earlier communicators all on one node say this one likely is too; one that
            # crossed nodes was judged with its own network (``worst``), and says nothing of
            # this one.
            return False if self.max_nodes <= 1 else None
        if self.max_comm_ranks == 1:  # alone in every communicator it joined
            return False
        # Before nNodes was printed (2.20), NCCL connected every ring and tree channel during
        # init and printed each connection: a rank that completed init with local channels
        # only used no network.
        if self.init_complete_line and self.local_channels:
            return False
        return None

    def _single_node_line(self) -> str:
        return self.nodes_line or self.comm_line or self.init_complete_line


# Networks that are not the fabric: a rank that chose one is ``none`` for no node-local
# communicator (``_Rank.communicator``).
_NOT_THE_FABRIC = frozenset({Verdict.SOCKET, Verdict.OTHER})


def classify_network(signature: FabricSignature, network: str, provider: str | None) -> Verdict:
    """What NCCL's network ``network`` is for ``signature``, given the OFI plugin's provider."""
    if network.casefold() == _SOCKET:
        return Verdict.SOCKET
    if signature.is_fabric_network(network):
        return Verdict.FABRIC
    if _OFI_NETWORK.fullmatch(network) and signature.providers:
        if provider is None:
            return Verdict.UNKNOWN  # "Using network Libfabric" alone does not prove EFA
        return Verdict.FABRIC if signature.is_fabric_provider(provider) else Verdict.OTHER
    return Verdict.OTHER


# --- Encodings ------------------------------------------------------------------------------

# NCCL writes ASCII, but a log saved on Windows is often UTF-16: PowerShell 5's ">" and
# Out-File write UTF-16LE with a byte-order mark, and Notepad's "Unicode" does too. In UTF-16
# the scanner's keywords have a NUL between their letters and nothing would match, so the
# verdict would be unknown. The first bytes of each log tell: a byte-order mark, or NULs
# between ASCII bytes (no UTF-8 text holds a NUL).
_SNIFF_BYTES = 4


def wide_decoder(head: bytes) -> codecs.IncrementalDecoder | None:
    """A decoder for a log whose first bytes are ``head`` (at least ``_SNIFF_BYTES`` of them,
    or all the log has) when it is UTF-16; None when it is read as it is."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"  # the mark says which, and is dropped
    elif len(head) < _SNIFF_BYTES:
        return None
    elif head[1] == head[3] == 0 and head[0] and head[2]:
        encoding = "utf-16-le"
    elif head[0] == head[2] == 0 and head[1] and head[3]:
        encoding = "utf-16-be"  # or a little-endian log read from an odd byte: from a line's end
    else:
        return None
    return codecs.getincrementaldecoder(encoding)(errors="replace")


# Log shippers and exports wrap each line in a JSON record: Docker's json-file driver and
# Fluent Bit put it in "log", Vector, Datadog and CloudWatch Logs' exports in "message",
# Google Cloud Logging in "textPayload", Loki's logcli in "line", journald in "MESSAGE", and
# structured loggers often in "msg". The fields are tried in that order.
_RECORD_FIELDS = ("log", "message", "textPayload", "line", "MESSAGE", "msg")
_STRINGS = json.JSONDecoder(strict=False)
_RECORD_FIELD_START = re.compile(r'"(?:' + "|".join(_RECORD_FIELDS) + r')"\s*:\s*"')


def log_record_text(text: str) -> str | None:
    """The log text inside ``text`` when it is a JSON record of one (a prefix before the record,
    such as a timestamp, is allowed), else None. A record whose field holds another record
    (a CloudWatch export of Fluent Bit's records) is opened once more."""
    inner = _record_field(text)
    if inner is None:
        return None
    nested = _record_field(inner)
    return inner if nested is None else nested


def _record_field(text: str) -> str | None:
    stripped = text.rstrip()
    start = stripped.find('{"')
    if start < 0:
        return None
    if stripped.endswith("}"):
        try:
            record = json.loads(stripped[start:], strict=False)
        except (ValueError, RecursionError):  # not JSON (or cut on a "}"), or nested too deep
            record = None
        if isinstance(record, dict):
            return next((value for key in _RECORD_FIELDS if isinstance(value := record.get(key), str)), None)
    # A record cut at the kept prefix (MAX_LINE_BYTES: Fluent Bit's with the pod's labels and
    # annotations runs past it), whatever its last character: its first field of a log line,
    # when that string is whole.
    field = _RECORD_FIELD_START.search(stripped, start)
    if field is None:
        return None
    try:  # from the string's opening quote, the last character the field's pattern took
        value, _ = _STRINGS.raw_decode(stripped, field.end() - 1)
    except ValueError:  # the string itself was cut
        return None
    return value if isinstance(value, str) else None


# --- The scanner ---------------------------------------------------------------------------

# A rank is (log, host, pid, device): the log is which of the logs one scanner reads in turn
# (``next_log``). Two logs can repeat a rank's host, pid and device (one container's previous
# and current runs, whose new PID namespace gives the same pids; pods with hostNetwork sharing
# the node's name), and one log's ranks must not take the other's lines. A node is (log, host).
_RankKey = tuple[int, str, int | None, int | None]
_NodeKey = tuple[int, str]


class TransportScanner:
    """Feed it bytes as they come; ask it for the report at any time.

    >>> scanner = TransportScanner(signature_for("efa"))
    >>> scanner.feed(b"h:1:2 [0] NCCL INFO Using network Socket\\n")
    False
    >>> scanner.feed(b"h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 1")
    False
    >>> scanner.feed(b"\\n")
    True
    >>> scanner.report().verdict
    <Verdict.SOCKET: 'socket'>
    """

    def __init__(self, signature: FabricSignature, max_ranks: int = MAX_RANKS) -> None:
        """``max_ranks`` bounds the ranks tracked (and so the memory, ``memory_bound``): a
        reader with less room than ``MEMORY_BOUND_BYTES`` per read passes fewer."""
        self.signature = signature
        self.max_ranks = max(1, min(max_ranks, MAX_RANKS))
        self._partial = bytearray()  # the kept prefix of the line being read
        # The first bytes of the current log, until there are enough to tell its encoding
        # (``wide_decoder``), then None; and the decoder of a log in UTF-16.
        self._sniffed: bytearray | None = bytearray()
        self._wide: codecs.IncrementalDecoder | None = None
        self._cutting = False  # the current line outgrew MAX_LINE_BYTES: drop until its end
        self._log = 0  # which log the lines come from (next_log)
        self._processes: dict[tuple[int, str, int | None], _Process] = {}
        self._ranks: dict[_RankKey, _Rank] = {}
        self._nccl_version: str | None = None
        self._plugin_version: str | None = None
        self._ranks_dropped = 0
        self._lines_cut = 0
        self._lines_read = 0
        # A reader may stop (``_settle``). Per node: its ranks tracked, its ranks with a proven
        # verdict, and the most ranks it announced.
        self.decisive = False
        self._seen_on: dict[_NodeKey, int] = {}
        self._proven_on: dict[_NodeKey, int] = {}
        self._announced_on: dict[_NodeKey, int] = {}
        # Per log: the hosts its tracked ranks' prefixes name, and the largest nNodes it printed
        # (a log of several hosts settles only once that many announced their ranks).
        self._hosts_of_log: dict[int, set[str]] = {}
        self._nodes_of_log: dict[int, int] = {}

    # Bytes to lines ---------------------------------------------------------------------

    def feed(self, chunk: bytes) -> bool:
        """Read ``chunk``; True once the job's verdict is settled (``decisive``)."""
        if self._sniffed is not None:
            if self._sniffed or len(chunk) < _SNIFF_BYTES:
                self._sniffed += chunk
                if len(self._sniffed) < _SNIFF_BYTES:
                    return self.decisive
                chunk = bytes(self._sniffed)
            self._sniffed = None
            self._wide = wide_decoder(chunk[:_SNIFF_BYTES])
        if self._wide is None:
            return self._feed_text(chunk)
        # A slice at a time, so the UTF-8 copy in hand stays as small as one kept line.
        for start in range(0, len(chunk), MAX_LINE_BYTES):
            self._feed_text(self._wide.decode(chunk[start : start + MAX_LINE_BYTES]).encode("utf-8", errors="replace"))
        return self.decisive

    def _feed_text(self, chunk: bytes) -> bool:
        """Read ``chunk`` of text in UTF-8 (or any ASCII-compatible encoding)."""
        view = memoryview(chunk)
        position, size = 0, len(chunk)
        while position < size:
            found = _LINE_BREAK.search(chunk, position)
            end = found.start() if found else size
            if self._partial or self._cutting or found is None:
                self._keep(view[position:end])
                if found is None:
                    break
                self._end_line()
                position = end + 1
                continue
            # Whole lines inside this chunk: find the interesting ones at C speed and skip the rest.
            last = chunk.rfind(b"\n", position)
            last_cr = chunk.rfind(b"\r", position)
            block_end = max(last, last_cr)
            self._scan_block(chunk, position, block_end)
            position = block_end + 1
        return self.decisive

    def _keep(self, piece: memoryview) -> None:
        if self._cutting:
            return
        room = MAX_LINE_BYTES - len(self._partial)
        if len(piece) > room:
            self._partial += piece[:room]
            self._cutting = True
            self._lines_cut += 1
        else:
            self._partial += piece

    def _end_line(self) -> None:
        line = bytes(self._partial)
        self._partial.clear()
        self._cutting = False
        if _INTERESTING.search(line):
            self._read_line(line)

    def _scan_block(self, chunk: bytes, position: int, end: int) -> None:
        """The complete lines of ``chunk[position:end]``; only those with a keyword are read."""
        while True:
            hit = _INTERESTING.search(chunk, position, end)
            if hit is None:
                return
            # ``position`` is a line's start, so looking back no further than it keeps the
            # whole block's work linear: each byte is searched once.
            before = hit.start()
            line_start = (
                max(chunk.rfind(b"\n", position, before), chunk.rfind(b"\r", position, before), position - 1) + 1
            )
            found = _LINE_BREAK.search(chunk, hit.end(), end)
            line_end = found.start() if found else end
            if line_end - line_start > MAX_LINE_BYTES:
                self._lines_cut += 1
                # The rules read a line's beginning; a keyword far into an overlong line is
                # beyond the kept prefix, as it would be in a streamed read.
                if hit.start() - line_start < MAX_LINE_BYTES:
                    self._read_line(chunk[line_start : line_start + MAX_LINE_BYTES])
            else:
                self._read_line(chunk[line_start:line_end])
            position = line_end + 1
            if position >= end:
                return

    def flush(self) -> None:
        """End the line being read, as the end of a file or stream does."""
        if self._sniffed is not None:  # fewer bytes than a sniff takes: they are what they are
            head, self._sniffed = bytes(self._sniffed), None
            self._feed_text(head)
        if self._wide is not None:
            self._feed_text(self._wide.decode(b"", final=True).encode("utf-8", errors="replace"))
        if self._partial:
            self._end_line()

    def next_log(self) -> None:
        """The lines that follow come from another log (the next ``-f`` file): its ranks are
        not the earlier logs' ranks, even with the same host, pid and device. Ends the line
        being read, as the end of a file does."""
        self.flush()
        self._log += 1
        self._sniffed, self._wide = bytearray(), None

    def finish(self, end_of_stream: bool = True) -> TransportReport:
        """The report. At the end of the stream (``end_of_stream``) a last line without a newline
        counts; a read cut short (at a byte limit, or stopped early) ended inside a line whose
        rest it never saw, so that line is dropped: "Using network AWS Lib" is no network."""
        if end_of_stream:
            self.flush()
        else:
            self._partial.clear()
            self._cutting = False
            self._sniffed = None  # a few bytes of a cut read's start, or of a cut UTF-16 character
            self._wide = None
        return self.report()

    @property
    def lines_read(self) -> int:
        """The lines read as NCCL's so far (``TransportReport.lines_read`` at the end)."""
        return self._lines_read

    # Lines to facts ---------------------------------------------------------------------

    def _read_line(self, raw: bytes) -> None:
        if b"\x1b" in raw or b"\\u001" in raw:  # colours inside the words the rules read
            raw = _ESCAPES_BYTES.sub(b"", raw)
        if not _RULE_WORDS.search(raw):
            return
        self._lines_read += 1
        text = raw.decode("utf-8", errors="replace")
        if '{"' in text and (inner := log_record_text(text)) is not None:  # the test first: NCCL's lines hold none
            for part in inner.splitlines():  # as long as the line at most
                self._read_text(readable_text(part))
        else:
            self._read_text(readable_text(text))

    def _read_text(self, text: str) -> None:
        """One line of NCCL's log, decoded and clean."""
        key: _RankKey = (self._log, "", None, None)  # facts no prefix attributes
        marker = last_marker(text)
        head = _HEAD.search(text, max(0, marker.start() - _HEAD_REACH), marker.start()) if marker else None
        if marker is not None and head is not None:
            key = (self._log, head["host"], int(head["pid"]), int(marker["dev"]))
            message, line = text[marker.end() :], text[head.start() :]
        elif unprefixed := _UNPREFIXED.search(text):
            message, line = _unprefixed_message(text, unprefixed), text
        else:
            return
        message = _bare(message)
        if self._nccl_version is None and "version" in message and (version := _NCCL_VERSION.search(message)):
            self._nccl_version = version["version"]
        if self._plugin_version is None and "aws-ofi" in message and (version := _PLUGIN_VERSION.search(message)):
            self._plugin_version = version["version"]
        self._apply(key, message, line.strip()[:EVIDENCE_CHARS])  # already clean

    def _rank(self, key: _RankKey) -> _Rank | None:
        rank = self._ranks.get(key)
        if rank is None:
            if len(self._ranks) >= self.max_ranks:
                self._ranks_dropped += 1
                return None
            log, host, pid, device = key
            process = self._processes.setdefault((log, host, pid), _Process())
            rank = self._ranks[key] = _Rank(host=host[:253], pid=pid, device=device, process=process)
            self._seen_on[key[:2]] = self._seen_on.get(key[:2], 0) + 1
            if pid is not None:  # a prefixed line: its host is one of the log's
                self._hosts_of_log.setdefault(log, set()).add(host)
        return rank

    def _apply(self, key: _RankKey, message: str, line: str) -> None:
        facts = self._facts(message)
        if not facts:
            return
        rank = self._rank(key)
        if rank is None:
            return
        for fact, value in facts:
            if fact == "network":
                rank.new_communicator()
                rank.network, rank.network_line = value, line
            elif fact == "via_net":
                rank.network, rank.via_net_line = value, line
            elif fact == "provider":
                rank.process.provider, rank.process.provider_line = value, line
                rank.process.failure_line = ""
            elif fact == "plugin_failed":
                rank.process.failure_line = line
            elif fact == "plugin_missing":
                rank.missing_plugin_line = rank.missing_plugin_line or line
            elif fact == "plugin_loaded":
                rank.missing_plugin_line = ""
            elif fact == "nodes":
                nodes = int(value)
                if rank.comm_nodes is None or nodes > rank.comm_nodes:
                    rank.comm_nodes, rank.nodes_line = nodes, line
                rank.max_nodes = nodes if rank.max_nodes is None else max(rank.max_nodes, nodes)
                self._nodes_of_log[key[0]] = max(self._nodes_of_log.get(key[0], 0), nodes)
            elif fact == "rank" and rank.rank is None:  # the first communicator is the world
                rank.rank = int(value)
            elif fact == "comm_ranks":
                size = int(value)
                if rank.max_comm_ranks is None or size > rank.max_comm_ranks:
                    rank.max_comm_ranks, rank.comm_line = size, line
            elif fact == "local_channel":
                rank.local_channels = True
            elif fact == "init_complete":
                rank.init_complete_line = rank.init_complete_line or line
            elif fact == "local_ranks":
                self._announce(key[:2], int(value))
        verdict, evidence, proven = rank.communicator(self.signature)
        if proven and (rank.worst is None or _rank_of(verdict) < _rank_of(rank.worst[0])):
            if rank.worst is None:  # the rank's first proven verdict: it counts on its node
                node: _NodeKey = key[:2]
                self._proven_on[node] = self._proven_on.get(node, 0) + 1
            rank.worst = (verdict, evidence)
            self._settle(socket=verdict is Verdict.SOCKET)

    def _announce(self, node: _NodeKey, local_ranks: int) -> None:
        """A communicator of a tracked rank of ``node`` has ``local_ranks`` ranks on it."""
        if local_ranks > self._announced_on.get(node, 0):
            self._announced_on[node] = local_ranks
            self._settle()

    def _settle(self, socket: bool = False) -> None:
        """Whether a reader may stop (``decisive``), after a rank proved a verdict (``socket``:
        it proved socket) or a node announced more ranks: the one rule by which every reader
        (the operator, a live explain, ``scan``) may stop before the log's end.

        A rank's worst only gets worse and ``socket`` comes first in the job's order, so one
        proven socket settles the job for good. ``other`` or ``fabric`` settle it once every
        rank the log announces has proved a verdict: until then a later rank of the same node
        could still show sockets. NCCL >= 2.20 announces a node's ranks (``localRanks``), and a
        pod's log is one node, so the count is per host (of each log). A log whose prefixes have
        named two hosts or more (mpirun's output with the launcher a worker, a DeepSpeed or
        Ray driver's) holds more nodes than one: it settles only once as many of its hosts
        announced their ranks as the largest nNodes it printed, so a host whose lines come
        later is not cut off by the first one's; a host whose first line comes after the others
        settled is not read (docs/transport.md). Whatever a node announced, every rank the log
        has shown of it must have proved: a node's count comes from the communicators printed so
        far, and the first can be smaller than the node (a pair across nodes: ``localRanks 1``).
        A rank that never proves holds its node back for good (a process that died before its
        communicator came up, under a restart in the same container): the log is then read to
        its byte limit at every step, a cost, not a wrong verdict. Before 2.20 a node's interior
        ranks never prove (rule 7 makes them none), and the seen ranks do not count.
        Every node with a proven rank must have
        announced its ranks: a 2.20 log without them (``NCCL_DEBUG_SUBSYS=NET``: the
        communicator lines are INIT's) could have a rank on sockets still to come. Only a log
        that says it is older than 2.20, when nothing announced the ranks, is settled by its
        first proven rank; a log without its version (NCCL prints it in rank 0's process only)
        is not.

        Past that, a proven rank's later communicator can still fall back to sockets (``_Rank``),
        and nothing in NCCL's log says a process opens no more: the settle rule does not wait
        for it, as the reads stop once a verdict is found (SPEC), and docs/transport.md says
        what that leaves unread. The scanner itself reads on: lines fed after ``decisive`` still
        count, so a whole-log reader (``fabriccap transport``) sees them."""
        if self.decisive:
            return
        self.decisive = socket or (
            bool(self._proven_on)
            and (all(node in self._announced_on for node in self._proven_on) or self._before_rank_counts())
            and all(
                self._proven_on.get(node, 0) >= max(announced, self._seen_on.get(node, 0))
                for node, announced in self._announced_on.items()
            )
            and all(
                sum(1 for announced_log, _ in self._announced_on if announced_log == log) >= nodes
                for log, nodes in self._nodes_of_log.items()
                if len(self._hosts_of_log.get(log, ())) > 1
            )
        )

    def _before_rank_counts(self) -> bool:
        """The log says its NCCL is older than 2.20, which announced no node's ranks."""
        version = self._nccl_version
        if version is None:
            return False
        major, minor = (int(part) for part in version.split(".")[:2])
        return (major, minor) < (2, 20)

    @staticmethod
    def _facts(message: str) -> list[tuple[str, str]]:
        # A substring test first: most NCCL lines match none of the rules, and "in" is cheaper
        # than a regular expression.
        facts: list[tuple[str, str]] = []
        if ("etwork" in message or "NET plugin" in message) and (network := _USING_NETWORK.match(message)):
            facts.append(("network", network["name"] or network["assigned"]))
        if "via " in message:
            if via := _VIA_NET.search(message):
                facts.append(("via_net", via["name"]))
            elif _LOCAL_CHANNEL.search(message):
                facts.append(("local_channel", ""))
        if "NET/" in message or "NET plugin" in message:
            if provider := _PROVIDER.search(message):
                facts.append(("provider", provider["provider"]))
            if _PLUGIN_INIT_FAILED.search(message):
                facts.append(("plugin_failed", ""))
            elif _PLUGIN_MISSING.search(message):
                facts.append(("plugin_missing", ""))
            elif _PLUGIN_LOADED.search(message):
                facts.append(("plugin_loaded", ""))
        elif (
            "libnccl-net" in message or "internal net plugin" in message or "network plugin" in message
        ) and _PLUGIN_MISSING.search(message):
            facts.append(("plugin_missing", ""))
        if "anks " in message:
            if nodes := _NODES.search(message):
                facts.append(("nodes", nodes["nodes"]))
            if ranks := _RANKS.search(message):
                facts.append(("rank", ranks["rank"]))
                facts.append(("comm_ranks", ranks["nranks"]))
            if _INIT_COMPLETE.search(message):
                facts.append(("init_complete", ""))
            if local := _LOCAL_RANKS.search(message):
                facts.append(("local_ranks", local["local"]))
        return facts

    # Facts to verdicts ------------------------------------------------------------------

    def report(self) -> TransportReport:
        ranks = tuple(
            RankVerdict(
                rank.host,
                rank.pid,
                rank.device,
                rank.rank,
                *rank.verdict(self.signature),
                could_fall_back=rank.could_fall_back(self.signature),
            )
            for rank in self._ranks.values()
        )
        verdict, evidence = job_verdict(ranks, self._ranks_dropped)
        return TransportReport(
            fabric=self.signature.name,
            verdict=verdict,
            evidence=evidence,
            ranks=ranks,
            nccl_version=self._nccl_version,
            plugin_version=self._plugin_version,
            decisive=self.decisive,
            ranks_dropped=self._ranks_dropped,
            lines_cut=self._lines_cut,
            lines_read=self._lines_read,
        )


def network_of_line(line: str) -> str | None:
    """The network a line of NCCL's names (rules 1, 2, 2b: chosen; 3: a channel through it),
    else None: what a rank's evidence says when it is a network line."""
    if marker := last_marker(line):
        message = line[marker.end() :]
    elif unprefixed := _UNPREFIXED.search(line):
        message = _unprefixed_message(line, unprefixed)
    else:
        message = line
    if chosen := _USING_NETWORK.match(_bare(message)):
        return chosen["name"] or chosen["assigned"]
    via = _VIA_NET.search(message)
    return None if via is None else via["name"]


def provider_of_line(line: str) -> str | None:
    """The libfabric provider a line of the OFI plugin's names (rule 4), else None."""
    found = _PROVIDER.search(line)
    return None if found is None else found["provider"]


def _rank_of(verdict: Verdict) -> int:
    """Where ``verdict`` stands in the job's order: lower is worse (socket first)."""
    return JOB_VERDICT_ORDER.index(verdict) if verdict in JOB_VERDICT_ORDER else len(JOB_VERDICT_ORDER)


def job_verdict(ranks: Iterable[RankVerdict], ranks_dropped: int = 0) -> tuple[Verdict, str]:
    """SPEC: the first of socket, other, fabric, none that any rank shows, else unknown (with the
    first evidence any rank has, such as a plugin that failed to load).

    Fail closed, as ``combine`` does for a pod's containers: with lines of ranks past the bound
    left unread (``ranks_dropped``), ``fabric`` and ``none`` are not proven, since such a rank
    could have fallen back to sockets; the job is ``unknown``, and its evidence says so. A rank
    that could fall back (``RankVerdict.could_fall_back``: so far on one node over sockets, say)
    keeps them from the job too, with its network line as the evidence: in a pod whose plugin
    failed in one process only, the others' ``none`` would otherwise pass it."""
    ranks = tuple(ranks)
    for verdict in JOB_VERDICT_ORDER:
        for entry in ranks:
            if entry.verdict is verdict:
                if verdict in UNPROVEN_WITHOUT_EVERY_RANK:
                    if ranks_dropped:
                        return Verdict.UNKNOWN, ranks_not_read(len(ranks), ranks_dropped)
                    if held := next((other for other in ranks if other.could_fall_back), None):
                        return Verdict.UNKNOWN, held.evidence
                return verdict, entry.evidence
    shown = sorted(ranks, key=lambda entry: not entry.could_fall_back)  # its network line first
    return Verdict.UNKNOWN, next((entry.evidence for entry in shown if entry.evidence), "")


def ranks_not_read(tracked: int, lines_dropped: int) -> str:
    """The evidence of a job left ``unknown`` by ranks past the bound. The lines are counted, not
    the ranks: counting distinct ranks would take memory that grows with the input."""
    return (
        f"{lines_dropped} NCCL lines of ranks past the first {tracked} were not read"
        f" (fabriccap's bound); one of those ranks could use sockets"
    )[:EVIDENCE_CHARS]


def scan(chunks: Iterable[bytes], signature: FabricSignature, stop_when_decisive: bool = False) -> TransportReport:
    """Read ``chunks`` through one scanner; with ``stop_when_decisive``, stop at the first
    chunk after which the job's verdict is settled (``TransportScanner.decisive``),
    dropping the line that chunk ended in."""
    scanner = TransportScanner(signature)
    for chunk in chunks:
        if scanner.feed(chunk) and stop_when_decisive:
            return scanner.finish(end_of_stream=False)
    return scanner.finish()
