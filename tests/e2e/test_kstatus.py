"""kstatus, the real library, reads the operator's live FabricCapability objects as intended.

Flux's health checks, cli-utils appliers and `kubectl wait`-style gates compute status with
sigs.k8s.io/cli-utils' kstatus. gitops/kstatus-check is a tiny Go program around
`status.Compute`; it is built once into the cache (keyed by a hash of its sources) and fed the
objects the operator publishes for five pools: Ready (Current), a partial rollout
(InProgress), a pool of instance types without EFA (Stalled: Failed), a Ready pool of two
instance types of different maxima at one count (Current: Ready and not Stalled), and that pool
scaling up, a new node at 0 (InProgress: not Stalled)."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from fabriccap_devtools.gotools import GoToolError, build_go_tool
from harness import (
    OperatorProcess,
    SyncKube,
    World,
    condition,
    wait_until,
    write_config,
)

if TYPE_CHECKING:
    from harness import E2ECluster

REPO_ROOT = Path(__file__).resolve().parents[2]
KSTATUS_SOURCE = REPO_ROOT / "gitops" / "kstatus-check"
ARGOCD_SOURCE = REPO_ROOT / "gitops" / "argocd-health-check"
ARGOCD_CUSTOMIZATION = REPO_ROOT / "gitops" / "resource_customizations" / "fabriccap.dev" / "FabricCapability"
ARGOCD_CM_PATCH = REPO_ROOT / "gitops" / "argocd-cm-patch.yaml"
PLUGIN_NAMESPACE = "kube-system"
GITOPS_LABEL = "app.kubernetes.io/instance"


# ---------------------------------------------------------------------------------------------
# The kstatus-check binary, built once


def go_tool(source: Path) -> Path:
    if shutil.which("go") is None and os.environ.get("CI", "").lower() != "true":
        pytest.skip(f"building {source.relative_to(REPO_ROOT)} needs a Go toolchain on PATH")
    try:
        return build_go_tool(source)
    except GoToolError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def kstatus() -> Path:
    return go_tool(KSTATUS_SOURCE)


@pytest.fixture(scope="module")
def argocd() -> Path:
    """Argo CD's own Lua runner around the shipped health check (tests/repo/test_argocd_health.py)."""
    return go_tool(ARGOCD_SOURCE)


