"""Running what may hang or eat memory, bounded: for the tests of hostile input, written
against a defect that made the command hang (a FIFO without a writer, YAML aliases) or read
until memory ran out (``--config /dev/zero``). Without its fix such a test must fail, not stop
the suite or the machine; with it the bounds are never reached."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import FrameType

# The address space a command under test may take: far more than any bounded run needs, far
# less than the machine has.
ADDRESS_SPACE_BYTES = 2 * 1024 * 1024 * 1024


class HangError(AssertionError):
    """The code under test did not return within the bound: it hangs (or nearly so)."""


@contextlib.contextmanager
def hang_guard(seconds: float) -> Iterator[None]:
    """Interrupt the code in the ``with`` block (pure Python: it is) after ``seconds``."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise HangError(f"still running after {seconds}s")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass(frozen=True)
class Finished:
    code: int
    out: str
    err: str
    peak_rss_bytes: int


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def run_fabriccap(argv: Sequence[str], *, stdin: int | None = None, timeout: float = 60.0) -> Finished:
    """``python -m fabriccap ARGV`` in a child with a capped address space, killed after
    ``timeout`` (then HangError); its peak resident memory comes from the kernel (wait4)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "fabriccap", *argv],
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_limit_memory,
    )
    # The child is reaped here with wait4, for its rusage (Popen.wait would take it first), and
    # its output read by two threads meanwhile, so a full pipe cannot block it.
    outputs: dict[str, bytes] = {}
    readers = [
        threading.Thread(target=lambda name=name, pipe=pipe: outputs.__setitem__(name, pipe.read()))
        for name, pipe in (("out", process.stdout), ("err", process.stderr))
    ]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout
    hung = False
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if not hung and time.monotonic() > deadline:
            hung = True
            os.kill(process.pid, signal.SIGKILL)
        time.sleep(0.01)
    process.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join()
    if hung:
        raise HangError(f"fabriccap {' '.join(argv)[:200]} still running after {timeout}s")
    return Finished(
        process.returncode,
        outputs["out"].decode(errors="replace"),
        outputs["err"].decode(errors="replace"),
        usage.ru_maxrss * 1024,
    )
