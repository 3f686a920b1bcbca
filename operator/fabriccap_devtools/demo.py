"""``fabriccap demo``: local control plane + simulated EKS cluster + the operator, live.

The product's command line hands the command over here when the dev tools are installed.

Every step runs the real thing: the apiserver validates the CRD and the objects, the
operator is a separate ``fabriccap run`` process (as in a Deployment), and what is shown
comes from the real ``kubectl``.

With ``--real-nodes`` (root) the partial-rollout pool is two real kubelets instead of
simulated nodes: their counts come from the test EFA device plugin, through the kubelet, and
the laggard catches up when its plugin finds its devices, not by a status patch. The rest of
the cluster stays simulated, so the controller-manager runs without the garbage collector and
gives silent nodes a day (``controllers.SIMULATION_SAFE_CONTROLLERS``).

The operator reads transport (``demo_transport``): a job that requests EFA and whose NCCL log
says it chose sockets gets its Event and its TCP column. Without real nodes its log comes
through the demo's log front (no kubelet serves logs), and the demo says so; with real nodes
it is a real container's log.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fabriccap.configfile import load_config
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.index import FactIndex
from fabriccap.kube.client import connect
from fabriccap.kube.errors import KubeError
from fabriccap.offline.pipeline import evaluate_facts
from fabriccap.offline.snapshot import add_bodies
from fabriccap_devtools import demo_transport, demo_workloads, efaplugin, karpenter_crds
from fabriccap_devtools.catalog import CatalogSourceError
from fabriccap_devtools.checkout import CRD, EXAMPLE_CLUSTER
from fabriccap_devtools.controlplane import LocalControlPlane, down, record_process, stop_recorded
from fabriccap_devtools.controlplane.binaries import BinaryError
from fabriccap_devtools.controlplane.cluster import ControlPlaneError
from fabriccap_devtools.controlplane.controllers import (
    SIMULATED_NODE_GRACE_SECONDS,
    SIMULATION_SAFE_CONTROLLERS,
    ControllerOptions,
)
from fabriccap_devtools.controlplane.nodes import REAL_NODE_LABEL, node_specs
from fabriccap_devtools.launch import free_loopback_port, local_run_command
from fabriccap_devtools.seeding import load_cluster_scoped, load_objects, set_node_fabric
from fabriccap_devtools.waiting import WaitTimeoutError, wait_until
from fabriccap_devtools.world import EFA_DS, INSTANCE_TYPE, efa_device_class

DEMO_POOL = "efa-p5-partial"
DRA_POOL = "efa-p5-dranet"
OPERATOR_PROCESS = "operator"
LOG_FRONT_PROCESS = "log-front"
# With --real-nodes: the pool the kubelets form, and what a p5.48xlarge advertises.
REAL_POOL = DEMO_POOL.removeprefix("efa-")
REAL_NODES = 2
REAL_DEVICES = 32
NODEGROUP = "eks.amazonaws.com/nodegroup"


def demo_objects() -> list[dict[str, Any]]:
    """The simulated EKS cluster: the example every user can also run `fabriccap evaluate` on."""
    items: list[dict[str, Any]] = json.loads(EXAMPLE_CLUSTER.read_text())["items"]
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


def start_operator(
    directory: Path, kubeconfig: Path, metrics_port: int = 0, config: dict[str, Any] | None = None
) -> subprocess.Popen[bytes]:
    log = (directory / "operator.log").open("ab")
    config_file = None
    if config is not None:
        config_file = directory / "operator-config.yaml"
        config_file.write_text(json.dumps(config))  # JSON is YAML
    process = subprocess.Popen(
        local_run_command(kubeconfig, config_file, metrics_port=metrics_port),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # survives the demo with --keep-running; stopped by `controlplane down`
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    record_process(directory, OPERATOR_PROCESS, process.pid)
    return process


def stop_operator(directory: Path) -> None:
    stop_recorded(directory, OPERATOR_PROCESS)


def start_log_front(directory: Path, kubeconfig: Path) -> Path:
    """The log front (fabriccap_devtools.logstub) for simulated nodes, a process of its own like
    the operator (it outlives a --keep-running demo; `controlplane down` stops it): the
    kubeconfig that reaches the API server through it."""
    front = directory / "log-front.kubeconfig"
    front.unlink(missing_ok=True)
    log = (directory / "log-front.log").open("ab")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fabriccap_devtools.logstub",
            "--kubeconfig",
            str(kubeconfig),
            "--out",
            str(front),
            "--serve",
            "demo",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    record_process(directory, LOG_FRONT_PROCESS, process.pid)
    wait_until(front.exists, "the log front", timeout=30.0, interval=0.1)
    return front


def scrape(url: str) -> str | None:
    """The exposition at ``url``, or None while nothing answers there."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, OSError):
        return None