def compute(kstatus: Path, obj: dict[str, Any]) -> tuple[str, str]:
    result = subprocess.run(
        [str(kstatus)], input=json.dumps(obj), capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0, f"kstatus-check failed:\n{result.stderr}"
    status, _, message = result.stdout.partition("\n")
    return status, message.rstrip("\n")


# ---------------------------------------------------------------------------------------------
# Three pools and the operator


@dataclass
class Pools:
    """The five pools of this module, in one test world."""

    world: World

    @property
    def marker(self) -> str:
        return self.world.prefix

    @property
    def ready(self) -> str:
        return self.world.pool("ready")

    @property
    def partial(self) -> str:
        return self.world.pool("partial")

    @property
    def stalled(self) -> str:
        return self.world.pool("stalled")

    @property
    def mixed(self) -> str:
        return self.world.pool("mixed")

    @property
    def scaling(self) -> str:
        return self.world.pool("scaling")

    def fcap(self, pool: str) -> str:
        return f"efa-{pool}"


@pytest.fixture(scope="module")
def pools(cluster: E2ECluster, kube: SyncKube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pools]:
    pools = Pools(World(kube=kube, namespace=PLUGIN_NAMESPACE, prefix=f"ks-{uuid.uuid4().hex[:6]}"))
    directory = tmp_path_factory.mktemp("kstatus")
    operator = OperatorProcess(
        kubeconfig=cluster.kubeconfig,
        config=write_config(directory / "config.yaml", {}),
        log_path=directory / "operator.log",
    )
    world = pools.world
    try:
        # Ready: both p5.48xlarge nodes advertise 32 and run a Ready plugin pod.
        world.add_pool("ready", 2, efa=32)
        # Partial rollout: one node advertises 32, the other 0, both with a Ready plugin pod.
        for index, efa in enumerate((32, 0)):
            world.add_node("partial", index, efa=efa, plugin=True)
        # Stalled: g6.2xlarge GPU nodes (EFA maximum 0) that advertise nothing.
        world.add_pool("stalled", 2, plugin=False, instance_type="g6.2xlarge", efa=None, gpus=1)
        # Ready across maxima: p5.48xlarge (32) and p5en.48xlarge (16), both advertising 16.
        for index, instance_type in enumerate(("p5.48xlarge", "p5en.48xlarge")):
            world.add_node("mixed", index, efa=16, plugin=True, instance_type=instance_type)
        # The same pool scaling up: a third node whose plugin has not started advertises 0.
        for index, instance_type in enumerate(("p5.48xlarge", "p5en.48xlarge")):
            world.add_node("scaling", index, efa=16, plugin=True, instance_type=instance_type)
        world.add_node("scaling", 2, efa=0, instance_type="p5.48xlarge")

        # The Ready pool's FabricCapability is declared up front, as a GitOps tool applies a
        # gate object from Git (docs/gitops.md, Argo CD); the operator adopts it.
        declared = {
            "apiVersion": "fabriccap.dev/v1alpha1",
            "kind": "FabricCapability",
            "metadata": {"name": pools.fcap(pools.ready), "labels": {GITOPS_LABEL: "training-gate"}},
            "spec": {},
        }
        cluster.run_kubectl(
            "apply", "--server-side", "--field-manager=argocd-controller", "-f", "-", input=json.dumps(declared)
        )
        operator.start()
        expected = {
            pools.ready: "True",
            pools.partial: "False",
            pools.stalled: "False",
            pools.mixed: "True",
            pools.scaling: "False",
        }

        def settled() -> bool:
            for pool, ready in expected.items():
                obj = kube.fcap(pools.fcap(pool))
                if obj is None or not (obj.get("status") or {}).get("conditions"):
                    return False
                if condition(obj, "Ready")["status"] != ready:
                    return False
            return True

        wait_until(settled, "the five FabricCapabilities", timeout=120)
        yield pools
    finally:
        operator.stop()
        world.cleanup(wait=False)


def live(cluster: E2ECluster, name: str) -> dict[str, Any]:
    """The object exactly as a GitOps tool reads it from the apiserver."""
    return dict(json.loads(cluster.run_kubectl("get", "fabriccapability", name, "-o", "json").stdout))


# ---------------------------------------------------------------------------------------------
# kstatus


def test_ready_pool_is_current(kstatus: Path, pools: Pools, cluster: E2ECluster) -> None:
    obj = live(cluster, pools.fcap(pools.ready))
    assert condition(obj, "Ready")["reason"] == "UniformCapability"
    assert compute(kstatus, obj) == ("Current", "Resource is Ready")


def test_declared_gate_object_is_adopted(pools: Pools, cluster: E2ECluster) -> None:
    obj = live(cluster, pools.fcap(pools.ready))
    labels = obj["metadata"]["labels"]
    assert labels[GITOPS_LABEL] == "training-gate", "the GitOps tool's label stays"
    assert labels["app.kubernetes.io/managed-by"] == "fabriccap"
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]


