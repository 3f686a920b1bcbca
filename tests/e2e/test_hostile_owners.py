"""Pods with hostile owner references, against the real API server (reliability round 3, S3;
issue 27 item 9).

A user who may only create pods in their own namespace writes ownerReferences whose names are
paths (``../../../../api/v1/nodes?limit=0``, ``x?watch=true``, a pod in another namespace), and
binds those pods to a pool's node. The operator runs as a user whose reads the API server
audits (the local control plane audits the reads of one group): the audit log, not the
operator's word, shows every request it made. Each lookup must be one GET of
``/apis/<group>/<version>/namespaces/<that namespace>/<plural>/<valid name>``; every list and
watch one of the informers'; and no Event or status may name an object of another namespace.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import pytest

from fabriccap.kube.kinds import WATCHED_KINDS
from fabriccap.kube.paths import EVENTS, NAMESPACES, PODS, ApiResource
from fabriccap_devtools import world
from fabriccap_devtools.controlplane.cluster import AUDITED_READS_GROUP
from fabriccap_devtools.seeding import JOBS, creatable
from harness import OperatorProcess, SyncKube, World, wait_until, write_config

if TYPE_CHECKING:
    from harness import E2ECluster

ROLES = ApiResource("rbac.authorization.k8s.io", "v1", "roles", "Role", namespaced=True)
ROLE_BINDINGS = ApiResource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", namespaced=True)
VICTIM_OWNER = "secret-project-zephyr-5d8f"
WAIT = 60.0
# A lookup is one object by a name an object can have: a DNS-1123 subdomain.
NAME = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
DISCOVERY = re.compile(r"/api(/v1)?|/apis(/[a-z0-9.-]+/v[a-z0-9]+)?")


def hostile_names(victim: str) -> list[str]:
    # From /apis/batch/v1/namespaces/<ns>/jobs/<name>, six ".." reach the root.
    up = "../" * 6
    return [
        f"{up}api/v1/nodes?limit=0",
        f"{up}api/v1/pods",
        "x?watch=true",
        f"{up}api/v1/namespaces/{victim}/pods/victim-pod",
        f"../../namespaces/{victim}/pods/victim-pod",
        "%2e%2e",
        "a" * 600_000,
        "x\ny",
    ]


@dataclass
class Setup:
    kube: SyncKube
    cluster: E2ECluster
    world: World
    hostile: str
    victim: str
    operator: OperatorProcess
    operator_user: str
    hostile_pods: list[str]

    def audited_reads(self) -> list[dict[str, Any]]:
        assert self.cluster.local is not None
        return [
            event
            for event in self.cluster.local.audit_events()
            if event.get("stage") == "ResponseComplete"
            and event["user"]["username"] == self.operator_user
            and event.get("verb") in ("get", "list", "watch")
        ]

    def report_sections(self) -> list[tuple[str, str]]:
        return [*self.operator.report_sections(), *self.world.report_sections()]


def _namespace(kube: SyncKube, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def _mallory(cluster: E2ECluster, kube: SyncKube, namespace: str) -> SyncKube:
    """A user who may create, read and delete pods in ``namespace``, and nothing else."""
    user = f"mallory-{uuid.uuid4().hex[:6]}"
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "delete"]}]
    kube.create(
        ROLES.collection(namespace),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "pods"}, "rules": rules},
    )
    kube.create(
        ROLE_BINDINGS.collection(namespace),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    return SyncKube(cluster.kubeconfig_for(user))


def _pod(node: str, name: str, namespace: str, owner: dict[str, Any], *, gpu: int = 8) -> dict[str, Any]:
    body = world.workload_pod(node, name, namespace=namespace, owner=owner, gpu=gpu)
    body.pop("status")
    return creatable(body)


@pytest.fixture
def setup(cluster: E2ECluster, tmp_path: Path) -> Iterator[Setup]:
    if cluster.local is None:
        pytest.skip("the audit log of reads is the local control plane's")
    kube = SyncKube(cluster.kubeconfig)
    plugins, hostile, victim = (_namespace(kube, prefix) for prefix in ("fcap-hp", "fcap-hostile", "fcap-victim"))
    pool = World(kube=kube, namespace=plugins, prefix=f"hostile-{uuid.uuid4().hex[:6]}")
    (node,) = pool.add_pool("p", 1)
    # The victim: a pod in a namespace the attacker cannot read, owned by a ReplicaSet whose
    # name must never reach the attacker. It asks for no accelerator: nothing legitimately
    # reports it anywhere.
    victim_owner = world.owner_reference("ReplicaSet", "apps/v1", VICTIM_OWNER, victim)
    kube.create(PODS.collection(victim), _pod(node, "victim-pod", victim, victim_owner, gpu=0))
    # An honest Job's pod beside the hostile ones: its lookup must happen, and be audited.
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "honest-job"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}},
    }
    kube.create(JOBS.collection(hostile), job)
    mallory = _mallory(cluster, kube, hostile)
    honest = world.owner_reference("Job", "batch/v1", "honest-job", hostile)
    job_reference = world.owner_reference("Job", "batch/v1", "x", hostile)
    bodies = [_pod(node, "honest", hostile, honest)]
    bodies += [
        _pod(node, f"hostile-{index}", hostile, {**job_reference, "name": name})
        for index, name in enumerate(hostile_names(victim))
    ]
    bodies.append(
        _pod(
            node,
            "hostile-kind",
            hostile,
            {**job_reference, "kind": "Evil\nName\x1b]0;pwned\x07"},
        )
    )

    def created_by_mallory(body: dict[str, Any]) -> bool:
        # Her Role reaches the RBAC authorizer's cache on its own schedule.
        try:
            mallory.create(PODS.collection(hostile), body)
        except Exception as error:  # 403 until then
            if "forbidden" not in str(error):
                raise
            return False
        return True

    for body in bodies:
        wait_until(functools.partial(created_by_mallory, body), "mallory may create pods", timeout=20)
    operator_user = f"fabriccap-audited-{uuid.uuid4().hex[:6]}"
    config = write_config(
        tmp_path / "config.yaml",
        {"debounceSeconds": 0.1, "fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [plugins]}}]},
    )
    operator = OperatorProcess(
        kubeconfig=cluster.kubeconfig_for(operator_user, ["system:masters", AUDITED_READS_GROUP]),
        config=config,
        log_path=tmp_path / "operator.log",
    )
    names = [str(body["metadata"]["name"]) for body in bodies[1:]]
    try:
        operator.start()
        yield Setup(kube, cluster, pool, hostile, victim, operator, operator_user, names)
    finally:
        operator.stop()
        for body in bodies:
            kube.delete(PODS.item(str(body["metadata"]["name"]), hostile))
        kube.delete(PODS.item("victim-pod", victim))
        kube.delete(JOBS.item("honest-job", hostile))
        pool.cleanup(wait=False)
        mallory.close()
        for namespace in (plugins, hostile, victim):
            kube.delete(NAMESPACES.item(namespace))
        kube.close()


def _fabriccap_events(setup: Setup) -> list[dict[str, Any]]:
    """fabriccap's Events in this test's namespaces: the cluster is shared with other modules,
    whose operators' Events (in namespaces of their own) are not this operator's doing."""
    ours = {setup.hostile, setup.victim, setup.world.namespace}
    return [
        event
        for event in setup.kube.list_objects(EVENTS.collection())
        if event.get("reportingComponent") == "fabriccap" and event["metadata"]["namespace"] in ours
    ]


def test_hostile_owner_references_read_nothing_outside_one_valid_object(setup: Setup) -> None:
    hostile, victim = setup.hostile, setup.victim
    owners = len(setup.hostile_pods) + 1  # each hostile pod is its own top; the honest pod's is its Job

    # Everything is read and warned: one FabricNotRequested Event per owner, in its namespace.
    def workload_events() -> list[dict[str, Any]]:
        found = [event for event in _fabriccap_events(setup) if event["reason"] == "FabricNotRequested"]
        return found if len(found) >= owners else []

    events = wait_until(workload_events, f"{owners} FabricNotRequested Events", timeout=WAIT)
    lookup = re.compile(rf"/apis/[a-z0-9.-]+/[a-z0-9]+/namespaces/{hostile}/[a-z]+/{NAME}")
    # The watched kinds' own rows say what the informers may list and watch: each kind across
    # the cluster, or in the plugin namespace for the kinds read there (Pods are read
    # cluster-wide when workloads are reported), in each API version a kind is read in (the
    # DeviceTaintRules' v1alpha3 after a 404 on v1beta2), besides the operator's own objects.
    informer_paths = {
        path
        for watched in WATCHED_KINDS
        for path in (
            *watched.versioned_paths(None),
            *(watched.versioned_paths(setup.world.namespace) if watched.per_plugin_namespace else ()),
        )
    } | {"/apis/fabriccap.dev/v1alpha1/fabriccapabilities"}
    reads = setup.audited_reads()
    gets = [urlsplit(event["requestURI"]) for event in reads if event["verb"] == "get"]
    assert f"/apis/batch/v1/namespaces/{hostile}/jobs/honest-job" in [uri.path for uri in gets]
    # Besides lookups, only discovery (kopf's, at start): documents about the API, no object.
    outside = [uri.geturl() for uri in gets if not (lookup.fullmatch(uri.path) or DISCOVERY.fullmatch(uri.path))]
    assert outside == []
    assert [uri.geturl() for uri in gets if uri.query] == []
    collections = [urlsplit(event["requestURI"]) for event in reads if event["verb"] in ("list", "watch")]
    assert [uri.geturl() for uri in collections if uri.path not in informer_paths] == []
    # The informers list in pages; `?limit=0` (everything at once) came only from a traversal.
    lists = [urlsplit(event["requestURI"]) for event in reads if event["verb"] == "list"]
    assert [uri.geturl() for uri in lists if int(parse_qs(uri.query).get("limit", ["0"])[0]) <= 0] == []
    assert not [event for event in reads if (event.get("objectRef") or {}).get("namespace") == victim]

    # Nothing names the victim's owner, and every Event is about an object of its own namespace.
    assert not [event for event in _fabriccap_events(setup) if VICTIM_OWNER in str(event)]
    assert all(event["involvedObject"]["namespace"] == event["metadata"]["namespace"] == hostile for event in events)
    involved = {(event["involvedObject"]["kind"], event["involvedObject"]["name"]) for event in events}
    assert involved == {("Job", "honest-job"), *(("Pod", name) for name in setup.hostile_pods)}
    # The pool's status may come after the Events when the operator's first LIST of
    # FabricCapabilities meets a 429 (a CRD whose storage is still initialising, as when this
    # module runs alone): wait for it rather than read it once.
    statuses = wait_until(
        lambda: [str(obj["status"]) for obj in setup.world.own_fcaps() if obj.get("status")],
        "the pool's FabricCapability status",
        timeout=WAIT,
    )
    assert statuses and not [status for status in statuses if VICTIM_OWNER in status or victim in status]
    assert "not followed" in setup.operator.log()
