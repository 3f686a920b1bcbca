"""Transport on real kubelets: NCCL's own log, printed by a real container, served by the real
kubelet and containerd through the API server's ``pods/log``, read by the operator.

Two nodes (pool ``real-nccl``, p5.48xlarge) with the test EFA device plugin advertising 4
devices each; pods request ``vpc.amazonaws.com/efa: 1`` and run the sleeper test image, which
prints a real NCCL log excerpt from tests/fixtures/nccl (mounted from a ConfigMap) and sleeps.
``fabriccap run`` reads with transport on, its first read a second after a container starts.

The operator reaches the API server through the log front (fabriccap_devtools.logstub), which
passes everything on and here answers no log itself: it only counts the reads, and holds one
pod's log after its first bytes so that the pod can be deleted while its log is read.

Root only (``realnodes``), like tests/e2e/test_real_nodes.py.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fabriccap.kube.paths import DAEMON_SETS, FABRIC_CAPABILITIES, PODS
from fabriccap_devtools import efaplugin
from fabriccap_devtools.controlplane.nodes import NodeOptions, node_specs
from fabriccap_devtools.logstub import LogStub
from fabriccap_devtools.world import EFA, KUBE_SYSTEM
from harness import E2ECluster, OperatorProcess, SyncKube, wait_until, write_config
from realnodes import real_node_cluster

pytestmark = pytest.mark.realnodes

REPO_ROOT = Path(__file__).resolve().parents[2]
CORPUS = REPO_ROOT / "tests" / "fixtures" / "nccl"
POOL = "real-nccl"
FCAP = f"efa-{POOL}"
NAMESPACE = "default"
LOGS_CONFIGMAP = "nccl-logs"
SOCKET_LOG = "nccl-tests-166-channels-socket.log"  # channels via NET/Socket: decisive
FABRIC_LOG = "aws-efa-eks-readme-p4d-mpijob-efa.log"  # provider efa, channels via NET/AWS Libfabric
# A line of a log that is no evidence: it must never leave the pod.
MARKER = f"fabriccap-e2e-marker-{uuid.uuid4().hex}: a training script's own line"
TIMEOUT = 120.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, uncaptured: Any, timings: Any) -> Iterator[E2ECluster]:
    """This module's own cluster in place of the shared one (conftest's ``kube`` follows it)."""
    with real_node_cluster(
        tmp_path_factory.mktemp("realnodes-transport"),
        node_specs(2, pool=POOL),
        uncaptured=uncaptured,
        timings=timings,
        what="transport: control plane + 2 nodes Ready",
        node_options=NodeOptions(status_update_frequency_seconds=2),
    ) as (cluster, _):
        yield cluster


@pytest.fixture(scope="module")
def stub(cluster: E2ECluster) -> Iterator[LogStub]:
    with LogStub(cluster.kubeconfig) as front:
        yield front


@pytest.fixture(scope="module")
def operator(cluster: E2ECluster, stub: LogStub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    directory = tmp_path_factory.mktemp("transport-operator")
    config = {"transport": {"enabled": True, "readAfterSeconds": [1, 4, 10, 30]}}
    process = OperatorProcess(
        kubeconfig=stub.kubeconfig_for(directory / "kubeconfig"),
        config=write_config(directory / "config.yaml", config),
        log_path=directory / "operator.log",
    )
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def ready_pool(cluster: E2ECluster, kube: SyncKube, operator: OperatorProcess) -> None:
    """The plugin advertising 4 on both nodes, the logs' ConfigMap, and the pool Ready."""
    kube.create(DAEMON_SETS.collection(KUBE_SYSTEM), efaplugin.daemon_set(devices=4))
    logs = {
        "socket.log": (CORPUS / SOCKET_LOG).read_text(),
        "fabric.log": (CORPUS / FABRIC_LOG).read_text(),
        "marked.log": f"{MARKER}\n{(CORPUS / SOCKET_LOG).read_text()}{MARKER}\n",
    }
    kube.create(
        f"/api/v1/namespaces/{NAMESPACE}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": LOGS_CONFIGMAP}, "data": logs},
    )
    wait_until(lambda: _ready(kube), f"{FCAP} Ready", timeout=TIMEOUT)


