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
of thousands of containers without accelerators stays cheap. Only what the CEL of the oldest
Kubernetes the policy is for has (``OLDEST_KUBERNETES``; tests/repo/test_admission_cel.py
compiles it as that server does): a list in a list is searched with nested ``exists``, never
``flatten()``, which came in 1.34 (a server refuses a policy that names what it lacks).

Written by ``make generate`` and shipped as a kustomize component and in the chart. The
accelerator resources are the enabled profiles' (what the operator's ``withoutFabric`` counts),
in one variable: the component's are the built-in config's, the chart's are rendered from its
``config`` value (``_chart_accelerators``), the values the operator's ConfigMap is made of. What
asks for a fabric (its resource, or a fabric DeviceClass's implicit resource: core.workloads
``fabric_request_resources``, what ``requestingFabric`` counts) comes the same way, each enabled
fabric's in one variable (``_chart_fabric_requests`` in the chart), the params' ``status.fabric``
picking the pool's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fabriccap.core.api import GROUP, KIND, READY_LABEL, VERSION
from fabriccap.core.config import (
    BUILTIN_PROFILES,
    OLD_FIELD_NAMES,
    Config,
    DraSettings,
    FabricProfile,
    Source,
    TargetNodes,
    config_input_schema,
    default_config,
)
from fabriccap.core.selection import IMPLICIT_RESOURCE_PREFIX
from fabriccap.core.workload_kinds import ADMITTED, TEMPLATE_RESOURCES, Step, WorkloadKind, parse_path
from fabriccap.core.workloads import fabric_request_resources
from fabriccap.observability.generated import generated_header, to_yaml

POLICY_NAME = "fabriccap-fabric-request"
# The oldest Kubernetes the policy is for: admissionregistration.k8s.io/v1
# ValidatingAdmissionPolicy is served from 1.30. Its CEL must compile there (a 1.30 server
# compiles a new policy with the 1.29 environment: fabriccap_devtools.celcheck, tested).
OLDEST_KUBERNETES = "1.30"
ACCELERATORS_VARIABLE = "accelerators"
_ACCELERATORS = f"variables.{ACCELERATORS_VARIABLE}"
FABRIC_REQUESTS_VARIABLE = "fabricRequests"
# What asks for the params' fabric: its resourceName and the rest of what the operator counts.
FABRIC_RESOURCES_VARIABLE = "fabricResources"
_FABRIC_RESOURCES = f"variables.{FABRIC_RESOURCES_VARIABLE}"
_CLAIM = "params.status.recommendation.resourceClaimTemplate.spec.devices.requests[0].exactly"
HEADER = generated_header(__name__)
# Said for a kind whose CEL key is not in the table (cannot happen: every rule comes from it).
_ANY_TEMPLATE = "its pod template's containers[].resources"


def _cel_list(values: list[str]) -> str:
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


def accelerator_resources(config: Config) -> list[str]:
    """The resources whose request makes a template an accelerator's: every enabled profile's
    ``targetNodes.acceleratorResources``, sorted, each once (what ``withoutFabric`` counts)."""
    return sorted(
        {resource for fabric in config.enabled_fabrics for resource in fabric.target_nodes.accelerator_resources}
    )


def fabric_requests(config: Config) -> list[tuple[str, str]]:
    """Every enabled profile's name with each resource a request of which asks for its fabric
    (core.workloads ``fabric_request_resources``, what the operator's ``requestingFabric``
    counts), in the config's order."""
    return [
        (fabric.name, resource) for fabric in config.enabled_fabrics for resource in fabric_request_resources(fabric)
    ]


def _cel_pairs(pairs: list[tuple[str, str]]) -> str:
    return "[" + ", ".join(f"['{name}', '{resource}']" for name, resource in pairs) + "]"


def resource_key(kind: WorkloadKind) -> str:
    """What ``variables.resource`` is for a request on this kind: ``group/plural``."""
    return f"{kind.group}/{kind.plural}"


