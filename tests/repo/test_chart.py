"""The Helm chart's values, rendered by the real helm binary (scripts/ensure-helm.sh).

- values.schema.json refuses what the operator would (a typo anywhere, a config the model
  refuses) before anything is rendered, with a message naming the value;
- the features a platform team expects (replicas and a PodDisruptionBudget, probes, image
  digests, ServiceMonitor and PrometheusRule settings, spread constraints, extra arguments
  and environment, log level and format) render as the values say;
- the PrometheusRule's job is the one the ServiceMonitor produces, whatever `nameOverride`.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabriccap.configfile import load_config
from fabriccap.controller.leader import lease_name
from fabriccap.core.config import OLD_FIELD_NAMES, ConfigError, build_config, config_input_schema
from fabriccap.core.shard import MAX_SHARDS, Shard
from fabriccap.observability import alerts, targets
from support.rendering import CHART, RUN_TIMEOUT_SECONDS, Doc, helm_binary, of_kind, one

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
SCHEMA_REFUSAL = "values don't meet the specifications of the schema"
DIGEST = "sha256:" + "ab" * 32


def helm_template(*values: Any, namespace: str = "fabriccap-system") -> subprocess.CompletedProcess[str]:
    """``helm template`` with each value a ``--set-json`` document (a dict) or a ``--set`` string."""
    args = [helm_binary(), "template", "fabriccap", str(CHART), "--namespace", namespace]
    for value in values:
        args += ["--set-json", json.dumps(value)] if isinstance(value, dict) else ["--set", value]
    return subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False)


def render(*values: Any, namespace: str = "fabriccap-system") -> list[Doc]:
    result = helm_template(*values, namespace=namespace)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def refusal(*values: Any) -> str:
    """Helm's error when it refuses the values; fails the test if it renders them."""
    result = helm_template(*values)
    assert result.returncode != 0, f"helm rendered {values}"
    return result.stderr


