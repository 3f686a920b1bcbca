"""The Helm chart's ``values.schema.json``: the chart's own values, and ``config`` from the model.

Helm validates the merged values against this schema before rendering, so ``helm install``
and ``helm upgrade`` refuse a typo (``resources.limits.memroy``) or a config of the wrong
shape (``config.fabrics[0].resource: 12``) with a message naming the value, instead of
rendering a pod that crash-loops. The rules no JSON Schema can say (unique fabric names,
ascending read steps, a quantity's size, transport without workloads) are the chart's checks
in templates/_helpers.tpl. The ``config`` part is ``config_input_schema()``, the
one ``fabriccap config-schema`` prints; the names of ``prometheusRule.rules`` are the shipped
alerts. Kubernetes objects passed through as they are (affinity, tolerations, security
contexts) are checked only for their outer type: the apiserver validates the rest.
"""

from __future__ import annotations

import json
from typing import Any

from fabriccap.core.config import CONFIG_SCHEMA_DIALECT, config_input_schema, label_key_schema, label_value_schema
from fabriccap.core.shard import MAX_SHARDS
from fabriccap.observability.alerts import ALERTS

Schema = dict[str, Any]

STRING: Schema = {"type": "string"}
BOOLEAN: Schema = {"type": "boolean"}
STRING_MAP: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
# A Kubernetes object or list of objects handed to the apiserver unchanged.
KUBE_OBJECT: Schema = {"type": "object"}
KUBE_OBJECTS: Schema = {"type": "array", "items": {"type": "object"}}
PORT: Schema = {"type": "integer", "minimum": 1, "maximum": 65535}
# Kubernetes' resource.Quantity, as its OpenAPI schema spells it (int-or-string).
QUANTITY: Schema = {
    "type": ["string", "number"],
    "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
}
INT_OR_PERCENT: Schema = {"type": ["integer", "string"], "minimum": 0, "pattern": r"^[0-9]+%?$"}
# Prometheus durations, as the Prometheus Operator's CRDs pattern them.
DURATION: Schema = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
DNS_LABEL_OR_EMPTY: Schema = {"type": "string", "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$", "maxLength": 63}
# A name the chart makes object names of, the Service's included: a DNS-1035 label (a letter first).
DNS_1035_LABEL_OR_EMPTY: Schema = {"type": "string", "pattern": r"^([a-z]([-a-z0-9]*[a-z0-9])?)?$", "maxLength": 63}
DNS_SUBDOMAIN_OR_EMPTY: Schema = {
    "type": "string",
    "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$",
    "maxLength": 253,
}


def _labels() -> Schema:
    """Labels a user adds to an object the chart labels: valid keys and values. None of the
    chart's own labels either, which the chart's checks refuse by name (fabriccap.checkValues)."""
    return {"type": "object", "propertyNames": label_key_schema(), "additionalProperties": label_value_schema()}


def _object(properties: dict[str, Schema], description: str = "", **extra: Any) -> Schema:
    """A mapping of known keys only: an unknown key is a typo, and Helm would ignore it."""
    schema: Schema = {"type": "object", "additionalProperties": False, "properties": properties, **extra}
    if description:
        schema = {"description": description, **schema}
    return schema


def _deprecated(schema: Schema, new_name: str) -> Schema:
    return {**schema, "deprecated": True, "description": f"old name of {new_name}, still read"}


def _resource_list() -> Schema:
    # Extended resources are domain-prefixed (example.com/foo); anything else is a typo.
    return _object(
        {"cpu": QUANTITY, "memory": QUANTITY, "ephemeral-storage": QUANTITY},
        patternProperties={"^hugepages-": QUANTITY, "/": QUANTITY},
    )


def _probe(path: str, success_threshold: bool) -> Schema:
    properties: dict[str, Schema] = {
        "enabled": BOOLEAN,
        "initialDelaySeconds": {"type": "integer", "minimum": 0},
        "periodSeconds": {"type": "integer", "minimum": 1},
        "timeoutSeconds": {"type": "integer", "minimum": 1},
        "failureThreshold": {"type": "integer", "minimum": 1},
    }
    if success_threshold:  # Kubernetes requires 1 for liveness and startup probes
        properties["successThreshold"] = {"type": "integer", "minimum": 1}
    return _object(properties, f"an HTTP probe of {path} on the health port")


def _alert_settings() -> Schema:
    # Each alert by name (not propertyNames), so a misspelt one is named in Helm's message.
    settings = _object({"enabled": BOOLEAN, "for": DURATION, "severity": {**STRING, "minLength": 1}})
    return _object({rule.name: settings for rule in ALERTS}, "per alert, by name: enabled, for, severity")


