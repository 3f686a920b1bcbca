"""The operator's evaluation memo never changes an answer: after any sequence of changes to
the facts, evaluating some pools with the memo gives exactly what evaluating them afresh gives.

Random but seeded sequences of the changes the watches make (nodes, the providers' DaemonSets
and pods, ResourceSlices, workload pods) and the lookups' answers (owners, claims), with a
round after each that evaluates a random subset of the pools, as the operator does with its
dirty pools: a pool skipped for a while must not come back stale.

Names are a function of every pool published, so one pool's change can rename another the
round does not evaluate: with node groups and Karpenter NodePools of the same values, the names
the rounds publish must stay those a fresh evaluation of every pool gives.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest

from fabriccap.core.config import Config
from fabriccap.core.evaluate import Evaluation, EvaluationMemo, evaluate
from fabriccap.core.facts import ClaimRef, FactsExtractor, ObjectRef, Pool
from fabriccap.core.index import FactIndex
from fabriccap.kube.kinds import BY_KIND
from fabriccap_devtools.world import DRANET_DS, KARPENTER, NODEGROUP, owner_reference, workload_pod
from support.builders import daemon_set, dranet_daemon_set, node, pod, resource_slice
from support.configs import build_config

NODES = [f"n{number}" for number in range(8)]
POOLS = ["p1", "p2", "p3"]
OWNERS = ["bert", "gpt", "llama"]
STEPS = 250


def answer(evaluation: Evaluation) -> dict[str, Any]:
    return {
        "capabilities": [(c.name, c.status.to_json()) for c in evaluation.capabilities],
        "absent": sorted(evaluation.absent),
        "events": sorted((e.key, e.message) for e in evaluation.workload_events),
        "lookups": sorted(evaluation.lookups),
        "unpooled": evaluation.unpooled_nodes,
    }


class World:
    def __init__(self, config: Config, rng: random.Random, pool_keys: tuple[str, ...] = (NODEGROUP,)) -> None:
        self.config, self.rng, self.pool_keys = config, rng, pool_keys
        self.index = FactIndex()
        self.extractor = FactsExtractor(config)
        self.workloads: dict[str, str | None] = {}  # pod name -> node

    def upsert(self, body: Mapping[str, Any]) -> None:
        BY_KIND[str(body["kind"])].upsert(self.index, self.extractor, body)

    def delete(self, body: Mapping[str, Any]) -> None:
        BY_KIND[str(body["kind"])].delete(self.index, body)

    def step(self) -> None:
        rng, name = self.rng, self.rng.choice(NODES)
        choice = rng.randrange(10)
        if choice == 0:
            self.upsert(
                node(
                    name,
                    pool=rng.choice([*POOLS, None]),
                    pool_key=rng.choice(self.pool_keys),
                    efa=rng.choice([None, 0, 16, 32]),
                    gpu=rng.choice([0, 8]),
                    instance_type=rng.choice(["p5.48xlarge", "m5.large"]),  # m5: not a target without devices
                    cordoned=rng.random() < 0.2,
                )
            )
        elif choice == 1:
            self.delete(node(name))
        elif choice == 2:
            plugin = pod(name, ready=rng.random() < 0.7)
            self.upsert(plugin) if rng.random() < 0.7 else self.delete(plugin)
        elif choice == 3:
            driver = pod(name, daemon_set_name=DRANET_DS, labels={"app": DRANET_DS}, ready=rng.random() < 0.8)
            self.upsert(driver) if rng.random() < 0.7 else self.delete(driver)
        elif choice == 4:
            found = resource_slice(name, efa=rng.choice([16, 32]), slice_count=rng.choice([1, 1, 2]))
            self.upsert(found) if rng.random() < 0.7 else self.delete(found)
        elif choice == 5:
            provider = rng.choice([daemon_set(), dranet_daemon_set()])
            self.upsert(provider) if rng.random() < 0.8 else self.delete(provider)
        elif choice in (6, 7):
            self._workload(rng.choice([*NODES, None]))
        elif choice == 8:
            owner = rng.choice(OWNERS)
            parent = ObjectRef("trainer.kubeflow.org/v1alpha1", "TrainJob", "ml", f"{owner}-trainjob")
            self.index.learn_owner(("Job.batch", "ml", f"{owner}-job"), rng.choice([parent, None]))
        else:
            claim = ClaimRef("ResourceClaimTemplate", "ml", rng.choice(OWNERS))
            self.index.learn_claim(claim, (("req", rng.sample(["efa.networking.k8s.aws", "gpu.nvidia.com"], k=1)[0]),))

    def _workload(self, node_name: str | None) -> None:
        rng = self.rng
        pod_name = f"w{rng.randrange(12)}"
        if pod_name in self.workloads and rng.random() < 0.3:
            self.delete(workload_pod(self.workloads.pop(pod_name), pod_name))
            return
        owner = rng.choice(OWNERS)
        claims = [{"name": "efa", "resourceClaimTemplateName": owner}] if rng.random() < 0.2 else []
        self.upsert(
            workload_pod(
                node_name,
                pod_name,
                gpu=rng.choice([0, 8]),
                efa=rng.choice([None, 32]),
                owner=owner_reference("Job", "batch/v1", f"{owner}-job"),
                env={"FI_PROVIDER": "efa"} if rng.random() < 0.3 else None,
                claims=claims,
            )
        )
        self.workloads[pod_name] = node_name


@pytest.mark.parametrize("seed", range(6))
def test_rounds_with_the_memo_answer_what_a_fresh_evaluation_answers(seed: int) -> None:
    rng = random.Random(seed)
    config = build_config({})
    world = World(config, rng)
    memo = EvaluationMemo()
    reused = 0
    for _ in range(STEPS):
        world.step()
        pools = [Pool(NODEGROUP, value) for value in POOLS if rng.random() < 0.6]
        before = {key: id(entry) for key, entry in memo.pools.items()}
        remembered = answer(evaluate(config, world.index, pools, memo=memo))
        reused += sum(1 for key, entry in memo.pools.items() if before.get(key) == id(entry))
        assert remembered == answer(evaluate(config, world.index, pools))
        # A pool without target nodes keeps no pods' judgements.
        assert all(entry.judgements == {} for entry in memo.pools.values() if not entry.targets)
    assert reused > 0  # the memo was used, not rebuilt every round


@pytest.mark.parametrize("seed", range(6))
def test_the_names_published_follow_pools_that_collide_and_part(seed: int) -> None:
    rng = random.Random(seed)
    config = build_config({})
    world = World(config, rng, pool_keys=(NODEGROUP, NODEGROUP, KARPENTER))
    memo = EvaluationMemo()
    shown: dict[tuple[str, Pool], str] = {}  # what a publisher of the rounds' answers shows
    seen_versions: dict[Pool, int] = {}
    providers = world.index.provider_version
    collisions = renames = 0
    for _ in range(STEPS):
        world.step()
        # The operator's dirty pools (those whose facts moved; all when the providers did),
        # and a few others.
        versions = dict(world.index.pool_versions)
        everything = world.index.provider_version != providers
        providers = world.index.provider_version
        dirty = {
            pool for pool in versions.keys() | seen_versions.keys() if versions.get(pool) != seen_versions.get(pool)
        }
        seen_versions = versions
        every_pool = sorted(set(world.index.pools()) | dirty)
        pools = every_pool if everything else [p for p in every_pool if p in dirty or rng.random() < 0.2]
        if rng.random() < 0.5:  # the debounce window's sample, which is not published
            evaluate(config, world.index, [p for p in pools if rng.random() < 0.7], memo=memo, preview=True)
        evaluation = evaluate(config, world.index, pools, memo=memo)
        for capability in (*evaluation.emptied, *evaluation.capabilities):
            shown.pop((capability.fabric, capability.pool), None)
        for capability in evaluation.capabilities:
            shown[(capability.fabric, capability.pool)] = capability.name
        renames += len(evaluation.renamed)
        fresh = evaluate(config, world.index)
        expected = {(capability.fabric, capability.pool): capability.name for capability in fresh.capabilities}
        assert shown == expected
        collisions += any(capability.status.naming is not None for capability in fresh.capabilities)
    assert collisions > 0 and renames > 0  # pools came to share a name, and to part again


def test_a_rename_a_preview_sees_is_still_published_by_the_next_round() -> None:
    """The CI failure of stop 36: the debounce window's sample saw a node group collide with a
    Karpenter pool and recorded the new names, so the round after it found nothing renamed
    and the Karpenter pool kept its readable name beside the node group's hashed one."""
    config = build_config({})
    world = World(config, random.Random(0))
    world.upsert(daemon_set())
    world.upsert(node("k0", pool="foo", pool_key=KARPENTER, efa=32))
    world.upsert(pod("k0"))
    memo = EvaluationMemo()
    karpenter, group = Pool(KARPENTER, "foo"), Pool(NODEGROUP, "foo")
    (readable,) = evaluate(config, world.index, [karpenter], memo=memo).capabilities
    assert readable.name == "efa-foo"
    world.upsert(node("g0", pool="foo", pool_key=NODEGROUP, efa=32))
    world.upsert(pod("g0"))
    evaluate(config, world.index, [group], memo=memo, preview=True)
    evaluation = evaluate(config, world.index, [group], memo=memo)
    names = {capability.pool: capability.name for capability in evaluation.capabilities}
    assert set(names) == {karpenter, group}  # the pool not evaluated is published under its new name
    assert "efa-foo" not in names.values() and names[karpenter] != names[group]
    assert evaluation.renamed == {"efa-foo"}  # and its old object goes
    assert evaluate(config, world.index, [group], memo=memo).renamed == frozenset()  # once