def _pool_ready_lines(exposition: str) -> list[str]:
    return [line for line in exposition.splitlines() if line.startswith("fabriccap_pool_ready{")]


def _install_workload_crds(kubectl: Path, kubeconfig: Path) -> bool:
    files = demo_workloads.crd_files(print)
    if files is None:
        return False
    for file in files:
        _kubectl(kubectl, kubeconfig, "apply", "--server-side", "-f", file)
    for file in files:
        wait_until(
            lambda f=file: (
                _kubectl(  # type: ignore[misc]
                    kubectl, kubeconfig, "wait", "--for=condition=Established", "--timeout=30s", "-f", f, check=False
                ).strip()
                != ""
            ),
            f"the CRD in {file}",
            timeout=60.0,
            interval=0.5,
        )
    return True


def _install_karpenter_crds(kubectl: Path, kubeconfig: Path) -> bool:
    """Karpenter's own CRDs, from the module the instance catalog comes from; False (and why)
    when the Go module proxy is out of reach: the demo then runs without its elastic pools."""
    try:
        files = karpenter_crds.crd_files()
    except CatalogSourceError as error:
        print(f"(no Karpenter CRDs: {error}; the demo runs without NodePools)")
        return False
    for file in files:
        _kubectl(kubectl, kubeconfig, "apply", "--server-side", "-f", str(file))
    for crd in karpenter_crds.KARPENTER_CRDS:
        _kubectl(kubectl, kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd.name}")
    return True


async def _load(
    kubeconfig: Path,
    objects: list[dict[str, Any]],
    *,
    real_nodes: bool = False,
    trainjob: bool = False,
    karpenter: bool = False,
) -> None:
    async with await connect(str(kubeconfig)) as client:
        if trainjob:
            await demo_workloads.create_owners(client, objects)
        if karpenter:
            await load_cluster_scoped(client, objects, karpenter_crds.RESOURCES)
        # With real nodes, controllers run: ServiceAccount admission, and a DaemonSet controller
        # that must adopt the simulated pods.
        await load_objects(client, objects, service_accounts=real_nodes, adopt=real_nodes)


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


