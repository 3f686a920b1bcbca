"""The Argo CD health check (gitops/argocd-health.lua), run by a real Lua interpreter.

Argo CD sets the global ``obj`` to the resource (JSON turned into Lua tables) and runs the
script as a chunk that returns ``{status, message}``; the harness here does the same with
objects the evaluation really produces, plus hand-made edge cases. Under CI a missing Lua
interpreter fails the test (scripts/bootstrap.sh --test installs Debian's lua5.4); on a
developer machine it skips.
"""

from __future__ import annotations

import copy
import math
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabriccap.core.config import default_config
from fabriccap.core.facts import FactsExtractor
from fabriccap.offline.pipeline import evaluate_facts, evaluation_objects
from fabriccap.offline.snapshot import load_snapshots

REPO_ROOT = Path(__file__).resolve().parents[2]
HEALTH_SCRIPT = REPO_ROOT / "gitops" / "argocd-health.lua"
ARGOCD_CM_PATCH = REPO_ROOT / "gitops" / "argocd-cm-patch.yaml"
EXAMPLE_CLUSTER = REPO_ROOT / "examples" / "eks-cluster.json"
HEALTH_KEY = "resource.customizations.health.fabriccap.dev_FabricCapability"
LUA_CANDIDATES = ("lua5.4", "lua")


def _lua_binary() -> str:
    for name in LUA_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    message = f"no Lua interpreter ({' or '.join(LUA_CANDIDATES)}); install Debian's lua5.4"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message} (scripts/bootstrap.sh --test does so in CI)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def lua() -> str:
    return _lua_binary()