def test_partial_rollout_is_in_progress(kstatus: Path, pools: Pools, cluster: E2ECluster) -> None:
    obj = live(cluster, pools.fcap(pools.partial))
    ready = condition(obj, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PartialRollout")
    assert condition(obj, "Stalled")["status"] == "False"
    assert compute(kstatus, obj) == ("InProgress", ready["message"])


def test_stalled_pool_is_failed(kstatus: Path, pools: Pools, cluster: E2ECluster) -> None:
    obj = live(cluster, pools.fcap(pools.stalled))
    stalled = condition(obj, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "InstanceTypeUnsupported")
    assert compute(kstatus, obj) == ("Failed", stalled["message"])


def test_ready_pool_of_different_maxima_is_current_not_failed(kstatus: Path, pools: Pools, cluster: E2ECluster) -> None:
    # Ready with Stalled=True made kstatus (and Flux) say Failed and Argo CD Degraded while
    # kubectl wait and the ready label said go (review 64-observe F2).
    obj = live(cluster, pools.fcap(pools.mixed))
    assert condition(obj, "Ready")["reason"] == "UniformCapability"
    assert condition(obj, "Stalled")["status"] == "False"
    assert condition(obj, "MatchesInstanceType")["reason"] == "BelowInstanceMaximum"  # informational
    assert compute(kstatus, obj) == ("Current", "Resource is Ready")


def test_pool_of_different_maxima_scaling_up_is_in_progress_not_failed(
    kstatus: Path, pools: Pools, cluster: E2ECluster
) -> None:
    # A node that joins advertises 0 until its plugin starts: Stalled=True for that minute made
    # kstatus (and Flux) say Failed and Argo CD Degraded at every scale-up (review 64-fixc F3).
    obj = live(cluster, pools.fcap(pools.scaling))
    ready = condition(obj, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PartialRollout")
    assert condition(obj, "Stalled")["status"] == "False"
    assert compute(kstatus, obj) == ("InProgress", ready["message"])


def test_status_older_than_generation_is_in_progress(kstatus: Path, pools: Pools, cluster: E2ECluster) -> None:
    obj = live(cluster, pools.fcap(pools.ready))
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    stale = copy.deepcopy(obj)
    stale["metadata"]["generation"] += 1
    status, _ = compute(kstatus, stale)
    assert status == "InProgress"


# ---------------------------------------------------------------------------------------------
# Argo CD's health check reads the same live objects as kstatus does

# What Argo CD's health check says of an object whose status is not written yet.
ARGOCD_NOT_EVALUATED = "waiting for status: the fabriccap operator has not evaluated this pool yet"
ARGOCD_FOR_KSTATUS = {"Current": "Healthy", "InProgress": "Progressing", "Failed": "Degraded"}


def argocd_health(argocd: Path, obj: dict[str, Any]) -> dict[str, Any]:
    """Argo CD's health of ``obj`` by both routes (built in, argocd-cm): {"builtin": ..., "configMap": ...}."""
    result = subprocess.run(
        [str(argocd), "eval", str(ARGOCD_CUSTOMIZATION), str(ARGOCD_CM_PATCH)],
        input=json.dumps(obj),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (routes,) = json.loads(result.stdout)
    return dict(routes)


def test_argocd_health_agrees_with_kstatus_on_live_objects(
    kstatus: Path, argocd: Path, pools: Pools, cluster: E2ECluster
) -> None:
    for pool in (pools.ready, pools.partial, pools.stalled, pools.mixed, pools.scaling):
        obj = live(cluster, pools.fcap(pool))
        routes = argocd_health(argocd, obj)
        kstatus_status, kstatus_message = compute(kstatus, obj)
        # kstatus words Current itself ("Resource is Ready"); Argo CD shows the Ready message.
        message = condition(obj, "Ready")["message"] if kstatus_status == "Current" else kstatus_message
        expected = {"status": ARGOCD_FOR_KSTATUS[kstatus_status], "message": message}
        assert routes["builtin"] == routes["configMap"] == expected, pool


def test_an_object_no_one_has_written_a_status_for_is_in_progress(
    kstatus: Path, argocd: Path, pools: Pools, cluster: E2ECluster
) -> None:
    """A gate object declared in Git before the operator evaluates its pool, and every object
    between the operator's create and its status write (the API server drops a create's
    status), is served with the CRD's status default; every gate reads it as not reconciled.
    Without the default, kstatus reads such an object as Current, and a gate would open."""
    name = f"efa-{pools.marker}-declared"
    body = {"apiVersion": "fabriccap.dev/v1alpha1", "kind": "FabricCapability", "metadata": {"name": name}}
    # The create's answer: the object as served before anyone could write its status.
    created = json.loads(cluster.run_kubectl("create", "-f", "-", "-o", "json", input=json.dumps(body)).stdout)
    try:
        assert created["status"] == {"observedGeneration": 0}
        assert compute(kstatus, created) == (
            "InProgress",
            "FabricCapability generation is 1, but latest observed generation is 0",
        )
        routes = argocd_health(argocd, created)
        waiting = {"status": "Progressing", "message": ARGOCD_NOT_EVALUATED}
        assert routes["builtin"] == routes["configMap"] == waiting
    finally:
        cluster.run_kubectl("delete", "fabriccapability", name, "--wait=false", check=False)


# ---------------------------------------------------------------------------------------------
# kubectl wait, the simplest gate (docs/gitops.md)


def test_kubectl_wait_gates_on_ready(pools: Pools, cluster: E2ECluster) -> None:
    for pool in (pools.ready, pools.mixed):
        passed = cluster.run_kubectl(
            "wait", "--for=condition=Ready", f"fcap/{pools.fcap(pool)}", "--timeout=30s", check=False
        )
        assert passed.returncode == 0, passed.stderr
    for pool in (pools.partial, pools.stalled, pools.scaling):
        blocked = cluster.run_kubectl(
            "wait", "--for=condition=Ready", f"fcap/{pools.fcap(pool)}", "--timeout=2s", check=False
        )
        assert blocked.returncode != 0, f"kubectl wait passed for {pool}"
        assert "timed out" in blocked.stderr


# ---------------------------------------------------------------------------------------------
# Flux healthCheckExprs (gitops/flux-kustomization.yaml), evaluated by a real CEL engine
#
# Flux is not here, but the apiserver evaluates CEL: a ValidatingAdmissionPolicy in Warn mode
# whose validations are `!(expr)` turns every expression that holds for an object into a
# warning on a (dry-run) status update of that object. Flux binds the object's top-level
# fields as variables (`status`); an admission policy binds the object as `object`.

FLUX_EXAMPLE = REPO_ROOT / "gitops" / "flux-kustomization.yaml"
CEL_PROBE_USER = "fabriccap-cel-probe"
TOP_LEVEL_STATUS = re.compile(r"(?<![\w.])status\b")


def flux_health_expressions() -> dict[str, str]:
    for doc in yaml.safe_load_all(FLUX_EXAMPLE.read_text()):
        for check in (doc or {}).get("spec", {}).get("healthCheckExprs", []):
            if check["kind"] == "FabricCapability":
                return {key: str(check[key]) for key in ("current", "failed")}
    raise AssertionError(f"no FabricCapability healthCheckExprs in {FLUX_EXAMPLE}")


def as_admission_expression(flux_expression: str) -> str:
    """`status...` (Flux's variable) becomes `object.status...`; `e.status` stays."""
    return TOP_LEVEL_STATUS.sub("object.status", flux_expression)


@pytest.fixture(scope="module")
def cel_policy(cluster: E2ECluster, pools: Pools) -> Iterator[str]:
    name = f"fabriccap-flux-exprs-{pools.marker}"
    validations = [
        {
            "expression": f"!({as_admission_expression(expression)})",
            "message": f"expression {key} holds",
        }
        for key, expression in flux_health_expressions().items()
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["fabriccap.dev"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["UPDATE"],
                        "resources": ["fabriccapabilities/status"],
                    }
                ]
            },
            # Only the probe's requests: the operator's own status writes stay untouched.
            "matchConditions": [{"name": "probe", "expression": f"request.userInfo.username == '{CEL_PROBE_USER}'"}],
            "validations": validations,
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Warn"]},
    }
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": [policy, binding]})
    cluster.run_kubectl("apply", "--server-side", "-f", "-", input=manifest)
    try:
        # No controller-manager writes the policy's typeChecking status here; an expression
        # that does not compile fails the probe's request instead (failurePolicy: Fail).
        yield name
    finally:
        cluster.run_kubectl("delete", "-f", "-", "--wait=false", input=manifest, check=False)


def holding_expressions(cluster: E2ECluster, fcap: str) -> set[str]:
    """Which Flux expressions hold for the live object (via a dry-run no-op status patch)."""
    obj = live(cluster, fcap)
    result = cluster.run_kubectl(
        "patch",
        "fabriccapability",
        fcap,
        "--subresource=status",
        "--type=merge",
        "--dry-run=server",
        f"--as={CEL_PROBE_USER}",
        "--as-group=system:masters",
        "-p",
        json.dumps({"status": {"conditions": obj["status"]["conditions"]}}),
    )
    return set(re.findall(r"expression (\w+) holds", result.stderr))


def test_flux_health_expressions_agree_with_kstatus(cel_policy: str, pools: Pools, cluster: E2ECluster) -> None:
    def probe() -> dict[str, set[str]] | None:
        answers = {
            pool: holding_expressions(cluster, pools.fcap(pool)) for pool in (pools.ready, pools.stalled, pools.mixed)
        }
        # Admission policies reach the apiserver's admission chain through an informer.
        return answers if answers[pools.ready] else None

    answers = wait_until(probe, f"policy {cel_policy} to take effect", timeout=30, interval=0.5)
    assert answers == {pools.ready: {"current"}, pools.stalled: {"failed"}, pools.mixed: {"current"}}
    assert holding_expressions(cluster, pools.fcap(pools.partial)) == set(), "a partial rollout is neither"
    assert holding_expressions(cluster, pools.fcap(pools.scaling)) == set(), "nor is a scale-up across maxima"
