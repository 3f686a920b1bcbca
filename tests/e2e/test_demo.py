"""`make demo` end to end: the command a new user runs first, on its own control plane."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_the_demo_shows_each_outcome_and_leaves_nothing_behind(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "fabriccap", "demo"],
        capture_output=True,
        text=True,
        timeout=280,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(scratch)},
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    lines = result.stdout.splitlines()

    def row(name: str) -> list[str]:
        rows = [line.split() for line in lines if line.startswith(f"{name} ")]
        assert rows, f"no row for {name} in:\n{result.stdout}"
        return rows[-1]  # the last table printed: after the laggard's plugin came up

    assert row("efa-p5-training")[7:9] == ["True", "UniformCapability"]
    # The DRANET pool: EFA only in ResourceSlices, Ready, with a ResourceClaimTemplate to use.
    assert row("efa-p5-dranet")[3:8] == ["3", "3", "32", "0", "True"]
    assert '"deviceClassName": "efa.networking.k8s.aws"' in result.stdout
    assert "fabriccapability.fabriccap.dev/efa-p5-partial condition met" in result.stdout
    assert row("efa-p5-partial")[7:9] == ["True", "UniformCapability"]
    assert row("efa-gpu-mixed-p4tqsoj6fw2bn3seuhpnv5tb44")[5:7] == ["0", "False"]
    # Its temporary directory (etcd's data, the operator's log) is gone with it.
    assert list(scratch.iterdir()) == []
