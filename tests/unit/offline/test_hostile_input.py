"""`fabriccap evaluate` on hostile input: one `error:` line, exit 2, no traceback, no hang,
and memory bounded by the input limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabriccap.cli.commands import main
from support.builders import healthy_pool, kube_list, node

Result = tuple[int, str, str]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Result:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(result: Result, *fragments: str) -> str:
    code, out, err = result
    assert code == 2, result
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def test_deeply_nested_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"kind": "List", "items": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    one_error_line(run(["evaluate", "-f", str(path)], capsys), str(path), "nested too deeply")


def test_deeply_nested_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("kind: List\nitems:\n- " + "[" * 20_000 + "]" * 20_000 + "\n")
    one_error_line(run(["evaluate", "-f", str(path)], capsys), str(path), "nested too deeply")


def test_an_integer_of_5000_digits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "digits.json"
    path.write_text(
        '{"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1"}, "spec": {"x": ' + "9" * 5000 + "}}"
    )
    one_error_line(run(["evaluate", "-f", str(path)], capsys), str(path), "unusable JSON value")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_that_never_end_are_refused_at_once(device: str, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    one_error_line(run(["evaluate", "-f", device], capsys), device, "is a character device, not a file")
    assert time.monotonic() - started < 1.0


def test_a_fifo_without_a_writer_does_not_hang(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "snapshot.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    one_error_line(run(["evaluate", "-f", str(fifo)], capsys), str(fifo), "empty input")
    assert time.monotonic() - started < 2.0


def test_a_fifo_with_a_writer_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "snapshot.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with fifo.open("w") as writer:
            writer.write(json.dumps(kube_list(healthy_pool())))

    writer = threading.Thread(target=write)
    writer.start()
    try:
        time.sleep(0.2)  # the writer has the FIFO open before the reader looks, as <(kubectl ...) does
        code, out, _ = run(["evaluate", "-f", str(fifo), "-o", "name"], capsys)
    finally:
        writer.join(5)
    assert (code, out) == (0, "fabriccapability.fabriccap.dev/efa-p5\n")


def test_an_input_over_the_limit_is_refused_and_the_flag_raises_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps(kube_list(healthy_pool())))
    size = path.stat().st_size
    one_error_line(
        run(["evaluate", "-f", str(path), "--max-input-size", str(size - 1)], capsys),
        str(path),
        f"larger than the input limit of {size - 1} bytes (raise it with --max-input-size)",
    )
    assert run(["evaluate", "-f", str(path), "--max-input-size", str(size)], capsys)[0] == 0


def test_an_endless_stream_on_stdin_stops_at_the_limit() -> None:
    """`yes | fabriccap evaluate -f -`: memory stays bounded by the limit."""
    producer = subprocess.Popen(["yes", "a"], stdout=subprocess.PIPE)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "fabriccap", "evaluate", "-f", "-", "--max-input-size", "8Mi"],
            stdin=producer.stdout,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        producer.kill()
        producer.wait()
    assert result.returncode == 2, result
    assert (
        result.stderr.strip() == "error: <stdin>: larger than the input limit of 8 MiB (raise it with --max-input-size)"
    )


@pytest.fixture
def big_snapshot(tmp_path: Path) -> Iterator[Path]:
    """A 200 MB snapshot: a healthy pool whose plugin pods carry 200 MB of annotations."""
    bodies = healthy_pool()
    bodies[-1]["metadata"]["annotations"] = {"blob": "x" * (200 * 1000 * 1000)}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(kube_list(bodies)))
    yield path
    path.unlink()


def test_a_200_mb_snapshot_is_read(big_snapshot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert big_snapshot.stat().st_size > 200 * 1000 * 1000
    code, out, err = run(["evaluate", "-f", str(big_snapshot), "-o", "name"], capsys)
    assert (code, out, err) == (0, "fabriccapability.fabriccap.dev/efa-p5\n", "")


def test_a_node_that_appears_twice_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(kube_list([node("n1")])))
    second.write_text(json.dumps(kube_list([node("n1", efa=0)])))
    one_error_line(run(["evaluate", "-f", str(first), "-f", str(second)], capsys), str(second), "Node n1 appears twice")
    both = tmp_path / "both.json"
    both.write_text(json.dumps(kube_list([node("n1"), node("n1")])))
    one_error_line(run(["evaluate", "-f", str(both)], capsys), "Node n1 appears twice (also earlier in it)")


def test_a_node_in_another_api_version_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = node("n1")
    body["apiVersion"] = "apps/v1"
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(kube_list([body])))
    one_error_line(run(["evaluate", "-f", str(path)], capsys), "Node n1: apiVersion 'apps/v1' is not v1")


@pytest.mark.parametrize("size", ["lots", "0", "-5"])
def test_a_bad_input_limit_is_a_usage_error(size: str, capsys: pytest.CaptureFixture[str]) -> None:
    one_error_line(run(["evaluate", "-f", "x.json", "--max-input-size", size], capsys), "--max-input-size")
