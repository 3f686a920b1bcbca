"""Watch faults end to end (round 3's L5, L6, L8, L9, L11): the operator reaches a real API
server through the fault-injecting proxy (``fabriccap_devtools.faultproxy``), which breaks its
watches in the ways a broken proxy, load balancer or API server would.

Two promises are checked: one bad line never ends the operator, and it applies the next real
change; and the operator's view is never reported fresher than it is: while nothing it reads
can make progress, /healthz fails and ``fabriccap_pool_ready`` reads 0 after
``staleAfterSeconds``, and a watch that makes no progress is replaced by a LIST, so a change
the watch never delivered still reaches the FabricCapability.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fabriccap.kube.credentials import load_kubeconfig
from fabriccap.kube.paths import NAMESPACES, NODES
from fabriccap_devtools.controlplane.cluster import LocalControlPlane
from fabriccap_devtools.faultproxy import FaultProxy, Inject, Rule, Silent, Truncate
from harness import (
    E2ECluster,
    OperatorProcess,
    SyncKube,
    World,
    condition,
    control_plane_with_crd,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.faults

OPERATOR_USER = "fabriccap-operator"
# Watches renew every 2 s and are replaced by a LIST after 3 s without progress.
STALE_AFTER = 6.0
TIMEOUT = 90.0


@dataclass
class Rig:
    kube: SyncKube
    operator: OperatorProcess
    proxy: FaultProxy
    world: World
    nodes: list[str]

    def ready(self) -> tuple[str, str] | None:
        obj = self.world.fcap("p5")
        if not obj or not (obj.get("status") or {}).get("conditions"):
            return None
        ready = condition(obj, "Ready")
        return ready["status"], ready["reason"]

    def wait_ready(self, status: str, reason: str) -> None:
        wait_until(lambda: self.ready() == (status, reason), f"Ready={status}/{reason}", timeout=TIMEOUT, interval=0.2)

    def pool_ready(self) -> float | None:
        labels = {"name": self.world.fcap_name("p5"), "fabric": "efa", "pool": self.world.pool("p5")}
        return self.operator.metrics().get("fabriccap_pool_ready", **labels)

    def rejected(self) -> float:
        return self.operator.metrics().get("fabriccap_watch_events_total", kind="node", result="rejected") or 0.0

    def node_watches(self, action: str) -> int:
        """How many nodes watches the proxy has handled with ``action``."""
        return sum(seen.action == action for seen in self.proxy.requests(verb="watch", path=NODES.collection()))

    def fault_next_node_watch(self, action: Any, times: int | None = 1, verb: str = "watch") -> Rule:
        """Apply ``action`` to the operator's next nodes watch(es) (and LISTs, with verb read),
        and wait until a watch has met it: the stream opened before it is over."""
        before = self.node_watches(action.kind)
        rule = self.proxy.add(Rule(verb, NODES.collection(), action, times=times))
        wait_until(lambda: self.node_watches(action.kind) > before, f"a nodes watch to meet {action}", timeout=TIMEOUT)
        return rule

    def wait_next_node_watch(self) -> None:
        """Wait until the operator opens one more nodes watch (resuming the one before)."""
        before = len(self.proxy.requests(verb="watch", path=NODES.collection()))
        wait_until(
            lambda: len(self.proxy.requests(verb="watch", path=NODES.collection())) > before,
            "the nodes watch to be resumed",
            timeout=TIMEOUT,
        )

    def report_sections(self) -> list[tuple[str, str]]:
        seen = [f"{s.verb} {s.path}?{s.query} -> {s.action} {s.status}" for s in self.proxy.requests()][-80:]
        return [*self.operator.report_sections(), ("proxy requests (last 80)", "\n".join(seen))]


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    with control_plane_with_crd(tmp_path_factory.mktemp("watch-faults-cp")) as plane:
        yield plane


@pytest.fixture
def rig(control_plane: LocalControlPlane, tmp_path: Path) -> Iterator[Rig]:
    cluster = E2ECluster(kubeconfig=control_plane.kubeconfig, kubectl=control_plane.kubectl, local=control_plane)
    kube = SyncKube(cluster.kubeconfig)
    namespace = f"fcap-wf-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    config = write_config(
        tmp_path / "config.yaml",
        {
            "debounceSeconds": 0.1,
            "poolGracePeriodSeconds": 3,
            "staleAfterSeconds": STALE_AFTER,
            "workloads": {"enabled": False},
            "fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [namespace]}}],
        },
    )
    proxy = FaultProxy(load_kubeconfig(str(cluster.kubeconfig_for(OPERATOR_USER, ["system:masters"])))).start()
    operator = OperatorProcess(
        kubeconfig=proxy.kubeconfig(tmp_path / "via-proxy.kubeconfig"),
        config=config,
        log_path=tmp_path / "operator.log",
    )
    world = World(kube=kube, namespace=namespace, prefix=f"wf-{uuid.uuid4().hex[:5]}")
    made = Rig(kube, operator, proxy, world, [])
    try:
        made.nodes = world.add_pool("p5", 2, efa=32)
        operator.start()
        made.wait_ready("True", "UniformCapability")
        yield made
    finally:
        proxy.clear()
        operator.stop()
        proxy.stop()
        world.cleanup(wait=False)
        kube.delete(NAMESPACES.item(namespace))
        kube.close()


def _phantom_pod(rig: Rig) -> dict[str, Any]:
    """L6: a Pod that carries the pool's node labels, inside the nodes watch."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "phantom-from-a-pod-event",
            "namespace": "default",
            "resourceVersion": "1",
            "labels": {
                "eks.amazonaws.com/nodegroup": rig.world.pool("p5"),
                "node.kubernetes.io/instance-type": "p5.48xlarge",
            },
        },
        "spec": {"nodeName": rig.nodes[0], "containers": [{"name": "c", "image": "x"}]},
        "status": {"allocatable": {"vpc.amazonaws.com/efa": "0"}},
    }


