"""DeviceTaintRules end to end (KEP-5055) on a real kube-apiserver of v1.35.4, which serves them in
resource.k8s.io/v1alpha3 only when asked to (``--runtime-config``; the DRADeviceTaints and
DRADeviceTaintRules gates are what kube-scheduler applies them under, alpha and off in v1.35).

The session's control plane serves no v1alpha3, so this module runs one of its own. The slices,
DeviceClass and DaemonSet are test_dra_apiserver's (DRANET's EKS example's shape, the aws-dranet
chart's class); the rule is the Kubernetes docs' example shape, created through the API server,
which validates it. The operator reads v1beta2 first, is told 404, and reads v1alpha3: a rule
that taints a node's devices takes them from its pool's count, the status names the rule, and
deleting the rule gives them back.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabriccap.kube.paths import DEVICE_CLASSES, NAMESPACES, ApiResource
from fabriccap_devtools import world
from fabriccap_devtools.controlplane.cluster import LocalControlPlane
from harness import (
    EXTERNAL_KUBECONFIG_ENV,
    E2ECluster,
    OperatorProcess,
    SyncKube,
    control_plane_with_crd,
    published_equals_evaluate,
    wait_until,
    write_config,
)
from test_dra_apiserver import DraWorld, message_of, wait_ready_is

# The version v1.35.4 serves them in (k8s.io/api@v0.35.4 has DeviceTaintRule in v1alpha3 only).
TAINT_RULES = ApiResource("resource.k8s.io", "v1alpha3", "devicetaintrules", "DeviceTaintRule", namespaced=False)
TAINT_RULE_GATES = ("DRADeviceTaints=true", "DRADeviceTaintRules=true")
WAIT = 60.0
SNAPSHOT_KINDS = "nodes,pods,daemonsets,deviceclasses,devicetaintrules,resourceslices,resourceclaims"


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    if os.environ.get(EXTERNAL_KUBECONFIG_ENV):
        pytest.skip(f"needs a control plane serving resource.k8s.io/v1alpha3 ({EXTERNAL_KUBECONFIG_ENV} is set)")
    with control_plane_with_crd(
        tmp_path_factory.mktemp("taint-rules-cp"),
        feature_gates=TAINT_RULE_GATES,
        runtime_config=("resource.k8s.io/v1alpha3=true",),
    ) as plane:
        yield plane


def test_a_device_taint_rule_takes_its_devices_from_the_pool_until_deleted(
    control_plane: LocalControlPlane, tmp_path: Path
) -> None:
    kube = SyncKube(control_plane.kubeconfig)
    cluster = E2ECluster(kubeconfig=control_plane.kubeconfig, kubectl=control_plane.kubectl, local=control_plane)
    dra = DraWorld(kube)
    kube.create(NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": dra.namespace}})
    kube.create(DEVICE_CLASSES.collection(), world.efa_device_class())
    config = write_config(
        tmp_path / "config.yaml",
        {"debounceSeconds": 0.1, "fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [dra.namespace]}}]},
    )
    operator = OperatorProcess(kubeconfig=control_plane.kubeconfig, config=config, log_path=tmp_path / "operator.log")
    try:
        tainted, spared = dra.dra_pool("ruled", [32, 32])
        operator.start()
        ready = wait_ready_is(kube, dra.fcap_name("ruled"), "True", "UniformCapability")
        assert ready["status"]["uniformCount"] == 32
        assert "/apis/resource.k8s.io/v1beta2/devicetaintrules is not served: trying" in operator.log()

        # An admin takes one node's EFA devices out of service: the driver's pool of that node
        # (DRANET names its pool after the node), NoSchedule.
        rule_name = f"{dra.prefix}-drain"
        rule = world.device_taint_rule(rule_name, pool=tainted)
        created = kube.create(TAINT_RULES.collection(), rule)
        assert created["spec"]["deviceSelector"] == {"driver": world.DRANET_DRIVER, "pool": tainted}
        # One node of two advertises nothing usable: a partial rollout, which names the rule.
        not_ready = wait_ready_is(kube, dra.fcap_name("ruled"), "False", "PartialRollout")
        said = message_of(not_ready, "Advertised")
        assert (
            f"driver {world.DRANET_DRIVER} pool {tainted}: 32 devices tainted by DeviceTaintRule {rule_name}"
            " (NoSchedule) not counted (the recommended claim tolerates none)"
        ) in said, said
        assert f"pool {spared}: 32 devices tainted" not in said, said

        # `fabriccap evaluate` of a snapshot holding the rule (v1alpha3, as kubectl prints it)
        # publishes the same.
        published_equals_evaluate(cluster, kube, config, [dra.fcap_name("ruled")], kinds=SNAPSHOT_KINDS)

        kube.delete(TAINT_RULES.item(rule_name))
        back = wait_ready_is(kube, dra.fcap_name("ruled"), "True", "UniformCapability")
        assert back["status"]["uniformCount"] == 32
        assert "DeviceTaintRule" not in message_of(back, "Advertised")
        assert operator.running
    finally:
        operator.stop()
        kube.close()


def test_the_rule_is_listed_and_watched_in_v1alpha3_only(control_plane: LocalControlPlane) -> None:
    """What this module relies on: v1.35.4 serves DeviceTaintRules in v1alpha3, not v1beta2."""
    kube = SyncKube(control_plane.kubeconfig)
    try:
        assert kube.get("/apis/resource.k8s.io/v1beta2/devicetaintrules") is None
        listed = wait_until(
            lambda: kube.get(TAINT_RULES.collection()), "v1alpha3 DeviceTaintRules served", timeout=WAIT
        )
        assert listed["kind"] == "DeviceTaintRuleList"
    finally:
        kube.close()
