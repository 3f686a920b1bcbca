"""A large cluster for the simulator, made from the demo world's builders (fabriccap_devtools.world).

The bodies are the test world's, with @@VAR@@ holes the simulator fills per object, and the
weight a busy cluster's objects carry: Nodes with 40 images, the EKS node monitoring agent's
conditions and managedFields (16-17 KB as served), workload Pods of a training job with its
labels, environment, volumes and a running status (3.5-4 KB as served). The simulator adds
what the API server adds (server metadata, defaults, managedFields).

Holes the simulator fills from each object: NAME, NAMESPACE, UID, RV, CREATED, NODE (a pod's
spec.nodeName), SERIAL; and per world: POOL, EFA (the node's EFA count, allocatable and
capacity), HB (its heartbeat time: the conditions' lastHeartbeatTime and the status
manager's time), JOB and JOBUID (a pod's owning Job).
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from typing import Any

from fabriccap_devtools import world

NODE_TEMPLATE = "node"
PLUGIN_POD_TEMPLATE = "plugin-pod"
GPU_EFA_POD_TEMPLATE = "pod-gpu-efa"  # asks for GPUs and the fabric
GPU_TCP_POD_TEMPLATE = "pod-gpu-tcp"  # asks for GPUs and not the fabric: NCCL over TCP
CPU_POD_TEMPLATE = "pod-cpu"  # concerns no fabric
WORKLOAD_TEMPLATES = (GPU_EFA_POD_TEMPLATE, GPU_TCP_POD_TEMPLATE, CPU_POD_TEMPLATE)
PODS_PER_JOB = 8
STARTED = "2026-11-30T09:00:00Z"


def node_name(index: int) -> str:
    return f"ip-10-{index >> 16 & 255}-{index >> 8 & 255}-{index & 255}.us-west-2.compute.internal"


def pool_name(index: int) -> str:
    return f"p5-pool-{index:05d}"


def job_uid(job: str) -> str:
    digest = hashlib.sha256(f"job/{job}".encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-4{digest[13:16]}-8{digest[17:20]}-{digest[20:32]}"


def node_template() -> dict[str, Any]:
    body = world.node("@@NAME@@", pool="@@POOL@@", efa="@@EFA@@", images=40, heavy=True)
    body["spec"]["providerID"] = "aws:///us-west-2a/i-@@SERIAL@@"
    for condition in body["status"]["conditions"]:
        condition["lastHeartbeatTime"] = "@@HB@@"
    for entry in body["metadata"]["managedFields"]:
        entry["time"] = "@@HB@@"
    return {
        "name": NODE_TEMPLATE,
        "resource": "nodes",
        "body": body,
        "manager": "kubelet",
        "statusBy": "kubelet",
        "statusAt": "@@HB@@",
    }


def _running(body: dict[str, Any], image: str) -> dict[str, Any]:
    """A pod as the kubelet reports it running: conditions, container statuses, addresses."""
    containers = body["spec"]["containers"]
    body["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": STARTED}
            for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "hostIP": "10.0.1.5",
        "hostIPs": [{"ip": "10.0.1.5"}],
        "podIP": "10.0.77.12",
        "podIPs": [{"ip": "10.0.77.12"}],
        "startTime": STARTED,
        "containerStatuses": [
            {
                "name": container["name"],
                "state": {"running": {"startedAt": STARTED}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": image,
                "imageID": f"{image.split(':')[0]}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
                "containerID": "containerd://@@SERIAL@@" + "0" * 47,
                "started": True,
            }
            for container in containers
        ],
    }
    return body


def plugin_pod_template() -> dict[str, Any]:
    body = _running(world.pod("@@NODE@@", name="@@NAME@@"), world.PLUGIN_IMAGE)
    return {
        "name": PLUGIN_POD_TEMPLATE,
        "resource": "pods",
        "body": body,
        "manager": "kube-controller-manager",
        "statusBy": "kubelet",
    }


def job_template(pod_template: dict[str, Any]) -> dict[str, Any]:
    """The Jobs of a workload pod template's pods (the owner reads' answers): the same pod
    template, named by JOB with JOBUID as their uid, as the pods' owner references say."""
    body = world.job(pod_template["body"], "@@NAME@@", uid="@@JOBUID@@", pods=PODS_PER_JOB, started_at=STARTED)
    return {
        "name": f"job-of-{pod_template['name']}",
        "resource": "jobs",
        "body": body,
        "manager": "kubectl-create",
        "statusBy": "kube-controller-manager",
    }


def workload_pod_template(name: str, *, gpu: int | None, efa: int | None) -> dict[str, Any]:
    labels = {
        "batch.kubernetes.io/job-name": "@@JOB@@",
        "job-name": "@@JOB@@",
        "batch.kubernetes.io/controller-uid": "@@JOBUID@@",
        "controller-uid": "@@JOBUID@@",
        "app.kubernetes.io/name": "trainer" if gpu else "sidecar",
        "team": "ml-platform",
    }
    env = {"NCCL_DEBUG": "WARN", "MASTER_PORT": "29500", "OMP_NUM_THREADS": "8", "TORCH_DISTRIBUTED_DEBUG": "OFF"}
    owner = world.owner_reference("Job", "batch/v1", "@@JOB@@")
    owner["uid"] = "@@JOBUID@@"
    body = world.workload_pod("@@NODE@@", "@@NAME@@", gpu=gpu, efa=efa, owner=owner, labels=labels, env=env)
    body["metadata"]["annotations"] = {"kubectl.kubernetes.io/default-container": "node"}
    container = body["spec"]["containers"][0]
    container["command"] = ["torchrun", "--nnodes=2", "--nproc-per-node=8", "train.py"]
    container["volumeMounts"] = [
        {"name": "shm", "mountPath": "/dev/shm"},
        {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True},
    ]
    body["spec"]["volumes"] = [
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
        {
            "name": "kube-api-access",
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                ],
            },
        },
    ]
    body["spec"]["serviceAccountName"] = "default"
    body["spec"]["serviceAccount"] = "default"
    if gpu:
        body["spec"]["tolerations"] = [{"key": world.GPU, "operator": "Exists", "effect": "NoSchedule"}]
    _running(body, world.WORKLOAD_IMAGE)
    return {"name": name, "resource": "pods", "body": body, "manager": "kube-controller-manager", "statusBy": "kubelet"}


