"""docs/reference/configuration.md: every field of the config file, from the pydantic model.

The models in ``fabriccap.core.config`` are walked from ``Config`` down: each field's name
(its alias, as written in the file), type (from the model's JSON Schema), default and
description, and the old names the models still read. The built-in profiles are the validated
result of naming them in a config, so their values, instance-type tables included, are the
ones the operator runs with. A field added to a model appears here at ``make generate``.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo

from fabriccap.catalogfile import load_catalogs
from fabriccap.core import config as config_module
from fabriccap.core.config import (
    BUILTIN_PROFILES,
    OLD_FIELD_NAMES,
    Config,
    FabricProfile,
    build_config,
    default_config,
)
from fabriccap_devtools.reference.markdown import code, fenced, header, table

SOURCE = "operator/fabriccap/core/config.py"


@dataclass(frozen=True)
class ConfigField:
    path: str  # as written in the file: fabrics[].devicePlugin.namespaces
    type: str
    default: str
    description: str


def _nested_model(annotation: Any) -> tuple[type[BaseModel], bool] | None:
    """The model a field holds, and whether it holds a list of them (``tuple[Model, ...]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if typing.get_origin(annotation) in (tuple, list):
        arguments = [argument for argument in typing.get_args(annotation) if argument is not Ellipsis]
        if len(arguments) == 1 and isinstance(arguments[0], type) and issubclass(arguments[0], BaseModel):
            return arguments[0], True
    return None


def schema_type(schema: dict[str, Any], definitions: dict[str, Any]) -> str:
    """A JSON Schema fragment's type in words: ``list of string``, ``one of devicePlugin, dra``."""
    if "$ref" in schema:
        target = definitions[schema["$ref"].rsplit("/", 1)[1]]
        if "enum" in target:
            return "one of " + ", ".join(code(value) for value in target["enum"])
        return "object"
    if "anyOf" in schema:
        options = [option for option in schema["anyOf"] if option.get("type") != "null"]
        words = [schema_type(option, definitions) for option in options]
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
    json_type = schema.get("type")
    if json_type == "array":
        return "list of " + schema_type(schema.get("items", {}), definitions)
    if json_type == "object" and isinstance(schema.get("additionalProperties"), dict):
        return "map of string to " + schema_type(schema["additionalProperties"], definitions)
    return {"integer": "integer", "number": "number", "string": "string", "boolean": "boolean"}.get(
        str(json_type), str(json_type or "any")
    )


def _value(info: FieldInfo, value: Any) -> Any:
    """A default as it would be written in the file (tuples as lists, enums as their values)."""
    if info.annotation is None:
        return value
    return TypeAdapter(info.annotation).dump_python(value, mode="json", by_alias=True)


def _default(model: type[BaseModel], name: str, info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    if model is Config and name == "fabrics":
        profiles = default_config().fabrics
        return "the built-in profiles: " + ", ".join(
            f"{code(profile.name)} ({'enabled' if profile.enabled else 'disabled'})" for profile in profiles
        )
    value = _value(info, info.get_default(call_default_factory=True))
    if _nested_model(info.annotation) and not isinstance(value, list):
        return "see below"
    if value is None:
        return "none"
    return code(json.dumps(value))


def _description(info: FieldInfo) -> str:
    nested = _nested_model(info.annotation)
    text = info.description or (nested[0].__doc__ if nested else None) or ""
    return " ".join(text.split())


def config_fields(model: type[BaseModel] = Config, prefix: str = "") -> Iterator[ConfigField]:
    """Every field of ``model`` and the models below it, depth first, in declaration order."""
    schema = model.model_json_schema(by_alias=True)
    definitions = schema.get("$defs", {})
    old_names = {new: old for owner, old, new, _single in OLD_FIELD_NAMES if owner is model}
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = f"{prefix}{key}"
        yield ConfigField(
            path, schema_type(schema["properties"][key], definitions), _default(model, name, info), _description(info)
        )
        if key in old_names:
            yield ConfigField(
                f"{prefix}{old_names[key]}", "(old name)", "", f"The old name of {code(key)}, still read; not both."
            )
        nested = _nested_model(info.annotation)
        if nested is not None:
            child, is_list = nested
            yield from config_fields(child, f"{path}[]." if is_list else f"{path}.")


def _size_order(size: str) -> tuple[float, str]:
    matched = re.fullmatch(r"(\d*)xlarge", size)
    if matched:
        return float(matched.group(1) or 1), size
    return {"nano": 0.1, "micro": 0.2, "small": 0.3, "medium": 0.4, "large": 0.5, "metal": 1e6}.get(size, 1e5), size


def instance_type_order(name: str) -> tuple[str, float, str]:
    family, _, size = name.partition(".")
    return (family, *_size_order(size))


def _instance_table(profile: FabricProfile) -> str:
    catalog = next((known for known in load_catalogs() if known.resource == profile.resource), None)
    if catalog is None and not profile.instance_types:
        return "No instance catalog: every instance type is unknown (`MatchesInstanceType` is `Unknown`).\n"
    text = ""
    if catalog is not None:
        accelerators = profile.target_nodes.accelerator_resources
        rows = [
            [code(known.name), str(known.maximum), _accelerators(known.resources, accelerators)]
            for known in sorted(catalog, key=lambda known: instance_type_order(known.name))
            if known.accelerators(accelerators) > 0
        ]
        cpu_only: dict[int, int] = {}
        for known in catalog:
            if known.accelerators(accelerators) == 0 and known.maximum > 0:
                cpu_only[known.maximum] = cpu_only.get(known.maximum, 0) + 1
        spread = ", ".join(f"{types} with {maximum}" for maximum, types in sorted(cpu_only.items()))
        text = (
            f"Maxima come from the instance catalog generated from `{catalog.source}`"
            " (`pkg/providers/drametadata`; `fabriccap-dev catalog` regenerates it, the profile's `instanceTypes`"
            f" overrides or extends it): {len(catalog)} instance types. A type it does not list is unknown; 0 means"
            f" it cannot carry the fabric. Its accelerator types ({len(rows)}):\n\n"
            + table(["instance type", "maximum", "accelerators"], rows)
            + f"\nand {sum(cpu_only.values())} types without accelerators that carry it ({spread}).\n"
        )
    if not text:
        return ""
    if profile.isolated_instance_type_groups:
        groups = "; ".join(", ".join(code(name) for name in group) for group in profile.isolated_instance_type_groups)
        text += (
            f"\nIsolated groups (fabric traffic between a group's types and any other type is unsupported, so a"
            f" pool that mixes them is never uniform): {groups}.\n"
        )
    return text


def _accelerators(resources: Mapping[str, int], accelerators: tuple[str, ...]) -> str:
    return ", ".join(f"{resource}: {count}" for resource, count in resources.items() if resource in accelerators)


def builtin_profiles_section() -> str:
    enabled_by_default = {profile.name: profile.enabled for profile in default_config().fabrics}
    parts = [
        "## Built-in profiles\n\n"
        "Without a `fabrics` list the operator runs the built-in profiles as they are. A `fabrics` list"
        " replaces that list; an entry named like a built-in profile starts from it (and is enabled unless it"
        " says `enabled: false`), and the fields it gives replace the built-in ones: mappings merge key by"
        " key"
        + (
            " (except " + ", ".join(code(key) for key in sorted(config_module._REPLACED_MAPPINGS)) + ", replaced whole)"
            if config_module._REPLACED_MAPPINGS
            else ""
        )
        + ", anything else, lists included, is replaced. So `fabrics: [{name: efa}, {name: aks-rdma}]` runs both, and"
        " `fabrics: [{name: efa, devicePlugin: {namespaces: [efa]}}]` changes one field.\n"
    ]
    for name in BUILTIN_PROFILES:
        (profile,) = build_config({"fabrics": [{"name": name}]}, source=f"built-in profile {name}").fabrics
        values = profile.model_dump(by_alias=True, mode="json", exclude={"instance_types", "enabled"})
        state = "enabled" if enabled_by_default[name] else "disabled unless listed in `fabrics`"
        parts.append(
            f"### `{name}`\n\n{state.capitalize()}. Its values:\n\n"
            + fenced(yaml.safe_dump(values, sort_keys=False, width=100), "yaml")
            + "\n"
            + _instance_table(profile)
        )
    return "\n".join(parts)


def render() -> str:
    rows = [[code(field.path), field.type, field.default, field.description] for field in config_fields()]
    intro = " ".join((Config.__doc__ or "").split())
    return (
        header("Configuration", SOURCE)
        + f"\n{intro} It is validated when the operator starts: an invalid file stops it with exit code 2"
        " and a message naming the field, before anything is written. Unknown keys and duplicate keys are"
        " errors.\n\n"
        "`fabriccap config-schema` prints the same model as a JSON Schema (the Helm chart's `values.schema.json`"
        " embeds it for the `config` value); [`examples/config.yaml`](../../examples/config.yaml) shows a"
        " complete file.\n\n"
        "## Fields\n\n"
        "`fabrics[].` fields are those of one profile; their defaults are those of a profile of your own"
        " (one not named like a built-in profile, below).\n\n"
        + table(["field", "type", "default", "meaning"], rows)
        + "\n"
        + builtin_profiles_section()
    )
