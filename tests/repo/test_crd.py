"""The FabricCapability CRD against what the code writes and what docs/reference/fabriccapability.md promises.

The apiserver silently prunes status fields the schema does not declare and rejects a whole
status write when one field breaks the schema, so both directions matter: everything
``fabriccap evaluate -o json`` prints must validate (and nothing may be pruned), and every
status field the schema declares must be one the code writes. The validator below covers the
subset of OpenAPI v3 that structural CRD schemas use and refuses any keyword it does not know,
so it cannot silently skip a rule the apiserver would enforce.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from fabriccap.cli import commands as cli
from fabriccap.core import api
from fabriccap.core.config import build_config
from fabriccap.core.evaluate import evaluate
from fabriccap.core.transport import Verdict
from fabriccap.core.verdicts import FabricVerdict, PodTransport
from fabriccap.offline import render
from fabriccap.offline.pipeline import evaluation_objects
from fabriccap_devtools.reference.fabriccapability import status_always_written
from fabriccap_devtools.world import workload_pod
from support.builders import daemon_set, facts_of, healthy_pool, kube_list, node, plugin_pods

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = REPO_ROOT / "crds" / "fabriccapabilities.yaml"
EXAMPLE_SNAPSHOT = REPO_ROOT / "examples" / "eks-cluster.json"

# docs/reference/fabriccapability.md, "kubectl get fcap": the columns, then what -o wide adds.
SPEC_COLUMNS = ["FABRIC", "POOL", "NODES", "ADVERTISING", "COUNT", "GAP", "READY", "REASON", "AGE"]
SPEC_WIDE_COLUMNS = ["RESOURCE", "PLUGIN-READY", "NO-FABRIC", "NODEPOOL", "LAUNCHED-WITHOUT", "TCP"]
EXPECTED_JSON_PATHS = {
    "FABRIC": ".status.fabric",
    "POOL": ".status.pool.value",
    "NODES": ".status.nodes",
    "ADVERTISING": ".status.advertisingNodes",
    "COUNT": ".status.uniformCount",
    "GAP": ".status.gap.pluginReadyNotAdvertised",
    "READY": '.status.conditions[?(@.type=="Ready")].status',
    "REASON": '.status.conditions[?(@.type=="Ready")].reason',
    "AGE": ".metadata.creationTimestamp",
    "RESOURCE": ".status.resourceName",
    "PLUGIN-READY": ".status.devicePlugin.readyNodes",
    "NO-FABRIC": ".status.workloads.withoutFabric.pods",
    "NODEPOOL": ".status.launchable.nodePool",
    "LAUNCHED-WITHOUT": ".status.gap.launchedWithoutFabric",
    "TCP": ".status.workloads.transport.socket.pods",
}

# Every keyword the validator enforces or may safely ignore (description). A schema keyword
# outside this set fails test_schema_is_structural instead of being skipped.
KNOWN_KEYWORDS = frozenset(
    {
        "type",
        "format",
        "description",
        "properties",
        "required",
        "items",
        "additionalProperties",
        "enum",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "nullable",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "default",  # test_schema_is_structural validates each against its schema, as the apiserver does
    }
)
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_INT64 = (-(2**63), 2**63 - 1)


def load_crd() -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load(CRD_FILE.read_text(encoding="utf-8"))
    return crd


def the_version(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    return dict(version)


def object_schema() -> dict[str, Any]:
    return dict(the_version(load_crd())["schema"]["openAPIV3Schema"])


def _type_matches(schema_type: str, value: Any) -> bool:
    if schema_type == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if schema_type == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, {"string": str, "boolean": bool, "object": dict, "array": list}[schema_type])


def _is_date_time(text: str) -> bool:
    if not _DATE_TIME.match(text):
        return False
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def validate(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Errors the apiserver would report (or fields it would prune) for ``value``."""
    errors: list[str] = []
    where = path or "<root>"
    if value is None:
        if not schema.get("nullable"):
            errors.append(f"{where}: null is not allowed")
        return errors
    schema_type = schema.get("type")
    if schema_type is not None and not _type_matches(schema_type, value):
        return [f"{where}: expected {schema_type}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not one of {schema['enum']}")
    if schema_type in ("integer", "number"):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: {value} < minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where}: {value} > maximum {schema['maximum']}")
        if schema.get("format") == "int64" and not _INT64[0] <= value <= _INT64[1]:
            errors.append(f"{where}: {value} out of int64 range")
    if schema_type == "string":
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{where}: shorter than minLength {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{where}: longer than maxLength {schema['maxLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
        if schema.get("format") == "date-time" and not _is_date_time(value):
            errors.append(f"{where}: {value!r} is not an RFC 3339 date-time")
    if schema_type == "object":
        errors += _validate_object(schema, value, path)
    if schema_type == "array":
        errors += _validate_array(schema, value, path)
    return errors


def _validate_object(schema: dict[str, Any], value: dict[str, Any], path: str) -> list[str]:
    errors = [
        f"{path or '<root>'}: missing required field {name!r}"
        for name in schema.get("required", ())
        if name not in value
    ]
    properties = schema.get("properties", {})
    additional = schema.get("additionalProperties")
    # The apiserver keeps ObjectMeta as is at the root; everywhere else undeclared fields go.
    keeps_unknown = schema.get("x-kubernetes-preserve-unknown-fields") or path == ".metadata"
    for key, item in value.items():
        if key in properties:
            errors += validate(properties[key], item, f"{path}.{key}")
        elif isinstance(additional, dict):
            errors += validate(additional, item, f"{path}[{key}]")
        elif not keeps_unknown:
            errors.append(f"{path}.{key}: not in the schema (the apiserver would prune it)")
    return errors


def _validate_array(schema: dict[str, Any], value: list[Any], path: str) -> list[str]:
    errors = []
    where = path or "<root>"
    if len(value) < schema.get("minItems", 0):
        errors.append(f"{where}: fewer than minItems {schema['minItems']}")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(f"{where}: more than maxItems {schema['maxItems']} ({len(value)})")
    for index, item in enumerate(value):
        errors += validate(schema.get("items", {}), item, f"{path}[{index}]")
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map":
        keys = schema["x-kubernetes-list-map-keys"]
        identities = [tuple(item.get(key) for key in keys) for item in value if isinstance(item, dict)]
        if len(set(identities)) != len(identities):
            errors.append(f"{where}: duplicate entries for list-map keys {keys}")
    elif list_type == "set" and len({json.dumps(item, sort_keys=True) for item in value}) != len(value):
        errors.append(f"{where}: duplicate entries in a set")
    return errors


def walk(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every (path, sub-schema) of a schema; array items appear as ``path[]``."""
    yield path, schema
    for name, child in schema.get("properties", {}).items():
        yield from walk(child, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], f"{path}{{}}")


def _map_value_paths(value: Any, schema: dict[str, Any], path: str = "") -> Iterator[str]:
    """Like value_paths, but following the schema so map entries read ``{}``."""
    yield path
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key, item in value.items():
            if key in properties:
                yield from _map_value_paths(item, properties[key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                yield from _map_value_paths(item, schema["additionalProperties"], f"{path}{{}}")
    elif isinstance(value, list):
        for item in value:
            yield from _map_value_paths(item, schema.get("items", {}), f"{path}[]")


def evaluate_example_json(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    assert cli.main(["evaluate", "-f", str(EXAMPLE_SNAPSHOT), "-o", "json"]) == 0
    output = capsys.readouterr().out
    listed = json.loads(output)
    assert listed["kind"] == "List"
    items: list[dict[str, Any]] = listed["items"]
    assert items, "the example snapshot yields no FabricCapability"
    return items


def json_path(obj: dict[str, Any], expression: str) -> Any:
    """The subset of kubectl JSONPath the printer columns use: fields and one [?(@.k=="v")] filter."""
    value: Any = obj
    for step in re.findall(r'\.[A-Za-z]+|\[\?\(@\.[A-Za-z]+=="[^"]*"\)\]', expression):
        if value is None:
            return None
        if step.startswith("[?"):
            matched = re.match(r'\[\?\(@\.([A-Za-z]+)=="([^"]*)"\)\]', step)
            assert matched is not None
            key, wanted = matched.groups()
            value = next((item for item in value if item.get(key) == wanted), None)
        else:
            value = value.get(step[1:])
    return value


# ---------------------------------------------------------------------------------------
# Identity and shape of the CRD


def test_crd_identity() -> None:
    crd = load_crd()
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{api.PLURAL}.{api.GROUP}"
    spec = crd["spec"]
    assert spec["group"] == api.GROUP
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {
        "kind": api.KIND,
        "listKind": f"{api.KIND}List",
        "plural": api.PLURAL,
        "singular": "fabriccapability",
        "shortNames": ["fcap"],
        "categories": ["fabric"],
    }
    version = the_version(crd)
    assert version["name"] == api.VERSION
    assert version["served"] is True
    assert version["storage"] is True
    assert version["subresources"] == {"status": {}}


def test_schema_is_structural() -> None:
    """Every node has a type (or preserves unknown fields) and only known keywords."""
    root = object_schema()
    for path, schema in walk(root):
        unknown = set(schema) - KNOWN_KEYWORDS
        assert not unknown, f"{path or '<root>'}: keywords the validator does not check: {unknown}"
        if not schema.get("x-kubernetes-preserve-unknown-fields"):
            assert "type" in schema, f"{path or '<root>'}: structural schemas need a type"
        for required in schema.get("required", ()):
            assert required in schema.get("properties", {}), f"{path}: required {required!r} is not a property"
        if "default" in schema:
            assert validate(schema, schema["default"], path) == [], (
                f"{path}: the apiserver refuses a CRD whose default is invalid"
            )
        if schema.get("x-kubernetes-list-type") == "map":
            item = schema["items"]
            for key in schema["x-kubernetes-list-map-keys"]:
                assert key in item.get("required", ()), f"{path}: list-map key {key!r} must be required"
    assert root["properties"]["spec"] == {
        "type": "object",
        "description": root["properties"]["spec"]["description"],
        "x-kubernetes-preserve-unknown-fields": True,
    }


def test_a_status_not_written_yet_reads_as_not_reconciled() -> None:
    """The API server drops a create's status, so until the operator's status write lands the
    object is served with the status default: an observedGeneration below the generation of 1
    every object starts with, which kstatus reads as InProgress (without one, as Current).
    tests/e2e/test_kstatus.py runs kstatus itself on such an object."""
    status = object_schema()["properties"]["status"]
    assert status["default"] == {"observedGeneration": 0}
    assert "required" not in status, "a default must validate, and a status written by no one has no field"


def test_every_status_written_has_the_fields_always_written(capsys: pytest.CaptureFixture[str]) -> None:
    """What the CRD cannot require (its status has a default) the operator still always writes:
    the reference's "always" column comes from the same model."""
    always = status_always_written()
    assert {"fabric", "pool", "nodes", "conditions"} <= always
    for item in [*evaluate_example_json(capsys), transport_example()]:
        assert always - set(item["status"]) == set(), item["metadata"]["name"]


def test_conditions_follow_metav1_condition() -> None:
    conditions = object_schema()["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    item = conditions["items"]
    assert set(item["required"]) == {"type", "status", "reason", "message", "lastTransitionTime"}
    assert item["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert item["properties"]["lastTransitionTime"]["format"] == "date-time"
    reason = re.compile(item["properties"]["reason"]["pattern"])
    for good in ("UniformCapability", "PluginNotInstalled", "A", "Reason_With:Colon,Comma"):
        assert reason.search(good), good
    for bad in ("", "lower case", "1Leading", "Trailing,", "Has-Dash"):
        assert not reason.search(bad), bad


def _alias_names(model: type[BaseModel]) -> set[str]:
    return {info.alias or name for name, info in model.model_fields.items()}


@pytest.mark.parametrize(
    ("model", "schema_path"),
    [
        (api.FabricCapabilityStatus, ".status"),
        (api.PoolRef, ".status.pool"),
        (api.CountBucket, ".status.counts[]"),
        (api.InstanceTypeCount, ".status.instanceTypes[]"),
        (api.DevicePluginStatus, ".status.devicePlugin"),
        (api.GapStatus, ".status.gap"),
        (api.Recommendation, ".status.recommendation"),
        (api.ResourceClaimTemplateSpec, ".status.recommendation.resourceClaimTemplate"),
        (api.ResourceClaimSpec, ".status.recommendation.resourceClaimTemplate.spec"),
        (api.DeviceClaim, ".status.recommendation.resourceClaimTemplate.spec.devices"),
        (api.DeviceRequest, ".status.recommendation.resourceClaimTemplate.spec.devices.requests[]"),
        (api.ExactDeviceRequest, ".status.recommendation.resourceClaimTemplate.spec.devices.requests[].exactly"),
        (api.SourceCount, ".status.sources[]"),
        (api.WorkloadsStatus, ".status.workloads"),
        (api.WorkloadCount, ".status.workloads.withoutFabric"),
        (api.Offender, ".status.workloads.offenders[]"),
        (api.TransportStatus, ".status.workloads.transport"),
        (api.TransportCount, ".status.workloads.transport.socket"),
        (api.ReadError, ".status.workloads.transport.readErrors[]"),
        (api.EnvVarValue, ".status.recommendation.env[]"),
        (api.Condition, ".status.conditions[]"),
    ],
)
def test_schema_declares_exactly_the_model_fields(model: type[BaseModel], schema_path: str) -> None:
    schemas = dict(walk(object_schema()))
    assert set(schemas[schema_path]["properties"]) == _alias_names(model)


# ---------------------------------------------------------------------------------------
# What `fabriccap evaluate -o json` prints, against the schema


def transport_example() -> dict[str, Any]:
    """A pool whose pods' logs were read (transport on, which a snapshot cannot show): one
    socket pod that requests EFA (a FabricNotUsed offender) and one whose log was refused."""
    config = build_config({"transport": {"enabled": True}})
    pods = [workload_pod("n1", "socket-0", efa=32), workload_pod("n2", "refused-0", efa=32)]
    index = facts_of([*healthy_pool(), *pods], config)
    socket = FabricVerdict("efa", Verdict.SOCKET, "h:1:2 [0] NCCL INFO Using network Socket", decisive=True)
    index.put_transport(("ml", "socket-0"), PodTransport(pods[0]["metadata"]["uid"], (socket,)))
    unknown = FabricVerdict("efa", Verdict.UNKNOWN, "", decisive=False)
    refused = PodTransport(pods[1]["metadata"]["uid"], (unknown,), "403 Forbidden: no get on pods/log")
    index.put_transport(("ml", "refused-0"), refused)
    (item,) = evaluation_objects(evaluate(config, index))
    return item


def test_evaluate_output_validates_against_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    schema = object_schema()
    for item in [*evaluate_example_json(capsys), transport_example()]:
        assert validate(schema, item) == [], item["metadata"]["name"]


def test_example_output_populates_every_status_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Each declared status field is written by some pool of the example: no dead (misspelt) schema
    field. Every name of the example is readable, so status.naming comes from one more pool whose
    value is no DNS label (a node group named with an underscore)."""
    schema = object_schema()
    declared = {path for path, _ in walk(schema) if path.startswith(".status")}
    populated: set[str] = set()
    extra = tmp_path / "hashed.json"
    extra.write_text(json.dumps(kube_list([daemon_set(), node("n1", pool="Legacy_GPU"), *plugin_pods(["n1"])])))
    assert cli.main(["evaluate", "-f", str(extra), "-o", "json"]) == 0
    (hashed,) = json.loads(capsys.readouterr().out)["items"]
    assert hashed["status"]["naming"]["reason"] == "NotDNSLabel"
    for item in [*evaluate_example_json(capsys), hashed, transport_example()]:
        populated |= set(_map_value_paths(item, schema))
    assert declared - populated == set()


def _valid_object(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    items = evaluate_example_json(capsys)
    ready = [item for item in items if "resourcesPerNode" in item["status"].get("recommendation", {})]
    return copy.deepcopy(ready[0])


def _set(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    for step in path[:-1]:
        obj = obj[step]
    obj[path[-1]] = value


@pytest.mark.parametrize(
    ("path", "value", "complaint"),
    [
        (("status", "unknownField"), 1, "would prune"),
        (("status", "gap", "extra"), "x", "would prune"),
        (("status", "nodes"), -1, "minimum"),
        (("status", "nodes"), "4", "expected integer"),
        (("status", "nodes"), True, "expected integer"),
        (("status", "uniformCount"), None, "null"),
        (("status", "gap", "nodes"), [f"node-{index}" for index in range(21)], "maxItems"),
        (("status", "gap", "truncated"), "false", "expected boolean"),
        (("status", "recommendation", "resourcesPerNode", "vpc.amazonaws.com/efa"), 32, "expected string"),
        (("status", "recommendation", "resourceClaimTemplate"), {"spec": {}}, "missing required field 'devices'"),
        (("status", "sources"), [{"source": "cdi", "nodes": 1}], "not one of"),
        (("status", "conditions", 0, "status"), "Maybe", "not one of"),
        (("status", "conditions", 0, "reason"), "not camel", "does not match"),
        (("status", "conditions", 0, "lastTransitionTime"), "yesterday", "date-time"),
        (("status", "conditions", 1, "type"), "DevicePluginReady", "duplicate"),
        (("status", "pool"), {"key": "eks.amazonaws.com/nodegroup"}, "missing required field 'value'"),
    ],
)
def test_validator_rejects_what_the_apiserver_would(
    capsys: pytest.CaptureFixture[str], path: tuple[Any, ...], value: Any, complaint: str
) -> None:
    obj = _valid_object(capsys)
    _set(obj, path, value)
    errors = validate(object_schema(), obj)
    assert any(complaint in error for error in errors), errors


def test_validator_requires_transition_time(capsys: pytest.CaptureFixture[str]) -> None:
    obj = _valid_object(capsys)
    del obj["status"]["conditions"][0]["lastTransitionTime"]
    assert any("lastTransitionTime" in error for error in validate(object_schema(), obj))


def test_spec_keeps_unknown_fields(capsys: pytest.CaptureFixture[str]) -> None:
    obj = _valid_object(capsys)
    obj["spec"] = {"anything": {"nested": [1, "two"]}}
    assert validate(object_schema(), obj) == []


# ---------------------------------------------------------------------------------------
# Printer columns


def printer_columns() -> list[dict[str, Any]]:
    return list(the_version(load_crd())["additionalPrinterColumns"])


def test_printer_columns_match_spec() -> None:
    columns = printer_columns()
    default = [column["name"] for column in columns if column.get("priority", 0) == 0]
    wide = [column["name"] for column in columns if column.get("priority", 0) == 1]
    assert default == SPEC_COLUMNS
    assert wide == SPEC_WIDE_COLUMNS
    assert len(columns) == len(default) + len(wide)
    assert {column["name"]: column["jsonPath"] for column in columns} == EXPECTED_JSON_PATHS
    assert next(column for column in columns if column["name"] == "AGE")["type"] == "date"


def test_printer_column_types_match_the_schema() -> None:
    schemas = dict(walk(object_schema()))
    for column in printer_columns():
        path = column["jsonPath"]
        if path.startswith(".metadata"):
            continue
        if "conditions[" in path:
            field = path.rsplit(".", 1)[1]
            path = f".status.conditions[].{field}"
        assert path in schemas, f"{column['name']}: {path} is not in the schema"
        assert column["type"] == schemas[path]["type"], column["name"]


def test_evaluate_table_shows_the_crd_columns(capsys: pytest.CaptureFixture[str]) -> None:
    """`fabriccap evaluate` prints what `kubectl get fcap` would, cell for cell (AGE aside).

    An absent value (COUNT of a mixed pool) is blank in kubectl's server-side columns; the
    evaluate table may show it as blank or as `<none>`.
    """
    shown = [column for column in printer_columns() if column.get("priority", 0) == 0 and column["name"] != "AGE"]
    assert list(render.TABLE_COLUMNS) == ["NAME", *(column["name"] for column in shown)]
    items = evaluate_example_json(capsys)
    for obj, row in zip(items, render.table_rows(items), strict=True):
        assert row[0] == obj["metadata"]["name"]
        for column, cell in zip(shown, row[1:], strict=True):
            value = json_path(obj, column["jsonPath"])
            assert cell in (("", "<none>") if value is None else (str(value),)), (obj["metadata"]["name"], column)


# ---------------------------------------------------------------------------------------
# Descriptions: what `kubectl explain fcap.status` shows, and what docs/reference is made of


def field_schemas(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every named field (a property, at any depth) of a schema, as (path, sub-schema)."""
    for name, child in schema.get("properties", {}).items():
        yield f"{path}.{name}", child
        yield from field_schemas(child, f"{path}.{name}")
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(schema.get(key), dict):
            yield from field_schemas(schema[key], f"{path}{suffix}")


def test_every_field_has_a_description() -> None:
    schema = object_schema()
    assert schema.get("description", "").strip()
    undescribed = [path for path, child in field_schemas(schema) if not str(child.get("description", "")).strip()]
    # The API server refuses a description on metadata (only name and generateName may be
    # constrained there) and explains ObjectMeta's own.
    assert undescribed == [".metadata"]
    assert set(schema["properties"]["metadata"]) == {"type"}
    assert len(list(field_schemas(schema))) > 50  # the walk reaches the nested fields


def test_printer_columns_have_descriptions() -> None:
    assert [column["name"] for column in printer_columns() if not column.get("description")] == ["AGE"]
