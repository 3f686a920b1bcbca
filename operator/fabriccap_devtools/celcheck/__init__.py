"""celcheck: compile a ValidatingAdmissionPolicy's CEL as a kube-apiserver of a given version
does when the policy is created, without that server.

A kube-apiserver compiles a new policy's expressions with the CEL environment of its
compatibility version, and refuses the policy (422 Invalid) when one names a function that
environment lacks: ``flatten()``, say, which Kubernetes' CEL has only from 1.34. The end-to-end
tests run one kube-apiserver, the newest, so they cannot see this. The Go program beside this
module does the server's compile step with k8s.io/apiserver's own compiler (pinned in its
go.mod; that library keeps the environment of every Kubernetes version from 1.28 on) and is
built once into the cache by ``fabriccap_devtools.gotools`` (2.5 min cold on 2 cores, downloads
included).

It also evaluates a policy for admission requests (``evaluate``) with the same library, as the
API server's admission does, within its runtime cost budget: what a user of that server would
be told, without one. The end-to-end tests (tests/e2e/test_admission_kinds.py) remain the
proof on a real server with the real CRDs; this reaches shapes no one CRD there allows (an
older release's field) and runs in the repo tests.

    python -m fabriccap_devtools.celcheck 1.30 manifests/components/admission-policy/admission-policy.yaml
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabriccap_devtools.gotools import GoToolError, build_go_tool

SOURCE = Path(__file__).resolve().parent
RUN_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class PolicyCompilation:
    file: str
    name: str
    compiled: int  # expressions compiled, failed ones included
    failures: tuple[tuple[str, str], ...]  # (field, compiler's message)


@dataclass(frozen=True)
class Request:
    """An admission request: the object, its resource, and the param the binding selected."""

    name: str
    group: str
    version: str
    resource: str
    kind: str
    object: dict[str, Any]
    params: dict[str, Any]
    operation: str = "CREATE"


@dataclass(frozen=True)
class Evaluation:
    name: str
    matched: bool  # the match conditions held
    warning: str | None  # the failing validation's message
    error: str | None  # an expression errored (under failurePolicy Ignore: silent)
    cost: int  # the runtime cost spent


def checker_binary() -> Path:
    return build_go_tool(SOURCE)


def environment_of(kubernetes: str) -> str:
    """The CEL environment a kube-apiserver of version ``MAJOR.MINOR`` compiles a new policy
    with: the minor before its own. 1.30 said 1.29 outright (k8s.io/apiserver v0.30.0
    pkg/cel/environment/base.go, ``DefaultCompatibilityVersion``); from 1.31 it is the binary's
    minimum compatibility version, one minor back (k8s.io/component-base
    compatibility/version.go)."""
    major, _, minor = kubernetes.partition(".")
    if not (major.isdigit() and minor.isdigit()) or int(minor) == 0:
        raise ValueError(f"not a Kubernetes MAJOR.MINOR: {kubernetes!r}")
    return f"{int(major)}.{int(minor) - 1}"


def compile_policies(files: Sequence[Path], kubernetes: str) -> list[PolicyCompilation]:
    """Every ValidatingAdmissionPolicy in ``files``, compiled as a ``kubernetes`` server would
    when it is created."""
    command = [str(checker_binary()), "-environment", environment_of(kubernetes), *map(str, files)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False)
    if result.returncode not in (0, 1):
        raise GoToolError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    return [
        PolicyCompilation(
            file=policy["file"],
            name=policy["name"],
            compiled=policy["compiled"],
            failures=tuple((failure["field"], failure["error"]) for failure in policy["failures"]),
        )
        for policy in json.loads(result.stdout)["policies"]
    ]


def evaluate(policy_file: Path, requests: Sequence[Request], kubernetes: str) -> list[Evaluation]:
    """What the one policy in ``policy_file`` tells each request on a ``kubernetes`` server."""
    with tempfile.TemporaryDirectory() as scratch:
        cases = Path(scratch) / "cases.json"
        cases.write_text(json.dumps([dataclasses.asdict(request) for request in requests]))
        command = [
            str(checker_binary()),
            "-environment",
            environment_of(kubernetes),
            "-evaluate",
            str(cases),
            str(policy_file),
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False)
    if result.returncode != 0:
        raise GoToolError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    return [
        Evaluation(
            name=case["name"],
            matched=case["matched"],
            warning=case.get("warning"),
            error=case.get("error"),
            cost=case["cost"],
        )
        for case in json.loads(result.stdout)["cases"]
    ]


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if len(arguments) < 2:
        print("usage: python -m fabriccap_devtools.celcheck MAJOR.MINOR FILE...", file=sys.stderr)
        return 2
    try:
        policies = compile_policies([Path(file) for file in arguments[1:]], arguments[0])
    except (GoToolError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for policy in policies:
        print(f"{policy.file}: {policy.name}: {policy.compiled} expressions, {len(policy.failures)} refused")
        for field, message in policy.failures:
            print(f"  {field}: {message}")
    return 1 if any(policy.failures for policy in policies) else 0
