"""``fabriccap transport``: what NCCL chose for its network, read from logs offline.

The same parser as the operator's (fabriccap.core.transport) reads files or standard input in
chunks, so a log of any size takes the parser's bounded memory; a size limit (raised with
``--max-input-size``) bounds the time. Files are read as every command reads them
(fabriccap.inputfile): directories, devices and sockets refused before a byte is read, a FIFO
(``-f <(kubectl logs job/x)``) read while its writer writes, standard input (``-``) as
``kubectl logs job/x | fabriccap transport -f -`` sends it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import BinaryIO

from fabriccap.core.text import escape_controls
from fabriccap.core.transport import (
    FabricSignature,
    TransportReport,
    TransportScanner,
    Verdict,
    classify_network,
    network_of_line,
    readable_text,
    signature_for,
    wide_decoder,
)
from fabriccap.inputfile import InputFileError, bounded_line, input_chunks, shown_path
from fabriccap.offline.render import align

# A day of a chatty trainer's log; NCCL's choice is in its first seconds.
DEFAULT_MAX_LOG_BYTES = 1024 * 1024 * 1024
TRANSPORT_OUTPUTS: tuple[str, ...] = ("table", "json")
# The verdicts a job passes with: it used the fabric, or no network at all.
PASSING: frozenset[Verdict] = frozenset({Verdict.FABRIC, Verdict.NONE})
HOW_TO_LOG = "run the job with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET"


class LogInputError(ValueError):
    """Unusable input; the message names the file and the problem."""


# How the too-large message ends: the flag that raises the limit.
RAISE_THE_LIMIT = " (raise it with --max-input-size)"


def read_logs(
    paths: Sequence[str], signature: FabricSignature, stdin: BinaryIO, limit: int = DEFAULT_MAX_LOG_BYTES
) -> TransportReport:
    """One report over every log: the files' ranks together make the job, each file's ranks its
    own (two files may repeat a host, pid and device: a container's previous and current
    runs). Each file is read
    by the one reader every command uses (fabriccap.inputfile: what is refused, FIFOs and their
    writers, the size limit), chunk by chunk into the parser. Raises LogInputError."""
    scanner = TransportScanner(signature)
    for path in paths:
        lines_before = scanner.lines_read
        # The first SNIFF_BYTES past the NULs the file begins with, held until sniffed: a log
        # truncated by logrotate's copytruncate under a writer that does not append begins with
        # a hole of NULs, and is a text log (review 64e F5). A hole is fed on as it comes.
        head: bytearray | None = bytearray()
        binary = False
        try:
            for chunk in input_chunks(path, limit, stdin, hint=RAISE_THE_LIMIT):
                if head is None:
                    scanner.feed(chunk)
                    continue
                head += chunk
                text_at = len(head) - len(head.lstrip(b"\x00"))
                if text_at == len(head):  # a hole so far
                    scanner.feed(bytes(head))
                    head.clear()
                elif len(head) - text_at >= SNIFF_BYTES:
                    binary = _sniff(bytes(head[text_at : text_at + SNIFF_BYTES]), path)
                    scanner.feed(bytes(head))
                    head = None
            if head:
                binary = _sniff(bytes(head.lstrip(b"\x00")), path)
                scanner.feed(bytes(head))
        except InputFileError as error:
            raise LogInputError(bounded_line(str(error))) from None
        scanner.next_log()  # a last line without a newline ends with its file
        # Binary-looking first bytes are only a guess (a progress bar drawn with backspaces, a
        # corrupted or rotated head): a file is refused as binary only when nothing in it read
        # as NCCL's, else its verdict stands (review 64c F8). Judged per file: a core dump
        # beside one node's good log was read as nothing, and the job's verdict never said so
        # (review 64e F5).
        if binary and scanner.lines_read == lines_before:
            raise LogInputError(bounded_line(f"{_shown_source(path)}: binary data, not a text log"))
    return scanner.finish()


# What a log is judged by before it is read: its first bytes.
SNIFF_BYTES = 64 * 1024
# A compressed log (``kubectl logs`` saved and gzip'd, a CloudWatch or S3 export) read as text
# holds no NCCL line, and "unknown" would send the user to re-run a job that logged all it
# should: its first bytes say what it is, and which command reads it.
COMPRESSED = (
    (b"\x1f\x8b", "gzip-compressed", "zcat"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "zstdcat"),
    (b"\xfd7zXZ\x00", "xz-compressed", "xzcat"),
    (b"BZh", "bzip2-compressed", "bzcat"),
    (b"\x04\x22\x4d\x18", "lz4-compressed", "lz4cat"),
    (b"PK\x03\x04", "zip archive", "unzip -p"),
)
# Past this share of bytes that no text log holds (NUL, invalid UTF-8, control characters no
# terminal output writes), the first bytes look like binary data: random bytes are about half
# such bytes, a Latin-1 log's accented letters about a fifth. Backspace, bell, form and line
# feeds, escape and DEL are text (progress bars, colours, a pager's page breaks).
MAX_BINARY_SHARE = 0.4
_NOT_TEXT = bytes(code for code in range(32) if code not in b"\t\n\v\f\r\b\x07\x1b")


def _shown_source(path: str) -> str:
    return "<stdin>" if path == "-" else shown_path(path)


def _sniff(head: bytes, path: str) -> bool:
    """LogInputError when ``head``, a file's first bytes, is a compressed file (exact: its magic
    number); whether it looks like binary data, which ``read_logs`` refuses only if nothing in
    the file read as NCCL's."""
    source = _shown_source(path)
    for magic, what, reader in COMPRESSED:
        if head.startswith(magic):
            shown = "FILE" if path == "-" else shlex.quote(source)
            raise LogInputError(
                bounded_line(
                    f"{source}: a {what} file, not a log; decompress it ({reader} {shown} | fabriccap transport -f -)"
                )
            )
    if not head or wide_decoder(head) is not None:
        return False  # nothing but a hole, or UTF-16: read as such
    invalid = len(head) - len(head.decode("utf-8", errors="ignore").encode())
    strange = invalid + sum(head.count(code) for code in _NOT_TEXT)
    return strange / len(head) > MAX_BINARY_SHARE


