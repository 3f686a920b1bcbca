"""What the operator end-to-end tests need besides a cluster: a synchronous API client,
object builders, the operator as a subprocess, polling, and a metrics reader.

No kubelet, scheduler or controller runs on the local control plane: the tests play their
parts by creating Nodes (with status), DaemonSets and bound Pods, and by patching `/status`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from prometheus_client.parser import text_string_to_metric_families

from fabriccap.kube import KubeClient, KubeError, connect
from fabriccap.runner import local_run_command

EFA = "vpc.amazonaws.com/efa"
GPU = "nvidia.com/gpu"
NODEGROUP = "eks.amazonaws.com/nodegroup"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
PLUGIN_SELECTOR = {"app.kubernetes.io/name": "aws-efa-k8s-device-plugin"}
# Every object a test creates carries this label, so leftovers are easy to find.
E2E_LABEL = "fabriccap.dev/e2e"
FCAP_PATH = "/apis/fabriccap.dev/v1alpha1/fabriccapabilities"

T = TypeVar("T")


def wait_until(probe: Callable[[], T | None], description: str, timeout: float = 20.0, interval: float = 0.1) -> T:
    """Poll `probe` until it returns something truthy; fail naming what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {description}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# ---------------------------------------------------------------------------------------------
# A synchronous face on fabriccap.kube.KubeClient (kubeconfig handling as the operator does it)


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
        return self.get(f"{FCAP_PATH}/{name}")

    def fcaps(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        return self.list_objects(FCAP_PATH, label_selector)


def node_path(name: str = "") -> str:
    return f"/api/v1/nodes/{name}".rstrip("/")


def pod_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}".rstrip("/")


def daemon_set_path(namespace: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}".rstrip("/")


# ---------------------------------------------------------------------------------------------
# Bodies, with the noise a kubelet writes (cpu, memory, heartbeats) that the operator must ignore


def node_body(
    name: str,
    *,
    pool: str,
    instance_type: str = "p5.48xlarge",
    efa: int | None = 32,
    efa_capacity: int | None = None,
    gpus: int = 8,
    marker: str = "",
) -> dict[str, Any]:
    resources: dict[str, str] = {"cpu": "192", "memory": "2143516624Ki", "pods": "100", GPU: str(gpus)}
    allocatable = dict(resources)
    capacity = dict(resources)
    if efa is not None:
        allocatable[EFA] = str(efa)
        capacity[EFA] = str(efa if efa_capacity is None else efa_capacity)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                NODEGROUP: pool,
                INSTANCE_TYPE: instance_type,
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.present": "true",
                E2E_LABEL: marker,
            },
        },
        "spec": {"providerID": f"aws:///us-west-2a/i-{abs(hash(name)) % 10**17:017x}"},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": "2025-06-02T07:59:24Z",
                    "lastTransitionTime": "2025-04-29T09:30:34Z",
                }
            ],
        },
    }


def daemon_set_body(namespace: str, name: str, *, marker: str = "") -> dict[str, Any]:
    pod_labels = {"name": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {**PLUGIN_SELECTOR, E2E_LABEL: marker}},
        "spec": {
            "selector": {"matchLabels": pod_labels},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    # On a real cluster (FABRICCAP_E2E_KUBECONFIG) the DaemonSet controller must
                    # not place pods anywhere: the tests bind the pods themselves.
                    "nodeSelector": {E2E_LABEL: "never"},
                    "containers": [{"name": "plugin", "image": "registry.invalid/aws-efa-k8s-device-plugin:e2e"}],
                },
            },
        },
    }


def plugin_pod_body(
    namespace: str, name: str, *, daemon_set: dict[str, Any], node: str, marker: str = ""
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            # Pods of the EFA chart do not carry app.kubernetes.io/name: only the owner tells.
            "labels": {"name": daemon_set["metadata"]["name"], E2E_LABEL: marker},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": daemon_set["metadata"]["name"],
                    "uid": daemon_set["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "plugin", "image": "registry.invalid/aws-efa-k8s-device-plugin:e2e"}],
            "tolerations": [{"operator": "Exists"}],
        },
    }


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
# Reading FabricCapability objects


def condition(obj: Mapping[str, Any], condition_type: str) -> dict[str, Any]:
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == condition_type:
            return dict(item)
    raise AssertionError(f"no {condition_type} condition in {json.dumps(obj.get('status'), indent=1)}")


def reasons(obj: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """{type: (status, reason)} of every condition."""
    return {c["type"]: (c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions") or []}


def without_volatile(status: Mapping[str, Any]) -> dict[str, Any]:
    """A status without generations and transition times (what evaluation alone decides)."""
    stripped = {key: value for key, value in status.items() if key != "observedGeneration"}
    stripped["conditions"] = [
        {key: value for key, value in c.items() if key not in ("lastTransitionTime", "observedGeneration")}
        for c in status.get("conditions") or []
    ]
    return stripped


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
    _log_offsets: list[int] = field(default_factory=list)

    def start(self, *, wait_healthy: bool = True) -> None:
        assert self.process is None, "the operator is already running"
        self.metrics_port, self.health_port = free_port(), free_port()
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n===== operator start #{self.starts} =====\n".encode())
            self._log_offsets.append(log.tell())
            self.process = subprocess.Popen(
                local_run_command(self.kubeconfig, self.config, self.metrics_port, self.health_port),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
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


@contextlib.contextmanager
def listening_socket() -> Iterator[socket.socket]:
    """A TCP listener nobody answers: proves whether a process tried to connect."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        yield server