def real_node_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The simulated cluster around real nodes of REAL_POOL.

    The pool's simulated nodes, and the pods bound to them, give way to the kubelets. The EFA
    plugin's DaemonSet becomes the test plugin's, under the same name and selector: the
    simulated plugin pods elsewhere stay its own (the DaemonSet controller keeps a pod per
    node that it would schedule there, and creates pods only where one is missing: on the
    real nodes). Every other DaemonSet leaves the real nodes out, or the controller would
    start its images there, which cannot be pulled.
    """
    real_pool_nodes = {
        o["metadata"]["name"]
        for o in objects
        if o["kind"] == "Node" and (o["metadata"].get("labels") or {}).get(NODEGROUP) == REAL_POOL
    }
    kept: list[dict[str, Any]] = []
    for obj in objects:
        if obj["kind"] == "Node" and obj["metadata"]["name"] in real_pool_nodes:
            continue
        if obj["kind"] == "Pod" and (obj.get("spec") or {}).get("nodeName") in real_pool_nodes:
            continue
        if obj["kind"] == "DaemonSet" and obj["metadata"]["name"] == EFA_DS:
            plugin = efaplugin.daemon_set(devices=REAL_DEVICES, instance_types=_instance_types(obj))
            # The simulated plugin's node affinity as it is (it also leaves the DRANET node
            # group out): only the pods and their image change.
            plugin["spec"]["template"]["spec"]["affinity"] = copy.deepcopy(obj["spec"]["template"]["spec"]["affinity"])
            kept.append(plugin)
            continue
        if obj["kind"] == "DaemonSet":
            obj = _excluding_real_nodes(obj)
        kept.append(obj)
    return kept


def _instance_types(daemon_set: dict[str, Any]) -> list[str]:
    terms = daemon_set["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    return [v for term in terms for e in term["matchExpressions"] if e["key"] == INSTANCE_TYPE for v in e["values"]]


def _excluding_real_nodes(daemon_set: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(daemon_set)
    spec = body["spec"]["template"]["spec"]
    affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": [{}]})
    for term in required["nodeSelectorTerms"]:
        term.setdefault("matchExpressions", []).append({"key": REAL_NODE_LABEL, "operator": "DoesNotExist"})
    return body


def run_demo(args: argparse.Namespace) -> int:
    # A directory of our own making (no --dir) goes when the demo ends: it holds etcd's data.
    owned = not args.dir
    directory = Path(args.dir or tempfile.mkdtemp(prefix="fabriccap-demo-")).resolve()
    real_nodes = bool(getattr(args, "real_nodes", False))
    if real_nodes:
        control_plane = LocalControlPlane(
            directory,
            nodes=node_specs(REAL_NODES, pool=REAL_POOL),
            controller_options=ControllerOptions(
                controllers=SIMULATION_SAFE_CONTROLLERS, node_monitor_grace_seconds=SIMULATED_NODE_GRACE_SECONDS
            ),
        )
    else:
        control_plane = LocalControlPlane(directory)
    operator: subprocess.Popen[bytes] | None = None
    keep = bool(args.keep_running)
    try:
        if real_nodes:
            _say(
                f"Starting a local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)"
                f" and {REAL_NODES} real kubelets in {directory}"
            )
        else:
            _say(f"Starting a local control plane (etcd + kube-apiserver) in {directory}")
        info = control_plane.start(stop_at_exit=not keep)
        kubeconfig, kubectl = info.kubeconfig, info.kubectl
        _kubectl(kubectl, kubeconfig, "apply", "--server-side", "-f", str(CRD))
        _kubectl(
            kubectl,
            kubeconfig,
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/fabriccapabilities.fabriccap.dev",
        )

        objects = demo_objects()
        laggard = _partial_pool_laggard(objects)
        if real_nodes:
            objects = real_node_objects(objects)
            laggard = info.nodes[-1]
            # Its plugin starts finding no device: the kubelet then advertises 0.
            efaplugin.set_device_count(control_plane.fleet.nodes[laggard].efa_state_dir, 0)
        kinds = ("Node", "DaemonSet", "Pod", "ResourceSlice")
        counts = {kind: sum(1 for o in objects if o["kind"] == kind) for kind in kinds}
        simulated = "kubelets, controllers and the DRA driver simulated by writes"
        if real_nodes:
            simulated = (
                f"pool {REAL_POOL}: {REAL_NODES} real kubelets and the test EFA device plugin; the rest {simulated}"
            )
        _say(
            f"Loading a simulated EKS cluster: {counts['Node']} nodes, {counts['DaemonSet']} DaemonSets, "
            f"{counts['Pod']} pods, {counts['ResourceSlice']} DRANET ResourceSlices and the EFA DeviceClass "
            f"({simulated})"
        )
        _kubectl(kubectl, kubeconfig, "apply", "-f", "-", stdin=json.dumps(efa_device_class()))
        with_trainjob = _install_workload_crds(kubectl, kubeconfig)
        with_karpenter = _install_karpenter_crds(kubectl, kubeconfig)
        if not with_karpenter:
            objects = [obj for obj in objects if obj["kind"] not in ("NodePool", "NodeClaim", "EC2NodeClass")]
        asyncio.run(_load(kubeconfig, objects, real_nodes=real_nodes, trainjob=with_trainjob, karpenter=with_karpenter))
        if real_nodes:
            started = time.monotonic()
            _wait_real_pool(kubectl, kubeconfig, info.nodes, laggard)
            print(f"device plugin registered on {', '.join(info.nodes)} after {time.monotonic() - started:.1f}s")
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
        # Transport on: it reads what NCCL chose from the pods' logs. Simulated nodes have no
        # kubelet to serve a log, so the operator reaches the API server through the log front.
        operator_kubeconfig = kubeconfig if real_nodes else start_log_front(directory, kubeconfig)
        operator = start_operator(directory, operator_kubeconfig, metrics_port, demo_transport.CONFIG)
        expected = set(expected_capability_names(objects)) | {DEMO_POOL}
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

        if with_karpenter:
            _karpenter_story(kubectl, kubeconfig)
        _trainjob_story(kubectl, kubeconfig, objects)
        _transport_story(kubectl, kubeconfig, directory, objects, info.nodes[0] if real_nodes else None)

        if real_nodes:
            _say(
                f"The EFA device plugin on {laggard} finds its devices: the kubelet now advertises"
                f" vpc.amazonaws.com/efa: {REAL_DEVICES}"
            )
            efaplugin.set_device_count(control_plane.fleet.nodes[laggard].efa_state_dir, None)
        else:
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
            if real_nodes:
                state = control_plane.fleet.nodes[laggard].efa_state_dir
                print(f"echo efa3 > {state / efaplugin.UNHEALTHY_FILE}   # a device of {laggard} turns unhealthy")
            print(f"stop everything: fabriccap-dev controlplane down --dir {directory}")
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
            stop_recorded(directory, LOG_FRONT_PROCESS)
            control_plane.stop()
            down(directory)
            if owned:
                shutil.rmtree(directory, ignore_errors=True)


TRAINING_POOL = "efa-p5-training"


def _fcap_line(kubectl: Path, kubeconfig: Path, name: str) -> str:
    return _kubectl(kubectl, kubeconfig, "get", "fcap", name, "-o", "wide").rstrip()


def _without_fabric(kubectl: Path, kubeconfig: Path) -> int | None:
    obj = json.loads(_kubectl(kubectl, kubeconfig, "get", "fcap", TRAINING_POOL, "-o", "json"))
    workloads = (obj.get("status") or {}).get("workloads")
    return None if workloads is None else int(workloads["withoutFabric"]["pods"])


ELASTIC_POOL = "efa-p5-elastic"
LAUNCHED_POOL = "efa-p5-spot"


def _event_line(
    kubectl: Path, kubeconfig: Path, namespace: str, reason: str, involved_name: str | None = None
) -> str | None:
    """The first Event of ``reason`` in ``namespace`` (on ``involved_name``, if given) as one line."""
    listed = _kubectl(
        kubectl,
        kubeconfig,
        "get",
        "events",
        "-n",
        namespace,
        f"--field-selector=reason={reason}",
        "-o",
        "json",
        check=False,
    )
    for event in json.loads(listed or "{}").get("items") or []:
        involved = event["involvedObject"]
        if involved_name is None or involved.get("name") == involved_name:
            return f"{event['type']}  {event['reason']}  {involved['kind']}/{involved['name']}: {event['message']}"
    return None


def _fcap_when(
    kubectl: Path, kubeconfig: Path, name: str, predicate: Callable[[dict[str, Any]], bool]
) -> dict[str, Any] | None:
    """The FabricCapability ``name`` once its status satisfies ``predicate``, else None."""
    listed = _kubectl(kubectl, kubeconfig, "get", "fcap", name, "-o", "json", check=False)
    obj = json.loads(listed) if listed else {}
    status = obj.get("status")
    return obj if status and predicate(status) else None


def _ready_from_catalog(status: dict[str, Any]) -> bool:
    ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
    return status["nodes"] == 0 and (ready.get("status"), ready.get("reason")) == ("True", "UniformCapability")


def _karpenter_story(kubectl: Path, kubeconfig: Path) -> None:
    """The elastic pools: an empty NodePool Ready from the catalog, and a node Karpenter launched
    without EFA for a job that asked for none, named in the job's Event."""
    _say(
        "Karpenter NodePool p5-elastic has no node (scaled to zero): it is a pool all the same, Ready from the"
        " instance catalog (every type it may launch attaches 32 EFA when a pod requests it)"
    )
    # The story is checked, not only told: the demo fails if the pool is not what it says.
    elastic = wait_until(
        lambda: _fcap_when(kubectl, kubeconfig, ELASTIC_POOL, _ready_from_catalog),
        f"{ELASTIC_POOL} Ready from the catalog",
        timeout=30.0,
        interval=0.25,
    )
    print(_fcap_line(kubectl, kubeconfig, ELASTIC_POOL))
    _print_conditions(elastic)
    _say(
        "Karpenter NodePool p5-spot launched a p5.48xlarge for JobSet gpt-sft, which asked for GPUs only:"
        " Karpenter attached no EFA, the node is out of the gate set, and the job's Event names the launch"
    )
    wait_until(
        lambda: _fcap_when(
            kubectl, kubeconfig, LAUNCHED_POOL, lambda status: status["gap"].get("launchedWithoutFabric") == 1
        ),
        f"{LAUNCHED_POOL} with a node launched without EFA",
        timeout=30.0,
        interval=0.25,
    )
    print(_fcap_line(kubectl, kubeconfig, LAUNCHED_POOL))
    line = wait_until(
        lambda: _event_line(kubectl, kubeconfig, "ml-training", "FabricNotRequested", "gpt-sft"),
        "the FabricNotRequested Event of gpt-sft",
        timeout=30.0,
        interval=0.25,
    )
    print(line)


