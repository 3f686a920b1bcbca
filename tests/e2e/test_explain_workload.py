"""`kubectl fabriccap explain jobset/NS/NAME` against the real API server: kubectl finds the
`kubectl-fabriccap` the package installs, the command reads the cluster once (the pool's nodes
and plugin pods, the JobSet of the project's released CRD), names the pool the JobSet selects,
and prints a patch that, applied as printed, adds the fabric where it is missing."""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from fabriccap.kube.paths import ApiResource
from fabriccap_devtools.gotools import GoToolError
from fabriccap_devtools.workload_crds import JOBSET
from harness import SyncKube, World, wait_until, write_config
from test_admission_kinds import established

if TYPE_CHECKING:
    from harness import E2ECluster

JOBSETS = ApiResource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", namespaced=True)
NODEGROUP = "eks.amazonaws.com/nodegroup"
EFA = "vpc.amazonaws.com/efa"


def jobset(name: str, pool: str, limits: dict[str, str]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": NODEGROUP, "operator": "In", "values": [pool]}]}
    spec = {
        "restartPolicy": "Never",
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}},
        "containers": [{"name": "node", "image": "registry.invalid/ml/trainer:e2e", "resources": {"limits": limits}}],
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "suspend": True,
            "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": spec}}}}],
        },
    }


def test_kubectl_fabriccap_explains_a_live_jobset_with_the_patch_to_apply(
    cluster: E2ECluster, kube: SyncKube, tmp_path: Path
) -> None:
    if cluster.local is None:
        pytest.skip("installs a CRD: only on the local control plane")
    plugin = Path(sys.executable).parent / "kubectl-fabriccap"
    assert plugin.exists(), "the package installs kubectl-fabriccap (run scripts/bootstrap.sh)"
    try:
        crd = JOBSET.file()
    except GoToolError as error:
        pytest.fail(str(error))
    cluster.run_kubectl("apply", "--server-side", "--field-manager=fabriccap-e2e", "-f", str(crd))
    wait_until(functools.partial(established, kube, JOBSET.name), "JobSet CRD Established", timeout=60)
    namespace = f"explain-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    world = World(kube, namespace, prefix=namespace)
    config = write_config(
        tmp_path / "config.yaml", {"fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [namespace]}}]}
    )
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "PATH": f"{plugin.parent}{os.pathsep}{os.environ['PATH']}",
    }
    try:
        world.add_pool("p5", 2, plugin=True)
        pool = world.pool("p5")
        kube.create(JOBSETS.collection(namespace), jobset("bert", pool, {"nvidia.com/gpu": "8"}))
        kube.create(JOBSETS.collection(namespace), jobset("ok", pool, {"nvidia.com/gpu": "8", EFA: "32"}))

        def explain(name: str) -> dict[str, Any]:
            result = subprocess.run(
                [
                    str(cluster.kubectl),
                    "fabriccap",
                    "explain",
                    f"jobset/{namespace}/{name}",
                    "--config",
                    str(config),
                    "-o",
                    "json",
                ],
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
                check=False,
            )
            assert (result.returncode, result.stderr) == (0, ""), result.stderr
            found: dict[str, Any] = json.loads(result.stdout)
            return found

        bert = explain("bert")
        assert (bert["pool"], bert["ready"], bert["offers"]) == (
            f"{NODEGROUP}={pool}",
            True,
            f"{EFA}: 32 per node, Ready (2 nodes now)",
        )
        assert explain("ok")["change"] == "nothing to change"

        # The change, run as printed (kubectl patch … --type json -p '…'), against the server.
        words = shlex.split(bert["change"])
        assert words[:2] == ["kubectl", "patch"]
        patched = subprocess.run(
            [str(cluster.kubectl), *words[1:], "--dry-run=server", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        assert patched.returncode == 0, patched.stderr
        (job,) = json.loads(patched.stdout)["spec"]["replicatedJobs"]
        limits = job["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert limits == {"nvidia.com/gpu": "8", EFA: "32"}
    finally:
        world.delete_objects()  # no operator runs: there are no FabricCapabilities to wait for
        kube.delete(f"/api/v1/namespaces/{namespace}")
