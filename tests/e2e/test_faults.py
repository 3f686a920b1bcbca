"""The fault matrix, end to end: each fault is done for real to a control plane of this
module's own, with the operator running; each test prints how long recovery took.

After recovery, in every case, the published statuses equal `fabriccap evaluate` of a dump
of the same cluster, and the API server's audit log shows no write by the operator to
Nodes, Pods or DaemonSets.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabriccap.core.api import READY_LABEL, find_condition
from fabriccap.kube.paths import CRD_NAME, CUSTOM_RESOURCE_DEFINITIONS, FABRIC_CAPABILITIES, NAMESPACES
from fabriccap_devtools.controlplane.cluster import LocalControlPlane
from harness import (
    E2ECluster,
    OperatorProcess,
    Relay,
    SyncKube,
    World,
    condition,
    control_plane_with_crd,
    kubeconfig_via,
    published_equals_evaluate,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.faults

CRD_FILE = Path(__file__).resolve().parents[2] / "crds" / "fabriccapabilities.yaml"
RBAC_FILE = Path(__file__).resolve().parents[2] / "manifests" / "rbac.yaml"
CLUSTER_ROLES = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
CLUSTER_ROLE_BINDINGS = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
OPERATOR_USER = "fabriccap-operator"
RECOVERY_TIMEOUT = 90.0
STALE_AFTER = 6.0  # watches renew every 2 s, stall after 3.6 s silent; the default is 150 s


@dataclass
class Rig:
    """A control plane of its own, the operator (as its own user), and one test's world."""

    control_plane: LocalControlPlane
    cluster: E2ECluster
    kube: SyncKube
    operator: OperatorProcess
    world: World
    config: Path
    relay: Relay | None = None
    grant: Grant | None = None

    def names(self, *labels: str) -> list[str]:
        return [self.world.fcap_name(label) for label in labels]

    def status(self, label: str) -> dict[str, Any]:
        return dict((self.world.fcap(label) or {}).get("status") or {})

    def ready(self, label: str) -> tuple[str, str] | None:
        obj = self.world.fcap(label)
        if not obj or not (obj.get("status") or {}).get("conditions"):
            return None
        ready = condition(obj, "Ready")
        return ready["status"], ready["reason"]

    def wait_ready(self, label: str, status: str, reason: str, timeout: float = RECOVERY_TIMEOUT) -> float:
        started = time.monotonic()
        wait_until(
            lambda: self.ready(label) == (status, reason),
            f"{self.world.fcap_name(label)} Ready={status}/{reason}",
            timeout=timeout,
            interval=0.1,
        )
        return time.monotonic() - started

    def operator_writes_to_watched_kinds(self) -> list[str]:
        found = []
        for event in self.control_plane.audit_events():
            resource = (event.get("objectRef") or {}).get("resource")
            user = str(event.get("user", {}).get("username"))
            if user.startswith(OPERATOR_USER) and resource in ("nodes", "pods", "daemonsets"):
                found.append(f"{event.get('verb')} {resource} {(event.get('objectRef') or {}).get('name')}")
        return found

    def verify(self, *labels: str) -> None:
        """After recovery: the answer is what `fabriccap evaluate` says, and nothing else was written."""
        published_equals_evaluate(self.cluster, self.kube, self.config, self.names(*labels))
        assert self.operator_writes_to_watched_kinds() == []

    def report_sections(self) -> list[tuple[str, str]]:
        return self.operator.report_sections()


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    with control_plane_with_crd(tmp_path_factory.mktemp("faults-cp")) as plane:
        yield plane


