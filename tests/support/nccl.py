"""The NCCL log corpus (tests/fixtures/nccl): real NCCL output people posted publicly, each
excerpt with its source and the verdict a careful engineer gives it (corpus.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CORPUS_DIR = REPO_ROOT / "tests" / "fixtures" / "nccl"
CORPUS: list[dict[str, Any]] = yaml.safe_load((CORPUS_DIR / "corpus.yaml").read_text())["entries"]


def corpus_log(name: str) -> bytes:
    """One excerpt's bytes, by file name."""
    return (CORPUS_DIR / name).read_bytes()


def nccl_lines(*texts: str) -> bytes:
    """Log text from lines, each ended by a newline."""
    return "".join(text + "\n" for text in texts).encode()


def four_nodes_last_ranks_on_sockets(socket_ranks: int = 3) -> bytes:
    """A launcher-as-worker log (mpirun's output, MPIJob runLauncherAsWorker) of 4 p5 nodes of 8
    ranks, NCCL >= 2.20 ("comm %p rank %d nRanks %d nNodes %d localRanks %d …", src/init.cc):
    every rank on EFA but the last node's last ``socket_ranks``, whose plugin failed and fell
    back to sockets. The ranks start together: each kind of line comes from every rank first."""
    ranks = [(node, device) for node in range(4) for device in range(8)]

    def prefix(node: int, device: int) -> str:
        return f"p5-worker-{node}:{100 + device}:{200 + device} [{device}] NCCL INFO "

    def on_sockets(node: int, device: int) -> bool:
        return node == 3 and device >= 8 - socket_ranks

    return nccl_lines(
        *(prefix(*rank) + "NET/OFI Selected provider is efa, fabric is efa" for rank in ranks if not on_sockets(*rank)),
        *(
            prefix(*rank) + ("Using network Socket" if on_sockets(*rank) else "Using network Libfabric")
            for rank in ranks
        ),
        *(
            prefix(node, device)
            + f"comm 0x1 rank {node * 8 + device} nRanks 32 nNodes 4 localRanks 8 localRank {device}"
            for node, device in ranks
        ),
    )
