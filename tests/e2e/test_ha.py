"""Two replicas on one Lease (docs/install.md, "High availability"): one writes, the other takes over when
the leader dies, and a leader paused past its renew deadline writes nothing when it wakes.

Each replica authenticates as its own user, so the API server's audit log says who wrote
what: the proof that only the leader writes is the server's record, not the operator's word.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from fabriccap.kube.paths import NAMESPACES
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
        assert self.cluster.local is not None
        counts: dict[str, int] = {}
        for event in self.cluster.local.audit_events():
            resource = (event.get("objectRef") or {}).get("resource")
            if resource != "fabriccapabilities" or event.get("stage") != "ResponseComplete":
                continue
            received = datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))
            if since is not None and received < since:
                continue
            user = event["user"]["username"]
            if user in self.replicas:
                counts[user] = counts.get(user, 0) + 1
        return counts

    def report_sections(self) -> list[tuple[str, str]]:
        sections = []
        for replica in self.replicas.values():
            sections += replica.report_sections()
        return sections


def _is_leader(replica: OperatorProcess) -> bool:
    return replica.running and replica.metrics().get("fabriccap_leader") == 1.0


@pytest.fixture
def pair(cluster: E2ECluster, tmp_path: Path) -> Iterator[Pair]:
    if cluster.local is None:
        pytest.skip("the audit log is the local control plane's")
    kube = SyncKube(cluster.kubeconfig)
    namespace = f"fcap-ha-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    config = write_config(
        tmp_path / "config.yaml",
        {
            "debounceSeconds": 0.1,
            "poolGracePeriodSeconds": 3,
            "fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [namespace]}}],
        },
    )
    replicas = {
        name: OperatorProcess(
            kubeconfig=cluster.kubeconfig_for(name, ["system:masters"]),
            config=config,
            log_path=tmp_path / f"{name}.log",
            standalone=False,
            namespace=namespace,
            pod_name=name,
        )
        for name in ("replica-a", "replica-b")
    }
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
        kube.delete(NAMESPACES.item(namespace))
        kube.close()


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
    follower = next(name for name in pair.replicas if name != leader)
    follower_metrics = pair.replicas[follower].metrics()
    # The follower evaluates and exports the same answer, but never wrote.
    assert follower_metrics.get("fabriccap_pool_ready", **_pool_labels(pair, "ha")) == 1.0
    assert follower_metrics.get("fabriccap_status_writes_total", result="updated") == 0.0


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
    pair.replicas[leader].resume()
    # Awake, it sees its last renewal is older than the renew deadline: it must not write,
    # even though it still holds stale facts that disagree with what is published.
    wait_until(lambda: pair.replicas[leader].metrics().get("fabriccap_leader") == 0.0, "the old leader to step down")
    for node in nodes:
        pair.world.set_fabric(node, 2)
    _wait_count(pair, "stop", 2)
    time.sleep(2.0)  # a debounce window and more, for a late write to show up in the log
    after_stop = pair.fcap_writes(since=stopped_at)
    assert leader not in after_stop, after_stop
    assert after_stop.get(follower, 0) >= 2, after_stop
    assert _is_leader(pair.replicas[follower])
