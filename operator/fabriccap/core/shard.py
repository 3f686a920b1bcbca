"""Which pools a shard of the operator answers for (``fabriccap run --shard I --shards N``).

One process follows every pool up to the cluster sizes measured in docs/performance.md; past
them (EKS's 100,000 nodes), replicas split the pools the way kube-state-metrics splits objects:
shard ``I`` of ``N`` keeps the facts of, evaluates and publishes the pools whose value hashes
to ``I``, each shard elects its own leader on its own Lease, and the engine that keeps the
shards' replicas running is Kubernetes itself (one Deployment per shard).

The hash is over the pool's value alone, not its key: two pools of one value (``p5`` under
``eks.amazonaws.com/nodegroup`` and under ``karpenter.sh/nodepool``) compete for one
FabricCapability name (``core.names``), and only a shard that holds both can name them apart.
CRC-32 because every process, of any Python, must agree: ``hash()`` of a string changes with
each process (PYTHONHASHSEED). What belongs to no pool (nodes without a pool label, pods no
node took yet, objects whose name no pool computes) is shard 0's, so each is counted once. A
FabricCapability is the shard's whose pool computes its name (``Shard.owns_object``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fabriccap.core.facts import Pool
from fabriccap.core.names import hashed_name, looks_hashed, readable_value

# More shards than this is a typo (--shards 1000): each is a Deployment with its own watches
# of every Node and Pod, so the API server's cost grows with the count.
MAX_SHARDS = 64


class Shard(BaseModel):
    """Shard ``index`` of ``count``; the default, 0 of 1, answers for every pool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int = Field(default=0, ge=0)
    count: int = Field(default=1, ge=1, le=MAX_SHARDS)

    @model_validator(mode="after")
    def _index_in_range(self) -> Shard:
        if self.index >= self.count:
            raise ValueError(f"shard {self.index} does not exist: shards are numbered 0 to {self.count - 1}")
        return self

    @property
    def sharded(self) -> bool:
        return self.count > 1

    @property
    def keeps_unpooled(self) -> bool:
        """Whether this shard answers for what belongs to no pool."""
        return self.index == 0

    def owns_value(self, pool_value: str) -> bool:
        return not self.sharded or zlib.crc32(pool_value.encode("utf-8", "surrogateescape")) % self.count == self.index

    def owns(self, pool: Pool | None) -> bool:
        return self.keeps_unpooled if pool is None else self.owns_value(pool.value)

    def owns_object(
        self,
        name: str,
        claimed: Pool | None,
        fabrics: Sequence[str],
        pool_computing: Callable[[str], Pool | None],
    ) -> bool:
        """Whether the FabricCapability ``name``, whose pool annotations claim ``claimed``, is
        this shard's to hold: the one rule of which shard answers for an object.

        The shard of the pool that computes its name, whatever its annotations say: only that
        shard evaluates the pool, so only it can adopt the object, repair its annotations, or
        call the name in conflict, as an unsharded operator does (a gate declared in Git has no
        annotations, and an edit may strip them; review 64-shard F1, F2). A readable name says
        its pool's value, so its shard. A hashed one is looked up among the cluster's pools
        (``pool_computing``: every shard sees every node's pool label; asked only for a hashed
        name its annotations do not explain). A name no pool computes goes by its annotations,
        and one without them is shard 0's (``owns``): the one shard that holds it expires it.
        """
        if not self.sharded:
            return True
        value = readable_value(name, fabrics)
        if value is not None:
            return self.owns_value(value)
        named = [fabric for fabric in fabrics if name.startswith(f"{fabric}-")]
        if looks_hashed(name) and (claimed is None or name not in hashed_names(claimed, named)):
            computing = pool_computing(name)
            return self.owns(claimed if computing is None else computing)
        return self.owns(claimed)

    def __str__(self) -> str:
        return f"shard {self.index} of {self.count}" if self.sharded else "unsharded"


UNSHARDED = Shard()


def hashed_names(pool: Pool, fabrics: Iterable[str]) -> set[str]:
    """The hashed name ``pool`` computes under each of ``fabrics``: whether a pool computes a
    hashed name, for ``Shard.owns_object`` and for its lookup (``HashedNames``)."""
    return {hashed_name(fabric, pool.key, pool.value) for fabric in fabrics}


class HashedNames:
    """Which of a set of pools computes each hashed name, under ``fabrics``: ``Shard.owns_object``'s
    lookup. Kept as pools come and go (``add``, ``discard``), so a lookup is one dict read: it was
    one SHA-256 per pool of the cluster on every call, 30 ms at 5,000 pools, and a read-back of
    100 such objects blocked the loop (and the Lease's renewal) for 6 s (review 64a F1)."""

    def __init__(self, fabrics: Iterable[str], pools: Iterable[Pool]) -> None:
        self.fabrics = tuple(fabrics)
        self._pools: dict[str, Pool] = {}
        for pool in pools:
            self.add(pool)

    def add(self, pool: Pool) -> None:
        # No two pools compute one name: the digest is over the fabric, key and value (core.names).
        self._pools.update(dict.fromkeys(hashed_names(pool, self.fabrics), pool))

    def discard(self, pool: Pool) -> None:
        for name in hashed_names(pool, self.fabrics):
            self._pools.pop(name, None)

    def pool_computing(self, name: str) -> Pool | None:
        return self._pools.get(name)
