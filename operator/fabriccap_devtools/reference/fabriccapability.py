"""docs/reference/fabriccapability.md: the resource, from the CRD and the code's condition registry.

Every field comes from the CRD's openAPIV3Schema (its descriptions are what ``kubectl explain``
shows), every column from its additionalPrinterColumns, every condition and reason from
``fabriccap.core.api`` (``CONDITIONS`` and ``REASONS``, which the evaluation's own reasons
are checked against). A field, column or reason added there appears here at ``make generate``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from fabriccap.core import api
from fabriccap.core.api import CONDITIONS, REASONS, ConditionStatus, ConditionType
from fabriccap_devtools.checkout import CRD
from fabriccap_devtools.reference.markdown import code, header, table

SOURCE = "crds/fabriccapabilities.yaml and operator/fabriccap/core/api.py"
_STATUS_ORDER = {ConditionStatus.TRUE: 0, ConditionStatus.FALSE: 1, ConditionStatus.UNKNOWN: 2}


def load_crd(path: Path) -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return crd


def crd_status_default(path: Path = CRD) -> dict[str, Any]:
    """The status the FabricCapability CRD gives an object until its status is written (the
    API server serves it: the unit tests' fake API server and the simulator serve the same)."""
    (version,) = load_crd(path)["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"]["properties"]["status"]["default"])


def type_name(schema: dict[str, Any]) -> str:
    """A schema's type as kubectl explain spells it: ``<[]Object>``, ``<map[string]string>``."""
    json_type = schema.get("type", "")
    if json_type == "array":
        return "[]" + type_name(schema.get("items", {}))
    if json_type == "object":
        values = schema.get("additionalProperties")
        if isinstance(values, dict) and "properties" not in schema:
            return f"map[string]{type_name(values)}"
        return "Object"
    return str(json_type) or "any"


def constraints(schema: dict[str, Any]) -> list[str]:
    notes = []
    if "enum" in schema:
        notes.append("one of " + ", ".join(code(value) for value in schema["enum"]))
    if schema.get("format") == "date-time":
        notes.append("an RFC 3339 time")
    if "maxItems" in schema:
        notes.append(f"at most {schema['maxItems']} entries")
    if "maxLength" in schema:
        notes.append(f"at most {schema['maxLength']} characters")
    return notes


def fields(
    schema: dict[str, Any], path: str, required: frozenset[str] | None = None
) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """(path, schema, always present) for every field below ``schema``, depth first, in schema
    order; ``required``: the fields always present directly below it, where not the schema's own."""
    required = frozenset(schema.get("required", ())) if required is None else required
    for name, child in schema.get("properties", {}).items():
        child_path = f"{path}.{name}"
        yield child_path, child, name in required
        yield from _below(child, child_path)


def _below(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any], bool]]:
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        yield from fields(schema["items"], f"{path}[]")
    elif "properties" in schema:
        yield from fields(schema, path)


def status_always_written() -> frozenset[str]:
    """The status fields in every status the operator writes: the model's required ones. The
    CRD cannot say so (its status has a default, which must validate, so it requires nothing)."""
    return frozenset(
        field.alias or name for name, field in api.FabricCapabilityStatus.model_fields.items() if field.is_required()
    )


def field_rows(schema: dict[str, Any], path: str, required: frozenset[str] | None = None) -> list[list[str]]:
    rows = []
    for field_path, child, always in fields(schema, path, required):
        description = " ".join(str(child.get("description", "")).split())
        notes = constraints(child)
        if notes:
            description += f" ({'; '.join(notes)})"
        rows.append([code(field_path), code(type_name(child)), "always" if always else "", description])
    return rows


def _columns_section(version: dict[str, Any]) -> str:
    columns = version.get("additionalPrinterColumns", [])
    rows = [
        [
            code(column["name"]),
            "`-o wide`" if column.get("priority", 0) > 0 else "always",
            code(column["jsonPath"]),
            column.get("description", "how long ago the object was created"),
        ]
        for column in columns
    ]
    return (
        "## `kubectl get fcap`\n\n"
        "The columns `kubectl get fabriccapabilities` prints (`-o wide` adds the last ones); `fabriccap evaluate`"
        " prints them too, without `AGE`:\n\n" + table(["column", "shown", "value", "meaning"], rows)
    )


