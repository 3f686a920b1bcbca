"""The shipped ValidatingAdmissionPolicy on the real API server: `kubectl apply` of a Job that
selects a Ready EFA pool, requests GPUs and no EFA prints the warning; a correct Job prints none.

Its params are the FabricCapability objects the operator labels Ready, so the operator runs
and publishes a Ready pool first.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from fabriccap.core.api import READY_LABEL
from fabriccap.observability.admission import POLICY_NAME
from harness import OperatorProcess, SyncKube, World, wait_until, write_config

if TYPE_CHECKING:
    from harness import E2ECluster

REPO_ROOT = Path(__file__).resolve().parents[2]
POLICY = REPO_ROOT / "manifests" / "components" / "admission-policy" / "admission-policy.yaml"
NODEGROUP = "eks.amazonaws.com/nodegroup"


def job(name: str, namespace: str, pool: str, limits: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {NODEGROUP: pool},
                    "containers": [
                        {"name": "train", "image": "registry.invalid/ml/trainer:e2e", "resources": {"limits": limits}}
                    ],
                }
            },
        },
    }


def ours(stderr: str) -> list[str]:
    """The warnings of this policy (another install's policy, say the chart's, may add its own)."""
    return [line.strip() for line in stderr.splitlines() if f"ValidatingAdmissionPolicy '{POLICY_NAME}'" in line]


def apply(cluster: E2ECluster, body: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """`kubectl apply -f -` as a user runs it; warnings come back on stderr."""
    assert cluster.kubectl is not None
    return subprocess.run(
        [str(cluster.kubectl), f"--kubeconfig={cluster.kubeconfig}", "apply", "-f", "-"],
        input=json.dumps(body),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_job_that_forgets_efa_on_a_ready_pool_is_warned_at_apply(
    cluster: E2ECluster, kube: SyncKube, tmp_path: Path
) -> None:
    if cluster.local is None:
        pytest.skip("installs a cluster-wide admission policy: only on the local control plane")
    namespace = f"vap-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    pool = World(kube, namespace, prefix=namespace)
    config = write_config(
        tmp_path / "config.yaml",
        {"debounceSeconds": 0.1, "fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [namespace]}}]},
    )
    operator = OperatorProcess(kubeconfig=cluster.kubeconfig, config=config, log_path=tmp_path / "operator.log")
    created: list[str] = []
    try:
        cluster.run_kubectl("apply", "-f", str(POLICY))
        pool.add_pool("p5", 2, plugin=True)
        operator.start()
        name = pool.fcap_name("p5")
        ready = wait_until(
            lambda: (obj := kube.fcap(name)) and obj["metadata"]["labels"].get(READY_LABEL) == "true" and obj,
            f"{name} labelled Ready",
            timeout=30,
        )
        assert ready["status"]["uniformCount"] == 32

        def expected(job_name: str) -> str:
            return (
                f"Warning: Validation failed for ValidatingAdmissionPolicy '{POLICY_NAME}' with binding "
                f"'{POLICY_NAME}': request vpc.amazonaws.com/efa: 32 per node in Job: "
                f"spec.template.spec.containers[].resources: Job {job_name} selects pool {pool.pool('p5')} where "
                f"vpc.amazonaws.com/efa: 32 is Ready (FabricCapability {name}), and requests an accelerator but no "
                "vpc.amazonaws.com/efa: NCCL will use TCP sockets"
            )

        # The API server takes a moment to see a new policy, binding and param (longer for a large
        # policy). Each try is a Job of its own: `kubectl apply` of an unchanged object sends no
        # request, so a second apply of one Job would never be admitted again.
        attempts = iter(range(60))

        def warned() -> tuple[str, str] | None:
            job_name = f"tcp-only-{next(attempts)}"
            result = apply(cluster, job(job_name, namespace, pool.pool("p5"), {"nvidia.com/gpu": "8"}))
            assert result.returncode == 0, result.stderr  # a warning, never a refusal
            created.append(job_name)
            return (job_name, result.stderr) if expected(job_name) in result.stderr else None

        job_name, stderr = wait_until(warned, "the warning at apply", timeout=30, interval=1.0)
        assert ours(stderr) == [expected(job_name)]

        good = apply(
            cluster, job("with-efa", namespace, pool.pool("p5"), {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"})
        )
        assert (good.returncode, ours(good.stderr)) == (0, [])
        created.append("with-efa")
        elsewhere = apply(cluster, job("elsewhere", namespace, "some-other-pool", {"nvidia.com/gpu": "8"}))
        assert (elsewhere.returncode, ours(elsewhere.stderr)) == (0, [])
        created.append("elsewhere")

        # The pool stops being Ready: its FabricCapability is no longer a param, no warning.
        pool.set_fabric(pool.nodes[1], 16)
        wait_until(
            lambda: (obj := kube.fcap(name)) and obj["metadata"]["labels"].get(READY_LABEL) == "false",
            f"{name} labelled not Ready",
            timeout=30,
        )

        def quiet() -> bool:
            result = apply(cluster, job("tcp-later", namespace, pool.pool("p5"), {"nvidia.com/gpu": "8"}))
            created.append("tcp-later")
            cluster.run_kubectl("delete", "job", "tcp-later", "-n", namespace, "--wait=false")
            return result.returncode == 0 and ours(result.stderr) == []

        wait_until(quiet, "no warning once the pool is not Ready", timeout=30, interval=1.0)
    finally:
        operator.stop()
        for job_name in set(created):
            cluster.run_kubectl("delete", "job", job_name, "-n", namespace, "--ignore-not-found", "--wait=false")
        cluster.run_kubectl("delete", "-f", str(POLICY), "--ignore-not-found")
        pool.cleanup(wait=False)
        kube.delete(f"/api/v1/namespaces/{namespace}")
