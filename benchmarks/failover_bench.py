"""Benchmark (not a test): leader failover time with two replicas on one Lease.

    python benchmarks/failover_bench.py              # 10 runs
    python benchmarks/failover_bench.py --runs 3

Each run, on one local control plane (kube-apiserver + etcd on 127.0.0.1): two `fabriccap run`
replicas elect a leader; the leader is SIGKILLed (no chance to release the Lease) and the
pool's nodes change at the same moment; the time measured is from the kill to the
FabricCapability status showing the change, written by the survivor. The baseline in the
same run is a clean stop (SIGTERM), where the leader releases the Lease.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from fabriccap_devtools import world
from fabriccap_devtools.controlplane import LocalControlPlane
from fabriccap_devtools.launch import local_run_command
from fabriccap_devtools.seeding import creatable
from fabriccap_devtools.waiting import wait_until

NAMESPACE = "fabriccap-failover"
POOL = "failover"


def kubectl(plane: LocalControlPlane, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        [str(plane.kubectl), f"--kubeconfig={plane.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def leader_of(ports: dict[str, int]) -> str | None:
    for name, port in ports.items():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                if "fabriccap_leader 1.0" in response.read().decode():
                    return name
        except OSError:
            continue
    return None


def uniform_count(plane: LocalControlPlane) -> Any:
    text = kubectl(plane, "get", "fcap", f"efa-{POOL}", "-o", "json")
    return json.loads(text).get("status", {}).get("uniformCount")


def set_efa(plane: LocalControlPlane, count: int) -> None:
    for index in range(2):
        patch = {"status": {"allocatable": {world.EFA: str(count)}, "capacity": {world.EFA: str(count)}}}
        kubectl(
            plane, "patch", "node", f"{POOL}-{index}", "--subresource=status", "--type=merge", "-p", json.dumps(patch)
        )


def run_once(plane: LocalControlPlane, directory: Path, config: Path, count: int, clean: bool) -> float:
    ports: dict[str, int] = {}
    processes: dict[str, subprocess.Popen[bytes]] = {}
    for name in ("replica-a", "replica-b"):
        ports[name] = free_port()
        command = local_run_command(
            plane.kubeconfig_for(name, ["system:masters"]),
            config,
            ports[name],
            0,
            standalone=False,
            namespace=NAMESPACE,
        )
        log = (directory / f"{name}.log").open("ab")
        processes[name] = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "POD_NAME": name, "PYTHONUNBUFFERED": "1"}
        )
    try:
        leader = wait_until(lambda: leader_of(ports), "a leader", timeout=60)
        wait_until(lambda: uniform_count(plane) == count, "the pool settled", timeout=60)
        started = time.monotonic()
        processes[leader].send_signal(signal.SIGTERM if clean else signal.SIGKILL)
        set_efa(plane, count // 2)
        wait_until(lambda: uniform_count(plane) == count // 2, "the change published", timeout=60, interval=0.05)
        return time.monotonic() - started
    finally:
        for process in processes.values():
            process.kill()
            process.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    repo = Path(__file__).resolve().parents[1]
    with (
        tempfile.TemporaryDirectory(prefix="fabriccap-failover-") as scratch,
        LocalControlPlane(Path(scratch) / "cp") as plane,
    ):
        directory = Path(scratch)
        kubectl(plane, "apply", "--server-side", "-f", str(repo / "crds" / "fabriccapabilities.yaml"))
        kubectl(plane, "wait", "--for=condition=Established", "--timeout=60s", "crd/fabriccapabilities.fabriccap.dev")
        kubectl(plane, "create", "namespace", NAMESPACE)
        config = directory / "config.yaml"
        config.write_text(
            yaml.safe_dump(
                {"debounceSeconds": 0.1, "fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [NAMESPACE]}}]}
            )
        )
        bodies = [world.daemon_set(namespace=NAMESPACE)]
        bodies += [world.node(f"{POOL}-{index}", pool=POOL, efa=64) for index in range(2)]
        for body in bodies:
            status = body.pop("status", None)
            kubectl(plane, "create", "-f", "-", stdin=json.dumps(creatable(body)))
            if status and body["kind"] == "Node":
                kubectl(
                    plane,
                    "patch",
                    "node",
                    body["metadata"]["name"],
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    json.dumps({"status": status}),
                )
        uid = json.loads(kubectl(plane, "get", "ds", "-n", NAMESPACE, world.EFA_DS, "-o", "json"))["metadata"]["uid"]
        for index in range(2):
            pod = world.pod(f"{POOL}-{index}", namespace=NAMESPACE, name=f"plugin-{index}")
            pod["metadata"]["ownerReferences"][0]["uid"] = uid
            status = pod.pop("status")
            kubectl(plane, "create", "-f", "-", stdin=json.dumps(creatable(pod)))
            kubectl(
                plane,
                "patch",
                "pod",
                "-n",
                NAMESPACE,
                f"plugin-{index}",
                "--subresource=status",
                "--type=merge",
                "-p",
                json.dumps({"status": status}),
            )
        count = 64
        killed, released = [], []
        for run in range(args.runs):
            killed.append(run_once(plane, directory, config, count, clean=False))
            count //= 2
            if count < 2:
                set_efa(plane, 64)
                count = 64
            print(f"run {run + 1}: SIGKILL failover {killed[-1]:.2f}s", flush=True)
        for _ in range(min(3, args.runs)):
            released.append(run_once(plane, directory, config, count, clean=True))
            count //= 2
            if count < 2:
                set_efa(plane, 64)
                count = 64
        print(
            json.dumps(
                {
                    "runs": args.runs,
                    "sigkill_p50_s": round(statistics.median(killed), 2),
                    "sigkill_max_s": round(max(killed), 2),
                    "sigkill_min_s": round(min(killed), 2),
                    "sigterm_release_p50_s": round(statistics.median(released), 2),
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