def passes(report: TransportReport) -> bool:
    return report.verdict in PASSING


def _cell(value: object) -> str:
    """A value as the table shows it; a header line's control characters are shown escaped, as
    ``align`` shows the rows'."""
    return "-" if value is None else escape_controls(readable_text(str(value)))


def format_table(report: TransportReport) -> str:
    lines = [
        f"FABRIC:   {report.fabric}",
        f"VERDICT:  {report.verdict.value}",
        f"EVIDENCE: {_cell(report.evidence or None)}",
    ]
    if report.nccl_version or report.plugin_version:
        lines.append(f"VERSIONS: NCCL {_cell(report.nccl_version)}, aws-ofi-nccl {_cell(report.plugin_version)}")
    if report.ranks:
        header = ["HOST", "RANK", "PID", "DEVICE", "VERDICT", "EVIDENCE"]
        rows = [
            [_cell(rank.host or None), _cell(rank.rank), _cell(rank.pid), _cell(rank.device), rank.verdict.value,
             _cell(rank.evidence or None)]
            for rank in report.ranks
        ]  # fmt: skip
        lines += ["", align([header, *rows])]
    if report.verdict is Verdict.UNKNOWN and not report.ranks_dropped:  # the note says which then
        lines += ["", why_unknown(report)]
    if report.ranks_dropped:
        lines.append(f"note: {report.ranks_dropped} lines of ranks past the first {len(report.ranks)} were not read")
    if report.lines_cut:
        lines.append(f"note: {report.lines_cut} overlong lines were read by their first bytes only")
    return "\n".join(lines)


def why_unknown(report: TransportReport) -> str:
    """What the lines of an ``unknown`` report lack, by the network its ranks' evidence names."""
    network = next(
        (name for rank in report.ranks if rank.verdict is Verdict.UNKNOWN and (name := network_of_line(rank.evidence))),
        None,
    )
    if network is None:
        return f"No line proves NCCL's network; {HOW_TO_LOG}."
    shown = readable_text(network)
    if classify_network(signature_for(report.fabric), network, None) is Verdict.UNKNOWN:
        return f"NCCL chose {shown}, the OFI plugin, but no line names its libfabric provider; {HOW_TO_LOG}."
    return (
        f"NCCL chose {shown}, but every communicator read stays on one node: a job of one node, or one"
        " whose communicator across nodes comes later or past what was read."
    )


def format_transport_output(report: TransportReport, output: str) -> str:
    if output == "json":
        return json.dumps(report.as_dict(), indent=2, ensure_ascii=True)
    return format_table(report)
