"""The admission policy is generated from the one table of kinds: a rule and a pod-spec branch
for every admitted kind, keyed by group and resource, and path CEL that reaches every level
through optionals. What the CEL does is checked on the real API server
(tests/e2e/test_admission_kinds.py); this pins the generator's shape."""

from __future__ import annotations

from fabriccap.core.config import build_config, default_config
from fabriccap.core.workload_kinds import ADMITTED, VOLCANO_JOB
from fabriccap.observability.admission import (
    ACCELERATORS_VARIABLE,
    FABRIC_REQUESTS_VARIABLE,
    policy,
    resource_key,
    some_template,
)


def test_every_admitted_kind_has_a_rule_and_a_branch() -> None:
    spec = policy(default_config())["spec"]
    rules = {(rule["apiGroups"][0], rule["resources"][0]) for rule in spec["matchConstraints"]["resourceRules"]}
    assert rules == {(kind.group, kind.plural) for kind in ADMITTED}
    variables = {variable["name"]: variable["expression"] for variable in spec["variables"]}
    for kind in ADMITTED:
        assert f"'{resource_key(kind)}'" in variables["offends"] + variables["perNodeOffends"]
        # Where the request goes: the path of the template that offends (each kind's branch).
        assert f"variables.resource == '{resource_key(kind)}' ? (" in variables["where"]
        assert f"'{kind.kind}: " in variables["where"]
    # A Volcano Job is told apart from a batch Job by its group, never by `object.kind`.
    assert "'batch.volcano.sh/jobs'" in variables["offends"] and "object.kind" not in str(spec)


def test_path_cel_uses_optionals_until_a_list_then_one_exists_per_list() -> None:
    def test(name: str) -> str:
        return f"T({name})"

    assert some_template("", test) == "T(object)"
    assert some_template("spec.template", test) == "object.?spec.?template.optMap(s, T(s)).orValue(false)"
    assert some_template("spec.tasks[].template", test) == (
        "object.?spec.?tasks.orValue([]).exists(x0, x0.?template.optMap(s, T(s)).orValue(false))"
    )
    assert some_template("spec.m.*.template", test) == (
        "object.?spec.?m.orValue({}).exists(k0, "
        "object.?spec.?m.orValue({})[k0].?template.optMap(s, T(s)).orValue(false))"
    )
    # A list in a list: nested exists, never flatten() (Kubernetes' CEL has it only from 1.34).
    assert some_template("a[].b[name=node].c", test) == (
        "object.?a.orValue([]).exists(x0, x0.?b.orValue([]).exists(x1, "
        "x1.?name.orValue('') == 'node' && x1.?c.optMap(s, T(s)).orValue(false)))"
    )
    assert VOLCANO_JOB.pod_templates == ("spec.tasks[].template",)
    assert "flatten" not in str(policy(default_config()))


def test_the_fail_copy_differs_only_in_its_failure_policy() -> None:
    shipped, copy = policy(default_config()), policy(default_config(), failure_policy="Fail")
    assert shipped["spec"].pop("failurePolicy") == "Ignore" and copy["spec"].pop("failurePolicy") == "Fail"
    assert shipped == copy


def test_the_accelerators_are_one_variable_of_the_enabled_profiles() -> None:
    """One variable holds them, so the chart renders one expression from its config value."""
    config = build_config(
        {"fabrics": [{"name": "efa", "targetNodes": {"acceleratorResources": ["nvidia.com/gpu", "habana.ai/gaudi"]}}]}
    )
    variables = {variable["name"]: variable["expression"] for variable in policy(config)["spec"]["variables"]}
    assert variables[ACCELERATORS_VARIABLE] == "['habana.ai/gaudi', 'nvidia.com/gpu']"
    # The first: docs/workloads.md patches the component's at /spec/variables/0.
    assert policy(config)["spec"]["variables"][0]["name"] == ACCELERATORS_VARIABLE
    assert "nvidia.com/gpu" not in variables["offends"] + variables["perNodeOffends"]
    assert f"variables.{ACCELERATORS_VARIABLE}.exists(" in variables["offends"]
    assert f"variables.{ACCELERATORS_VARIABLE}.exists(" in variables["perNodeOffends"]


def test_what_asks_for_a_fabric_is_one_variable_of_the_enabled_profiles() -> None:
    """Each enabled fabric with each resource that asks for it (its resource, and where it uses
    DRA its classes' implicit resources), in one variable the chart renders from its config."""
    config = build_config(
        {
            "fabrics": [
                {"name": "efa", "dra": {"deviceClassNames": ["efa.networking.k8s.aws", "efa.example.com"]}},
                {"name": "aks-rdma"},
            ]
        }
    )
    variables = policy(config)["spec"]["variables"]
    # docs/workloads.md patches the component's at /spec/variables/5.
    assert variables[5]["name"] == FABRIC_REQUESTS_VARIABLE
    assert variables[5]["expression"] == (
        "[['efa', 'vpc.amazonaws.com/efa'], "
        "['efa', 'deviceclass.resource.kubernetes.io/efa.networking.k8s.aws'], "
        "['efa', 'deviceclass.resource.kubernetes.io/efa.example.com'], "
        "['aks-rdma', 'rdma/hca_shared_devices_a']]"
    )
    by_name = {variable["name"]: variable["expression"] for variable in variables}
    assert "variables.fabricResources.exists(" in by_name["offends"]
    assert "variables.fabricResources.exists(" in by_name["perNodeOffends"]
