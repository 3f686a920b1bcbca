"""The operator image, running as a pod of the chart on real kubelets.

The image is the one ``make image`` builds (scripts/build-image.sh, cached: ~10 s warm), imported
into each node's containerd by digest; nothing is pulled. ``helm install`` puts the chart into a
namespace that enforces Pod Security ``restricted``; the pod reaches the API server through its
node's relay (``fabriccap_devtools.controlplane.relay``: ``extraEnv`` sets ``KUBERNETES_SERVICE_HOST``
from ``status.hostIP``) with its own ServiceAccount token. Around the two kubelets (pool
``p5-partial``) the demo's simulated cluster is loaded, so the pod publishes the demo's pools
and its memory is measured at the demo's size.

The API server's audit log says who wrote: every FabricCapability write must come from the
chart's ServiceAccount. Root only (``realnodes``), like tests/e2e/test_real_nodes.py; the
figures (RSS, failover time, the quiet window) are printed.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabriccap.kube.client import connect
from fabriccap_devtools.controlplane import relay
from fabriccap_devtools.controlplane.binaries import ensure_all, ensure_node_binaries
from fabriccap_devtools.controlplane.cluster import LocalControlPlane
from fabriccap_devtools.controlplane.controllers import (
    SIMULATED_NODE_GRACE_SECONDS,
    SIMULATION_SAFE_CONTROLLERS,
    ControllerOptions,
)
from fabriccap_devtools.controlplane.nodes import REAL_NODE_LABEL, node_specs
from fabriccap_devtools.demo import DEMO_POOL, REAL_DEVICES, REAL_NODES, REAL_POOL, demo_objects, real_node_objects
from fabriccap_devtools.demo import expected_capability_names as demo_capability_names
from fabriccap_devtools.seeding import load_objects
from fabriccap_devtools.world import efa_device_class
from harness import E2ECluster, reasons
from realnodes import require_real_nodes

KARPENTER_GROUPS = ("karpenter.sh/", "karpenter.k8s.aws/")

pytestmark = pytest.mark.realnodes

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "fabriccap"
CRD = REPO_ROOT / "crds" / "fabriccapabilities.yaml"
BUILD_IMAGE = REPO_ROOT / "scripts" / "build-image.sh"
ENSURE_HELM = REPO_ROOT / "scripts" / "ensure-helm.sh"
VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
IMAGE_NAME = "ghcr.io/fabriccap/fabriccap"
NAMESPACE = "fabriccap-pod-e2e"
RELEASE = "fabriccap"
SELECTOR = f"app.kubernetes.io/instance={RELEASE}"
LEASE = "fabriccap-leader"
LEASE_DURATION_SECONDS = 15.0  # leader.LeaderTimings: not a chart value
CHART_VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
# A shared 2-core machine, another suite beside us: generous bounds, measured figures printed.
TIMEOUT = 240.0
BUILD_TIMEOUT_SECONDS = 1800
HELM_TIMEOUT_SECONDS = 600
# How long a replaced pod is watched for writes it should not make.
QUIET_WINDOW_SECONDS = 20.0


# ---------------------------------------------------------------------------------------------
# Fixtures: the image, a two-node cluster with the demo around it, the chart installed


@dataclass(frozen=True)
class Image:
    archive: Path
    digest: str


@pytest.fixture(scope="module")
def image(uncaptured: Any, timings: Any) -> Iterator[Image]:
    require_real_nodes()
    with tempfile.TemporaryDirectory(prefix="fabriccap-pod-image-") as out:
        started = time.monotonic()
        with uncaptured():  # a cold build takes minutes: let its progress through
            result = subprocess.run(
                ["bash", str(BUILD_IMAGE), "--no-sbom"],
                env={**os.environ, "FABRICCAP_IMAGE_OUT": out},
                stdout=subprocess.PIPE,
                text=True,
                timeout=BUILD_TIMEOUT_SECONDS,
                check=False,
            )
        assert result.returncode == 0, f"scripts/build-image.sh failed ({result.returncode})"
        timings.record("operator pod", "make image (cached layers)", time.monotonic() - started)
        archive = Path(out) / f"fabriccap-{VERSION}.oci.tar"
        digest = result.stdout.strip()
        assert digest == (archive.parent / f"{archive.name}.digest").read_text().strip()
        yield Image(archive, digest)


@dataclass(frozen=True)
class Cluster:
    handle: E2ECluster
    control_plane: LocalControlPlane
    expected_pools: frozenset[str]

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.handle.run_kubectl(*args, check=check, input=input)

    def get_json(self, *args: str) -> dict[str, Any]:
        return dict(json.loads(self.kubectl("get", "-o", "json", *args).stdout))

    def report_sections(self) -> list[tuple[str, str]]:
        pods = self.kubectl("-n", NAMESPACE, "get", "pods", "-o", "wide", check=False).stdout
        logs = self.kubectl("-n", NAMESPACE, "logs", "-l", SELECTOR, "--tail=40", "--prefix", check=False)
        events = self.kubectl("-n", NAMESPACE, "get", "events", "--sort-by=.lastTimestamp", check=False).stdout
        return [("operator pods", pods), ("operator logs", logs.stdout + logs.stderr), ("namespace events", events)]


@pytest.fixture(scope="module")
def cluster(image: Image, tmp_path_factory: pytest.TempPathFactory, uncaptured: Any, timings: Any) -> Iterator[Cluster]:
    with uncaptured():
        binaries, node_binaries = ensure_all(), ensure_node_binaries()
    # The demo's controllers: the simulated nodes around the kubelets must never go Unknown.
    control_plane = LocalControlPlane(
        tmp_path_factory.mktemp("operator-pod"),
        binaries=binaries,
        node_binaries=node_binaries,
        nodes=node_specs(REAL_NODES, pool=REAL_POOL),
        controller_options=ControllerOptions(
            controllers=SIMULATION_SAFE_CONTROLLERS, node_monitor_grace_seconds=SIMULATED_NODE_GRACE_SECONDS
        ),
    )
    started = time.monotonic()
    with uncaptured():
        control_plane.start()
    timings.record("operator pod", f"control plane + {REAL_NODES} nodes Ready", time.monotonic() - started)
    try:
        handle = E2ECluster(kubeconfig=control_plane.kubeconfig, kubectl=control_plane.kubectl, local=control_plane)
        handle.run_kubectl("apply", "--server-side", "-f", str(CRD))
        handle.run_kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD))
        handle.run_kubectl("apply", "-f", "-", input=json.dumps(efa_device_class()))
        objects = real_node_objects(demo_objects())
        asyncio.run(_load(control_plane.kubeconfig, objects))
        imported = time.monotonic()
        control_plane.fleet.import_image(image.archive, IMAGE_NAME)
        timings.record("operator pod", "image imported into both nodes' containerd", time.monotonic() - imported)
        # This cluster serves no Karpenter CRD, so the demo's NodePools are not there to publish
        # (efa-p5-elastic): the pools to expect are those of the objects it does hold.
        served = [o for o in objects if not str(o.get("apiVersion", "")).startswith(KARPENTER_GROUPS)]
        yield Cluster(handle, control_plane, frozenset({*demo_capability_names(served), DEMO_POOL}))
    finally:
        stopped = time.monotonic()
        control_plane.stop()
        timings.record("operator pod", "stop everything", time.monotonic() - stopped)


async def _load(kubeconfig: Path, objects: list[dict[str, Any]]) -> None:
    async with await connect(str(kubeconfig)) as client:
        # As the demo does it: ServiceAccount admission runs, and a DaemonSet controller adopts.
        await load_objects(client, objects, service_accounts=True, adopt=True)


@dataclass(frozen=True)
class Helm:
    binary: str
    kubeconfig: Path
    home: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            **{f"HELM_{kind}_HOME": str(self.home / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")},
        }
        result = subprocess.run(
            [self.binary, *args, "--kubeconfig", str(self.kubeconfig)],
            capture_output=True,
            text=True,
            timeout=HELM_TIMEOUT_SECONDS,
            check=False,
            env=env,
        )
        assert result.returncode == 0, f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
        return result


@dataclass
class Release:
    helm: Helm
    service_account: str
    installed_at: datetime

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{NAMESPACE}:{self.service_account}"


@pytest.fixture(scope="module")
def release(
    cluster: Cluster, image: Image, tmp_path_factory: pytest.TempPathFactory, timings: Any
) -> Iterator[Release]:
    found = subprocess.run(["bash", str(ENSURE_HELM)], capture_output=True, text=True, timeout=900, check=False)
    assert found.returncode == 0, found.stderr
    home = tmp_path_factory.mktemp("helm-home")
    helm = Helm(found.stdout.strip(), cluster.control_plane.kubeconfig, home)
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(namespace))
    values = home / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "replicaCount": 1,
                "image": {"digest": image.digest, "pullPolicy": "IfNotPresent"},
                # The node's relay, instead of the `kubernetes` Service no kube-proxy serves here.
                "extraEnv": list(relay.IN_CLUSTER_ENV),
                # The simulated nodes have no kubelet: a pod bound there would never start.
                "nodeSelector": {"kubernetes.io/os": "linux", REAL_NODE_LABEL: "true"},
            }
        )
    )
    installed_at = datetime.now(UTC)
    started = time.monotonic()
    helm.run(
        "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--values", str(values), "--wait", "--timeout", "5m"
    )
    timings.record("operator pod", "helm install --wait (1 replica Ready)", time.monotonic() - started)
    deployment = cluster.get_json("-n", NAMESPACE, "deployment", "-l", SELECTOR)["items"][0]
    yield Release(helm, deployment["spec"]["template"]["spec"]["serviceAccountName"], installed_at)


# ---------------------------------------------------------------------------------------------
# Helpers


def operator_pods(cluster: Cluster) -> list[dict[str, Any]]:
    pods = cluster.get_json("-n", NAMESPACE, "pods", "-l", SELECTOR)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def wait_ready_pods(cluster: Cluster, count: int, *, excluding: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    deadline = time.monotonic() + TIMEOUT
    while True:
        pods = [p for p in operator_pods(cluster) if p["metadata"]["uid"] not in excluding]
        ready = [p for p in pods if is_ready(p)]
        if len(ready) == count:
            return ready
        assert time.monotonic() < deadline, f"{count} Ready operator pods expected: {[p['status'] for p in pods]}"
        time.sleep(1.0)


def lease_holder(cluster: Cluster) -> str:
    """The Lease's holder identity: ``<pod>_<per-process hex>`` (a restarted container is a new holder)."""
    lease = json.loads(
        cluster.kubectl("-n", NAMESPACE, "get", "lease", LEASE, "-o", "json", check=False).stdout or "{}"
    )
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def pod_of(holder: str) -> str:
    return holder.rpartition("_")[0]


