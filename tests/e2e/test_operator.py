"""The operator end to end: `fabriccap run` as a subprocess against a real kube-apiserver.

Each scenario is reached the way a cluster reaches it: nodes registering with (or without)
`vpc.amazonaws.com/efa` in their status, device-plugin pods becoming Ready or crash-looping,
`kubectl cordon`, nodes going away. Assertions read the FabricCapability objects (and the
operator's metrics) as users, dashboards and `kubectl wait` do.

One operator process serves the module; tests that restart it leave it running. Each test
owns its pool names (a random prefix) and deletes what it created. The device-plugin
namespace is a fresh one of this module's, so a real plugin elsewhere never interferes and
"no DaemonSet at all" is reachable: each test installs its own plugin DaemonSet there.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from fabriccap.controller.metrics import EXPOSITION_MAX_AGE_SECONDS
from fabriccap.core.api import READY_LABEL, status_written
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from fabriccap_devtools.controlplane import LocalControlPlane
from fabriccap_devtools.world import KARPENTER
from harness import (
    EFA,
    FCAP_PATH,
    NODEGROUP,
    Metrics,
    OperatorProcess,
    SyncKube,
    World,
    condition,
    listening_socket,
    node_body,
    node_path,
    reasons,
    wait_until,
    watched_kind_fingerprints,
    without_volatile,
    write_config,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import E2ECluster

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = REPO_ROOT / "crds" / "fabriccapabilities.yaml"
GRACE_SECONDS = 3.0
DEBOUNCE_SECONDS = 0.1
# Long enough for several debounce windows: used only to prove that nothing changes.
QUIET_SECONDS = 1.0
STATUS_TIMEOUT = 20.0


# ---------------------------------------------------------------------------------------------
# Fixtures


def operator_config(namespace: str) -> dict[str, Any]:
    return {
        "poolGracePeriodSeconds": GRACE_SECONDS,
        "debounceSeconds": DEBOUNCE_SECONDS,
        "fabrics": [
            {
                "name": "efa",
                "devicePlugin": {
                    "namespace": namespace,
                    "daemonSetSelector": "app.kubernetes.io/name=aws-efa-k8s-device-plugin",
                },
            }
        ],
    }


@pytest.fixture(scope="module")
def config_file(plugin_namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_config(tmp_path_factory.mktemp("operator") / "config.yaml", operator_config(plugin_namespace))


@pytest.fixture(scope="module")
def operator(cluster: E2ECluster, config_file: Path) -> Iterator[OperatorProcess]:
    process = OperatorProcess(
        kubeconfig=cluster.kubeconfig, config=config_file, log_path=config_file.parent / "operator.log"
    )
    process.start()
    yield process
    process.stop()


@dataclass(kw_only=True)
class Scenario(World):
    """One test's world, plus the operator that watches it and waiting for its answers."""

    cluster: E2ECluster = field(repr=False)
    operator: OperatorProcess = field(repr=False)

    def wait_status(
        self,
        label: str,
        predicate: Callable[[dict[str, Any]], bool],
        description: str,
        timeout: float = STATUS_TIMEOUT,
    ) -> dict[str, Any]:
        """Poll the pool's FabricCapability until `predicate(obj)`; show the last one if not."""
        last: list[dict[str, Any] | None] = [None]

        def probe() -> dict[str, Any] | None:
            obj = last[0] = self.fcap(label)
            return obj if obj is not None and status_written(obj) and predicate(obj) else None

        try:
            return wait_until(probe, f"{self.fcap_name(label)}: {description}", timeout=timeout)
        except AssertionError as error:
            shown = json.dumps((last[0] or {}).get("status"), indent=1)
            raise AssertionError(f"{error}\nlast seen status: {shown}") from None

    def wait_ready(self, label: str, status: str, reason: str, **more: Any) -> dict[str, Any]:
        """Wait for Ready=`status`/`reason` with every top-level status field in `more` equal."""

        def matches(obj: dict[str, Any]) -> bool:
            current = obj["status"]
            return reasons(obj).get("Ready") == (status, reason) and all(
                current.get(key) == value for key, value in more.items()
            )

        wanted = ", ".join([f"Ready={status}/{reason}", *(f"{k}={v}" for k, v in more.items())])
        return self.wait_status(label, matches, wanted)


@pytest.fixture
def scenario(
    kube: SyncKube, cluster: E2ECluster, operator: OperatorProcess, plugin_namespace: str
) -> Iterator[Scenario]:
    if not operator.running:  # a restarting test failed half-way
        operator.stop()
        operator.start()
    operator.mark_log()
    world = Scenario(kube=kube, cluster=cluster, operator=operator, namespace=plugin_namespace)
    yield world
    world.cleanup()
    assert operator.running, f"the operator died during the test:\n{operator.log()}"


def kubectl_table(cluster: E2ECluster, *args: str) -> list[dict[str, str]]:
    """`kubectl get` output as rows of {column: value}; an absent value is "" (columns are
    cut at the header's offsets, since kubectl prints nothing for a missing field)."""
    lines = cluster.run_kubectl("get", *args).stdout.splitlines()
    columns = [(match.group(), match.start()) for match in re.finditer(r"\S+", lines[0])]
    bounds = [start for _, start in columns[1:]] + [None]
    return [
        {name: line[start:end].strip() for (name, start), end in zip(columns, bounds, strict=True)}
        for line in lines[1:]
    ]


