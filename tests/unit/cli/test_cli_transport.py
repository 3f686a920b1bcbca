"""``fabriccap transport``: the real command, in a subprocess, on corpus logs, files and stdin."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fabriccap.cli.commands import main
from fabriccap.core.transport import RankVerdict, TransportReport, Verdict
from fabriccap.offline.transport import format_table
from support.nccl import CORPUS, CORPUS_DIR

BY_VERDICT = {entry["verdict"]: entry for entry in reversed(CORPUS)}  # one entry of each verdict
PASSING = {"fabric", "none"}
MiB = 1024 * 1024
SOCKET_LOG = CORPUS_DIR / "nccl-tests-166-channels-socket.log"


def fabriccap(*argv: str, stdin: bytes | int | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The installed command as a user runs it: its own process, its own stdin."""
    if isinstance(stdin, bytes):
        done = subprocess.run(
            [sys.executable, "-m", "fabriccap", *argv], input=stdin, capture_output=True, timeout=timeout
        )
    else:
        done = subprocess.run(
            [sys.executable, "-m", "fabriccap", *argv],
            stdin=subprocess.DEVNULL if stdin is None else stdin,
            capture_output=True,
            timeout=timeout,
        )
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def one_error_line(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert done.returncode == 2, done
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.mark.parametrize("verdict", ["fabric", "socket", "other", "none", "unknown"])
def test_a_corpus_log_as_a_file(verdict: str) -> None:
    entry = BY_VERDICT[verdict]
    done = fabriccap("transport", "-f", str(CORPUS_DIR / entry["file"]), "-o", "json")
    assert done.returncode == (0 if verdict in PASSING else 1), done
    assert done.stderr == ""
    output = json.loads(done.stdout)
    assert output["verdict"] == verdict
    assert set(output) >= {"verdict", "evidence", "ranks"}
    for rank in output["ranks"]:
        assert set(rank) >= {"host", "rank", "verdict", "evidence"}
    if verdict != "unknown":
        assert output["evidence"] in (CORPUS_DIR / entry["file"]).read_text()


def test_kubectl_logs_piped_to_stdin() -> None:
    log = (CORPUS_DIR / "awsome-ai-386-ray-init.log").read_bytes()
    done = fabriccap("transport", "-f", "-", stdin=log)
    assert done.returncode == 1, done
    assert done.stdout.splitlines()[1] == "VERDICT:  socket"
    assert "ini-worker-ray-worker-p5" in done.stdout and "Using network Socket" in done.stdout


def test_without_f_a_piped_stdin_is_read() -> None:
    done = fabriccap("transport", "-o", "json", stdin=(CORPUS_DIR / "nccl-527-p4d-efa-1.4.log").read_bytes())
    assert done.returncode == 0, done
    assert json.loads(done.stdout)["verdict"] == "fabric"


def test_without_f_a_terminal_on_stdin_is_an_error() -> None:
    primary, secondary = os.openpty()
    try:
        done = fabriccap("transport", stdin=secondary)
    finally:
        os.close(primary)
        os.close(secondary)
    one_error_line(done, "no log to read", "-f FILE")


def test_several_files_make_one_job_and_socket_comes_first(tmp_path: Path) -> None:
    fabric_log = str(CORPUS_DIR / "nccl-527-p4d-efa-1.4.log")
    socket_log = str(CORPUS_DIR / "nccl-tests-166-channels-socket.log")
    done = fabriccap("transport", "-f", fabric_log, "-f", socket_log, "-o", "json")
    assert done.returncode == 1, done
    output = json.loads(done.stdout)
    assert output["verdict"] == "socket"
    assert {rank["verdict"] for rank in output["ranks"]} == {"fabric", "socket"}


def test_a_log_saved_by_powershell_beside_a_docker_json_file_one(tmp_path: Path) -> None:
    """A UTF-16 file (PowerShell 5's ``kubectl logs pod > log``) and a file of Docker json-file
    records, both of the same job: each file is read as what it is."""
    fabric_log = (CORPUS_DIR / "nccl-527-p4d-efa-1.4.log").read_text()
    socket_log = (CORPUS_DIR / "nccl-tests-166-channels-socket.log").read_text()
    wide = tmp_path / "fabric.log"
    wide.write_bytes(fabric_log.encode("utf-16"))
    records = tmp_path / "socket.json"
    records.write_text(
        "".join(json.dumps({"log": line + "\n", "stream": "stdout"}) + "\n" for line in socket_log.splitlines())
    )
    done = fabriccap("transport", "-f", str(wide), "-f", str(records), "-o", "json")
    assert done.returncode == 1, done
    output = json.loads(done.stdout)
    assert output["verdict"] == "socket"
    assert {rank["verdict"] for rank in output["ranks"]} == {"fabric", "socket"}
    assert all(rank["evidence"] in fabric_log + socket_log for rank in output["ranks"])


def test_two_files_repeating_a_rank_s_host_pid_and_device_keep_their_ranks_apart(tmp_path: Path) -> None:
    """``kubectl logs --previous`` and the current log of one restarted container: its new PID
    namespace gives torchrun's worker the same pid, on the same host and device. The current run
    fell back to sockets; the previous run's decided rank must not swallow its lines. Formats:
    aws-ofi-nccl >= 1.14's provider line (src/nccl_ofi_net.cpp), NCCL 2.22+'s missing plugin
    line (as in nccl-2057-2.29-plugins-not-found.log), NCCL >= 2.20's communicator line."""
    head = "train-worker-0:31:97 [0] NCCL INFO "
    comm = head + "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0"
    previous, current = tmp_path / "previous.log", tmp_path / "current.log"
    previous.write_text(
        "\n".join(
            [
                head + "NET/OFI Selected provider is efa, fabric is efa (found 4 nics)",
                head + "Using network Libfabric",
                comm,
            ]
        )
        + "\n"
    )
    current.write_text(
        "\n".join([head + "NET/Plugin: Could not find: libnccl-net.so", head + "Using network Socket", comm]) + "\n"
    )
    done = fabriccap("transport", "-f", str(previous), "-f", str(current), "-o", "json")
    assert done.returncode == 1, done
    output = json.loads(done.stdout)
    assert output["verdict"] == "socket"
    assert [(rank["host"], rank["pid"], rank["device"], rank["verdict"]) for rank in output["ranks"]] == [
        ("train-worker-0", 31, 0, "fabric"),
        ("train-worker-0", 31, 0, "socket"),
    ]


def test_a_last_line_without_newline_ends_with_its_file(tmp_path: Path) -> None:
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_text("node-a:1:2 [0] NCCL INFO Using network Socket")  # no newline
    second.write_text("node-b:3:4 [0] NCCL INFO comm 0x1 rank 8 nRanks 16 nNodes 2 localRanks 8\n")
    output = json.loads(fabriccap("transport", "-f", str(first), "-f", str(second), "-o", "json").stdout)
    assert [(rank["host"], rank["verdict"]) for rank in output["ranks"]] == [
        ("node-a", "socket"),
        ("node-b", "unknown"),
    ]


def test_the_rdma_profile_calls_ib_the_fabric() -> None:
    log = str(CORPUS_DIR / "nccl-1029-k8s-hpcx-ibext.log")
    assert json.loads(fabriccap("transport", "-f", log, "-o", "json").stdout)["verdict"] == "other"
    done = fabriccap("transport", "-f", log, "-o", "json", "--fabric", "aks-rdma")
    assert done.returncode == 0 and json.loads(done.stdout)["verdict"] == "fabric"


def test_every_corpus_log_exits_by_its_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    """In process, for speed: exit 0 for fabric and none, 1 otherwise, for both profiles."""
    for entry in CORPUS:
        for fabric, key in (("efa", "verdict"), ("aks-rdma", "aks-rdma")):
            code = main(["transport", "-f", str(CORPUS_DIR / entry["file"]), "--fabric", fabric, "-o", "json"])
            out, err = capsys.readouterr()
            assert (json.loads(out)["verdict"], code, err) == (entry[key], 0 if entry[key] in PASSING else 1, ""), entry


def test_terminal_output_carries_no_control_characters(tmp_path: Path) -> None:
    log = tmp_path / "coloured.log"
    log.write_bytes(
        b"\x1b[31mnode\x1b]0;owned\x07-1:5:6 [0] NCCL INFO Using network Socket\x07\x1b[2J\x00 \xe2\x80\xae\n"
        b"\xff\xfe\x1b[6n node-1:5:6 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 \x9b31m\n"
    )
    for output in ("table", "json"):
        done = fabriccap("transport", "-f", str(log), "-o", output)
        assert done.returncode == 1, done
        assert "socket" in done.stdout
        assert all(char.isprintable() or char == "\n" for char in done.stdout), repr(done.stdout)


def test_line_and_paragraph_separators_break_no_line_of_the_table(tmp_path: Path) -> None:
    """U+2028 and U+2029 in the job's evidence (hostile review 63 F2's log)."""
    log = tmp_path / "separators.log"
    forged = "\u2028\u20292026-12-07 ERROR fabriccap: forged"
    log.write_text(f"h1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0 {forged}\n")
    done = fabriccap("transport", "-f", str(log))
    assert done.returncode == 1, done
    assert "EVIDENCE: h1:1:1 [0] NCCL INFO Channel" in done.stdout
    assert all(char.isprintable() or char == "\n" for char in done.stdout), repr(done.stdout)


def test_the_header_lines_show_control_characters_escaped_as_the_rows_do() -> None:
    """The EVIDENCE line shows a control character escaped, as the rank's row does: the table
    does not count on the parser having removed every one (hostile review 63 F2)."""
    evidence = "h1:1:1 [0] NCCL INFO Using network Socket\nforged"
    rank = RankVerdict(host="h1", pid=1, device=0, rank=0, verdict=Verdict.SOCKET, evidence=evidence)
    report = TransportReport("efa", Verdict.SOCKET, evidence, (rank,), None, None, True, 0, 0, 1)
    table = format_table(report)
    assert "EVIDENCE: h1:1:1 [0] NCCL INFO Using network Socket\\nforged\n" in table
    assert table.count("\\nforged") == 2 and "\nforged" not in table


def test_a_missing_file() -> None:
    one_error_line(fabriccap("transport", "-f", "/nonexistent/x.log"), "/nonexistent/x.log: no such file")


def test_a_file_name_with_escapes_is_shown_clean(tmp_path: Path) -> None:
    line = one_error_line(fabriccap("transport", "-f", str(tmp_path / "a\x1b[31mb.log")), "no such file")
    assert "\x1b" not in line


def test_a_directory(tmp_path: Path) -> None:
    one_error_line(fabriccap("transport", "-f", str(tmp_path)), "is a directory")


# Review 64-cli F5: a compressed log or binary data was "unknown", exit 1, with the advice to
# re-run the job with NCCL_DEBUG=INFO; it is bad input (exit 2) saying what it is.
def test_a_gzipped_log_is_refused_with_how_to_read_it(tmp_path: Path) -> None:
    packed = tmp_path / "job.log.gz"
    packed.write_bytes(gzip.compress(SOCKET_LOG.read_bytes()))
    one_error_line(fabriccap("transport", "-f", str(packed)), "a gzip-compressed file, not a log", "zcat")
    one_error_line(fabriccap("transport", "-f", "-", stdin=packed.read_bytes()), "<stdin>: a gzip-compressed file")


def test_binary_data_is_refused_as_no_text_log(tmp_path: Path) -> None:
    noise = tmp_path / "noise.bin"
    noise.write_bytes(random.Random(64).randbytes(2000))
    one_error_line(fabriccap("transport", "-f", str(noise)), "binary data, not a text log")


# Review 64c F8: the first 4 KB judged the whole input, so real logs whose head looks binary
# were refused (exit 2), though their NCCL lines further on gave the right verdict.
FABRIC_LOG = CORPUS_DIR / "aws-ofi-nccl-715-sagemaker-p4d.log"
BINARY_LOOKING_HEADS = {
    "a progress bar drawn with backspaces": b"".join(b"%3d%%\b\b\b\b" % n for n in range(101)) * 20 + b"\n",
    "a corrupted or rotated head": bytes(range(0x80, 0x100)) * 20 + b"\n",
    "form feeds, DEL and bell": b"\f\x7f\x07" * 2000 + b"\n",
    "control bytes no terminal writes": bytes(range(1, 8)) * 1000 + b"\n",
}


@pytest.mark.parametrize("head", BINARY_LOOKING_HEADS.values(), ids=list(BINARY_LOOKING_HEADS))
def test_a_log_whose_head_looks_binary_keeps_the_verdict_of_its_nccl_lines(tmp_path: Path, head: bytes) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(head + FABRIC_LOG.read_bytes())
    done = fabriccap("transport", "-f", str(log))
    assert (done.returncode, done.stderr) == (0, ""), done
    assert "VERDICT:  fabric" in done.stdout


def test_a_log_that_begins_with_the_nuls_of_a_truncation_is_still_read(tmp_path: Path) -> None:
    # copytruncate with a writer that does not append leaves NULs where the log was.
    log = tmp_path / "truncated.log"
    log.write_bytes(b"\x00" * 10_000 + SOCKET_LOG.read_bytes())
    done = fabriccap("transport", "-f", str(log))
    assert (done.returncode, done.stderr) == (1, "") and "VERDICT:  socket" in done.stdout


@pytest.mark.parametrize("hole", [30_000, 100_000], ids=["under the sniffed head", "past it"])
def test_a_text_log_after_a_hole_of_nuls_without_nccl_lines_is_unknown_not_binary(tmp_path: Path, hole: int) -> None:
    # The NULs a copytruncate leaves are a hole, not binary data: such a log without NCCL lines
    # is "unknown" with the NCCL_DEBUG advice, as before 6019b7a, not exit 2 (review 64e F5).
    log = tmp_path / "truncated.log"
    log.write_bytes(b"\x00" * hole + b"".join(b"step %d loss 0.5\n" % n for n in range(2000)))
    done = fabriccap("transport", "-f", str(log))
    assert (done.returncode, done.stderr) == (1, ""), done
    assert "VERDICT:  unknown" in done.stdout and "NCCL_DEBUG=INFO" in done.stdout


@pytest.mark.parametrize("first", [True, False], ids=["binary file first", "binary file last"])
def test_a_binary_file_beside_a_good_log_is_named_not_read_as_nothing(tmp_path: Path, first: bool) -> None:
    # Judged over the whole input, a core dump beside one node's good log was read as nothing
    # and the job's verdict (fabric, exit 0) never said so (review 64e F5).
    dump = tmp_path / "core.dump"
    dump.write_bytes(random.Random(64).randbytes(200_000))
    files = [str(dump), str(FABRIC_LOG)] if first else [str(FABRIC_LOG), str(dump)]
    one_error_line(fabriccap("transport", "-f", files[0], "-f", files[1]), "core.dump: binary data, not a text log")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_are_refused_before_a_byte_is_read(device: str) -> None:
    one_error_line(fabriccap("transport", "-f", device, timeout=20), device, "character device, not a file")


def test_a_fifo_without_a_writer_does_not_hang(tmp_path: Path) -> None:
    """Nothing ever writes: after the shared reader's grace, one error line (fabriccap.inputfile)."""
    fifo = tmp_path / "nccl.fifo"
    os.mkfifo(fifo)
    one_error_line(fabriccap("transport", "-f", str(fifo), timeout=20), "nccl.fifo", "a FIFO that nothing wrote to")


def test_a_fifo_with_a_writer_is_read_as_process_substitution_sends_it(tmp_path: Path) -> None:
    """``fabriccap transport -f <(kubectl logs job/x)``: the shell hands over a FIFO."""
    done = subprocess.run(
        ["bash", "-c", '"$0" -m fabriccap transport -f <(cat "$1") -o json', sys.executable, str(SOCKET_LOG)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done
    assert json.loads(done.stdout)["verdict"] == "socket"


def test_a_file_over_the_size_limit(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_bytes(b"x" * 4096)
    one_error_line(fabriccap("transport", "-f", str(log), "--max-input-size", "1Ki"), "larger than the input limit")


def test_stdin_over_the_size_limit() -> None:
    one_error_line(fabriccap("transport", "-f", "-", "--max-input-size", "1Ki", stdin=b"y" * 4096), "<stdin>")


def test_an_unknown_fabric() -> None:
    one_error_line(fabriccap("transport", "-f", "-", "--fabric", "slingshot", stdin=b""), "--fabric", "slingshot")


def test_an_empty_log_is_unknown_not_an_error() -> None:
    done = fabriccap("transport", "-f", "-", stdin=b"")
    assert done.returncode == 1 and done.stderr == ""
    assert "VERDICT:  unknown" in done.stdout and "NCCL_DEBUG=INFO" in done.stdout


UNKNOWN_PREFIX = "ip-10-0-0-1:41:52 [0] NCCL INFO "


@pytest.mark.parametrize(
    ("log", "says", "hint"),
    [
        (
            ["Using network Socket", "comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8"],
            "every communicator read stays on one node",
            False,
        ),
        (["Using network Libfabric"], "no line names its libfabric provider", True),
        (["cudaDriverVersion 12040"], "No line proves NCCL's network", True),
    ],
    ids=["node-local sockets", "plugin without provider", "no network line"],
)
def test_an_unknown_verdict_says_what_its_lines_lack(log: list[str], says: str, hint: bool) -> None:
    """Telling a user to turn NCCL's logging on when the log shows NCCL's choice sends them
    the wrong way: the footer names the network the lines show, and what they lack."""
    done = fabriccap("transport", "-f", "-", stdin="".join(UNKNOWN_PREFIX + line + "\n" for line in log).encode())
    assert done.returncode == 1 and "VERDICT:  unknown" in done.stdout, done
    footer = done.stdout.splitlines()[-1]
    assert says in footer, footer
    assert ("NCCL_DEBUG=INFO" in footer) is hint, footer


def _max_rss_kib(stdin_chunks: int, chunk: bytes) -> tuple[int, subprocess.CompletedProcess[bytes]]:
    """Run the command on a stream written as it is read, and report its peak RSS."""
    probe = (
        "import atexit, os, resource, sys\n"
        "atexit.register(lambda: open(os.environ['RSS_OUT'], 'w').write("
        "str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))\n"
        "from fabriccap.cli.commands import main\n"
        "sys.exit(main(['transport', '-f', '-', '-o', 'json', '--max-input-size', '4Gi']))\n"
    )
    rss_out = Path(os.environ.get("TMPDIR", "/tmp")) / f"fabriccap-rss-{os.getpid()}-{threading.get_ident()}"
    process = subprocess.Popen(
        [sys.executable, "-c", probe],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "RSS_OUT": str(rss_out)},
    )
    assert process.stdin is not None

    def write() -> None:
        assert process.stdin is not None
        try:
            for _ in range(stdin_chunks):
                process.stdin.write(chunk)
        finally:
            process.stdin.close()

    writer = threading.Thread(target=write)
    writer.start()
    assert process.stdout is not None and process.stderr is not None
    stdout = process.stdout.read()  # both are a few lines: neither pipe fills while stdin is written
    stderr = process.stderr.read()
    process.wait(timeout=300)
    writer.join()
    try:
        return int(rss_out.read_text()), subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    finally:
        rss_out.unlink(missing_ok=True)


def test_a_large_stream_without_newlines_is_read_in_bounded_memory() -> None:
    baseline, _ = _max_rss_kib(0, b"")
    peak, done = _max_rss_kib(256, b"z" * MiB)  # 256 MiB, one line
    assert done.returncode == 1, done
    assert json.loads(done.stdout)["verdict"] == "unknown"
    print(f"peak RSS {peak / 1024:.0f} MiB for 256 MiB on stdin (empty input: {baseline / 1024:.0f} MiB)")
    # The stream is read in 1 MiB chunks and one line keeps its first 4 KiB: a few MiB over the
    # interpreter's own, never the stream's size.
    assert peak - baseline < 32 * 1024, (peak, baseline)