@dataclass(frozen=True)
class ScaleWorld:
    """``nodes`` EFA nodes in ``pools`` node groups (one plugin pod each), and ``pods``
    workload pods spread over them: ``gpu_share`` of them request GPUs, half of those the
    fabric as well, the rest are CPU pods."""

    nodes: int
    pods: int = 0
    pools: int = 100
    gpu_share: float = 0.2
    namespace: str = "ml"
    # Pools whose nodes get no workload pods (the benchmark's probes run there).
    quiet_pools: int = 0
    extra_objects: list[dict[str, Any]] = field(default_factory=list)

    def pool_of(self, node_index: int) -> int:
        return node_index * self.pools // self.nodes

    def nodes_of_pool(self, pool: int) -> list[str]:
        return [node_name(index) for index in range(self.nodes) if self.pool_of(index) == pool]

    @property
    def busy_nodes(self) -> list[str]:
        """Nodes outside the quiet pools: where workload pods (and churn) go."""
        return [node_name(index) for index in range(self.nodes) if self.pool_of(index) >= self.quiet_pools]

    def workload_counts(self) -> dict[str, int]:
        gpu = round(self.pods * self.gpu_share)
        return {GPU_EFA_POD_TEMPLATE: gpu - gpu // 2, GPU_TCP_POD_TEMPLATE: gpu // 2, CPU_POD_TEMPLATE: self.pods - gpu}

    def spec(self) -> dict[str, Any]:
        """The world file the simulator loads (templates, groups, plain objects)."""
        names = [node_name(index) for index in range(self.nodes)]
        workload_templates = [
            workload_pod_template(GPU_EFA_POD_TEMPLATE, gpu=8, efa=32),
            workload_pod_template(GPU_TCP_POD_TEMPLATE, gpu=8, efa=None),
            workload_pod_template(CPU_POD_TEMPLATE, gpu=None, efa=None),
        ]
        job_templates = {template["name"]: job_template(template) for template in workload_templates}
        templates = [node_template(), plugin_pod_template(), *workload_templates, *job_templates.values()]
        groups: list[dict[str, Any]] = [
            {
                "template": NODE_TEMPLATE,
                "names": names,
                "vars": {
                    "POOL": [pool_name(self.pool_of(index)) for index in range(self.nodes)],
                    "EFA": "32",
                    "HB": STARTED,
                },
            },
            {
                "template": PLUGIN_POD_TEMPLATE,
                "namespace": world.KUBE_SYSTEM,
                "names": [f"{world.EFA_DS}-{index:06d}" for index in range(self.nodes)],
                "nodes": names,
                "vars": {},
            },
        ]
        busy = self.busy_nodes
        offset = 0
        job_groups: list[dict[str, Any]] = []
        for template, count in self.workload_counts().items():
            if count == 0 or not busy:
                continue
            numbers = range(offset, offset + count)
            jobs = [f"job-{number // PODS_PER_JOB:07d}" for number in numbers]
            groups.append(
                {
                    "template": template,
                    "namespace": self.namespace,
                    "names": [f"{job}-{number % PODS_PER_JOB}" for job, number in zip(jobs, numbers, strict=True)],
                    # Pods spread round robin, so every busy pool has some of each kind.
                    "nodes": [busy[number % len(busy)] for number in numbers],
                    "vars": {"JOB": jobs, "JOBUID": [job_uid(job) for job in jobs]},
                }
            )
            # Each Job once, in the template of its first pod (one Job may span two templates).
            begun_before = jobs[0] if offset % PODS_PER_JOB else None
            new_jobs = [job for job in dict.fromkeys(jobs) if job != begun_before]
            job_groups.append(
                {
                    "template": job_templates[template]["name"],
                    "namespace": self.namespace,
                    "names": new_jobs,
                    "vars": {"JOB": new_jobs, "JOBUID": [job_uid(job) for job in new_jobs]},
                }
            )
            offset += count
        groups += [group for group in job_groups if group["names"]]
        objects = [{"resource": "daemonsets", "body": world.daemon_set()}]
        objects += [
            {"resource": "namespaces", "body": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}}
            for name in (world.KUBE_SYSTEM, self.namespace, "default")
        ]
        objects += copy.deepcopy(self.extra_objects)
        return {"templates": templates, "groups": groups, "objects": objects}


__all__ = [
    "CPU_POD_TEMPLATE",
    "GPU_EFA_POD_TEMPLATE",
    "GPU_TCP_POD_TEMPLATE",
    "NODE_TEMPLATE",
    "PLUGIN_POD_TEMPLATE",
    "PODS_PER_JOB",
    "WORKLOAD_TEMPLATES",
    "ScaleWorld",
    "job_uid",
    "node_name",
    "pool_name",
]