def evaluate_json(*args: str) -> dict[str, dict[str, Any]]:
    """``fabriccap evaluate ARGS -o json`` as a user runs it; the objects by name."""
    result = subprocess.run(
        [sys.executable, "-m", "fabriccap", "evaluate", *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return {obj["metadata"]["name"]: obj for obj in json.loads(result.stdout)["items"]}


def transition_times(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["lastTransitionTime"] for c in obj["status"]["conditions"]}


# ---------------------------------------------------------------------------------------------
# 1-9: each outcome, reached by what kubelets, device plugins and admins do


def test_healthy_pool_is_ready_with_a_recommendation(scenario: Scenario) -> None:
    nodes = scenario.add_pool("healthy", 2)

    obj = scenario.wait_ready("healthy", "True", "UniformCapability", nodes=2)

    status = obj["status"]
    assert reasons(obj) == {
        "DevicePluginReady": ("True", "PluginReadyOnAllNodes"),
        "Advertised": ("True", "AllNodesAdvertise"),
        "Homogeneous": ("True", "UniformCount"),
        "MatchesInstanceType": ("True", "MatchesInstanceMaximum"),
        "Ready": ("True", "UniformCapability"),
        "Stalled": ("False", "NotStalled"),
    }
    assert status["fabric"] == "efa"
    assert status["resourceName"] == EFA
    assert status["pool"] == {"key": NODEGROUP, "value": scenario.pool("healthy")}
    assert (status["nodes"], status["cordonedNodes"], status["advertisingNodes"]) == (2, 0, 2)
    assert status["uniformCount"] == 32
    assert status["counts"] == [{"count": 32, "nodes": 2}]
    assert status["instanceTypes"] == [{"name": "p5.48xlarge", "nodes": 2, "maxCount": 32}]
    assert status["devicePlugin"] == {
        "daemonSets": [f"{scenario.namespace}/{scenario.prefix}-efa-plugin"],
        "readyNodes": 2,
    }
    assert status["gap"] == {
        "pluginReadyNotAdvertised": 0,
        "unhealthy": 0,
        "advertisedWithoutPlugin": 0,
        "launchedWithoutFabric": 0,  # round 3: no node of it was launched without EFA
        "conflictingAdvertisers": 0,  # no node advertises through both a plugin and DRA
        "nodes": [],
        "truncated": False,
    }
    assert status["recommendation"]["resourcesPerNode"] == {EFA: "32"}
    assert {"name": "FI_PROVIDER", "value": "efa"} in status["recommendation"]["env"]
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    assert all(c["observedGeneration"] == obj["metadata"]["generation"] for c in status["conditions"])
    assert condition(obj, "Ready")["message"].startswith("all 2 nodes advertise vpc.amazonaws.com/efa: 32")
    labels = obj["metadata"]["labels"]
    assert labels["fabriccap.dev/fabric"] == "efa"
    assert labels["fabriccap.dev/pool"] == scenario.pool("healthy")
    assert labels["app.kubernetes.io/managed-by"] == "fabriccap"
    assert sorted(nodes) == sorted(scenario.nodes)

    metrics = scenario.operator.metrics()
    name = scenario.fcap_name("healthy")
    pool_labels = {"name": name, "fabric": "efa", "pool": scenario.pool("healthy")}
    assert metrics.get("fabriccap_pool_ready", **pool_labels) == 1.0
    assert metrics.get("fabriccap_pool_uniform_allocatable", **pool_labels) == 32.0
    assert metrics.get("fabriccap_pool_condition", **pool_labels, condition="Ready", status="true") == 1.0
    assert metrics.get("fabriccap_pool_condition", **pool_labels, condition="Ready", status="false") == 0.0


def test_partial_rollout_becomes_ready_when_the_last_node_advertises(scenario: Scenario) -> None:
    first, second, laggard = scenario.add_pool("partial", 3)
    scenario.set_fabric(laggard, 0)

    before = scenario.wait_ready("partial", "False", "PartialRollout", advertisingNodes=2)
    assert before["status"]["counts"] == [{"count": 32, "nodes": 2}, {"count": 0, "nodes": 1}]
    assert "uniformCount" not in before["status"]
    assert "recommendation" not in before["status"]
    assert reasons(before)["Advertised"] == ("False", "PartiallyAdvertised")
    assert reasons(before)["Homogeneous"] == ("False", "PartialRollout")
    assert laggard in condition(before, "Homogeneous")["message"]
    assert condition(before, "Advertised")["message"] == (f"{EFA} advertised on 2 of 3 target nodes; 0 on {laggard}")
    # The plugin is Ready there but nothing is advertised: the provider is present, not the capability.
    assert before["status"]["gap"]["pluginReadyNotAdvertised"] == 1
    assert before["status"]["gap"]["nodes"] == [laggard]

    scenario.set_fabric(laggard, 32)

    after = scenario.wait_ready("partial", "True", "UniformCapability", uniformCount=32, advertisingNodes=3)
    assert after["status"]["gap"]["nodes"] == []
    assert after["status"]["recommendation"]["resourcesPerNode"] == {EFA: "32"}
    # Conditions whose status did not move keep their transition time.
    for unchanged in ("DevicePluginReady", "Stalled"):
        assert condition(after, unchanged)["lastTransitionTime"] == condition(before, unchanged)["lastTransitionTime"]
    assert {first, second} <= set(scenario.nodes)


def test_mixed_instance_types_are_mixed_counts_and_stalled(scenario: Scenario) -> None:
    p4d = scenario.add_node("mixed", 0, instance_type="p4d.24xlarge", efa=4)
    p5 = scenario.add_node("mixed", 1, instance_type="p5.48xlarge", efa=32)
    scenario.add_plugin_pod(p4d)
    scenario.add_plugin_pod(p5)

    # MixedCounts holds as soon as both nodes are seen, possibly before both plugin pods are seen
    # Ready: wait for those too (a loaded run caught DevicePluginReady at PluginNotScheduled).
    obj = scenario.wait_status(
        "mixed",
        lambda o: (
            reasons(o).get("Ready") == ("False", "MixedCounts")
            and o["status"]["nodes"] == 2
            and o["status"]["devicePlugin"]["readyNodes"] == 2
        ),
        "Ready=False/MixedCounts with both plugin pods Ready",
    )

    status = obj["status"]
    assert reasons(obj)["Homogeneous"] == ("False", "MixedCounts")
    assert reasons(obj)["Stalled"] == ("True", "HeterogeneousInstanceTypes")
    assert reasons(obj)["MatchesInstanceType"] == ("True", "MatchesInstanceMaximum")
    assert reasons(obj)["DevicePluginReady"] == ("True", "PluginReadyOnAllNodes")
    assert status["counts"] == [{"count": 32, "nodes": 1}, {"count": 4, "nodes": 1}]
    assert status["instanceTypes"] == [
        {"name": "p4d.24xlarge", "nodes": 1, "maxCount": 4},
        {"name": "p5.48xlarge", "nodes": 1, "maxCount": 32},
    ]
    assert "uniformCount" not in status
    assert "recommendation" not in status
    assert "p4d.24xlarge (4)" in condition(obj, "Stalled")["message"]


def test_plugin_ready_but_nothing_advertised(scenario: Scenario) -> None:
    # g6.2xlarge: GPU nodes the EFA plugin lands on, but the type has no EFA at all.
    scenario.add_pool("dark", 2, instance_type="g6.2xlarge", efa=None)

    # NotAdvertised with both nodes holds as soon as the operator has seen them, possibly before
    # it has seen both plugin pods turn ready: wait for those too, or the gap counts one node.
    obj = scenario.wait_status(
        "dark",
        lambda obj: (
            reasons(obj).get("Ready") == ("False", "NotAdvertised")
            and obj["status"].get("nodes") == 2
            and obj["status"].get("devicePlugin", {}).get("readyNodes") == 2
        ),
        "Ready=False/NotAdvertised, nodes=2, devicePlugin.readyNodes=2",
    )

    status = obj["status"]
    assert status["gap"]["pluginReadyNotAdvertised"] == 2
    assert status["gap"]["nodes"] == sorted(scenario.nodes)
    assert status["advertisingNodes"] == 0
    assert status["devicePlugin"]["readyNodes"] == 2
    assert status["uniformCount"] == 0  # uniform, and uniformly nothing
    assert reasons(obj)["Advertised"] == ("False", "NotAdvertised")
    assert reasons(obj)["DevicePluginReady"] == ("True", "PluginReadyOnAllNodes")
    assert reasons(obj)["Stalled"] == ("True", "InstanceTypeUnsupported")
    assert "recommendation" not in status
    metrics = scenario.operator.metrics()
    labels = {"name": scenario.fcap_name("dark"), "fabric": "efa", "pool": scenario.pool("dark")}
    assert metrics.get("fabriccap_pool_gap_nodes", **labels, kind="plugin_ready_not_advertised") == 2.0
    assert metrics.get("fabriccap_pool_ready", **labels) == 0.0


def test_crash_looping_plugin_is_a_device_plugin_gap(scenario: Scenario) -> None:
    crashing, restarting = scenario.add_pool("crash", 2)
    scenario.wait_ready("crash", "True", "UniformCapability", nodes=2)

    scenario.set_plugin_pod(crashing, ready=False, phase="Running")

    obj = scenario.wait_ready("crash", "False", "DevicePluginGap")
    assert reasons(obj)["DevicePluginReady"] == ("False", "PluginNotReady")
    assert condition(obj, "DevicePluginReady")["message"] == (
        f"device-plugin pod not Ready on 1 of 2 nodes: {crashing}"
    )
    assert obj["status"]["devicePlugin"]["readyNodes"] == 1
    assert obj["status"]["gap"]["advertisedWithoutPlugin"] == 1
    assert obj["status"]["gap"]["nodes"] == [crashing]
    assert obj["status"]["uniformCount"] == 32  # the count is uniform; the plugin is what lacks
    assert "recommendation" not in obj["status"]

    # A pod that is not even Running (restarting after the crash) is just as not Ready.
    scenario.set_plugin_pod(restarting, ready=False, phase="Pending")
    obj = scenario.wait_status("crash", lambda o: o["status"]["devicePlugin"]["readyNodes"] == 0, "no Ready plugin pod")
    assert reasons(obj)["Ready"] == ("False", "DevicePluginGap")
    assert obj["status"]["gap"]["nodes"] == sorted([crashing, restarting])

    scenario.set_plugin_pod(crashing)
    scenario.set_plugin_pod(restarting)
    scenario.wait_ready("crash", "True", "UniformCapability")


def test_devices_going_unhealthy_open_a_gap(scenario: Scenario) -> None:
    sick, _ = scenario.add_pool("sick", 2)
    scenario.wait_ready("sick", "True", "UniformCapability")

    scenario.set_fabric(sick, allocatable=0, capacity=32)

    obj = scenario.wait_ready("sick", "False", "PartialRollout")
    gap = obj["status"]["gap"]
    assert gap["unhealthy"] == 1
    assert gap["pluginReadyNotAdvertised"] == 1
    assert gap["nodes"] == [sick]
    assert obj["status"]["advertisingNodes"] == 1
    assert obj["status"]["counts"] == [{"count": 32, "nodes": 1}, {"count": 0, "nodes": 1}]
    assert "uniformCount" not in obj["status"]
    metrics = scenario.operator.metrics()
    labels = {"name": scenario.fcap_name("sick"), "fabric": "efa", "pool": scenario.pool("sick")}
    assert metrics.get("fabriccap_pool_gap_nodes", **labels, kind="unhealthy") == 1.0
    assert metrics.get("fabriccap_pool_uniform_allocatable", **labels) is None  # only while homogeneous

    # Half the devices come back: still not uniform, now without a zero.
    scenario.set_fabric(sick, allocatable=16, capacity=32)
    obj = scenario.wait_ready("sick", "False", "MixedCounts")
    assert obj["status"]["gap"]["unhealthy"] == 1
    assert obj["status"]["gap"]["pluginReadyNotAdvertised"] == 0


def test_cordoned_nodes_are_reported_not_judged(scenario: Scenario) -> None:
    first, _, laggard = scenario.add_pool("cordon", 3)
    scenario.wait_ready("cordon", "True", "UniformCapability", nodes=3)

    scenario.cluster.run_kubectl("cordon", first)
    obj = scenario.wait_ready("cordon", "True", "UniformCapability", nodes=2, cordonedNodes=1)
    assert obj["status"]["advertisingNodes"] == 2

    scenario.cluster.run_kubectl("uncordon", first)
    scenario.wait_ready("cordon", "True", "UniformCapability", nodes=3, cordonedNodes=0)

    # A node that lost its devices blocks the pool; cordoning it takes it out of the gate set.
    scenario.set_fabric(laggard, 0)
    scenario.wait_ready("cordon", "False", "PartialRollout", nodes=3)
    scenario.cluster.run_kubectl("cordon", laggard)
    obj = scenario.wait_ready("cordon", "True", "UniformCapability", nodes=2, cordonedNodes=1)
    assert obj["status"]["counts"] == [{"count": 32, "nodes": 2}]


def test_deleted_nodes_leave_the_counts(scenario: Scenario) -> None:
    nodes = scenario.add_pool("shrink", 3)
    scenario.wait_ready("shrink", "True", "UniformCapability", nodes=3)

    scenario.delete_node(nodes[2])

    obj = scenario.wait_ready("shrink", "True", "UniformCapability", nodes=2)
    assert obj["status"]["advertisingNodes"] == 2
    assert obj["status"]["counts"] == [{"count": 32, "nodes": 2}]
    assert obj["status"]["devicePlugin"]["readyNodes"] == 2  # its orphaned plugin pod counts for nothing

    scenario.delete_node(nodes[1])
    obj = scenario.wait_ready("shrink", "True", "UniformCapability", nodes=1)
    assert obj["status"]["counts"] == [{"count": 32, "nodes": 1}]


def test_daemon_set_installed_after_the_nodes(scenario: Scenario) -> None:
    nodes = scenario.add_pool("late", 2, plugin=False)

    obj = scenario.wait_ready("late", "False", "DevicePluginGap", nodes=2)
    assert reasons(obj)["DevicePluginReady"] == ("False", "PluginNotInstalled")
    assert scenario.namespace in condition(obj, "DevicePluginReady")["message"]
    assert obj["status"]["devicePlugin"] == {"daemonSets": [], "readyNodes": 0}
    assert obj["status"]["gap"]["advertisedWithoutPlugin"] == 2

    daemon_set = scenario.install_plugin()
    qualified = f"{scenario.namespace}/{daemon_set['metadata']['name']}"
    obj = scenario.wait_status(
        "late", lambda o: o["status"]["devicePlugin"]["daemonSets"] == [qualified], "the DaemonSet to be found"
    )
    assert reasons(obj)["DevicePluginReady"] == ("False", "PluginNotScheduled")

    for node in nodes:
        scenario.add_plugin_pod(node)
    obj = scenario.wait_ready("late", "True", "UniformCapability")
    assert obj["status"]["devicePlugin"] == {"daemonSets": [qualified], "readyNodes": 2}
    assert obj["status"]["gap"]["advertisedWithoutPlugin"] == 0


# ---------------------------------------------------------------------------------------------
# 10, 11, 14, 16: lifecycle and write discipline


def test_emptied_pool_is_deleted_after_the_grace_period_not_before(scenario: Scenario) -> None:
    nodes = scenario.add_pool("gone", 2)
    scenario.wait_ready("gone", "True", "UniformCapability", nodes=2)
    name = scenario.fcap_name("gone")
    node_events = scenario.operator.metrics().get("fabriccap_watch_events_total", kind="node", result="applied") or 0.0

    emptied_at = time.monotonic()
    for node in nodes:
        scenario.delete_node(node)
    wait_until(
        lambda: (
            (scenario.operator.metrics().get("fabriccap_watch_events_total", kind="node", result="applied") or 0)
            >= node_events + 2
        ),
        "the operator to see both deletions",
    )
    assert scenario.fcap("gone") is not None, "deleted before the grace period"
    time.sleep(max(0.0, emptied_at + GRACE_SECONDS * 0.6 - time.monotonic()))
    assert scenario.fcap("gone") is not None, "deleted before the grace period"

    wait_until(lambda: scenario.fcap("gone") is None, f"{name} to be deleted", timeout=GRACE_SECONDS + 15)
    assert time.monotonic() - emptied_at >= GRACE_SECONDS
    # The object goes from the API before the operator reads its DELETE's answer, and
    # /metrics serves one render for up to EXPOSITION_MAX_AGE_SECONDS: the series follow.
    wait_until(
        lambda: scenario.operator.metrics().series("fabriccap_pool_nodes", name=name) == [],
        f"{name}'s series to be removed",
        timeout=10,
    )


def test_an_emptied_pools_object_held_by_a_finalizer_is_deleted_once_and_stays_not_ready(scenario: Scenario) -> None:
    """A backup or GitOps tool's finalizer on a FabricCapability: the expiry's DELETE leaves it
    terminating. The operator asks once (the DELETE counter moves by one over four grace
    periods), keeps its status at NoTargetNodes and its ready label down, and the object goes
    when the finalizer does."""
    nodes = scenario.add_pool("held", 1)
    scenario.wait_ready("held", "True", "UniformCapability", nodes=1)
    path = FABRIC_CAPABILITIES.item(scenario.fcap_name("held"))
    scenario.kube.patch(path, {"metadata": {"finalizers": ["example.com/keep"]}})
    try:

        def deletes() -> float:
            return scenario.operator.metrics().get("fabriccap_status_writes_total", result="deleted") or 0.0

        before = deletes()
        for node in nodes:
            scenario.delete_node(node)
        wait_until(
            lambda: (obj := scenario.fcap("held")) is not None and obj["metadata"].get("deletionTimestamp"),
            "the expiry's DELETE to leave the object terminating",
            timeout=GRACE_SECONDS + 15,
        )
        time.sleep(3 * GRACE_SECONDS)  # three more grace periods
        held = scenario.fcap("held")
        assert held is not None
        ready = next(c for c in held["status"]["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "NoTargetNodes")
        assert held["metadata"]["labels"][READY_LABEL] == "false"
        wait_until(lambda: deletes() == before + 1, "one DELETE counted", timeout=10)
        time.sleep(EXPOSITION_MAX_AGE_SECONDS + 1.0)  # a second DELETE would be counted by now
        assert deletes() == before + 1, f"{deletes() - before:.0f} DELETEs of one terminating object"
    finally:
        scenario.kube.patch(path, {"metadata": {"finalizers": None}})
    wait_until(lambda: scenario.fcap("held") is None, "the object to go with its finalizer", timeout=10)


def test_healthz_reports_the_evaluation_loop(scenario: Scenario) -> None:
    scenario.add_pool("health", 1)
    scenario.wait_ready("health", "True", "UniformCapability", nodes=1)

    def report() -> dict[str, Any] | None:
        # An answer before the pool's first evaluation does not count its node yet.
        text = scenario.operator._get(scenario.operator.health_port, "/healthz")
        found: dict[str, Any] = json.loads(text)["fabriccap"] if text else {}
        return found if found.get("nodes", 0) >= 1 else None

    found = wait_until(report, "/healthz to report the pool's node", timeout=20)
    assert found["listed"] is True
    assert found["published"] >= 1
    assert 0 <= found["secondsSinceEvaluation"] < 60


def test_a_capability_deleted_by_someone_else_is_put_back(scenario: Scenario) -> None:
    scenario.add_pool("undeleted", 2)
    first = scenario.wait_ready("undeleted", "True", "UniformCapability", nodes=2)
    scenario.kube.delete(FABRIC_CAPABILITIES.item(scenario.fcap_name("undeleted")))
    again = wait_until(
        lambda: (
            (obj := scenario.fcap("undeleted")) is not None
            and obj["metadata"]["uid"] != first["metadata"]["uid"]
            and status_written(obj)
            and obj
        ),
        "the deleted FabricCapability to be recreated with its status",
    )
    ready = next(c for c in again["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "UniformCapability")


def test_a_capability_it_does_not_own_is_never_deleted(scenario: Scenario) -> None:
    name = f"efa-{scenario.prefix}-foreign"
    scenario.kube.create(
        FCAP_PATH,
        {"apiVersion": "fabriccap.dev/v1alpha1", "kind": "FabricCapability", "metadata": {"name": name}, "spec": {}},
    )
    try:
        # Restarted, the operator reads it back with no pool behind it: the grace period runs,
        # and then the missing ownership label must stop the deletion.
        scenario.operator.restart()
        time.sleep(GRACE_SECONDS + 2.0)
        assert scenario.kube.fcap(name) is not None, "a FabricCapability without the managed-by label was deleted"
        assert "not managed by fabriccap; kept" in scenario.operator.log()
    finally:
        scenario.kube.delete(FABRIC_CAPABILITIES.item(name))


def test_restart_changes_nothing(scenario: Scenario) -> None:
    scenario.add_pool("steady", 2)
    _, laggard = scenario.add_pool("lagging", 2)
    scenario.set_fabric(laggard, 0)
    scenario.wait_ready("steady", "True", "UniformCapability", nodes=2)
    scenario.wait_ready("lagging", "False", "PartialRollout", nodes=2)
    time.sleep(QUIET_SECONDS)  # let any write in flight land before taking the "before" picture
    before = {obj["metadata"]["name"]: obj for obj in scenario.own_fcaps()}
    assert sorted(before) == [scenario.fcap_name("lagging"), scenario.fcap_name("steady")]

    stopping = time.monotonic()
    # SIGTERM is how a pod ends: a clean exit, quickly (kopf's 5 s wait for stray tasks is not).
    assert scenario.operator.stop() == 0
    assert time.monotonic() - stopping < 4.0
    scenario.operator.start()

    def both_evaluated() -> Metrics | None:
        metrics = scenario.operator.metrics()
        names = [scenario.fcap_name(label) for label in ("steady", "lagging")]
        return metrics if all(metrics.series("fabriccap_pool_nodes", name=name) for name in names) else None

    metrics = wait_until(both_evaluated, "the restarted operator to evaluate both pools")
    time.sleep(QUIET_SECONDS)

    after = {obj["metadata"]["name"]: obj for obj in scenario.own_fcaps()}
    assert sorted(after) == sorted(before)
    for label in ("steady", "lagging"):
        assert len(scenario.kube.fcaps(f"fabriccap.dev/pool={scenario.pool(label)}")) == 1
    for name, obj in after.items():
        assert transition_times(obj) == transition_times(before[name]), name
        assert obj["metadata"]["resourceVersion"] == before[name]["metadata"]["resourceVersion"], name
        assert obj["metadata"]["uid"] == before[name]["metadata"]["uid"], name
    if scenario.cluster.local is not None:  # on a shared cluster other pools may really change
        final = scenario.operator.metrics()
        for result in ("created", "updated", "deleted", "error"):
            assert final.get("fabriccap_status_writes_total", result=result) == 0.0, result
    assert (
        metrics.get(
            "fabriccap_pool_ready", name=scenario.fcap_name("steady"), fabric="efa", pool=scenario.pool("steady")
        )
        == 1.0
    )


def test_operator_never_writes_nodes_pods_or_daemon_sets(scenario: Scenario) -> None:
    scenario.operator.stop()
    nodes = scenario.add_pool("readonly", 2)
    scenario.set_fabric(nodes[1], 16)  # a pool that needs writing: not Ready, then Ready below
    before = watched_kind_fingerprints(scenario.kube)
    assert any(key.endswith(f"/{nodes[0]}") for key in before)

    scenario.operator.start()
    scenario.wait_ready("readonly", "False", "MixedCounts", nodes=2)
    time.sleep(QUIET_SECONDS)
    after = watched_kind_fingerprints(scenario.kube)

    changed = {key: (before.get(key), value) for key, value in after.items() if before.get(key) != value}
    assert changed == {}
    assert sorted(after) == sorted(before)


def test_heartbeats_and_unrelated_labels_cause_no_write(scenario: Scenario) -> None:
    first, second = scenario.add_pool("quiet", 2)
    scenario.wait_ready("quiet", "True", "UniformCapability", nodes=2)
    time.sleep(QUIET_SECONDS)
    before = scenario.fcap("quiet")
    assert before is not None
    metrics = scenario.operator.metrics()
    writes = metrics.get("fabriccap_status_writes_total", result="updated")
    events = metrics.get("fabriccap_watch_events_total", kind="node", result="applied") or 0.0

    heartbeat = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "lastHeartbeatTime": "2030-01-01T00:00:00Z",
        "lastTransitionTime": "2025-04-29T09:30:34Z",
        "message": "kubelet is posting ready status",
    }
    scenario.kube.patch(node_path(first) + "/status", {"status": {"conditions": [heartbeat]}})
    scenario.kube.patch(node_path(second), {"metadata": {"labels": {"topology.k8s.aws/zone-id": "usw2-az9"}}})
    scenario.kube.patch(node_path(second) + "/status", {"status": {"capacity": {"cpu": "191"}}})
    wait_until(
        lambda: (
            (scenario.operator.metrics().get("fabriccap_watch_events_total", kind="node", result="applied") or 0)
            >= events + 3
        ),
        "the operator to see the three node updates",
    )
    time.sleep(QUIET_SECONDS)

    after = scenario.fcap("quiet")
    assert after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert scenario.operator.metrics().get("fabriccap_status_writes_total", result="updated") == writes

    # The control: a change the status shows is written, once.
    scenario.set_fabric(second, 16)
    scenario.wait_ready("quiet", "False", "MixedCounts")
    time.sleep(QUIET_SECONDS)
    assert scenario.operator.metrics().get("fabriccap_status_writes_total", result="updated") == (writes or 0) + 1


def _writes(metrics: Metrics) -> dict[str, float]:
    return {
        result: metrics.get("fabriccap_status_writes_total", result=result) or 0.0
        for result in ("created", "updated", "error")
    }


def _settled_writes(scenario: Scenario) -> dict[str, float]:
    """The write counters as of now. /metrics serves one render for up to
    ``EXPOSITION_MAX_AGE_SECONDS``, so a scrape right after a status shows may predate the writes
    that made it: read until two scrapes a render apart agree (a whole run failed on the stale one)."""
    before = _writes(scenario.operator.metrics())
    for _ in range(10):
        time.sleep(EXPOSITION_MAX_AGE_SECONDS + 0.2)
        now = _writes(scenario.operator.metrics())
        if now == before:
            return now
        before = now
    raise AssertionError(f"the write counters kept moving: {before}")


def test_a_node_group_named_like_another_pools_hashed_name_gets_its_own_object(scenario: Scenario) -> None:
    """Issue 9, defect 1, under round 3's names: Karpenter pool `foo` and a node group once shared
    one object and overwrote each other forever (188 writes in 40 s). Now every pool key gets the
    readable name, so a node group with the same value collides: both pools take the hashed form
    (status.naming says why), each on its own object; and a node group named after one of those
    hashed names gets an object of its own too. Nothing is written again once settled."""
    karpenter_pool = scenario.pool("foo")
    scenario.add_node("foo", 0, plugin=True, pool_key=KARPENTER)
    readable = scenario.wait_ready("foo", "True", "UniformCapability", nodes=1)
    assert readable["metadata"]["name"] == f"efa-{karpenter_pool}"  # readable under any pool key

    def add_group(pool: str, count: int) -> None:
        for index in range(count):
            node = f"{pool}-n{index}"
            body = node_body(node, pool=pool, marker=scenario.prefix)
            status = body.pop("status")
            scenario.kube.create(node_path(), body)
            scenario.nodes.append(node)
            scenario.kube.patch(node_path(node) + "/status", {"status": status})
            scenario.add_plugin_pod(node)

    # 1. A node group with the same value: an actual collision, both hashed.
    add_group(karpenter_pool, 2)

    def by_key() -> dict[str, dict[str, Any]] | None:
        found = {
            o["status"]["pool"]["key"]: o
            for o in scenario.own_fcaps()
            if status_written(o) and o["status"]["pool"]["value"] == karpenter_pool
        }
        settled = len(found) == 2 and all(
            o["metadata"]["name"] != f"efa-{karpenter_pool}"
            and reasons(o).get("Ready") == ("True", "UniformCapability")
            for o in found.values()
        )
        return found if settled else None

    collided = wait_until(by_key, "both pools of the value hashed, each on its own object", timeout=STATUS_TIMEOUT)
    assert {o["status"]["naming"]["reason"] for o in collided.values()} == {"Collision"}
    hashed_name = collided[KARPENTER]["metadata"]["name"]
    assert hashed_name != collided[NODEGROUP]["metadata"]["name"]
    assert scenario.kube.fcap(f"efa-{karpenter_pool}") is None  # the readable one was deleted at once

    # 2. A node group named after the Karpenter pool's hashed name: its own object as well.
    colliding = hashed_name.removeprefix("efa-")
    add_group(colliding, 2)

    def all_ready() -> dict[tuple[str, str], dict[str, Any]] | None:
        objects = {
            (o["status"]["pool"]["key"], o["status"]["pool"]["value"]): o
            for o in scenario.own_fcaps()
            if status_written(o)
        }
        wanted = {(KARPENTER, karpenter_pool): 1, (NODEGROUP, karpenter_pool): 2, (NODEGROUP, colliding): 2}
        ready = all(
            (obj := objects.get(pool)) is not None
            and obj["status"]["nodes"] == count
            and reasons(obj).get("Ready") == ("True", "UniformCapability")
            for pool, count in wanted.items()
        )
        return {pool: objects[pool] for pool in wanted} if ready else None

    objects = wait_until(all_ready, "three pools Ready, each on its own object", timeout=STATUS_TIMEOUT)
    assert len({obj["metadata"]["name"] for obj in objects.values()}) == 3
    assert objects[(KARPENTER, karpenter_pool)]["metadata"]["name"] == hashed_name
    # Nothing flaps: over several debounce windows no object is written again.
    writes = _settled_writes(scenario)
    settled = all_ready()
    assert settled is not None
    versions = {pool: obj["metadata"]["resourceVersion"] for pool, obj in settled.items()}
    time.sleep(QUIET_SECONDS * 3)
    after = all_ready()
    assert after is not None
    assert {pool: obj["metadata"]["resourceVersion"] for pool, obj in after.items()} == versions
    assert _writes(scenario.operator.metrics()) == writes


@pytest.mark.parametrize("quantity", ["1e40", "1e31"])
def test_an_absurd_quantity_fails_the_pool_closed_without_a_write_loop(
    scenario: Scenario, config_file: Path, quantity: str
) -> None:
    """Issue 9, defect 2: the API server accepts these; 1e40 used to drop the node silently
    (Ready=True with 3 of 4) and 1e31 made every status write a 422, retried 5x/s forever."""
    label = f"absurd-{quantity.replace('e', 'e-')}"
    nodes = scenario.add_pool(label, 3)
    scenario.wait_ready(label, "True", "UniformCapability", nodes=3)
    odd = nodes[2]
    scenario.kube.patch(
        node_path(odd) + "/status", {"status": {"capacity": {EFA: quantity}, "allocatable": {EFA: quantity}}}
    )
    served = scenario.kube.get(node_path(odd))
    # Accepted, and served in canonical form (1e40 comes back as 10e39).
    assert served is not None and float(served["status"]["allocatable"][EFA]) == float(quantity)

    obj = scenario.wait_status(
        label,
        lambda o: reasons(o).get("Ready", ("", ""))[0] == "False" and odd in condition(o, "Ready")["message"],
        f"Ready=False naming {odd}",
    )
    ready = condition(obj, "Ready")
    assert "unusable quantity" in ready["message"], ready
    assert obj["status"]["nodes"] == 3  # the node is counted, as not advertising
    writes = _settled_writes(scenario)
    settled = scenario.fcap(label)
    assert settled is not None
    version = settled["metadata"]["resourceVersion"]
    time.sleep(QUIET_SECONDS * 3)
    assert _writes(scenario.operator.metrics()) == writes  # no retry loop, no failed write
    after = scenario.fcap(label)
    assert after is not None and after["metadata"]["resourceVersion"] == version

    # Live `fabriccap evaluate` gives the same verdict (it used to exit 2 on 1e40).
    offline = evaluate_json("--kubeconfig", str(scenario.cluster.kubeconfig), "--config", str(config_file))
    assert reasons(offline[scenario.fcap_name(label)])["Ready"] == reasons(after)["Ready"]
    assert condition(offline[scenario.fcap_name(label)], "Ready")["message"] == ready["message"]


# ---------------------------------------------------------------------------------------------
# 12, 13, 15: what kubectl and `fabriccap evaluate` see


def test_kubectl_get_shows_the_printer_columns(scenario: Scenario) -> None:
    scenario.add_pool("cols", 2)
    _, dark = scenario.add_pool("colsgap", 2)
    scenario.set_fabric(dark, 0)
    scenario.wait_ready("cols", "True", "UniformCapability", nodes=2)
    scenario.wait_ready("colsgap", "False", "PartialRollout", nodes=2)
    names = [scenario.fcap_name("cols"), scenario.fcap_name("colsgap")]

    rows = kubectl_table(scenario.cluster, "fcap", *names)
    assert list(rows[0]) == ["NAME", "FABRIC", "POOL", "NODES", "ADVERTISING", "COUNT", "GAP", "READY", "REASON", "AGE"]
    ages = [row.pop("AGE") for row in rows]
    assert rows == [
        {
            "NAME": names[0],
            "FABRIC": "efa",
            "POOL": scenario.pool("cols"),
            "NODES": "2",
            "ADVERTISING": "2",
            "COUNT": "32",
            "GAP": "0",
            "READY": "True",
            "REASON": "UniformCapability",
        },
        {
            "NAME": names[1],
            "FABRIC": "efa",
            "POOL": scenario.pool("colsgap"),
            "NODES": "2",
            "ADVERTISING": "1",
            "COUNT": "",
            "GAP": "1",
            "READY": "False",
            "REASON": "PartialRollout",
        },
    ]
    assert all(age.endswith(("s", "m")) for age in ages), ages

    wide = kubectl_table(scenario.cluster, "fcap", *names, "-o", "wide")
    # Round 3 adds NODEPOOL and LAUNCHED-WITHOUT (empty and 0 on a managed node group's pool),
    # transport TCP (empty while transport is not read).
    wide_columns = ["RESOURCE", "PLUGIN-READY", "NO-FABRIC", "NODEPOOL", "LAUNCHED-WITHOUT", "TCP"]
    assert list(wide[0])[-6:] == wide_columns
    assert [tuple(row[column] for column in wide_columns) for row in wide] == [
        (EFA, "2", "0", "", "0", ""),
        (EFA, "2", "0", "", "0", ""),
    ]

    # The short name and the category work too.
    by_category = kubectl_table(scenario.cluster, "fabric", "-l", f"fabriccap.dev/pool={scenario.pool('cols')}")
    assert [row["NAME"] for row in by_category] == [names[0]]


def test_kubectl_wait_returns_once_the_pool_turns_ready(scenario: Scenario) -> None:
    _, laggard = scenario.add_pool("wait", 2)
    scenario.set_fabric(laggard, 0)
    scenario.wait_ready("wait", "False", "PartialRollout")

    waiter = subprocess.Popen(
        [
            str(scenario.cluster.kubectl),
            f"--kubeconfig={scenario.cluster.kubeconfig}",
            "wait",
            "--for=condition=Ready",
            f"fcap/{scenario.fcap_name('wait')}",
            "--timeout=60s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(QUIET_SECONDS)
        assert waiter.poll() is None, f"kubectl wait returned while the pool was not Ready: {waiter.communicate()}"
        scenario.set_fabric(laggard, 32)
        out, err = waiter.communicate(timeout=30)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 0, err
    assert out.strip() == f"fabriccapability.fabriccap.dev/{scenario.fcap_name('wait')} condition met"


def test_live_status_equals_fabriccap_evaluate_on_a_snapshot(scenario: Scenario, config_file: Path) -> None:
    scenario.add_pool("ev-ready", 2)
    _, laggard = scenario.add_pool("ev-partial", 2)
    scenario.set_fabric(laggard, 0)
    p4d = scenario.add_node("ev-mixed", 0, instance_type="p4d.24xlarge", efa=4)
    scenario.add_node("ev-mixed", 1)
    scenario.add_plugin_pod(p4d)
    scenario.add_pool("ev-dark", 1, instance_type="g6.2xlarge", efa=None)
    cordoned, _ = scenario.add_pool("ev-cordon", 2)
    scenario.cluster.run_kubectl("cordon", cordoned)
    expected = {
        "ev-ready": "UniformCapability",
        "ev-partial": "PartialRollout",
        "ev-mixed": "MixedCounts",
        "ev-dark": "NotAdvertised",
        "ev-cordon": "UniformCapability",
    }
    for label, reason in expected.items():
        scenario.wait_ready(label, "True" if reason == "UniformCapability" else "False", reason)
    scenario.wait_status("ev-mixed", lambda o: o["status"]["devicePlugin"]["readyNodes"] == 1, "1 Ready plugin pod")
    scenario.wait_status("ev-cordon", lambda o: o["status"]["cordonedNodes"] == 1, "1 cordoned node")

    mine = {scenario.fcap_name(label) for label in expected}
    snapshot = config_file.parent / f"{scenario.prefix}-snapshot.json"
    deadline = time.monotonic() + STATUS_TIMEOUT
    while True:
        # Snapshot first, then read live: the live answer can only be newer, never older.
        dump = scenario.cluster.run_kubectl("get", "nodes,pods,daemonsets,resourceslices", "-A", "-o", "json")
        snapshot.write_text(dump.stdout)
        evaluated = evaluate_json("-f", str(snapshot), "--config", str(config_file))
        offline = {name: obj for name, obj in evaluated.items() if name in mine}
        live = {obj["metadata"]["name"]: obj for obj in scenario.own_fcaps()}
        assert sorted(offline) == sorted(mine)
        differences = {
            name: (without_volatile(live[name]["status"]), without_volatile(offline[name]["status"]))
            for name in mine
            if name not in live or without_volatile(live[name]["status"]) != without_volatile(offline[name]["status"])
        }
        if not differences:
            break
        assert time.monotonic() < deadline, f"live != evaluate:\n{json.dumps(differences, indent=1)}"
        time.sleep(0.5)
    # Live mode (no -f): the same answer read straight from the API server, in pages.
    from_api = evaluate_json("--kubeconfig", str(scenario.cluster.kubeconfig), "--config", str(config_file))
    for name in mine:
        assert without_volatile(from_api[name]["status"]) == without_volatile(live[name]["status"]), name
    for name in mine:
        live_labels = live[name]["metadata"]["labels"]
        assert {k: live_labels.get(k) for k in offline[name]["metadata"]["labels"]} == offline[name]["metadata"][
            "labels"
        ]


# ---------------------------------------------------------------------------------------------
# 17, 18: starting up wrong


@dataclass
class CrdLessCluster:
    """A second local control plane, without the CRD, and an operator aimed at it."""

    control_plane: LocalControlPlane
    kube: SyncKube
    operator: OperatorProcess

    def kubectl(self, *args: str) -> None:
        info = self.control_plane.info
        subprocess.run([str(info.kubectl), f"--kubeconfig={info.kubeconfig}", *args], check=True, capture_output=True)

    def report_sections(self) -> list[tuple[str, str]]:
        return self.operator.report_sections()


@pytest.fixture
def crd_less_cluster(cluster: E2ECluster, tmp_path: Path) -> Iterator[CrdLessCluster]:
    if cluster.local is None:
        pytest.skip("needs a second local control plane (the CRD of a shared cluster is not ours to delete)")
    control_plane = LocalControlPlane(tmp_path / "cp")
    info = control_plane.start()
    kube = SyncKube(info.kubeconfig)
    config = write_config(
        tmp_path / "config.yaml", {"poolGracePeriodSeconds": GRACE_SECONDS, "debounceSeconds": DEBOUNCE_SECONDS}
    )
    operator = OperatorProcess(kubeconfig=info.kubeconfig, config=config, log_path=tmp_path / "operator.log")
    try:
        yield CrdLessCluster(control_plane=control_plane, kube=kube, operator=operator)
    finally:
        operator.stop()
        kube.close()
        control_plane.stop()


def test_operator_started_before_the_crd_waits_for_it(crd_less_cluster: CrdLessCluster) -> None:
    kube, operator = crd_less_cluster.kube, crd_less_cluster.operator
    for index in range(2):
        kube.create(node_path(), node_body(f"early-{index}", pool="early", marker="crd"))
    operator.start()

    line = wait_until(
        lambda: next((ln for ln in operator.log().splitlines() if "CRD" in ln and "not installed" in ln), None),
        "a log line saying the CRD is not installed",
    )
    assert "fabriccapabilities.fabriccap.dev" in line
    assert operator.running
    assert operator.healthy()

    crd_less_cluster.kubectl("apply", "--server-side", "-f", str(CRD_FILE))
    crd_less_cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_FILE))
    obj = wait_until(
        lambda: (o := kube.fcap("efa-early")) is not None and (o.get("status") or {}).get("nodes") == 2 and o,
        "efa-early to be published after the CRD was applied",
        timeout=60,
    )
    assert reasons(obj)["Ready"] == ("False", "DevicePluginGap")
    assert reasons(obj)["DevicePluginReady"] == ("False", "PluginNotInstalled")
    # SIGTERM is how a pod ends: the operator stops cleanly and in time, not killed.
    assert operator.stop() == 0


FAKE_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}}]
users: [{name: fake, user: {token: not-a-token}}]
contexts: [{name: fake, context: {cluster: fake, user: fake}}]
current-context: fake
"""


@pytest.mark.parametrize(
    ("document", "field_name"),
    [
        ({"poolGracePeriodSeconds": -5}, "poolGracePeriodSeconds"),
        ({"debounceSeconds": 0.1, "poolLabels": ["not a label key!"]}, "poolLabels"),
        ({"graceSeconds": 3}, "graceSeconds"),
    ],
    ids=["negative-grace", "bad-pool-label", "unknown-key"],
)
def test_invalid_config_exits_2_before_touching_the_cluster(
    tmp_path: Path, document: dict[str, Any], field_name: str
) -> None:
    config = write_config(tmp_path / "bad.yaml", document)
    with listening_socket() as server:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(FAKE_KUBECONFIG % server.getsockname()[1])
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "fabriccap",
                "run",
                "--config",
                str(config),
                "--kubeconfig",
                str(kubeconfig),
                "--metrics-bind-address",
                "127.0.0.1",
                "--metrics-port",
                "0",
                "--health-port",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 2, result
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("error: "), lines[0]
        assert str(config) in lines[0] and field_name in lines[0], lines[0]
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected


def test_valid_config_does_reach_the_cluster(tmp_path: Path) -> None:
    """The control for the test above: the fake server does notice an operator that connects."""
    config = write_config(tmp_path / "good.yaml", {"poolGracePeriodSeconds": GRACE_SECONDS})
    with listening_socket() as server:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(FAKE_KUBECONFIG % server.getsockname()[1])
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fabriccap",
                "run",
                "--config",
                str(config),
                "--kubeconfig",
                str(kubeconfig),
                "--standalone",
                "--metrics-bind-address",
                "127.0.0.1",
                "--metrics-port",
                "0",
                "--health-port",
                "0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            server.setblocking(True)
            server.settimeout(30)
            connection, _ = server.accept()
            connection.close()
        finally:
            process.kill()
            process.wait()