def container(docs: list[Doc]) -> Doc:
    (operator,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(operator)


# ---------------------------------------------------------------------------------------------
# values.schema.json refuses, by name, before rendering


def test_a_typo_in_resources_is_refused_by_name() -> None:
    stderr = refusal("resources.limits.memroy=1Gi")
    assert SCHEMA_REFUSAL in stderr
    assert re.search(r"at '/resources/limits': additional properties 'memroy' not allowed", stderr), stderr
    # The control: the value spelt right renders.
    assert container(render("resources.limits.memory=1Gi"))["resources"]["limits"] == {"memory": "1Gi"}


def test_an_invalid_config_is_refused_by_name() -> None:
    stderr = refusal({"config": {"fabrics": [{"name": "efa", "resource": 12}]}})
    assert SCHEMA_REFUSAL in stderr
    assert "at '/config/fabrics/0/resource': got number, want string" in stderr, stderr
    # The operator refuses the same file, naming the same field.
    with pytest.raises(ConfigError, match=r"fabrics\.0\.resource"):
        build_config({"fabrics": [{"name": "efa", "resource": 12}]})
    render({"config": {"fabrics": [{"name": "efa", "resource": "vpc.amazonaws.com/efa"}]}})


def test_unknown_top_level_values_are_refused() -> None:
    assert "additional properties 'replicas' not allowed" in refusal("replicas=3")


PLUGIN = {"daemonSetNames": ["my-plugin"]}
CONFIGS: list[tuple[str, dict[str, Any], bool]] = [
    # (id, config, the operator accepts it)
    ("builtin-efa-alone", {"fabrics": [{"name": "efa"}]}, True),
    ("builtin-aks-rdma-alone", {"fabrics": [{"name": "aks-rdma"}]}, True),
    ("builtin-one-field", {"fabrics": [{"name": "efa", "devicePlugin": {"namespaces": ["efa"]}}]}, True),
    ("custom-with-names", {"fabrics": [{"name": "ib", "resource": "example.com/ib", "devicePlugin": PLUGIN}]}, True),
    (
        "custom-with-selector",
        {"fabrics": [{"name": "ib", "resource": "example.com/ib", "devicePlugin": {"daemonSetSelector": "app=ib"}}]},
        True,
    ),
    ("custom-without-resource", {"fabrics": [{"name": "ib", "devicePlugin": PLUGIN}]}, False),
    ("custom-without-plugin", {"fabrics": [{"name": "ib", "resource": "example.com/ib"}]}, False),
    (
        "custom-with-no-plugin-names",
        {"fabrics": [{"name": "ib", "resource": "example.com/ib", "devicePlugin": {"daemonSetNames": []}}]},
        False,
    ),
    ("old-gpu-names", {"fabrics": [{"name": "efa", "targetNodes": {"gpuResources": ["nvidia.com/gpu"]}}]}, True),
    ("old-gpu-labels", {"fabrics": [{"name": "efa", "targetNodes": {"gpuLabels": ["a.io/gpu=true"]}}]}, True),
    ("old-namespace", {"fabrics": [{"name": "efa", "devicePlugin": {"namespace": "efa-system"}}]}, True),
    (
        "old-and-new-namespace",
        {"fabrics": [{"name": "efa", "devicePlugin": {"namespace": "a", "namespaces": ["b"]}}]},
        False,
    ),
    ("typo-in-profile", {"fabrics": [{"name": "efa", "devicePlugin": {"namespaec": "efa"}}]}, False),
    ("typo-at-top", {"poolLabel": ["eks.amazonaws.com/nodegroup"]}, False),
    ("bad-label-key", {"poolLabels": ["not a key!"]}, False),
    ("bad-namespace", {"fabrics": [{"name": "efa", "devicePlugin": {"namespaces": ["Kube_System"]}}]}, False),
    ("negative-maximum", {"fabrics": [{"name": "efa", "instanceTypes": {"p5.48xlarge": -1}}]}, False),
    ("uppercase-fabric-name", {"fabrics": [{"name": "EFA", "resource": "x.io/y", "devicePlugin": PLUGIN}]}, False),
    ("debounce-too-long", {"debounceSeconds": 61}, False),
    ("enabled-as-string", {"fabrics": [{"name": "efa", "enabled": "yes"}]}, False),
    ("transport-size-as-quantity", {"transport": {"maxBytes": "512Ki", "readAfterSeconds": [30, 600]}}, True),
    ("transport-size-as-integer", {"transport": {"maxBytes": 1048576}}, True),
    ("transport-size-not-a-quantity", {"transport": {"maxBytes": "four megabytes"}}, False),
    ("transport-size-too-small", {"transport": {"maxBytes": 100}}, False),
    ("transport-negative-step", {"transport": {"readAfterSeconds": [-5]}}, False),
    ("transport-typo", {"transport": {"maxbytes": "4Mi"}}, False),
]


@pytest.mark.parametrize(("config", "operator_accepts"), [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS])
def test_the_schema_refuses_what_the_operator_refuses(config: dict[str, Any], operator_accepts: bool) -> None:
    try:
        build_config(config)
        accepted = True
    except ConfigError:
        accepted = False
    assert accepted is operator_accepts, "the expectation of this case is wrong"
    result = helm_template({"config": config})
    if operator_accepts:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0 and SCHEMA_REFUSAL in result.stderr, result.stderr


# Values whose config the schema alone cannot judge (a rule across items or fields, a quantity's
# size, a label key's segment lengths): the chart's checks (_helpers.tpl) or the schema refuse
# each one the operator would refuse at start.
LONG_SEGMENT = "a" * 64
CHART_VALUES: list[tuple[str, dict[str, Any]]] = [
    *((case_id, {"config": config}) for case_id, config, _ in CONFIGS),
    ("transport-without-workloads", {"transport": {"enabled": True}, "config": {"workloads": {"enabled": False}}}),
    ("transport-with-workloads", {"transport": {"enabled": True}, "config": {"workloads": {"enabled": True}}}),
    ("workloads-off-alone", {"config": {"workloads": {"enabled": False}}}),
    ("duplicate-fabric", {"config": {"fabrics": [{"name": "efa"}, {"name": "efa"}]}}),
    ("duplicate-fabric-one-disabled", {"config": {"fabrics": [{"name": "efa"}, {"name": "efa", "enabled": False}]}}),
    ("two-fabrics", {"config": {"fabrics": [{"name": "efa"}, {"name": "aks-rdma", "enabled": False}]}}),
    ("read-steps-descending", {"config": {"transport": {"readAfterSeconds": [300, 60]}}}),
    ("read-steps-repeated", {"config": {"transport": {"readAfterSeconds": [60, 60]}}}),
    (
        "read-steps-ascending",
        {"transport": {"enabled": True}, "config": {"transport": {"readAfterSeconds": [0, 0.5, 60]}}},
    ),
    ("size-1Gi", {"config": {"transport": {"maxBytes": "1Gi"}}}),
    ("size-65Mi", {"config": {"transport": {"maxBytes": "65Mi"}}}),
    ("size-64Mi", {"config": {"transport": {"maxBytes": "64Mi"}}}),
    ("size-one-byte-over", {"config": {"transport": {"maxBytes": "67108865"}}}),
    ("size-integer-one-byte-over", {"config": {"transport": {"maxBytes": 67108865}}}),
    ("size-255Ki", {"config": {"transport": {"maxBytes": "255Ki"}}}),
    ("size-256Ki", {"config": {"transport": {"maxBytes": "256Ki"}}}),
    ("size-fraction", {"config": {"transport": {"maxBytes": "0.5Mi"}}}),
    ("size-decimal-suffix", {"config": {"transport": {"maxBytes": "+4M"}}}),
    ("size-exponent", {"config": {"transport": {"maxBytes": "4e6"}}}),
    ("size-exponent-too-big", {"config": {"transport": {"maxBytes": "1e8"}}}),
    ("size-negative-exponent", {"config": {"transport": {"maxBytes": "4000000000e-3"}}}),
    ("size-milli", {"config": {"transport": {"maxBytes": "262144000m"}}}),
    ("size-milli-too-small", {"config": {"transport": {"maxBytes": "262143999m"}}}),
    ("pool-label-name-64", {"config": {"poolLabels": [LONG_SEGMENT]}}),
    ("pool-label-name-63", {"config": {"poolLabels": [LONG_SEGMENT[:63], "x.io/" + LONG_SEGMENT[:63]]}}),
    ("pool-label-prefixed-name-64", {"config": {"poolLabels": ["x.io/" + LONG_SEGMENT]}}),
    ("pool-label-prefix-254", {"config": {"poolLabels": ["a" * 254 + "/x"]}}),
    ("pool-label-prefix-253", {"config": {"poolLabels": ["a" * 253 + "/x"]}}),
    (
        "accelerator-resource-name-64",
        {"config": {"fabrics": [{"name": "efa", "targetNodes": {"acceleratorResources": ["x.io/" + LONG_SEGMENT]}}]}},
    ),
    ("fabric-resource-name-64", {"config": {"fabrics": [{"name": "efa", "resource": "x.io/" + LONG_SEGMENT}]}}),
    (
        "accelerator-label-key-64",
        {"config": {"fabrics": [{"name": "efa", "targetNodes": {"acceleratorLabels": [LONG_SEGMENT + "=true"]}}]}},
    ),
    (
        "accelerator-label-value-64",
        {"config": {"fabrics": [{"name": "efa", "targetNodes": {"acceleratorLabels": ["x.io/gpu=" + LONG_SEGMENT]}}]}},
    ),
    (
        "accelerator-label-selector",
        {
            "config": {
                "fabrics": [{"name": "efa", "targetNodes": {"acceleratorLabels": ["x.io/gpu = true, x.io/b==c"]}}]
            }
        },
    ),
    (
        "platform-label-key-64",
        {
            "config": {
                "fabrics": [{"name": "efa", "devicePlugin": {"platformManagedNodeLabels": [LONG_SEGMENT + "=x"]}}]
            }
        },
    ),
    (
        "plugin-selector-key-64",
        {
            "config": {
                "fabrics": [{"name": "efa", "devicePlugin": {"daemonSetSelector": "x.io/" + LONG_SEGMENT + "=x"}}]
            }
        },
    ),
    (
        "plugin-selectors-value-64",
        {
            "config": {
                "fabrics": [{"name": "efa", "devicePlugin": {"daemonSetSelector": ["app=x", "app=" + LONG_SEGMENT]}}]
            }
        },
    ),
]
CHART_DEFAULTS: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())