@dataclass
class Grant:
    """The operator's ClusterRole (manifests/rbac.yaml), bound to one user of one test: rules
    can be taken away and given back while the operator runs."""

    kube: SyncKube
    name: str
    user: str
    rules: list[dict[str, Any]]

    @classmethod
    def create(cls, kube: SyncKube, user: str) -> Grant:
        documents = yaml.safe_load_all(RBAC_FILE.read_text())
        rules = next(doc for doc in documents if doc and doc.get("kind") == "ClusterRole")["rules"]
        grant = cls(kube, f"{user}-role", user, rules)
        kube.create(
            CLUSTER_ROLES,
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": grant.name}},
        )
        grant.restore()
        kube.create(
            CLUSTER_ROLE_BINDINGS,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": grant.name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": grant.name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            },
        )
        return grant

    def revoke(self, resource: str) -> None:
        """Every rule that names ``resource``, gone."""
        kept = [rule for rule in self.rules if resource not in rule.get("resources", [])]
        assert len(kept) < len(self.rules), f"no rule names {resource}"
        self.kube.patch(f"{CLUSTER_ROLES}/{self.name}", {"rules": kept})

    def restore(self) -> None:
        self.kube.patch(f"{CLUSTER_ROLES}/{self.name}", {"rules": self.rules})

    def delete(self) -> None:
        self.kube.delete(f"{CLUSTER_ROLE_BINDINGS}/{self.name}")
        self.kube.delete(f"{CLUSTER_ROLES}/{self.name}")


def _rig(
    control_plane: LocalControlPlane, tmp_path: Path, via_relay: bool = False, rbac: bool = False, **config: Any
) -> Rig:
    cluster = E2ECluster(kubeconfig=control_plane.kubeconfig, kubectl=control_plane.kubectl, local=control_plane)
    kube = SyncKube(cluster.kubeconfig)
    namespace = f"fcap-faults-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    config_file = write_config(
        tmp_path / "config.yaml",
        {
            "debounceSeconds": 0.1,
            "poolGracePeriodSeconds": 3,
            "staleAfterSeconds": STALE_AFTER,
            "fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [namespace]}}],
            **config,
        },
    )
    grant = None
    if rbac:  # as the chart's ClusterRole allows, and no more: a test may take some of it away
        user = f"{OPERATOR_USER}-{uuid.uuid4().hex[:6]}"
        grant = Grant.create(kube, user)
        kubeconfig = cluster.kubeconfig_for(user)
    else:
        kubeconfig = cluster.kubeconfig_for(OPERATOR_USER, ["system:masters"])
    relay = None
    if via_relay:
        port = int(urllib.parse.urlsplit(control_plane.info.server).port or 443)
        relay = Relay("127.0.0.1", port)
        kubeconfig = kubeconfig_via(kubeconfig, f"https://127.0.0.1:{relay.port}", tmp_path / "via-relay.kubeconfig")
    operator = OperatorProcess(kubeconfig=kubeconfig, config=config_file, log_path=tmp_path / "operator.log")
    world = World(kube=kube, namespace=namespace, prefix=f"f-{uuid.uuid4().hex[:5]}")
    return Rig(control_plane, cluster, kube, operator, world, config_file, relay, grant)


@pytest.fixture
def rig(control_plane: LocalControlPlane, tmp_path: Path) -> Iterator[Rig]:
    made = _rig(control_plane, tmp_path, resyncSeconds=4)
    yield from _run(made)


@pytest.fixture
def patient_rig(control_plane: LocalControlPlane, tmp_path: Path) -> Iterator[Rig]:
    """A rig whose watches may go a minute without progress before they are replaced by a LIST:
    for faults that pause the operator for longer than the usual rig's 3 s, when what the test
    checks is how the watch itself recovers."""
    made = _rig(control_plane, tmp_path, resyncSeconds=4, staleAfterSeconds=120)
    yield from _run(made)


@pytest.fixture
def relayed_rig(control_plane: LocalControlPlane, tmp_path: Path) -> Iterator[Rig]:
    made = _rig(control_plane, tmp_path, via_relay=True)
    yield from _run(made)


def _run(made: Rig) -> Iterator[Rig]:
    try:
        made.operator.start()
        yield made
        assert made.operator.running, f"the operator died:\n{made.operator.log()}"
    finally:
        if made.relay is not None:
            made.relay.resume()
        made.operator.stop()
        if made.relay is not None:
            made.relay.close()
        if made.grant is not None:
            made.grant.delete()
        made.world.cleanup(wait=False)
        made.kube.delete(NAMESPACES.item(made.world.namespace))
        made.kube.close()


def _reconnect(rig: Rig) -> None:
    """A new client after the API server came back (the rig's own is a fixture's, not the operator's)."""
    rig.kube.close()
    rig.kube = SyncKube(rig.cluster.kubeconfig)
    rig.world.kube = rig.kube


