"""Hostile input at every bound: what the status-size tests build (reliability round 3, S2).

A pool whose node names, instance types, pool value, DaemonSet names, namespaces, pod names and
owners are as long as the facts keep them and as wide as JSON writes a character, with a
different count on every node: the largest status the evaluation can be made to compute.
"""

from __future__ import annotations

from typing import Any

from fabriccap_devtools.world import EFA_DS_SELECTOR, daemon_set, node, owner_reference, pod, workload_pod

# One character that JSON (ensure_ascii, as the operator sends it) writes as 12 bytes:
# a character outside the Basic Multilingual Plane, escaped as a surrogate pair.
WIDEST = "\U0001f600"
NODES = 400


def wide(length: int, tag: int | str = "") -> str:
    """``length`` characters, each as wide as JSON makes one, after ``tag`` (kept distinct)."""
    text = str(tag)
    return text + WIDEST * (length - len(text))


def worst_case_bodies() -> list[dict[str, Any]]:
    """One pool with hostile text at every bound: node names, instance types, the pool value,
    DaemonSet names, namespaces, pod names and owners, a different count on every node."""
    pool = wide(300, "p")
    namespace = wide(63, "")
    bodies: list[dict[str, Any]] = []
    for index in range(NODES):
        name = wide(300, index)
        # Every node its own count and instance type; every fourth one with no plugin pod (a gap).
        bodies.append(node(name, pool=pool, efa=index + 1, instance_type=wide(300, index)))
        if index % 4:
            bodies.append(pod(name, name=wide(300, f"plugin{index}")))
        bodies.append(
            workload_pod(
                name,
                wide(300, f"pod{index}"),
                namespace=namespace,
                owner={**owner_reference("Job", "batch/v1", "x"), "name": wide(300, index)},
            )
        )
    bodies += [daemon_set(), *(daemon_set(wide(300, f"ds{index}"), labels=EFA_DS_SELECTOR) for index in range(50))]
    return bodies
