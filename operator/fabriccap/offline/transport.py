"""``fabriccap transport``: what NCCL chose for its network, read from logs offline.

The same parser as the operator's (fabriccap.core.transport) reads files or standard input in
chunks, so a log of any size takes the parser's bounded memory; a size limit (raised with
``--max-input-size``) bounds the time. Files that are not regular files are refused before a
byte is read, except standard input (``-``), which is how ``kubectl logs job/x | fabriccap
transport -f -`` reaches it.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from fabriccap.core.transport import (
    FabricSignature,
    TransportReport,
    TransportScanner,
    Verdict,
    readable_text,
)
from fabriccap.offline.render import align

# A day of a chatty trainer's log; NCCL's choice is in its first seconds.
DEFAULT_MAX_LOG_BYTES = 1024 * 1024 * 1024
TRANSPORT_OUTPUTS: tuple[str, ...] = ("table", "json")
_CHUNK = 1024 * 1024
# The verdicts a job passes with: it used the fabric, or no network at all.
PASSING: frozenset[Verdict] = frozenset({Verdict.FABRIC, Verdict.NONE})
HOW_TO_LOG = "run the job with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET"


class LogInputError(ValueError):
    """Unusable input; the message names the file and the problem."""


def _shown(path: str) -> str:
    # A file name is the user's, but it still reaches a terminal.
    return readable_text(path) or repr(path)


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"


def _too_large(source: str, limit: int) -> LogInputError:
    return LogInputError(f"{source}: larger than the input limit of {_size(limit)} (raise it with --max-input-size)")


def _bounded(stream: BinaryIO, source: str, limit: int) -> Iterator[bytes]:
    total = 0
    while chunk := stream.read(_CHUNK):
        total += len(chunk)
        if total > limit:
            raise _too_large(source, limit)
        yield chunk


def _file_chunks(path: str, limit: int) -> Iterator[bytes]:
    source = _shown(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise LogInputError(f"{source}: no such file") from None
    except OSError as error:
        raise LogInputError(f"{source}: cannot read: {error.strerror or error}") from None
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        raise LogInputError(f"{source}: is a directory")
    if not stat.S_ISREG(mode):
        # A FIFO may never get a writer, a device never ends: only a pipe on stdin is read.
        kind = (
            "FIFO"
            if stat.S_ISFIFO(mode)
            else "character device"
            if stat.S_ISCHR(mode)
            else "block device"
            if stat.S_ISBLK(mode)
            else "socket"
            if stat.S_ISSOCK(mode)
            else "special file"
        )
        raise LogInputError(f"{source}: is a {kind}, not a file; pass a file, or pipe the log to -f -")
    if info.st_size > limit:
        raise _too_large(source, limit)
    try:
        with open(path, "rb") as handle:
            yield from _bounded(handle, source, limit)  # the file may have grown since stat
    except OSError as error:
        raise LogInputError(f"{source}: cannot read: {error.strerror or error}") from None


def read_logs(
    paths: Sequence[str], signature: FabricSignature, stdin: BinaryIO, limit: int = DEFAULT_MAX_LOG_BYTES
) -> TransportReport:
    """One report over every log: the files' ranks together make the job. Raises LogInputError."""
    scanner = TransportScanner(signature)
    for path in paths:
        chunks = _bounded(stdin, "<stdin>", limit) if path == "-" else _file_chunks(path, limit)
        try:
            for chunk in chunks:
                scanner.feed(chunk)
        except OSError as error:
            raise LogInputError(f"{_shown(path)}: cannot read: {error.strerror or error}") from None
        scanner.flush()  # a last line without a newline ends with its file
    return scanner.finish()


def passes(report: TransportReport) -> bool:
    return report.verdict in PASSING


def _cell(value: object) -> str:
    return "-" if value is None else readable_text(str(value))


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
    if report.verdict is Verdict.UNKNOWN:
        lines += ["", f"No line proves NCCL's network; {HOW_TO_LOG}."]
    if report.ranks_dropped:
        lines.append(f"note: {report.ranks_dropped} lines of ranks past the first {len(report.ranks)} were not read")
    if report.lines_cut:
        lines.append(f"note: {report.lines_cut} overlong lines were read by their first bytes only")
    return "\n".join(lines)


def format_transport_output(report: TransportReport, output: str) -> str:
    if output == "json":
        return json.dumps(report.as_dict(), indent=2, ensure_ascii=True)
    return format_table(report)
