"""``DIR/state.json``: what a control plane started, so that ``down(DIR)`` works from any process.

    server, etcd_url, kubeconfig, kubectl
    processes   [{name, pid, start_time}], in stop order (others' first, then the servers)
    nodes       [{name, slot, directory, ... processes}] for real nodes (see ``nodes``)

Writers (the control plane, the demo recording its operator, a test restarting a kubelet) may
be different processes: every change is a read-modify-write under an exclusive lock, replaced
atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"


class StateError(RuntimeError):
    """state.json exists but cannot be read."""


def state_path(directory: Path) -> Path:
    return Path(directory).resolve() / STATE_FILE


def read_state(directory: Path) -> dict[str, Any] | None:
    path = state_path(directory)
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as error:
        raise StateError(f"{path} is not valid JSON: {error}") from error
    if not isinstance(state, dict):
        raise StateError(f"{path} does not hold a JSON object")
    return state


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    lock = state_path(directory).with_name(f".{STATE_FILE}.lock")
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def update_state(directory: Path, change: Callable[[dict[str, Any]], None], *, create: bool = False) -> bool:
    """Apply ``change`` to the state in place and write it back; False if there is no state
    (and ``create`` is not set)."""
    with _locked(directory):
        state = read_state(directory)
        if state is None:
            if not create:
                return False
            state = {}
        change(state)
        _write(directory, state)
        return True


def remove_state(directory: Path) -> None:
    with _locked(directory):
        state_path(directory).unlink(missing_ok=True)


def _write(directory: Path, state: dict[str, Any]) -> None:
    path = state_path(directory)
    temporary = path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(temporary, path)
