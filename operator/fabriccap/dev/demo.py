"""``fabriccap demo``: local control plane + simulated EKS cluster + the operator, live.

Every step runs the real thing: the apiserver validates the CRD and the objects, the
operator is a separate ``fabriccap run`` process (as in a Deployment), and what is shown
comes from the real ``kubectl``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from importlib import resources
from pathlib import Path
from typing import Any

from fabriccap.core.config import default_config
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.index import FactIndex
from fabriccap.dev.controlplane import LocalControlPlane, down, record_process, stop_recorded
from fabriccap.dev.controlplane.binaries import BinaryError
from fabriccap.dev.controlplane.cluster import ControlPlaneError
from fabriccap.dev.launch import free_loopback_port, local_run_command
from fabriccap.dev.seeding import load_objects, set_node_fabric
from fabriccap.dev.waiting import WaitTimeoutError, wait_until
from fabriccap.dev.world import efa_device_class
from fabriccap.kube.client import connect
from fabriccap.kube.errors import KubeError
from fabriccap.offline.pipeline import evaluate_facts
from fabriccap.offline.snapshot import add_bodies

DEMO_POOL = "efa-p5-partial"
DRA_POOL = "efa-p5-dranet"
OPERATOR_PROCESS = "operator"


def data_path(name: str) -> Path:
    return Path(str(resources.files("fabriccap.dev") / "data" / name))


def demo_objects() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(data_path("demo-cluster.json").read_text())["items"]
    return items


def _say(message: str) -> None:
    print(f"\n==> {message}", flush=True)


def _kubectl(cp_kubectl: Path, kubeconfig: Path, *args: str, check: bool = True, stdin: str | None = None) -> str:
    result = subprocess.run(
        [str(cp_kubectl), f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        check=False,
        input=stdin,
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def _print_conditions(obj: dict[str, Any]) -> None:
    rows = [("TYPE", "STATUS", "REASON", "MESSAGE")] + [
        (c["type"], c["status"], c["reason"], c["message"]) for c in obj["status"]["conditions"]
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("   ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)) + "   " + row[3])


def start_operator(directory: Path, kubeconfig: Path, metrics_port: int = 0) -> subprocess.Popen[bytes]:
    log = (directory / "operator.log").open("ab")
    process = subprocess.Popen(
        local_run_command(kubeconfig, metrics_port=metrics_port),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # survives the demo with --keep-running; stopped by `controlplane down`
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    record_process(directory, OPERATOR_PROCESS, process.pid)
    return process


def stop_operator(directory: Path) -> None:
    stop_recorded(directory, OPERATOR_PROCESS)


def scrape(url: str) -> str | None:
    """The exposition at ``url``, or None while nothing answers there."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, OSError):
        return None


def _pool_ready_lines(exposition: str) -> list[str]:
    return [line for line in exposition.splitlines() if line.startswith("fabriccap_pool_ready{")]


async def _load(kubeconfig: Path, objects: list[dict[str, Any]]) -> None:
    async with await connect(str(kubeconfig)) as client:
        await load_objects(client, objects)


async def _advertise(kubeconfig: Path, node: str, count: int) -> None:
    async with await connect(str(kubeconfig)) as client:
        await set_node_fabric(client, node, "vpc.amazonaws.com/efa", count, count)


def _partial_pool_laggard(objects: list[dict[str, Any]]) -> str:
    for obj in objects:
        labels = obj["metadata"].get("labels") or {}
        allocatable = (obj.get("status") or {}).get("allocatable") or {}
        if (
            obj["kind"] == "Node"
            and DEMO_POOL.removeprefix("efa-") in labels.values()
            and str(allocatable.get("vpc.amazonaws.com/efa", "0")) == "0"
        ):
            return str(obj["metadata"]["name"])
    raise RuntimeError(f"the demo cluster has no non-advertising node in {DEMO_POOL}")


