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
  the log reader's worker thread.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0, help="size of the chatty log in GiB (default 1)")
    args = parser.parse_args()

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