def values_schema() -> Schema:
    config = config_input_schema()
    definitions = config.pop("$defs")
    config.pop("$schema")
    assert "Config" not in definitions, "the config's own definitions must not hide the Config definition"
    definitions["Config"] = config
    properties: dict[str, Schema] = {
        "replicaCount": {
            "type": "integer",
            "minimum": 0,
            "description": "replicas; they elect a leader (Lease fabriccap-leader), only it writes",
        },
        "sharding": _object(
            {"shards": {"type": "integer", "minimum": 1, "maximum": MAX_SHARDS}},
            "shards: one Deployment per shard, each answering for the pools whose value hashes to it",
        ),
        "image": _object(
            {
                "repository": {**STRING, "minLength": 1},
                "tag": STRING,
                "digest": {**STRING, "pattern": "^(sha256:[0-9a-f]{64})?$"},
                "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
            }
        ),
        "imagePullSecrets": {"type": "array", "items": _object({"name": STRING}, required=["name"])},
        "nameOverride": DNS_1035_LABEL_OR_EMPTY,
        "fullnameOverride": DNS_1035_LABEL_OR_EMPTY,
        "serviceAccount": _object({"create": BOOLEAN, "name": DNS_SUBDOMAIN_OR_EMPTY, "annotations": STRING_MAP}),
        "config": {"$ref": "#/$defs/Config"},
        "logLevel": {"enum": ["debug", "info", "warning", "error"]},
        "logFormat": {"enum": ["text", "json"]},
        "extraArgs": {"type": "array", "items": STRING},
        "extraEnv": {
            "type": "array",
            "items": {"type": "object", "required": ["name"], "properties": {"name": {**STRING, "minLength": 1}}},
        },
        "resources": _object({"requests": _resource_list(), "limits": _resource_list(), "claims": KUBE_OBJECTS}),
        "podDisruptionBudget": _object(
            {
                "minAvailable": INT_OR_PERCENT,
                "maxUnavailable": INT_OR_PERCENT,
                "unhealthyPodEvictionPolicy": {"enum": ["IfHealthyBudget", "AlwaysAllow"]},
            },
            "the spec of the PodDisruptionBudget; maxUnavailable: null for none ({} merges over the default and"
            " keeps it); a minAvailable replaces maxUnavailable",
        ),
        "startupProbe": _probe("/healthz", success_threshold=False),
        "livenessProbe": _probe("/healthz", success_threshold=False),
        "readinessProbe": _probe(
            "/readyz (/healthz's answer, 503 until the cluster is listed)", success_threshold=True
        ),
        "nodeSelector": STRING_MAP,
        "tolerations": KUBE_OBJECTS,
        "affinity": KUBE_OBJECT,
        "topologySpreadConstraints": {
            "type": "array",
            "items": {"type": "object", "required": ["maxSkew", "topologyKey", "whenUnsatisfiable"]},
        },
        "priorityClassName": STRING,
        "podAnnotations": STRING_MAP,
        "podLabels": _labels(),
        "podSecurityContext": KUBE_OBJECT,
        "securityContext": KUBE_OBJECT,
        "metrics": _object(
            {
                "port": PORT,
                "service": _object(
                    {"type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]}, "annotations": STRING_MAP}
                ),
            }
        ),
        "health": _object({"port": PORT}),
        "networkPolicy": _object(
            {"enabled": BOOLEAN, "metricsFrom": KUBE_OBJECTS, "healthFrom": KUBE_OBJECTS},
            "a NetworkPolicy: ingress to the metrics and health ports from the peers listed only",
        ),
        "prometheusRelease": label_value_schema(),
        "serviceMonitor": _object(
            {
                "enabled": BOOLEAN,
                "namespace": DNS_LABEL_OR_EMPTY,
                "interval": DURATION,
                "scrapeTimeout": DURATION,
                "additionalLabels": _labels(),
                "labels": _deprecated(_labels(), "additionalLabels"),
                "relabelings": KUBE_OBJECTS,
                "metricRelabelings": KUBE_OBJECTS,
            }
        ),
        "prometheusRule": _object(
            {
                "enabled": BOOLEAN,
                "namespace": DNS_LABEL_OR_EMPTY,
                "additionalLabels": _labels(),
                "labels": _deprecated(_labels(), "additionalLabels"),
                "additionalRuleLabels": STRING_MAP,
                "job": STRING,
                "rules": _alert_settings(),
            }
        ),
        "admissionPolicy": _object({"enabled": BOOLEAN}),
        "transport": _object(
            {"enabled": BOOLEAN},
            "read NCCL's choice from the pods' logs: grants get on pods/log and sets config.transport.enabled",
        ),
        "dashboard": _object({"enabled": BOOLEAN, "namespace": DNS_LABEL_OR_EMPTY, "labels": _labels()}),
        # Helm's own: values shared with subcharts (this chart has none).
        "global": KUBE_OBJECT,
    }
    return {
        "$schema": CONFIG_SCHEMA_DIALECT,
        "title": "fabriccap Helm chart values",
        **_object(properties),
        "$defs": definitions,
    }


def values_schema_json() -> str:
    return json.dumps(values_schema(), indent=2) + "\n"