def merged_values(defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """Helm's merge of given values over the chart's: maps key by key, null removes a key, any
    other value (a list included) replaces the default."""
    merged = dict(defaults)
    for key, value in given.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merged_values(merged[key], value)
        else:
            merged[key] = value
    return merged


def chart_config(values: dict[str, Any]) -> dict[str, Any]:
    """The config file the chart writes: the merged `config`, with transport.enabled from the
    chart's switch (fabriccap.config)."""
    merged = merged_values(CHART_DEFAULTS, values)
    config = dict(merged["config"])
    if merged["transport"]["enabled"]:
        config["transport"] = {**config.get("transport", {}), "enabled": True}
    return config


@pytest.mark.parametrize("values", [case[1] for case in CHART_VALUES], ids=[case[0] for case in CHART_VALUES])
def test_helm_refuses_every_config_the_operator_refuses(values: dict[str, Any], tmp_path: Path) -> None:
    """The config the chart would write goes to the operator's own loader: whatever it refuses
    (the operator would exit 2 and crash-loop, or an upgrade would never roll), helm refuses;
    whatever it accepts, helm renders, and the rendered file is that config."""
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(chart_config(values)))
    try:
        load_config(config_file)
        operator_error = None
    except ConfigError as error:
        operator_error = str(error)
    result = helm_template(values)
    if operator_error is None:
        assert result.returncode == 0, result.stderr
        rendered = yaml.safe_load(one(yaml.safe_load_all(result.stdout), "ConfigMap")["data"]["config.yaml"])
        assert rendered == chart_config(values)
    else:
        assert result.returncode != 0, f"helm renders a config the operator refuses: {operator_error}"
        assert SCHEMA_REFUSAL in result.stderr or "execution error" in result.stderr, result.stderr


def test_the_chart_checks_name_the_value_they_refuse() -> None:
    assert "config.fabrics: fabric names must be unique; efa is given twice" in refusal(
        {"config": {"fabrics": [{"name": "efa"}, {"name": "efa"}]}}
    )
    assert "transport.enabled needs config.workloads.enabled" in refusal(
        {"transport": {"enabled": True}, "config": {"workloads": {"enabled": False}}}
    )
    assert "config.transport.readAfterSeconds: read steps must be ascending, got [300 60]" in refusal(
        {"config": {"transport": {"readAfterSeconds": [300, 60]}}}
    )
    assert "config.transport.maxBytes: 1Gi is not between 256Ki and 64Mi" in refusal(
        {"config": {"transport": {"maxBytes": "1Gi"}}}
    )
    assert "at '/config/poolLabels/0'" in refusal({"config": {"poolLabels": [LONG_SEGMENT]}})


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("config*.yaml")), ids=lambda path: path.name)
def test_every_example_config_is_a_valid_chart_config(example: Path) -> None:
    config = yaml.safe_load(example.read_text())
    build_config(config, source=str(example))
    rendered = yaml.safe_load(one(render({"config": config}), "ConfigMap")["data"]["config.yaml"])
    # Helm merges the given config over the chart's default one, key by key.
    assert {key: rendered[key] for key in config} == config


def test_every_old_field_name_the_schema_lists_is_one_the_operator_reads() -> None:
    definitions = config_input_schema()["$defs"]
    for model, old, new, single_item in OLD_FIELD_NAMES:
        assert definitions[model.__name__]["properties"][old]["deprecated"] is True
        value: Any = "kube-system" if single_item else ["x.io/y=true" if "Labels" in new else "x.io/y"]
        read = model.model_validate({old: value}).model_dump(by_alias=True)
        assert read[new] == ((value,) if single_item else tuple(value)), f"{old} is not read as {new}"
        with pytest.raises(ValueError, match="not both"):
            model.model_validate({old: value, new: [value] if single_item else value})


