"""Packaging consistency: the image, the kustomize manifests and the Helm chart say the same.

- The Dockerfile installs the pinned requirements.txt (the file CI installs), runs as a
  numeric non-root user and keeps build tooling out of the final stage.
- Every runtime dependency is pinned, transitively.
- `kubectl kustomize manifests` and `helm template charts/fabriccap` agree on RBAC, the CRD,
  the pod and container securityContext, the operator's command line and its config. (That
  the copies of shared files match their sources is tests/repo/test_generated.py's.)

The renderings are tests/support/rendering.py's.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from fabriccap.core.workloads import CLAIM_LOOKUP_KINDS, OWNER_LOOKUP_KINDS
from fabriccap.kube.kinds import WATCHED_KINDS
from fabriccap.kube.lookups import CLAIM_API_VERSION
from fabriccap.kube.paths import EVENTS, FABRIC_CAPABILITIES, LEASES
from support.configs import build_config
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
    render_kustomize_with_components,
    run_tool,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "Dockerfile"
REQUIREMENTS = REPO_ROOT / "requirements.txt"
BUILD_REQUIREMENTS = REPO_ROOT / "requirements-build.txt"
PYPROJECT = REPO_ROOT / "pyproject.toml"
BOOTSTRAP = REPO_ROOT / "scripts" / "bootstrap.sh"
CRD_SOURCE = REPO_ROOT / "crds" / "fabriccapabilities.yaml"
MONITORING = REPO_ROOT / "monitoring"
IMAGE_UID = 65532


@pytest.fixture(scope="module")
def kustomized() -> list[Doc]:
    return render_kustomize(MANIFESTS)


@pytest.fixture(scope="module")
def templated() -> list[Doc]:
    return render_helm()


# ---------------------------------------------------------------------------------------------
# The image


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """(INSTRUCTION, arguments) per stage, continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    stages: list[list[tuple[str, str]]] = []
    for line in logical:
        instruction, _, arguments = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instruction, arguments.strip()))
    return stages


def _arguments(stage: list[tuple[str, str]], instruction: str) -> list[str]:
    return [arguments for name, arguments in stage if name == instruction]


def test_dockerfile_installs_the_requirements_file_ci_installs() -> None:
    builder = dockerfile_stages()[0]
    runs = " && ".join(_arguments(builder, "RUN"))
    assert any(re.search(r"(^|\s)requirements\.txt(\s|$)", c) for c in _arguments(builder, "COPY"))
    assert re.search(r"pip install [^&]*-r requirements\.txt", runs), "the builder must install requirements.txt"
    # The package itself must not resolve dependencies on its own, around the pins.
    assert re.search(r"pip install --no-deps [^&]*\s\.(\s|$)", runs), "the package must be installed with --no-deps"
    # ...and CI installs the very same file (scripts/bootstrap.sh, run by `make test`).
    assert re.search(r"pip install [^\n]*-r requirements\.txt", BOOTSTRAP.read_text())


def test_dockerfile_builds_the_product_with_the_pinned_backend() -> None:
    """Not in an isolated build env, whose setuptools is PyPI's newest that day: the wheel's
    metadata names it, so the image's digest would change with each setuptools release (hostile
    review 64-boundary F1). requirements-build.txt pins it, by hash."""
    builder = dockerfile_stages()[0]
    runs = " && ".join(_arguments(builder, "RUN"))
    assert any(re.search(r"(^|\s)requirements-build\.txt(\s|$)", c) for c in _arguments(builder, "COPY"))
    assert re.search(r"pip install --no-deps --only-binary=:all: --require-hashes -r requirements-build\.txt", runs)
    product = re.search(r"pip install ([^&]*)\s\.(\s|$)", runs)
    assert product, "the builder must install the product (pip install ... .)"
    assert {"--no-deps", "--no-build-isolation", "--check-build-dependencies"} <= set(product.group(1).split())
    # Then the backend leaves with pip: neither reaches the final stage.
    assert re.search(r"pip uninstall --yes pip setuptools", runs)
    lines = [line for line in BUILD_REQUIREMENTS.read_text().splitlines() if line.strip() and not line.startswith("#")]
    # setuptools alone (it vendors its dependencies and has its own bdist_wheel), exactly.
    assert len(lines) == 1 and re.fullmatch(r"setuptools==\d+(\.\d+)* --hash=sha256:[0-9a-f]{64}", lines[0]), lines