def wait_lease_holder(cluster: Cluster, predicate: Any, description: str, timeout: float = TIMEOUT) -> str:
    deadline = time.monotonic() + timeout
    while not predicate(holder := lease_holder(cluster)):
        assert time.monotonic() < deadline, f"the Lease: {description} (holder {holder!r})"
        time.sleep(0.2)
    return holder


def lease_writes(cluster: Cluster, *, since: datetime) -> list[str]:
    """When the Lease was written (the audit log has no bodies: who and when only)."""
    return [
        f"{e['requestReceivedTimestamp']} {e['verb']} -> {(e.get('responseStatus') or {}).get('code')}"
        for e in cluster.control_plane.audit_events()
        if (e.get("objectRef") or {}).get("resource") == "leases"
        and (e.get("objectRef") or {}).get("name") == LEASE
        and e.get("stage") == "ResponseComplete"
        and datetime.fromisoformat(e["requestReceivedTimestamp"].replace("Z", "+00:00")) >= since
    ]


def ready_at(pod: dict[str, Any]) -> datetime:
    for condition in pod["status"]["conditions"]:
        if condition["type"] == "Ready":
            return datetime.fromisoformat(condition["lastTransitionTime"].replace("Z", "+00:00"))
    raise AssertionError(f"pod {pod['metadata']['name']} has no Ready condition")


