"""The publisher and Karpenter NodePools (issue 22 merged with the publisher's object records):
an empty NodePool's pool is called for, so its object is neither emptied nor expired; a pool with
no NodePool and no node is emptied at once and deleted after the grace period; stale NodePools
fail closed; a renamed pool's old object is deleted at once through the expiry lane."""

from __future__ import annotations

from dataclasses import dataclass, field

from fabriccap.core.api import condition_reason, condition_status
from fabriccap.kube.kinds import BY_KIND
from fabriccap_devtools.world import ec2_node_class, node_pool
from support.publishing import GRACE, Setup, healthy, publishing, start

TYPE = "node.kubernetes.io/instance-type"
P5 = [{"key": TYPE, "operator": "In", "values": ["p5.48xlarge"]}]
STALE_AFTER = 30.0


@dataclass
class Freshness:
    """The informers' freshness as the publisher reads it: kind label -> seconds since last heard."""

    stale_after: float = STALE_AFTER
    ages_now: dict[str, float | None] = field(
        default_factory=lambda: {"node": 1.0, "pod": 1.0, "daemonset": 1.0, "nodepool": 1.0}
    )

    def ages(self) -> dict[str, float | None]:
        return dict(self.ages_now)

    def stale_kinds(self) -> dict[str, float | None]:
        return {kind: age for kind, age in self.ages_now.items() if age is None or age > self.stale_after}


def ready(setup: Setup, name: str) -> tuple[str | None, str | None]:
    status = setup.published()[name]["status"]
    return condition_status(status, "Ready"), condition_reason(status, "Ready")


async def test_an_empty_nodepools_object_stays_ready_from_the_catalog_past_the_grace_period() -> None:
    async with publishing() as setup:
        setup.add([node_pool("gpu", P5), ec2_node_class()])
        await start(setup)
        assert ready(setup, "efa-gpu") == ("True", "UniformCapability")
        assert setup.published()["efa-gpu"]["status"]["nodes"] == 0
        for _ in range(3):
            setup.clock.now += GRACE + 1
            setup.store.mark_all()
            await setup.publisher.reconcile_once()
        assert ready(setup, "efa-gpu") == ("True", "UniformCapability")
        assert setup.api.writes("DELETE") == []
        assert setup.publisher.objects["efa-gpu"].absent_since is None


async def test_a_nodepool_deleted_with_no_nodes_left_is_emptied_at_once_then_deleted_after_grace() -> None:
    pool = node_pool("gpu", P5)
    async with publishing() as setup:
        setup.add([pool, ec2_node_class()])
        await start(setup)
        assert ready(setup, "efa-gpu") == ("True", "UniformCapability")
        BY_KIND["NodePool"].delete(setup.store, pool)
        await setup.publisher.reconcile_once()
        assert ready(setup, "efa-gpu") == ("False", "NoTargetNodes")
        assert "launchable" not in setup.published()["efa-gpu"]["status"]
        setup.clock.now += GRACE + 1
        setup.store.changed.set()
        await setup.publisher.reconcile_once()
        assert "efa-gpu" not in setup.published()
        assert len(setup.api.writes("DELETE")) == 1


async def test_stale_nodepools_make_an_empty_nodepools_object_data_unavailable() -> None:
    async with publishing(staleAfterSeconds=STALE_AFTER) as setup:
        freshness = Freshness()
        setup.publisher.freshness = freshness
        setup.add([node_pool("gpu", P5), ec2_node_class(), *healthy("p5", "a")])
        await start(setup)
        assert ready(setup, "efa-gpu") == ("True", "UniformCapability")
        freshness.ages_now["nodepool"] = STALE_AFTER + 10  # NodePools list/watch revoked
        await setup.publisher.reconcile_once()
        assert ready(setup, "efa-gpu") == ("False", "DataUnavailable")
        message = str(
            next(c for c in setup.published()["efa-gpu"]["status"]["conditions"] if c["type"] == "Ready")["message"]
        )
        assert "NodePools" in message
        assert "recommendation" not in setup.published()["efa-gpu"]["status"]
        # Not emptied, not expiring: the pool is still called for, its data is what is unread.
        setup.clock.now += GRACE + 1
        await setup.publisher.reconcile_once()
        assert ready(setup, "efa-gpu") == ("False", "DataUnavailable")
        assert setup.api.writes("DELETE") == []
