"""A shard of the operator (``run --shard I --shards N``): its informers and its publisher keep
to its own pools, and a node that moves into them brings its pods with a fresh LIST."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from fabriccap.core.api import POOL_VALUE_ANNOTATION
from fabriccap.core.shard import Shard
from fabriccap_devtools.world import workload_pod
from support.builders import NODEGROUP, node
from support.configs import build_config
from support.fakeapi import WAIT_SECONDS, event, eventually
from support.informing import ALL_PODS, NODES, operator
from support.publishing import FCAPS, GRACE, healthy, publishing, start

FIRST, SECOND = Shard(index=0, count=2), Shard(index=1, count=2)
VALUES = [f"p5-{number}" for number in range(40)]
OURS = [value for value in VALUES if FIRST.owns_value(value)][:2]
THEIRS = [value for value in VALUES if SECOND.owns_value(value)][:2]
WORKLOADS = build_config({"workloads": {"enabled": True}, "karpenter": {"enabled": False}})


def pod_lists(api: Any) -> int:
    return len(api.lists(ALL_PODS)) + len(api.streaming_list_requests(ALL_PODS))


async def test_a_node_moved_into_the_shard_brings_its_pods_with_one_more_list() -> None:
    def setup(api: Any) -> None:
        api.serve(ALL_PODS, "Pod", [workload_pod("n-ours", "w-ours"), workload_pod("n-theirs", "w-theirs")], "60")

    nodes = [node("n-ours", pool=OURS[0]), node("n-theirs", pool=THEIRS[0])]
    async with operator(nodes, setup=setup, config=WORKLOADS, shard=FIRST) as op:
        await asyncio.wait_for(asyncio.gather(*(i.listed.wait() for i in op.informers)), WAIT_SECONDS)
        await eventually(lambda: set(op.store.workload_pods) == {("ml", "w-ours")}, "only its own pods")
        assert set(op.store.nodes) == {"n-ours"}
        listed = pod_lists(op.api)
        # A node of the other shard changes, staying there: nothing is listed again.
        await op.api.emit(NODES, event("MODIFIED", node("n-theirs", pool=THEIRS[1], efa=16), "101"))
        await eventually(lambda: op.nodes.version == "101", "the node event read")
        # Relabelled into this shard's pool: it joins, and the pods bound to it come with a LIST.
        await op.api.emit(NODES, event("MODIFIED", node("n-theirs", pool=OURS[1]), "102"))
        await eventually(lambda: ("ml", "w-theirs") in op.store.workload_pods, "the joined node's pod")
        assert pod_lists(op.api) == listed + 1
        assert set(op.store.nodes) == {"n-ours", "n-theirs"}


async def test_an_unsharded_operator_never_lists_pods_again_for_a_moved_node() -> None:
    def setup(api: Any) -> None:
        api.serve(ALL_PODS, "Pod", [workload_pod("n-theirs", "w-theirs")], "60")

    async with operator([node("n-theirs", pool=THEIRS[0])], setup=setup, config=WORKLOADS) as op:
        await asyncio.wait_for(asyncio.gather(*(i.listed.wait() for i in op.informers)), WAIT_SECONDS)
        listed = pod_lists(op.api)
        await op.api.emit(NODES, event("MODIFIED", node("n-theirs", pool=OURS[0]), "102"))
        await eventually(lambda: op.store.nodes["n-theirs"].pool == (NODEGROUP, OURS[0]), "the move")
        await asyncio.sleep(0.1)
        assert pod_lists(op.api) == listed and ("ml", "w-theirs") in op.store.workload_pods


async def test_two_shards_publish_disjoint_halves_and_neither_touches_the_others_objects() -> None:
    world = [body for value in OURS + THEIRS for body in healthy(value, f"{value}-a", f"{value}-b")]
    # What one unsharded operator publishes for the whole world.
    async with publishing() as whole:
        whole.add(world)
        await start(whole)
        everything = copy.deepcopy(whole.published())
    assert sorted(everything) == sorted(f"efa-{value}" for value in OURS + THEIRS)
    # Shard 0 comes up where the other shard's objects exist already; it sees the whole world.
    theirs = [obj for obj in everything.values() if obj["metadata"]["annotations"][POOL_VALUE_ANNOTATION] in THEIRS]
    async with publishing(theirs, shard=FIRST) as setup:
        setup.add(world)
        await start(setup)
        for _ in range(3):
            setup.clock.now += GRACE + 1
            setup.store.mark_all()
            await setup.publisher.reconcile_once()
        published = setup.published()
        assert sorted(published) == sorted(f"efa-{value}" for value in OURS + THEIRS)
        touched = {
            path.removesuffix("/status").rsplit("/", 1)[-1]
            for method, path, _, _ in setup.api.requests
            if method in ("PUT", "PATCH", "DELETE") and path.startswith(FCAPS)
        } | {body["metadata"]["name"] for _, _, body in setup.api.writes("POST")}
        assert touched == {f"efa-{value}" for value in OURS}, "writes only its own pools' objects"
        assert set(setup.publisher.objects) == {f"efa-{value}" for value in OURS}, "holds nothing of the others"
        for value in OURS + THEIRS:  # each shard's answer is the unsharded one
            assert (
                published[f"efa-{value}"]["status"]["uniformCount"]
                == everything[f"efa-{value}"]["status"]["uniformCount"]
                == 32
            )
            assert published[f"efa-{value}"]["status"]["nodes"] == 2