def test_a_pool_whose_only_change_is_a_pod_reuses_its_node_side_and_the_other_pods() -> None:
    config = build_config({})
    world = World(config, random.Random(0))
    for name in ("a", "b"):
        world.upsert(node(name, pool="p1", efa=32))
        world.upsert(pod(name))
    world.upsert(daemon_set())
    world.upsert(workload_pod("a", "first", efa=32))
    memo = EvaluationMemo()
    pool = Pool(NODEGROUP, "p1")
    evaluate(config, world.index, [pool], memo=memo)
    (side,) = memo.pools.values()
    first_judgement = side.judgements[("ml", "first")]
    world.upsert(workload_pod("b", "second", efa=None))
    evaluation = evaluate(config, world.index, [pool], memo=memo)
    assert memo.pools[("efa", pool)] is side  # the node-side status was not computed again
    assert side.judgements[("ml", "first")] is first_judgement  # nor the pod that did not change
    workloads = evaluation.capabilities[0].status.workloads
    assert workloads is not None
    assert (workloads.requesting_fabric.pods, workloads.without_fabric.pods) == (1, 1)
    world.upsert(node("b", pool="p1", efa=16))  # a node changes: the node side is new
    evaluate(config, world.index, [pool], memo=memo)
    assert memo.pools[("efa", pool)] is not side