def test_image_runs_as_numeric_non_root_user() -> None:
    final = dockerfile_stages()[-1]
    users = _arguments(final, "USER")
    assert users, "the final stage must set USER"
    match = re.fullmatch(r"(\d+)(?::(\d+))?", users[-1])
    assert match, f"USER {users[-1]!r} must be numeric (uid[:gid]) so runAsNonRoot can be verified"
    assert int(match.group(1)) != 0 and (match.group(2) is None or int(match.group(2)) != 0)
    assert int(match.group(1)) == IMAGE_UID


def test_final_stage_carries_no_build_tooling() -> None:
    stages = dockerfile_stages()
    assert len(stages) >= 2, "multi-stage: build in one stage, run in another"
    final = stages[-1]
    # Nothing installed, no caches left behind: the final stage's only RUN removes ensurepip's
    # wheels (Debian's python3-venv keeps pip's there; `python -m venv` would install it).
    assert _arguments(final, "RUN") == ["rm -rf /usr/share/python-wheels"]
    copies = _arguments(final, "COPY")
    assert copies and all(c.startswith("--from=builder ") for c in copies), copies
    assert _arguments(final, "ENTRYPOINT") == ['["fabriccap"]']
    assert _arguments(final, "CMD") == ['["run", "--standalone"]']


def test_builder_stage_takes_source_date_epoch() -> None:
    """scripts/build-image.sh passes it for a reproducible build; docker build leaves it unset.

    With it pip and compileall write hash-based .pyc, which stay valid when the build clamps
    every file's mtime (tests/image/test_image.py checks that no .pyc in the image is stale).
    """
    builder = dockerfile_stages()[0]
    args = _arguments(builder, "ARG")
    assert "SOURCE_DATE_EPOCH" in args, "no default value: a plain docker build must not clamp anything"
    instructions = [name for name, _ in builder]
    assert builder.index(("ARG", "SOURCE_DATE_EPOCH")) < instructions.index("RUN"), "declared before the first RUN"


def test_docker_build_context_leaves_out_the_built_archives() -> None:
    ignored = REPO_ROOT.joinpath(".dockerignore").read_text().split()
    assert "dist/" in ignored, "make image writes dist/: docker build would send the archives"


def test_both_stages_use_the_slim_python_version_the_project_requires() -> None:
    stages = dockerfile_stages()
    default_image = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert default_image, "the base image is one ARG shared by both stages"
    image = default_image.group(1)
    assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?(@sha256:[0-9a-f]{64})?", image), image
    assert [_arguments(stage, "FROM")[0].split()[0] for stage in stages] == ["${PYTHON_IMAGE}"] * len(stages)
    requires_python = tomllib.loads(PYPROJECT.read_text())["project"]["requires-python"]
    assert requires_python == ">=3.11"


# ---------------------------------------------------------------------------------------------
# Pinned dependencies


def pinned_requirements() -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in REQUIREMENTS.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", f"requirements.txt: {line!r} is not a pin"
        pins[canonicalize_name(requirement.name)] = specifiers[0].version
    return pins


def test_every_runtime_dependency_is_pinned_in_requirements() -> None:
    pins = pinned_requirements()
    for line in tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"pyproject.toml depends on {requirement.name}, which requirements.txt does not pin"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"requirements.txt pins {name}=={pins[name]}, outside pyproject.toml's {requirement.specifier}"
        )


def test_pins_are_closed_under_dependencies() -> None:
    """What the pinned packages themselves require is pinned too: the image resolves nothing."""
    pins = pinned_requirements()
    missing = []
    for name in pins:
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name} is pinned but not installed in this environment (run scripts/bootstrap.sh)")
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            if canonicalize_name(requirement.name) not in pins:
                missing.append(f"{name} -> {requirement}")
    assert not missing, f"unpinned transitive dependencies: {missing}"


def _third_party_imports(package: Path) -> dict[str, str]:
    """{top-level module: the first file importing it} for every absolute import in ``package``
    that is neither the standard library nor the package itself (TYPE_CHECKING ones included:
    harmless, but a type's module worth naming is one worth declaring)."""
    imported: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top not in sys.stdlib_module_names and top != package.name:
                    imported.setdefault(top, str(path.relative_to(REPO_ROOT)))
    return imported


