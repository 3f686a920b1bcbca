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
        pools: Callable[[], Iterable[Pool]],
    ) -> bool:
        """Whether the FabricCapability ``name``, whose pool annotations claim ``claimed``, is
        this shard's to hold: the one rule of which shard answers for an object.

        The shard of the pool that computes its name, whatever its annotations say: only that
        shard evaluates the pool, so only it can adopt the object, repair its annotations, or
        call the name in conflict, as an unsharded operator does (a gate declared in Git has no
        annotations, and an edit may strip them; review 64-shard F1, F2). A readable name says
        its pool's value, so its shard. A hashed one is looked for among the cluster's
        ``pools`` (every shard sees every node's pool label; asked only for a hashed name its
        annotations do not explain). A name no pool computes goes by its annotations, and one
        without them is shard 0's (``owns``): the one shard that holds it expires it.
        """
        if not self.sharded:
            return True
        value = readable_value(name, fabrics)
        if value is not None:
            return self.owns_value(value)
        if looks_hashed(name):
            named = [fabric for fabric in fabrics if name.startswith(f"{fabric}-")]

            def computes(pool: Pool) -> bool:
                return any(hashed_name(fabric, pool.key, pool.value) == name for fabric in named)

            if claimed is None or not computes(claimed):
                return self.owns(next((pool for pool in pools() if computes(pool)), claimed))
        return self.owns(claimed)

    def __str__(self) -> str:
        return f"shard {self.index} of {self.count}" if self.sharded else "unsharded"


UNSHARDED = Shard()