def test_a_pool_that_is_gone_leaves_nothing_in_the_memo() -> None:
    config = build_config({})
    world = World(config, random.Random(0))
    world.upsert(node("a", pool="p1", efa=32))
    memo = EvaluationMemo()
    pool = Pool(NODEGROUP, "p1")
    evaluate(config, world.index, [pool], memo=memo)
    assert list(memo.pools) == [("efa", pool)]
    world.delete(node("a"))
    assert evaluate(config, world.index, [pool], memo=memo).absent == {"efa-p1"}
    assert memo.pools == {} and world.index.pool_versions == {}


def test_problems_already_warned_build_no_event() -> None:
    config = build_config({})
    world = World(config, random.Random(0))
    world.upsert(node("a", pool="p1", efa=32))
    world.upsert(pod("a"))
    world.upsert(daemon_set())
    for owner in ("bert", "gpt"):
        world.upsert(workload_pod("a", f"{owner}-0", efa=None, owner=owner_reference("Job", "batch/v1", owner)))
    everything = evaluate(config, world.index)
    assert len(everything.workload_events) == 2
    first = everything.workload_events[0].key
    rest = evaluate(config, world.index, warned=lambda key: key == first)
    assert [event.key for event in rest.workload_events] == [everything.workload_events[1].key]


def test_a_preview_builds_no_event_and_its_round_still_does() -> None:
    """A preview is never published, so the Events of its problems are never sent: building
    them (a status model each) was waste, and the round after it still builds them."""
    config = build_config({})
    world = World(config, random.Random(0))
    world.upsert(node("a", pool="p1", efa=32))
    world.upsert(pod("a"))
    world.upsert(daemon_set())
    world.upsert(workload_pod("a", "bert-0", efa=None, owner=owner_reference("Job", "batch/v1", "bert")))
    memo = EvaluationMemo()
    preview = evaluate(config, world.index, memo=memo, preview=True)
    assert preview.capabilities and preview.workload_events == ()
    assert [event.involved.name for event in evaluate(config, world.index, memo=memo).workload_events] == ["bert"]


def test_a_pool_that_loses_its_target_nodes_keeps_no_judgements() -> None:
    config = build_config({})
    world = World(config, random.Random(0))
    world.upsert(node("a", pool="p1", efa=32))
    world.upsert(workload_pod("a", "first", efa=32))
    memo = EvaluationMemo()
    pool = Pool(NODEGROUP, "p1")
    evaluate(config, world.index, [pool], memo=memo)
    assert list(memo.pools[("efa", pool)].judgements) == [("ml", "first")]
    world.upsert(node("a", pool="p1", efa=None, gpu=0, instance_type="m5.large"))  # a CPU node now
    assert evaluate(config, world.index, [pool], memo=memo).absent == {"efa-p1"}
    assert memo.pools[("efa", pool)].judgements == {}
