"""Benchmark (not a test): the NCCL transport parser's speed, on the shapes its tests count.

    python benchmarks/transport_parser_bench.py              # 1 GiB chatty log, worst case x1 and x4
    python benchmarks/transport_parser_bench.py --gib 0.25

tests/unit/core/test_transport_parser.py proves the scanner's work is linear by counting the
bytes its searches go over; this prints what that work costs on this machine:

- a chatty training log (1 MiB blocks: eight ``Using network Socket`` lines, then loss lines),
  fed in 1 MiB chunks as a streamed read delivers it, in MiB/s;
- the worst case, every line one the rules must read (a ``via NET/Socket`` channel line),
  10,000 and 40,000 lines, CPU time best of three, in µs per line and the ratio of the two
  (linear work: about 4x);
- the operator's read: ``transport.maxBytes`` (4 MiB) of the worst case, the CPU one read costs
  the operator's event loop (fed 16 KiB at a time, with the loop run between chunks);
- logs as they are kept, and hostile ones (``--shapes``): one 4 MiB read of each shape in 16 KiB
  chunks, CPU best of three, and its ratio to the plain training log in the same run. The
  shapes are the ones this stop's reviews timed: escapes on every line, colours around NCCL's
  level, JSON records, and a line of colours with no level (which a greedy pattern made
  quadratic).
"""

from __future__ import annotations

import argparse
import time

from fabriccap.core.transport import TransportScanner, scan, signature_for

MiB = 1024 * 1024
EFA = signature_for("efa")
WORST_LINE = b"ip-10-0-0-1:41:52 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n"


def chatty_block() -> bytes:
    noise = b"".join(
        f"[rank{step % 8}] epoch 3 step {step} loss {step / 7:.4f} lr 1e-4 grad_norm 0.93 tokens/s 48213\n".encode()
        for step in range(15_000)
    )
    nccl = b"".join(f"train-{node}:1{node}:2 [0] NCCL INFO Using network Socket\n".encode() for node in range(8))
    return (nccl + noise)[:MiB]


def cpu_best_of_three(data: bytes) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        scan([data], EFA)
        best = min(best, time.process_time() - started)
    return best


READ_CHUNK = 16 * 1024
TRAINING_LINE = b"[rank0] epoch 3 step 0 loss 0.0000 lr 1e-4 grad_norm 0.93 tokens/s 48213\n"
NETWORK_LINE = b"h:1:2 [0] NCCL INFO Using network Socket\n"


def shapes() -> dict[str, bytes]:
    """4 MiB of each shape; every line of the last five is one the rules read."""
    four = 4 * MiB

    def fill(line: bytes) -> bytes:
        return (line * (four // len(line) + 1))[:four]

    return {
        "plain training log": fill(TRAINING_LINE),
        "coloured training log": fill(b"\x1b[32m" + TRAINING_LINE[:-1] + b"\x1b[0m\n"),
        "ESC lines (hostile)": fill(b"\x1b\n"),
        "tqdm's erase": fill(b"\x1b[K\r"),
        "JSON escapes (\\u001b)": fill(b"\\u001b\n"),
        "NCCL alone on each line": fill(b"NCCL\n"),
        "NCCL and 16 KiB of colours, no level": fill(b"NCCL" + b"\x1b[m" * 5459 + b"x\n"),
        "short network lines": fill(NETWORK_LINE),
        "coloured network lines": fill(b"h:1:2 [0] NCCL \x1b[32mINFO\x1b[0m Using network Socket\n"),
        "network lines in JSON records": fill(b'{"log":"' + NETWORK_LINE[:-1] + b'"}\n'),
        "the worst case (via NET/Socket)": fill(WORST_LINE),
    }


def read_cpu(data: bytes) -> float:
    """CPU seconds of one read of ``data`` as the operator feeds it, best of three."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        scan((data[start : start + READ_CHUNK] for start in range(0, len(data), READ_CHUNK)), EFA)
        best = min(best, time.process_time() - started)
    return best


def print_shapes() -> None:
    baseline = None
    for name, data in shapes().items():
        cpu = read_cpu(data)
        baseline = baseline or cpu
        print(f"{name:40s} {cpu * 1000:9.1f} ms CPU per 4 MiB read = {cpu / baseline:7.1f}x the plain log")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0, help="size of the chatty log in GiB (default 1)")
    parser.add_argument("--shapes", action="store_true", help="only the 4 MiB reads of each shape")
    args = parser.parse_args()
    if args.shapes:
        print_shapes()
        return

    block, blocks = chatty_block(), max(1, int(args.gib * 1024))
    scanner = TransportScanner(EFA)
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(blocks):
        scanner.feed(block)
    report = scanner.finish()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    print(
        f"chatty log: {blocks} MiB in {wall:.2f} s wall, {cpu:.2f} s CPU ({blocks / wall:.0f} MiB/s); "
        f"{report.lines_read} NCCL lines read, verdict {report.verdict}"
    )

    small, large = cpu_best_of_three(WORST_LINE * 10_000), cpu_best_of_three(WORST_LINE * 40_000)
    print(
        f"worst case: 10,000 lines {small * 1000:.0f} ms ({small / 10_000 * 1e6:.1f} µs/line), "
        f"40,000 lines {large * 1000:.0f} ms (x{large / small:.2f})"
    )
    four_mib = WORST_LINE * (4 * MiB // len(WORST_LINE))
    print(f"one operator read of 4 MiB, worst case: {cpu_best_of_three(four_mib) * 1000:.0f} ms CPU")


if __name__ == "__main__":
    main()
