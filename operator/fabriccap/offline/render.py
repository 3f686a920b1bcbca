"""Printing FabricCapability objects the way ``kubectl get`` does."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

from fabriccap.core.api import ConditionType, condition_reason, condition_status
from fabriccap.core.text import escape_controls


def _cell(value: Any) -> str:
    # kubectl prints an empty cell for a printer column whose JSONPath finds nothing.
    return "" if value is None else str(value)


# The same columns, in the same order, as the CRD's additionalPrinterColumns (minus AGE:
# an evaluated object has no creation time); -o wide adds the priority-1 columns, as kubectl.
TABLE_COLUMNS: tuple[str, ...] = ("NAME", "FABRIC", "POOL", "NODES", "ADVERTISING", "COUNT", "GAP", "READY", "REASON")
WIDE_COLUMNS: tuple[str, ...] = ("RESOURCE", "PLUGIN-READY", "NO-FABRIC", "NODEPOOL", "LAUNCHED-WITHOUT", "TCP")
OUTPUTS: tuple[str, ...] = ("table", "wide", "json", "yaml", "name")
TABLE_OUTPUTS: tuple[str, ...] = ("table", "wide")


def table_rows(objects: Sequence[dict[str, Any]], wide: bool = False) -> list[list[str]]:
    rows = []
    for obj in objects:
        status = obj.get("status") or {}
        row = [
            obj["metadata"]["name"],
            _cell(status.get("fabric")),
            _cell((status.get("pool") or {}).get("value")),
            _cell(status.get("nodes")),
            _cell(status.get("advertisingNodes")),
            _cell(status.get("uniformCount")),
            _cell((status.get("gap") or {}).get("pluginReadyNotAdvertised")),
            _cell(condition_status(status, ConditionType.READY)),
            _cell(condition_reason(status, ConditionType.READY)),
        ]
        if wide:
            row += [
                _cell(status.get("resourceName")),
                _cell((status.get("devicePlugin") or {}).get("readyNodes")),
                _cell(((status.get("workloads") or {}).get("withoutFabric") or {}).get("pods")),
                _cell((status.get("launchable") or {}).get("nodePool")),
                _cell((status.get("gap") or {}).get("launchedWithoutFabric")),
                _cell((((status.get("workloads") or {}).get("transport") or {}).get("socket") or {}).get("pods")),
            ]
        rows.append(row)
    return rows


# Said on stderr, as kubectl says it: stdout stays what a script would parse (nothing).
NO_RESOURCES = "No resources found"


def format_table(objects: Sequence[dict[str, Any]], wide: bool = False) -> str:
    if not objects:
        return ""
    header = [*TABLE_COLUMNS, *(WIDE_COLUMNS if wide else ())]
    return align([header, *table_rows(objects, wide)])


def align(rows: Sequence[Sequence[str]]) -> str:
    """Columns padded as kubectl pads them: three spaces apart, the last one unpadded. Cells
    carry text from objects (a snapshot's label values, owner names): their control characters
    are shown escaped, as kubectl shows them, so no cell can move the cursor or break a row."""
    rows = [[escape_controls(cell) for cell in row] for row in rows]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join(
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def as_list(objects: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(objects)}


def format_output(objects: Sequence[dict[str, Any]], output: str) -> str:
    ordered = sorted(objects, key=lambda obj: obj["metadata"]["name"])
    if output == "json":
        return json.dumps(as_list(ordered), indent=2)
    if output == "yaml":
        return yaml.safe_dump(as_list(ordered), sort_keys=False, default_flow_style=False, width=4096).rstrip()
    if output == "name":
        return "\n".join(f"fabriccapability.fabriccap.dev/{obj['metadata']['name']}" for obj in ordered)
    return format_table(ordered, wide=output == "wide")