def _some(current: str, optional: bool, steps: tuple[Step, ...], test: Callable[[str], str], depth: int) -> str:
    """CEL: whether some value at ``steps`` from ``current`` (an optional when ``optional``)
    passes ``test``. Optionals while the path is single-valued, then one ``exists`` per list or
    map, nested: no ``flatten()``, which the CEL of Kubernetes before 1.34 lacks (a policy that
    names it is refused at creation). A missing field, or an empty list, is "no"."""
    if not steps:
        return f"{current}.optMap(s, {test('s')}).orValue(false)" if optional else test(current)
    step, rest = steps[0], steps[1:]
    if step.field == "*":
        mapping = f"{current}.orValue({{}})" if optional else current
        key = f"k{depth}"
        return f"{mapping}.exists({key}, {_some(f'{mapping}[{key}]', False, rest, test, depth + 1)})"
    field = f"{current}.?{step.field}"
    if not step.iterate:
        return _some(field, True, rest, test, depth)
    item = f"x{depth}"
    inner = _some(item, False, rest, test, depth + 1)
    if step.where is not None:
        name, value = step.where
        test_item = f"{item}.?{name}.orValue('') == '{value}'"
        if step.where_list is not None:
            entry = f"w{depth}"
            test_item = (
                f"{item}.?{step.where_list}.orValue([]).exists({entry}, {entry}.?{name}.orValue('') == '{value}')"
            )
        inner = f"{test_item} && {inner}"
    return f"{field}.orValue([]).exists({item}, {inner})"


def some_template(path: str, test: Callable[[str], str]) -> str:
    """CEL: whether some object at ``path`` in ``object`` (core.workload_kinds' grammar) passes
    ``test``, which is given the CEL name of the object."""
    return _some("object", False, parse_path(path), test, 0)


def some_pod_spec(paths: tuple[str, ...], test: Callable[[str], str]) -> str:
    """CEL: whether the pod spec of some template at ``paths`` passes ``test``."""
    return " || ".join(f"({some_template(f'{path}.spec' if path else 'spec', test)})" for path in paths) or "false"


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


# A map key the warning names (a replica type: Master, Launcher): bounded and of the characters a
# replica type has; any other key is said as `*`.
_KEY_SHOWN = "^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"


def _template_where(kind: WorkloadKind, path: str) -> str:
    """CEL string: ``Kind: `` and where the request goes in the pod template at ``path``, one
    that offends: its path, then the pod spec's ``containers[].resources``. A map of templates
    (``*`` reached through single fields: Master, Launcher) is said by the key of the template
    that offends, the first in order when several do (a map's keys come in no fixed order)."""
    parts = [*(path.split(".") if path else []), "spec", TEMPLATE_RESOURCES]
    steps = parse_path(path)
    many = next((i for i, step in enumerate(steps) if step.field == "*" or step.iterate), None)
    if many is None or steps[many].field != "*":
        return f"'{kind.kind}: {'.'.join(parts)}'"
    mapping = "object" + "".join(f".?{step.field}" for step in steps[:many]) + ".orValue({})"
    template_spec = parse_path(".".join(parts[many + 1 : -1]))
    keys = f"{mapping}.filter(k, {_some(f'{mapping}[k]', False, template_spec, _offends(), 1)})"
    key = f"{keys}.map(k, k.matches('{_KEY_SHOWN}') ? k : '*').min()"
    return f"'{kind.kind}: {'.'.join(parts[:many])}.' + {key} + '.{'.'.join(parts[many + 1 :])}'"


def _where_variable() -> str:
    """CEL: ``Kind: path`` of the template that offends, the first of the kind's that does (a
    RayJob whose head asks for a GPU without the fabric is sent to its head), or the kind's
    request field when the object carries its per-node resources itself (a TrainJob)."""
    branches = []
    for kind in ADMITTED:
        if kind.resources_per_node is not None or not kind.pod_templates:
            where = f"'{kind.kind}: {kind.request_field}'"
        else:
            # The last template offends when no other does (``offends`` held).
            *others, last = kind.pod_templates
            where = "".join(
                f"({some_pod_spec((path,), _offends())}) ? {_template_where(kind, path)} : " for path in others
            ) + _template_where(kind, last)
        branches.append(f"variables.resource == '{resource_key(kind)}' ? ({where}) : ")
    return "".join(branches) + f'"{_ANY_TEMPLATE}"'


