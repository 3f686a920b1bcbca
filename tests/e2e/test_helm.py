"""A real `helm install`, `helm upgrade` with monitoring on, and `helm uninstall`.

helm (scripts/ensure-helm.sh) installs charts/fabriccap on the local control plane: the
chart's kubeVersion accepts the stamped apiserver, the apiserver validates every object
(server-side apply, Pod Security is not enforced in this namespace: no pod runs without a
kubelet), the upgrade adds a ServiceMonitor, a PrometheusRule and the dashboard ConfigMap,
validated by the Prometheus Operator's own CRDs, and the uninstall removes everything but
the CRD, as docs/install.md says.

The Prometheus Operator CRDs come from its released module on the Go module proxy
(example/prometheus-operator-crd/ at a pinned version), through Go's module cache, and are
checked against the sha256 pinned here: never a retyped copy.

The release is installed with nameOverride=fcap: the scrape job is then "fcap", and the
rules on the server must select that job (with the job hard-coded, FabricCapabilityOperatorDown
would fire forever).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from fabriccap.observability.alerts import AlertSettings, rule_group
from fabriccap_devtools.gotools import GoToolError, go_module_file

if TYPE_CHECKING:
    from harness import E2ECluster

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "fabriccap"
ENSURE_HELM = REPO_ROOT / "scripts" / "ensure-helm.sh"
DASHBOARD = REPO_ROOT / "monitoring" / "dashboard.json"

PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator"
PROMETHEUS_OPERATOR_VERSION = "v0.85.0"
PROMETHEUS_OPERATOR_CRDS = {  # example/prometheus-operator-crd/<file>: sha256
    "monitoring.coreos.com_servicemonitors.yaml": "1dae27b7189b5ce7b9ab764656c18b4c75a45cde1e6f3af6a5e84c4317628919",
    "monitoring.coreos.com_prometheusrules.yaml": "98fd16c9ab79fba8dcd6ef62c957c98cd6546ab74ce0a4ecf09ddf2fda03020e",
}

RELEASE = "fcap-e2e"
NAMESPACE = "fabriccap-helm-e2e"
NAME_OVERRIDE = "fcap"
FULLNAME = RELEASE  # the chart's fullname: the release name, as it contains the name
INSTANCE = f"app.kubernetes.io/instance={RELEASE}"
HELM_TIMEOUT_SECONDS = 180
MONITORING = (
    "serviceMonitor.enabled=true,prometheusRule.enabled=true,dashboard.enabled=true,"
    "prometheusRule.rules.FabricCapabilityStale.enabled=false,"
    "prometheusRule.rules.FabricCapabilityNotReady.for=1h,"
    "networkPolicy.enabled=true"
)


@dataclass(frozen=True)
class Helm:
    binary: str
    kubeconfig: Path
    home: Path  # helm's cache, config and data: the test's own, not the user's

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        result = subprocess.run(
            [self.binary, *args, "--kubeconfig", str(self.kubeconfig)],
            capture_output=True,
            text=True,
            timeout=HELM_TIMEOUT_SECONDS,
            check=False,
            env=env,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def status(self) -> dict[str, Any]:
        return dict(json.loads(self.run("status", RELEASE, "--namespace", NAMESPACE, "--output", "json").stdout))


@pytest.fixture(scope="module")
def prometheus_operator_crds(cluster: E2ECluster) -> list[str]:
    """The ServiceMonitor and PrometheusRule CRDs, as the Prometheus Operator releases them."""
    if cluster.local is None:
        pytest.skip("installs cluster-wide objects (CRDs, a ClusterRole): only on the local control plane")
    names = []
    for file, sha256 in PROMETHEUS_OPERATOR_CRDS.items():
        try:
            path = go_module_file(
                PROMETHEUS_OPERATOR, PROMETHEUS_OPERATOR_VERSION, f"example/prometheus-operator-crd/{file}", sha256
            )
        except GoToolError as error:
            pytest.fail(str(error))
        cluster.run_kubectl("apply", "--server-side", "--field-manager=fabriccap-e2e", "-f", str(path))
        cluster.run_kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(path))
        names.append(str(yaml.safe_load(path.read_text())["metadata"]["name"]))
    return names


@pytest.fixture(scope="module")
def helm(cluster: E2ECluster, prometheus_operator_crds: list[str], tmp_path_factory: pytest.TempPathFactory) -> Helm:
    result = subprocess.run(["bash", str(ENSURE_HELM)], capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    return Helm(binary=result.stdout.strip(), kubeconfig=cluster.kubeconfig, home=tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="module")
def release(helm: Helm, cluster: E2ECluster) -> Iterator[str]:
    """Installed once; the tests below upgrade it and finally uninstall it, in file order."""
    installed = helm.run(
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--set",
        f"nameOverride={NAME_OVERRIDE}",
        "--timeout",
        "2m",
        check=False,
    )
    try:
        assert installed.returncode == 0, f"helm install failed:\n{installed.stderr}"
        yield RELEASE
    finally:
        helm.run("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "1m", check=False)
        cluster.run_kubectl("delete", "namespace", NAMESPACE, "--wait=false", "--ignore-not-found", check=False)


def get(cluster: E2ECluster, kind: str, name: str, namespace: str | None = NAMESPACE) -> dict[str, Any] | None:
    args = ["get", kind, name, "-o", "json", "--ignore-not-found"]
    args += [f"--namespace={namespace}"] if namespace else []
    text = cluster.run_kubectl(*args).stdout.strip()
    return dict(json.loads(text)) if text else None


def existing(cluster: E2ECluster, kind: str, name: str, namespace: str | None = NAMESPACE) -> dict[str, Any]:
    found = get(cluster, kind, name, namespace)
    assert found is not None, f"{kind} {name} is missing"
    return found


def test_install(release: str, helm: Helm, cluster: E2ECluster) -> None:
    server = json.loads(cluster.run_kubectl("version", "-o", "json").stdout)["serverVersion"]["gitVersion"]
    assert re.fullmatch(r"v1\.\d+\.\d+", server), f"the chart's kubeVersion needs a released version, got {server}"
    status = helm.status()
    assert (status["info"]["status"], status["version"]) == ("deployed", 1)

    deployment = existing(cluster, "deployment", FULLNAME)
    assert deployment["spec"]["replicas"] == 2
    (operator,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--standalone" not in operator["args"]
    assert {"POD_NAME", "POD_NAMESPACE"} <= {env["name"] for env in operator["env"]}
    budget = existing(cluster, "poddisruptionbudget", FULLNAME)
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    role = existing(cluster, "role", f"{FULLNAME}-leader-election")
    assert {name for rule in role["rules"] for name in rule.get("resourceNames", [])} == {"fabriccap-leader"}
    existing(cluster, "rolebinding", f"{FULLNAME}-leader-election")
    existing(cluster, "clusterrole", FULLNAME, namespace=None)
    existing(cluster, "clusterrolebinding", FULLNAME, namespace=None)
    existing(cluster, "crd", "fabriccapabilities.fabriccap.dev", namespace=None)
    for kind in ("servicemonitor", "prometheusrule", "networkpolicy"):
        assert get(cluster, kind, FULLNAME) is None, f"{kind} is off by default"


def test_upgrade_with_monitoring_on(release: str, helm: Helm, cluster: E2ECluster) -> None:
    helm.run(
        "upgrade",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--reuse-values",
        "--set",
        MONITORING,
        "--timeout",
        "2m",
    )
    status = helm.status()
    assert (status["info"]["status"], status["version"]) == ("deployed", 2)

    monitor = existing(cluster, "servicemonitor", FULLNAME)
    service = existing(cluster, "service", FULLNAME)
    job = service["metadata"]["labels"][monitor["spec"]["jobLabel"]]
    assert job == NAME_OVERRIDE
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()

    rule = existing(cluster, "prometheusrule", FULLNAME)
    (group,) = rule["spec"]["groups"]
    expected = rule_group(AlertSettings(job=job, for_overrides={"FabricCapabilityNotReady": "1h"}))
    expected["rules"] = [r for r in expected["rules"] if r["alert"] != "FabricCapabilityStale"]
    assert group == expected
    selected = {match for r in group["rules"] for match in re.findall(r'job="([^"]*)"', r["expr"])}
    assert selected == {job}

    dashboard = existing(cluster, "configmap", f"{FULLNAME}-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["fabriccap.json"]) == json.loads(DASHBOARD.read_text())

    # Accepted by the apiserver, and it selects the operator's pods.
    policy = existing(cluster, "networkpolicy", FULLNAME)
    pod_labels = existing(cluster, "deployment", FULLNAME)["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert [port for rule in policy["spec"]["ingress"] for port in rule["ports"]] == [{"port": 8080, "protocol": "TCP"}]


def test_upgrade_with_a_typo_is_refused_and_changes_nothing(release: str, helm: Helm) -> None:
    typo = "resources.limits.memroy=1Gi"
    refused = helm.run(
        "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values", "--set", typo, check=False
    )  # fmt: skip
    assert refused.returncode != 0
    assert "additional properties 'memroy' not allowed" in refused.stderr, refused.stderr
    status = helm.status()
    assert (status["info"]["status"], status["version"]) == ("deployed", 2)


def test_uninstall_leaves_only_the_crd(release: str, helm: Helm, cluster: E2ECluster) -> None:
    helm.run("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "1m")
    kinds = (
        "deployment,service,configmap,serviceaccount,role,rolebinding,poddisruptionbudget,servicemonitor,prometheusrule,"
        "networkpolicy"
    )
    left = cluster.run_kubectl("get", kinds, "--namespace", NAMESPACE, "-l", INSTANCE, "-o", "name").stdout.split()
    assert left == []
    cluster_wide = cluster.run_kubectl("get", "clusterrole,clusterrolebinding", "-l", INSTANCE, "-o", "name")
    assert cluster_wide.stdout.split() == []
    assert helm.run("status", RELEASE, "--namespace", NAMESPACE, check=False).returncode != 0
    # Helm never deletes what crds/ installed: FabricCapabilities outlive the release.
    existing(cluster, "crd", "fabriccapabilities.fabriccap.dev", namespace=None)