def test_the_product_imports_only_its_declared_dependencies() -> None:
    """Every third-party module operator/fabriccap imports comes from a distribution
    pyproject.toml declares: the wheel installs those and nothing else. The dev venv has the test
    tools too (psutil, hypothesis, rich...), so an import of one passes every other check here and
    the installed wheel dies at start; yarl was imported and never declared (hostile review
    64-boundary F4)."""
    declared = {
        canonicalize_name(Requirement(line).name)
        for line in tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    }
    distributions = metadata.packages_distributions()
    undeclared = []
    for module, where in sorted(_third_party_imports(REPO_ROOT / "operator" / "fabriccap").items()):
        providers = {canonicalize_name(name) for name in distributions.get(module, [])}
        if not providers & declared:
            undeclared.append(f"{module} ({where}; from {sorted(providers) or 'no installed distribution'})")
    assert not undeclared, f"imported by the product, not in [project].dependencies: {undeclared}"


# ---------------------------------------------------------------------------------------------
# The chart on its own


def test_helm_lint_passes() -> None:
    run_tool([helm_binary(), "lint", "--strict", str(CHART)])
    run_tool(
        [
            helm_binary(),
            "lint",
            "--strict",
            str(CHART),
            "--set",
            "serviceMonitor.enabled=true,prometheusRule.enabled=true,dashboard.enabled=true",
        ]
    )


def test_monitoring_objects_are_off_by_default(templated: list[Doc]) -> None:
    kinds = {d["kind"] for d in templated}
    assert not kinds & {"ServiceMonitor", "PrometheusRule"}
    assert [d["metadata"]["name"] for d in of_kind(templated, "ConfigMap")] == ["fabriccap-config"]


def test_monitoring_toggles_render_the_shipped_rules_and_dashboard(tmp_path: Path) -> None:
    docs = render_helm(
        '{"serviceMonitor": {"enabled": true}, "prometheusRule": {"enabled": true}, "dashboard": {"enabled": true}}',
        '{"prometheusRelease": "monitoring"}',
    )
    components = render_kustomize_with_components(tmp_path)

    service_monitor = one(docs, "ServiceMonitor")
    assert service_monitor["metadata"]["labels"]["release"] == "monitoring"
    assert service_monitor["spec"] == one(components, "ServiceMonitor")["spec"]

    rule = one(docs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "monitoring"
    shipped_rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert rule["spec"] == shipped_rule["spec"] == one(components, "PrometheusRule")["spec"]

    dashboard = one(docs, "ConfigMap", "fabriccap-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped_dashboard = yaml.safe_load((MONITORING / "dashboard-configmap.yaml").read_text())
    assert json.loads(dashboard["data"]["fabriccap.json"]) == json.loads(shipped_dashboard["data"]["fabriccap.json"])
    assert one(components, "ConfigMap", "fabriccap-dashboard")["data"] == shipped_dashboard["data"]

    # Every namespaced object lands in the operator's namespace.
    for doc in (service_monitor, rule, dashboard):
        assert doc["metadata"]["namespace"] == "fabriccap-system"
    for kind in ("ServiceMonitor", "PrometheusRule"):
        assert one(components, kind)["metadata"]["namespace"] == "fabriccap-system"


def test_the_rbac_docs_name_every_resource_the_cluster_role_grants() -> None:
    """docs/install.md's object table and the chart README's RBAC section named four of the
    ClusterRole's ten listed kinds (hostile review 63-chart L5)."""
    docs = render_helm('{"transport": {"enabled": true}}')
    cluster_role = one(docs, "ClusterRole", "fabriccap")
    granted = {resource for rule in cluster_role["rules"] for resource in rule["resources"]}
    install_row = next(
        line
        for line in (REPO_ROOT / "docs" / "install.md").read_text().splitlines()
        if line.startswith("| ClusterRole")
    )
    chart_readme = (CHART / "README.md").read_text()
    chart_rbac = chart_readme.partition("## RBAC")[2].partition("\n## ")[0]
    for where, text in (("docs/install.md", install_row), ("charts/fabriccap/README.md", chart_rbac)):
        words = re.sub(r"[`\s]+", " ", text).lower().replace(" ", "")
        missing = sorted(resource for resource in granted if resource.split("/")[-1] not in words)
        assert not missing, f"{where} does not name {missing}"


# An install by the bare project name, from PyPI: pip, pipx, uv (options before the name allowed).
PYPI_INSTALL = re.compile(r"\b(?:pipx?|uv\s+pip|uv\s+tool)\s+install\s+(?:-\S+\s+)*['\"]?fabriccap(?![\w./-])")


def test_no_doc_installs_the_project_from_pypi() -> None:
    """Nothing named fabriccap is published on PyPI, and the name is anyone's to register: a doc
    that says `pip install fabriccap` fails today and runs a stranger's code tomorrow, on a machine
    with cluster credentials (hostile review 64-boundary F3). The docs install from the repository."""
    tracked = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "ls-files", "*.md"],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=True,
    ).stdout.split()
    assert "docs/install.md" in tracked and "README.md" in tracked
    found = [
        f"{name}:{number}: {line.strip()}"
        for name in tracked
        for number, line in enumerate((REPO_ROOT / name).read_text().splitlines(), start=1)
        if PYPI_INSTALL.search(line)
    ]
    assert not found, found


