"""A ValidatingAdmissionPolicy that warns, at ``kubectl apply`` time, about a workload that
will run over TCP: it selects a pool whose FabricCapability is Ready, requests an accelerator,
and does not request the fabric.

The policy's params are the FabricCapability objects themselves (``paramKind``), the Ready
ones (the operator labels them ``fabriccap.dev/ready: "true"``, an empty launchable NodePool
included), so it needs no copy of any pool's count: the warning names the count the object
says. It only warns and audits (``validationActions: [Warn, Audit]``) and never blocks
(``failurePolicy: Ignore``): fabriccap reports, it does not decide.

It reads every admitted kind of the one table (core.workload_kinds), by API group and
resource (a Volcano ``batch.volcano.sh`` Job is not a batch Job), at the pod template paths
the table gives, and only objects nobody controls (a user's TrainJob, not the JobSet its
controller makes: that warning would go to the controller). A pod template selects the pool by
a ``nodeSelector`` on the pool's key, or by a required node affinity whose every term has
``key In [value]``. A kind whose CRD is absent leaves its rule inert: the API server accepts
rules for resources it does not serve.

CEL notes (research/workloads §4, verified on kube-apiserver v1.35.4): every field is reached
with optionals, so a missing field at any level is "no", never an error (an error under
``Ignore`` is silent); a quantity in a CRD object may reach CEL as an int, so values are
tested with ``dyn()``; a resource key is looked up before any ``quantity()`` call, so a pod
of thousands of containers without accelerators stays cheap.

Written from the built-in config by ``make generate`` (the accelerator resources are the
profiles'), and shipped as a kustomize component and in the chart.
"""

from __future__ import annotations

from typing import Any

from fabriccap.core.api import GROUP, KIND, READY_LABEL, VERSION
from fabriccap.core.config import Config, default_config
from fabriccap.core.workload_kinds import ADMITTED, WorkloadKind, parse_path
from fabriccap.observability.generated import generated_header, to_yaml

POLICY_NAME = "fabriccap-fabric-request"
_CLAIM = "params.status.recommendation.resourceClaimTemplate.spec.devices.requests[0].exactly"
HEADER = generated_header(__name__)
# Said for a kind whose CEL key is not in the table (cannot happen: every rule comes from it).
_ANY_TEMPLATE = "its pod template's containers[].resources"


def _cel_list(values: list[str]) -> str:
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


def resource_key(kind: WorkloadKind) -> str:
    """What ``variables.resource`` is for a request on this kind: ``group/plural``."""
    return f"{kind.group}/{kind.plural}"


def templates_cel(path: str) -> str:
    """A CEL list of the objects at ``path`` in ``object`` (core.workload_kinds' grammar):
    optionals while the path is single-valued, then filter/map over lists. A missing field or
    an empty list gives an empty list."""
    steps = parse_path(path)
    current, optional, listed = "object", False, False
    for step in steps:
        if not listed and step.field == "*":
            mapping = f"{current}.orValue({{}})" if optional else current
            current, listed = f"{mapping}.map(k, {mapping}[k])", True
        elif not listed:
            current, optional = f"{current}.?{step.field}", True
            if step.iterate:
                current, listed = f"{current}.orValue([])", True
        elif step.field == "*":
            current = f"{current}.map(m, m.map(k, m[k])).flatten()"
        else:
            current = f"{current}.filter(x, has(x.{step.field})).map(x, x.{step.field})"
            if step.iterate:
                current += ".flatten()"
        if step.where is not None:
            field, value = step.where
            current = f"{current}.filter(x, x.?{field}.orValue('') == '{value}')"
    if not listed:
        current = f"{current}.optMap(t, [t]).orValue([])" if optional else f"[{current}]"
    return current


def pod_specs_cel(paths: tuple[str, ...]) -> str:
    """The pod specs of the templates at ``paths``, as one CEL list."""
    return " + ".join(f"{templates_cel(path)}.filter(t, has(t.spec)).map(t, t.spec)" for path in paths) or "[]"


