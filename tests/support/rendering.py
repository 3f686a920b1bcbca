"""The kustomize manifests and the Helm chart rendered by the real tools: helm from
scripts/ensure-helm.sh (cached), kubectl from the control plane's binaries
(fabriccap_devtools.controlplane.binaries), built once into the same cache."""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from fabriccap_devtools.controlplane.binaries import KUBECTL, ensure_binaries

REPO_ROOT = Path(__file__).resolve().parents[2]
ENSURE_HELM = REPO_ROOT / "scripts" / "ensure-helm.sh"
MANIFESTS = REPO_ROOT / "manifests"
CHART = REPO_ROOT / "charts" / "fabriccap"
COMPONENTS = ("servicemonitor", "prometheusrule", "dashboard")
RUN_TIMEOUT_SECONDS = 120

Doc = dict[str, Any]


def run_tool(args: Sequence[str], cwd: Path | None = None) -> str:
    result = subprocess.run(
        list(args), capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False, cwd=cwd
    )
    assert result.returncode == 0, f"{' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
    return result.stdout


@functools.cache
def helm_binary() -> str:
    return run_tool(["bash", str(ENSURE_HELM)]).strip()


@functools.cache
def kubectl_binary() -> str:
    return str(ensure_binaries([KUBECTL])[KUBECTL])


def _documents(text: str) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def render_kustomize(directory: Path) -> list[Doc]:
    return _documents(run_tool([kubectl_binary(), "kustomize", str(directory)]))


def render_helm(*values: str, release: str = "fabriccap", namespace: str = "fabriccap-system") -> list[Doc]:
    args = [helm_binary(), "template", release, str(CHART), "--namespace", namespace, "--include-crds"]
    for value in values:
        args += ["--set-json", value]
    return _documents(run_tool(args))


def render_kustomize_with_components(tmp_path: Path) -> list[Doc]:
    """An overlay as a user writes one: the base plus every monitoring component."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    # kustomize takes relative paths only; directories outside the overlay are fine.
    base = os.path.relpath(MANIFESTS, overlay)
    overlay.joinpath("kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [base],
                "components": [f"{base}/components/{name}" for name in COMPONENTS],
            }
        )
    )
    return render_kustomize(overlay)


def one(docs: Iterable[Doc], kind: str, name: str | None = None) -> Doc:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def of_kind(docs: Iterable[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]
