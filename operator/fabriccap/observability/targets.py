"""What a scrape of the operator's replicas puts on their series: the one place the alert rules
and the dashboard take it from (neither may import the other: pyproject's layers)."""

from __future__ import annotations

# Pool series are exported by every replica of the operator, each with its own `instance`
# (and `pod`, under the Prometheus Operator). Pool alerts and panels aggregate those away: two
# replicas count once, and an operator restart (a new pod IP) does not reset a pool alert's
# `for:`. Sharded, the targets also carry `shard` (the chart's ServiceMonitor): a change of the
# shard count moves a pool to another shard, and that must not reset its `for:` either.
PER_POOL = "max without (instance, pod, shard)"
# The pod label the chart puts on every replica of a shard, and the target label the chart's
# ServiceMonitor (and the relabeling in docs/observability.md) makes of it.
SHARD_POD_LABEL = "fabriccap.dev/shard"
SHARD_TARGET_LABEL = "shard"