def _two_pools(rig: Rig) -> tuple[list[str], list[str]]:
    ready = rig.world.add_pool("ready", 2, efa=32)
    other = rig.world.add_pool("other", 2, efa=32)
    rig.wait_ready("ready", "True", "UniformCapability")
    rig.wait_ready("other", "True", "UniformCapability")
    return ready, other


def test_apiserver_killed_and_restarted(rig: Rig) -> None:
    ready, _ = _two_pools(rig)
    rig.control_plane.kill("kube-apiserver")
    time.sleep(5)  # the operator's watches break and back off
    restarted = time.monotonic()
    rig.control_plane.restart("kube-apiserver")
    _reconnect(rig)
    rig.world.set_fabric(ready[0], 0)
    seconds = rig.wait_ready("ready", "False", "PartialRollout")
    print(f"\napiserver restart: a change is published {time.monotonic() - restarted:.1f}s after the restart")
    assert seconds < RECOVERY_TIMEOUT
    rig.verify("ready", "other")


def test_etcd_killed_and_restarted(rig: Rig) -> None:
    ready, _ = _two_pools(rig)
    rig.control_plane.kill("etcd")
    time.sleep(5)  # the API server answers errors; the operator's lists and watches fail
    restarted = time.monotonic()
    rig.control_plane.restart("etcd")
    wait_until(lambda: rig.kube.get(NAMESPACES.item("default")), "the API server to reach etcd again", timeout=60)
    rig.world.set_fabric(ready[1], 16)
    rig.wait_ready("ready", "False", "MixedCounts")
    print(f"\netcd restart: a change is published {time.monotonic() - restarted:.1f}s after the restart")
    rig.verify("ready", "other")


def test_operator_killed_in_the_middle_of_a_burst(rig: Rig) -> None:
    ready, _ = _two_pools(rig)
    before = {c["type"]: c["lastTransitionTime"] for c in rig.status("other")["conditions"]}
    stop = threading.Event()
    flips = [0]

    def burst() -> None:
        kube = SyncKube(rig.cluster.kubeconfig)
        try:
            while not stop.is_set() and flips[0] < 400:
                for node in ready:
                    kube.patch(
                        f"/api/v1/nodes/{node}/status",
                        {"status": {"allocatable": {"vpc.amazonaws.com/efa": str(16 if flips[0] % 2 else 32)}}},
                    )
                flips[0] += 1
        finally:
            kube.close()

    writer = threading.Thread(target=burst)
    writer.start()
    time.sleep(1.5)
    rig.operator.kill()  # SIGKILL mid-burst: no clean shutdown, writes cut short
    time.sleep(1.0)
    stop.set()
    writer.join(30)
    for node in ready:  # the burst ends where it began
        rig.world.set_fabric(node, 32)
    restarted = time.monotonic()
    rig.operator.start()
    rig.wait_ready("ready", "True", "UniformCapability")
    settled = time.monotonic() - restarted
    print(f"\noperator SIGKILL after {flips[0]} rounds of patches: settled {settled:.1f}s after restart")
    rig.verify("ready", "other")
    # A pool the burst never touched keeps every transition time: a restart is not a transition.
    after = {c["type"]: c["lastTransitionTime"] for c in rig.status("other")["conditions"]}
    assert after == before


def _etcd_revision(etcd_url: str) -> int:
    request = urllib.request.Request(f"{etcd_url}/v3/kv/range", data=json.dumps({"key": "AA=="}).encode())
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(json.loads(response.read())["header"]["revision"])


