"""What a user reads back from a live cluster: ``kubectl describe fcap`` showing the operator's
Events, and ``fabriccap explain`` in live mode agreeing with what the operator published.

The operator runs as a subprocess (as in a Deployment) against the real kube-apiserver; the
tests play kubelet and device plugin by writing Node status and plugin pods. Each test owns a
random pool prefix and deletes what it made.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fabriccap.kube.paths import EVENTS
from harness import (
    E2ECluster,
    OperatorProcess,
    SyncKube,
    World,
    reasons,
    wait_until,
    without_volatile,
    write_config,
)

STATUS_TIMEOUT = 20.0
EVENT_TIMEOUT = 20.0
COMMAND_TIMEOUT = 120
QUIET_SECONDS = 2.0


@pytest.fixture(scope="module")
def config_file(plugin_namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    document = {
        "poolGracePeriodSeconds": 3,
        "debounceSeconds": 0.1,
        "fabrics": [
            {
                "name": "efa",
                "devicePlugin": {
                    "namespace": plugin_namespace,
                    "daemonSetSelector": "app.kubernetes.io/name=aws-efa-k8s-device-plugin",
                },
            }
        ],
    }
    return write_config(tmp_path_factory.mktemp("cli-live") / "config.yaml", document)


@pytest.fixture(scope="module")
def operator(cluster: E2ECluster, config_file: Path) -> Iterator[OperatorProcess]:
    process = OperatorProcess(
        kubeconfig=cluster.kubeconfig, config=config_file, log_path=config_file.parent / "operator.log"
    )
    process.start()
    yield process
    process.stop()


@pytest.fixture
def world(kube: SyncKube, operator: OperatorProcess, plugin_namespace: str) -> Iterator[World]:
    if not operator.running:  # a test that restarts it failed half-way
        operator.stop()
        operator.start()
    operator.mark_log()
    made = World(kube=kube, namespace=plugin_namespace)
    yield made
    made.cleanup()


def wait_ready(
    world: World, label: str, status: str, reason: str, also: Callable[[dict[str, Any]], bool] = lambda _: True
) -> dict[str, Any]:
    """The pool's object once Ready is ``status``/``reason`` and ``also(status)`` holds."""

    def probe() -> dict[str, Any] | None:
        obj = world.fcap(label)
        if obj is None or reasons(obj).get("Ready") != (status, reason):
            return None
        return obj if also(obj["status"]) else None

    return wait_until(probe, f"{world.fcap_name(label)}: Ready={status}/{reason}", timeout=STATUS_TIMEOUT)


# ---------------------------------------------------------------------------------------------
# kubectl describe shows the Events


def described_events(cluster: E2ECluster, name: str) -> list[dict[str, str]]:
    """The rows of the Events section of ``kubectl describe fcap NAME``, as kubectl prints them."""
    text = cluster.run_kubectl("describe", "fcap", name).stdout
    section = text.split("\nEvents:", 1)[1] if "\nEvents:" in text else ""
    lines = section.splitlines()
    header = next((line for line in lines if line.strip().startswith("Type ")), None)
    if header is None:  # "Events:  <none>"
        return []
    columns = [(match.group(), match.start()) for match in re.finditer(r"\S+", header)]
    bounds = [start for _, start in columns[1:]] + [None]
    rows = []
    for line in lines[lines.index(header) + 2 :]:  # after the ---- underline
        if not line.strip():
            break
        rows.append({column: line[start:end].strip() for (column, start), end in zip(columns, bounds, strict=True)})
    return rows


