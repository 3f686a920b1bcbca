"""Two replicas on one Lease (docs/install.md, "High availability"): one writes, the other takes over when
the leader dies, and a leader paused past its renew deadline writes nothing when it wakes.

Each replica authenticates as its own user, so the API server's audit log says who wrote
what: the proof that only the leader writes is the server's record, not the operator's word.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from fabriccap.core.api import POOL_VALUE_ANNOTATION, READY_LABEL
from fabriccap.core.shard import UNSHARDED, Shard
from fabriccap.kube.paths import FABRIC_CAPABILITIES, LEASES, NAMESPACES
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

pytestmark = pytest.mark.faults

LEASE_DURATION = 15.0
RETRY_PERIOD = 2.0
STATUS_TIMEOUT = 30.0


@dataclass
class Pair:
    cluster: E2ECluster
    kube: SyncKube
    world: World
    replicas: dict[str, OperatorProcess]

    def leader(self) -> str:
        def find() -> str | None:
            leading = [name for name, replica in self.replicas.items() if _is_leader(replica)]
            return leading[0] if len(leading) == 1 else None

        return wait_until(find, "exactly one leader", timeout=LEASE_DURATION + 10)

    def fcap_writes(self, since: datetime | None = None) -> dict[str, int]:
        """Writes to FabricCapabilities per user, from the API server's audit log."""
        counts: dict[str, int] = {}
        for user, _name in self.fcap_writes_by_object(since):
            counts[user] = counts.get(user, 0) + 1
        return counts

    def fcap_writes_by_object(self, since: datetime | None = None) -> list[tuple[str, str]]:
        """(user, object name) of each write to a FabricCapability, from the API server's audit
        log (a create names its object in its response)."""
        assert self.cluster.local is not None
        writes = []
        for event in self.cluster.local.audit_events():
            reference = event.get("objectRef") or {}
            if reference.get("resource") != "fabriccapabilities" or event.get("stage") != "ResponseComplete":
                continue
            if event.get("verb") not in ("create", "update", "patch", "delete"):
                continue
            received = datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))
            if since is not None and received < since:
                continue
            user = event["user"]["username"]
            if user in self.replicas:
                writes.append((user, str(reference.get("name") or "")))
        return writes

    def report_sections(self) -> list[tuple[str, str]]:
        sections = []
        for replica in self.replicas.values():
            sections += replica.report_sections()
        return sections


def _is_leader(replica: OperatorProcess) -> bool:
    return replica.running and replica.metrics().get("fabriccap_leader") == 1.0


@dataclass(frozen=True)
class Replica:
    """How one operator process of a test runs: elected in ``lease_namespace`` (None:
    --standalone), with the plugin namespace's config plus ``config``."""

    name: str
    lease_namespace: str | None
    config: dict[str, Any] = field(default_factory=dict)
    shard: Shard = UNSHARDED


