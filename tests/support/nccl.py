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
