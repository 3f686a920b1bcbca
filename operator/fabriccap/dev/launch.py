"""``fabriccap run`` as the demo, the tests and the benchmarks start it on this machine."""

from __future__ import annotations

import sys
from pathlib import Path


def local_run_command(
    kubeconfig: Path, config: Path | None = None, metrics_port: int = 0, health_port: int = 0
) -> list[str]:
    """This interpreter, one replica, servers on loopback only (port 0 turns a server off)."""
    command = [sys.executable, "-m", "fabriccap", "run", "--standalone", "--kubeconfig", str(kubeconfig)]
    if config is not None:
        command += ["--config", str(config)]
    loopback = ["--bind-address", "127.0.0.1", "--metrics-port", str(metrics_port), "--health-port", str(health_port)]
    return [*command, *loopback]