@contextmanager
def replicas_of(cluster: E2ECluster, tmp_path: Path, specs: Callable[[str], list[Replica]]) -> Iterator[Pair]:
    """Operators (``specs`` of the plugin namespace, which the test also elects in) and a world."""
    if cluster.local is None:
        pytest.skip("the audit log is the local control plane's")
    kube = SyncKube(cluster.kubeconfig)
    namespace = f"fcap-ha-{uuid.uuid4().hex[:6]}"
    made = [namespace]
    kube.create(NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    replicas = {}
    for spec in specs(namespace):
        if spec.lease_namespace is not None and spec.lease_namespace not in made:
            made.append(spec.lease_namespace)
            kube.create(
                NAMESPACES.collection(),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": spec.lease_namespace}},
            )
        profile = {"name": "efa", "devicePlugin": {"namespaces": [namespace]}, **spec.config.get("efa", {})}
        config = write_config(
            tmp_path / f"{spec.name}.yaml",
            {
                "debounceSeconds": 0.1,
                "poolGracePeriodSeconds": 3,
                "fabrics": [profile],
                **{key: value for key, value in spec.config.items() if key != "efa"},
            },
        )
        replicas[spec.name] = OperatorProcess(
            kubeconfig=cluster.kubeconfig_for(spec.name, ["system:masters"]),
            config=config,
            log_path=tmp_path / f"{spec.name}.log",
            standalone=spec.lease_namespace is None,
            namespace=spec.lease_namespace,
            pod_name=spec.name,
            shard=spec.shard,
        )
    world = World(kube=kube, namespace=namespace, prefix=f"ha-{uuid.uuid4().hex[:6]}")
    try:
        for replica in replicas.values():
            replica.start()
        yield Pair(cluster, kube, world, replicas)
    finally:
        for replica in replicas.values():
            if replica.process is not None:
                replica.resume()
            replica.stop()
        world.cleanup(wait=False)
        for made_namespace in made:
            kube.delete(NAMESPACES.item(made_namespace))
        kube.close()


@pytest.fixture
def pair(cluster: E2ECluster, tmp_path: Path) -> Iterator[Pair]:
    with replicas_of(
        cluster, tmp_path, lambda namespace: [Replica("replica-a", namespace), Replica("replica-b", namespace)]
    ) as made:
        yield made


def _wait_count(pair: Pair, label: str, count: int, timeout: float = STATUS_TIMEOUT) -> float:
    """Seconds until the pool's status shows uniformCount == count and Ready=True."""
    started = time.monotonic()

    def shown() -> bool:
        obj = pair.world.fcap(label)
        status = (obj or {}).get("status") or {}
        return status.get("uniformCount") == count and condition(obj or {}, "Ready")["status"] == "True"

    wait_until(shown, f"{pair.world.fcap_name(label)} uniformCount {count}", timeout=timeout, interval=0.05)
    return time.monotonic() - started


def test_only_the_leader_writes(pair: Pair) -> None:
    nodes = pair.world.add_pool("ha", 2, efa=32)
    leader = pair.leader()
    _wait_count(pair, "ha", 32)
    for node in nodes:
        pair.world.set_fabric(node, 16)
    _wait_count(pair, "ha", 16)
    writes = pair.fcap_writes()
    assert writes.get(leader, 0) >= 2, writes  # created, status written, rewritten
    assert set(writes) == {leader}, writes
    follower = pair.replicas[next(name for name in pair.replicas if name != leader)]
    # The follower evaluates and exports the same answer, but never wrote. It exports it once
    # its own view is fresh: it started after the leader, and its first LIST of
    # FabricCapabilities can meet the new CRD's "429 storage is (re)initializing", so read its
    # metrics until they agree rather than once (they did not, now and then, on a loaded machine).
    labels = _pool_labels(pair, "ha")
    wait_until(
        lambda: follower.metrics().get("fabriccap_pool_ready", **labels) == 1.0,
        "the follower exports the pool as Ready",
        timeout=STATUS_TIMEOUT,
    )
    assert follower.metrics().get("fabriccap_status_writes_total", result="updated") == 0.0
    assert set(pair.fcap_writes()) == {leader}


def _pool_labels(pair: Pair, label: str) -> dict[str, str]:
    return {"name": pair.world.fcap_name(label), "fabric": "efa", "pool": pair.world.pool(label)}


def test_the_follower_takes_over_within_the_lease_duration_when_the_leader_is_killed(pair: Pair) -> None:
    nodes = pair.world.add_pool("ko", 2, efa=32)
    leader = pair.leader()
    _wait_count(pair, "ko", 32)
    killed_at = time.monotonic()
    pair.replicas[leader].kill()
    for node in nodes:
        pair.world.set_fabric(node, 8)
    elapsed = _wait_count(pair, "ko", 8, timeout=LEASE_DURATION + 15)
    survivor = next(name for name in pair.replicas if name != leader)
    print(f"\nfailover after SIGKILL: change published {time.monotonic() - killed_at:.1f}s after the kill")
    assert _is_leader(pair.replicas[survivor])
    # client-go's bound: the lease expires at most lease duration + one retry period after
    # the leader's last renewal; then a debounce window and one write. Generous for a busy CI.
    assert elapsed <= LEASE_DURATION + RETRY_PERIOD + 3.0, elapsed
    assert set(pair.fcap_writes()) <= set(pair.replicas)


def test_a_leader_paused_past_its_renew_deadline_writes_nothing_after_it_wakes(pair: Pair) -> None:
    nodes = pair.world.add_pool("stop", 2, efa=32)
    leader = pair.leader()
    follower = next(name for name in pair.replicas if name != leader)
    _wait_count(pair, "stop", 32)
    stopped_at = datetime.now(UTC)
    pair.replicas[leader].pause()  # SIGSTOP: its last renewal ages while it cannot tell
    wait_until(lambda: _is_leader(pair.replicas[follower]), "the follower to take over", timeout=LEASE_DURATION + 10)
    for node in nodes:
        pair.world.set_fabric(node, 4)
    _wait_count(pair, "stop", 4)
    # Counted from the wake, not the pause: a write the leader sent in its last moment as the
    # lease's holder (the ready label just after the status the wait above saw) reaches the API
    # server after `stopped_at`, and is no write after waking. Nothing it sends after this
    # instant can be older: it was stopped for a whole lease duration.
    woke_at = datetime.now(UTC)
    pair.replicas[leader].resume()
    # Awake, it sees its last renewal is older than the renew deadline: it must not write,
    # even though it still holds stale facts that disagree with what is published.
    wait_until(lambda: pair.replicas[leader].metrics().get("fabriccap_leader") == 0.0, "the old leader to step down")
    for node in nodes:
        pair.world.set_fabric(node, 2)
    _wait_count(pair, "stop", 2)
    time.sleep(2.0)  # a debounce window and more, for a late write to show up in the log
    after_wake = pair.fcap_writes(since=woke_at)
    assert leader not in after_wake, after_wake
    after_stop = pair.fcap_writes(since=stopped_at)
    assert after_stop.get(follower, 0) >= 2, after_stop
    assert _is_leader(pair.replicas[follower])


def _ready_since(pair: Pair, label: str) -> str:
    return str(condition(pair.world.fcap(label) or {}, "Ready")["lastTransitionTime"])


def test_a_returning_leader_keeps_the_history_the_other_one_wrote(pair: Pair) -> None:
    """Round 3 L18: A leads, B takes over and publishes a False/True transition, A leads again:
    Ready's lastTransitionTime never goes back to A's own older record."""
    nodes = pair.world.add_pool("back", 2, efa=32)
    first = pair.leader()
    second = next(name for name in pair.replicas if name != first)
    _wait_count(pair, "back", 32)
    pair.replicas[first].pause()
    wait_until(lambda: _is_leader(pair.replicas[second]), "the other replica to take over", timeout=LEASE_DURATION + 10)
    pair.world.set_fabric(nodes[0], 0)
    wait_until(lambda: condition(pair.world.fcap("back") or {}, "Ready")["status"] == "False", "Ready False")
    time.sleep(1.1)  # transition times are whole seconds
    pair.world.set_fabric(nodes[0], 32)
    _wait_count(pair, "back", 32)
    published = _ready_since(pair, "back")
    pair.replicas[first].resume()
    pair.replicas[second].pause()
    wait_until(lambda: _is_leader(pair.replicas[first]), "the first replica to lead again", timeout=LEASE_DURATION + 10)
    returned = datetime.now(UTC)
    time.sleep(3.0)  # a resync of what it remembers would have landed by now
    assert _ready_since(pair, "back") == published
    status_writes = [
        event
        for event in pair.cluster.local.audit_events()  # type: ignore[union-attr]
        if (event.get("objectRef") or {}).get("subresource") == "status"
        and event["user"]["username"] == first
        and datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00")) >= returned
    ]
    assert status_writes == []


def _quiet_minute_writes(pair: Pair) -> dict[str, int]:
    """Writes to FabricCapabilities per replica in one minute in which nothing changes."""
    since = datetime.now(UTC)
    time.sleep(60)
    return pair.fcap_writes(since=since)


def _flip_ready_with_skew(pair: Pair, label: str, nodes: list[str], skewed: str) -> None:
    """Three Ready flips, the replica ``skewed`` paused 1.6 s at each: its rounds straddle
    another second than the other's (what started the write loops of round 3)."""
    for allocatable in (0, 32, 0, 32):
        pair.replicas[skewed].pause()
        pair.world.set_fabric(nodes[0], allocatable)
        time.sleep(1.6)
        pair.replicas[skewed].resume()
        time.sleep(1.5)


def _war_reported(pair: Pair) -> bool:
    return any((replica.metrics().get("fabriccap_foreign_writers") or 0) >= 1 for replica in pair.replicas.values())


def test_two_standalone_replicas_with_different_configs_settle(cluster: E2ECluster, tmp_path: Path) -> None:
    """Round 3 L16: two --standalone replicas by mistake, with different configs, wrote 4.7 status
    PATCHes a second forever. The war is detected, reported, and the writes stop."""
    other_env = {"efa": {"recommendedEnv": [{"name": "FI_PROVIDER", "value": "efa"}, {"name": "X", "value": "y"}]}}
    with replicas_of(
        cluster, tmp_path, lambda _: [Replica("standalone-a", None), Replica("standalone-b", None, other_env)]
    ) as pair:
        nodes = pair.world.add_pool("war", 2, efa=32)
        _wait_count(pair, "war", 32)
        _flip_ready_with_skew(pair, "war", nodes, "standalone-b")
        wait_until(lambda: _war_reported(pair), "the write war detected", timeout=60)
        time.sleep(5)
        writes = _quiet_minute_writes(pair)
        print(f"\ntwo --standalone replicas with two configs: FabricCapability writes in a quiet minute {writes}")
        assert sum(writes.values()) <= 1, writes
        logs = " ".join(replica.log() for replica in pair.replicas.values())
        assert "write war on FabricCapability" in logs
        events = pair.kube.list_objects("/api/v1/namespaces/default/events")
        assert any(event.get("reason") == "ForeignStatusWriter" for event in events)


def test_two_installs_in_two_namespaces_settle(cluster: E2ECluster, tmp_path: Path) -> None:
    """Round 3 L17: two Helm releases, each elected on its own Lease, wrote 4.7 status PATCHes a
    second forever once their rounds straddled a second. They settle."""
    with replicas_of(
        cluster,
        tmp_path,
        lambda namespace: [Replica("install-one", f"{namespace}-one"), Replica("install-two", f"{namespace}-two")],
    ) as pair:
        nodes = pair.world.add_pool("two", 2, efa=32)
        wait_until(
            lambda: all(_is_leader(replica) for replica in pair.replicas.values()),
            "each install to lead on its own Lease",
            timeout=LEASE_DURATION + 10,
        )
        _wait_count(pair, "two", 32)
        _flip_ready_with_skew(pair, "two", nodes, "install-two")
        time.sleep(5)
        writes = _quiet_minute_writes(pair)
        print(f"\ntwo installs in two namespaces: FabricCapability writes in a quiet minute {writes}")
        assert sum(writes.values()) <= 1, writes


def test_a_lease_held_by_a_stranger_is_visible_and_a_huge_duration_is_not_believed(pair: Pair) -> None:
    """Round 3 L15: a Lease edited to another holder with leaseDurationSeconds 2147483647.
    While the stranger renews, no replica publishes (fabriccap_publishing 0 on both); once it
    stops, a replica takes over after the bounded duration, not in 68 years."""
    pair.world.add_pool("lease", 1, efa=32)
    pair.leader()
    _wait_count(pair, "lease", 32)
    path = LEASES.item("fabriccap-leader", pair.world.namespace)

    def stranger_renews() -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        pair.kube.patch(
            path, {"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 2147483647, "renewTime": now}}
        )

    stranger_renews()
    for _ in range(10):  # the stranger keeps renewing for a while
        time.sleep(1.0)
        stranger_renews()
    published = [replica.metrics().get("fabriccap_publishing") for replica in pair.replicas.values()]
    leading = [replica.metrics().get("fabriccap_leader") for replica in pair.replicas.values()]
    assert published == [0.0, 0.0] and leading == [0.0, 0.0], (published, leading)
    stopped = time.monotonic()
    wait_until(
        lambda: any(_is_leader(replica) for replica in pair.replicas.values()),
        "a replica to take the stranger's Lease over",
        timeout=90,
    )
    taken = time.monotonic() - stopped
    print(f"\na stranger's Lease with a 68-year duration taken over {taken:.1f}s after its last renewal")


def test_two_shards_each_elect_and_write_only_their_own_pools(cluster: E2ECluster, tmp_path: Path) -> None:
    """``run --shard I --shards 2`` (docs/performance.md, "EKS ultra scale"): the pools split
    between two shards by the hash of their value, each shard leads on its own Lease, each
    object is written by its shard's replica alone, and emptying one shard's pool leaves the
    other shard's objects alone (neither takes the other's for objects no pool calls for)."""
    shards = [Shard(index=index, count=2) for index in range(2)]
    with replicas_of(
        cluster,
        tmp_path,
        lambda namespace: [Replica(f"shard-{shard.index}", namespace, shard=shard) for shard in shards],
    ) as pair:
        # Two pools of each shard: the world's prefix is random, so the labels are chosen for it.
        labels = {shard.index: [] for shard in shards}  # type: dict[int, list[str]]
        for candidate in (f"s{number}" for number in range(64)):
            owner = next(shard.index for shard in shards if shard.owns_value(pair.world.pool(candidate)))
            if len(labels[owner]) < 2:
                labels[owner].append(candidate)
        assert all(len(found) == 2 for found in labels.values()), labels
        # docs/gitops.md: the gate of a pool of shard 1 is declared in Git before the pool
        # exists, without pool annotations. Its pool's shard adopts it; shard 0 leaves it alone
        # (review 64-shard F1: shard 1 POSTed it on a 409 forever, and it never got a status).
        gated = labels[1][1]
        gate = pair.kube.create(
            FABRIC_CAPABILITIES.collection(),
            {
                "apiVersion": "fabriccap.dev/v1alpha1",
                "kind": "FabricCapability",
                "metadata": {
                    "name": pair.world.fcap_name(gated),
                    "annotations": {"argocd.argoproj.io/sync-wave": "-1"},
                },
                "spec": {},
            },
        )
        nodes = {label: pair.world.add_pool(label, 2, efa=32) for found in labels.values() for label in found}
        wait_until(
            lambda: all(_is_leader(replica) for replica in pair.replicas.values()),
            "each shard to lead on its own Lease",
            timeout=LEASE_DURATION + 10,
        )
        leases = {
            name: (pair.kube.get(LEASES.item(name, pair.world.namespace)) or {})
            .get("spec", {})
            .get("holderIdentity", "")
            for name in ("fabriccap-leader-0-of-2", "fabriccap-leader-1-of-2")
        }
        assert {name: holder.split("_")[0] for name, holder in leases.items()} == {
            "fabriccap-leader-0-of-2": "shard-0",
            "fabriccap-leader-1-of-2": "shard-1",
        }
        for label in nodes:
            _wait_count(pair, label, 32)
        adopted = pair.world.fcap(gated) or {}
        assert adopted["metadata"]["uid"] == gate["metadata"]["uid"], "adopted, not deleted and created again"
        assert adopted["metadata"]["labels"].get(READY_LABEL) == "true"
        assert adopted["metadata"]["annotations"].get(POOL_VALUE_ANNOTATION) == pair.world.pool(gated)
        # A change in a pool of shard 1 is published by shard 1.
        changed = labels[1][0]
        for node in nodes[changed]:
            pair.world.set_fabric(node, 16)
        _wait_count(pair, changed, 16)
        # A pool of shard 0 loses its nodes: shard 0 deletes its object after the grace period.
        emptied = labels[0][0]
        for node in nodes[emptied]:
            pair.world.delete_node(node)
        wait_until(lambda: pair.world.fcap(emptied) is None, f"{pair.world.fcap_name(emptied)} deleted", timeout=30)
        time.sleep(5)  # past another grace period: a shard that took the others' objects for its own would act
        owner_of = {pair.world.fcap_name(label): f"shard-{index}" for index, found in labels.items() for label in found}
        writes = [(user, name) for user, name in pair.fcap_writes_by_object() if name in owner_of]
        print(f"\ntwo shards: {len(writes)} FabricCapability writes, by shard {pair.fcap_writes()}")
        assert writes, "the audit log names the objects written"
        assert all(owner_of[name] == user for user, name in writes), writes
        assert {user for user, _ in writes} == {"shard-0", "shard-1"}
        for label in nodes:
            if label != emptied:
                assert pair.world.fcap(label) is not None, label
        # Each shard says which it is (the NoLeader alert asks for a leader per shard) and
        # exports its own pools only.
        for index, found in labels.items():
            exported = pair.replicas[f"shard-{index}"].metrics()
            assert exported.series("fabriccap_shard_info") == [{"shard": str(index), "shards": "2"}]
            for label in nodes:
                if label == emptied:
                    continue
                ready = exported.get("fabriccap_pool_ready", **_pool_labels(pair, label))
                assert (ready is not None) == (label in found), (index, label, ready)