def fcap_writes(cluster: Cluster, *, since: datetime) -> list[dict[str, Any]]:
    """Audited writes of FabricCapabilities (the policy audits every write, never a read)."""
    writes = []
    for event in cluster.control_plane.audit_events():
        if (event.get("objectRef") or {}).get("resource") != "fabriccapabilities":
            continue
        if event.get("stage") != "ResponseComplete":
            continue
        if datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00")) >= since:
            writes.append(event)
    return writes


def describe(write: dict[str, Any]) -> str:
    ref = write.get("objectRef") or {}
    return (
        f"{write['requestReceivedTimestamp']} {write['user']['username']} {write['verb']} "
        f"{ref.get('name')}/{ref.get('subresource') or ''} -> {(write.get('responseStatus') or {}).get('code')}"
    )


def published(cluster: Cluster) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in cluster.get_json("fabriccapabilities")["items"]}


def wait_published(cluster: Cluster) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + TIMEOUT
    while True:
        objects = published(cluster)
        with_status = {name for name, obj in objects.items() if (obj.get("status") or {}).get("conditions")}
        real = objects.get(DEMO_POOL, {})
        if with_status >= cluster.expected_pools and (real.get("status") or {}).get("uniformCount") == REAL_DEVICES:
            return objects
        assert time.monotonic() < deadline, (
            f"pools without status: {sorted(cluster.expected_pools - with_status)}; "
            f"{DEMO_POOL}: {json.dumps(real.get('status'))}"
        )
        time.sleep(1.0)


