"""Processes the control plane starts, recorded so that any later process can stop them.

A record is a name, a PID and the kernel's start time of that PID: a PID alone may belong to
an unrelated process by the time ``down`` runs, and signalling it would be a bug on a shared
machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOG_TAIL_LINES = 40


class ProcessError(RuntimeError):
    """A recorded process could not be stopped."""


@dataclass(frozen=True)
class ProcessRecord:
    """Enough to signal a process later without hitting a recycled PID."""

    name: str
    pid: int
    start_time: str | None

    @classmethod
    def of(cls, name: str, pid: int) -> ProcessRecord:
        return cls(name=name, pid=pid, start_time=proc_start_time(pid))

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> ProcessRecord:
        return cls(str(entry["name"]), int(entry["pid"]), entry.get("start_time"))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "start_time": self.start_time}


def spawn(
    name: str, argv: Sequence[str], log_path: Path, *, cwd: Path, env: Mapping[str, str] | None = None
) -> tuple[ProcessRecord, subprocess.Popen[bytes]]:
    """Start ``argv`` detached from the terminal, its output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=None if env is None else dict(env),
            # Own session and process group: immune to the terminal's SIGHUP/Ctrl-C (the
            # CLI's `up` must outlive its shell), and stoppable as a group with killpg.
            start_new_session=True,
        )
    return ProcessRecord.of(name, process.pid), process


def proc_start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (field 22 of /proc/PID/stat); None off Linux or if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    return stat.rsplit(")", 1)[1].split()[19]


def _proc_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(record: ProcessRecord) -> bool:
    # If we are the parent, reap it: otherwise a dead child lingers as a zombie that looks
    # alive. Only when the start time matches, so we never steal a recycled PID's exit status.
    if record.start_time is not None and proc_start_time(record.pid) == record.start_time:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(record.pid, os.WNOHANG)
    if Path("/proc/self/stat").exists():
        state = _proc_state(record.pid)
        if state is None or state in ("Z", "X"):
            return False
        # A different start time means the PID was recycled by an unrelated process.
        return record.start_time is None or proc_start_time(record.pid) == record.start_time
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(record: ProcessRecord, signum: signal.Signals) -> None:
    # Each recorded process leads its own process group (start_new_session), so its PID is the
    # group id and killpg also reaches anything it forked.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(record.pid, signum)


def terminate(record: ProcessRecord, timeout: float, process: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM the process group, SIGKILL it after `timeout`, and wait until it is gone."""
    if not alive(record):
        return
    signal_group(record, signal.SIGTERM)
    if _wait_gone(record, timeout, process):
        return
    signal_group(record, signal.SIGKILL)
    if not _wait_gone(record, timeout, process):
        raise ProcessError(f"{record.name} (pid {record.pid}) survived SIGKILL")


def _wait_gone(record: ProcessRecord, timeout: float, process: subprocess.Popen[bytes] | None) -> bool:
    if process is not None:
        try:
            process.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout
    while alive(record):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def kill_unrecorded(pids: Sequence[int], timeout: float = 5.0) -> None:
    """SIGKILL processes found by where they live (a node's cgroup, its mount namespace) rather
    than recorded: they were started by a runtime we stopped. Waits until they are gone."""
    records = [ProcessRecord.of("leftover", pid) for pid in pids if pid != os.getpid()]
    for record in records:
        if record.start_time is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(record.pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while any(alive(record) for record in records) and time.monotonic() < deadline:
        time.sleep(0.05)


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports free on 127.0.0.1 right now (another process may take one)."""
    sockets = []
    try:
        # Hold all of them open together so the kernel hands out distinct ports.
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log file)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"
