"""What the end-to-end tests need besides a cluster: the cluster handle, a synchronous API
client, the test world on a cluster, the operator as a subprocess, polling, and metrics.

No kubelet, scheduler or controller runs on the local control plane (unless real nodes are
asked for): the tests play their parts by creating Nodes (with status), DaemonSets and bound
Pods, and by patching `/status`. The bodies come from the test world (`fabriccap_devtools.world`),
shared with the unit tests and the benchmarks; API paths come from `fabriccap.kube.paths`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from fabriccap.core.api import find_condition
from fabriccap.core.shard import UNSHARDED, Shard
from fabriccap.core.stamping import strip_volatile
from fabriccap.kube.client import KubeClient, connect
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import DAEMON_SETS, FABRIC_CAPABILITIES, NODES, PODS, RESOURCE_SLICES
from fabriccap_devtools import world
from fabriccap_devtools.controlplane.binaries import ensure_all
from fabriccap_devtools.controlplane.cluster import LocalControlPlane
from fabriccap_devtools.controlplane.processes import free_ports
from fabriccap_devtools.launch import local_run_command
from fabriccap_devtools.seeding import creatable
from fabriccap_devtools.waiting import wait_until

__all__ = [
    "EFA",
    "FCAP_PATH",
    "NODEGROUP",
    "E2ECluster",
    "Metrics",
    "OperatorProcess",
    "Relay",
    "SyncKube",
    "World",
    "condition",
    "control_plane_with_crd",
    "daemon_set_body",
    "daemon_set_path",
    "kubeconfig_via",
    "listening_socket",
    "node_body",
    "node_path",
    "plugin_pod_body",
    "pod_path",
    "pod_status",
    "published_equals_evaluate",
    "reasons",
    "wait_until",
    "watched_kind_fingerprints",
    "without_volatile",
    "write_config",
]

EFA = world.EFA
GPU = world.GPU
NODEGROUP = world.NODEGROUP
INSTANCE_TYPE = world.INSTANCE_TYPE
PLUGIN_SELECTOR = world.EFA_DS_SELECTOR
# Every object a test creates carries this label, so leftovers are easy to find.
E2E_LABEL = "fabriccap.dev/e2e"
FCAP_PATH = FABRIC_CAPABILITIES.collection()
EXTERNAL_KUBECONFIG_ENV = "FABRICCAP_E2E_KUBECONFIG"
KUBECTL_TIMEOUT_SECONDS = 60


# ---------------------------------------------------------------------------------------------
# The cluster under test: the local control plane, or any cluster in FABRICCAP_E2E_KUBECONFIG


@dataclass
class E2ECluster:
    kubeconfig: Path
    kubectl: Path
    local: LocalControlPlane | None

    def kubeconfig_for(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig acting as `user` in `groups`; skips the test on an external cluster."""
        if self.local is None:
            pytest.skip(f"minting users needs the local control plane ({EXTERNAL_KUBECONFIG_ENV} is set)")
        return self.local.kubeconfig_for(user, groups)

    def run_kubectl(
        self, *args: str, kubeconfig: Path | None = None, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster (as admin unless `kubeconfig` says otherwise)."""
        result = subprocess.run(
            [str(self.kubectl), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT_SECONDS,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result


# ---------------------------------------------------------------------------------------------
# A synchronous face on fabriccap.kube.client.KubeClient (kubeconfig handling as the operator does it)


class SyncKube:
    def __init__(self, kubeconfig: Path) -> None:
        self._loop = asyncio.new_event_loop()
        self._client: KubeClient = self._loop.run_until_complete(connect(str(kubeconfig)))

    def close(self) -> None:
        self._loop.run_until_complete(self._client.close())
        self._loop.close()

    def _run(self, coroutine: Any) -> Any:
        result = self._loop.run_until_complete(coroutine)
        # Fail on error bodies whether or not the client raised: a test helper that silently
        # "succeeds" on a 404 or 409 would let a broken test pass.
        if isinstance(result, dict) and result.get("kind") == "Status" and result.get("status") == "Failure":
            raise KubeError(str(result.get("message")), int(result.get("code") or 0))
        return result

    def get(self, path: str) -> dict[str, Any] | None:
        try:
            return dict(self._run(self._client.get(path)))
        except KubeError as error:
            if error.status == 404:
                return None
            raise

    def list_objects(self, path: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        query = {"labelSelector": label_selector} if label_selector else None
        return list(self._run(self._client.get(path, query)).get("items") or [])

    def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self._run(self._client.create(path, body)))

    def patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self._run(self._client.merge_patch(path, patch)))

    def delete(self, path: str) -> None:
        # Grace period 0: without a kubelet, a bound pod deleted gracefully would never go away.
        with contextlib.suppress(KubeError):
            self._run(self._client.delete(path, {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}))

    # -- the kinds the tests use

    def fcap(self, name: str) -> dict[str, Any] | None:
        return self.get(FABRIC_CAPABILITIES.item(name))

    def fcaps(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        return self.list_objects(FCAP_PATH, label_selector)


def node_path(name: str = "") -> str:
    return NODES.item(name) if name else NODES.collection()


def pod_path(namespace: str, name: str = "") -> str:
    return PODS.item(name, namespace) if name else PODS.collection(namespace)


def daemon_set_path(namespace: str, name: str = "") -> str:
    return DAEMON_SETS.item(name, namespace) if name else DAEMON_SETS.collection(namespace)


# ---------------------------------------------------------------------------------------------
# Bodies from the test world, marked as this test's and ready to create


def node_body(
    name: str,
    *,
    pool: str,
    pool_key: str = NODEGROUP,
    instance_type: str = "p5.48xlarge",
    efa: int | None = 32,
    efa_capacity: int | None = None,
    gpus: int = 8,
    marker: str = "",
) -> dict[str, Any]:
    body = world.node(
        name,
        pool=pool,
        pool_key=pool_key,
        instance_type=instance_type,
        efa=efa,
        efa_capacity="same" if efa_capacity is None else efa_capacity,
        gpu=gpus,
        gpu_present_label="true",
        labels={E2E_LABEL: marker},
    )
    return creatable(body)


def daemon_set_body(namespace: str, name: str, *, marker: str = "") -> dict[str, Any]:
    body = world.daemon_set(
        name,
        namespace=namespace,
        labels={**PLUGIN_SELECTOR, E2E_LABEL: marker},
        # On a real cluster (FABRICCAP_E2E_KUBECONFIG) the DaemonSet controller must not
        # place pods anywhere: the tests bind the pods themselves.
        node_selector={E2E_LABEL: "never"},
    )
    body.pop("status")
    return creatable(body)


def plugin_pod_body(
    namespace: str, name: str, *, daemon_set: dict[str, Any], node: str, marker: str = ""
) -> dict[str, Any]:
    daemon_set_name = daemon_set["metadata"]["name"]
    # Pods of the EFA chart do not carry app.kubernetes.io/name: only the owner tells.
    body = world.pod(
        node,
        daemon_set_name=daemon_set_name,
        namespace=namespace,
        name=name,
        labels={"name": daemon_set_name, E2E_LABEL: marker},
    )
    body.pop("status")
    body["metadata"]["ownerReferences"][0]["uid"] = daemon_set["metadata"]["uid"]
    return creatable(body)


def pod_status(*, ready: bool = True, phase: str = "Running") -> dict[str, Any]:
    return {
        "status": {
            "phase": phase,
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True" if ready else "False"},
                {"type": "PodScheduled", "status": "True"},
            ],
        }
    }


# ---------------------------------------------------------------------------------------------
# One test's world on the cluster: its pools, nodes, plugin DaemonSet and pods


@dataclass
class World:
    """Nodes, a device-plugin DaemonSet and its pods, created the way kubelets and controllers
    would have; every name carries ``prefix``, and ``cleanup`` deletes it all."""

    kube: SyncKube = field(repr=False)
    namespace: str  # where the plugin DaemonSet and its pods go
    prefix: str = field(default_factory=lambda: f"e2e-{uuid.uuid4().hex[:6]}")
    nodes: list[str] = field(default_factory=list)
    pods: dict[str, str] = field(default_factory=dict)  # node -> plugin pod name
    daemon_set: dict[str, Any] | None = field(default=None, repr=False)

    # -- names

    def pool(self, label: str) -> str:
        return f"{self.prefix}-{label}"

    def fcap_name(self, label: str) -> str:
        return f"efa-{self.pool(label)}"

    # -- building the world

    def add_node(self, label: str, index: int, *, plugin: bool = False, **kwargs: Any) -> str:
        """A node of pool `label` with its status (``node_body`` arguments), and its plugin pod."""
        name = f"{self.pool(label)}-{index}"
        body = node_body(name, pool=self.pool(label), marker=self.prefix, **kwargs)
        status = body.pop("status")
        self.kube.create(node_path(), body)
        self.nodes.append(name)
        self.kube.patch(node_path(name) + "/status", {"status": status})
        if plugin:
            self.add_plugin_pod(name)
        return name

    def add_pool(self, label: str, size: int, *, plugin: bool = True, **kwargs: Any) -> list[str]:
        return [self.add_node(label, index, plugin=plugin, **kwargs) for index in range(size)]

    def install_plugin(self) -> dict[str, Any]:
        if self.daemon_set is None:
            body = daemon_set_body(self.namespace, f"{self.prefix}-efa-plugin", marker=self.prefix)
            self.daemon_set = self.kube.create(daemon_set_path(self.namespace), body)
        return self.daemon_set

    def add_plugin_pod(self, node: str, *, ready: bool = True, phase: str = "Running") -> str:
        daemon_set = self.install_plugin()
        name = f"plugin-{node}"
        body = plugin_pod_body(self.namespace, name, daemon_set=daemon_set, node=node, marker=self.prefix)
        self.kube.create(pod_path(self.namespace), body)
        self.pods[node] = name
        self.set_plugin_pod(node, ready=ready, phase=phase)
        return name

    def set_plugin_pod(self, node: str, *, ready: bool = True, phase: str = "Running") -> None:
        """What the kubelet reports about the plugin pod on `node`."""
        status = pod_status(ready=ready, phase=phase)
        if not ready:
            status["status"]["containerStatuses"] = [
                {
                    "name": "plugin",
                    "image": world.PLUGIN_IMAGE,
                    "imageID": "",
                    "ready": False,
                    "restartCount": 7,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}},
                }
            ]
        self.kube.patch(pod_path(self.namespace, self.pods[node]) + "/status", status)

    def set_fabric(self, node: str, allocatable: int, capacity: int | None = None) -> None:
        """What the device plugin, through the kubelet, reports in the node's status."""
        capacity = allocatable if capacity is None else capacity
        self.kube.patch(
            node_path(node) + "/status",
            {"status": {"capacity": {EFA: str(capacity)}, "allocatable": {EFA: str(allocatable)}}},
        )

    def delete_node(self, node: str) -> None:
        self.kube.delete(node_path(node))
        self.nodes.remove(node)

    # -- reading the answer

    def fcap(self, label: str) -> dict[str, Any] | None:
        return self.kube.fcap(self.fcap_name(label))

    def own_fcaps(self) -> list[dict[str, Any]]:
        prefix = f"efa-{self.prefix}-"
        return [obj for obj in self.kube.fcaps() if obj["metadata"]["name"].startswith(prefix)]

    def report_sections(self) -> list[tuple[str, str]]:
        shown = {obj["metadata"]["name"]: obj.get("status") for obj in self.own_fcaps()}
        return [("FabricCapabilities of this test", yaml.safe_dump(shown, sort_keys=False))]

    # -- cleaning up

    def delete_objects(self) -> None:
        """Delete the pods, the DaemonSet and the nodes (not the FabricCapabilities)."""
        for pod in self.pods.values():
            self.kube.delete(pod_path(self.namespace, pod))
        if self.daemon_set is not None:
            self.kube.delete(daemon_set_path(self.namespace, self.daemon_set["metadata"]["name"]))
        for node in list(self.nodes):
            self.kube.delete(node_path(node))

    def cleanup(self, wait: bool = True) -> None:
        self.delete_objects()

        # The operator deletes them after the grace period; do not make the next test wait.
        # Repeat: one may be re-created by a reconcile that started before the nodes went.
        def gone() -> bool:
            remaining = self.own_fcaps()
            for obj in remaining:
                self.kube.delete(FABRIC_CAPABILITIES.item(obj["metadata"]["name"]))
            return not remaining

        if wait:
            wait_until(gone, f"the FabricCapabilities of {self.prefix} to be deleted", timeout=15, interval=0.5)
        else:
            gone()


# ---------------------------------------------------------------------------------------------
# Reading FabricCapability objects


def condition(obj: Mapping[str, Any], condition_type: str) -> dict[str, Any]:
    found = find_condition(obj.get("status"), condition_type)
    if found is None:
        raise AssertionError(f"no {condition_type} condition in {json.dumps(obj.get('status'), indent=1)}")
    return found


def reasons(obj: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """{type: (status, reason)} of every condition."""
    return {c["type"]: (c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions") or []}


def without_volatile(status: Mapping[str, Any]) -> dict[str, Any]:
    """A status without generations and transition times (what evaluation alone decides)."""
    return strip_volatile(dict(status))


# ---------------------------------------------------------------------------------------------
# Metrics


@dataclass(frozen=True)
class Metrics:
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]

    @classmethod
    def parse(cls, text: str) -> Metrics:
        samples = {
            (sample.name, frozenset(sample.labels.items())): float(sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }
        return cls(samples)

    def __repr__(self) -> str:  # assertion messages show the value, not every sample
        return f"Metrics({len(self.samples)} samples)"

    def get(self, metric: str, /, **labels: str) -> float | None:
        return self.samples.get((metric, frozenset(labels.items())))

    def series(self, metric: str, /, **labels: str) -> list[dict[str, str]]:
        """Label sets of every sample of `metric` whose labels include `labels`."""
        wanted = set(labels.items())
        return [dict(key) for (sample, key) in self.samples if sample == metric and wanted <= key]


# ---------------------------------------------------------------------------------------------
# The operator as a subprocess, exactly as a Deployment runs it


def write_config(path: Path, document: Mapping[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(dict(document), sort_keys=False))
    return path


@dataclass
class OperatorProcess:
    kubeconfig: Path
    config: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    metrics_port: int = 0
    health_port: int = 0
    starts: int = 0
    # Leader election instead of --standalone: the Lease goes in `namespace`, and `pod_name`
    # (POD_NAME) names this replica in it.
    standalone: bool = True
    namespace: str | None = None
    pod_name: str | None = None
    shard: Shard = UNSHARDED
    _log_offsets: list[int] = field(default_factory=list)

    def start(self, *, wait_healthy: bool = True) -> None:
        assert self.process is None, "the operator is already running"
        # Both chosen while both are held: two free_port() calls in a row got the same port about
        # once in 15,000 pairs, and the operator stopped with "Address already in use".
        self.metrics_port, self.health_port = free_ports(2)
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n===== operator start #{self.starts} =====\n".encode())
            self._log_offsets.append(log.tell())
            command = local_run_command(
                self.kubeconfig,
                self.config,
                self.metrics_port,
                self.health_port,
                standalone=self.standalone,
                namespace=self.namespace,
                shard=self.shard,
            )
            environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
            if self.pod_name:
                environment["POD_NAME"] = self.pod_name
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment
            )
        if wait_healthy:
            wait_until(self.healthy, "the operator's /healthz", timeout=60)

    def stop(self, timeout: float = 10.0) -> int | None:
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                return process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
        return process.wait(timeout)

    def restart(self) -> None:
        self.stop()
        self.start()

    def kill(self) -> None:
        """SIGKILL: no chance to release the Lease or finish a write."""
        process, self.process = self.process, None
        if process is not None:
            process.kill()
            process.wait(10)

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def health_status(self) -> int | None:
        """The HTTP status of /healthz (None: no answer)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=2) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return int(error.code)
        except (urllib.error.URLError, OSError):
            return None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _get(self, port: int, path: str) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
                return str(response.read().decode())
        except (urllib.error.URLError, OSError):
            return None

    def healthy(self) -> bool:
        if not self.running:
            raise AssertionError(f"the operator exited ({self.process and self.process.returncode}):\n{self.log()}")
        return self._get(self.health_port, "/healthz") is not None

    def metrics(self) -> Metrics:
        text = self._get(self.metrics_port, "/metrics")
        if text is None:
            raise AssertionError(f"no /metrics on port {self.metrics_port}:\n{self.log()}")
        return Metrics.parse(text)

    def log(self, since_start: bool = True) -> str:
        """The log of the current (or last) run, or of every run."""
        if not self.log_path.exists():
            return ""
        data = self.log_path.read_bytes()
        if since_start and self._log_offsets:
            data = data[self._log_offsets[-1] :]
        return data.decode(errors="replace")

    def mark_log(self) -> None:
        """Start the log excerpt shown on failure here (each test marks its beginning)."""
        self._log_offsets.append(self.log_path.stat().st_size if self.log_path.exists() else 0)

    def report_sections(self) -> list[tuple[str, str]]:
        lines = self.log().splitlines()
        return [(f"operator log ({self.log_path})", "\n".join(lines[-300:]))]


class Relay:
    """A TCP relay between a client and the API server that can be paused: a partition.

    Paused, it forwards nothing in either direction and connects nothing new, so the
    operator's connections stall exactly as they would behind a dead network path (no RST,
    no FIN); resumed, traffic flows again on the same connections.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()
        for thread in self._threads:
            thread.join(5)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, client: socket.socket) -> None:
        while not self._flowing.wait(0.2):  # a partition: new connections hang too
            if self._closed.is_set():
                client.close()
                return
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        with self._lock:
            self._sockets += [client, upstream]
        pairs = {client: upstream, upstream: client}
        try:
            while not self._closed.is_set():
                if not self._flowing.wait(0.2):
                    continue  # hold every byte while paused
                readable, _, _ = select.select(list(pairs), [], [], 0.2)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    pairs[sock].sendall(data)
        except OSError:
            return
        finally:
            client.close()
            upstream.close()


def kubeconfig_via(kubeconfig: Path, server: str, path: Path) -> Path:
    """A copy of ``kubeconfig`` that reaches the cluster at ``server`` (a relay, say)."""
    document = yaml.safe_load(kubeconfig.read_text())
    for cluster in document.get("clusters") or []:
        cluster["cluster"]["server"] = server
    path.write_text(json.dumps(document))
    return path


SNAPSHOT_KINDS = "nodes,pods,daemonsets,resourceslices"


def published_equals_evaluate(
    cluster: E2ECluster,
    kube: SyncKube,
    config: Path,
    names: Collection[str],
    timeout: float = 30.0,
    kinds: str = SNAPSHOT_KINDS,
) -> None:
    """The published status of every object in ``names`` is what `fabriccap evaluate` computes
    from a dump of the same cluster (taken first: the live answer can only be newer)."""
    snapshot = config.parent / f"snapshot-{uuid.uuid4().hex[:6]}.json"
    differences: dict[str, Any] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        snapshot.write_text(cluster.run_kubectl("get", kinds, "-A", "-o", "json").stdout)
        result = subprocess.run(
            [sys.executable, "-m", "fabriccap", "evaluate", "-f", str(snapshot), "--config", str(config), "-o", "json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        offline = {obj["metadata"]["name"]: obj["status"] for obj in json.loads(result.stdout)["items"]}
        live = {name: (kube.fcap(name) or {}).get("status") or {} for name in names}
        differences = {
            name: {"live": without_volatile(live[name]), "evaluate": without_volatile(offline.get(name) or {})}
            for name in names
            if without_volatile(live[name]) != without_volatile(offline.get(name) or {})
        }
        if not differences:
            snapshot.unlink()
            return
        time.sleep(0.5)
    raise AssertionError(f"published != fabriccap evaluate:\n{json.dumps(differences, indent=1)}")


def watched_kind_fingerprints(kube: SyncKube) -> dict[str, tuple[Any, ...]]:
    """Everything the operator could have touched on Nodes, Pods, DaemonSets and ResourceSlices."""
    found: dict[str, tuple[Any, ...]] = {}
    for path in (NODES.collection(), PODS.collection(), DAEMON_SETS.collection(), RESOURCE_SLICES.collection()):
        for obj in kube.list_objects(path):
            metadata = obj["metadata"]
            key = f"{path}/{metadata.get('namespace', '')}/{metadata['name']}"
            found[key] = (
                metadata["resourceVersion"],
                metadata.get("annotations"),
                metadata.get("finalizers"),
                metadata.get("labels"),
                sorted(entry.get("manager", "") for entry in metadata.get("managedFields") or []),
            )
    return found


OWN_CRD_FILE = Path(__file__).resolve().parents[2] / "crds" / "fabriccapabilities.yaml"


@contextlib.contextmanager
def control_plane_with_crd(
    directory: Path, *, feature_gates: Sequence[str] = (), runtime_config: Sequence[str] = ()
) -> Iterator[LocalControlPlane]:
    """A control plane of its own (kube-apiserver and etcd, in ``directory``), with the
    FabricCapability CRD established: for tests that break or watch the API server closely,
    or need API versions the session's does not serve (``runtime_config``)."""
    with LocalControlPlane(
        directory, binaries=ensure_all(), feature_gates=feature_gates, runtime_config=runtime_config
    ) as plane:
        cluster = E2ECluster(kubeconfig=plane.kubeconfig, kubectl=plane.kubectl, local=plane)
        cluster.run_kubectl("apply", "--server-side", "-f", str(OWN_CRD_FILE))
        cluster.run_kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(OWN_CRD_FILE))
        yield plane


@contextlib.contextmanager
def listening_socket() -> Iterator[socket.socket]:
    """A TCP listener nobody answers: proves whether a process tried to connect."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        yield server