@dataclass(frozen=True)
class ContainerProcess:
    pid: int
    argv: list[str]
    uid: int
    rss_bytes: int
    cgroup_bytes: int | None


def container_process(pod: dict[str, Any]) -> ContainerProcess:
    """The container's main process, found on this machine: containerd runs it here, in a
    cgroup named after the container ID."""
    container_id = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    candidates: list[tuple[int, str]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroups = (entry / "cgroup").read_text()
        except OSError:
            continue
        if container_id in cgroups:
            candidates.append((int(entry.name), cgroups))
    assert candidates, f"no process in a cgroup of container {container_id}"
    pid, cgroups = min(candidates)  # the container's first process: the entrypoint
    status = dict(
        line.split(":", 1) for line in (Path("/proc") / str(pid) / "status").read_text().splitlines() if ":" in line
    )
    argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().rstrip(b"\0").decode().split("\0")
    return ContainerProcess(
        pid=pid,
        argv=argv,
        uid=int(status["Uid"].split()[1]),  # the effective UID
        rss_bytes=int(status["VmRSS"].split()[0]) * 1024,
        cgroup_bytes=_cgroup_memory(cgroups),
    )


def _cgroup_memory(cgroups: str) -> int | None:
    """The container cgroup's memory use: cgroup v2's memory.current, or v1's usage (this host
    may mount hybrid hierarchies)."""
    for line in cgroups.splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            candidate = Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.current"
        elif "memory" in controllers.split(","):
            candidate = Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.usage_in_bytes"
        else:
            continue
        try:
            return int(candidate.read_text())
        except OSError:
            continue
    return None


def mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return float(quantity.removesuffix(suffix)) * factor
    return float(quantity) / 2**20


# ---------------------------------------------------------------------------------------------
# The tests, in file order on one release


def test_restricted_namespace_refuses_a_pod_that_is_not(cluster: Cluster, release: Release) -> None:
    """The control for the next test: Pod Security admission enforces `restricted` here, so a
    pod that is admitted there meets it."""
    loose = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "not-restricted", "namespace": NAMESPACE},
        "spec": {
            "containers": [
                {"name": "c", "image": "fabriccap.local/sleeper:v1", "resources": {"requests": {"cpu": "10m"}}}
            ]
        },
    }
    refused = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(loose), check=False)
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr, refused.stderr