def _ready(kube: SyncKube) -> bool:
    obj = kube.get(FABRIC_CAPABILITIES.item(FCAP)) or {}
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@pytest.fixture
def pods(kube: SyncKube, ready_pool: None, operator: OperatorProcess) -> Iterator[list[str]]:
    """The pods a test creates, deleted after it; the pool's transport counts back to none."""
    operator.mark_log()
    created: list[str] = []
    yield created
    for name in created:
        kube.delete(PODS.item(name, NAMESPACE))
    wait_until(lambda: all(kube.get(PODS.item(name, NAMESPACE)) is None for name in created), "pods gone", TIMEOUT)
    wait_until(lambda: _transport(kube).get("socket", {}).get("pods") in (0, None), "no socket pod left", TIMEOUT)


def nccl_pod(name: str, *files: str, restart: bool = False) -> dict[str, Any]:
    """The sleeper printing ``files`` (one per run), requesting 1 EFA device, with requests and
    a memory limit (a shared machine)."""
    args = ["-print", ",".join(f"/logs/{file}" for file in files)]
    mounts = [{"name": "logs", "mountPath": "/logs", "readOnly": True}]
    volumes: list[dict[str, Any]] = [{"name": "logs", "configMap": {"name": LOGS_CONFIGMAP}}]
    if restart:
        args += ["-state", "/state", "-exit-after", "3s"]
        mounts.append({"name": "state", "mountPath": "/state"})
        volumes.append({"name": "state", "emptyDir": {}})
    resources = {"cpu": "10m", "memory": "16Mi", EFA: "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
            "restartPolicy": "Always" if restart else "Never",
            "containers": [
                {
                    "name": "nccl",
                    "image": "fabriccap.local/sleeper:v1",
                    "imagePullPolicy": "Never",
                    "args": args,
                    "volumeMounts": mounts,
                    "resources": {"requests": resources, "limits": {"memory": "32Mi", EFA: "1"}},
                }
            ],
            "volumes": volumes,
        },
    }


def _status(kube: SyncKube) -> dict[str, Any]:
    return dict((kube.get(FABRIC_CAPABILITIES.item(FCAP)) or {}).get("status") or {})


def _transport(kube: SyncKube) -> dict[str, Any]:
    return dict((_status(kube).get("workloads") or {}).get("transport") or {})


def _count(kube: SyncKube, verdict: str) -> int:
    return int((_transport(kube).get(verdict) or {}).get("pods") or 0)


def _events(cluster: E2ECluster, reason: str) -> list[dict[str, Any]]:
    listed = cluster.run_kubectl("get", "events", "-A", "--field-selector", f"reason={reason}", "-o", "json")
    return list(json.loads(listed.stdout)["items"])


def test_a_job_that_requests_efa_and_runs_nccl_over_sockets_is_fabric_not_used(
    cluster: E2ECluster, kube: SyncKube, pods: list[str], stub: LogStub
) -> None:
    kube.create(PODS.collection(NAMESPACE), nccl_pod("nccl-socket", "socket.log"))
    pods.append("nccl-socket")
    wait_until(lambda: _count(kube, "socket") == 1, "the socket verdict in the status", TIMEOUT)
    status = _status(kube)
    assert status["workloads"]["transport"]["socket"] == {"pods": 1, "workloads": 1, "requestingFabricPods": 1}
    offenders = [(o["kind"], o["name"], o["problem"]) for o in status["workloads"]["offenders"]]
    assert ("Pod", "nccl-socket", "FabricNotUsed") in offenders
    wait_until(lambda: bool(_events(cluster, "FabricNotUsed")), "the FabricNotUsed Event", TIMEOUT)
    (event,) = [e for e in _events(cluster, "FabricNotUsed") if e["involvedObject"]["name"] == "nccl-socket"]
    assert event["type"] == "Warning" and "NCCL uses TCP sockets" in event["message"]
    assert "via NET/Socket" in event["message"] and "aws-ofi-nccl" in event["message"]
    # kubectl get fcap -o wide: the TCP column.
    wide = cluster.run_kubectl("get", "fcap", FCAP, "-o", "wide").stdout.splitlines()
    # Read the column where its header starts: empty cells (NODEPOOL, LAUNCHED-WITHOUT on a
    # pool Karpenter does not own) make a split by whitespace shift the ones after them.
    start = wide[0].index(" TCP") + 1
    assert wide[1][start:].split()[0] == "1", wide
    # Decisive at the first read: read once, not again at the later steps.
    time.sleep(5)
    assert stub.stats.by_pod[f"{NAMESPACE}/nccl-socket"] == 1