MALFORMED = {
    "json-array": "[]",
    "json-string": '"x"',
    "object-is-string": json.dumps({"type": "ADDED", "object": "str"}),
    "metadata-is-list": json.dumps({"type": "MODIFIED", "object": {"kind": "Node", "metadata": ["x"]}}),
    "garbage-bytes": "\x00\x7f{{ not json",
}


def test_each_malformed_line_is_survived_and_the_next_change_applied(rig: Rig) -> None:
    """L5 (and L4): every variant in turn, on one operator; each time, a real change after it."""
    for count, (variant, line) in enumerate(MALFORMED.items(), start=1):
        rig.fault_next_node_watch(Inject((line,)))
        efa = 0 if count % 2 else 32
        rig.world.set_fabric(rig.nodes[0], efa)
        rig.wait_ready(*(("False", "PartialRollout") if efa == 0 else ("True", "UniformCapability")))
        assert rig.operator.running, f"the operator ended after {variant}:\n{rig.operator.log()}"
        assert rig.rejected() >= count, variant
    log = rig.operator.log()
    for cause in ("not an object", "object is not an object", "metadata is not a map", "undecodable line"):
        assert f"rejected a line ({cause}" in log


def test_a_pod_in_the_nodes_watch_is_not_taken_for_a_node(rig: Rig) -> None:
    """L6: had it been taken, the pool would have 3 nodes, one without EFA: PartialRollout."""
    rig.fault_next_node_watch(Inject((json.dumps({"type": "ADDED", "object": _phantom_pod(rig)}),)))
    rig.world.set_fabric(rig.nodes[1], 16)  # a real change after it
    rig.wait_ready("False", "MixedCounts")
    status = (rig.world.fcap("p5") or {})["status"]
    assert status["nodes"] == 2, status
    assert rig.rejected() >= 1
    said = "rejected a line (wrong kind: 'Pod' in a watch of Node, object 'phantom-from-a-pod-event')"
    assert said in rig.operator.log()


def test_a_bookmark_from_the_future_does_not_blind_the_watch(rig: Rig) -> None:
    """L11: one bookmark at resourceVersion 99999999999. Taken, the watch would resume from it
    and the server, which has not reached it, would send nothing: changes after that resumption
    would never be seen."""
    bogus = json.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "99999999999"}}})
    rig.fault_next_node_watch(Inject((bogus,)))
    rig.wait_next_node_watch()
    rig.world.set_fabric(rig.nodes[0], 0)
    rig.wait_ready("False", "PartialRollout")
    assert "rejected a line (implausible resourceVersion: 99999999999 is beyond" in rig.operator.log()
    resumed = [seen.query.get("resourceVersion") for seen in rig.proxy.requests(verb="watch", path=NODES.collection())]
    assert "99999999999" not in resumed


@pytest.mark.parametrize(
    "fault",
    [pytest.param(Silent(), id="silent"), pytest.param(Truncate(200), id="truncated")],
)
def test_nodes_that_cannot_be_read_go_stale_and_the_pool_stops_reading_ready(rig: Rig, fault: Any) -> None:
    """L8, L9: every nodes LIST and watch is accepted and then says nothing, or is cut after
    200 bytes. Nothing about nodes can make progress: after staleAfterSeconds /healthz fails and
    pool_ready reads 0, though the status the operator last published says Ready."""
    assert rig.operator.health_status() == 200 and rig.pool_ready() == 1.0
    rule = rig.fault_next_node_watch(fault, times=None, verb="read")
    broken, broken_at = time.monotonic(), time.time()  # no nodes stream from before goes on
    rig.world.set_fabric(rig.nodes[0], 0)  # the pool loses EFA meanwhile
    wait_until(lambda: rig.operator.health_status() == 500, "/healthz to fail on stale nodes", timeout=TIMEOUT)
    assert rig.pool_ready() == 0.0
    # Nothing about nodes made progress since: a watch accepted again and again is not news.
    last = rig.operator.metrics().get("fabriccap_watch_last_event_timestamp_seconds", kind="node") or 0
    assert last <= broken_at, f"nodes reported current {last - broken_at:.1f}s after they stopped being readable"
    print(f"\n{type(fault).__name__}: stale after {time.monotonic() - broken:.1f}s (threshold {STALE_AFTER:.0f}s)")
    rig.proxy.remove(rule)
    rig.wait_ready("False", "PartialRollout")
    wait_until(lambda: rig.operator.health_status() == 200, "/healthz to recover", timeout=TIMEOUT)


@pytest.mark.parametrize(
    "fault",
    [pytest.param(Silent(), id="silent"), pytest.param(Truncate(200), id="truncated")],
)
def test_a_watch_that_makes_no_progress_is_replaced_by_a_list(rig: Rig, fault: Any) -> None:
    """L8, L9 with LISTs working: the change the watch never delivers is read by the LIST that
    replaces it, and the view never counts as fresher than that LIST."""
    rig.operator.mark_log()
    rig.fault_next_node_watch(fault, times=None)
    rig.world.set_fabric(rig.nodes[0], 0)
    rig.wait_ready("False", "PartialRollout")
    assert "made no progress" in rig.operator.log()
    assert rig.operator.running