def test_kubectl_describe_shows_the_events_of_the_flip_to_ready(
    world: World, cluster: E2ECluster, kube: SyncKube, operator: OperatorProcess
) -> None:
    # The laggard first: the pool must not be Ready before the flip, or it would flip twice.
    laggard = world.add_node("flip", 0, plugin=True, efa=0)
    world.add_node("flip", 1, plugin=True)
    partial = wait_ready(world, "flip", "False", "PartialRollout")
    world.set_fabric(laggard, 32)
    ready = wait_ready(world, "flip", "True", "UniformCapability")
    name = world.fcap_name("flip")
    ready_message = next(c["message"] for c in ready["status"]["conditions"] if c["type"] == "Ready")
    partial_message = next(c["message"] for c in partial["status"]["conditions"] if c["type"] == "Ready")

    def flip_shown() -> list[dict[str, str]] | None:
        rows = described_events(cluster, name)
        return rows if any(row["Reason"] == "UniformCapability" for row in rows) else None

    rows = wait_until(flip_shown, f"the Ready event in kubectl describe fcap {name}", timeout=EVENT_TIMEOUT)
    by_reason = {row["Reason"]: row for row in rows}
    flip = by_reason["UniformCapability"]
    assert (flip["Type"], flip["From"]) == ("Normal", "fabriccap")
    assert flip["Message"] == f"Ready=True: {ready_message}"
    # Before the flip: a Warning for each Ready=False reason the operator published. Its first
    # look saw the laggard alone (NotAdvertised), both nodes (PartialRollout), or a node before
    # its status (NoSchedulableNodes: add_node creates the Node, then writes its status, as a
    # kubelet registers; the suite once saw that look); a change of reason while False is an
    # Event too (SPEC Events, round 3), each reason once.
    not_ready = [row for row in rows if row["Message"].startswith("Ready=False: ")]
    reasons = {row["Reason"] for row in not_ready}
    assert reasons and reasons <= {"NoSchedulableNodes", "NotAdvertised", "PartialRollout"}, rows
    assert len(not_ready) == len(reasons), rows
    assert all((row["Type"], row["From"]) == ("Warning", "fabriccap") for row in not_ready)
    for row in not_ready:
        if row["Reason"] == "PartialRollout":
            assert row["Message"] == f"Ready=False: {partial_message}"

    # What kubectl matched on: the object's kind, name and uid, in no namespace.
    events = [
        event
        for event in kube.list_objects(EVENTS.collection())
        if event["involvedObject"].get("name") == name and event["reason"] == "UniformCapability"
    ]
    assert len(events) == 1
    involved = events[0]["involvedObject"]
    assert involved == {
        "apiVersion": "fabriccap.dev/v1alpha1",
        "kind": "FabricCapability",
        "name": name,
        "uid": ready["metadata"]["uid"],
    }

    # A restart that changes nothing sends none (docs/workloads.md, Events).
    def recorded() -> int:
        return sum(1 for event in kube.list_objects(EVENTS.collection()) if event["involvedObject"].get("name") == name)

    before = recorded()
    operator.restart()
    wait_until(
        lambda: operator.metrics().get("fabriccap_evaluations_total") or None,
        "the restarted operator's first evaluation",
        timeout=STATUS_TIMEOUT,
    )
    time.sleep(QUIET_SECONDS)  # several debounce windows: an Event of the first round would be in by now
    assert recorded() == before


# ---------------------------------------------------------------------------------------------
# fabriccap explain, live


def run_fabriccap(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabriccap", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_explain_in_live_mode_names_the_odd_node_and_agrees_with_the_published_status(
    world: World, cluster: E2ECluster, config_file: Path
) -> None:
    nodes = world.add_pool("odd", 3)
    laggard, unhealthy = nodes[1], nodes[2]
    world.set_fabric(laggard, 0)
    world.set_fabric(unhealthy, 16, capacity=32)
    published = wait_ready(world, "odd", "False", "PartialRollout", also=lambda status: status["gap"]["unhealthy"] == 1)
    name = world.fcap_name("odd")

    result = run_fabriccap(
        "explain",
        world.pool("odd"),
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--config",
        str(config_file),
        "-o",
        "json",
    )
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    explanation = json.loads(result.stdout)
    assert explanation["name"] == name
    rows = {row["name"]: row for row in explanation["nodes"]}
    assert sorted(rows) == sorted(nodes)
    assert (rows[laggard]["count"], rows[laggard]["plugin"], rows[laggard]["gaps"]) == (
        0,
        "Ready",
        ["pluginReadyNotAdvertised"],
    )
    assert rows[laggard]["pluginPods"] == [
        {
            "name": f"{world.namespace}/{world.pods[laggard]}",
            "daemonSet": f"{world.namespace}/{world.prefix}-efa-plugin",
            "source": "devicePlugin",
            "ready": True,
        }
    ]
    assert {finding["reason"] for finding in rows[laggard]["findings"]} >= {"NotAdvertised", "PartialRollout"}
    assert (rows[unhealthy]["capacity"], rows[unhealthy]["allocatable"], rows[unhealthy]["gaps"]) == (
        32,
        16,
        ["unhealthy"],
    )
    assert rows[nodes[0]]["findings"] == [] and rows[nodes[0]]["blocksReady"] is False
    # The operator published what explain computed, from its own watch of the same cluster.
    assert without_volatile(explanation["status"]) == without_volatile(published["status"])

    # The table, through the context of the kubeconfig, by the object's name.
    context = cluster.run_kubectl("config", "current-context").stdout.strip()
    table = run_fabriccap(
        "explain",
        f"fcap/{name}",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--context",
        context,
        "--config",
        str(config_file),
    )
    assert table.returncode == 0, table.stderr
    assert f"{laggard} (keeps the pool from Ready)" in table.stdout
    node_line = next(line for line in table.stdout.splitlines() if line.startswith(f"{unhealthy} "))
    assert "unhealthy" in node_line.split()

    missing = run_fabriccap("explain", f"{world.prefix}-nothing", "--kubeconfig", str(cluster.kubeconfig))
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr.startswith(f"error: no FabricCapability or pool '{world.prefix}-nothing'")
    assert len(missing.stderr.splitlines()) == 1
