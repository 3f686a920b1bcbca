"""Random clusters for property tests: nodes in a few pools, with or without the device plugin,
drawn by hypothesis; ``Scenario.bodies()`` turns one into the objects the evaluation reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from support.builders import INSTANCE_TYPE, KARPENTER, NODEGROUP, daemon_set, node, pod

POOLS: list[tuple[str, str] | None] = [("a", NODEGROUP), ("b", NODEGROUP), ("c", KARPENTER), None]
INSTANCE_TYPES = [None, "p5.48xlarge", "ml.p5.48xlarge", "p4d.24xlarge", "p4de.24xlarge", "g6e.xlarge", "m7i.large"]
PLUGIN_STATES = ["none", "ready", "not-ready", "terminating"]


@dataclass(frozen=True)
class NodeSpec:
    name: str
    pool: tuple[str, str] | None
    count: int | None
    unhealthy: bool  # capacity above allocatable
    instance_type: str | None
    cordoned: bool
    gpu: int | None
    plugin: str

    @property
    def effective_pool(self) -> tuple[str, str] | None:
        """The pool per SPEC: the first pool key present; the instance type is the last resort."""
        if self.pool is not None:
            return self.pool
        return (self.instance_type, INSTANCE_TYPE) if self.instance_type else None


@dataclass(frozen=True)
class Scenario:
    nodes: tuple[NodeSpec, ...]
    daemon_set: bool

    def bodies(self) -> list[dict[str, Any]]:
        bodies: list[dict[str, Any]] = [daemon_set()] if self.daemon_set else []
        for spec in self.nodes:
            pool, key = spec.pool if spec.pool else (None, NODEGROUP)
            capacity: int | str | None = "same"
            if spec.unhealthy:
                capacity = (spec.count or 0) + 2
            bodies.append(
                node(
                    spec.name,
                    pool=pool,
                    pool_key=key,
                    efa=spec.count,
                    efa_capacity=capacity,
                    instance_type=spec.instance_type,
                    cordoned=spec.cordoned,
                    gpu=spec.gpu,
                )
            )
            if spec.plugin != "none":
                bodies.append(
                    pod(
                        spec.name,
                        ready=spec.plugin == "ready",
                        deleting=spec.plugin == "terminating",
                    )
                )
        return bodies


@st.composite
def node_specs(draw: st.DrawFn, name: str, pools: list[tuple[str, str] | None]) -> NodeSpec:
    return NodeSpec(
        name=name,
        pool=draw(st.sampled_from(pools)),
        count=draw(st.sampled_from([None, 0, 1, 4, 16, 32])),
        unhealthy=draw(st.booleans()),
        instance_type=draw(st.sampled_from(INSTANCE_TYPES)),
        cordoned=draw(st.booleans()),
        gpu=draw(st.sampled_from([None, 0, 8])),
        plugin=draw(st.sampled_from(PLUGIN_STATES)),
    )


@st.composite
def scenarios(
    draw: st.DrawFn, max_nodes: int = 12, pools: list[tuple[str, str] | None] | None = None, min_nodes: int = 0
) -> Scenario:
    size = draw(st.integers(min_value=min_nodes, max_value=max_nodes))
    choices = pools or POOLS
    nodes = tuple(draw(node_specs(f"ip-10-0-{index // 256}-{index % 256}", choices)) for index in range(size))
    return Scenario(nodes=nodes, daemon_set=draw(st.booleans()))
