"""The Argo CD health check, run by Argo CD's own Lua runner, as Argo CD's tests run it.

gitops/resource_customizations/fabriccap.dev/FabricCapability/ is laid out as Argo CD's
resource_customizations directory (health.lua, health_test.yaml, testdata/), so it can be
proposed upstream as is. gitops/argocd-health-check is a small Go program around Argo CD's
util/lua (github.com/argoproj/argo-cd/v3, pinned in its go.mod), built once into the cache.
Each object goes through both routes a cluster can take: the built-in script (standard
libraries open, as upstream's TestLuaHealthScript runs it) and the argocd-cm key of
gitops/argocd-cm-patch.yaml (ResourceHealthOverrides, no standard libraries).

Building it needs a Go toolchain (Go >= 1.25) and the Go module proxy: minutes the first
time. Without Go the tests skip on a laptop and fail under CI=true.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabriccap.core.facts import FactsExtractor
from fabriccap.offline.pipeline import evaluate_facts, evaluation_objects
from fabriccap.offline.snapshot import load_snapshots
from fabriccap_devtools.generate import ARGOCD_HEALTH_KEY, argocd_cm_patch
from fabriccap_devtools.gotools import GoToolError, build_go_tool
from support.configs import default_config

REPO_ROOT = Path(__file__).resolve().parents[2]
CUSTOMIZATION = REPO_ROOT / "gitops" / "resource_customizations" / "fabriccap.dev" / "FabricCapability"
ARGOCD_CM_PATCH = REPO_ROOT / "gitops" / "argocd-cm-patch.yaml"
HARNESS_SOURCE = REPO_ROOT / "gitops" / "argocd-health-check"
EXAMPLE_CLUSTER = REPO_ROOT / "examples" / "eks-cluster.json"
RUN_TIMEOUT_SECONDS = 60
CASES: list[dict[str, Any]] = yaml.safe_load((CUSTOMIZATION / "health_test.yaml").read_text())["tests"]

Outcome = dict[str, str]


@pytest.fixture(scope="module")
def harness() -> Path:
    if shutil.which("go") is None and os.environ.get("CI", "").lower() != "true":
        pytest.skip("building gitops/argocd-health-check needs a Go toolchain on PATH (Go >= 1.25)")
    try:
        return build_go_tool(HARNESS_SOURCE)
    except GoToolError as error:
        pytest.fail(str(error))


def run_harness(
    harness: Path, mode: str, directory: Path, stdin: str | None = None
) -> tuple[int, list[dict[str, Any]]]:
    result = subprocess.run(
        [str(harness), mode, str(directory), str(ARGOCD_CM_PATCH)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    assert result.returncode in (0, 1), f"argocd-health-check {mode} failed ({result.returncode}):\n{result.stderr}"
    return result.returncode, list(json.loads(result.stdout))


def argocd_health(harness: Path, obj: dict[str, Any]) -> tuple[Outcome, Outcome]:
    """(built-in route, argocd-cm route) for one object."""
    _, (result,) = run_harness(harness, "eval", CUSTOMIZATION, json.dumps(obj))
    return result["builtin"], result["configMap"]


# ---------------------------------------------------------------------------------------------
# health_test.yaml, every case, through both routes


@pytest.fixture(scope="module")
def case_results(harness: Path) -> dict[str, dict[str, Any]]:
    _, results = run_harness(harness, "test", CUSTOMIZATION)
    return {result["inputPath"]: result for result in results}


@pytest.mark.parametrize("case", CASES, ids=[case["inputPath"].removeprefix("testdata/") for case in CASES])
def test_health_test_case(case: dict[str, Any], case_results: dict[str, dict[str, Any]]) -> None:
    result = case_results[case["inputPath"]]
    expected = {"status": case["healthStatus"]["status"], "message": case["healthStatus"]["message"]}
    assert result["builtin"] == expected, "as a built-in resource_customizations script"
    assert result["configMap"] == expected, "from argocd-cm, without the Lua standard libraries"


def test_every_testdata_file_is_a_case_and_every_status_is_covered() -> None:
    files = {f"testdata/{path.name}" for path in (CUSTOMIZATION / "testdata").glob("*.yaml")}
    assert files == {case["inputPath"] for case in CASES}
    assert {case["healthStatus"]["status"] for case in CASES} == {"Healthy", "Progressing", "Degraded"}
    # Upstream's file naming: <expected status>_<what>.yaml (or just healthy.yaml).
    for case in CASES:
        name = case["inputPath"].removeprefix("testdata/")
        assert name.split("_")[0].removesuffix(".yaml") == case["healthStatus"]["status"].lower(), name


def test_the_harness_reports_a_script_that_gets_it_wrong(harness: Path, tmp_path: Path) -> None:
    """The control: a script that calls everything Healthy fails the cases it should."""
    broken = tmp_path / "FabricCapability"
    shutil.copytree(CUSTOMIZATION, broken)
    (broken / "health.lua").write_text('return {status = "Healthy", message = "always"}\n')
    returncode, results = run_harness(harness, "test", broken)
    assert returncode == 1
    wrong = {result["inputPath"] for result in results if result["builtin"] != result["expected"]}
    assert wrong == {case["inputPath"] for case in CASES}


# ---------------------------------------------------------------------------------------------
# Objects the evaluation really produces, and edge cases


@pytest.fixture(scope="module")
def evaluated() -> dict[str, dict[str, Any]]:
    """FabricCapability objects of the example cluster, as the operator would publish them."""
    config = default_config()
    facts = load_snapshots([str(EXAMPLE_CLUSTER)], FactsExtractor(config))
    return {obj["metadata"]["name"]: obj for obj in evaluation_objects(evaluate_facts(config, facts))}


def _condition(obj: dict[str, Any], condition_type: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == condition_type)


def test_every_example_pool_maps_like_kstatus(harness: Path, evaluated: dict[str, dict[str, Any]]) -> None:
    # kstatus: Stalled=True -> Failed (Degraded), Ready=True -> Current (Healthy), else InProgress.
    seen = set()
    for name, obj in evaluated.items():
        if _condition(obj, "Stalled")["status"] == "True":
            expected = {"status": "Degraded", "message": _condition(obj, "Stalled")["message"]}
        elif _condition(obj, "Ready")["status"] == "True":
            expected = {"status": "Healthy", "message": _condition(obj, "Ready")["message"]}
        else:
            expected = {"status": "Progressing", "message": _condition(obj, "Ready")["message"]}
        assert argocd_health(harness, obj) == (expected, expected), name
        seen.add(expected["status"])
    assert seen == {"Healthy", "Progressing", "Degraded"}, "the example cluster should show every outcome"


def _ready_pool(evaluated: dict[str, dict[str, Any]]) -> dict[str, Any]:
    obj = copy.deepcopy(evaluated["efa-p5-training"])
    assert _condition(obj, "Ready")["status"] == "True"
    return obj


@pytest.mark.parametrize(
    ("generation", "observed"),
    [("10", "9"), ("10", 9), (10, "9"), ("ten", 10), (10, "ten"), (10, None), (2, 1), (3, 4)],
    ids=["both-strings", "generation-string", "observed-string", "generation-garbage", "observed-garbage",
         "observed-missing", "older", "newer"],
)  # fmt: skip
def test_an_outdated_or_unreadable_generation_is_never_healthy(
    harness: Path, evaluated: dict[str, dict[str, Any]], generation: Any, observed: Any
) -> None:
    obj = _ready_pool(evaluated)
    obj["metadata"]["generation"] = generation
    if observed is None:
        del obj["status"]["observedGeneration"]
    else:
        obj["status"]["observedGeneration"] = observed
    for route in argocd_health(harness, obj):
        assert route["status"] == "Progressing", route
        assert route["message"].startswith("waiting for status of generation"), route


@pytest.mark.parametrize(("generation", "observed"), [("10", "10"), ("3", 3), (3, 3.0), (3, 3)])
def test_a_current_generation_in_any_spelling_is_healthy(
    harness: Path, evaluated: dict[str, dict[str, Any]], generation: Any, observed: Any
) -> None:
    obj = _ready_pool(evaluated)
    obj["metadata"]["generation"] = generation
    obj["status"]["observedGeneration"] = observed
    assert [route["status"] for route in argocd_health(harness, obj)] == ["Healthy", "Healthy"]


def test_ready_unknown_with_an_empty_message_shows_the_reason(
    harness: Path, evaluated: dict[str, dict[str, Any]]
) -> None:
    obj = _ready_pool(evaluated)
    _condition(obj, "Ready").update(status="Unknown", reason="Evaluating", message="")
    expected = {"status": "Progressing", "message": "Evaluating"}
    assert argocd_health(harness, obj) == (expected, expected)


# ---------------------------------------------------------------------------------------------
# The argocd-cm patch


def test_argocd_cm_patch_carries_health_lua_verbatim() -> None:
    # What the generator writes (that the committed patch is current is test_generated.py's).
    patch = yaml.safe_load(argocd_cm_patch())
    assert (patch["kind"], patch["metadata"]["name"], patch["metadata"]["namespace"]) == (
        "ConfigMap",
        "argocd-cm",
        "argocd",
    )
    assert patch["data"] == {ARGOCD_HEALTH_KEY: (CUSTOMIZATION / "health.lua").read_text()}
