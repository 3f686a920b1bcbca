"""The real chain, on real kubelets: test device plugin -> kubelet -> Node status -> operator.

Two nodes (``fcap-node-1``, ``fcap-node-2``, pool ``real-p5``, p5.48xlarge) run a kubelet v1.35
each, with its own containerd; kube-controller-manager and kube-scheduler run beside the
apiserver; the test EFA device plugin is a DaemonSet speaking the kubelet's v1beta1 API;
``fabriccap run`` watches it all. Nothing here patches a status: every figure the operator
sees was computed by a kubelet or a controller.

Root only (``realnodes`` marker). Elsewhere the tests skip, but under ``CI=true`` a missing
prerequisite fails them: CI runs as root, and a skipped suite there would prove nothing.
Timings are printed at the end of the session ("real-node timings").

The kubelets post status every 2 s here (their default: 10 s) and the controller-manager
declares a silent node Unknown after 20 s (default: 50 s), to keep the group short; the
latencies in docs/performance.md are measured with the defaults.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fabriccap.core.api import status_written
from fabriccap.kube.paths import DAEMON_SETS, FABRIC_CAPABILITIES, NODES, PODS
from fabriccap_devtools import efaplugin
from fabriccap_devtools.controlplane import host
from fabriccap_devtools.controlplane.cluster import LocalControlPlane
from fabriccap_devtools.controlplane.controllers import ControllerOptions
from fabriccap_devtools.controlplane.nodes import NodeFleet, NodeOptions, node_specs
from fabriccap_devtools.world import EFA_DS, KUBE_SYSTEM
from harness import EFA, E2ECluster, OperatorProcess, SyncKube, reasons, write_config
from realnodes import real_node_cluster, require_real_nodes
from recording import Recorder, Seen

pytestmark = pytest.mark.realnodes

POOL = "real-p5"
FCAP = f"efa-{POOL}"
NODE_1, NODE_2 = "fcap-node-1", "fcap-node-2"
DEVICES = 4
STATUS_FREQUENCY_SECONDS = 2
NODE_MONITOR_GRACE_SECONDS = 20
DAEMON_SET = f"{KUBE_SYSTEM}/{EFA_DS}"
NODES_PATH = NODES.collection()
PLUGIN_PODS_PATH = PODS.collection(KUBE_SYSTEM)
FCAPS_PATH = FABRIC_CAPABILITIES.collection()
# Generous: a shared 2-core machine; the measured figures are printed.
TIMEOUT = 90.0


# ---------------------------------------------------------------------------------------------
# Fixtures: one two-node cluster, the operator and the plugin for the whole module


@pytest.fixture(scope="module")
def real_cluster(
    tmp_path_factory: pytest.TempPathFactory, uncaptured: Any, timings: Any
) -> Iterator[tuple[E2ECluster, LocalControlPlane]]:
    with real_node_cluster(
        tmp_path_factory.mktemp("realnodes"),
        node_specs(2, pool=POOL),
        uncaptured=uncaptured,
        timings=timings,
        what="control plane + 2 nodes Ready (binaries and images cached)",
        node_options=NodeOptions(status_update_frequency_seconds=STATUS_FREQUENCY_SECONDS),
        controller_options=ControllerOptions(node_monitor_grace_seconds=NODE_MONITOR_GRACE_SECONDS),
    ) as started:
        yield started


@pytest.fixture(scope="module")
def cluster(real_cluster: tuple[E2ECluster, LocalControlPlane]) -> E2ECluster:
    """This module's own cluster in place of the shared one (conftest's ``kube`` follows it)."""
    return real_cluster[0]


@pytest.fixture(scope="module")
def fleet(real_cluster: tuple[E2ECluster, LocalControlPlane]) -> NodeFleet:
    return real_cluster[1].fleet


@pytest.fixture(scope="module")
def recorder(cluster: E2ECluster) -> Iterator[Recorder]:
    recording = Recorder(cluster.kubeconfig, [NODES_PATH, PLUGIN_PODS_PATH, FCAPS_PATH]).start()
    yield recording
    recording.stop()


@pytest.fixture(scope="module")
def operator(cluster: E2ECluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    directory = tmp_path_factory.mktemp("realnodes-operator")
    # The built-in efa profile, as shipped: the plugin is found in kube-system by the chart's label.
    process = OperatorProcess(
        kubeconfig=cluster.kubeconfig,
        config=write_config(directory / "config.yaml", {}),
        log_path=directory / "operator.log",
    )
    process.start()
    yield process
    process.stop()


@dataclass(frozen=True)
class Rollout:
    applied_at: float
    rolled_out_at: float
    advertised_at: float


@pytest.fixture(scope="module")
def efa_plugin(cluster: E2ECluster, kube: SyncKube, recorder: Recorder, operator: OperatorProcess) -> Rollout:
    applied_at = time.monotonic()
    kube.create(DAEMON_SETS.collection(KUBE_SYSTEM), efaplugin.daemon_set(devices=DEVICES))
    rolled_out = wait_daemon_set_ready(kube, 2)
    # The reliable "registered" signal is the Node's allocatable, not the pod's Running.
    advertised = max(wait_node_efa(recorder, name, DEVICES, DEVICES, since=applied_at).at for name in (NODE_1, NODE_2))
    return Rollout(applied_at, rolled_out, advertised)


@pytest.fixture
def steady(efa_plugin: Rollout, recorder: Recorder, operator: OperatorProcess, fleet: NodeFleet) -> Iterator[None]:
    """Each test starts from, and leaves behind, the healthy pool: Ready with 4 on both nodes."""
    assert operator.running, operator.log()
    operator.mark_log()
    recorder.wait_current(FCAPS_PATH, FCAP, is_uniformly_ready, "the pool Ready with 4 on both nodes", timeout=TIMEOUT)
    yield
    for name in (NODE_1, NODE_2):
        efaplugin.set_unhealthy(fleet.nodes[name].efa_state_dir, [])
        efaplugin.set_device_count(fleet.nodes[name].efa_state_dir, None)
        if not fleet.kubelet_running(name):
            fleet.start_kubelet(name)


# ---------------------------------------------------------------------------------------------
# Waiting on what the recorder saw


def efa_of(node: dict[str, Any]) -> tuple[str | None, str | None]:
    status = node.get("status") or {}
    return (status.get("capacity") or {}).get(EFA), (status.get("allocatable") or {}).get(EFA)


def ready_condition(obj: dict[str, Any]) -> dict[str, Any]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return dict(condition)
    return {}


def wait_node_efa(recorder: Recorder, name: str, capacity: int, allocatable: int, *, since: float) -> Seen:
    return recorder.wait_for(
        NODES_PATH,
        lambda s: s.name == name and efa_of(s.obj) == (str(capacity), str(allocatable)),
        f"{name} to report {EFA} capacity {capacity} / allocatable {allocatable}",
        since=since,
        timeout=TIMEOUT,
    )


def fcap_status(seen: Seen) -> dict[str, Any]:
    return dict(seen.obj.get("status") or {})


def wait_fcap(recorder: Recorder, predicate: Any, description: str, *, since: float) -> Seen:
    return recorder.wait_for(
        FCAPS_PATH,
        lambda s: s.name == FCAP and status_written(s.obj) and predicate(s.obj),
        f"{FCAP}: {description}",
        since=since,
        timeout=TIMEOUT,
    )


def is_uniformly_ready(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return (
        reasons(obj).get("Ready") == ("True", "UniformCapability")
        and status.get("uniformCount") == DEVICES
        and status.get("nodes") == 2
    )


def wait_pool_ready(recorder: Recorder, *, since: float) -> Seen:
    return wait_fcap(recorder, is_uniformly_ready, f"Ready with {DEVICES} on both nodes", since=since)


def wait_daemon_set_ready(kube: SyncKube, count: int) -> float:
    deadline = time.monotonic() + TIMEOUT
    while True:
        daemon_set = kube.get(DAEMON_SETS.item(EFA_DS, KUBE_SYSTEM)) or {}
        status = daemon_set.get("status") or {}
        if status.get("numberReady") == count and status.get("desiredNumberScheduled") == count:
            return time.monotonic()
        assert time.monotonic() < deadline, f"the plugin DaemonSet did not roll out: {json.dumps(status)}"
        time.sleep(0.2)


def plugin_pod_on(recorder: Recorder, node: str, *, before: float | None = None) -> dict[str, Any] | None:
    """The newest plugin pod bound to `node` that is not being deleted."""
    pods: dict[str, dict[str, Any]] = {}
    for seen in recorder.events(PLUGIN_PODS_PATH):
        if before is not None and seen.at > before:
            break
        if seen.type == "DELETED":
            pods.pop(seen.name, None)
        else:
            pods[seen.name] = seen.obj
    live = [
        p for p in pods.values() if p["spec"].get("nodeName") == node and not p["metadata"].get("deletionTimestamp")
    ]
    return max(live, key=lambda p: p["metadata"]["creationTimestamp"], default=None)


def pod_ready(pod: dict[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") == "Running" and ready_condition(pod).get("status") == "True"


# ---------------------------------------------------------------------------------------------
# The tests. First, before the module's cluster exists: up and down leave the machine as found


def test_controlplane_down_leaves_the_machine_as_it_found_it(tmp_path: Path, timings: Any) -> None:
    """`fabriccap-dev controlplane up --nodes 1` in one process, `down` in another: afterwards no
    process, bridge, cgroup, mount, directory or sysctl of ours remains. It runs before the
    module's cluster starts, so (unless another session runs nodes right now) this control
    plane is the machine's only one and its `down` restores the sysctls and removes the
    shared directories itself."""
    require_real_nodes()
    before = machine_snapshot()
    directory = tmp_path / "cp"
    started = time.monotonic()
    up = fabriccap_dev("controlplane", "up", "--nodes", "1", "--dir", str(directory))
    assert up.stdout.strip() == f"export KUBECONFIG={directory / 'kubeconfig'}", up.stderr
    timings.record("setup", "`controlplane up --nodes 1` (binaries and images cached)", time.monotonic() - started)
    during = machine_snapshot()
    assert during != before, "up changed nothing on the machine: the snapshot cannot see what it should"
    assert processes_mentioning(directory), "no process of the control plane found"

    stopping = time.monotonic()
    fabriccap_dev("controlplane", "down", "--dir", str(directory))
    timings.record("teardown", "`controlplane down` with 1 node", time.monotonic() - stopping)
    assert processes_mentioning(directory) == []
    assert machine_snapshot() == before
    assert host.host_mounts_under(directory) == []


def test_the_demo_runs_with_a_pool_of_real_kubelets(tmp_path: Path, timings: Any) -> None:
    """`fabriccap demo --real-nodes`: p5-partial is two kubelets; its laggard catches up when its
    plugin finds its devices, and the simulated pools around it say what they say without it."""
    require_real_nodes()
    started = time.monotonic()
    demo = fabriccap("demo", "--real-nodes", "--dir", str(tmp_path / "demo"))
    timings.record("demo", "`fabriccap demo --real-nodes`, start to finish", time.monotonic() - started)
    tables = [line.split() for line in demo.stdout.splitlines() if line.startswith("efa-")]
    rows = {row[0]: row for row in tables}
    # The first table: the real pool in a partial rollout, one plugin Ready with no device.
    first = next(row for row in tables if row[0] == "efa-p5-partial")
    assert first[1:6] == ["efa", "p5-partial", "2", "1", "1"] and first[6:8] == ["False", "PartialRollout"], first
    # The last: the same pool Ready with a p5's 32, the simulated ones unchanged.
    assert rows["efa-p5-partial"][1:9] == ["efa", "p5-partial", "2", "2", "32", "0", "True", "UniformCapability"]
    assert rows["efa-p5-training"][7:9] == ["True", "UniformCapability"]
    assert rows["efa-p4d-unhealthy"][6:8] == ["False", "MixedCounts"]
    assert "fcap-node-1" in demo.stdout and "device plugin registered" in demo.stdout
    # The job whose NCCL fell back to sockets, a real container on fcap-node-1: its Warning
    # (on the pod: a bare pod there) and the TCP column of the real pool.
    assert "a real container prints the excerpt, the kubelet serves it" in demo.stdout
    not_used = next(line for line in demo.stdout.splitlines() if line.startswith("Warning  FabricNotUsed"))
    assert not_used.startswith("Warning  FabricNotUsed  Pod/llama-sft-0: 1 pod on pool p5-partial requests"), not_used
    tcp = next(line.split() for line in demo.stdout.splitlines() if "(TCP 1 after" in line)
    assert tcp[0] == "efa-p5-partial" and tcp[tcp.index("(TCP") - 1] == "1", tcp  # the last column, TCP
    assert processes_mentioning(tmp_path) == []


# ---------------------------------------------------------------------------------------------
# The chain, on the module's two nodes


def test_the_plugin_daemon_set_rolls_out_and_the_pool_turns_ready_with_its_count(
    efa_plugin: Rollout, recorder: Recorder, kube: SyncKube, cluster: E2ECluster, timings: Any
) -> None:
    ready = wait_pool_ready(recorder, since=efa_plugin.applied_at)
    timings.record("rollout", "DaemonSet created -> its pods Ready", efa_plugin.rolled_out_at - efa_plugin.applied_at)
    timings.record(
        "rollout", "DaemonSet created -> both Nodes advertise 4", efa_plugin.advertised_at - efa_plugin.applied_at
    )
    timings.record("rollout", "DaemonSet created -> FabricCapability Ready", ready.at - efa_plugin.applied_at)

    status = fcap_status(ready)
    assert status["counts"] == [{"count": DEVICES, "nodes": 2}]
    assert status["advertisingNodes"] == 2
    assert status["devicePlugin"] == {"daemonSets": [DAEMON_SET], "readyNodes": 2}
    assert status["recommendation"]["resourcesPerNode"] == {EFA: str(DEVICES)}
    # The kubelet's figures: capacity and allocatable as the plugin's ListAndWatch reported them.
    for name in (NODE_1, NODE_2):
        node = kube.get(NODES.item(name))
        assert node is not None
        assert efa_of(node) == (str(DEVICES), str(DEVICES))
        assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.35.4"
    # 4 of a p5.48xlarge's 32: informational, never a reason to hold Ready back.
    assert reasons(ready.obj)["MatchesInstanceType"] == ("False", "BelowInstanceMaximum")

    # kubectl logs and exec reach the kubelet at its node IP (no /etc/hosts entry for the name).
    pod = plugin_pod_on(recorder, NODE_1)
    assert pod is not None
    logs = cluster.run_kubectl("-n", KUBE_SYSTEM, "logs", pod["metadata"]["name"]).stdout
    assert f"registered {EFA} with the kubelet" in logs
    listed = cluster.run_kubectl(
        "-n", KUBE_SYSTEM, "exec", pod["metadata"]["name"], "--", "/efa-device-plugin", "-list"
    ).stdout
    assert listed.strip() == ",".join(f"efa{i}=Healthy" for i in range(DEVICES))


def test_an_unhealthy_device_leaves_allocatable_and_the_pool_until_it_heals(
    steady: None, recorder: Recorder, fleet: NodeFleet, timings: Any
) -> None:
    state = fleet.nodes[NODE_1].efa_state_dir

    written = time.monotonic()
    efaplugin.set_unhealthy(state, ["efa3"])
    node_seen = wait_node_efa(recorder, NODE_1, DEVICES, DEVICES - 1, since=written)
    broken = wait_fcap(recorder, lambda o: reasons(o).get("Ready", ("",))[0] == "False", "not Ready", since=written)
    timings.record("health", "efa3 unhealthy: file written -> Node allocatable 3", node_seen.at - written)
    timings.record("health", "efa3 unhealthy: Node status -> FabricCapability", broken.at - node_seen.at)

    status = fcap_status(broken)
    # Capacity stays, allocatable drops: the kubelet's view of an unhealthy device.
    assert status["gap"]["unhealthy"] == 1
    assert status["gap"]["nodes"] == [NODE_1]
    assert status["counts"] == [{"count": DEVICES, "nodes": 1}, {"count": DEVICES - 1, "nodes": 1}]
    assert "uniformCount" not in status
    assert reasons(broken.obj)["Homogeneous"] == ("False", "MixedCounts")
    assert reasons(broken.obj)["Ready"] == ("False", "MixedCounts")

    healed = time.monotonic()
    efaplugin.set_unhealthy(state, [])
    node_seen = wait_node_efa(recorder, NODE_1, DEVICES, DEVICES, since=healed)
    ready = wait_pool_ready(recorder, since=healed)
    timings.record("health", "efa3 healthy: file written -> Node allocatable 4", node_seen.at - healed)
    timings.record("health", "efa3 healthy: Node status -> FabricCapability", ready.at - node_seen.at)
    assert fcap_status(ready)["gap"]["unhealthy"] == 0


def test_nodes_whose_plugins_report_different_counts_are_mixed(
    steady: None, recorder: Recorder, fleet: NodeFleet, timings: Any
) -> None:
    changed = time.monotonic()
    efaplugin.set_device_count(fleet.nodes[NODE_2].efa_state_dir, 8)
    node_seen = wait_node_efa(recorder, NODE_2, 8, 8, since=changed)
    mixed = wait_fcap(
        recorder, lambda o: reasons(o).get("Homogeneous") == ("False", "MixedCounts"), "MixedCounts", since=changed
    )
    timings.record("counts", "node 2 to 8 devices: Node status -> FabricCapability", mixed.at - node_seen.at)

    status = fcap_status(mixed)
    assert status["counts"] == [{"count": 8, "nodes": 1}, {"count": DEVICES, "nodes": 1}]
    assert "uniformCount" not in status
    assert status["gap"]["unhealthy"] == 0  # every device healthy: it is the counts that differ
    assert reasons(mixed.obj)["Ready"] == ("False", "MixedCounts")

    restored = time.monotonic()
    efaplugin.set_device_count(fleet.nodes[NODE_2].efa_state_dir, None)
    wait_pool_ready(recorder, since=restored)


def test_a_pod_asking_for_more_efa_than_a_node_has_stays_pending_with_the_schedulers_reason(
    steady: None, kube: SyncKube, cluster: E2ECluster, timings: Any, operator: OperatorProcess
) -> None:
    suffix = uuid.uuid4().hex[:6]
    fits, too_big = f"efa-2-{suffix}", f"efa-{DEVICES + 1}-{suffix}"
    created = time.monotonic()
    kube.create(PODS.collection("default"), workload_pod(fits, 2))
    kube.create(PODS.collection("default"), workload_pod(too_big, DEVICES + 1))
    try:
        pending = wait_pod(kube, too_big, lambda c: c.get("type") == "PodScheduled" and c.get("status") == "False")
        timings.record(
            "scheduling", f"pod asking for {DEVICES + 1} created -> PodScheduled=False", time.monotonic() - created
        )
        condition = next(c for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
        assert condition["reason"] == "Unschedulable"
        assert condition["message"].startswith(f"0/2 nodes are available: 2 Insufficient {EFA}."), condition["message"]
        print(f"scheduler's message: {condition['message']}")

        # The operator reads the real scheduler's message: counted, and a Warning on the pod
        # (a bare pod is its own top-level owner) that says no pool offers that many.
        deadline = time.monotonic() + TIMEOUT
        while operator.metrics().get("fabriccap_unschedulable_fabric_pods", fabric="efa") != 1.0:
            assert time.monotonic() < deadline, "the unschedulable pod was never counted"
            time.sleep(0.5)

        def warnings() -> list[dict[str, Any]]:
            return [
                event
                for event in kube.list_objects("/api/v1/namespaces/default/events")
                if event["involvedObject"].get("name") == too_big and event["reason"] == "FabricUnschedulable"
            ]

        while not (events := warnings()):  # the Event follows the gauge within the same round
            assert time.monotonic() < deadline, "no FabricUnschedulable Event"
            time.sleep(0.5)
        assert len(events) == 1, events
        assert condition["message"].strip() in events[0]["message"]
        assert events[0]["message"].endswith(f"no pool has {EFA} Ready with {DEVICES + 1} or more per node")

        # The control: a request that fits runs, and Allocate handed it the two devices
        # GetPreferredAllocation chose (the lowest; the kubelet passes them in no set order).
        wait_pod(kube, fits, lambda c: c.get("type") == "Ready" and c.get("status") == "True")
        logs = cluster.run_kubectl("logs", fits).stdout
        allocated = [line.partition("=")[2] for line in logs.splitlines() if line.startswith("FABRICCAP_EFA_DEVICES=")]
        assert [sorted(a.split(",")) for a in allocated] == [["efa0", "efa1"]], logs
        # Still pending: nothing freed a node in the meantime.
        pod = kube.get(PODS.item(too_big, "default"))
        assert pod is not None and pod["status"]["phase"] == "Pending"
    finally:
        for name in (fits, too_big):
            kube.delete(PODS.item(name, "default"))


def test_a_deleted_plugin_pod_registers_again_with_no_false_ready_in_between(
    steady: None, recorder: Recorder, kube: SyncKube, timings: Any
) -> None:
    old = plugin_pod_on(recorder, NODE_2)
    assert old is not None
    deleted = time.monotonic()
    kube.delete(PODS.item(old["metadata"]["name"], KUBE_SYSTEM))

    replacement = recorder.wait_for(
        PLUGIN_PODS_PATH,
        lambda s: (
            s.obj["spec"].get("nodeName") == NODE_2
            and s.obj["metadata"]["uid"] != old["metadata"]["uid"]
            and pod_ready(s.obj)
        ),
        f"a new Ready plugin pod on {NODE_2}",
        since=deleted,
        timeout=TIMEOUT,
    )
    ready_again = wait_fcap(
        recorder,
        lambda o: is_uniformly_ready(o) and int(o["metadata"]["resourceVersion"]) > replacement.resource_version,
        "Ready again after the new plugin pod",
        since=deleted,
    )
    timings.record("plugin restart", "plugin pod deleted -> replacement Ready", replacement.at - deleted)
    timings.record("plugin restart", "plugin pod deleted -> FabricCapability Ready again", ready_again.at - deleted)

    history = [s for s in recorder.events(FCAPS_PATH, since=deleted, name=FCAP) if s.at <= ready_again.at]
    ready_states = [reasons(s.obj).get("Ready") for s in history]
    print("Ready after the delete: " + " -> ".join(f"{state[0]}/{state[1]}" for state in ready_states if state))
    # The operator saw the gap...
    gap = next((s for s in history if reasons(s.obj).get("Ready", ("",))[0] == "False"), None)
    assert gap is not None, f"no Ready=False between the delete and the replacement: {ready_states}"
    # ...and said Ready again only once the replacement was Ready: one etcd orders every write,
    # so a Ready=True written before the replacement's Ready has a lower resourceVersion.
    for seen in history:
        if reasons(seen.obj).get("Ready", ("",))[0] == "True" and seen.resource_version > gap.resource_version:
            assert seen.resource_version > replacement.resource_version, (
                f"Ready=True (rv {seen.resource_version}) before the replacement plugin pod was Ready "
                f"(rv {replacement.resource_version})"
            )
            assert fcap_status(seen)["devicePlugin"]["readyNodes"] == 2


def test_a_stopped_kubelet_leaves_the_gate_set_and_the_pool_stays_ready(
    steady: None, recorder: Recorder, kube: SyncKube, fleet: NodeFleet, cluster: E2ECluster, timings: Any
) -> None:
    """A node whose kubelet stops keeps the figures it last posted, and node-lifecycle marks its
    pods NotReady, the plugin pod among them. Judged, that node made the pool DevicePluginGap
    (before round 3); now its Ready condition (Unknown) takes it out of the gate set: the pool
    is judged on the node that still reports, and says how many it left out."""
    stopped = time.monotonic()
    fleet.stop_kubelet(NODE_2)
    unknown = recorder.wait_for(
        NODES_PATH,
        lambda s: s.name == NODE_2 and ready_condition(s.obj).get("status") == "Unknown",
        f"{NODE_2} Ready=Unknown",
        since=stopped,
        timeout=NODE_MONITOR_GRACE_SECONDS + TIMEOUT,
    )
    left_out = wait_fcap(
        recorder, lambda o: (o.get("status") or {}).get("unreadyNodes") == 1, "unreadyNodes 1", since=stopped
    )
    timings.record("kubelet stop", "kubelet stopped -> Node Ready=Unknown", unknown.at - stopped)
    timings.record("kubelet stop", "kubelet stopped -> node out of the gate set", left_out.at - stopped)

    condition = ready_condition(unknown.obj)
    assert condition["reason"] == "NodeStatusUnknown"
    assert condition["message"] == "Kubelet stopped posting node status."
    # The Node keeps the figures its kubelet last posted.
    assert efa_of(unknown.obj) == (str(DEVICES), str(DEVICES))
    node = kube.get(NODES.item(NODE_2))
    assert node is not None
    assert {t["key"] for t in node["spec"].get("taints") or []} >= {"node.kubernetes.io/unreachable"}
    status = fcap_status(left_out)
    assert (status["nodes"], status["unreadyNodes"], status["uniformCount"]) == (1, 1, DEVICES)
    assert reasons(left_out.obj)["Ready"] == ("True", "UniformCapability")
    # Never a DevicePluginGap on the way: the stale node was never judged.
    written = recorder.events(FCAPS_PATH, since=stopped, name=FCAP)
    assert all(reasons(seen.obj).get("Ready", ("", ""))[1] != "DevicePluginGap" for seen in written), [
        reasons(seen.obj).get("Ready") for seen in written
    ]

    restarted = time.monotonic()
    fleet.start_kubelet(NODE_2)
    back = recorder.wait_for(
        NODES_PATH,
        lambda s: s.name == NODE_2 and ready_condition(s.obj).get("status") == "True",
        f"{NODE_2} Ready again",
        since=restarted,
        timeout=TIMEOUT,
    )
    ready = wait_pool_ready(recorder, since=restarted)
    timings.record("kubelet stop", "kubelet started -> Node Ready", back.at - restarted)
    timings.record("kubelet stop", "kubelet started -> FabricCapability Ready", ready.at - restarted)
    # The plugin noticed the new kubelet (a new kubelet.sock, its own socket wiped) and registered again.
    pod = plugin_pod_on(recorder, NODE_2)
    assert pod is not None
    logs = cluster.run_kubectl("-n", KUBE_SYSTEM, "logs", pod["metadata"]["name"]).stdout
    assert "registering again" in logs, logs


def _command(module: str, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, f"{name} {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
    return result


def fabriccap(*args: str) -> subprocess.CompletedProcess[str]:
    return _command("fabriccap", "fabriccap", *args)


def fabriccap_dev(*args: str) -> subprocess.CompletedProcess[str]:
    return _command("fabriccap_devtools", "fabriccap-dev", *args)


def machine_snapshot() -> dict[str, Any]:
    """What real nodes may change on this machine, as far as it concerns us."""
    hierarchies = host.cgroup_hierarchies()
    return {
        "links": sorted(p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(host.BRIDGE_PREFIX)),
        "cgroups": sorted(str(c) for h in hierarchies for c in h.glob(f"{host.CGROUP_PREFIX}*")),
        "sysctls": {key: Path("/proc/sys", key).read_text().strip() for key in host.KUBELET_SYSCTLS},
        "bind targets": {str(t): t.exists() for t in host.NODE_BIND_TARGETS},
        "registry": host.REGISTRY_DIR.exists(),
    }


def processes_mentioning(directory: Path) -> list[int]:
    return host.processes_mentioning(str(directory))


def workload_pod(name: str, efa: int) -> dict[str, Any]:
    """A test workload; with requests and a memory limit (a shared machine: BestEffort pods are
    the first to be OOM-killed)."""
    resources = {"cpu": "10m", "memory": "16Mi", EFA: str(efa)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "sleeper",
                    "image": "fabriccap.local/sleeper:v1",
                    "imagePullPolicy": "Never",
                    "resources": {"requests": resources, "limits": {"memory": "32Mi", EFA: str(efa)}},
                }
            ],
        },
    }


def wait_pod(kube: SyncKube, name: str, condition: Any) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT
    while True:
        pod = kube.get(PODS.item(name, "default")) or {}
        if any(condition(c) for c in (pod.get("status") or {}).get("conditions") or []):
            return pod
        assert time.monotonic() < deadline, f"pod {name}: {json.dumps(pod.get('status'))}"
        time.sleep(0.2)