def _etcd_compact(etcd_url: str, revision: int) -> None:
    body = json.dumps({"revision": str(revision), "physical": True}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{etcd_url}/v3/kv/compaction", data=body), timeout=30):
        pass


def test_etcd_compaction_forces_a_410_and_a_relist(patient_rig: Rig) -> None:
    # Paused for longer than the usual rig's progress timeout (3 s), the operator would list
    # again on waking for want of progress, before any watch could meet the 410.
    rig = patient_rig
    ready, other = _two_pools(rig)
    rig.operator.pause()  # its watches hold resourceVersions that are about to be compacted away
    # Its connections die while it sleeps, so no event of what follows can reach it.
    rig.control_plane.kill("kube-apiserver")
    rig.control_plane.restart("kube-apiserver")
    _reconnect(rig)
    rig.world.delete_node(other[1])  # a deletion it can learn of only by listing again
    rig.world.set_fabric(ready[0], 8)
    _etcd_compact(rig.control_plane.info.etcd_url, _etcd_revision(rig.control_plane.info.etcd_url))
    rig.control_plane.kill("kube-apiserver")  # its watch cache starts again after the compaction
    rig.control_plane.restart("kube-apiserver")
    _reconnect(rig)
    resumed = time.monotonic()
    rig.operator.mark_log()
    rig.operator.resume()
    rig.wait_ready("ready", "False", "MixedCounts")
    wait_until(lambda: rig.status("other").get("nodes") == 1, "the deleted node to leave its pool", timeout=60)
    print(f"\ncompaction: relisted and settled {time.monotonic() - resumed:.1f}s after resuming")
    assert "expired; listing again" in rig.operator.log()
    rig.verify("ready", "other")


def test_crd_deleted_and_recreated(rig: Rig) -> None:
    _two_pools(rig)
    rig.kube.delete(CUSTOM_RESOURCE_DEFINITIONS.item(CRD_NAME))
    wait_until(lambda: rig.kube.get(CUSTOM_RESOURCE_DEFINITIONS.item(CRD_NAME)) is None, "the CRD to go", timeout=60)
    time.sleep(3)
    recreated = time.monotonic()
    rig.cluster.run_kubectl("apply", "--server-side", "-f", str(CRD_FILE))
    rig.cluster.run_kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_FILE))
    rig.wait_ready("ready", "True", "UniformCapability")
    rig.wait_ready("other", "True", "UniformCapability")
    print(f"\nCRD recreated: every object back {time.monotonic() - recreated:.1f}s later")
    rig.verify("ready", "other")


