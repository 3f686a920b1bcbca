"""Configuration: built-in profiles, overrides, validation errors naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fabriccap.configfile import load_config
from fabriccap.core import config as core_config
from fabriccap.core.config import (
    DEFAULT_POOL_LABELS,
    OLD_FIELD_NAMES,
    Config,
    ConfigError,
    FabricProfile,
    OldFieldName,
    config_input_schema,
)
from support.configs import build_config, default_config


def _fabric(config: Config, name: str) -> Any:
    return next(fabric for fabric in config.fabrics if fabric.name == name)


def test_default_pool_labels_in_spec_order() -> None:
    assert default_config().pool_labels == (
        "eks.amazonaws.com/nodegroup",
        "karpenter.sh/nodepool",
        "alpha.eksctl.io/nodegroup-name",
        "sagemaker.amazonaws.com/instance-group-name",
        "cloud.google.com/gke-nodepool",
        "kubernetes.azure.com/agentpool",
        "karpenter.sh/provisioner-name",
        "node.kubernetes.io/instance-type",
    )
    assert DEFAULT_POOL_LABELS[-1] == "node.kubernetes.io/instance-type"


def test_default_profiles_efa_enabled_aks_rdma_present_but_disabled() -> None:
    config = default_config()
    assert [fabric.name for fabric in config.fabrics] == ["efa", "aks-rdma"]
    assert [fabric.name for fabric in config.enabled_fabrics] == ["efa"]
    assert config.plugin_namespaces == ("kube-system",)
    rdma = _fabric(config, "aks-rdma")
    assert rdma.enabled is False
    assert rdma.resource == "rdma/hca_shared_devices_a"


def test_default_efa_profile() -> None:
    efa = _fabric(default_config(), "efa")
    assert efa.resource == "vpc.amazonaws.com/efa"
    assert efa.target_nodes.accelerator_resources == (
        "nvidia.com/gpu",
        "aws.amazon.com/neuron",
        "aws.amazon.com/neuroncore",
        "aws.amazon.com/neurondevice",
    )
    assert efa.target_nodes.accelerator_label_pairs == (("nvidia.com/gpu.present", "true"),)
    assert efa.device_plugin.namespaces == ("kube-system",)
    assert efa.shared is False
    assert efa.device_plugin.selector_label_sets == [{"app.kubernetes.io/name": "aws-efa-k8s-device-plugin"}]
    assert efa.device_plugin.daemon_set_names == (
        "aws-efa-k8s-device-plugin",
        "aws-efa-k8s-device-plugin-daemonset",
    )
    assert efa.recommended_env[0].name == "FI_PROVIDER"
    assert efa.recommended_env[0].value == "efa"


@pytest.mark.parametrize("instance_type", ["m5.large", "p3dn.24xlarge-typo", "p6e-gb200.36xlarge"])
def test_types_the_catalog_lacks_are_unknown(instance_type: str) -> None:
    efa = _fabric(default_config(), "efa")
    assert efa.instance_types == {}  # the maxima are the catalog's; this map only overrides
    assert efa.maximum_for(instance_type) is None


def test_instance_types_override_and_extend_the_catalog() -> None:
    efa = _fabric(
        build_config({"fabrics": [{"name": "efa", "instanceTypes": {"p5.48xlarge": 16, "p6e-gb200.36xlarge": 18}}]}),
        "efa",
    )
    assert efa.maximum_for("p5.48xlarge") == 16  # overridden
    assert efa.maximum_for("p6e-gb200.36xlarge") == 18  # added: not in the catalog
    assert efa.maximum_for("p5en.48xlarge") == 16  # the catalog's
    assert efa.maximum_for("ml.p5en.48xlarge") == 16  # HyperPod's prefix stripped


def test_a_config_built_without_catalogs_knows_no_instance_type() -> None:
    efa = _fabric(core_config.default_config(), "efa")
    assert efa.catalog is None
    assert efa.maximum_for("p5.48xlarge") is None


def test_p4d_is_isolated_from_other_types() -> None:
    efa = _fabric(default_config(), "efa")
    assert efa.isolation_group("p4d.24xlarge") == efa.isolation_group("p4de.24xlarge") == 0
    assert efa.isolation_group("p5.48xlarge") is None


def test_empty_or_null_document_is_the_default() -> None:
    assert build_config(None) == default_config()
    assert build_config({}) == default_config()


def test_override_merges_onto_builtin_profile() -> None:
    config = build_config(
        {"fabrics": [{"name": "efa", "devicePlugin": {"namespace": "efa-system", "daemonSetNames": ["efa-dp"]}}]}
    )
    efa = _fabric(config, "efa")
    # Given fields replace the built-in ones (lists whole, mappings key by key) ...
    assert efa.device_plugin.namespaces == ("efa-system",)  # `namespace: X` reads as [X]
    assert efa.device_plugin.daemon_set_names == ("efa-dp",)
    assert efa.device_plugin.daemon_set_selector == "app.kubernetes.io/name=aws-efa-k8s-device-plugin"
    # ... the rest comes from the built-in profile.
    assert efa.resource == "vpc.amazonaws.com/efa"
    assert efa.maximum_for("p5.48xlarge") == 32
    assert efa.enabled is True
    assert config.plugin_namespaces == ("efa-system",)


def test_opting_in_to_aks_rdma() -> None:
    config = build_config({"fabrics": [{"name": "efa"}, {"name": "aks-rdma"}]})
    assert [fabric.name for fabric in config.enabled_fabrics] == ["efa", "aks-rdma"]
    rdma = _fabric(config, "aks-rdma")
    assert rdma.device_plugin.namespaces == ("nvidia-network-operator", "network-operator", "kube-system")
    assert rdma.shared is True
    assert config.plugin_namespaces == ("kube-system", "network-operator", "nvidia-network-operator")


def test_disabling_efa_and_overriding_maxima() -> None:
    config = build_config(
        {
            "fabrics": [
                {"name": "efa", "enabled": False, "instanceTypes": {"p5.48xlarge": 16, "x9.metal": 2}},
                {"name": "aks-rdma"},
            ]
        }
    )
    efa = _fabric(config, "efa")
    assert efa.enabled is False
    assert [fabric.name for fabric in config.enabled_fabrics] == ["aks-rdma"]
    # The map overrides the catalog: one entry changes, one is added, the others stay.
    assert efa.maximum_for("p5.48xlarge") == 16
    assert efa.maximum_for("x9.metal") == 2
    assert efa.maximum_for("p4d.24xlarge") == 4


def test_clearing_a_builtin_selector() -> None:
    config = build_config({"fabrics": [{"name": "efa", "devicePlugin": {"daemonSetSelector": None}}]})
    efa = _fabric(config, "efa")
    assert efa.device_plugin.daemon_set_selector is None
    assert efa.device_plugin.daemon_set_names == ("aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin-daemonset")


def test_custom_fabric_and_pool_labels() -> None:
    config = build_config(
        {
            "poolLabels": ["team.example.com/pool", "karpenter.sh/nodepool"],
            "fabrics": [
                {
                    "name": "ib",
                    "resource": "nvidia.com/hostdev",
                    "devicePlugin": {"namespace": "nvidia-network-operator", "daemonSetSelector": "app=sriov, tier=dp"},
                    "targetNodes": {"gpuResources": [], "gpuLabels": []},  # the old names, still read
                }
            ],
        }
    )
    assert config.pool_labels == ("team.example.com/pool", "karpenter.sh/nodepool")
    ib = _fabric(config, "ib")
    assert ib.device_plugin.selector_label_sets == [{"app": "sriov", "tier": "dp"}]
    assert ib.target_nodes.accelerator_resources == ()
    assert ib.target_nodes.accelerator_labels == ()
    assert ib.device_plugin.namespaces == ("nvidia-network-operator",)
    assert ib.instance_types == {}


@pytest.mark.parametrize(
    ("raw", "field", "problem"),
    [
        ({"bogus": 1}, "bogus", "Extra inputs"),
        ({"fabrics": [{"name": "efa", "resourse": "x"}]}, "fabrics.0.resourse", "Extra inputs"),
        ({"fabrics": [{"name": "efa", "devicePlugin": {"nmespace": "x"}}]}, "fabrics.0.devicePlugin.nmespace", "Extra"),
        ({"poolLabels": ["Not A Label"]}, "poolLabels", "not a valid label key"),
        ({"poolLabels": ["-bad/key"]}, "poolLabels", "not a valid label key"),
        ({"poolLabels": ["a/" + "x" * 64]}, "poolLabels", "not a valid label key"),
        ({"poolLabels": []}, "poolLabels", "at least 1"),
        ({"poolLabels": ["a", "a"]}, "poolLabels", "unique"),
        ({"fabrics": [{"name": "efa", "instanceTypes": {"p5.48xlarge": -1}}]}, "fabrics.0.instanceTypes", "negative"),
        ({"fabrics": [{"name": "efa"}, {"name": "efa"}]}, "fabrics", "unique"),
        ({"fabrics": [{"name": "ib", "resource": "x.io/ib"}]}, "fabrics.0", "daemonSetSelector or daemonSetNames"),
        (
            {"fabrics": [{"name": "efa", "devicePlugin": {"daemonSetSelector": None, "daemonSetNames": []}}]},
            "fabrics.0",
            "daemonSetSelector or daemonSetNames",
        ),
        (
            {"fabrics": [{"name": "efa", "devicePlugin": {"daemonSetSelector": "novalue"}}]},
            "fabrics.0.devicePlugin.daemonSetSelector",
            "key=value",
        ),
        ({"fabrics": [{"name": "efa", "targetNodes": {"gpuLabels": ["nolabel"]}}]}, "fabrics.0.targetNodes", "key="),
        ({"fabrics": [{"name": "EFA", "resource": "a/b", "devicePlugin": {"daemonSetNames": ["x"]}}]}, "name", "DNS"),
        (
            {"fabrics": [{"name": "ib", "resource": "not valid", "devicePlugin": {"daemonSetNames": ["x"]}}]},
            "fabrics.0.resource",
            "not a valid label key",
        ),
        ({"fabrics": "efa"}, "fabrics", "must be a list"),
        ({"fabrics": ["efa"]}, "fabrics.0", "dictionary"),
        ({"poolGracePeriodSeconds": -5}, "poolGracePeriodSeconds", "greater than or equal"),
        # What the operator could not use: each is refused with the field named.
        (
            {"fabrics": [{"name": "efa", "devicePlugin": {"daemonSetSelector": "app=not a valid value!!"}}]},
            "fabrics.0.devicePlugin.daemonSetSelector",
            "'not a valid value!!' (for app) is not a valid label value",
        ),
        (
            {"fabrics": [{"name": "efa", "devicePlugin": {"namespace": ""}}]},
            "fabrics.0.devicePlugin.namespaces",
            "namespace '' is not a DNS label",
        ),
        (
            {"fabrics": [{"name": "efa", "devicePlugin": {"namespaces": ["kube-system", "Not_A_Namespace"]}}]},
            "fabrics.0.devicePlugin.namespaces",
            "namespace 'Not_A_Namespace' is not a DNS label",
        ),
        (
            {"fabrics": [{"name": "efa", "devicePlugin": {"namespaces": []}}]},
            "fabrics.0.devicePlugin.namespaces",
            "at least 1",
        ),
        # Review 66d F7: the error named namespaces.0, a field the user had not written.
        (
            {"fabrics": [{"name": "efa", "devicePlugin": {"namespace": ["a", "b"]}}]},
            "fabrics.0.devicePlugin",
            "namespace takes one value (the old form of namespaces); for several, give namespaces",
        ),
        # Review 66d F7: "resource: Field required" left the typo of a built-in's name unsaid.
        (
            {"fabrics": [{"name": "efaa"}]},
            "fabrics.0.resource",
            "Field required ('efaa' is not a built-in profile (efa, aks-rdma), so it gives every field itself)",
        ),
        (
            {"fabrics": [{"name": "efa", "devicePlugin": {"namespaces": ["a", "a"]}}]},
            "fabrics.0.devicePlugin.namespaces",
            "unique",
        ),
        (
            {
                "fabrics": [
                    {"name": "ib", "resource": "x.io/ib", "devicePlugin": {"namespace": "a", "namespaces": ["b"]}}
                ]
            },
            "fabrics.0.devicePlugin",
            "give namespaces or its old name namespace, not both",
        ),
        (
            {"fabrics": [{"name": "efa", "devicePlugin": {"daemonSetNames": ["Not/Valid"]}}]},
            "fabrics.0.devicePlugin.daemonSetNames",
            "DaemonSet name 'Not/Valid' is not a valid object name",
        ),
        ({"fabrics": [{"name": "efa", "shared": "yes"}]}, "fabrics.0.shared", "valid boolean"),
        ({"fabrics": [{"name": "efa", "enabled": "no"}]}, "fabrics.0.enabled", "valid boolean"),
        (
            {"fabrics": [{"name": "efa", "targetNodes": {"acceleratorResources": ["not a resource"]}}]},
            "fabrics.0.targetNodes.acceleratorResources",
            "not a valid label key",
        ),
        (
            {"fabrics": [{"name": "efa", "targetNodes": {"gpuResources": ["a/b"], "acceleratorResources": ["c/d"]}}]},
            "fabrics.0.targetNodes",
            "give acceleratorResources or its old name gpuResources, not both",
        ),
        ({"fabrics": []}, "fabrics", "no fabric is enabled"),
        ({"fabrics": [{"name": "efa", "enabled": False}]}, "fabrics", "no fabric is enabled"),
        *(
            (
                {"fabrics": [{"name": "efa", "recommendedEnv": [{"name": name, "value": "1"}]}]},
                "fabrics.0.recommendedEnv.0.name",
                "is not an environment variable name",
            )
            for name in ("", "FI_PROVIDER=efa", "NCCL\x01DEBUG", "NCCL_DÉBUG", "NCCL_DEBUG\n")
        ),
    ],
)
def test_invalid_config_names_the_field(raw: Any, field: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build_config(raw, source="values.yaml")
    text = str(caught.value)
    assert text.startswith("values.yaml: ")
    assert field in text
    assert problem in text
    assert "\n" not in text


@pytest.mark.parametrize("name", ["NCCL_DEBUG", "my.env-name", "MY_ENV.NAME", "1st", "A B", "~!@#$%^&*()"])
def test_an_environment_variable_name_is_what_kubernetes_allows(name: str) -> None:
    """apimachinery's IsRelaxedEnvVarName: printable ASCII (the space too) other than "=";
    its own examples, a leading digit and a space among them."""
    config = build_config({"fabrics": [{"name": "efa", "recommendedEnv": [{"name": name, "value": "1"}]}]})
    assert [env.name for env in _fabric(config, "efa").recommended_env] == [name]


@pytest.mark.parametrize("raw", [[1, 2], "just a string", 42])
def test_config_not_a_mapping(raw: Any) -> None:
    with pytest.raises(ConfigError, match=r"^cfg: config must be a mapping, got "):
        build_config(raw, source="cfg")


def test_load_config_none_is_default() -> None:
    assert load_config(None) == default_config()


def test_load_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("poolLabels: [karpenter.sh/nodepool]\nfabrics:\n- name: efa\n  enabled: true\n")
    config = load_config(path)
    assert config.pool_labels == ("karpenter.sh/nodepool",)
    assert [fabric.name for fabric in config.enabled_fabrics] == ["efa"]


def test_load_config_not_yaml(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("fabrics: [name: efa\n  : : :\n")
    with pytest.raises(ConfigError, match=rf"^{path}: config is not valid YAML at line \d+$"):
        load_config(path)


def test_load_config_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError, match=rf"^{path}: cannot read config"):
        load_config(path)


def test_load_config_invalid_field_names_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("fabrics:\n- name: efa\n  instanceTypes: {p5.48xlarge: -32}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"{path}: invalid config at fabrics.0.instanceTypes: maximum for 'p5.48xlarge' is negative (-32)"
    )


def test_duplicate_yaml_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("fabrics:\n- name: efa\n  devicePlugin:\n    namespaces: [a]\n    namespaces: [b]\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert (
        str(caught.value) == f"{path}: config is not valid YAML at line 5: duplicate key 'namespaces' (first at line 4)"
    )


def test_hyperpod_instance_types_use_the_ec2_maxima() -> None:
    efa = _fabric(default_config(), "efa")
    assert efa.maximum_for("ml.p5.48xlarge") == efa.maximum_for("p5.48xlarge") == 32
    assert efa.maximum_for("ml.trn1.32xlarge") == 8
    assert efa.maximum_for("ml.unknown.type") is None
    assert efa.maximum_for(None) is None
    assert efa.isolation_group("ml.p4d.24xlarge") == efa.isolation_group("p4de.24xlarge")


@pytest.mark.parametrize(
    ("instance_type", "maximum"),
    [
        ("g4dn.8xlarge", 1),
        ("g4dn.metal", 1),
        ("g4dn.4xlarge", 0),
        ("p3dn.24xlarge", 1),
        ("dl2q.24xlarge", 1),
        ("inf1.24xlarge", 1),
        ("gr6.8xlarge", 1),
        ("gr6.4xlarge", 0),
        ("gr6f.4xlarge", 0),
        ("g6f.xlarge", 0),
        ("g7.8xlarge", 1),
        ("g7.48xlarge", 2),
        ("g7.2xlarge", 0),
        ("trn1.2xlarge", 0),
        ("hpc6a.48xlarge", 1),
        ("hpc7g.16xlarge", 1),
        ("hpc6id.32xlarge", 2),
        ("hpc7a.96xlarge", 2),
        ("hpc8a.96xlarge", 2),
        ("c5n.18xlarge", 1),
        ("c5n.metal", 1),
    ],
)
def test_the_karpenter_reference_maxima(instance_type: str, maximum: int) -> None:
    assert _fabric(default_config(), "efa").maximum_for(instance_type) == maximum


def test_old_names_merge_onto_the_builtin_profile() -> None:
    config = build_config(
        {
            "fabrics": [
                {"name": "efa", "targetNodes": {"gpuResources": ["nvidia.com/gpu"]}, "devicePlugin": {"namespace": "x"}}
            ]
        }
    )
    efa = _fabric(config, "efa")
    assert efa.target_nodes.accelerator_resources == ("nvidia.com/gpu",)
    assert efa.target_nodes.accelerator_labels == ("nvidia.com/gpu.present=true",)  # kept from the built-in
    assert efa.device_plugin.namespaces == ("x",)


@pytest.mark.parametrize("rename", OLD_FIELD_NAMES, ids=lambda rename: f"{rename.model.__name__}.{rename.old}")
def test_each_old_field_name_is_one_row_every_reader_follows(rename: OldFieldName) -> None:
    """The validator, the merge onto a built-in profile and the JSON Schema all read the one
    table (the reference is generated from it too, tests/devtools/test_reference.py)."""
    (field,) = [
        info.alias or name for name, info in FabricProfile.model_fields.items() if info.annotation is rename.model
    ]
    assert field is not None
    value: Any = "efa-system" if rename.single_item else ["x.io/y=true" if "Labels" in rename.new else "x.io/y"]
    expected = [value] if rename.single_item else value
    (efa,) = build_config({"fabrics": [{"name": "efa", field: {rename.old: value}}]}).fabrics
    # Read as the new name, and it replaces the built-in profile's value instead of merging.
    assert efa.model_dump(by_alias=True, mode="json")[field][rename.new] == expected
    with pytest.raises(ConfigError, match=f"give {rename.new} or its old name {rename.old}, not both"):
        build_config({"fabrics": [{"name": "efa", field: {rename.old: value, rename.new: expected}}]})
    definition = config_input_schema()["$defs"][rename.model.__name__]
    old_schema = definition["properties"][rename.old]
    new_schema = definition["properties"][rename.new]
    assert old_schema["deprecated"] is True
    # The old name is checked as the new one is (patterns included), one item of it for a shorthand.
    shape = new_schema["items"] if rename.single_item else new_schema
    checks = {key: value for key, value in shape.items() if key not in ("default", "description")}
    assert {key: old_schema[key] for key in checks} == checks
    assert {"not": {"required": [rename.old, rename.new]}} in definition["allOf"]
