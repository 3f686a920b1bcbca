"""Reading a file a user names (``--config``, every ``-f``), refusing what is not one; and
bounding what an error echoes back (``shown_path``, ``bounded_line``).

One reader for every command, so each refuses the same things the same way, before a byte is
read and with one line naming the file:

- a directory, a character or block device (``/dev/zero``, ``/dev/urandom``, a tape: opening one
  may act on it), a socket: refused by ``stat`` before ``open``;
- a FIFO (``<(kubectl get …)``, ``mkfifo``) is opened non-blocking, so one that never gets a
  writer cannot hang the command, and read while its writer writes; a writer that goes silent
  for ``PIPE_IDLE_SECONDS`` is given up on;
- whatever is read stops at a size limit: a regular file is refused by its size before it is
  opened, and every read is capped (a file can grow after ``stat``; ``/proc`` files say size 0).

Standard input (``-``) is read as it is, a terminal included, but capped the same way.
"""

from __future__ import annotations

import os
import select
import stat
import sys
import time
from collections.abc import Iterator
from typing import IO

# A pipe that sends nothing for this long is given up on (its writer hangs).
PIPE_IDLE_SECONDS = 60.0
# How long a FIFO is given to get a writer: ``<(command)`` opens its end as the reader does.
NO_WRITER_GRACE_SECONDS = 1.0
CHUNK_BYTES = 1024 * 1024
# How a failed read begins its problem (a caller saying "cannot read config" drops it).
CANNOT_READ = "cannot read: "
# A path echoed in an error is cut to this many characters, and a whole error line to that.
MAX_SHOWN_PATH = 240
MAX_ERROR_LINE = 1000
ELIDED = " [...] "
# What a refusal of a directory or a device adds, where standard input is an input.
NOT_A_FILE_HINT = "; pass a file, a pipe, or - for standard input"


class InputFileError(ValueError):
    """A file that cannot be input; the message names it and the problem, in one line."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


def shown_path(path: str) -> str:
    """A path as an error shows it: bounded, every character printable and encodable (a
    name with a newline, an escape sequence or undecodable bytes is shown escaped)."""
    # Printable text holds no surrogate (undecodable bytes of a file name); unicode_escape
    # spells every other character, so the result always encodes.
    shown = path if path.isprintable() else path.encode("unicode_escape").decode("ascii")
    return shown if len(shown) <= MAX_SHOWN_PATH else f"{shown[: MAX_SHOWN_PATH - 3]}..."


def bounded_line(message: str, limit: int = MAX_ERROR_LINE) -> str:
    """An error line of at most ``limit`` characters. An argument or a value echoed whole (a
    100,000-character name) is cut in the middle, so the line keeps its start (what failed)
    and its end (the hint on what to do)."""
    if len(message) <= limit:
        return message
    keep = limit - len(ELIDED)
    return f"{message[: keep - keep // 4]}{ELIDED}{message[len(message) - keep // 4 :]}"


def size_text(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"


def too_large(source: str, limit: int, hint: str) -> InputFileError:
    return InputFileError(source, f"larger than the input limit of {size_text(limit)}{hint}")


def _kind(mode: int) -> str | None:
    """What a file is when it is not something to read input from; None when it is one."""
    if stat.S_ISREG(mode) or stat.S_ISFIFO(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _capped(chunks: Iterator[bytes], source: str, limit: int, hint: str) -> Iterator[bytes]:
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise too_large(source, limit, hint)
        yield chunk


def _stream_chunks(stream: IO[bytes] | IO[str]) -> Iterator[bytes]:
    # Standard input as bytes; a text stream (a test's StringIO) is encoded as it is read.
    binary = getattr(stream, "buffer", stream)
    while chunk := binary.read(CHUNK_BYTES):
        yield chunk if isinstance(chunk, bytes) else chunk.encode("utf-8", "surrogatepass")


def _descriptor_chunks(descriptor: int) -> Iterator[bytes]:
    while chunk := os.read(descriptor, CHUNK_BYTES):
        yield chunk


def _pipe_chunks(descriptor: int, source: str) -> Iterator[bytes]:
    """A FIFO opened non-blocking, to its end. With no writer at all a read returns
    end-of-file at once; with a writer that has not written yet it would block (EAGAIN here).
    A writer may still be opening the FIFO when we look, so an end-of-file before any data is
    trusted only after a short grace, and then said to be what it is."""
    opened = idle_since = time.monotonic()
    received = False
    while True:
        try:
            chunk = os.read(descriptor, CHUNK_BYTES)
        except BlockingIOError:  # a writer is there, nothing to read yet
            select.select([descriptor], [], [], 1.0)
            if time.monotonic() - idle_since > PIPE_IDLE_SECONDS:
                raise InputFileError(source, f"no data for {PIPE_IDLE_SECONDS:.0f}s; giving up on the pipe") from None
            continue
        if not chunk:
            if received:
                return
            if time.monotonic() - opened < NO_WRITER_GRACE_SECONDS:
                time.sleep(0.05)  # no writer yet: it may be opening the FIFO right now
                continue
            raise InputFileError(source, "empty input (a FIFO that nothing wrote to)")
        received = True
        idle_since = time.monotonic()
        yield chunk


def input_chunks(path: str, limit: int, stdin: IO[bytes] | IO[str] | None = None, *, hint: str = "") -> Iterator[bytes]:
    """The bytes of ``path`` (``-``: standard input) in chunks, at most ``limit`` in all.

    Raises InputFileError, before anything is read, for what is not a regular file or a FIFO
    and for a regular file over the limit; while reading, once the limit is passed or a read
    fails. ``hint`` ends the too-large message (how to raise the limit, where a flag does)."""
    if path == "-":
        yield from _capped(_stream_chunks(stdin or sys.stdin), "<stdin>", limit, hint)
        return
    source = shown_path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InputFileError(source, "no such file") from None
    except OSError as error:
        raise InputFileError(source, f"{CANNOT_READ}{error.strerror or error}") from None
    kind = _kind(info.st_mode)
    if kind is not None:
        raise InputFileError(source, f"is {kind}, not a file{NOT_A_FILE_HINT}")
    if stat.S_ISREG(info.st_mode) and info.st_size > limit:
        raise too_large(source, limit, hint)
    try:
        # Non-blocking: a FIFO (or whatever the path became since stat) cannot hang the open.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise InputFileError(source, f"{CANNOT_READ}{error.strerror or error}") from None
    try:
        mode = os.fstat(descriptor).st_mode
        kind = _kind(mode)
        if kind is not None:  # replaced between stat and open
            raise InputFileError(source, f"is {kind}, not a file{NOT_A_FILE_HINT}")
        chunks = _pipe_chunks(descriptor, source) if stat.S_ISFIFO(mode) else _descriptor_chunks(descriptor)
        yield from _capped(chunks, source, limit, hint)
    except OSError as error:
        raise InputFileError(source, f"{CANNOT_READ}{error.strerror or error}") from None
    finally:
        os.close(descriptor)


def read_input_file(path: str, limit: int, stdin: IO[bytes] | IO[str] | None = None, *, hint: str = "") -> bytearray:
    """The whole of ``path`` (``-``: standard input), at most ``limit`` bytes; see
    ``input_chunks`` for what is refused. Raises InputFileError.

    A bytearray, grown in place and decoded as it is: the content is held once, not once per
    chunk and again joined."""
    content = bytearray()
    for chunk in input_chunks(path, limit, stdin, hint=hint):
        content += chunk
    return content