def test_the_pod_runs_restricted_passes_its_probes_and_publishes_under_its_service_account(
    cluster: Cluster, release: Release, timings: Any
) -> None:
    (pod,) = wait_ready_pods(cluster, 1)
    objects = wait_published(cluster)
    timings.record(
        "operator pod",
        "helm install -> demo pools published",
        (datetime.now(UTC) - release.installed_at).total_seconds(),
    )
    spec = pod["spec"]
    container = spec["containers"][0]
    assert container["image"] == f"{IMAGE_NAME}:{VERSION}@{cluster_digest(pod)}"
    assert spec["serviceAccountName"] == release.service_account
    # The kubelet probed the pod's IP: Ready means the readiness probe passed, and the startup
    # and liveness probes are there too.
    assert {"startupProbe", "livenessProbe", "readinessProbe"} <= container.keys()
    status = pod["status"]["containerStatuses"][0]
    assert status["ready"] and status["restartCount"] == 0, status
    # In-cluster config through the relay on its node's IP, which is the pod's gateway.
    node_ips = {node.ip for node in cluster.control_plane.fleet.nodes.values()}
    assert pod["status"]["hostIP"] in node_ips and pod["status"]["podIP"] not in node_ips
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in container["env"]}
    assert env["KUBERNETES_SERVICE_HOST"] == "status.hostIP", env

    # The image ran as the chart says: its entrypoint with the chart's arguments (no
    # --standalone: the Dockerfile's CMD is replaced), as UID 65532.
    process = container_process(pod)
    assert process.uid == 65532
    assert process.argv[-len(container["args"]) :] == container["args"], process.argv
    assert "--standalone" not in process.argv
    assert process.argv[1].endswith("/fabriccap"), process.argv

    # The real pool, through the kubelets and the plugin; the simulated ones as the demo says.
    real = objects[DEMO_POOL]
    assert reasons(real)["Ready"] == ("True", "UniformCapability"), reasons(real)
    assert real["status"]["nodes"] == REAL_NODES

    writes = fcap_writes(cluster, since=release.installed_at)
    assert writes, "no FabricCapability write audited"
    foreign = [describe(w) for w in writes if w["user"]["username"] != release.user]
    assert foreign == [], foreign
    assert {w["objectRef"]["name"] for w in writes if w["objectRef"].get("subresource") == "status"} >= (
        cluster.expected_pools
    )

    requests, limits = CHART_VALUES["resources"]["requests"], CHART_VALUES["resources"]["limits"]
    rss = process.rss_bytes / 2**20
    cgroup = f"{process.cgroup_bytes / 2**20:.1f} MiB" if process.cgroup_bytes is not None else "unreadable"
    print(
        f"operator pod at the demo's size ({len(objects)} FabricCapabilities): RSS {rss:.1f} MiB, "
        f"cgroup memory {cgroup}; chart request {requests['memory']}, limit {limits['memory']}"
    )
    timings.record("operator pod", f"RSS in MiB (request {requests['memory']}, limit {limits['memory']})", rss)
    assert rss < mebibytes(limits["memory"])


def cluster_digest(pod: dict[str, Any]) -> str:
    return str(pod["spec"]["containers"][0]["image"]).rpartition("@")[2]