def _positive(value: str) -> str:
    """A quantity > 0, as a string (built-in kinds), an int or a float (CRD and schemaless
    objects): `8`, `"8"`, `"8000m"`, `"1e1"`, `"+8"` ask; `0`, `"0"` and garbage do not."""
    v = f"dyn({value})"
    return (
        f"(type({v}) == int ? {v} > 0 : type({v}) == double ? {v} > 0.0 : "
        f"type({v}) == string && isQuantity({v}) && quantity({v}).isGreaterThan(quantity('0')))"
    )


def _asks(resources: str, resource: str) -> str:
    """Whether a ResourceRequirements (an optional) asks for ``resource`` in limits or requests."""
    return " || ".join(
        f"{resources}.?{part}[?{resource}].optMap(v, {_positive('v')}).orValue(false)"
        for part in ("limits", "requests")
    )


def _selects(spec: str) -> str:
    terms = (
        f"{spec}.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([])"
    )
    return (
        f"({spec}.?nodeSelector[?variables.poolKey].orValue('') == variables.poolValue || "
        f"(size({terms}) > 0 && {terms}.all(t, t.?matchExpressions.orValue([]).exists(e, "
        "e.?key.orValue('') == variables.poolKey && e.?operator.orValue('') == 'In' && "
        "e.?values.orValue([]) == [variables.poolValue]))))"
    )


def _where_cel() -> str:
    entries = ", ".join(f"'{resource_key(kind)}': '{kind.kind}: {kind.request_field}'" for kind in ADMITTED)
    return f'{{{entries}}}[?variables.resource].orValue("{_ANY_TEMPLATE}")'


def _pod_specs_variable() -> str:
    branches = [
        f"variables.resource == '{resource_key(kind)}' ? {pod_specs_cel(kind.pod_templates)} : "
        for kind in ADMITTED
        if kind.pod_templates
    ]
    return "".join(branches) + "[]"


def _per_node_variables(accelerators: str) -> list[dict[str, str]]:
    """Kinds that carry their per-node resources themselves (a TrainJob): they offend when they
    select the pool through a template of theirs and those resources ask for an accelerator and
    not the fabric. The runtime's own template is out of reach (docs/workloads.md)."""
    branches = []
    for kind in ADMITTED:
        if kind.resources_per_node is None:
            continue
        resources = "object." + ".".join(f"?{part}" for part in kind.resources_per_node.split("."))
        branches.append(
            f"(variables.resource == '{resource_key(kind)}' && "
            f"({pod_specs_cel(kind.selector_templates)}).exists(s, {_selects('s')}) && "
            f"{accelerators}.exists(a, {_asks(resources, 'a')}) && "
            f"!({_asks(resources, 'variables.fabric')}))"
        )
    return [{"name": "perNodeOffends", "expression": " || ".join(branches) or "false"}]


