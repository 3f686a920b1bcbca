"""Quiet watches on a real API server: nudged, not listed again.

A watch of a kind nothing writes hears no bookmark: kube-apiserver sends none that would not
advance the watch's resourceVersion, and its watch cache's version for that kind moves only
with the kind's own writes or etcd's progress reports. Without more, such a watch shows no
progress, and the operator checks it with a LIST of the whole collection every half
staleAfterSeconds (every ResourceSlice of a quiet DRA driver, every 75 s). The operator nudges
it instead (``informers.NUDGE_SELECTOR``): a consistent LIST that matches no object, which the
API server answers from its cache after asking etcd for progress, so the bookmark at the end of
the watch request advances. This checks that against kube-apiserver itself: over three check
intervals, every quiet watch is nudged and none is listed again.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabriccap.kube.credentials import load_kubeconfig
from fabriccap.kube.paths import NAMESPACES
from fabriccap_devtools.controlplane.cluster import LocalControlPlane
from fabriccap_devtools.faultproxy import FaultProxy
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

OWN_PATHS = ("/apis/fabriccap.dev/", "/apis/apiextensions.k8s.io/")
# Watch requests of 16 s, bookmarked 2 s before their end; a watch without progress for 20 s
# would be checked by a LIST, and one quiet for 2 s is nudged (informers.watch_timings).
STALE_AFTER = 40.0
# Three check intervals, after the start.
OBSERVED_SECONDS = 65.0
# What keeps etcd's revision moving in every real cluster: the node and leader Leases, renewed
# every 10 s. Nothing else writes to this control plane.
OTHER_WRITES_EVERY = 1.0


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    with control_plane_with_crd(tmp_path_factory.mktemp("quiet-watches-cp")) as plane:
        yield plane


def _write_elsewhere(kubeconfig: Path, namespace: str, stop: threading.Event) -> None:
    """A ConfigMap written every OTHER_WRITES_EVERY, until ``stop``: a kind the operator never reads."""
    kube = SyncKube(kubeconfig)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    try:
        kube.create(path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "renewed"}, "data": {}})
        for count in range(int(OBSERVED_SECONDS * 3 / OTHER_WRITES_EVERY)):  # bounded: stop ends it first
            if stop.wait(OTHER_WRITES_EVERY):
                return
            kube.patch(f"{path}/renewed", {"data": {"count": str(count)}})
    finally:
        kube.close()


def test_quiet_watches_are_nudged_and_never_listed_again(control_plane: LocalControlPlane, tmp_path: Path) -> None:
    cluster = E2ECluster(kubeconfig=control_plane.kubeconfig, kubectl=control_plane.kubectl, local=control_plane)
    kube = SyncKube(cluster.kubeconfig)
    namespace = f"fcap-qw-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    config = write_config(
        tmp_path / "config.yaml",
        {
            "staleAfterSeconds": STALE_AFTER,
            "workloads": {"enabled": False},
            "fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [namespace]}}],
        },
    )
    # The proxy only passes requests on, and tells which were made.
    proxy = FaultProxy(load_kubeconfig(str(cluster.kubeconfig_for("fabriccap-operator", ["system:masters"])))).start()
    operator = OperatorProcess(
        kubeconfig=proxy.kubeconfig(tmp_path / "via-proxy.kubeconfig"), config=config, log_path=tmp_path / "op.log"
    )
    world = World(kube=kube, namespace=namespace, prefix=f"qw-{uuid.uuid4().hex[:5]}")
    stop = threading.Event()
    writer = threading.Thread(target=_write_elsewhere, args=(cluster.kubeconfig, namespace, stop), daemon=True)
    try:
        world.add_pool("p5", 2, efa=32)
        writer.start()
        operator.start()
        wait_until(lambda: _ready(world), "the pool Ready", timeout=90)
        # The window opens once the operator's own objects are listed too: a new CRD's storage
        # answers 429 ("storage is (re)initializing") for its first seconds, and the listing
        # retried after that is the first one, not a listing again (its watch follows it).
        wait_until(lambda: _own_objects_listed(proxy), "the FabricCapabilities listed", timeout=60)
        started = len(proxy.requests())
        time.sleep(OBSERVED_SECONDS)
        seen = proxy.requests()[started:]
        # A LIST in pages, or streaming (a watch that sends the initial events).
        listed = [
            f"{r.path}?{r.query}"
            for r in seen
            if (r.verb == "list" and "fieldSelector" not in r.query) or "sendInitialEvents" in r.query
        ]
        nudged = {r.path for r in seen if r.verb == "list" and "fabriccap:progress" in r.query.get("fieldSelector", "")}
        metrics = operator.metrics()
        relists = {
            f"{labels['kind']}/{labels['found']}": metrics.get("fabriccap_watch_relists_total", **labels)
            for labels in metrics.series("fabriccap_watch_relists_total")
        }
        assert not listed and not any(relists.values()), (listed, relists)
        # The nudges, as a platform engineer reads them: sent, none given up on.
        sent = {
            labels["kind"]
            for labels in metrics.series("fabriccap_watch_nudges_total", result="sent")
            if metrics.get("fabriccap_watch_nudges_total", **labels)
        }
        gave_up = sum(
            metrics.get("fabriccap_watch_nudges_total", **labels) or 0.0
            for labels in metrics.series("fabriccap_watch_nudges_total", result="gave_up")
        )
        assert "node" in sent and gave_up == 0, (sent, gave_up)
        # Every collection the informers watch was quiet here (the pool's nodes, the plugin's
        # DaemonSet and pods, the DRA kinds), and each was nudged. The operator's own objects
        # are watched for what they hold, not for the view's freshness (and by kopf): never checked.
        watched = {r.path for r in seen if r.verb == "watch" and not r.path.startswith(OWN_PATHS)}
        assert watched and nudged == watched, (watched, nudged)
        assert operator.health_status() == 200 and operator.running
        assert "made no progress" not in operator.log() and "checked by a LIST from now on" not in operator.log()
    finally:
        stop.set()
        writer.join(timeout=10)
        operator.stop()
        proxy.stop()
        world.cleanup(wait=False)
        kube.delete(NAMESPACES.item(namespace))
        kube.close()


def _own_objects_listed(proxy: FaultProxy) -> bool:
    """Whether the informer of the operator's own objects watches them: its listing is over.
    (Not "a LIST of them was answered": the publisher reads them back once with a LIST of its
    own, which a 429 to the informer's streaming list does not hold up.)"""
    return any(
        r.path.startswith(OWN_PATHS[0]) and r.verb == "watch" and "sendInitialEvents" not in r.query
        for r in proxy.requests()
    )


def _ready(world: World) -> bool:
    obj = world.fcap("p5")
    return bool(obj and (obj.get("status") or {}).get("conditions") and condition(obj, "Ready")["status"] == "True")
