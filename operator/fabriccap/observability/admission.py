"""A ValidatingAdmissionPolicy that warns, at ``kubectl apply`` time, about a workload that
will run over TCP: it selects a pool whose FabricCapability is Ready, requests an accelerator,
and does not request the fabric.

The policy's params are the FabricCapability objects themselves (``paramKind``), the Ready
ones (the operator labels them ``fabriccap.dev/ready: "true"``), so it needs no copy of any
pool's count: the warning names the count the object says. It only warns and audits
(``validationActions: [Warn, Audit]``) and never blocks (``failurePolicy: Ignore``): fabriccap
reports, it does not decide. It looks at Pods, batch Jobs and JobSets, at pod specs that
select the pool by a ``nodeSelector`` on its pool label key.

Written from the built-in config by ``make generate`` (the accelerator resources are the
profiles'), and shipped as a kustomize component and in the chart.
"""

from __future__ import annotations

from typing import Any

from fabriccap.core.api import GROUP, KIND, READY_LABEL, VERSION
from fabriccap.core.config import Config, default_config
from fabriccap.observability.generated import generated_header, to_yaml

POLICY_NAME = "fabriccap-fabric-request"
_CLAIM = "params.status.recommendation.resourceClaimTemplate.spec.devices.requests[0].exactly"
_COUNT = "has(params.status.uniformCount) ? ': ' + string(params.status.uniformCount) : ''"
HEADER = generated_header(__name__)


def _cel_list(values: list[str]) -> str:
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


def policy(config: Config) -> dict[str, Any]:
    accelerators = sorted(
        {resource for fabric in config.enabled_fabrics for resource in fabric.target_nodes.accelerator_resources}
    )
    requests = (
        "has(c.resources) && ((has(c.resources.limits) && {key} in c.resources.limits) || "
        "(has(c.resources.requests) && {key} in c.resources.requests))"
    )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": {"app.kubernetes.io/name": "fabriccap"}},
        "spec": {
            "failurePolicy": "Ignore",
            "paramKind": {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND},
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
                    {
                        "apiGroups": ["batch"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["jobs"],
                    },
                    {
                        "apiGroups": ["jobset.x-k8s.io"],
                        "apiVersions": ["v1alpha2"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["jobsets"],
                    },
                ]
            },
            "variables": [
                {
                    # The pod specs of the object.
                    "name": "podSpecs",
                    "expression": (
                        "object.kind == 'Pod' ? [object.spec] : "
                        "object.kind == 'Job' ? [object.spec.template.spec] : "
                        "object.kind == 'JobSet' && has(object.spec.replicatedJobs) ? "
                        "object.spec.replicatedJobs.map(r, r.template.spec.template.spec) : []"
                    ),
                },
                {
                    # Those that select the params' pool and use an accelerator, but neither the
                    # fabric's resource nor any claim (a claim may be the fabric's: not judged).
                    "name": "offending",
                    "expression": (
                        "has(params.status) && has(params.status.pool) ? variables.podSpecs.filter(s, "
                        "has(s.nodeSelector) && params.status.pool.key in s.nodeSelector && "
                        "s.nodeSelector[params.status.pool.key] == params.status.pool.value && "
                        "!has(s.resourceClaims) && "
                        "s.containers.exists(c, "
                        + _cel_list(accelerators)
                        + ".exists(a, "
                        + requests.format(key="a")
                        + ")) && "
                        "!s.containers.exists(c, " + requests.format(key="params.status.resourceName") + ")) : []"
                    ),
                },
                {"name": "count", "expression": _COUNT},
                {
                    # What to ask for: the extended resource, or (a DRA-only pool) a claim.
                    "name": "request",
                    "expression": (
                        "has(params.status.recommendation) && has(params.status.recommendation.resourceClaimTemplate) "
                        "&& !has(params.status.recommendation.resourcesPerNode) ? "
                        f"'a ResourceClaim of DeviceClass ' + {_CLAIM}.deviceClassName + "
                        f"' for ' + string({_CLAIM}.count) + ' devices per node' : "
                        "params.status.resourceName + variables.count + ' per node'"
                    ),
                },
            ],
            "validations": [
                {
                    "expression": "size(variables.offending) == 0",
                    "messageExpression": (
                        "object.kind + ' ' + object.metadata.name + ' runs on pool ' + params.status.pool.value + "
                        "' where ' + params.status.resourceName + variables.count + "
                        "' is Ready (FabricCapability ' + params.metadata.name + '), but requests an accelerator "
                        "and no ' + params.status.resourceName + ': NCCL will use TCP sockets; request ' + "
                        "variables.request"
                    ),
                    "reason": "Invalid",
                }
            ],
        },
    }


def binding() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME, "labels": {"app.kubernetes.io/name": "fabriccap"}},
        "spec": {
            "policyName": POLICY_NAME,
            "validationActions": ["Warn", "Audit"],
            "paramRef": {"selector": {"matchLabels": {READY_LABEL: "true"}}, "parameterNotFoundAction": "Allow"},
        },
    }


def policy_yaml(config: Config | None = None) -> str:
    documents = [policy(config or default_config()), binding()]
    return HEADER + "---\n".join(to_yaml(document) for document in documents)


CHART_NAME = '{{ include "fabriccap.fullname" . }}-fabric-request'


def _indented(document: dict[str, Any], spaces: int) -> str:
    pad = " " * spaces
    return "".join(pad + line if line.strip() else line for line in to_yaml(document).splitlines(keepends=True))


def chart_template(config: Config | None = None) -> str:
    """The chart's template: the same policy and binding, named after the release and labelled
    like the chart's other objects, so two releases (or Helm and kustomize) never claim one."""
    objects = [policy(config or default_config()), binding()]
    objects[1]["spec"]["policyName"] = "@POLICY_NAME@"
    parts = []
    for obj in objects:
        spec = _indented({"spec": obj["spec"]}, 0).replace("@POLICY_NAME@", CHART_NAME)
        parts.append(
            f"apiVersion: {obj['apiVersion']}\n"
            f"kind: {obj['kind']}\n"
            "metadata:\n"
            f"  name: {CHART_NAME}\n"
            "  labels:\n"
            '    {{- include "fabriccap.labels" . | nindent 4 }}\n' + spec
        )
    return (
        "{{- /* " + HEADER.strip().removeprefix("# ") + " */ -}}\n"
        "{{- if .Values.admissionPolicy.enabled }}\n" + "---\n".join(parts) + "{{- end }}\n"
    )