def _trainjob_story(kubectl: Path, kubeconfig: Path, objects: list[dict[str, Any]]) -> None:
    """bert-finetune runs on the Ready pool without asking for EFA: the NO-FABRIC count, the
    Warning on the TrainJob, then the fix and the count dropping."""
    namespace, name = demo_workloads.NAMESPACE, demo_workloads.NAME
    _say(
        f"TrainJob {namespace}/{name} runs on p5-training asking for GPUs only (its resourcesPerNode replaced"
        " the runtime's resources): NCCL would use TCP sockets"
    )
    print(_fcap_line(kubectl, kubeconfig, TRAINING_POOL))

    def warning() -> str | None:
        return _event_line(kubectl, kubeconfig, namespace, "FabricNotRequested")

    print(wait_until(warning, "the FabricNotRequested Event", timeout=30.0, interval=0.25))
    _say(f"{name} is fixed (resourcesPerNode asks for {demo_workloads.EFA}: 32): its pods come back with EFA")
    asyncio.run(_fix_trainjob(kubeconfig, objects))
    started = time.monotonic()
    wait_until(lambda: _without_fabric(kubectl, kubeconfig) == 0, "NO-FABRIC to drop", timeout=30.0, interval=0.2)
    print(_fcap_line(kubectl, kubeconfig, TRAINING_POOL) + f"   (NO-FABRIC 0 after {time.monotonic() - started:.1f}s)")