def test_config_schema_command_prints_what_the_chart_embeds(capsys: pytest.CaptureFixture[str]) -> None:
    from fabriccap.cli.commands import main

    assert main(["config-schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == config_input_schema()
    chart_schema = json.loads((CHART / "values.schema.json").read_text())
    assert chart_schema["properties"]["config"] == {"$ref": "#/$defs/Config"}
    embedded = chart_schema["$defs"]["Config"]
    assert {key: value for key, value in printed.items() if key not in ("$defs", "$schema")} == embedded
    assert all(chart_schema["$defs"][name] == schema for name, schema in printed["$defs"].items())


# ---------------------------------------------------------------------------------------------
# High availability: replicas, a disruption budget, the leader-election Lease


def test_replicas_and_disruption_budget() -> None:
    docs = render()
    assert one(docs, "Deployment")["spec"]["replicas"] == 2
    assert one(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    docs = render("replicaCount=3", {"podDisruptionBudget": {"minAvailable": "50%"}})
    assert one(docs, "Deployment")["spec"]["replicas"] == 3
    assert one(docs, "PodDisruptionBudget")["spec"] == {
        "selector": one(docs, "Deployment")["spec"]["selector"],
        "minAvailable": "50%",
    }
    # Values merge key by key, so null removes the default key: no budget. {} merges over the
    # default and keeps it, as the schema's description says.
    assert not of_kind(render({"podDisruptionBudget": {"maxUnavailable": None}}), "PodDisruptionBudget")
    assert one(render({"podDisruptionBudget": {}}), "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert "maxUnavailable: null for none" in schema["properties"]["podDisruptionBudget"]["description"]
    assert "/podDisruptionBudget/maxUnavailable" in refusal("podDisruptionBudget.maxUnavailable=-1")


def test_leader_election_role_is_in_the_release_namespace_for_its_lease_only() -> None:
    docs = render(namespace="platform")
    (role,) = of_kind(docs, "Role")
    (binding,) = of_kind(docs, "RoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "platform"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "fabriccap", "namespace": "platform"}]
    named = [rule for rule in role["rules"] if "resourceNames" in rule]
    unnamed = [rule for rule in role["rules"] if "resourceNames" not in rule]
    assert [rule["resourceNames"] for rule in named] == [["fabriccap-leader"]]
    assert [rule["verbs"] for rule in unnamed] == [["create"]], "only create may go without a name"
    env = {item["name"]: item for item in container(docs)["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


@pytest.mark.parametrize("shards", [2, 3, MAX_SHARDS])
def test_a_change_of_shards_leaves_the_old_pods_their_own_lease(shards: int) -> None:
    """The Role named only the new count's Leases: `helm upgrade --set sharding.shards=3` from 2
    cut the old pods of shards 0 and 1 (still `--shards=2`, until the rollout replaces them) off
    their own Lease with a 403, and they stopped writing ~10 s later, long before the new pods
    had listed (hostile review 64-shard F4). Shard I of the new split may renew its Lease under
    every count; shards the new split does not have are deleted with their Deployments."""
    (role,) = of_kind(render({"sharding": {"shards": shards}}, namespace="platform"), "Role")
    (leases,) = [rule["resourceNames"] for rule in role["rules"] if "resourceNames" in rule]
    expected = {
        lease_name(Shard(index=index, count=count))
        for index in range(shards)
        for count in range(max(2, index + 1), MAX_SHARDS + 1)
    }
    assert len(leases) == len(set(leases))
    assert set(leases) == expected
    # From 2 to 3 and from 3 to 2: both sides of the rollout of a remaining shard renew.
    assert {"fabriccap-leader-0-of-2", "fabriccap-leader-0-of-3", "fabriccap-leader-1-of-3"} <= set(leases)
    # The chart's maximum is the operator's and the schema's.
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["properties"]["sharding"]["properties"]["shards"]["maximum"] == MAX_SHARDS
    assert f'define "fabriccap.maxShards" -}}}}{MAX_SHARDS}{{{{' in (CHART / "templates" / "_helpers.tpl").read_text()


ONE_INSTALL_GUARD = """{{- include "fabriccap.refuseOtherInstall" (dict "top" . "deployments" .Values.deployments) }}
"""


def guard_verdict(
    tmp_path: Path, deployments: list[Doc], release: str = "fabriccap"
) -> subprocess.CompletedProcess[str]:
    """The chart's one-install-per-namespace rule (_helpers.tpl, the file itself) over the given
    Deployments, as helm `lookup` would list them at install time: a chart of the real helpers
    and one template that hands them the list. helm template has no cluster, and its lookup
    returns nothing."""
    chart = tmp_path / "guard"
    (chart / "templates").mkdir(parents=True, exist_ok=True)
    (chart / "Chart.yaml").write_text((CHART / "Chart.yaml").read_text())
    (chart / "templates" / "_helpers.tpl").write_text((CHART / "templates" / "_helpers.tpl").read_text())
    (chart / "templates" / "guard.yaml").write_text(ONE_INSTALL_GUARD)
    args = [helm_binary(), "template", release, str(chart), "--namespace", "fc"]
    args += ["--set-json", json.dumps({"deployments": deployments})]
    return subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False)


def test_a_second_install_in_one_namespace_is_refused(tmp_path: Path) -> None:
    """Two installs in one namespace elect one leader on one Lease (fabriccap-leader): the
    other's pools are never published (hostile review 63-chart M3). The Lease keeps its name
    (a renamed one would give a rolling upgrade two leaders), so the chart refuses the second."""
    configmap = (CHART / "templates" / "configmap.yaml").read_text()
    assert '{{- include "fabriccap.checkOneInstallPerNamespace" . }}' in configmap
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    assert 'lookup "apps/v1" "Deployment" .Release.Namespace ""' in helpers
    # What a cluster holds: another release's Deployments (one renamed by nameOverride), a
    # kustomize install's, and an unrelated one.
    efa = one(render(namespace="fc"), "Deployment")
    renamed = of_kind(render({"nameOverride": "fcap", "sharding": {"shards": 2}}, namespace="fc"), "Deployment")
    kustomize = one(yaml.safe_load_all((REPO_ROOT / "manifests" / "deployment.yaml").read_text()), "Deployment")
    other_app = {"metadata": {"name": "coredns", "labels": {"app.kubernetes.io/name": "coredns"}}}
    unlabelled = {"metadata": {"name": "legacy"}}
    for existing in ([efa], renamed, [kustomize]):
        refused = guard_verdict(tmp_path, [other_app, *existing], release="rdma")
        assert refused.returncode != 0, refused.stdout
        assert f"namespace fc already runs fabriccap (Deployment {existing[0]['metadata']['name']} of fabriccap)" in (
            refused.stderr
        )
        assert "share the leader Lease fabriccap-leader" in refused.stderr
    # An upgrade of the same release (its own Deployments), or a namespace without fabriccap.
    assert guard_verdict(tmp_path, [efa], release="fabriccap").returncode == 0
    assert guard_verdict(tmp_path, [other_app, unlabelled], release="rdma").returncode == 0
    assert guard_verdict(tmp_path, [], release="rdma").returncode == 0


def test_shards_are_one_deployment_budget_and_lease_each() -> None:
    docs = render({"sharding": {"shards": 3}}, "replicaCount=2", namespace="platform")
    deployments = of_kind(docs, "Deployment")
    assert [doc["metadata"]["name"] for doc in deployments] == [f"fabriccap-shard-{index}" for index in range(3)]
    for index, deployment in enumerate(deployments):
        assert deployment["spec"]["replicas"] == 2
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector["fabriccap.dev/shard"] == str(index)
        assert deployment["spec"]["template"]["metadata"]["labels"].items() >= selector.items()
        (operator,) = deployment["spec"]["template"]["spec"]["containers"]
        assert operator["args"][-2:] == ["--shards=3", f"--shard={index}"]
    # Every pod of one shard, and only those, under one budget.
    budgets = of_kind(docs, "PodDisruptionBudget")
    assert [budget["spec"]["selector"] for budget in budgets] == [doc["spec"]["selector"] for doc in deployments]
    (role,) = of_kind(docs, "Role")
    (named,) = [rule["resourceNames"] for rule in role["rules"] if "resourceNames" in rule]
    # Each shard's own Lease (and, for a change of shards, its Leases under the other counts).
    assert {f"fabriccap-leader-{index}-of-3" for index in range(3)} <= set(named)
    # Unsharded, the one Deployment keeps its name and selector: an upgrade changes nothing.
    (single,) = of_kind(render({"sharding": {"shards": 1}}), "Deployment")
    assert single["metadata"]["name"] == "fabriccap"
    assert "fabriccap.dev/shard" not in single["spec"]["selector"]["matchLabels"]
    assert not any(arg.startswith("--shard") for arg in single["spec"]["template"]["spec"]["containers"][0]["args"])
    assert "/sharding/shards" in refusal({"sharding": {"shards": 0}})
    assert "/sharding/shards" in refusal({"sharding": {"shards": 65}})


# ---------------------------------------------------------------------------------------------
# The pod


def test_probes_use_healthz_readiness_readyz_and_are_configurable() -> None:
    operator = container(render())
    for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert operator[probe]["httpGet"] == {"path": path, "port": "health"}
        assert "enabled" not in operator[probe]
    operator = container(render("startupProbe.enabled=false", "readinessProbe.periodSeconds=3"))
    assert "startupProbe" not in operator
    assert operator["readinessProbe"]["periodSeconds"] == 3
    assert "additional properties 'path' not allowed" in refusal("livenessProbe.path=/other")


def test_the_network_policy_admits_only_the_listed_scrapers() -> None:
    """/metrics answers whoever reaches the pod (round 3 L24): the chart offers a NetworkPolicy,
    off by default (on, it would cut an existing Prometheus it does not list)."""
    assert of_kind(render(), "NetworkPolicy") == []
    docs = render("networkPolicy.enabled=true", "metrics.port=9100")
    policy = one(docs, "NetworkPolicy")
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["metadata"]["namespace"] == "fabriccap-system"
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress (to the API server) untouched
    (metrics_rule,) = policy["spec"]["ingress"]
    assert metrics_rule["ports"] == [{"port": 9100, "protocol": "TCP"}]
    assert metrics_rule["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }
    ]
    checker = {"ipBlock": {"cidr": "10.0.0.0/8"}}
    docs = render("networkPolicy.enabled=true", {"networkPolicy": {"metricsFrom": [], "healthFrom": [checker]}})
    assert one(docs, "NetworkPolicy")["spec"]["ingress"] == [
        {"from": [checker], "ports": [{"port": 8081, "protocol": "TCP"}]}
    ]
    # Nobody listed: the pods accept no connection but the kubelet's (node traffic).
    docs = render("networkPolicy.enabled=true", {"networkPolicy": {"metricsFrom": []}})
    assert one(docs, "NetworkPolicy")["spec"]["ingress"] == []
    assert "/networkPolicy" in refusal("networkPolicy.metricsFrom=everyone")


def test_image_by_digest() -> None:
    assert container(render())["image"] == "ghcr.io/fabriccap/fabriccap:0.1.0"
    assert container(render(f"image.digest={DIGEST}"))["image"] == f"ghcr.io/fabriccap/fabriccap:0.1.0@{DIGEST}"
    assert "/image/digest" in refusal("image.digest=latest")


def test_log_level_format_extra_args_and_env() -> None:
    operator = container(
        render(
            "logLevel=debug",
            "logFormat=json",
            {"extraArgs": ["--metrics-bind-address=0.0.0.0"], "extraEnv": [{"name": "TZ", "value": "UTC"}]},
        )
    )
    assert operator["args"][-3:] == ["--log-level=debug", "--log-format=json", "--metrics-bind-address=0.0.0.0"]
    assert operator["env"][-1] == {"name": "TZ", "value": "UTC"}
    assert [env["name"] for env in operator["env"]] == ["POD_NAME", "POD_NAMESPACE", "TZ"]
    assert "/logFormat" in refusal("logFormat=yaml")


def test_values_that_would_break_the_rendered_objects_are_refused() -> None:
    """Hostile review 63-chart L3, L4, L6: each renders objects the API server refuses, or an
    operator that cannot run as rendered; the control renders."""
    # L3: the Lease would be in kube-system, where the chart's Role grants nothing.
    assert "extraArgs: --namespace kube-system is not the release namespace fabriccap-system" in refusal(
        {"extraArgs": ["--namespace=kube-system"]}
    )
    assert "--namespace kube-system is not" in refusal({"extraArgs": ["--namespace", "kube-system"]})
    render({"extraArgs": ["--namespace=fabriccap-system"]})
    # L6: the second server cannot listen.
    assert "metrics.port and health.port are both 9000" in refusal("metrics.port=9000", "health.port=9000")
    # L4: names that are no Service name, and labels that are no labels or the chart's own.
    assert "/fullnameOverride" in refusal("fullnameOverride=9fab")
    assert "/nameOverride" in refusal("nameOverride=9fab")
    assert "/serviceAccount/name" in refusal({"serviceAccount": {"name": "Fab_SA"}})
    assert "/prometheusRelease" in refusal({"prometheusRelease": "kube prometheus"})
    assert "/podLabels" in refusal({"podLabels": {"team": "ml platform"}})
    for labels, message in [
        ({"podLabels": {"app.kubernetes.io/name": "x"}}, "podLabels: app.kubernetes.io/name"),
        ({"podLabels": {"fabriccap.dev/shard": "0"}}, "podLabels: fabriccap.dev/shard"),
        ({"serviceMonitor": {"additionalLabels": {"helm.sh/chart": "x"}}}, "serviceMonitor.additionalLabels: helm"),
        ({"dashboard": {"labels": {"app.kubernetes.io/instance": "x"}}}, "dashboard.labels: app.kubernetes.io/inst"),
    ]:
        assert f"{message}" in refusal(labels) and "is the chart's own label" in refusal(labels)
    assert "set prometheusRelease instead" in refusal({"serviceMonitor": {"additionalLabels": {"release": "prom"}}})
    monitor = one(
        render({"prometheusRelease": "", "serviceMonitor": {"enabled": True, "additionalLabels": {"release": "prom"}}}),
        "ServiceMonitor",
    )
    assert monitor["metadata"]["labels"]["release"] == "prom"
    docs = render({"podLabels": {"team": "ml-platform"}, "serviceAccount": {"name": "fabric.sa"}})
    assert one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]["team"] == "ml-platform"


@pytest.mark.parametrize("release", ["1fab", "fab.prod"])
def test_a_release_name_that_makes_no_service_name_is_refused(release: str) -> None:
    args = [helm_binary(), "template", release, str(CHART), "--namespace", "fc"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False)
    assert result.returncode != 0 and f"release name {release}: " in result.stderr, result.stderr
    args += ["--set", "fullnameOverride=fab"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("shards", [1, 3])
def test_notes_name_the_leases_the_role_grants(shards: int, tmp_path: Path) -> None:
    """NOTES.txt printed `fabriccap-leader` whatever the sharding (hostile review 63-chart L5)."""
    values = {"sharding": {"shards": shards}}
    args = [helm_binary(), "install", "fabriccap", str(CHART), "--namespace", "fc", "--dry-run=client"]
    args += ["--set-json", json.dumps(values)]
    result = subprocess.run(
        args, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    notes = result.stdout.partition("\nNOTES:\n")[2]
    (role,) = of_kind(render(values, namespace="fc"), "Role")
    (leases,) = [rule["resourceNames"] for rule in role["rules"] if "resourceNames" in rule]
    # The Leases the pods use now; the Role grants them (and, sharded, the other counts' too).
    current = {lease_name(Shard(index=index, count=shards)) for index in range(shards)}
    assert set(re.findall(r"fabriccap-leader(?:-\d+-of-\d+)?(?![-\w])", notes)) == current
    assert current <= set(leases)
    assert f"{2 * shards} pods" in notes if shards > 1 else "2 replicas" in notes


def test_topology_spread_constraints() -> None:
    spread = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "fabriccap"}},
    }
    spec = one(render({"topologySpreadConstraints": [spread]}), "Deployment")["spec"]["template"]["spec"]
    assert spec["topologySpreadConstraints"] == [spread]
    assert "topologySpreadConstraints" not in one(render(), "Deployment")["spec"]["template"]["spec"]


# ---------------------------------------------------------------------------------------------
# Monitoring: the ServiceMonitor and the PrometheusRule


MONITORING_ON = {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}


def scrape_job(docs: list[Doc]) -> str:
    """The job Prometheus Operator gives the targets: the Service's label named by jobLabel."""
    job_label = one(docs, "ServiceMonitor")["spec"]["jobLabel"]
    return str(one(docs, "Service")["metadata"]["labels"][job_label])


def rules(docs: list[Doc]) -> list[Doc]:
    (group,) = one(docs, "PrometheusRule")["spec"]["groups"]
    return list(group["rules"])


def test_default_rules_are_the_shipped_rules() -> None:
    docs = render(MONITORING_ON)
    shipped = yaml.safe_load((REPO_ROOT / "monitoring" / "prometheusrule.yaml").read_text())
    assert one(docs, "PrometheusRule")["spec"] == shipped["spec"]
    assert scrape_job(docs) == "fabriccap"


@pytest.mark.parametrize("name_override", ["fcap", "fabric-capability"])
def test_rules_select_the_job_the_service_monitor_produces(name_override: str) -> None:
    docs = render(MONITORING_ON, f"nameOverride={name_override}")
    job = scrape_job(docs)
    assert job == name_override
    assert one(docs, "PrometheusRule")["spec"]["groups"] == [alerts.rule_group(alerts.AlertSettings(job=job))]
    selected = {match for rule in rules(docs) for match in re.findall(r'job="([^"]*)"', rule["expr"])}
    assert selected == {job}, "FabricCapabilityOperatorDown would fire forever on another job"


def test_rules_job_can_be_named_for_another_scrape_config() -> None:
    docs = render(MONITORING_ON, "prometheusRule.job=kubernetes-pods")
    assert one(docs, "PrometheusRule")["spec"]["groups"] == [
        alerts.rule_group(alerts.AlertSettings(job="kubernetes-pods"))
    ]


def test_per_alert_enabled_for_and_severity_and_extra_rule_labels() -> None:
    docs = render(
        MONITORING_ON,
        {
            "prometheusRule": {
                "additionalRuleLabels": {"team": "ml-platform", "severity": "ignored"},
                "rules": {
                    "FabricCapabilityStale": {"enabled": False},
                    "FabricCapabilityNotReady": {"for": "1h"},
                    "FabricMixedRollout": {"severity": "critical", "enabled": True},
                },
            }
        },
    )
    by_name = {rule["alert"]: rule for rule in rules(docs)}
    assert set(by_name) == {rule.name for rule in alerts.ALERTS} - {"FabricCapabilityStale"}
    expected = alerts.rule_group(alerts.AlertSettings(for_overrides={"FabricCapabilityNotReady": "1h"}))
    for rule in expected["rules"]:
        if rule["alert"] == "FabricCapabilityStale":
            continue
        severity = "critical" if rule["alert"] == "FabricMixedRollout" else rule["labels"]["severity"]
        # The `for:` shows in the text too ("has not been Ready for 1h").
        assert by_name[rule["alert"]] == {**rule, "labels": {"severity": severity, "team": "ml-platform"}}
    assert "for 1h" in by_name["FabricCapabilityNotReady"]["annotations"]["summary"]


def test_an_unknown_alert_or_bad_duration_is_refused() -> None:
    assert "'FabricMixedRolout' not allowed" in refusal("prometheusRule.rules.FabricMixedRolout.for=1m")
    assert "/prometheusRule/rules/FabricMixedRollout/for" in refusal("prometheusRule.rules.FabricMixedRollout.for=soon")


def test_service_monitor_settings() -> None:
    relabeling = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}
    dropping = {"sourceLabels": ["__name__"], "regex": "python_gc_.*", "action": "drop"}
    docs = render(
        MONITORING_ON,
        {
            "serviceMonitor": {
                "namespace": "monitoring",
                "additionalLabels": {"team": "ml-platform"},
                "relabelings": [relabeling],
                "metricRelabelings": [dropping],
            },
            "prometheusRule": {"namespace": "monitoring", "additionalLabels": {"rules": "fabric"}},
        },
    )
    monitor = one(docs, "ServiceMonitor")
    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["metadata"]["labels"]["team"] == "ml-platform"
    # It still selects the Service where the release is.
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["fabriccap-system"]}
    (endpoint,) = monitor["spec"]["endpoints"]
    # The chart's own relabeling (the pod's shard) comes first, the release's after it.
    assert endpoint["relabelings"] == [SHARD_RELABELING, relabeling]
    assert endpoint["metricRelabelings"] == [dropping]
    rule = one(docs, "PrometheusRule")
    assert rule["metadata"]["namespace"] == "monitoring"
    assert rule["metadata"]["labels"]["rules"] == "fabric"


SHARD_RELABELING = {
    "sourceLabels": ["__meta_kubernetes_pod_label_fabriccap_dev_shard"],
    "regex": "(.+)",
    "targetLabel": "shard",
}


@pytest.mark.parametrize("shards", [2, 3])
def test_a_whole_shard_down_or_pending_is_alerted_on_per_shard(shards: int) -> None:
    """Sharded, a shard whose pods all crash-loop or stay Pending while another is up fired no
    alert: `up` had no shard, and the job's absent() was false (hostile review 64-shard F3).
    The targets carry the pod's shard, and OperatorDown asks for each of the chart's N shards."""
    docs = render(MONITORING_ON, {"sharding": {"shards": shards}}, namespace="platform")
    (endpoint,) = one(docs, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["relabelings"] == [SHARD_RELABELING]
    # The pod label the relabeling reads is the one every shard's pods carry.
    for deployment in of_kind(docs, "Deployment"):
        assert targets.SHARD_POD_LABEL in deployment["spec"]["template"]["metadata"]["labels"]
    expected = alerts.rule_group(alerts.AlertSettings(shards=shards, namespace="platform"))
    assert one(docs, "PrometheusRule")["spec"]["groups"] == [expected]
    (down,) = [rule for rule in rules(docs) if rule["alert"] == "FabricCapabilityOperatorDown"]
    for shard in range(shards):
        assert f'absent(up{{job="fabriccap",namespace="platform",shard="{shard}"}})' in down["expr"]
    assert f'shard="{shards}"' not in down["expr"]


@pytest.mark.parametrize(
    "scrape",
    [
        {"serviceMonitor": {"enabled": False}, "prometheusRule": {"enabled": True, "job": "my-pods"}},
        {"prometheusRule": {"enabled": True}},  # a PodMonitor or annotation scraping of the job
        # The ServiceMonitor on, but the rules select another scrape's job (review 64d F2).
        {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True, "job": "my-pods"}},
    ],
)
def test_sharded_rules_for_a_scrape_not_the_charts_ask_for_the_job_not_each_shard(scrape: dict[str, Any]) -> None:
    """Sharded, the PrometheusRule asked absent(up{…,shard="I"}) whatever scraped the targets:
    a scrape without the ServiceMonitor's relabeling has no `shard`, and OperatorDown fired for
    every shard, forever, on a healthy install (hostile review 64b F2). Without the chart's
    ServiceMonitor the rules keep the job's absent(); grouping by `shard` stays, inert without it."""
    docs = render(scrape, {"sharding": {"shards": 2}}, namespace="fc")
    assert len(of_kind(docs, "ServiceMonitor")) == int(scrape.get("serviceMonitor", {}).get("enabled", False))
    job = scrape["prometheusRule"].get("job", "fabriccap")
    assert one(docs, "PrometheusRule")["spec"]["groups"] == [alerts.rule_group(alerts.AlertSettings(job=job))]
    (down,) = [rule for rule in rules(docs) if rule["alert"] == "FabricCapabilityOperatorDown"]
    assert down["expr"].endswith(f'\nabsent(up{{job="{job}"}})')
    assert 'shard="' not in down["expr"]


def test_the_first_names_of_the_label_values_are_still_read() -> None:
    docs = render(MONITORING_ON, "serviceMonitor.labels.old=yes", "prometheusRule.labels.old=yes")
    assert one(docs, "ServiceMonitor")["metadata"]["labels"]["old"] == "yes"
    assert one(docs, "PrometheusRule")["metadata"]["labels"]["old"] == "yes"


# ---------------------------------------------------------------------------------------------
# The admission policy: only where the cluster serves it

ADMISSION_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
WEBHOOKS = "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration"  # every cluster's
POLICIES = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"  # 1.30 on


def admission_objects(*arguments: str, values: tuple[Any, ...] = ()) -> list[str]:
    """The admission objects rendered by ``helm template`` with these flags."""
    args = [helm_binary(), "template", "fabriccap", str(CHART), *arguments]
    for value in values:
        args += ["--set", value]
    result = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False)
    assert result.returncode == 0, result.stderr
    return [doc["kind"] for doc in yaml.safe_load_all(result.stdout) if doc and doc["kind"] in ADMISSION_KINDS]


@pytest.mark.parametrize(
    ("arguments", "rendered"),
    [
        # Offline (no kinds listed): the Kubernetes version says, Helm's own by default.
        ((), True),
        (("--kube-version", "1.30.0"), True),
        (("--kube-version", "1.29.0"), False),  # the chart's kubeVersion allows 1.27
        (("--kube-version", "1.27.3"), False),
        # As `helm install` sees a cluster: its discovery says, whatever the version.
        (("--kube-version", "1.35.0", "--api-versions", WEBHOOKS), False),
        (("--kube-version", "1.31.0", "--api-versions", f"{WEBHOOKS},{POLICIES}"), True),
    ],
)
def test_the_admission_policy_is_rendered_only_where_kubernetes_serves_it(
    arguments: tuple[str, ...], rendered: bool
) -> None:
    """admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy exists from Kubernetes 1.30:
    on an older cluster the object would fail the whole install."""
    assert admission_objects(*arguments) == (list(ADMISSION_KINDS) if rendered else [])


def test_the_admission_policy_can_be_turned_off() -> None:
    assert admission_objects(values=("admissionPolicy.enabled=false",)) == []