def _offends() -> Callable[[str], str]:
    """CEL, for a pod spec: it selects the params' pool and uses an accelerator, but neither a
    resource that asks for the fabric (the fabric's, or its DeviceClass's implicit one: what the
    operator counts) nor any claim (a claim may be the fabric's: not judged)."""

    def containers_ask(spec: str, test: str) -> str:
        # The job's containers and its native sidecars (init containers with restartPolicy
        # Always), which run beside them and hold their devices; a plain init container's end
        # with it (core.facts ``requested_by_app``, where the operator counts the same).
        # Two searches, not one over a list built of both: building it (and filtering the init
        # containers) cost every template its containers' length again, 45% more in all.
        return (
            f"({spec}.?containers.orValue([]).exists(c, {test}) || {spec}.?initContainers.orValue([])"
            f".exists(c, c.?restartPolicy.orValue('') == 'Always' && {test}))"
        )

    def test(spec: str) -> str:
        return (
            f"{_selects(spec)} && size({spec}.?resourceClaims.orValue([])) == 0 && "
            + containers_ask(spec, f"{_ACCELERATORS}.exists(a, {_asks('c.?resources', 'a')})")
            + " && !"
            + containers_ask(spec, f"{_FABRIC_RESOURCES}.exists(f, {_asks('c.?resources', 'f')})")
        )

    return test


def _offends_variable() -> str:
    branches = [
        f"variables.resource == '{resource_key(kind)}' ? {some_pod_spec(kind.pod_templates, _offends())} : "
        for kind in ADMITTED
        if kind.pod_templates
    ]
    return "".join(branches) + "false"


def _per_node_variables() -> list[dict[str, str]]:
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
            f"({some_pod_spec(kind.selector_templates, _selects)}) && "
            f"{_ACCELERATORS}.exists(a, {_asks(resources, 'a')}) && "
            f"!{_FABRIC_RESOURCES}.exists(f, {_asks(resources, 'f')}))"
        )
    return [{"name": "perNodeOffends", "expression": " || ".join(branches) or "false"}]