def _size_section() -> str:
    kib = api.MAX_STATUS_BYTES // 1024
    return (
        "### How large a status can be\n\n"
        "A status repeats names that others chose (nodes, instance types, DaemonSets, pods and their"
        " owners), and one the API server refused as too large would freeze the pool. So every list and every"
        f" string of a status is bounded: at most {api.MAX_COUNT_BUCKETS} `counts` (the largest counts),"
        f" {api.MAX_INSTANCE_TYPES} `instanceTypes`, {api.MAX_DAEMON_SETS} `devicePlugin.daemonSets`,"
        f" {api.MAX_GAP_NODES} `gap.nodes` and {api.MAX_OFFENDERS} `workloads.offenders` (each in its sorted"
        f" order); names of at most 253 characters, namespaces and kinds of 63; condition messages of"
        f" {api.MAX_CONDITION_MESSAGE}. Text from objects is cleaned first: no control character, escape sequence"
        " or line break reaches a status. The largest status, every such character counted as the 12 bytes of"
        f" JSON an emoji takes, is about 580 KB, under {kib} KiB (a third of the API server's 3 MiB request limit,"
        " and under etcd's 1.5 MiB per object); with the DNS names of a real cluster it is under 60 KB. Should"
        " the API server still refuse a status as too large, the operator publishes a summary instead, with"
        " `Ready` False and reason `StatusTooLarge`, and tries the full status again on its backoff.\n"
    )


def _conditions_section() -> str:
    parts = [
        "## Conditions\n\n"
        "`status.conditions` holds one condition of each type below, in this order. Each has the shape of a"
        " Kubernetes `metav1.Condition`; `lastTransitionTime` changes only when `status` does. When a"
        " condition's status changes, the operator records an Event on the object (`Normal` when Ready"
        " becomes True, `Warning` otherwise) with the condition's new reason and message, so"
        " `kubectl describe fcap NAME` shows the history.\n"
    ]
    for meaning in CONDITIONS:
        reasons = sorted(
            (entry for entry in REASONS if entry.condition is meaning.type),
            key=lambda entry: _STATUS_ORDER[entry.status],
        )
        if meaning.type is ConditionType.READY:
            ready = ""
        else:
            ready = " It is part of the flip criterion." if meaning.affects_ready else " It never changes `Ready`."
        rows = [[code(entry.status.value), code(entry.reason.value), entry.meaning, entry.action] for entry in reasons]
        parts.append(
            f"### {meaning.type.value}\n\n{meaning.question}{ready}\n\n"
            + table(["status", "reason", "what it means", "what to do"], rows)
        )
    return "\n".join(parts)


def render(crd_path: Path) -> str:
    crd = load_crd(crd_path)
    spec = crd["spec"]
    names = spec["names"]
    (version,) = spec["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    properties = schema["properties"]
    identity = "".join(
        f"- {what}: {value}\n"
        for what, value in (
            ("API version", code(f"{spec['group']}/{version['name']}")),
            ("kind", code(names["kind"])),
            ("scope", spec["scope"]),
            (
                "names",
                ", ".join(code(name) for name in [names["plural"], names["singular"], *names.get("shortNames", [])]),
            ),
            ("categories", ", ".join(code(category) for category in names.get("categories", []))),
            ("subresources", ", ".join(code(name) for name in version.get("subresources", {}))),
        )
    )
    status = properties["status"]
    return (
        header("The FabricCapability resource", SOURCE)
        + "\n"
        + " ".join(schema["description"].split())
        + " What its conditions mean, and how it decides: [how-it-decides.md](how-it-decides.md).\n\n"
        + identity
        + "\n"
        + "Every field below is also in `kubectl explain fcap.status` (for one field:"
        " `kubectl explain fcap.status.gap.nodes`).\n\n"
        + _columns_section(version)
        + "\n## `spec`\n\n"
        + " ".join(properties["spec"]["description"].split())
        + "\n\n## `status`\n\n"
        + " ".join(status["description"].split())
        + " Fields *always* present are in every status the operator writes; the others appear only when they"
        " apply.\n\n"
        + table(["field", "type", "present", "meaning"], field_rows(status, "status", status_always_written()))
        + "\n"
        + _size_section()
        + "\n"
        + _conditions_section()
    )
