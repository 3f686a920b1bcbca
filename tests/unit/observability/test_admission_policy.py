"""The admission policy is generated from the one table of kinds: a rule and a pod-spec branch
for every admitted kind, keyed by group and resource, and path CEL that reaches every level
through optionals. What the CEL does is checked on the real API server
(tests/e2e/test_admission_kinds.py); this pins the generator's shape."""

from __future__ import annotations

from fabriccap.core.config import default_config
from fabriccap.core.workload_kinds import ADMITTED, VOLCANO_JOB
from fabriccap.observability.admission import policy, resource_key, templates_cel


def test_every_admitted_kind_has_a_rule_and_a_branch() -> None:
    spec = policy(default_config())["spec"]
    rules = {(rule["apiGroups"][0], rule["resources"][0]) for rule in spec["matchConstraints"]["resourceRules"]}
    assert rules == {(kind.group, kind.plural) for kind in ADMITTED}
    variables = {variable["name"]: variable["expression"] for variable in spec["variables"]}
    for kind in ADMITTED:
        assert f"'{resource_key(kind)}'" in variables["podSpecs"] + variables["perNodeOffends"]
        assert f"'{kind.kind}: {kind.request_field}'" in variables["where"]
    # A Volcano Job is told apart from a batch Job by its group, never by `object.kind`.
    assert "'batch.volcano.sh/jobs'" in variables["podSpecs"] and "object.kind" not in str(spec)


def test_path_cel_uses_optionals_until_a_list_then_filters() -> None:
    assert templates_cel("") == "[object]"
    assert templates_cel("spec.template") == "object.?spec.?template.optMap(t, [t]).orValue([])"
    assert templates_cel("spec.tasks[].template") == (
        "object.?spec.?tasks.orValue([]).filter(x, has(x.template)).map(x, x.template)"
    )
    assert templates_cel("spec.m.*.template") == (
        "object.?spec.?m.orValue({}).map(k, object.?spec.?m.orValue({})[k])"
        ".filter(x, has(x.template)).map(x, x.template)"
    )
    assert templates_cel("a[].b[name=node].c") == (
        "object.?a.orValue([]).filter(x, has(x.b)).map(x, x.b).flatten()"
        ".filter(x, x.?name.orValue('') == 'node').filter(x, has(x.c)).map(x, x.c)"
    )
    assert VOLCANO_JOB.pod_templates == ("spec.tasks[].template",)


def test_the_fail_copy_differs_only_in_its_failure_policy() -> None:
    shipped, copy = policy(default_config()), policy(default_config(), failure_policy="Fail")
    assert shipped["spec"].pop("failurePolicy") == "Ignore" and copy["spec"].pop("failurePolicy") == "Fail"
    assert shipped == copy
