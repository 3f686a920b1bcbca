"""``fabriccap evaluate`` against a live cluster reads a kind served in several API versions in
the newest the server serves (offline.pipeline ``live_facts``)."""

from __future__ import annotations

from collections import deque

import pytest

from fabriccap.core.facts import FactsExtractor
from fabriccap.kube.errors import KubeError
from fabriccap.offline.pipeline import live_facts
from fabriccap_devtools import world
from support.builders import node, resource_slice
from support.configs import build_config
from support.fakeapi import FakeApi, fake_api
from support.informing import (
    DAEMON_SETS,
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)

TAINT_RULES_V1ALPHA3 = "/apis/resource.k8s.io/v1alpha3/devicetaintrules"


def serve_one_dra_node(api: FakeApi) -> None:
    """A cluster of one node whose 32 EFA devices DRANET publishes in one slice."""
    api.serve(NODES, "Node", [node("n1", efa=None)], "1")
    api.serve(DAEMON_SETS, "DaemonSet", [], "1")
    api.serve(PODS, "Pod", [], "1")
    api.serve(DEVICE_CLASSES, "DeviceClass", [], "1")
    api.serve(RESOURCE_CLAIMS, "ResourceClaim", [], "1")
    api.serve(RESOURCE_SLICES, "ResourceSlice", [resource_slice("n1", efa=32, name="s1")], "1")


async def test_device_taint_rules_are_read_from_the_older_version_a_1_35_server_serves() -> None:
    config = build_config({"workloads": {"enabled": False}, "karpenter": {"enabled": False}})
    async with fake_api() as (api, client):
        serve_one_dra_node(api)
        # v1beta2 is not served (404): the rule is read from v1alpha3.
        api.serve(TAINT_RULES_V1ALPHA3, "DeviceTaintRule", [world.device_taint_rule("drain-n1", pool="n1")], "1")
        facts = await live_facts(FactsExtractor(config), client=client)
    assert list(facts.taint_rules) == ["drain-n1"]
    assert facts.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).count == 0


async def test_a_role_that_cannot_list_device_taint_rules_fails_saying_what_to_grant() -> None:
    """Review 62 F8: a read-only role made before DeviceTaintRules were read (403). The run
    still fails closed (no count without the rules), in one line that says what is missing,
    not the API server's answer to a GET."""
    config = build_config({"workloads": {"enabled": False}, "karpenter": {"enabled": False}})
    async with fake_api() as (api, client):
        serve_one_dra_node(api)
        api.serve(DEVICE_TAINT_RULES, "DeviceTaintRule", [], "1")
        api.list_failures[DEVICE_TAINT_RULES] = deque([403])
        with pytest.raises(KubeError) as refused:
            await live_facts(FactsExtractor(config), client=client)
    assert str(refused.value) == (
        "cannot list devicetaintrules (403 Forbidden): grant list on devicetaintrules.resource.k8s.io"
    )
