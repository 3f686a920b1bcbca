"""Smoke tests: the e2e cluster is a real, RBAC-enforcing apiserver, and `down` cleans up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

from fabriccap_devtools.controlplane.binaries import KUBERNETES_COMMIT, KUBERNETES_VERSION
from fabriccap_devtools.controlplane.cluster import read_info

if TYPE_CHECKING:
    from harness import E2ECluster

EFA = "vpc.amazonaws.com/efa"


def test_apiserver_is_ready(cluster: E2ECluster) -> None:
    assert cluster.run_kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"


def test_the_servers_report_their_release_version(cluster: E2ECluster) -> None:
    """Built with the release stamps: tools that check the server version (helm's kubeVersion)
    see v1.35.4, not v0.0.0-master."""
    if cluster.local is None:
        pytest.skip("only the local control plane's binaries are ours")
    version = json.loads(cluster.run_kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == KUBERNETES_VERSION
    assert version["serverVersion"]["gitCommit"] == KUBERNETES_COMMIT
    assert version["clientVersion"]["gitVersion"] == KUBERNETES_VERSION


def test_user_without_bindings_is_forbidden_until_bound(cluster: E2ECluster) -> None:
    user = f"e2e-nobody-{uuid.uuid4().hex[:8]}"
    kubeconfig = cluster.kubeconfig_for(user, ["fabriccap-e2e:nobody"])

    denied = cluster.run_kubectl("get", "nodes", kubeconfig=kubeconfig, check=False)
    assert denied.returncode != 0
    # Forbidden (403), not Unauthorized (401): the certificate authenticated as `user`.
    assert "(Forbidden)" in denied.stderr
    assert f'User "{user}" cannot list resource "nodes"' in denied.stderr

    # The control: a binding for that exact user name is honoured, so RBAC decided the 403.
    role = f"{user}-node-reader"
    cluster.run_kubectl("create", "clusterrole", role, "--verb=list", "--resource=nodes")
    cluster.run_kubectl("create", "clusterrolebinding", role, f"--clusterrole={role}", f"--user={user}")
    try:
        deadline = time.monotonic() + 10  # RBAC reads through an informer cache
        while (allowed := cluster.run_kubectl("get", "nodes", kubeconfig=kubeconfig, check=False)).returncode:
            assert time.monotonic() < deadline, allowed.stderr
            time.sleep(0.2)
    finally:
        cluster.run_kubectl("delete", "clusterrolebinding,clusterrole", role, "--wait=false", check=False)


def test_admin_creates_a_node_and_patches_its_status(cluster: E2ECluster) -> None:
    # No kubelet runs: tests fake nodes by creating them and patching /status themselves.
    name = f"e2e-smoke-{uuid.uuid4().hex[:8]}"
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"e2e": "smoke"}}}
    cluster.run_kubectl("create", "-f", "-", input=json.dumps(node))
    try:
        status = {"status": {"capacity": {EFA: "4"}, "allocatable": {EFA: "4"}}}
        cluster.run_kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(status))
        stored = json.loads(cluster.run_kubectl("get", "node", name, "-o", "json").stdout)
        assert stored["metadata"]["labels"]["e2e"] == "smoke"
        assert stored["status"]["allocatable"][EFA] == "4"
    finally:
        cluster.run_kubectl("delete", "node", name, "--wait=false", check=False)


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a separate interpreter, as the CLI would."""
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, check=True)


def _running_servers_mentioning(directory: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if str(directory) in cmdline and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


@pytest.mark.skipif("FABRICCAP_E2E_KUBECONFIG" in os.environ, reason="tests the local control plane itself")
def test_up_survives_its_process_and_down_leaves_nothing_behind(tmp_path: Path) -> None:
    directory = tmp_path / "cp"
    started = _python(
        "import sys; from pathlib import Path; from fabriccap_devtools.controlplane.cluster import up; "
        "print(up(Path(sys.argv[1])).export_line)",
        str(directory),
    )
    assert started.stdout.strip() == f"export KUBECONFIG={directory.resolve() / 'kubeconfig'}"

    # The process that ran `up` has exited; both servers must still be serving.
    info = read_info(directory)
    assert info is not None
    assert set(info.pids) == {"etcd", "kube-apiserver"}
    assert all(psutil.Process(pid).is_running() for pid in info.pids.values())
    ready = subprocess.run(
        [str(info.kubectl), f"--kubeconfig={info.kubeconfig}", "get", "--raw", "/readyz"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ready.stdout.strip() == "ok", ready.stderr
    assert {p.pid for p in _running_servers_mentioning(directory.resolve())} >= set(info.pids.values())

    _python(
        "import sys; from pathlib import Path; from fabriccap_devtools.controlplane.cluster import down; "
        "down(Path(sys.argv[1]))",
        str(directory),
    )

    assert _running_servers_mentioning(directory.resolve()) == []
    for pid in info.pids.values():
        # A zombie has exited; it only waits for its new parent to reap it.
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not (directory / "state.json").exists()
    assert read_info(directory) is None