def test_the_dashboard_component_moves_only_its_own_configmap(tmp_path: Path) -> None:
    """An overlay's own Grafana dashboards carry grafana_dashboard=1 too: the component puts its
    ConfigMap in fabriccap-system and leaves theirs where they are (hostile review 63-chart L2)."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    base = os.path.relpath(MANIFESTS, overlay)
    team_dashboard = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "my-team-dashboard", "namespace": "monitoring", "labels": {"grafana_dashboard": "1"}},
        "data": {"team.json": "{}"},
    }
    overlay.joinpath("team-dashboard.yaml").write_text(yaml.safe_dump(team_dashboard))
    overlay.joinpath("kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [base, "team-dashboard.yaml"],
                "components": [f"{base}/components/dashboard"],
            }
        )
    )
    docs = render_kustomize(overlay)
    assert one(docs, "ConfigMap", "fabriccap-dashboard")["metadata"]["namespace"] == "fabriccap-system"
    assert one(docs, "ConfigMap", "my-team-dashboard")["metadata"]["namespace"] == "monitoring"


def test_service_monitor_job_label_is_what_the_alerts_select(templated: list[Doc], tmp_path: Path) -> None:
    # The ServiceMonitor names the job after the Service's app.kubernetes.io/name label.
    service_monitor = one(render_kustomize_with_components(tmp_path), "ServiceMonitor")
    job_label = service_monitor["spec"]["jobLabel"]
    alerts = (MONITORING / "prometheusrule.yaml").read_text()
    for docs in (render_kustomize(MANIFESTS), templated):
        job = one(docs, "Service")["metadata"]["labels"][job_label]
        assert f'job="{job}"' in alerts


# ---------------------------------------------------------------------------------------------
# Manifests and chart agree


Rule = tuple[str, str, tuple[str, ...], tuple[str, ...]]


def _rule_set(rules: list[Doc]) -> set[Rule]:
    """RBAC rules as (apiGroup, resource, verbs, resourceNames): order means nothing."""
    flattened: set[Rule] = set()
    for rule in rules:
        names = tuple(sorted(rule.get("resourceNames", [])))
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                flattened.add((group, resource, tuple(sorted(rule.get("verbs", []))), names))
    return flattened


def _rbac(docs: list[Doc]) -> dict[str, Any]:
    cluster_role = one(docs, "ClusterRole")
    binding = one(docs, "ClusterRoleBinding")
    service_account = one(docs, "ServiceAccount")
    subject = {"kind": "ServiceAccount", "name": "<sa>", "namespace": "<ns>"}
    sa_ref = (service_account["metadata"]["name"], service_account["metadata"]["namespace"])

    def subjects(obj: Doc) -> list[Doc]:
        found = obj["subjects"]
        assert [(s["kind"], s["name"], s["namespace"]) for s in found] == [("ServiceAccount", *sa_ref)]
        return [subject]

    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": cluster_role["metadata"]["name"],
    }
    roles = {role["metadata"]["namespace"]: _rule_set(role["rules"]) for role in of_kind(docs, "Role")}
    role_bindings = {}
    for role_binding in of_kind(docs, "RoleBinding"):
        namespace = role_binding["metadata"]["namespace"]
        role = next(r for r in of_kind(docs, "Role") if r["metadata"]["namespace"] == namespace)
        assert role_binding["roleRef"]["name"] == role["metadata"]["name"]
        role_bindings[namespace] = subjects(role_binding)
    return {
        "clusterRole": _rule_set(cluster_role["rules"]),
        "clusterRoleBinding": subjects(binding),
        "roles": roles,
        "roleBindings": role_bindings,
    }


READ = ("get", "list", "watch")
WRITES = {"create", "update", "patch", "delete", "deletecollection"}
LEASE = "fabriccap-leader"


def test_rbac_agrees(kustomized: list[Doc], templated: list[Doc]) -> None:
    manifests, chart = _rbac(kustomized), _rbac(templated)
    assert manifests == chart
    cluster_role = manifests["clusterRole"]
    # Read-only on everything it observes: a write would be refused (403), not slip through.
    observed = {
        "nodes",
        "nodes/status",
        "pods",
        "pods/status",
        "daemonsets",
        "resourceslices",
        "deviceclasses",
        "devicetaintrules",
        "jobs",
        "jobsets",
        "replicasets",
        "leaderworkersets",
        "rayclusters",
        "resourceclaimtemplates",
        "resourceclaims",
        "nodepools",
        "nodeclaims",
        "ec2nodeclasses",
    }
    for _, resource, verbs, _ in cluster_role.union(*manifests["roles"].values()):
        if resource in observed:
            assert not WRITES & set(verbs), (resource, verbs)
    assert all(resource != "secrets" for _, resource, _, _ in cluster_role)
    # DeviceTaintRules are read (they take devices from the count), never written.
    taint_rules = {(group, verbs) for group, resource, verbs, _ in cluster_role if resource == "devicetaintrules"}
    assert taint_rules == {("resource.k8s.io", ("list", "watch"))}
    karpenter = {(group, resource, verbs) for group, resource, verbs, _ in cluster_role if "karpenter" in group}
    assert karpenter == {
        ("karpenter.sh", "nodepools", ("list", "watch")),
        ("karpenter.sh", "nodeclaims", ("list", "watch")),
        ("karpenter.k8s.aws", "ec2nodeclasses", ("list", "watch")),
    }
    # Nothing on leases cluster-wide; in its own namespace, its one Lease (create cannot be
    # restricted by name: the object does not exist yet). Plugin namespaces may not exist
    # (aks-rdma lists three candidates): no Role is made there.
    assert not any(resource == "leases" for _, resource, _, _ in cluster_role)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def test_rbac_grants_exactly_what_the_code_calls(kustomized: list[Doc]) -> None:
    """Reliability round 3, S1: the grants come from the code's own tables, verb for verb.
    The informers list and watch each watched kind (never get one); a lookup gets one owner or
    claim (never lists); the publisher creates, patches, deletes, lists and watches its own
    objects (get: for `kubectl` and tools with the operator's identity) and patches their
    status; the recorder creates core Events; the election gets, watches, creates and updates
    one Lease. Nothing else: no Event patch, no events.k8s.io, no Lease patch, no get of a
    status, no get of a DeviceClass (the informers list and watch them)."""
    rbac = _rbac(kustomized)
    expected: set[Rule] = {
        (watched.resource.group, watched.resource.plural, ("list", "watch"), ()) for watched in WATCHED_KINDS
    }
    expected |= {(row.group, row.plural, ("get",), ()) for row in OWNER_LOOKUP_KINDS.values()}
    expected |= {(_group(CLAIM_API_VERSION), plural, ("get",), ()) for plural in CLAIM_LOOKUP_KINDS.values()}
    own = (FABRIC_CAPABILITIES.group, FABRIC_CAPABILITIES.plural)
    expected |= {
        (*own, ("create", "delete", "get", "list", "patch", "watch"), ()),
        (own[0], f"{own[1]}/status", ("patch",), ()),
        (EVENTS.group, EVENTS.plural, ("create",), ()),
    }
    assert rbac["clusterRole"] == expected
    assert rbac["roles"] == {
        "fabriccap-system": {
            (LEASES.group, LEASES.plural, ("get", "update", "watch"), (LEASE,)),
            (LEASES.group, LEASES.plural, ("create",), ()),
        }
    }


def test_crd_agrees(kustomized: list[Doc], templated: list[Doc]) -> None:
    source = yaml.safe_load(CRD_SOURCE.read_text())
    assert one(kustomized, "CustomResourceDefinition") == source
    assert one(templated, "CustomResourceDefinition") == source


def _pod_spec(docs: list[Doc]) -> Doc:
    deployment = one(docs, "Deployment")
    return dict(deployment["spec"]["template"]["spec"])


def _container(docs: list[Doc]) -> Doc:
    containers = _pod_spec(docs)["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def test_security_context_agrees_and_is_restricted(kustomized: list[Doc], templated: list[Doc]) -> None:
    for docs in (kustomized, templated):
        pod = _pod_spec(docs)["securityContext"]
        container = _container(docs)["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] == IMAGE_UID
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
        assert container["allowPrivilegeEscalation"] is False
        assert container["readOnlyRootFilesystem"] is True
        assert container["runAsNonRoot"] is True and container["runAsUser"] == IMAGE_UID
        assert container["capabilities"] == {"drop": ["ALL"]}
        assert container["seccompProfile"] == {"type": "RuntimeDefault"}
    assert _pod_spec(kustomized)["securityContext"] == _pod_spec(templated)["securityContext"]
    assert _container(kustomized)["securityContext"] == _container(templated)["securityContext"]


def test_deployment_agrees(kustomized: list[Doc], templated: list[Doc]) -> None:
    same_fields = (
        "args",
        "env",
        "ports",
        "startupProbe",
        "livenessProbe",
        "readinessProbe",
        "resources",
        "volumeMounts",
        "name",
        "imagePullPolicy",
    )
    manifests, chart = _container(kustomized), _container(templated)
    assert {f: manifests.get(f) for f in same_fields} == {f: chart.get(f) for f in same_fields}
    assert manifests["image"] == chart["image"], "the image tag follows the chart's appVersion"
    for docs in (kustomized, templated):
        deployment = one(docs, "Deployment")
        # Two replicas behind a Lease, rolled one at a time (no --standalone).
        assert deployment["spec"]["replicas"] == 2
        assert "strategy" not in deployment["spec"]
        container = _container(docs)
        assert "--standalone" not in container["args"]
        downward = {env["name"]: env["valueFrom"]["fieldRef"]["fieldPath"] for env in container["env"]}
        assert downward == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
        for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            assert container[probe]["httpGet"] == {"path": path, "port": "health"}, probe
        spec = _pod_spec(docs)
        assert {v["name"]: set(v) - {"name"} for v in spec["volumes"]} == {"config": {"configMap"}, "tmp": {"emptyDir"}}
        config_map = one(docs, "ConfigMap", spec["volumes"][0]["configMap"]["name"])
        assert set(config_map["data"]) == {"config.yaml"}
        budget = one(docs, "PodDisruptionBudget")
        assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    assert one(kustomized, "PodDisruptionBudget")["spec"] == one(templated, "PodDisruptionBudget")["spec"]
    assert _pod_spec(kustomized)["nodeSelector"] == _pod_spec(templated)["nodeSelector"]


def _config_of(docs: list[Doc]) -> Any:
    spec = _pod_spec(docs)
    config_map = one(docs, "ConfigMap", spec["volumes"][0]["configMap"]["name"])
    return build_config(yaml.safe_load(config_map["data"]["config.yaml"]), source="rendered config")


def test_config_agrees(kustomized: list[Doc], templated: list[Doc]) -> None:
    assert _config_of(kustomized) == _config_of(templated)


@pytest.mark.parametrize(
    "fabrics",
    [
        None,  # the chart's default values
        [{"name": "efa"}, {"name": "aks-rdma"}],
        [{"name": "aks-rdma", "devicePlugin": {"daemonSetNames": ["rdma-dp"]}}],
        [{"name": "efa", "devicePlugin": {"namespace": "efa-system", "daemonSetNames": ["efa-dp"]}}],
    ],
    ids=["default", "efa+aks-rdma", "aks-rdma-own-plugin", "efa-elsewhere"],
)
def test_the_chart_needs_no_plugin_namespace_to_exist(fabrics: list[Doc] | None) -> None:
    """Reading plugins is cluster-wide: nothing is created in namespaces that may be missing."""
    values = [] if fabrics is None else [json.dumps({"config": {"fabrics": fabrics}})]
    docs = render_helm(*values)
    assert _config_of(docs).plugin_namespaces  # the config is the operator's, and valid
    assert {doc["metadata"].get("namespace") for doc in docs if doc["kind"] in ("Role", "RoleBinding")} <= {
        "fabriccap-system"
    }


def test_chart_refuses_a_config_without_enabled_fabric() -> None:
    result = subprocess.run(
        [helm_binary(), "template", "fabriccap", str(CHART), "--set-json", '{"config":{"fabrics":[]}}'],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    assert result.returncode != 0
    assert "no enabled fabric profile" in result.stderr
