"""`make demo` end to end: the command a new user runs first, on its own control plane."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

from harness import Metrics

DEMO_TIMEOUT_SECONDS = 280
# The demo prints where its operator's /metrics is once it answers there.
METRICS_LINE = re.compile(r"^==> The operator's metrics: (http://127\.0\.0\.1:(\d+)/metrics) ")


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, OSError):
        return None


def test_the_demo_shows_each_outcome_and_leaves_nothing_behind(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    errors = (tmp_path / "stderr").open("w+")  # a file: a full stderr pipe would block the demo
    process = subprocess.Popen(
        [sys.executable, "-m", "fabriccap", "demo"],
        stdout=subprocess.PIPE,
        stderr=errors,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch), "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()

    def read(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, args=(process.stdout,), daemon=True)
    reader.start()
    output: list[str] = []
    scraped: str | None = None
    metrics_url = ""
    deadline = time.monotonic() + DEMO_TIMEOUT_SECONDS
    try:
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.1))
            except queue.Empty:
                break
            if line is None:
                break
            output.append(line)
            match = METRICS_LINE.match(line)
            if match:
                # The demo is paused while the test scrapes (its operator is a process of its
                # own and keeps serving), so the demo cannot reach its teardown first.
                metrics_url = match.group(1)
                os.kill(process.pid, signal.SIGSTOP)
                try:
                    scraped = _get(metrics_url)
                finally:
                    os.kill(process.pid, signal.SIGCONT)
        returncode = process.wait(timeout=max(deadline - time.monotonic(), 1.0))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    errors.seek(0)
    stdout, stderr = "".join(output), errors.read()
    errors.close()
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    lines_out = stdout.splitlines()

    def row(name: str) -> list[str]:
        rows = [line.split() for line in lines_out if line.startswith(f"{name} ")]
        assert rows, f"no row for {name} in:\n{stdout}"
        return rows[-1]  # the last table printed: after the laggard's plugin came up

    assert row("efa-p5-training")[7:9] == ["True", "UniformCapability"]
    # The DRANET pool: EFA only in ResourceSlices, Ready, with a ResourceClaimTemplate to use.
    assert row("efa-p5-dranet")[3:8] == ["3", "3", "32", "0", "True"]
    assert '"deviceClassName": "efa.networking.k8s.aws"' in stdout
    assert "fabriccapability.fabriccap.dev/efa-p5-partial condition met" in stdout
    assert row("efa-p5-partial")[7:9] == ["True", "UniformCapability"]
    assert row("efa-gpu-mixed")[5:7] == ["0", "False"]  # readable under karpenter.sh/nodepool (round 3)
    # The elastic pools: the empty NodePool Ready from the catalog (NODES 0, READY True); the
    # node p5-spot launched without EFA out of the gate set (NODES 0), named in the job's Event.
    assert row("efa-p5-elastic")[3] == "0" and row("efa-p5-elastic")[6:8] == ["True", "UniformCapability"]
    launched = next(line for line in lines_out if line.startswith("Warning  FabricNotRequested  JobSet/gpt-sft"))
    assert "Karpenter launched ip-" in launched and "without EFA because this job requested none" in launched
    # The TrainJob that forgot EFA: NO-FABRIC 2, a Warning on the TrainJob, then 0 once fixed.
    wide = [line.split() for line in lines_out if line.startswith("efa-p5-training ") and len(line.split()) >= 13]
    fixed = [columns for columns in wide if "(NO-FABRIC" in columns]
    assert wide[0][12] == "2" and len(fixed) == 1 and fixed[0][12] == "0", stdout
    warning = next(line for line in lines_out if line.startswith("Warning  FabricNotRequested  TrainJob/"))
    assert warning.startswith("Warning  FabricNotRequested  TrainJob/bert-finetune: runs 2 pods on pool p5-training")
    assert warning.endswith("request vpc.amazonaws.com/efa: 32 per node (TrainJob: spec.trainer.resourcesPerNode)")
    # The job whose NCCL fell back to sockets: its log read through the demo's log front (said
    # so), the offline verdict over the same log, the Warning on the Job, and the TCP column.
    assert "the demo's log front answers pods/log for this pod with the excerpt" in stdout
    assert "VERDICT:  socket" in stdout
    not_used = next(line for line in lines_out if line.startswith("Warning  FabricNotUsed"))
    assert not_used.startswith(
        "Warning  FabricNotUsed  Job/llama-sft: 1 pod on pool p5-training requests vpc.amazonaws.com/efa"
        " but NCCL uses TCP sockets (pod ml-training/llama-sft-0: "
    ), not_used
    assert "NCCL INFO Using network Socket" in not_used and "aws-ofi-nccl" in not_used
    tcp = next(columns for columns in wide if "(TCP" in columns)
    assert tcp[tcp.index("(TCP") - 1] == "1", tcp  # the last column, TCP

    # The operator served /metrics at the printed URL while the demo ran, before the flip.
    assert metrics_url, f"no line saying where /metrics is in:\n{stdout}"
    assert scraped is not None, f"nothing answered at {metrics_url} while the demo ran"
    metrics = Metrics.parse(scraped)
    ready = {
        series["name"]: metrics.get("fabriccap_pool_ready", **series)
        for series in metrics.series("fabriccap_pool_ready")
    }
    assert (ready["efa-p5-training"], ready["efa-p5-partial"]) == (1.0, 0.0), ready
    # And the demo shows the flip in the metrics too.
    assert any(
        line.startswith("fabriccap_pool_ready{") and 'name="efa-p5-partial"' in line and line.endswith(" 1.0")
        for line in lines_out
    ), stdout
    # Its operator is gone with it, and so is its temporary directory (etcd's data, the log).
    assert _get(metrics_url) is None
    assert list(scratch.iterdir()) == []
