"""The demo's transport story: a job that requests EFA, holds its devices, and whose NCCL still
runs over TCP sockets, because its image lacks a working aws-ofi-nccl.

Its log is real: awslabs/awsome-distributed-ai#386 ("EFA does not work with PyTorch"), a Ray
job on p5 whose plugin failed to initialise and whose channels went ``via NET/Socket``, the two
excerpts of the corpus (tests/fixtures/nccl) from that issue, one after the other.

Where the log comes from, honestly:

- ``fabriccap demo`` simulates its nodes by writes: no kubelet runs, so the API server cannot
  serve ``pods/log``. The operator then reaches the API server through the demo's log front
  (``fabriccap_devtools.logstub``), which passes every request on and answers this one pod's
  log with the excerpt, where a kubelet would. The rest of the operator's path is the real
  one: the streamed read, the parser, the status, the Event, the TCP column. The demo also
  runs the offline ``fabriccap transport`` over the same file, labelled as such.
- ``fabriccap demo --real-nodes``: the job is a real container on a real kubelet (the sleeper
  test image printing the excerpt from a ConfigMap), and its log comes from containerd through
  the kubelet and the API server, as in a cluster.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from fabriccap.kube.client import KubeClient
from fabriccap.kube.paths import ApiResource
from fabriccap_devtools.checkout import REPO
from fabriccap_devtools.seeding import JOBS, create_pod, ensure_namespace, wait_for_default_service_account

CORPUS = REPO / "tests" / "fixtures" / "nccl"
EXCERPTS = ("awsome-ai-386-ray-init.log", "awsome-ai-386-ray-channels.log")
SOURCE = "awslabs/awsome-distributed-ai#386, 'EFA does not work with PyTorch'"
NAMESPACE = "ml-training"
JOB = "llama-sft"
POD = f"{JOB}-0"
CONTAINER = "main"
EFA = "vpc.amazonaws.com/efa"
LOGS_CONFIGMAP = "llama-sft-nccl-log"
# Read a second after the container starts (the default is a minute), then as by default.
CONFIG: dict[str, Any] = {"transport": {"enabled": True, "readAfterSeconds": [1, 5, 15, 60]}}
CONFIG_MAPS = ApiResource("", "v1", "configmaps", "ConfigMap", namespaced=True)


def demo_log() -> bytes:
    return b"".join((CORPUS / name).read_bytes() for name in EXCERPTS)


def served_log(namespace: str, pod: str, container: str) -> bytes | None:
    """The log front's answer (simulated nodes): this job's log, and no other."""
    return demo_log() if (namespace, pod) == (NAMESPACE, POD) else None


def offline_verdict(directory: Path) -> str:
    """``fabriccap transport`` over the same log, as a user would run it on ``kubectl logs``."""
    path = directory / f"{POD}.log"
    path.write_bytes(demo_log())
    done = subprocess.run(
        [sys.executable, "-m", "fabriccap", "transport", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return f"$ fabriccap transport -f {path.name}   (exit {done.returncode})\n{done.stdout.rstrip()}"


async def create_simulated_job(client: KubeClient, node: str, started_at: str) -> None:
    """Job llama-sft and its pod on ``node``, running since ``started_at`` (no kubelet: the pod's
    status is written, like every simulated pod's). The Job is suspended: no controller may run it."""
    await ensure_namespace(client, NAMESPACE)
    job = await client.create(
        JOBS.collection(NAMESPACE),
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": JOB, "namespace": NAMESPACE},
            "spec": {
                "suspend": True,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": CONTAINER, "image": "registry.invalid/x"}],
                    }
                },
            },
        },
    )
    resources = {"cpu": "180", "memory": "1800Gi", "nvidia.com/gpu": "8", EFA: "32"}
    await create_pod(
        client,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": POD,
                "namespace": NAMESPACE,
                "labels": {"job-name": JOB, "batch.kubernetes.io/job-name": JOB},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": JOB,
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "nodeName": node,
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": CONTAINER,
                        "image": "111122223333.dkr.ecr.us-west-2.amazonaws.com/ml/llm-sft:2025-06-02-no-ofi",
                        "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                        "resources": {"limits": resources, "requests": resources},
                    }
                ],
            },
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [
                    {
                        "name": CONTAINER,
                        "ready": True,
                        "restartCount": 0,
                        "image": "111122223333.dkr.ecr.us-west-2.amazonaws.com/ml/llm-sft:2025-06-02-no-ofi",
                        "state": {"running": {"startedAt": started_at}},
                    }
                ],
            },
        },
    )


async def create_real_job(client: KubeClient, node: str) -> None:
    """The same job on a real kubelet: the sleeper test image prints the excerpt and sleeps."""
    await ensure_namespace(client, NAMESPACE)
    await wait_for_default_service_account(client, NAMESPACE)  # ServiceAccount admission runs there
    await client.create(
        CONFIG_MAPS.collection(NAMESPACE),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": LOGS_CONFIGMAP, "namespace": NAMESPACE},
            "data": {"nccl.log": demo_log().decode()},
        },
    )
    resources = {"cpu": "10m", "memory": "16Mi", EFA: "1"}
    await client.create(
        f"/api/v1/namespaces/{NAMESPACE}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": POD, "namespace": NAMESPACE},
            "spec": {
                "nodeName": node,
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "automountServiceAccountToken": False,
                "containers": [
                    {
                        "name": CONTAINER,
                        "image": "fabriccap.local/sleeper:v1",
                        "imagePullPolicy": "Never",
                        "args": ["-print", "/logs/nccl.log"],
                        "volumeMounts": [{"name": "logs", "mountPath": "/logs", "readOnly": True}],
                        "resources": {"requests": resources, "limits": {"memory": "32Mi", EFA: "1"}},
                    }
                ],
                "volumes": [{"name": "logs", "configMap": {"name": LOGS_CONFIGMAP}}],
            },
        },
    )