def run_demo(args: argparse.Namespace) -> int:
    # A directory of our own making (no --dir) goes when the demo ends: it holds etcd's data.
    owned = not args.dir
    directory = Path(args.dir or tempfile.mkdtemp(prefix="fabriccap-demo-")).resolve()
    control_plane = LocalControlPlane(directory)
    operator: subprocess.Popen[bytes] | None = None
    keep = bool(args.keep_running)
    try:
        _say(f"Starting a local control plane (etcd + kube-apiserver) in {directory}")
        info = control_plane.start(stop_at_exit=not keep)
        kubeconfig, kubectl = info.kubeconfig, info.kubectl
        _kubectl(kubectl, kubeconfig, "apply", "--server-side", "-f", str(data_path("fabriccapabilities.yaml")))
        _kubectl(
            kubectl,
            kubeconfig,
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/fabriccapabilities.fabriccap.dev",
        )

        objects = demo_objects()
        kinds = ("Node", "DaemonSet", "Pod", "ResourceSlice")
        counts = {kind: sum(1 for o in objects if o["kind"] == kind) for kind in kinds}
        _say(
            f"Loading a simulated EKS cluster: {counts['Node']} nodes, {counts['DaemonSet']} DaemonSets, "
            f"{counts['Pod']} pods, {counts['ResourceSlice']} DRANET ResourceSlices and the EFA DeviceClass "
            "(kubelets, controllers and the DRA driver simulated by writes)"
        )
        _kubectl(kubectl, kubeconfig, "apply", "-f", "-", stdin=json.dumps(efa_device_class()))
        asyncio.run(_load(kubeconfig, objects))
        print(
            _kubectl(
                kubectl,
                kubeconfig,
                "get",
                "nodes",
                "-L",
                "eks.amazonaws.com/nodegroup,karpenter.sh/nodepool,node.kubernetes.io/instance-type",
            ).rstrip()
        )

        metrics_port = free_loopback_port()
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        _say(f"Starting the operator (fabriccap run) against it, with /metrics on {metrics_url}")
        operator = start_operator(directory, kubeconfig, metrics_port)
        expected = _expected_names(objects)
        wait_until(
            lambda: (
                set(_kubectl(kubectl, kubeconfig, "get", "fcap", "-o", "name", check=False).split())
                >= {f"fabriccapability.fabriccap.dev/{name}" for name in expected}
            ),
            f"{len(expected)} FabricCapabilities",
            timeout=60.0,
            interval=0.25,
        )
        time.sleep(1.0)  # one debounce window, so every status is written
        exposition = wait_until(lambda: scrape(metrics_url), f"the operator's {metrics_url}", timeout=30.0)
        _say(f"The operator's metrics: {metrics_url} (Prometheus text; e.g. curl -s {metrics_url})")
        print("\n".join(_pool_ready_lines(exposition)))
        _say("kubectl get fcap -o wide")
        print(_kubectl(kubectl, kubeconfig, "get", "fcap", "-o", "wide").rstrip())
        _say(f"Conditions of {DEMO_POOL} (a partial rollout: one node advertises nothing)")
        _print_conditions(json.loads(_kubectl(kubectl, kubeconfig, "get", "fcap", DEMO_POOL, "-o", "json")))

        _say(f"{DRA_POOL}: EFA only in DRANET ResourceSlices (no vpc.amazonaws.com/efa in allocatable)")
        slices = json.loads(_kubectl(kubectl, kubeconfig, "get", "resourceslices", "-o", "json"))["items"]
        print(f"{'NODE':<46} {'DRIVER':<8} {'GENERATION':<11} DEVICES")
        for item in slices:
            spec = item["spec"]
            print(f"{spec['nodeName']:<46} {spec['driver']:<8} {spec['pool']['generation']:<11} {len(spec['devices'])}")
        dra_pool = json.loads(_kubectl(kubectl, kubeconfig, "get", "fcap", DRA_POOL, "-o", "json"))
        _print_conditions(dra_pool)
        recommendation = dra_pool["status"].get("recommendation") or {}
        print("recommendation.resourceClaimTemplate (paste under a ResourceClaimTemplate's spec):")
        print(json.dumps(recommendation.get("resourceClaimTemplate"), indent=2))

        laggard = _partial_pool_laggard(objects)
        _say(f"The EFA device plugin on {laggard} comes up: it now advertises vpc.amazonaws.com/efa: 32")
        asyncio.run(_advertise(kubeconfig, laggard, 32))
        started = time.monotonic()
        print(
            _kubectl(
                kubectl, kubeconfig, "wait", "--for=condition=Ready", "--timeout=60s", f"fcap/{DEMO_POOL}"
            ).rstrip()
            + f"  (after {time.monotonic() - started:.1f}s)"
        )
        print(_kubectl(kubectl, kubeconfig, "get", "fcap").rstrip())
        flipped = [line for line in _pool_ready_lines(scrape(metrics_url) or "") if f'name="{DEMO_POOL}"' in line]
        print("\n".join(flipped) or f"(no fabriccap_pool_ready series of {DEMO_POOL} at {metrics_url})")
        if keep:
            _say("Left running for exploration")
            print(f"export KUBECONFIG={kubeconfig}")
            print(f"{kubectl} get fcap -o wide      # the operator's log: {directory / 'operator.log'}")
            print(f"curl -s {metrics_url}      # the operator's metrics")
            print(f"stop everything: fabriccap controlplane down --dir {directory}")
        return 0
    except (ControlPlaneError, BinaryError, KubeError, RuntimeError, WaitTimeoutError) as error:
        print(f"error: {error}", file=sys.stderr)
        if (directory / "operator.log").exists():
            print(f"(operator log: {directory / 'operator.log'})", file=sys.stderr)
        keep = False
        return 1
    finally:
        if not keep:
            if operator is not None:
                stop_operator(directory)
            control_plane.stop()
            down(directory)
            if owned:
                shutil.rmtree(directory, ignore_errors=True)


def _expected_names(objects: list[dict[str, Any]]) -> list[str]:
    """The FabricCapabilities `fabriccap evaluate` computes for the same objects."""
    config = default_config()
    facts = FactIndex()
    add_bodies(facts, FactsExtractor(config), objects, "demo")
    return [capability.name for capability in evaluate_facts(config, facts).capabilities]
