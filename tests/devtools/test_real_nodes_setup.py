"""Real nodes without running one: their configuration files, the machine-wide registry of
slots and shared changes, the test plugin's DaemonSet and control files, the image cache key,
and the command line. The running chain is tests/e2e/test_real_nodes.py."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from fabriccap_devtools import efaplugin
from fabriccap_devtools.cli import main
from fabriccap_devtools.controlplane import controllers, host, images
from fabriccap_devtools.controlplane.nodes import (
    REAL_NODE_LABEL,
    NodeOptions,
    NodeSpec,
    RealNode,
    cni_config,
    containerd_config,
    kubelet_argv,
    kubelet_config,
    node_specs,
)
from fabriccap_devtools.controlplane.processes import ProcessRecord, alive, kill_unrecorded
from fabriccap_devtools.controlplane.state import read_state, update_state


@pytest.fixture
def node(tmp_path: Path) -> RealNode:
    real = RealNode(
        NodeSpec("fcap-node-1", {"eks.amazonaws.com/nodegroup": "p5", REAL_NODE_LABEL: "true"}), 7, tmp_path
    )
    # Any live process stands in for the namespace holder the kubelet is started in.
    real.processes["namespace"] = ProcessRecord.of("fcap-node-1-namespace", os.getpid())
    return real


# ---------------------------------------------------------------------------------------------
# Configuration files


def test_containerd_keeps_oom_scores_and_state_per_node(node: RealNode) -> None:
    config = tomllib.loads(containerd_config(node))
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    # No CAP_SYS_RESOURCE on these VMs: lowering OOM scores fails every sandbox.
    assert cri["restrict_oom_score_adj"] is True
    assert cri["sandbox_image"] == images.PAUSE_IMAGE
    runc = cri["containerd"]["runtimes"]["runc"]["options"]
    assert runc["SystemdCgroup"] is False
    assert runc["Root"] == str(node.directory / "runc")
    assert config["grpc"]["address"] == str(node.containerd_socket)
    # containerd adds ".ttrpc" and refuses socket paths over 104 bytes, whatever the directory.
    assert len(str(node.containerd_socket) + ".ttrpc") < 104
    assert config["root"].startswith(str(node.directory)) and config["state"].startswith(str(node.directory))
    assert cri["cni"]["conf_dir"] == str(node.directory / "cni" / "net.d")
    # `opt` would create /opt/containerd; runtime.v1.linux must stay or CRI does not load.
    assert "io.containerd.internal.v1.opt" in config["disabled_plugins"]
    assert "io.containerd.runtime.v1.linux" not in config["disabled_plugins"]
    assert cri["stream_server_address"] == "127.0.0.1"


def test_the_kubelet_runs_on_cgroup_v1_in_its_own_root_and_serves_on_the_node_ip(node: RealNode) -> None:
    config = kubelet_config(node, ca_file=Path("/ca.crt"), healthz_port=12345, options=NodeOptions())
    assert config["failCgroupV1"] is False
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupRoot"] == "/fabriccap-7"
    assert config["address"] == "198.18.7.1"
    assert not ipaddress.ip_address(config["address"]).is_loopback
    assert (config["healthzBindAddress"], config["healthzPort"], config["readOnlyPort"]) == ("127.0.0.1", 12345, 0)
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["makeIPTablesUtilChains"] is False
    assert config["volumePluginDir"].startswith(str(node.directory))
    assert config["nodeStatusUpdateFrequency"] == "10s"
    assert config["imageGCHighThresholdPercent"] == 100  # nothing could be pulled back
    # A YAML file the kubelet reads back unchanged.
    assert yaml.safe_load(yaml.safe_dump(config)) == config


def test_the_kubelet_starts_in_the_nodes_namespace_with_its_ip_and_labels(node: RealNode) -> None:
    argv = kubelet_argv(node, Path("/bin/kubelet"))
    assert argv[:4] == ["nsenter", f"--target={os.getpid()}", "--mount", "--"]
    assert "--node-ip=198.18.7.1" in argv
    assert "--hostname-override=fcap-node-1" in argv
    assert f"--node-labels=eks.amazonaws.com/nodegroup=p5,{REAL_NODE_LABEL}=true" in argv


def test_no_kubelet_starts_without_the_namespace(node: RealNode) -> None:
    node.processes["namespace"] = ProcessRecord("gone", os.getpid(), "1")  # a recycled PID
    with pytest.raises(RuntimeError, match="its mount namespace is gone"):
        kubelet_argv(node, Path("/bin/kubelet"))


def test_pods_get_addresses_of_the_nodes_own_subnet_and_no_route_off_it(node: RealNode) -> None:
    config = cni_config(node)
    (bridge,) = config["plugins"]
    assert bridge["bridge"] == "fcap7"
    # Not a gateway, no masquerade: the plugin touches neither ip_forward nor iptables.
    assert (bridge["isGateway"], bridge["ipMasq"]) == (False, False)
    (addresses,) = bridge["ipam"]["ranges"][0]
    assert addresses == {
        "subnet": "198.18.7.0/24",
        "rangeStart": "198.18.7.10",
        "rangeEnd": "198.18.7.250",
        "gateway": "198.18.7.1",
    }
    assert bridge["ipam"]["dataDir"].startswith(str(node.directory))


def test_slots_are_subnets_of_the_benchmarking_range() -> None:
    assert host.node_subnet(1) == ipaddress.IPv4Network("198.18.1.0/24")
    assert host.node_subnet(254) == ipaddress.IPv4Network("198.18.254.0/24")
    for bad in (0, 255):
        with pytest.raises(ValueError, match=r"outside 1\.\.254"):
            host.node_subnet(bad)


def test_node_specs_carry_only_labels_a_kubelet_may_set_on_itself() -> None:
    specs = node_specs(2, pool="p5-train")
    assert [s.name for s in specs] == ["fcap-node-1", "fcap-node-2"]
    for spec in specs:
        for key in spec.labels:
            domain = key.split("/")[0]
            # NodeRestriction: outside kubernetes.io/k8s.io, or one of the allowed prefixes.
            assert not domain.endswith(("kubernetes.io", "k8s.io")) or domain in (
                "node.kubernetes.io",
                "topology.kubernetes.io",
            ), key
        assert spec.labels["eks.amazonaws.com/nodegroup"] == "p5-train"


def test_controllers_beside_simulated_nodes_leave_their_pods_alone() -> None:
    assert {"daemonset-controller", "node-lifecycle-controller", "garbage-collector-controller"} <= set(
        controllers.NODE_CONTROLLERS
    )
    safe = set(controllers.SIMULATION_SAFE_CONTROLLERS)
    # node-lifecycle lifts the not-ready taint new Nodes get; without it no DaemonSet pod schedules.
    assert {"daemonset-controller", "node-lifecycle-controller"} <= safe
    assert "garbage-collector-controller" not in safe


# ---------------------------------------------------------------------------------------------
# The machine-wide registry


class FakeMachine:
    def __init__(self, root: Path) -> None:
        self.sysctls = root / "proc-sys"
        for key, value in {key: "0" for key in host.KUBELET_SYSCTLS}.items():
            (self.sysctls / key).parent.mkdir(parents=True, exist_ok=True)
            (self.sysctls / key).write_text(value + "\n")
        self.targets = [root / "var-lib-kubelet", root / "run-netns"]
        self.taken_slots: set[int] = set()
        self.gone_owners: set[str] = set()
        self.registry = host.HostRegistry(
            directory=root / "registry",
            sysctl_root=self.sysctls,
            bind_targets=self.targets,
            slot_in_use=lambda slot: slot in self.taken_slots,
            owner_gone=lambda owner: owner in self.gone_owners,
        )

    def kubelet_starts(self) -> None:
        """What setupKernelTunables does."""
        (self.sysctls / "vm/overcommit_memory").write_text("1\n")
        (self.sysctls / "kernel/panic_on_oops").write_text("1\n")

    def sysctl(self, key: str) -> str:
        return (self.sysctls / key).read_text().strip()


@pytest.fixture
def machine(tmp_path: Path) -> FakeMachine:
    return FakeMachine(tmp_path)


def test_the_last_node_out_restores_the_sysctls_and_removes_what_the_first_created(machine: FakeMachine) -> None:
    machine.targets[1].mkdir()  # already there: not ours to remove
    first = machine.registry.join(Path("/cp/a"), 2)
    machine.kubelet_starts()
    second = machine.registry.join(Path("/cp/b"), 1)
    assert (first, second) == ([1, 2], [3])
    assert machine.targets[0].is_dir()

    machine.registry.leave(Path("/cp/a"))
    # Another control plane's kubelets still run: nothing shared is undone yet.
    assert machine.sysctl("vm/overcommit_memory") == "1"
    assert machine.targets[0].is_dir()

    machine.registry.leave(Path("/cp/b"))
    assert machine.sysctl("vm/overcommit_memory") == "0"
    assert machine.sysctl("kernel/panic_on_oops") == "0"
    assert not machine.targets[0].exists()
    assert machine.targets[1].is_dir()
    assert not machine.registry.directory.exists()


def test_slots_in_use_on_the_machine_are_skipped(machine: FakeMachine) -> None:
    machine.taken_slots = {1, 3}
    assert machine.registry.join(Path("/cp/a"), 3) == [2, 4, 5]


def test_a_crashed_owner_is_forgotten_but_its_snapshot_of_the_sysctls_kept(machine: FakeMachine) -> None:
    machine.registry.join(Path("/cp/crashed"), 1)
    machine.kubelet_starts()  # and the control plane died without `down`
    machine.gone_owners.add("/cp/crashed")
    slots = machine.registry.join(Path("/cp/next"), 1)
    assert slots == [1]
    machine.registry.leave(Path("/cp/next"))
    # The values from before the crashed run, not the ones its kubelet left.
    assert machine.sysctl("vm/overcommit_memory") == "0"


def test_leaving_a_machine_where_no_node_ever_ran_creates_nothing(machine: FakeMachine) -> None:
    machine.registry.leave(Path("/cp/a"))
    assert not machine.registry.directory.exists()


def test_a_control_plane_is_gone_when_nothing_it_recorded_runs(tmp_path: Path) -> None:
    assert host.control_plane_gone(tmp_path)  # no state.json
    alive_entry = ProcessRecord.of("etcd", os.getpid()).to_json()
    dead_entry = {"name": "etcd", "pid": os.getpid(), "start_time": "1"}  # a recycled PID
    update_state(tmp_path, lambda s: s.update(processes=[dead_entry], nodes=[]), create=True)
    assert host.control_plane_gone(tmp_path)
    update_state(tmp_path, lambda s: s.update(nodes=[{"processes": {"kubelet": alive_entry}}]))
    assert not host.control_plane_gone(tmp_path)


def test_no_slot_left_is_one_clear_error(machine: FakeMachine) -> None:
    machine.taken_slots = set(range(1, host.MAX_SLOT + 1))
    with pytest.raises(host.HostError, match="no free node slot left on this machine"):
        machine.registry.join(Path("/cp/a"), 1)


# ---------------------------------------------------------------------------------------------
# The test device plugin


def test_the_plugin_daemon_set_is_labelled_like_the_chart_and_its_pods_are_not() -> None:
    body = efaplugin.daemon_set(devices=8, instance_types=["p5.48xlarge"])
    assert body["metadata"] == {
        "name": "aws-efa-k8s-device-plugin",
        "namespace": "kube-system",
        "labels": {
            "helm.sh/chart": "aws-efa-k8s-device-plugin-v0.5.20",
            "app.kubernetes.io/name": "aws-efa-k8s-device-plugin",
            "app.kubernetes.io/instance": "aws-efa-k8s-device-plugin",
            "app.kubernetes.io/version": "v0.5.13",
            "app.kubernetes.io/managed-by": "Helm",
        },
    }
    template = body["spec"]["template"]
    # The chart's pods carry only `name`: the operator must find them through their owner.
    assert template["metadata"]["labels"] == {"name": "aws-efa-k8s-device-plugin"}
    assert body["spec"]["selector"]["matchLabels"] == template["metadata"]["labels"]
    (container,) = template["spec"]["containers"]
    assert container["imagePullPolicy"] == "Never"
    assert container["image"] == images.EFA_PLUGIN_IMAGE
    assert {"name": "EFA_DEVICE_COUNT", "value": "8"} in container["env"]
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    paths = {v["hostPath"]["path"] for v in template["spec"]["volumes"]}
    assert paths == {"/var/lib/kubelet/device-plugins", efaplugin.STATE_DIR_IN_POD}


def test_health_and_count_files(tmp_path: Path) -> None:
    efaplugin.set_unhealthy(tmp_path, ["efa1", "efa3"])
    assert (tmp_path / "unhealthy").read_text() == "efa1\nefa3\n"
    efaplugin.set_unhealthy(tmp_path, [])
    assert (tmp_path / "unhealthy").read_text() == ""
    efaplugin.set_device_count(tmp_path, 8)
    assert (tmp_path / "count").read_text() == "8\n"
    efaplugin.set_device_count(tmp_path, None)
    assert not (tmp_path / "count").exists()
    with pytest.raises(ValueError, match="cannot be negative"):
        efaplugin.set_device_count(tmp_path, -1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unhealthy"]  # no temporary file left


# ---------------------------------------------------------------------------------------------
# Images, state, processes, the command line


def test_the_image_cache_key_follows_the_sources_and_nothing_else(tmp_path: Path) -> None:
    source = tmp_path / "images"
    (source / "cmd" / "pause").mkdir(parents=True)
    for name in ("go.mod", "go.sum"):
        (source / name).write_text(name)
    main_go = source / "cmd" / "pause" / "main.go"
    main_go.write_text("package main\n")
    key = images.source_digest(source)
    (source / "README.md").write_text("notes")
    assert images.source_digest(source) == key
    main_go.write_text("package main // changed\n")
    assert images.source_digest(source) != key


def test_the_packaged_image_sources_are_complete() -> None:
    files = {str(p.relative_to(images.source_dir())) for p in images.source_files(images.source_dir())}
    assert {"go.mod", "go.sum"} <= files
    for program, _ in images.IMAGES.values():
        assert f"cmd/{program}/main.go" in files
    assert "cmd/mkimage/main.go" in files


def test_state_updates_are_read_modify_writes(tmp_path: Path) -> None:
    assert update_state(tmp_path, lambda s: s.update(a=1)) is False
    assert read_state(tmp_path) is None
    assert update_state(tmp_path, lambda s: s.update(a=1), create=True)
    assert update_state(tmp_path, lambda s: s.update(b=2))
    assert read_state(tmp_path) == {"a": 1, "b": 2}


def test_processes_found_by_where_they_live_are_killed() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = ProcessRecord.of("sleeper", sleeper.pid)
        assert alive(record)
        kill_unrecorded([sleeper.pid], timeout=5)
        # Gone (and reaped: `alive` reaps a child of ours, so Popen sees no exit status).
        assert not alive(record)
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize(
    ("value", "message"), [("x", "'x' is not a number of nodes"), ("9", "9 nodes: choose 0 to 8"), ("-1", "choose 0")]
)
def test_a_bad_node_count_is_one_line(value: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["controlplane", "up", "--nodes", value, "--dir", "/nonexistent"])
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_the_plugin_binary_lists_its_devices_from_the_state_files(tmp_path: Path) -> None:
    """The Go program itself, outside a container: -list reads what the kubelet would be told."""
    plugin = images.images_dir() / "efa-device-plugin"
    if not plugin.is_file():
        pytest.skip("the node images are not built (python -m fabriccap_devtools.controlplane.binaries --nodes)")
    efaplugin.set_unhealthy(tmp_path, ["efa1", "# a comment", "efa9"])
    efaplugin.set_device_count(tmp_path, 3)
    listed = subprocess.run(
        [str(plugin), "-list", "-state-dir", str(tmp_path)], capture_output=True, text=True, timeout=30, check=True
    )
    assert listed.stdout.strip() == "efa0=Healthy,efa1=Unhealthy,efa2=Healthy"
    (tmp_path / "count").write_text("many\n")  # not a count: ignored, the default stays
    listed = subprocess.run(
        [str(plugin), "-list", "-state-dir", str(tmp_path), "-devices", "2"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert listed.stdout.strip() == "efa0=Healthy,efa1=Unhealthy"
    assert listed.stderr.count("ignoring count file") == 1
