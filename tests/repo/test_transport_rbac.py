"""RBAC for transport (docs/transport.md): the default install cannot read any pod's log; the
chart's ``transport.enabled`` and the kustomize component ``transport-logs`` grant ``get`` on
``pods/log`` and nothing more, to the operator's ServiceAccount only, and turn transport on in
the operator's config. Rendered by the real tools (tests/support/rendering.py);
tests/e2e/test_deploy.py asks a real API server the same question (kubectl auth can-i).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from fabriccap.core.config import parse_config
from support.rendering import (
    CHART,
    MANIFESTS,
    RUN_TIMEOUT_SECONDS,
    Doc,
    helm_binary,
    of_kind,
    one,
    render_helm,
    render_kustomize,
)

LOG_RULE = ("", "pods/log", ("get",))


def rbac_rules(docs: list[Doc]) -> dict[str, set[tuple[str, str, tuple[str, ...]]]]:
    """Every ClusterRole's and Role's rules, flattened, by the role's name."""
    found: dict[str, set[tuple[str, str, tuple[str, ...]]]] = {}
    for role in [*of_kind(docs, "ClusterRole"), *of_kind(docs, "Role")]:
        rules = found.setdefault(role["metadata"]["name"], set())
        for rule in role.get("rules", []):
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    rules.add((group, resource, tuple(sorted(rule.get("verbs", [])))))
    return found


def reads_logs(rule: tuple[str, str, tuple[str, ...]]) -> bool:
    group, resource, verbs = rule
    return group in ("", "*") and resource in ("pods/log", "pods/*", "*") and bool({"get", "*"} & set(verbs))


def config_of(docs: list[Doc]) -> dict[str, object]:
    deployment = one(docs, "Deployment")
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    name = next(volume["configMap"]["name"] for volume in volumes if "configMap" in volume)
    config_map = next(doc for doc in of_kind(docs, "ConfigMap") if doc["metadata"]["name"] == name)
    text = str(config_map["data"]["config.yaml"])
    parse_config(text, "the rendered config")  # the operator starts on it
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded


def with_component(tmp_path: Path) -> list[Doc]:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    base = os.path.relpath(MANIFESTS, overlay)
    overlay.joinpath("kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [base],
                "components": [f"{base}/components/transport-logs"],
            }
        )
    )
    return render_kustomize(overlay)


@pytest.fixture(scope="module")
def defaults() -> dict[str, list[Doc]]:
    return {"kustomize": render_kustomize(MANIFESTS), "helm": render_helm()}


@pytest.fixture(scope="module")
def enabled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Doc]]:
    return {
        "kustomize": with_component(tmp_path_factory.mktemp("transport")),
        "helm": render_helm('{"transport": {"enabled": true}}'),
    }


@pytest.mark.parametrize("source", ["kustomize", "helm"])
def test_the_default_install_cannot_read_logs(source: str, defaults: dict[str, list[Doc]]) -> None:
    docs = defaults[source]
    granting = [name for name, rules in rbac_rules(docs).items() if any(reads_logs(rule) for rule in rules)]
    assert granting == []
    assert rbac_rules(docs)  # the control: the roles are there, and read
    transport = config_of(docs).get("transport") or {}
    assert isinstance(transport, dict) and not transport.get("enabled")


@pytest.mark.parametrize("source", ["kustomize", "helm"])
def test_transport_grants_get_on_pods_log_and_nothing_more(
    source: str, defaults: dict[str, list[Doc]], enabled: dict[str, list[Doc]]
) -> None:
    before, after = rbac_rules(defaults[source]), rbac_rules(enabled[source])
    added = {name: rules for name, rules in after.items() if name not in before}
    assert list(added.values()) == [{LOG_RULE}], added
    assert {name: rules for name, rules in after.items() if name in before} == before
    (role,) = added
    (binding,) = [b for b in of_kind(enabled[source], "ClusterRoleBinding") if b["roleRef"]["name"] == role]
    account = one(enabled[source], "ServiceAccount")["metadata"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]
    assert config_of(enabled[source])["transport"] == {"enabled": True}


def test_the_component_changes_nothing_else_in_the_config(
    defaults: dict[str, list[Doc]], enabled: dict[str, list[Doc]]
) -> None:
    base, component = config_of(defaults["kustomize"]), config_of(enabled["kustomize"])
    assert {key: value for key, value in component.items() if key != "transport"} == base


def test_the_chart_keeps_the_transport_settings_given_in_config() -> None:
    docs = render_helm('{"transport": {"enabled": true}, "config": {"transport": {"maxBytes": "1Mi"}}}')
    assert config_of(docs)["transport"] == {"enabled": True, "maxBytes": "1Mi"}


def test_the_chart_refuses_transport_in_config_without_its_rbac() -> None:
    args = [
        helm_binary(),
        "template",
        "fabriccap",
        str(CHART),
        "--set-json",
        '{"config": {"transport": {"enabled": true}}}',
    ]
    result = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False)
    assert result.returncode != 0
    assert "config.transport.enabled: set transport.enabled instead" in result.stderr, result.stderr