async def _fix_trainjob(kubeconfig: Path, objects: list[dict[str, Any]]) -> None:
    async with await connect(str(kubeconfig)) as client:
        await demo_workloads.fix(client, objects)


def _transport_story(
    kubectl: Path, kubeconfig: Path, directory: Path, objects: list[dict[str, Any]], real_node: str | None
) -> None:
    """Job llama-sft requests EFA and its NCCL runs over sockets: its log says so, the operator
    reads it, the pool's TCP column counts it, and a FabricNotUsed Warning lands on the Job
    (on the pod, with real nodes: a bare pod there)."""
    namespace, job = demo_transport.NAMESPACE, demo_transport.JOB
    if real_node is None:
        pool, node = TRAINING_POOL, _training_node(objects)
        where = (
            f"on pool p5-training, node {node}. Simulated nodes have no kubelet to serve its log: the demo's log"
            " front answers pods/log for this pod with the excerpt, where the kubelet would"
        )
    else:
        pool, node = DEMO_POOL, real_node
        where = f"on real node {node} (pool {REAL_POOL}): a real container prints the excerpt, the kubelet serves it"
    _say(
        f"Job {namespace}/{job} requests vpc.amazonaws.com/efa and its image has no working aws-ofi-nccl: NCCL"
        f" falls back to TCP sockets. Its log is real ({demo_transport.SOURCE}); it runs {where}"
    )
    print("Offline, over the same log, as `kubectl logs ... | fabriccap transport` reads it:")
    print(demo_transport.offline_verdict(directory))
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    asyncio.run(_create_transport_job(kubeconfig, node, started_at, real=real_node is not None))
    started = time.monotonic()

    def warning() -> str | None:
        return _event_line(kubectl, kubeconfig, namespace, "FabricNotUsed")

    print("The operator read the log (1 s after the container started; by default, a minute):")
    print(wait_until(warning, "the FabricNotUsed Event", timeout=90.0, interval=0.25))
    wait_until(lambda: _tcp(kubectl, kubeconfig, pool) == 1, "the TCP column", timeout=30.0, interval=0.2)
    print(_fcap_line(kubectl, kubeconfig, pool) + f"   (TCP 1 after {time.monotonic() - started:.1f}s)")


