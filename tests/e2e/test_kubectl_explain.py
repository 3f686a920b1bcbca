"""`kubectl explain` on the real API server shows the CRD's descriptions.

Users read the FabricCapability's fields with `kubectl explain fcap.status`; the API server
publishes them from the CRD's openAPIV3Schema (OpenAPI v3, served a moment after the CRD is
established). The descriptions checked here are read from crds/fabriccapabilities.yaml, so the
test follows them as they change.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from fabriccap_devtools.waiting import wait_until

if TYPE_CHECKING:
    from harness import E2ECluster

CRD_FILE = Path(__file__).resolve().parents[2] / "crds" / "fabriccapabilities.yaml"


def schema_at(*path: str) -> dict[str, Any]:
    crd = yaml.safe_load(CRD_FILE.read_text(encoding="utf-8"))
    (version,) = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    for name in path:
        schema = schema["properties"][name] if "properties" in schema else schema["items"]["properties"][name]
    return schema


def words(text: str) -> str:
    """kubectl wraps and indents descriptions: compare them as runs of words."""
    return " ".join(text.split())


def explain(cluster: E2ECluster, field: str, wanted: list[str]) -> str:
    """`kubectl explain FIELD` once it shows every text in ``wanted`` (the API server publishes a new
    CRD's OpenAPI a moment after it is established)."""

    assert wanted and all(item.strip() for item in wanted), "nothing to look for: a description is empty"

    def shown() -> str | None:
        result = cluster.run_kubectl("explain", field, check=False)
        text = words(result.stdout)
        return text if result.returncode == 0 and all(words(item) in text for item in wanted) else None

    try:
        return wait_until(shown, f"kubectl explain {field} to show {wanted}", timeout=30, interval=0.5)
    except AssertionError:
        last = cluster.run_kubectl("explain", field, check=False)
        pytest.fail(f"kubectl explain {field} does not show {wanted}:\n{last.stdout}{last.stderr}")


def test_explain_status_shows_the_status_and_its_fields(cluster: E2ECluster) -> None:
    status = schema_at("status")
    wanted = [status["description"], *(child["description"] for child in status["properties"].values())]
    text = explain(cluster, "fabriccapabilities.status", wanted)
    for name in status["properties"]:
        assert f" {name} <" in text, name  # each field is listed with its type


def test_explain_a_nested_field_by_the_short_name(cluster: E2ECluster) -> None:
    field = schema_at("status", "gap", "pluginReadyNotAdvertised")
    text = explain(cluster, "fcap.status.gap.pluginReadyNotAdvertised", [field["description"]])
    assert "<integer>" in text


def test_explain_a_field_inside_a_list(cluster: E2ECluster) -> None:
    """conditions is a list: explain walks into its items (conditions.reason)."""
    reason = schema_at("status", "conditions", "reason")
    explain(cluster, "fabriccapabilities.status.conditions.reason", [reason["description"]])
