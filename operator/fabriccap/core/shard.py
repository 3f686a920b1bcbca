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
node took yet, objects made by hand) is shard 0's, so each is counted once.
"""

from __future__ import annotations

import zlib

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fabriccap.core.facts import Pool

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

    def __str__(self) -> str:
        return f"shard {self.index} of {self.count}" if self.sharded else "unsharded"


UNSHARDED = Shard()