def policy(config: Config, failure_policy: str = "Ignore") -> dict[str, Any]:
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
                # The enabled profiles' accelerator resources (the chart's from its config value).
                {"name": ACCELERATORS_VARIABLE, "expression": _cel_list(accelerator_resources(config))},
                {"name": "resource", "expression": "request.resource.group + '/' + request.resource.resource"},
                {"name": "poolKey", "expression": "params.?status.?pool.?key.orValue('')"},
                {"name": "poolValue", "expression": "params.?status.?pool.?value.orValue('')"},
                {"name": "fabric", "expression": "params.?status.?resourceName.orValue('')"},
                # The enabled profiles' names, each with a resource whose request asks for its
                # fabric (the chart's from its config value), and of them the params' fabric's.
                {"name": FABRIC_REQUESTS_VARIABLE, "expression": _cel_pairs(fabric_requests(config))},
                {
                    "name": FABRIC_RESOURCES_VARIABLE,
                    "expression": (
                        f"[variables.fabric] + variables.{FABRIC_REQUESTS_VARIABLE}.filter(p, "
                        "p[0] == params.?status.?fabric.orValue('') && p[1] != variables.fabric).map(p, p[1])"
                    ),
                },
                {
                    # Whether a pod template of the object offends (_offends).
                    "name": "offends",
                    "expression": "variables.poolKey != '' && variables.fabric != '' && (" + _offends_variable() + ")",
                },
                *(
                    {
                        "name": v["name"],
                        "expression": "variables.poolKey != '' && variables.fabric != '' && " + v["expression"],
                    }
                    for v in _per_node_variables()
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
                {"name": "where", "expression": _where_variable()},
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
                    "expression": "!variables.offends && !variables.perNodeOffends",
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
    (accelerators,) = (v for v in objects[0]["spec"]["variables"] if v["name"] == ACCELERATORS_VARIABLE)
    accelerators["expression"] = "@ACCELERATORS@"
    (requests,) = (v for v in objects[0]["spec"]["variables"] if v["name"] == FABRIC_REQUESTS_VARIABLE)
    requests["expression"] = "@FABRIC_REQUESTS@"
    parts = []
    for obj in objects:
        spec = (
            _indented({"spec": obj["spec"]}, 0)
            .replace("@POLICY_NAME@", CHART_NAME)
            .replace("'@ACCELERATORS@'", f'{{{{ include "{ACCELERATORS_TEMPLATE}" . | quote }}}}')
            .replace("'@FABRIC_REQUESTS@'", f'{{{{ include "{FABRIC_REQUESTS_TEMPLATE}" . | quote }}}}')
        )
        parts.append(
            f"apiVersion: {obj['apiVersion']}\n"
            f"kind: {obj['kind']}\n"
            "metadata:\n"
            f"  name: {CHART_NAME}\n"
            "  labels:\n"
            '    {{- include "fabriccap.labels" . | nindent 4 }}\n' + spec
        )
    return (
        "{{- /* "
        + HEADER.strip().removeprefix("# ")
        + " */ -}}\n"
        + _CHART_GATE
        + _chart_accelerators()
        + _chart_fabric_requests()
        + f'{{{{- if and .Values.admissionPolicy.enabled (include "{SERVED_TEMPLATE}" .) }}}}\n'
        + "---\n".join(parts)
        + "{{- end }}\n"
    )


# "true" when the cluster serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (1.30
# on; the chart's kubeVersion allows older clusters, where the object would fail the install),
# else "". `helm install` and `upgrade` ask the cluster, whose discovery lists every kind: then
# that says. An offline `helm template` lists no kind (ValidatingWebhookConfiguration, served
# since 1.16, tells the two apart): then the Kubernetes version says, `--kube-version` or Helm's
# own. NOTES.txt reads it too.
SERVED_TEMPLATE = "fabriccap.admissionPolicyServed"
_CHART_GATE = (
    f'{{{{- define "{SERVED_TEMPLATE}" -}}}}\n'
    '{{- $kinds := .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration" }}\n'
    '{{- if or (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") '
    f'(and (not $kinds) (semverCompare ">={OLDEST_KUBERNETES}.0-0" .Capabilities.KubeVersion.Version)) }}}}'
    "true{{ end }}\n"
    "{{- end }}\n"
)


# The policy's accelerator resources in the chart: from the config value the operator's ConfigMap
# is rendered from, so its warning and the operator's withoutFabric count the same resources.
ACCELERATORS_TEMPLATE = "fabriccap.acceleratorResources"
# The config's fabrics as core.config's ``build_config`` reads them (without ``fabrics``, the
# built-in profiles as they are), as a JSON list: what the accelerators' list and the chart's
# check of the config (``fabriccap.checkFabrics``) both start from.
FABRICS_TEMPLATE = "fabriccap.fabrics"


def _chart_accelerators() -> str:
    """A template rendering the CEL list ``accelerator_resources`` gives for the chart's
    ``config`` value, which it defaults as core.config's ``build_config`` does: without
    ``fabrics``, the built-in profiles as they are; an entry named like a built-in profile starts
    from it and is enabled unless it says otherwise; any other entry takes the field's default;
    a field's old name is read as it. Everything it mirrors is written from core.config's own
    tables, and tests/repo/test_admission_cel.py renders configs of each case against
    ``accelerator_resources``. A name that is not an extended resource's fails the install, as it
    would fail the operator's start (it goes into CEL text)."""

    def go_list(values: Any) -> str:
        return "(list" + "".join(f' "{value}"' for value in values) + ")"

    target_nodes = FabricProfile.model_fields["target_nodes"].alias
    field = TargetNodes.model_fields["accelerator_resources"]
    new = field.alias
    assert target_nodes and new
    old = [rename.old for rename in OLD_FIELD_NAMES if rename.model is TargetNodes and rename.new == new]
    builtins = " ".join(
        f'"{name}" (dict "enabled" {str(profile["enabled"]).lower()} "{new}" {go_list(profile[target_nodes][new])})'
        for name, profile in BUILTIN_PROFILES.items()
    )
    # What the values schema (and the operator) take for a name: nothing else reaches the CEL text.
    item = config_input_schema()["$defs"][TargetNodes.__name__]["properties"][new]["items"]
    is_name = f'(and (kindIs "string" .) (le (len .) {item["maxLength"]}) (regexMatch `{item["pattern"]}` .))'
    profile_own = f'get (get $builtins (toString .name) | default dict) "{new}" | default {go_list(field.default)}'
    own = "".join(f'{{{{- else if hasKey $given "{name}" }}}}{{{{- $own = get $given "{name}" }}}}\n' for name in old)
    return (
        f'{{{{- define "{FABRICS_TEMPLATE}" -}}}}\n'
        f"{{{{- $builtins := dict {builtins} }}}}\n"
        "{{- $config := .Values.config | default dict }}\n"
        "{{- $fabrics := list }}\n"
        '{{- if hasKey $config "fabrics" }}\n'
        "{{- $fabrics = $config.fabrics }}\n"
        "{{- else }}\n"
        '{{- range $name, $profile := $builtins }}{{ $fabrics = append $fabrics (dict "name" $name "enabled" '
        "$profile.enabled) }}{{ end }}\n"
        "{{- end }}\n"
        "{{- toJson $fabrics }}\n"
        "{{- end }}\n"
        f'{{{{- define "{ACCELERATORS_TEMPLATE}" -}}}}\n'
        f"{{{{- $builtins := dict {builtins} }}}}\n"
        f'{{{{- $fabrics := include "{FABRICS_TEMPLATE}" . | fromJsonArray }}}}\n'
        "{{- $resources := list }}\n"
        "{{- range $fabrics }}\n"
        '{{- if or (not (hasKey . "enabled")) .enabled }}\n'
        f'{{{{- $given := get . "{target_nodes}" | default dict }}}}\n'
        f"{{{{- $own := {profile_own} }}}}\n"
        f'{{{{- if hasKey $given "{new}" }}}}{{{{- $own = get $given "{new}" }}}}\n' + own + "{{- end }}\n"
        "{{- $resources = concat $resources $own }}\n"
        "{{- end }}\n"
        "{{- end }}\n"
        "{{- range $resources }}\n"
        f"{{{{- if not {is_name} }}}}\n"
        f'{{{{- fail (printf "config.fabrics[].{target_nodes}.{new}: %q is not an extended resource name" '
        "(toString . | trunc 80)) }}\n"
        "{{- end }}\n"
        "{{- end -}}\n"
        "[{{ range $i, $resource := $resources | uniq | sortAlpha }}{{ if $i }}, {{ end }}'{{ $resource }}'{{ end }}]\n"
        "{{- end }}\n"
    )


# The policy's fabric requests in the chart: from the same config value, so a pod the operator
# counts as requesting the fabric is not warned that it will use TCP.
FABRIC_REQUESTS_TEMPLATE = "fabriccap.fabricRequests"


def _chart_fabric_requests() -> str:
    """A template rendering the CEL list ``fabric_requests`` gives for the chart's ``config``
    value: each enabled fabric's resource and, where its sources include dra, each of its
    DeviceClasses' implicit resources, defaulted as ``_chart_accelerators`` defaults a fabric (a
    built-in profile's fields unless given; ``deviceClassName: X`` read as ``[X]``). Written from
    core.config's tables; tests/repo/test_admission_cel.py renders configs against
    ``fabric_requests``. A name that is not one the operator takes fails the install: it goes
    into CEL text."""

    def go_list(values: Any) -> str:
        return "(list" + "".join(f' "{value}"' for value in values) + ")"

    sources = FabricProfile.model_fields["sources"]
    dra = FabricProfile.model_fields["dra"].alias or "dra"
    classes = DraSettings.model_fields["device_class_names"].alias
    assert classes
    (old,) = [rename.old for rename in OLD_FIELD_NAMES if rename.model is DraSettings and rename.new == classes]
    builtins = " ".join(
        f'"{name}" (dict "resource" "{profile["resource"]}" "sources" {go_list(profile.get("sources", ()))} '
        f'"classes" {go_list(profile.get(dra, {}).get(classes, ()))})'
        for name, profile in BUILTIN_PROFILES.items()
    )
    default_sources = go_list(source.value for source in sources.default)
    schema = config_input_schema()["$defs"]
    fabric_name = schema[FabricProfile.__name__]["properties"]["name"]
    resource = schema[FabricProfile.__name__]["properties"]["resource"]
    class_name = schema[DraSettings.__name__]["properties"][classes]["items"]

    def is_name(item: dict[str, Any]) -> str:
        return f'(and (kindIs "string" .) (le (len .) {item["maxLength"]}) (regexMatch `{item["pattern"]}` .))'

    def check(item: dict[str, Any], field: str, what: str) -> str:
        return (
            f"{{{{- if not {is_name(item)} }}}}\n"
            f'{{{{- fail (printf "config.fabrics[].{field}: %q is not {what}" (toString . | trunc 80)) }}}}\n'
            "{{- end }}\n"
        )

    return (
        f'{{{{- define "{FABRIC_REQUESTS_TEMPLATE}" -}}}}\n'
        f"{{{{- $builtins := dict {builtins} }}}}\n"
        f'{{{{- $fabrics := include "{FABRICS_TEMPLATE}" . | fromJsonArray }}}}\n'
        "{{- $pairs := list }}\n"
        "{{- range $fabrics }}\n"
        '{{- if or (not (hasKey . "enabled")) .enabled }}\n'
        "{{- with .name }}\n" + check(fabric_name, "name", "a fabric name") + "{{- end }}\n"
        "{{- $builtin := get $builtins (toString .name) | default dict }}\n"
        '{{- $resource := get $builtin "resource" }}{{ if hasKey . "resource" }}{{ $resource = .resource }}{{ end }}\n'
        f'{{{{- $sources := get $builtin "sources" | default {default_sources} }}}}'
        '{{ if hasKey . "sources" }}{{ $sources = .sources }}{{ end }}\n'
        f'{{{{- $dra := get . "{dra}" | default dict }}}}\n'
        '{{- $classes := get $builtin "classes" | default list }}\n'
        f'{{{{- if hasKey $dra "{classes}" }}}}{{{{ $classes = get $dra "{classes}" }}}}'
        f'{{{{ else if hasKey $dra "{old}" }}}}{{{{ $classes = list (get $dra "{old}") }}}}{{{{ end }}}}\n'
        "{{- with $resource }}\n" + check(resource, "resource", "an extended resource name") + "{{- end }}\n"
        "{{- $pairs = append $pairs (list .name $resource) }}\n"
        f'{{{{- if has "{Source.DRA.value}" $sources }}}}\n'
        "{{- $name := .name }}\n"
        "{{- range $classes }}\n"
        + check(class_name, f"{dra}.{classes}", "a DeviceClass name")
        + f'{{{{- $pairs = append $pairs (list $name (printf "{IMPLICIT_RESOURCE_PREFIX}%s" .)) }}}}\n'
        "{{- end }}\n"
        "{{- end }}\n"
        "{{- end }}\n"
        "{{- end -}}\n"
        "[{{ range $i, $pair := $pairs }}{{ if $i }}, {{ end }}"
        "['{{ index $pair 0 }}', '{{ index $pair 1 }}']{{ end }}]\n"
        "{{- end }}\n"
    )