def policy(config: Config, failure_policy: str = "Ignore") -> dict[str, Any]:
    accelerators = _cel_list(
        sorted(
            {resource for fabric in config.enabled_fabrics for resource in fabric.target_nodes.accelerator_resources}
        )
    )
    container_asks = "s.?containers.orValue([]).exists(c, {test})"
    trainer = next((kind for kind in ADMITTED if kind.resources_per_node is not None), None)
    # Trainer v2.3 merges resourcesPerNode into the runtime's `node` container key by key: a
    # runtime that asks for the fabric keeps it, which the policy cannot see (docs/workloads.md).
    caveat = (
        f"(variables.resource == '{resource_key(trainer)}' ? \" (unless runtime \" + "
        "object.spec.?runtimeRef.?name.orValue('?') + \" requests it: Trainer v2.3 and later keep the "
        "runtime's requests that resourcesPerNode does not name)\" : '')"
        if trainer is not None
        else "''"
    )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": {"app.kubernetes.io/name": "fabriccap"}},
        "spec": {
            "failurePolicy": failure_policy,
            "paramKind": {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND},
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [kind.group],
                        "apiVersions": list(kind.versions),
                        # A Pod only at creation (its spec is immutable); a workload also when
                        # `kubectl apply` changes it.
                        "operations": ["CREATE"] if kind.plural == "pods" else ["CREATE", "UPDATE"],
                        "resources": [kind.plural],
                    }
                    for kind in ADMITTED
                ]
            },
            "matchConditions": [
                {
                    # What a user submitted, not what a controller made from it: a warning on a
                    # TrainJob's JobSet, or a Job's Pod, goes to the controller and nobody reads it.
                    "name": "submitted-by-a-user",
                    "expression": (
                        "!object.metadata.?ownerReferences.orValue([]).exists(r, r.?controller.orValue(false))"
                    ),
                }
            ],
            "variables": [
                {"name": "resource", "expression": "request.resource.group + '/' + request.resource.resource"},
                {"name": "poolKey", "expression": "params.?status.?pool.?key.orValue('')"},
                {"name": "poolValue", "expression": "params.?status.?pool.?value.orValue('')"},
                {"name": "fabric", "expression": "params.?status.?resourceName.orValue('')"},
                {"name": "podSpecs", "expression": _pod_specs_variable()},
                {
                    # Those that select the params' pool and use an accelerator, but neither the
                    # fabric's resource nor any claim (a claim may be the fabric's: not judged).
                    "name": "offending",
                    "expression": (
                        "variables.poolKey == '' || variables.fabric == '' ? [] : variables.podSpecs.filter(s, "
                        + _selects("s")
                        + " && !has(s.resourceClaims) && "
                        + container_asks.format(test=f"{accelerators}.exists(a, {_asks('c.?resources', 'a')})")
                        + " && !"
                        + container_asks.format(test=_asks("c.?resources", "variables.fabric"))
                        + ")"
                    ),
                },
                *(
                    {
                        "name": v["name"],
                        "expression": "variables.poolKey != '' && variables.fabric != '' && " + v["expression"],
                    }
                    for v in _per_node_variables(accelerators)
                ),
                {
                    # The count to ask for: the recommendation (an empty launchable NodePool's
                    # comes from the catalog), else the count every node has.
                    "name": "count",
                    "expression": (
                        "params.status.?recommendation.?resourcesPerNode[?variables.fabric].optMap(n, ': ' + string(n))"
                        ".orValue(has(params.status.uniformCount) ? ': ' + string(params.status.uniformCount) : '')"
                    ),
                },
                {"name": "where", "expression": _where_cel()},
                {
                    # What to ask for: the extended resource, or (a DRA-only pool) a claim.
                    "name": "request",
                    "expression": (
                        "has(params.status.recommendation) && has(params.status.recommendation.resourceClaimTemplate) "
                        "&& !has(params.status.recommendation.resourcesPerNode) ? "
                        f"'a ResourceClaim of DeviceClass ' + {_CLAIM}.deviceClassName + "
                        f"' for ' + string({_CLAIM}.count) + ' devices per node' : "
                        "variables.fabric + variables.count + ' per node'"
                    ),
                },
            ],
            "validations": [
                {
                    "expression": "size(variables.offending) == 0 && !variables.perNodeOffends",
                    # The change first: when a response's warnings pass 4 KiB, each is cut to 256 runes.
                    "messageExpression": (
                        "'request ' + variables.request + ' in ' + variables.where + ': ' + request.kind.kind + ' ' + "
                        "object.metadata.?name.orValue('') + ' selects pool ' + variables.poolValue + "
                        "' where ' + variables.fabric + variables.count + ' is Ready (FabricCapability ' + "
                        "params.metadata.name + '), and requests an accelerator but no ' + variables.fabric + "
                        "': NCCL will use TCP sockets' + " + caveat
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
