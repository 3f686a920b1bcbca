"""The shipped alert rules in a real Prometheus, scraping the real operator.

promtool's unit tests (tests/rules/alerts-test.yaml) prove the expressions on synthetic
series; this proves them on what the operator actually exposes: `fabriccap run` watches a
real kube-apiserver, a real Prometheus (Debian's /usr/bin/prometheus) scrapes it every second
as job `fabriccap` and evaluates `monitoring/`'s rules, rendered by the same generator with
`for: 2s`. A mixed rollout and a device-plugin gap are created the way a cluster gets them
(nodes' status, a plugin DaemonSet in kube-system with Ready pods), the alerts are read from
Prometheus' HTTP API, the pools are fixed, and the alerts must resolve.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from fabriccap.observability.alerts import AlertSettings, rules_file
from fabriccap.observability.dashboard import dashboard
from fabriccap_devtools import world as fabriccap_world
from fabriccap_devtools.controlplane.processes import free_ports
from fabriccap_devtools.seeding import creatable
from harness import (
    OperatorProcess,
    SyncKube,
    World,
    pod_path,
    wait_until,
    write_config,
)

if TYPE_CHECKING:
    from harness import E2ECluster

pytestmark = pytest.mark.prometheus

PROMETHEUS = os.environ.get("FABRICCAP_PROMETHEUS", "/usr/bin/prometheus")
JOB = "fabriccap"
PLUGIN_NAMESPACE = "kube-system"  # the EFA profile's default: the operator runs with the default config
FOR = "2s"
ALERT_TIMEOUT = 45.0  # scrape 1s + evaluation 1s + for 2s + debounce, with room for a loaded machine


def _prometheus_binary() -> str:
    if Path(PROMETHEUS).exists():
        return PROMETHEUS
    found = shutil.which("prometheus")
    if found:
        return found
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
        pytest.fail("prometheus is missing under CI: install Debian's prometheus package (scripts/bootstrap.sh --test)")
    pytest.skip("prometheus not installed (apt-get install prometheus, or scripts/bootstrap.sh --test)")


def dashboard_queries(pool: str) -> Iterator[tuple[str, str]]:
    """The dashboard's queries as Grafana sends them, its variables set to this job and pool.

    The series here carry no `cluster` label, so Grafana's cluster variable has no value.
    """
    variables = {"$__rate_interval": "1m", "$job": JOB, "$cluster": "", "$fabric": "efa", "$pool": pool}
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in variables.items():
                expr = expr.replace(variable, value)
            yield panel["title"], expr


@dataclass
class PrometheusServer:
    """A Prometheus scraping one operator, with the shipped rules and short `for:`."""

    binary: str
    directory: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.directory / "prometheus.log"

    def configure(self, operator_port: int) -> None:
        settings = AlertSettings(job=JOB, for_all=FOR)
        (self.directory / "rules.yaml").write_text(yaml.safe_dump(rules_file(settings), sort_keys=False))
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": ["rules.yaml"],
            "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": [f"127.0.0.1:{operator_port}"]}]}],
        }
        (self.directory / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))

    def start(self) -> None:
        (self.port,) = free_ports(1)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.directory / 'prometheus.yml'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    f"--storage.tsdb.path={self.directory / 'tsdb'}",
                    "--log.level=warn",
                ],
                cwd=self.directory,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_until(self.ready, "Prometheus /-/ready", timeout=60)

    def reload(self, operator_port: int) -> None:
        """Point the scrape at a restarted operator (its port changed); SIGHUP re-reads config."""
        self.configure(operator_port)
        assert self.process is not None
        self.process.send_signal(signal.SIGHUP)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)

    def _get(self, path: str) -> Any:
        if self.process is None or self.process.poll() is not None:
            raise AssertionError(f"Prometheus is not running:\n{self.log()}")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as response:
            return json.loads(response.read()) if path.startswith("/api/") else response.status

    def ready(self) -> bool:
        try:
            return bool(self._get("/-/ready") == 200)
        except (urllib.error.URLError, OSError):
            return False

    def query(self, promql: str) -> list[dict[str, Any]]:
        body = self._get("/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def alerts(self, alertname: str | None = None, state: str | None = None) -> list[dict[str, Any]]:
        """Active alerts (pending or firing) as /api/v1/alerts lists them; resolved ones are gone."""
        body = self._get("/api/v1/alerts")
        assert body["status"] == "success", body
        return [
            alert
            for alert in body["data"]["alerts"]
            if alertname in (None, alert["labels"]["alertname"]) and state in (None, alert["state"])
        ]

    def firing(self, alertname: str, /, **labels: str) -> list[dict[str, Any]]:
        return [
            alert
            for alert in self.alerts(alertname, "firing")
            if all(alert["labels"].get(key) == value for key, value in labels.items())
        ]

    def active(self, alertname: str, /, **labels: str) -> list[dict[str, Any]]:
        return [
            alert
            for alert in self.alerts(alertname)
            if all(alert["labels"].get(key) == value for key, value in labels.items())
        ]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class Stack:
    operator: OperatorProcess
    prometheus: PrometheusServer
    kube: SyncKube

    def report_sections(self) -> list[tuple[str, str]]:
        # Picked up by conftest's report hook when a test fails.
        sections = self.operator.report_sections()
        sections.append(("prometheus log", "\n".join(self.prometheus.log().splitlines()[-100:])))
        with contextlib.suppress(Exception):
            sections.append(("prometheus alerts", json.dumps(self.prometheus.alerts(), indent=1)))
        return sections


@pytest.fixture(scope="module")
def stack(cluster: E2ECluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    binary = _prometheus_binary()
    directory = tmp_path_factory.mktemp("prometheus")
    # The default profiles (plugin DaemonSets in kube-system); a short grace period so the
    # pools a test deletes vanish, with their series, before the module ends.
    config = write_config(directory / "operator.yaml", {"poolGracePeriodSeconds": 1, "debounceSeconds": 0.1})
    operator = OperatorProcess(kubeconfig=cluster.kubeconfig, config=config, log_path=directory / "operator.log")
    prometheus = PrometheusServer(binary=binary, directory=directory)
    kube = SyncKube(cluster.kubeconfig)
    try:
        operator.start()
        prometheus.configure(operator.metrics_port)
        prometheus.start()
        wait_until(lambda: prometheus.query(f'up{{job="{JOB}"}} == 1'), "Prometheus to scrape the operator", timeout=30)
        # The rules' first evaluation may precede the first scrape: OperatorDown is then
        # briefly active (its for: is 2s here, 10m shipped). Start from a quiet state.
        wait_until(
            lambda: not prometheus.active("FabricCapabilityOperatorDown"),
            "OperatorDown to clear after the first scrapes",
            timeout=30,
        )
        yield Stack(operator=operator, prometheus=prometheus, kube=kube)
    finally:
        prometheus.stop()
        operator.stop()
        kube.close()


@pytest.fixture
def world(stack: Stack) -> Iterator[World]:
    stack.operator.mark_log()
    created = World(kube=stack.kube, namespace=PLUGIN_NAMESPACE, prefix=f"prom-{uuid.uuid4().hex[:6]}")
    yield created
    # The operator deletes them after its grace period; do not leave them if it is down.
    created.cleanup(wait=False)


def test_mixed_rollout_fires_with_the_pools_labels_and_resolves_when_fixed(stack: Stack, world: World) -> None:
    prometheus = stack.prometheus
    mixed = [world.add_node("mixed", 1, efa=32, plugin=True), world.add_node("mixed", 2, efa=16, plugin=True)]
    world.add_node("uniform", 1, efa=32, plugin=True)
    world.add_node("uniform", 2, efa=32, plugin=True)

    (alert,) = wait_until(
        lambda: prometheus.firing("FabricMixedRollout", name=world.fcap_name("mixed")),
        "FabricMixedRollout to fire for the mixed pool",
        timeout=ALERT_TIMEOUT,
    )
    assert alert["labels"] == {
        "alertname": "FabricMixedRollout",
        "severity": "warning",
        "name": world.fcap_name("mixed"),
        "fabric": "efa",
        "pool": world.pool("mixed"),
        "condition": "Homogeneous",
        "status": "false",
        "job": JOB,
    }
    annotations = alert["annotations"]
    # The description's query template reads the pool's count distribution from Prometheus.
    assert "(count: nodes = 16: 1, 32: 1)" in annotations["description"], annotations["description"]
    assert annotations["runbook_url"].endswith("/docs/runbook.md#fabricmixedrollout")
    # The same pool is not Ready either: that alert's template reads advertising vs total nodes.
    (not_ready,) = wait_until(
        lambda: prometheus.firing("FabricCapabilityNotReady", name=world.fcap_name("mixed")),
        "FabricCapabilityNotReady for the mixed pool",
        timeout=ALERT_TIMEOUT,
    )
    assert "advertised on 2 of 2 schedulable target nodes" in not_ready["annotations"]["description"]
    # A uniform, Ready pool next to it raises nothing.
    assert prometheus.active("FabricMixedRollout", pool=world.pool("uniform")) == []
    assert prometheus.active("FabricCapabilityNotReady", pool=world.pool("uniform")) == []
    assert prometheus.query(f'fabriccap_pool_ready{{name="{world.fcap_name("uniform")}"}} == 1')

    world.set_fabric(mixed[1], 32)  # the second node gets its 32 EFA: the pool is uniform

    wait_until(
        lambda: not prometheus.active("FabricMixedRollout", name=world.fcap_name("mixed")),
        "FabricMixedRollout to resolve",
        timeout=ALERT_TIMEOUT,
    )
    wait_until(
        lambda: not prometheus.active("FabricCapabilityNotReady", name=world.fcap_name("mixed")),
        "FabricCapabilityNotReady to resolve",
        timeout=ALERT_TIMEOUT,
    )


def test_device_plugin_gap_fires_with_the_node_count_and_resolves_when_advertised(stack: Stack, world: World) -> None:
    prometheus = stack.prometheus
    # Ready plugin pods, allocatable 0: what a DaemonSet health check calls healthy.
    gap = [world.add_node("gap", 1, efa=0, plugin=True), world.add_node("gap", 2, efa=0, plugin=True)]

    (alert,) = wait_until(
        lambda: prometheus.firing("FabricDevicePluginGap", name=world.fcap_name("gap")),
        "FabricDevicePluginGap to fire",
        timeout=ALERT_TIMEOUT,
    )
    assert alert["labels"] == {
        "alertname": "FabricDevicePluginGap",
        "severity": "warning",
        "name": world.fcap_name("gap"),
        "fabric": "efa",
        "pool": world.pool("gap"),
        "kind": "plugin_ready_not_advertised",
        "job": JOB,
    }
    assert float(alert["value"]) == 2
    assert alert["annotations"]["summary"].startswith(f"2 node(s) of pool {world.pool('gap')} ")
    # Every node advertises 0: uniform, so this is not a mixed rollout.
    assert prometheus.active("FabricMixedRollout", name=world.fcap_name("gap")) == []
    # With a gap on screen, every dashboard panel has data (no query names a missing series).
    for title, expr in dashboard_queries(pool=world.pool("gap")):
        assert prometheus.query(expr), f"dashboard panel {title!r} shows nothing: {expr}"

    world.set_fabric(gap[0], 32)
    world.set_fabric(gap[1], 32)

    wait_until(
        lambda: not prometheus.active("FabricDevicePluginGap", name=world.fcap_name("gap")),
        "FabricDevicePluginGap to resolve",
        timeout=ALERT_TIMEOUT,
    )
    assert prometheus.query(f'fabriccap_pool_ready{{name="{world.fcap_name("gap")}"}} == 1')


def test_fabric_not_requested_fires_for_gpu_pods_without_efa_and_resolves_when_they_go(
    stack: Stack, world: World
) -> None:
    prometheus = stack.prometheus
    nodes = [world.add_node("train", 1, efa=32, plugin=True), world.add_node("train", 2, efa=32, plugin=True)]
    pods = [f"{world.prefix}-bert-{index}" for index in range(2)]
    for pod_name, node_name in zip(pods, nodes, strict=True):
        body = fabriccap_world.workload_pod(node_name, pod_name, namespace=PLUGIN_NAMESPACE)  # GPUs, no EFA
        status = body.pop("status")
        stack.kube.create(pod_path(PLUGIN_NAMESPACE), creatable(body))
        stack.kube.patch(pod_path(PLUGIN_NAMESPACE, pod_name) + "/status", {"status": status})
    try:
        (alert,) = wait_until(
            lambda: prometheus.firing("FabricNotRequested", name=world.fcap_name("train")),
            "FabricNotRequested to fire",
            timeout=ALERT_TIMEOUT,
        )
        assert alert["labels"] == {
            "alertname": "FabricNotRequested",
            "severity": "warning",
            "name": world.fcap_name("train"),
            "fabric": "efa",
            "pool": world.pool("train"),
            "use": "without_fabric",
            "job": JOB,
        }
        assert float(alert["value"]) == 2
        assert alert["annotations"]["runbook_url"].endswith("/docs/runbook.md#fabricnotrequested")
        # The pool itself is Ready: workloads are informational, nothing else fires for it.
        assert prometheus.active("FabricCapabilityNotReady", name=world.fcap_name("train")) == []
    finally:
        for pod_name in pods:
            stack.kube.delete(pod_path(PLUGIN_NAMESPACE, pod_name))
    wait_until(
        lambda: not prometheus.active("FabricNotRequested", name=world.fcap_name("train")),
        "FabricNotRequested to resolve once the pods are gone",
        timeout=ALERT_TIMEOUT,
    )


def test_fabric_request_unschedulable_fires_for_a_pending_efa_pod_and_resolves_when_it_goes(
    stack: Stack, world: World
) -> None:
    prometheus = stack.prometheus
    world.add_node("small", 1, efa=4, plugin=True, instance_type="p4d.24xlarge")
    name = f"{world.prefix}-wants-32"
    message = fabriccap_world.SCHEDULER_EFA_MESSAGE.format(nodes=1)
    body = fabriccap_world.workload_pod(None, name, namespace=PLUGIN_NAMESPACE, efa=32, unschedulable=message)
    status = body.pop("status")
    stack.kube.create(pod_path(PLUGIN_NAMESPACE), creatable(body))
    stack.kube.patch(pod_path(PLUGIN_NAMESPACE, name) + "/status", {"status": status})
    try:
        (alert,) = wait_until(
            lambda: prometheus.firing("FabricRequestUnschedulable", fabric="efa"),
            "FabricRequestUnschedulable to fire",
            timeout=ALERT_TIMEOUT,
        )
        assert float(alert["value"]) == 1
        assert alert["annotations"]["summary"] == "1 pod(s) request efa that no node can give them."
    finally:
        stack.kube.delete(pod_path(PLUGIN_NAMESPACE, name))
    wait_until(
        lambda: not prometheus.active("FabricRequestUnschedulable", fabric="efa"),
        "FabricRequestUnschedulable to resolve once the pod is gone",
        timeout=ALERT_TIMEOUT,
    )


def test_promtool_check_metrics_finds_nothing_in_the_live_exposition(stack: Stack, world: World) -> None:
    """`promtool check metrics` lints names (no *_count outside histograms), HELP and units."""
    world.add_node("lint", 1, efa=32, plugin=True)
    world.add_node("lint", 2, efa=16, plugin=True)  # mixed: the count distribution has two series
    wait_until(
        lambda: stack.operator.metrics().get(
            "fabriccap_pool_nodes", name=world.fcap_name("lint"), fabric="efa", pool=world.pool("lint")
        ),
        "the pool's series",
        timeout=ALERT_TIMEOUT,
    )
    exposition = urllib.request.urlopen(f"http://127.0.0.1:{stack.operator.metrics_port}/metrics", timeout=5).read()
    assert b"fabriccap_pool_nodes_by_allocatable{" in exposition
    promtool = str(Path(_prometheus_binary()).with_name("promtool"))
    result = subprocess.run(
        [promtool, "check", "metrics"], input=exposition, capture_output=True, timeout=60, check=False
    )
    findings = (result.stdout + result.stderr).decode()
    assert result.returncode == 0 and not findings.strip(), findings


def test_operator_down_fires_when_the_operator_stops_and_resolves_when_it_is_back(stack: Stack) -> None:
    prometheus = stack.prometheus
    assert prometheus.active("FabricCapabilityOperatorDown") == []
    assert prometheus.active("FabricCapabilityStale") == []

    stack.operator.stop()
    try:
        (alert,) = wait_until(
            lambda: prometheus.firing("FabricCapabilityOperatorDown"),
            "FabricCapabilityOperatorDown to fire",
            timeout=ALERT_TIMEOUT,
        )
        assert alert["labels"] == {"alertname": "FabricCapabilityOperatorDown", "severity": "critical", "job": JOB}
    finally:
        # Leave the module's operator running, whatever happened.
        stack.operator.start()
        prometheus.reload(stack.operator.metrics_port)

    wait_until(
        lambda: not prometheus.active("FabricCapabilityOperatorDown"),
        "FabricCapabilityOperatorDown to resolve",
        timeout=ALERT_TIMEOUT,
    )