def _training_node(objects: list[dict[str, Any]]) -> str:
    """A p5-training node for the job: the last one by name."""
    nodes = sorted(
        str(o["metadata"]["name"])
        for o in objects
        if o["kind"] == "Node" and (o["metadata"].get("labels") or {}).get(NODEGROUP) == "p5-training"
    )
    return nodes[-1]


def _tcp(kubectl: Path, kubeconfig: Path, name: str) -> int | None:
    obj = json.loads(_kubectl(kubectl, kubeconfig, "get", "fcap", name, "-o", "json"))
    transport = ((obj.get("status") or {}).get("workloads") or {}).get("transport")
    return None if transport is None else int(transport["socket"]["pods"])


async def _create_transport_job(kubeconfig: Path, node: str, started_at: str, *, real: bool) -> None:
    async with await connect(str(kubeconfig)) as client:
        if real:
            await demo_transport.create_real_job(client, node)
        else:
            await demo_transport.create_simulated_job(client, node, started_at)


def _wait_real_pool(kubectl: Path, kubeconfig: Path, nodes: tuple[str, ...], laggard: str) -> None:
    """Until the plugin registered on every real node: the first advertises REAL_DEVICES and
    the laggard's plugin pod is Ready (its kubelet advertises none)."""
    for node in nodes:
        if node != laggard:
            _kubectl(
                kubectl,
                kubeconfig,
                "wait",
                f"--for=jsonpath={{.status.allocatable.vpc\\.amazonaws\\.com/efa}}={REAL_DEVICES}",
                "--timeout=120s",
                f"node/{node}",
            )
    _kubectl(
        kubectl,
        kubeconfig,
        "-n",
        "kube-system",
        "rollout",
        "status",
        f"daemonset/{EFA_DS}",
        "--timeout=120s",
    )


def expected_capability_names(objects: list[dict[str, Any]]) -> list[str]:
    """The FabricCapabilities `fabriccap evaluate` computes for the same objects."""
    config = load_config(None)
    facts = FactIndex()
    add_bodies(facts, FactsExtractor(config), objects, "demo")
    return [capability.name for capability in evaluate_facts(config, facts).capabilities]
