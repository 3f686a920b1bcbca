"""``fabriccap explain KIND/NAMESPACE/NAME``: one workload, from snapshots or one live read.

The pools are evaluated as ``fabriccap evaluate`` evaluates them; the workload object is the
one of the snapshots (``-f``) or one GET of the live cluster, in the versions the kinds table
names; ``core.workload_explain`` decides the rest. This module only finds the object and prints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fabriccap.core.facts import object_name, object_namespace
from fabriccap.core.text import clean_text, cut, escape_controls
from fabriccap.core.workload_explain import WorkloadExplanation
from fabriccap.core.workload_kinds import WorkloadKind, find, group_kind, group_of, kind_of
from fabriccap.offline.explain import pod_lines
from fabriccap.offline.render import align

# A template's pointer holds the object's own keys (a replica type's name), of any length: the
# table's cell is cut to this, after its control characters are escaped (an escape is longer).
# The Change line keeps the whole path: it is a command to copy.
MAX_TEMPLATE_CELL = 120


class WorkloadQueryError(ValueError):
    """The query names no workload kind, or no object."""


def parse_workload_query(query: str) -> tuple[WorkloadKind, str, str] | None:
    """``KIND/NAMESPACE/NAME`` (``trainjob/ml/bert``, ``jobs.batch.volcano.sh/ml/x``) as the
    table's kind, the namespace and the name; None when the query is not of that form (a pool
    or a FabricCapability name). WorkloadQueryError for a kind the table does not know."""
    parts = query.split("/")
    if len(parts) != 3 or "=" in query or not all(parts):
        return None
    kind = find(parts[0])
    if kind is None:
        raise WorkloadQueryError(
            f"{clean_text(parts[0], 80)} is not a workload kind fabriccap knows (docs/workloads.md)"
        )
    return kind, parts[1], parts[2]


def matches(kind: WorkloadKind, namespace: str, name: str, held: set[tuple[str, str, str]] | None = None) -> Any:
    """Whether a snapshot's object is the one explained; with ``held``, the key (``ObjectRef.key``)
    of every workload object read is added to it, so that a change never names an owner the
    snapshots lack as a command that would fail on them (review 64c F5)."""

    def keep(body: Mapping[str, Any]) -> bool:
        metadata = body.get("metadata")
        api_version = body.get("apiVersion")
        if held is not None and isinstance(metadata, Mapping) and isinstance(api_version, str):
            found = body.get("kind")
            if isinstance(found, str) and kind_of(api_version, found) is not None:
                namespace_of = object_namespace(metadata.get("namespace"))
                held.add((group_kind(group_of(api_version), found), namespace_of, object_name(metadata.get("name"))))
        return (
            isinstance(metadata, Mapping)
            and isinstance(api_version, str)
            and body.get("kind") == kind.kind
            and group_of(api_version) == kind.group
            and metadata.get("name") == name
            and (metadata.get("namespace") or "default") == namespace
        )

    return keep


def format_workload_explanation(explanation: WorkloadExplanation, output: str) -> str:
    if output == "json":
        return json.dumps(explanation.to_json(), indent=2)
    rows = [
        ["Workload:", f"{explanation.kind} {explanation.namespace}/{explanation.name} ({explanation.api_version})"],
        ["Pool:", explanation.pool or "-"],
        ["FabricCapability:", explanation.capability or "-"],
        ["Offers:", explanation.offers],
        ["Runs on:", ", ".join(explanation.runs_on) or "-"],
        ["Set the request in:", explanation.request_field],
    ]
    lines = [align(rows), "", "Templates:"]
    table = [["TEMPLATE", "SELECTS", "ACCELERATORS", explanation.resource_name.upper(), "NEEDS-FABRIC"]]
    for template in explanation.templates:
        accelerators = ", ".join(f"{k}: {v}" for k, v in template.accelerators.items()) or "-"
        fabric = "claims" if template.claims else (template.fabric or "-")
        table.append(
            [
                cut(escape_controls(template.pointer), MAX_TEMPLATE_CELL) or "/",
                template.selects or "-",
                accelerators,
                fabric,
                "yes" if template.needs_fabric else "no",
            ]
        )
    lines += [align(table), "", f"Change: {escape_controls(explanation.change)}"]
    if explanation.note:
        lines.append(f"Note: {escape_controls(explanation.note)}")
    lines += pod_lines(explanation.pods)
    return "\n".join(lines)