def test_a_deleted_pod_is_replaced_and_the_new_one_writes_nothing_when_nothing_changed(
    cluster: Cluster, release: Release, timings: Any
) -> None:
    wait_published(cluster)
    (old,) = wait_ready_pods(cluster, 1)
    deleted_at = datetime.now(UTC)
    started = time.monotonic()
    cluster.kubectl("-n", NAMESPACE, "delete", "pod", old["metadata"]["name"], "--wait=false")
    (new,) = wait_ready_pods(cluster, 1, excluding=frozenset({old["metadata"]["uid"]}))
    ready = time.monotonic()
    timings.record("operator pod", "pod deleted -> replacement Ready", ready - started)
    # It leads (a single replica) before the window starts: it writes only as the leader.
    wait_lease_holder(cluster, lambda holder: pod_of(holder) == new["metadata"]["name"], "held by the new pod")
    time.sleep(QUIET_WINDOW_SECONDS)
    measured = datetime.now(UTC) - deleted_at
    writes = fcap_writes(cluster, since=deleted_at)
    print(
        f"replacement Ready {ready - started:.1f} s after the delete (Ready at {ready_at(new).isoformat()}); "
        f"FabricCapability writes in the {measured.total_seconds():.1f} s since the delete: {len(writes)}"
    )
    assert [describe(w) for w in writes] == []
    assert cluster.get_json("-n", NAMESPACE, "pod", new["metadata"]["name"])["status"]["containerStatuses"][0]["ready"]


def test_with_two_replicas_the_lease_changes_hands_when_the_leader_goes(
    cluster: Cluster, release: Release, timings: Any
) -> None:
    release.helm.run(
        "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values", "--set", "replicaCount=2",
        "--wait", "--timeout", "5m",
    )  # fmt: skip
    pods = wait_ready_pods(cluster, 2)
    names = {p["metadata"]["name"] for p in pods}
    leader = wait_lease_holder(cluster, lambda holder: pod_of(holder) in names, "held by one of the two pods")
    # Both run the same arguments, none --standalone: exactly one holds the Lease.
    for pod in pods:
        assert "--standalone" not in container_process(pod).argv

    # A deleted pod releases the Lease on SIGTERM; the survivor or the Deployment's
    # replacement (both compete) takes it.
    deleted_at = datetime.now(UTC)
    deleted = time.monotonic()
    cluster.kubectl("-n", NAMESPACE, "delete", "pod", pod_of(leader), "--wait=false")
    taker = wait_lease_holder(
        cluster,
        lambda holder: bool(holder) and pod_of(holder) != pod_of(leader),
        f"taken from {leader}",
        timeout=LEASE_DURATION_SECONDS + 10,
    )
    failover = time.monotonic() - deleted
    survivor = "the other replica" if pod_of(taker) in names else "the Deployment's replacement"
    print(f"leader pod {pod_of(leader)} deleted -> {survivor} {taker} holds the Lease after {failover:.2f} s")
    print("Lease writes since the delete: " + "; ".join(lease_writes(cluster, since=deleted_at)[:6]))
    timings.record("operator pod", f"leader pod deleted -> {survivor} holds the Lease", failover)

    # A crash cannot release the Lease: SIGKILL the leader's process from this machine (the
    # kubelet restarts the container, as a new holder). The other replica's count started at
    # the last renewal it watched, the restarted one's later: the other takes over.
    pods = wait_ready_pods(cluster, 2)
    leader = lease_holder(cluster)
    (other,) = {p["metadata"]["name"] for p in pods} - {pod_of(leader)}
    process = container_process(next(p for p in pods if p["metadata"]["name"] == pod_of(leader)))
    killed = time.monotonic()
    os.kill(process.pid, signal.SIGKILL)
    taker = wait_lease_holder(
        cluster,
        lambda holder: bool(holder) and holder != leader,
        f"taken from {leader} after a crash",
        timeout=LEASE_DURATION_SECONDS + 10,
    )
    crash_failover = time.monotonic() - killed
    print(f"leader {leader} SIGKILLed -> {taker} holds the Lease after {crash_failover:.2f} s")
    timings.record("operator pod", "leader process SIGKILLed -> the other holds the Lease", crash_failover)
    assert pod_of(taker) == other
    restarted = wait_ready_pods(cluster, 2)
    restarts = {p["metadata"]["name"]: p["status"]["containerStatuses"][0]["restartCount"] for p in restarted}
    assert restarts[pod_of(leader)] == 1, restarts
    assert pod_of(lease_holder(cluster)) == other