def test_a_job_whose_nccl_uses_efa_is_fabric(kube: SyncKube, pods: list[str]) -> None:
    kube.create(PODS.collection(NAMESPACE), nccl_pod("nccl-fabric", "fabric.log"))
    pods.append("nccl-fabric")
    wait_until(lambda: _count(kube, "fabric") == 1, "the fabric verdict in the status", TIMEOUT)
    offenders = _status(kube)["workloads"]["offenders"]
    assert not [o for o in offenders if o["problem"] == "FabricNotUsed"]


def test_a_restarted_container_is_read_again(kube: SyncKube, pods: list[str], stub: LogStub) -> None:
    """Its first run prints the socket excerpt and exits; the kubelet restarts it and its
    second run prints the EFA one: the new log is read and its verdict replaces the old."""
    kube.create(PODS.collection(NAMESPACE), nccl_pod("nccl-restarting", "socket.log", "fabric.log", restart=True))
    pods.append("nccl-restarting")
    wait_until(lambda: _count(kube, "socket") == 1, "the first run's socket verdict", TIMEOUT)

    def restarted() -> bool:
        statuses = ((kube.get(PODS.item("nccl-restarting", NAMESPACE)) or {}).get("status") or {}).get(
            "containerStatuses"
        ) or []
        return any(s.get("restartCount", 0) >= 1 and "running" in (s.get("state") or {}) for s in statuses)

    wait_until(restarted, "the container to run again", TIMEOUT)
    wait_until(lambda: _count(kube, "fabric") == 1 and _count(kube, "socket") == 0, "the new run's verdict", TIMEOUT)
    assert stub.stats.by_pod[f"{NAMESPACE}/nccl-restarting"] >= 2


def test_a_pod_deleted_while_its_log_is_read_is_dropped(
    kube: SyncKube, pods: list[str], stub: LogStub, operator: OperatorProcess
) -> None:
    def dropped() -> float:
        return operator.metrics().get("fabriccap_transport_log_reads_total", result="dropped") or 0.0

    before = dropped()
    stub.hold(NAMESPACE, "nccl-leaving")
    kube.create(PODS.collection(NAMESPACE), nccl_pod("nccl-leaving", "socket.log"))
    try:
        wait_until(lambda: stub.waiting(NAMESPACE, "nccl-leaving"), "the read under way", TIMEOUT)
        kube.delete(PODS.item("nccl-leaving", NAMESPACE))
        wait_until(lambda: dropped() == before + 1, "the read dropped", TIMEOUT)
    finally:
        stub.release(NAMESPACE, "nccl-leaving")
    wait_until(lambda: kube.get(PODS.item("nccl-leaving", NAMESPACE)) is None, "the pod gone", TIMEOUT)
    assert _count(kube, "socket") == 0  # nothing of its log was kept
    log = operator.log()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]


def test_no_line_of_a_log_but_its_evidence_leaves_the_pod(
    cluster: E2ECluster, kube: SyncKube, pods: list[str], operator: OperatorProcess
) -> None:
    kube.create(PODS.collection(NAMESPACE), nccl_pod("nccl-marked", "marked.log"))
    pods.append("nccl-marked")
    wait_until(lambda: _count(kube, "socket") == 1, "the socket verdict", TIMEOUT)
    wait_until(
        lambda: any(e["involvedObject"]["name"] == "nccl-marked" for e in _events(cluster, "FabricNotUsed")),
        "its Event",
        TIMEOUT,
    )
    # The control: the marker is in the pod's log, where the operator read it.
    assert MARKER in cluster.run_kubectl("logs", "nccl-marked", "-n", NAMESPACE).stdout
    seen = {
        "the operator's log": operator.log(since_start=False),
        "the statuses": cluster.run_kubectl("get", "fcap", "-o", "json").stdout,
        "the Events": cluster.run_kubectl("get", "events", "-A", "-o", "json").stdout,
        "the metrics": "\n".join(f"{name} {labels}" for (name, labels) in operator.metrics().samples),
    }
    leaked = [where for where, text in seen.items() if MARKER in text]
    assert leaked == []
    assert "via NET/Socket" in seen["the Events"]  # the evidence line, and only it, travels
