"""core.shard: which pools a shard answers for."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
from pydantic import ValidationError

from fabriccap.core.facts import Pool
from fabriccap.core.names import hashed_name
from fabriccap.core.shard import MAX_SHARDS, UNSHARDED, HashedNames, Shard

NODEGROUP = "eks.amazonaws.com/nodegroup"
NODEPOOL = "karpenter.sh/nodepool"
VALUES = [f"p5-{number}" for number in range(2000)]
# Which of 4 shards a pool value is (CRC-32 of its UTF-8, modulo 4): a change here moves pools
# between the shards of a running install.
PINNED = {"trn2": [0], "p5-training": [1], "p5en": [2], "p5e": [3]}


def test_unsharded_answers_for_every_pool_and_for_what_has_none() -> None:
    assert Shard(index=0, count=1) == UNSHARDED
    assert not UNSHARDED.sharded
    assert all(UNSHARDED.owns(Pool(NODEGROUP, value)) for value in VALUES[:50])
    assert UNSHARDED.owns(None)


@pytest.mark.parametrize("count", [2, 3, 4, 7])
def test_shards_split_the_pools_between_them_each_once_and_evenly(count: int) -> None:
    shards = [Shard(index=index, count=count) for index in range(count)]
    owners = [[shard.index for shard in shards if shard.owns(Pool(NODEGROUP, value))] for value in VALUES]
    assert all(len(found) == 1 for found in owners), "each pool has exactly one shard"
    share = Counter(found[0] for found in owners)
    expected = len(VALUES) / count
    assert all(abs(share[index] - expected) < 0.2 * expected for index in range(count)), share


def test_pools_of_one_value_under_two_keys_are_one_shards() -> None:
    # They compete for one object name (core.names): only a shard that holds both names them apart.
    for count in (2, 5):
        for index in range(count):
            shard = Shard(index=index, count=count)
            assert all(shard.owns(Pool(NODEGROUP, value)) == shard.owns(Pool(NODEPOOL, value)) for value in VALUES)


def test_what_belongs_to_no_pool_is_shard_zeros() -> None:
    assert Shard(index=0, count=3).owns(None)
    assert not Shard(index=1, count=3).owns(None)
    assert not Shard(index=2, count=3).owns(None)


def test_the_split_is_the_same_in_every_process_and_every_release() -> None:
    # Replicas of one shard, and shards of two releases during a rollout, must agree on every
    # pool; Python's own hash() of a string changes with each process.
    shards = [Shard(index=index, count=4) for index in range(4)]
    pinned = {value: [shard.index for shard in shards if shard.owns_value(value)] for value in PINNED}
    assert pinned == PINNED
    script = "from fabriccap.core.shard import Shard; print([Shard(index=0, count=4).owns_value(v) for v in %r])"
    other = subprocess.run(
        [sys.executable, "-c", script % (VALUES[:200],)],
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    assert other.stdout.strip() == str([Shard(index=0, count=4).owns_value(value) for value in VALUES[:200]])


@pytest.mark.parametrize(
    ("index", "count", "problem"),
    [
        (2, 2, "shard 2 does not exist: shards are numbered 0 to 1"),
        (-1, 2, "greater than or equal to 0"),
        (0, 0, "greater than or equal to 1"),
        (0, MAX_SHARDS + 1, f"less than or equal to {MAX_SHARDS}"),
    ],
)
def test_a_shard_that_cannot_be_is_refused_saying_why(index: int, count: int, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Shard(index=index, count=count)


def test_a_shard_says_which_it_is() -> None:
    assert str(Shard(index=1, count=4)) == "shard 1 of 4"
    assert str(UNSHARDED) == "unsharded"


# -- which shard a FabricCapability is for (review 64-shard F1, F2)

FABRICS = ["efa", "ib"]
SECOND_OF_TWO = Shard(index=1, count=2)
SECONDS = next(value for value in VALUES if SECOND_OF_TWO.owns_value(value))
FIRSTS = next(value for value in VALUES if not SECOND_OF_TWO.owns_value(value))


def holders(name: str, claimed: Pool | None, pools: list[Pool] | None = None) -> list[int]:
    shards = [Shard(index=index, count=2) for index in range(2)]
    lookup = HashedNames(FABRICS, pools or []).pool_computing
    return [shard.index for shard in shards if shard.owns_object(name, claimed, FABRICS, lookup)]


def test_an_object_is_the_shard_whose_pool_computes_its_name_whatever_its_annotations_say() -> None:
    # A gate declared in Git: no annotations, the readable name of a pool of shard 1.
    assert holders(f"efa-{SECONDS}", None) == [1]
    # Annotations that name a pool of shard 0 (an edit, a restore): the name still decides.
    assert holders(f"efa-{SECONDS}", Pool(NODEGROUP, FIRSTS)) == [1]
    assert holders(f"efa-{FIRSTS}", Pool(NODEGROUP, SECONDS)) == [0]
    assert UNSHARDED.owns_object(f"efa-{SECONDS}", Pool(NODEGROUP, FIRSTS), FABRICS, lambda name: None)


def test_a_hashed_name_is_looked_up_among_the_clusters_pools_and_only_when_needed() -> None:
    # Not a DNS label: its name is hashed, and says nothing of its value.
    pool = next(Pool(NODEGROUP, value.upper()) for value in VALUES if SECOND_OF_TWO.owns_value(value.upper()))
    name = hashed_name("efa", pool.key, pool.value)
    asked: list[str] = []

    def pool_computing(hashed: str) -> Pool | None:
        asked.append(hashed)
        return pool

    # Its annotations explain it: the cluster's pools are not even asked for.
    assert SECOND_OF_TWO.owns_object(name, pool, FABRICS, pool_computing) and asked == []
    # Without annotations (a gate in Git, or stripped), the pool among the cluster's that
    # computes the name says whose it is: every shard sees every node's pool label.
    assert holders(name, None, [Pool(NODEGROUP, "other"), pool]) == [1]
    # A name no pool computes: its annotations, else shard 0 (which expires it if it is managed).
    assert holders(name, None, [Pool(NODEGROUP, "other")]) == [0]
    assert holders("not-a-fabric-name", Pool(NODEGROUP, SECONDS)) == [1]
    assert holders("not-a-fabric-name", None) == [0]


def test_the_lookup_of_hashed_names_follows_the_pools_as_they_come_and_go() -> None:
    pool, other = Pool(NODEGROUP, "P5_Training"), Pool(NODEPOOL, "P5_Training")
    names = HashedNames(FABRICS, [pool])
    assert [names.pool_computing(hashed_name(fabric, pool.key, pool.value)) for fabric in FABRICS] == [pool, pool]
    # Same value, another key: another name, another pool.
    assert names.pool_computing(hashed_name("efa", other.key, other.value)) is None
    names.add(other)
    assert names.pool_computing(hashed_name("efa", other.key, other.value)) == other
    names.discard(pool)
    assert names.pool_computing(hashed_name("efa", pool.key, pool.value)) is None
    assert names.pool_computing(hashed_name("ib", other.key, other.value)) == other
