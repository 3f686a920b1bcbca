"""``fabriccap run`` as the demo, the tests and the benchmarks start it on this machine."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from fabriccap.core.shard import UNSHARDED, Shard


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 right now, for a server started next (the kernel may hand
    it out again before then: callers check that their server answers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def local_run_command(
    kubeconfig: Path,
    config: Path | None = None,
    metrics_port: int = 0,
    health_port: int = 0,
    *,
    standalone: bool = True,
    namespace: str | None = None,
    shard: Shard = UNSHARDED,
) -> list[str]:
    """This interpreter, servers on loopback only (port 0 turns a server off); one replica
    unless ``standalone`` is False (then it elects a leader in ``namespace``), of ``shard``."""
    command = [sys.executable, "-m", "fabriccap", "run", "--kubeconfig", str(kubeconfig)]
    if standalone:
        command.append("--standalone")
    if shard.sharded:
        command += ["--shard", str(shard.index), "--shards", str(shard.count)]
    if namespace is not None:
        command += ["--namespace", namespace]
    if config is not None:
        command += ["--config", str(config)]
    loopback = [
        "--metrics-bind-address",
        "127.0.0.1",
        "--health-bind-address",
        "127.0.0.1",
        "--metrics-port",
        str(metrics_port),
        "--health-port",
        str(health_port),
    ]
    return [*command, *loopback]