def test_hand_edits_are_put_back(rig: Rig) -> None:
    ready, _ = _two_pools(rig)
    rig.world.set_fabric(ready[0], 0)
    rig.wait_ready("ready", "False", "PartialRollout")
    name = rig.world.fcap_name("ready")
    path = FABRIC_CAPABILITIES.item(name)
    times = {c["type"]: c["lastTransitionTime"] for c in rig.status("ready")["conditions"]}
    # Someone forges Ready=True, backdates every transition, and strips the managed-by label.
    forged = [
        {**c, "status": "True" if c["type"] == "Ready" else c["status"], "lastTransitionTime": "2001-01-01T00:00:00Z"}
        for c in rig.status("ready")["conditions"]
    ]
    edited = time.monotonic()
    rig.kube.patch(path + "/status", {"status": {"conditions": forged}})
    rig.kube.patch(path, {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}})
    rig.wait_ready("ready", "False", "PartialRollout", timeout=30)
    wait_until(
        lambda: {c["type"]: c["lastTransitionTime"] for c in rig.status("ready")["conditions"]} == times,
        "the transition times to be put back",
        timeout=30,
    )
    wait_until(
        lambda: (
            ((rig.world.fcap("ready") or {})["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by")
            == "fabriccap"
        ),
        "the managed-by label to be put back (at the next resync)",
        timeout=30,
    )
    print(f"\nhand edits put back within {time.monotonic() - edited:.1f}s")
    # An object made by hand for a pool that does not exist: deleted after the grace period,
    # and its forged Ready=True never reaches the metrics.
    ghost = f"efa-{rig.world.prefix}-ghost"
    rig.kube.create(
        FABRIC_CAPABILITIES.collection(),
        {
            "apiVersion": "fabriccap.dev/v1alpha1",
            "kind": "FabricCapability",
            "metadata": {"name": ghost, "labels": {"app.kubernetes.io/managed-by": "fabriccap"}},
        },
    )
    rig.kube.patch(FABRIC_CAPABILITIES.status(ghost), {"status": rig.status("other")})  # valid, and Ready
    assert rig.operator.metrics().series("fabriccap_pool_ready", name=ghost) == []
    wait_until(lambda: rig.kube.fcap(ghost) is None, "the hand-made object to be deleted", timeout=30)
    rig.verify("ready", "other")


def test_a_partition_is_visible_and_heals(relayed_rig: Rig) -> None:
    rig = relayed_rig
    assert rig.relay is not None
    ready, _ = _two_pools(rig)
    labels = {"name": rig.world.fcap_name("ready"), "fabric": "efa", "pool": rig.world.pool("ready")}
    assert rig.operator.metrics().get("fabriccap_pool_ready", **labels) == 1.0
    rig.relay.pause()
    paused = time.monotonic()
    # The pool loses EFA while the operator is cut off: nothing it publishes can say so, but
    # it must stop looking healthy and its pools must stop reading Ready.
    rig.world.set_fabric(ready[0], 0)
    wait_until(lambda: rig.operator.health_status() == 500, "/healthz to fail on stale data", timeout=30)
    seen_stale = time.monotonic() - paused
    assert rig.operator.metrics().get("fabriccap_pool_ready", **labels) == 0.0
    # Stale means some watched kind has been silent past the threshold: /healthz answers for the
    # oldest (computed per request; kopf's probe, which served it before, cached its answer 10 s).
    metrics = rig.operator.metrics()
    heard = [
        heard_at
        for labels in metrics.series("fabriccap_watch_last_event_timestamp_seconds")
        if (heard_at := metrics.get("fabriccap_watch_last_event_timestamp_seconds", **labels))  # 0: never
    ]
    assert heard and time.time() - min(heard) > STALE_AFTER, heard
    time.sleep(5)
    rig.relay.resume()
    resumed = time.monotonic()
    rig.wait_ready("ready", "False", "PartialRollout")
    wait_until(lambda: rig.operator.health_status() == 200, "/healthz to recover", timeout=30)
    print(
        f"\npartition: stale after {seen_stale:.1f}s (threshold {STALE_AFTER:.0f}s); "
        f"the change published {time.monotonic() - resumed:.1f}s after it healed"
    )
    rig.verify("ready", "other")


@pytest.fixture
def rbac_rig(control_plane: LocalControlPlane, tmp_path: Path) -> Iterator[Rig]:
    """The operator with the chart's RBAC only, the default resync (5 minutes) and grace period
    long enough to tell "at once" from "after the grace period"."""
    made = _rig(control_plane, tmp_path, rbac=True, poolGracePeriodSeconds=GRACE)
    yield from _run(made)


GRACE = 20


@pytest.fixture
def quiet_rig(control_plane: LocalControlPlane, tmp_path: Path) -> Iterator[Rig]:
    """As ``rbac_rig``, with the default staleAfterSeconds (150 s): nothing but a retry's own
    wake-up brings the loop back within seconds (the short one of the other rigs wakes it
    every few seconds to look at the watches' ages, and would retry a write by the way)."""
    made = _rig(control_plane, tmp_path, rbac=True, poolGracePeriodSeconds=GRACE, staleAfterSeconds=150.0)
    yield from _run(made)


def _ready_and_label(rig: Rig, label: str) -> tuple[str, str]:
    obj = rig.world.fcap(label) or {}
    ready = find_condition(obj.get("status"), "Ready") or {}
    return str(ready.get("status")), str((obj.get("metadata", {}).get("labels") or {}).get(READY_LABEL))


def test_a_refused_status_write_is_retried_on_its_backoff_and_the_ready_label_never_runs_ahead(quiet_rig: Rig) -> None:
    """Round 3 L3, L13: a status PATCH refused (RBAC taken away) is retried on the object's
    backoff, not at the next resync (5 minutes); meanwhile the ready label, which the admission
    policy selects by, never says ready while the status does not."""
    rig = quiet_rig
    assert rig.grant is not None
    ready, _ = _two_pools(rig)
    rig.world.set_fabric(ready[0], 0)
    rig.wait_ready("ready", "False", "PartialRollout")
    rig.grant.revoke("fabriccapabilities/status")
    time.sleep(1.0)  # the authorizer sees the new rules
    rig.world.set_fabric(ready[0], 32)  # Ready again: the status may not say so
    seen = set()
    watched_until = time.monotonic() + 8
    while time.monotonic() < watched_until:
        seen.add(_ready_and_label(rig, "ready"))
        time.sleep(0.1)
    assert ("False", "true") not in seen, seen  # the label never ahead of the status
    assert _ready_and_label(rig, "ready") == ("False", "false")
    refused = rig.operator.metrics().get("fabriccap_status_writes_total", result="error") or 0.0
    assert refused >= 2, refused  # tried, and tried again on its backoff
    restored = time.monotonic()
    rig.grant.restore()
    rig.wait_ready("ready", "True", "UniformCapability", timeout=60)
    print(f"\nstatus write refused by RBAC: published {time.monotonic() - restored:.1f}s after the restore")
    wait_until(lambda: _ready_and_label(rig, "ready") == ("True", "true"), "the label raised after the status")
    rig.verify("ready", "other")


def test_unreadable_pods_fail_closed_in_the_object(rbac_rig: Rig) -> None:
    """Round 3 L12: with pods list/watch revoked, after staleAfterSeconds every object says Ready
    False DataUnavailable naming Pods (a GitOps gate reads the object, not the metric)."""
    rig = rbac_rig
    assert rig.grant is not None
    _two_pools(rig)
    revoked = time.monotonic()
    rig.grant.revoke("pods")
    rig.wait_ready("ready", "False", "DataUnavailable", timeout=60)
    print(f"\npods unreadable: DataUnavailable {time.monotonic() - revoked:.1f}s after the revoke")
    message = condition(rig.world.fcap("ready") or {}, "Ready")["message"]
    assert "Pods" in message and "Nodes" not in message, message
    assert _ready_and_label(rig, "other") == ("False", "false")
    rig.grant.restore()
    rig.wait_ready("ready", "True", "UniformCapability")
    rig.wait_ready("other", "True", "UniformCapability")
    rig.verify("ready", "other")


def test_a_pool_that_loses_every_node_and_an_object_no_pool_calls_for_say_so_at_once(rbac_rig: Rig) -> None:
    """Round 3 L26 and H5: Ready False NoTargetNodes at once, deletion after the grace period."""
    rig = rbac_rig
    ready, _ = _two_pools(rig)
    deleted = time.monotonic()
    for node in list(ready):
        rig.world.delete_node(node)
    rig.wait_ready("ready", "False", "NoTargetNodes", timeout=15)
    emptied = time.monotonic() - deleted
    status = rig.status("ready")
    assert (status["nodes"], status["advertisingNodes"], status["counts"]) == (0, 0, [])
    assert _ready_and_label(rig, "ready") == ("False", "false")
    labels = {"name": rig.world.fcap_name("ready"), "fabric": "efa", "pool": rig.world.pool("ready")}
    metrics = rig.operator.metrics()
    assert (metrics.get("fabriccap_pool_ready", **labels), metrics.get("fabriccap_pool_nodes", **labels)) == (0, 0)
    # Someone makes an object for a pool that does not exist, managed-by label and a Ready=True
    # status copied from a real pool: it is overwritten at once.
    ghost = f"efa-{rig.world.prefix}-ghost"
    rig.kube.create(
        FABRIC_CAPABILITIES.collection(),
        {
            "apiVersion": "fabriccap.dev/v1alpha1",
            "kind": "FabricCapability",
            "metadata": {"name": ghost, "labels": {"app.kubernetes.io/managed-by": "fabriccap"}},
        },
    )
    forged_at = time.monotonic()
    rig.kube.patch(FABRIC_CAPABILITIES.status(ghost), {"status": rig.status("other")})

    def ghost_ready() -> dict[str, Any]:
        return find_condition((rig.kube.fcap(ghost) or {}).get("status"), "Ready") or {}

    wait_until(lambda: ghost_ready().get("reason") == "NoTargetNodes", "the forged object overwritten", timeout=15)
    overwritten = time.monotonic() - forged_at
    assert ghost_ready()["status"] == "False" and ghost_ready()["message"].startswith("no such pool")
    print(f"\nemptied pool: NoTargetNodes after {emptied:.1f}s; forged object overwritten after {overwritten:.1f}s")
    assert rig.world.fcap("ready") is not None  # deletion waits for the grace period
    wait_until(lambda: rig.world.fcap("ready") is None, "the emptied pool's object deleted", timeout=GRACE + 30)
    wait_until(lambda: rig.kube.fcap(ghost) is None, "the forged object deleted", timeout=GRACE + 30)
    assert time.monotonic() - deleted >= GRACE
    rig.verify("other")