def to_lua(value: Any) -> str:
    """A Lua literal for a JSON value, as Argo CD converts objects (null becomes absent)."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"JSON has no {value}")
        return repr(value)
    if isinstance(value, str):
        return _lua_string(value)
    if isinstance(value, list):
        if any(item is None for item in value):
            raise ValueError("a null inside a list would leave a hole in the Lua sequence")
        return "{" + ", ".join(to_lua(item) for item in value) + "}"
    if isinstance(value, dict):
        fields = [f"[{_lua_string(str(key))}] = {to_lua(item)}" for key, item in value.items() if item is not None]
        return "{" + ", ".join(fields) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _lua_string(text: str) -> str:
    """Printable ASCII as is, everything else (quotes, newlines, UTF-8 bytes) as \\ddd."""
    out = []
    for byte in text.encode("utf-8"):
        if 0x20 <= byte < 0x7F and byte not in (0x22, 0x5C):
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


def argocd_health(lua: str, obj: dict[str, Any], tmp_path: Path) -> tuple[str, str]:
    harness = tmp_path / "harness.lua"
    harness.write_text(
        f"obj = {to_lua(obj)}\n"
        f"local hs = dofile({_lua_string(str(HEALTH_SCRIPT))})\n"
        'assert(type(hs) == "table", "the script must return a table")\n'
        'io.write(tostring(hs.status), "\\n", tostring(hs.message), "\\n")\n'
    )
    result = subprocess.run([lua, str(harness)], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, f"lua failed:\n{result.stderr}"
    status, message = result.stdout.split("\n", 1)
    return status, message.removesuffix("\n")


@pytest.fixture(scope="module")
def evaluated() -> dict[str, dict[str, Any]]:
    """FabricCapability objects of the example cluster, as the operator would publish them."""
    config = default_config()
    facts = load_snapshots([str(EXAMPLE_CLUSTER)], FactsExtractor(config))
    return {obj["metadata"]["name"]: obj for obj in evaluation_objects(evaluate_facts(config, facts))}


def _condition(obj: dict[str, Any], condition_type: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == condition_type)


def _find(evaluated: dict[str, dict[str, Any]], ready: str, stalled: str) -> dict[str, Any]:
    for obj in evaluated.values():
        if _condition(obj, "Ready")["status"] == ready and _condition(obj, "Stalled")["status"] == stalled:
            return copy.deepcopy(obj)
    raise AssertionError(f"the example cluster has no pool with Ready={ready}, Stalled={stalled}")


def test_lua_literals_round_trip_awkward_strings(lua: str, tmp_path: Path) -> None:
    text = 'quote " backslash \\ newline \n tab \t unicode é ✓'
    script = tmp_path / "echo.lua"
    script.write_text(f"local t = {to_lua({'a': [text]})}\nio.write(t['a'][1])\n")
    result = subprocess.run([lua, str(script)], capture_output=True, timeout=30, check=True)
    assert result.stdout.decode("utf-8") == text


def test_ready_pool_is_healthy_with_the_ready_message(
    lua: str, evaluated: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    obj = _find(evaluated, ready="True", stalled="False")
    assert argocd_health(lua, obj, tmp_path) == ("Healthy", _condition(obj, "Ready")["message"])


def test_not_ready_pool_is_progressing_with_the_ready_message(
    lua: str, evaluated: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    obj = evaluated["efa-p5-partial"]
    ready = _condition(obj, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PartialRollout")
    assert argocd_health(lua, obj, tmp_path) == ("Progressing", ready["message"])


def test_stalled_pool_is_degraded_with_the_stalled_message(
    lua: str, evaluated: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    obj = evaluated["efa-g6-inference"]
    stalled = _condition(obj, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "InstanceTypeUnsupported")
    assert argocd_health(lua, obj, tmp_path) == ("Degraded", stalled["message"])


def test_every_example_pool_maps_like_kstatus(lua: str, evaluated: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    # kstatus: Stalled=True -> Failed (Degraded), Ready=True -> Current (Healthy), else InProgress.
    seen = set()
    for name, obj in evaluated.items():
        if _condition(obj, "Stalled")["status"] == "True":
            expected = "Degraded"
        elif _condition(obj, "Ready")["status"] == "True":
            expected = "Healthy"
        else:
            expected = "Progressing"
        status, _ = argocd_health(lua, obj, tmp_path)
        assert status == expected, name
        seen.add(status)
    assert seen == {"Healthy", "Progressing", "Degraded"}, "the example cluster should show every outcome"


def test_stale_observed_generation_is_progressing_even_when_ready(
    lua: str, evaluated: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    obj = _find(evaluated, ready="True", stalled="False")
    obj["metadata"]["generation"] = 3
    obj["status"]["observedGeneration"] = 2
    status, message = argocd_health(lua, obj, tmp_path)
    assert status == "Progressing"
    assert message.startswith("waiting for status")
    # The control: the same object, caught up, is Healthy again.
    obj["status"]["observedGeneration"] = 3
    assert argocd_health(lua, obj, tmp_path)[0] == "Healthy"


def test_stale_generation_wins_over_stalled(lua: str, evaluated: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    obj = copy.deepcopy(evaluated["efa-g6-inference"])
    obj["metadata"]["generation"] = 2
    obj["status"]["observedGeneration"] = 1
    assert argocd_health(lua, obj, tmp_path)[0] == "Progressing"


def test_no_ready_condition_is_progressing(lua: str, evaluated: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    obj = _find(evaluated, ready="True", stalled="False")
    obj["status"]["conditions"] = [c for c in obj["status"]["conditions"] if c["type"] != "Ready"]
    assert argocd_health(lua, obj, tmp_path) == ("Progressing", "waiting for the Ready condition")


def test_ready_unknown_is_progressing(lua: str, evaluated: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    obj = _find(evaluated, ready="True", stalled="False")
    ready = _condition(obj, "Ready")
    ready.update(status="Unknown", reason="Evaluating", message="")
    # An empty message falls back to the reason.
    assert argocd_health(lua, obj, tmp_path) == ("Progressing", "Evaluating")


def test_object_without_status_is_progressing(lua: str, tmp_path: Path) -> None:
    obj = {
        "apiVersion": "fabriccap.dev/v1alpha1",
        "kind": "FabricCapability",
        "metadata": {"name": "efa-new", "generation": 1},
    }
    status, message = argocd_health(lua, obj, tmp_path)
    assert status == "Progressing"
    assert message.startswith("waiting for status")


def test_argocd_cm_patch_embeds_the_script_verbatim() -> None:
    patch = yaml.safe_load(ARGOCD_CM_PATCH.read_text())
    assert (patch["kind"], patch["metadata"]["name"], patch["metadata"]["namespace"]) == (
        "ConfigMap",
        "argocd-cm",
        "argocd",
    )
    assert patch["data"][HEALTH_KEY] == HEALTH_SCRIPT.read_text(), (
        "gitops/argocd-cm-patch.yaml must carry gitops/argocd-health.lua unchanged"
    )
