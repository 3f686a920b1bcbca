"""Developer tooling that needs no cluster: waiting, and processes the control plane stops."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabriccap_devtools.controlplane.cluster import STATE_FILE, down, record_process, stop_recorded
from fabriccap_devtools.waiting import WaitTimeoutError, wait_until


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_wait_until_returns_the_first_truthy_value() -> None:
    answers = iter([None, 0, "", "ready"])
    clock = FakeClock()
    assert wait_until(lambda: next(answers), "an answer", timeout=10, clock=clock, sleep=clock.sleep) == "ready"
    assert clock.now == pytest.approx(0.3)


def test_wait_until_names_what_it_waited_for() -> None:
    clock = FakeClock()
    with pytest.raises(WaitTimeoutError, match="timed out after 2s waiting for the pool to turn Ready"):
        wait_until(lambda: False, "the pool to turn Ready", timeout=2, interval=0.5, clock=clock, sleep=clock.sleep)
    assert clock.now == pytest.approx(2.0)


def _recorded(directory: Path) -> list[str]:
    return [entry["name"] for entry in json.loads((directory / STATE_FILE).read_text())["processes"]]


def _sleeper() -> subprocess.Popen[bytes]:
    # Its own session, like the processes the control plane starts: stopped with killpg.
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)


def test_a_recorded_process_is_stopped_by_down(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text(json.dumps({"processes": []}))
    process = _sleeper()
    try:
        record_process(tmp_path, "operator", process.pid)
        assert _recorded(tmp_path) == ["operator"]
        down(tmp_path, timeout=5)
        # down returns once it is gone (and reaped: down's liveness check reaps a child of ours,
        # so poll() reads no exit status, but no longer None).
        assert process.poll() is not None
        assert not (tmp_path / STATE_FILE).exists()
    finally:
        process.kill()
        process.wait()


def test_a_recycled_pid_is_not_signalled(tmp_path: Path) -> None:
    process = _sleeper()
    try:
        # Recorded with another start time: the PID now belongs to someone else.
        entry = {"name": "operator", "pid": process.pid, "start_time": "1"}
        (tmp_path / STATE_FILE).write_text(json.dumps({"processes": [entry]}))
        down(tmp_path, timeout=1)
        time.sleep(0.2)
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_stop_recorded_stops_one_and_keeps_the_rest(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text(json.dumps({"processes": []}))
    first, second = _sleeper(), _sleeper()
    try:
        record_process(tmp_path, "first", first.pid)
        record_process(tmp_path, "second", second.pid)
        stop_recorded(tmp_path, "first", timeout=5)
        assert first.poll() is not None  # gone when stop_recorded returns
        assert second.poll() is None
        assert _recorded(tmp_path) == ["second"]
    finally:
        for process in (first, second):
            process.kill()
            process.wait()
