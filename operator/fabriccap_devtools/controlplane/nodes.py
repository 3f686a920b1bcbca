"""Real nodes: each a kubelet with its own containerd, mount namespace, cgroup root and bridge.

Two kubelets on one containerd kill each other's pods, and the kubelet's device-plugin
directory is ``/var/lib/kubelet/device-plugins`` whatever ``--root-dir`` says; so every node
gets a process holding a mount namespace whose private binds put a directory of the node's
over each path kubelet and containerd hard-code (``host.NODE_BIND_TARGETS``). containerd and
the kubelet are started in it (``nsenter``); everything they mount lives and dies with it.
Node ``fcap-node-<i>`` in machine slot ``s`` (``host.HostRegistry``):

    DIR/nodes/<name>/containerd.toml, containerd/, runc/
                     kubelet-config.yaml, kubeconfig, pki/serving.{crt,key}
                     cni/net.d/10-fabriccap.conflist, cni/ipam/
                     binds/<target>/        what the namespace sees at each hard-coded path
                     logs/{namespace,containerd,kubelet}.log
    /run/fabriccap-nodes/node-<s>/containerd.sock: a socket path must stay under 104 bytes,
        which DIR (a pytest tmp_path, say) cannot promise
    bridge fcap<s>, 198.18.<s>.1/24: the node IP (the kubelet serves :10250 there; the
        kubelet refuses a loopback node IP), the pods' gateway, no route off the machine
    cgroup /fabriccap-<s> in every hierarchy: the kubelet's cgroupRoot (two kubelets sharing
        /kubepods would each remove the other's pod cgroups as orphans)

Settings this kind of VM needs: cgroup v1 (``failCgroupV1: false``, the cgroupfs driver), and
no CAP_SYS_RESOURCE, so containerd must not lower OOM scores (``restrict_oom_score_adj``;
otherwise every sandbox fails with ``can't get final child's PID from pipe``).

The apiserver reaches kubelets at their InternalIP (``--kubelet-preferred-address-types``), so
``kubectl logs/exec`` work without node names resolving and /etc/hosts stays untouched.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from fabriccap_devtools.controlplane import host, pki, relay
from fabriccap_devtools.controlplane.access import get_json, write_kubeconfig
from fabriccap_devtools.controlplane.images import PAUSE_IMAGE, NodeImages
from fabriccap_devtools.controlplane.processes import (
    ProcessError,
    ProcessRecord,
    alive,
    free_ports,
    kill_unrecorded,
    spawn,
    tail,
    terminate,
)
from fabriccap_devtools.controlplane.state import read_state, update_state

NODE_PREFIX = "fcap-node-"
NODES_DIR = "nodes"
KUBELET_PORT = 10250
# Marks the nodes that run a kubelet, so simulated DaemonSets (the demo's) can leave them out.
REAL_NODE_LABEL = "fabriccap.dev/real-node"
DEFAULT_POOL = "real-p5"
DEFAULT_INSTANCE_TYPE = "p5.48xlarge"
KUBELET_STOP_TIMEOUT = 20.0
RUNTIME_STOP_TIMEOUT = 10.0
CONTAINERD_READY_TIMEOUT = 30.0
RELAY_READY_TIMEOUT = 10.0
CTR_TIMEOUT = 60


class NodeError(RuntimeError):
    """A node could not be started, reached, or stopped cleanly."""


@dataclass(frozen=True)
class NodeSpec:
    """What a node is, for the cluster: its name and the labels its kubelet registers with.

    Labels in ``kubernetes.io``/``k8s.io`` must be ones the kubelet may set on itself
    (``node.kubernetes.io/instance-type``, ``topology.kubernetes.io/zone``, ...): NodeRestriction
    refuses the others, and the kubelet refuses to start with them.
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


def node_specs(count: int, *, pool: str = DEFAULT_POOL, instance_type: str = DEFAULT_INSTANCE_TYPE) -> list[NodeSpec]:
    """`count` nodes of one EKS node group."""
    return [
        NodeSpec(
            f"{NODE_PREFIX}{index}",
            {
                "eks.amazonaws.com/nodegroup": pool,
                "node.kubernetes.io/instance-type": instance_type,
                "topology.kubernetes.io/zone": "local-1a",
                REAL_NODE_LABEL: "true",
            },
        )
        for index in range(1, count + 1)
    ]


@dataclass(frozen=True)
class NodeOptions:
    """How the kubelets report; the control plane's side is in ``controllers.ControllerOptions``."""

    # The kubelet's own default. It computes node status this often and posts it at once when
    # it changed (allocatable after a device turned unhealthy, say), else every minute.
    status_update_frequency_seconds: int = 10
    startup_timeout: float = 120.0


DEFAULT_NODE_OPTIONS = NodeOptions()


@dataclass
class RealNode:
    """One node's layout on this machine and the processes running it."""

    spec: NodeSpec
    slot: int
    directory: Path
    processes: dict[str, ProcessRecord] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        return host.node_subnet(self.slot)

    @property
    def ip(self) -> str:
        return host.node_ip(self.slot)

    @property
    def bridge(self) -> str:
        return host.bridge_name(self.slot)

    @property
    def cgroup(self) -> str:
        return host.cgroup_name(self.slot)

    @property
    def runtime_dir(self) -> Path:
        return host.slot_runtime_dir(self.slot)

    @property
    def containerd_socket(self) -> Path:
        return self.runtime_dir / "containerd.sock"

    @property
    def logs(self) -> Path:
        return self.directory / "logs"

    def bind_source(self, target: Path) -> Path:
        return self.directory / "binds" / str(target).strip("/").replace("/", "-")

    @property
    def efa_state_dir(self) -> Path:
        """Where the test device plugin on this node reads its health and count files."""
        return self.bind_source(Path("/var/lib/fabriccap-efa"))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "labels": dict(self.spec.labels),
            "slot": self.slot,
            "directory": str(self.directory),
            "processes": {role: record.to_json() for role, record in self.processes.items()},
        }

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> RealNode:
        return cls(
            spec=NodeSpec(str(entry["name"]), dict(entry.get("labels") or {})),
            slot=int(entry["slot"]),
            directory=Path(entry["directory"]),
            processes={role: ProcessRecord.from_json(r) for role, r in (entry.get("processes") or {}).items()},
        )


# ---------------------------------------------------------------------------------------------
# Configuration files (pure: tested without a node)


def containerd_config(node: RealNode) -> str:
    """containerd 1.6 (Debian 12) TOML; everything it writes lives in the node's directory, or
    under /run/containerd, which the node's namespace binds to its own."""
    d = node.directory
    return f"""\
version = 2
root = "{d / "containerd" / "root"}"
state = "{d / "containerd" / "state"}"
oom_score = 0
# `opt` would create /opt/containerd on the host. NOT io.containerd.runtime.v1.linux: in 1.6
# the tasks service, and so CRI, fails without it ("no plugins registered for
# io.containerd.runtime.v1"), and the kubelet then finds no RuntimeService.
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.internal.v1.tracing",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = "{node.containerd_socket}"

[plugins."io.containerd.grpc.v1.cri"]
  # Imported from a tarball before the kubelet starts; there is no registry to pull from.
  sandbox_image = "{PAUSE_IMAGE}"
  # No CAP_SYS_RESOURCE on this VM: runc must not set an oom_score_adj below the shim's.
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{host.RUNC}"
        SystemdCgroup = false
        # Otherwise every node shares /run/containerd/runc/k8s.io.
        Root = "{d / "runc"}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{host.CNI_PLUGIN_DIR}"
    conf_dir = "{d / "cni" / "net.d"}"
    max_conf_num = 1
"""


def cni_config(node: RealNode) -> dict[str, Any]:
    """A bridge on the node's own bridge with host-local addresses; no gateway role, no masquerade:
    the plugin then changes no sysctl (ip_forward) and adds no iptables rule, and pods reach only
    their node's /24. One bridge per node because bridge 1.1 takes one IPv4 address per bridge."""
    hosts = list(node.subnet.hosts())
    return {
        "cniVersion": "1.0.0",
        "name": node.name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": node.bridge,
                "isGateway": False,
                "ipMasq": False,
                "hairpinMode": False,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(node.directory / "cni" / "ipam"),
                    "ranges": [
                        [
                            {
                                "subnet": str(node.subnet),
                                "rangeStart": str(hosts[9]),
                                "rangeEnd": str(hosts[249]),
                                "gateway": node.ip,
                            }
                        ]
                    ],
                },
            }
        ],
    }


def kubelet_config(node: RealNode, *, ca_file: Path, healthz_port: int, options: NodeOptions) -> dict[str, Any]:
    socket = f"unix://{node.containerd_socket}"
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # cgroup v1 host; own cgroup subtree per node.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{node.cgroup}",
        "cgroupsPerQOS": True,
        "containerRuntimeEndpoint": socket,
        "imageServiceEndpoint": socket,
        # Served on the node IP, where the apiserver dials it; nothing else off loopback.
        "address": node.ip,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": str(node.directory / "pki" / "serving.crt"),
        "tlsPrivateKeyFile": str(node.directory / "pki" / "serving.key"),
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "registerNode": True,
        # The default, /usr/libexec/kubernetes/kubelet-plugins/volume/exec, would be created on the host.
        "volumePluginDir": str(node.directory / "volume-plugins"),
        "maxPods": 110,
        # An empty resolv.conf: no pod may query the machine's resolver.
        "resolvConf": "",
        "clusterDomain": "cluster.local",
        "failSwapOn": False,
        # Otherwise the kubelet adds KUBE-* chains to the host's iptables.
        "makeIPTablesUtilChains": False,
        # The images cannot be pulled again: never collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # A small memory guard only: a shared machine's disk use is not ours to act on.
        "evictionHard": {
            "memory.available": "50Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "evictionPressureTransitionPeriod": "30s",
        "nodeStatusUpdateFrequency": f"{options.status_update_frequency_seconds}s",
        "nodeStatusReportFrequency": "1m0s",
        "shutdownGracePeriod": "0s",
        "containerLogMaxSize": "1Mi",
        "containerLogMaxFiles": 2,
    }


def kubelet_argv(node: RealNode, kubelet: Path) -> list[str]:
    labels = ",".join(f"{key}={value}" for key, value in sorted(node.spec.labels.items()))
    return [
        *_in_namespace(node),
        str(kubelet),
        f"--config={node.directory / 'kubelet-config.yaml'}",
        f"--kubeconfig={node.directory / 'kubeconfig'}",
        f"--hostname-override={node.name}",
        f"--node-ip={node.ip}",
        f"--node-labels={labels}",
        "--v=1",
    ]


def _in_namespace(node: RealNode) -> list[str]:
    holder = node.processes.get("namespace")
    if holder is None or not alive(holder):
        raise NodeError(f"{node.name}: its mount namespace is gone")
    return ["nsenter", f"--target={holder.pid}", "--mount", "--"]


# ---------------------------------------------------------------------------------------------
# Starting and stopping


@dataclass
class ControlPlaneAccess:
    """What the nodes need from the control plane: where it is, who signs certificates, and
    the admin's TLS context to watch the nodes come up."""

    directory: Path
    server: str
    pki: pki.PkiPaths
    admin: ssl.SSLContext


class NodeFleet:
    """The real nodes of one control plane. Every host change is recorded in state.json
    before it is made, so ``teardown`` (any process, after any crash) can undo it."""

    def __init__(
        self,
        access: ControlPlaneAccess,
        specs: Sequence[NodeSpec],
        *,
        kubelet: Path,
        images: NodeImages,
        options: NodeOptions = DEFAULT_NODE_OPTIONS,
        registry: host.HostRegistry | None = None,
    ) -> None:
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise NodeError(f"node names must be distinct: {names}")
        self.access = access
        self.specs = list(specs)
        self.kubelet = kubelet
        self.images = images
        self.options = options
        self.registry = registry or host.HostRegistry()
        self.nodes: dict[str, RealNode] = {}

    def start(self) -> list[RealNode]:
        missing = host.missing_prerequisites()
        if missing:
            raise NodeError(f"real nodes need {'; '.join(missing)}")
        # Marks this control plane as one with nodes before the registry knows it: a crash
        # from here on still leads `teardown` to the registry.
        update_state(self.access.directory, lambda state: state.setdefault("nodes", []))
        slots = self.registry.join(self.access.directory, len(self.specs))
        for spec, slot in zip(self.specs, slots, strict=True):
            node = RealNode(spec, slot, self.access.directory / NODES_DIR / spec.name)
            self.nodes[spec.name] = node
            self._record(node)
        for node in self.nodes.values():
            self._start_node(node)
        for node in self.nodes.values():
            self.wait_ready(node.name)
        return list(self.nodes.values())

    def _record(self, node: RealNode) -> None:
        def change(state: dict[str, Any]) -> None:
            entries = [e for e in state.get("nodes", []) if e.get("name") != node.name]
            state["nodes"] = [*entries, node.to_json()]

        update_state(self.access.directory, change)

    def _start_node(self, node: RealNode) -> None:
        started = time.monotonic()
        if node.directory.exists():
            # A previous run's runtime state (snapshots, checkpoints) must not leak into this one.
            _remove_runtime_dirs(node)
        for sub in ("containerd", "runc", "cni/net.d", "cni/ipam", "pki", "volume-plugins", "logs"):
            (node.directory / sub).mkdir(parents=True, exist_ok=True)
        node.runtime_dir.mkdir(parents=True, exist_ok=True)
        for target in host.NODE_BIND_TARGETS:
            node.bind_source(target).mkdir(parents=True, exist_ok=True)
        host.create_bridge(node.bridge, ipaddress.IPv4Interface(f"{node.ip}/{node.subnet.prefixlen}"))
        host.create_cgroup_root(node.cgroup)
        self._write_config(node)
        self._start_namespace(node)
        self._start_relay(node)
        self._start_containerd(node)
        self.start_kubelet(node.name)
        _progress(f"{node.name}: kubelet started on {node.ip} ({time.monotonic() - started:.1f}s)")

    def _write_config(self, node: RealNode) -> None:
        (node.directory / "containerd.toml").write_text(containerd_config(node))
        (node.directory / "cni" / "net.d" / "10-fabriccap.conflist").write_text(
            json.dumps(cni_config(node), indent=2) + "\n"
        )
        serving = pki.issue_serving(self.access.pki, node.name, dns_names=[node.name], ips=[node.ip])
        (node.directory / "pki" / "serving.crt").write_bytes(serving.cert_pem)
        pki.write_private(node.directory / "pki" / "serving.key", serving.key_pem)
        # The Node authorizer and NodeRestriction know a kubelet by exactly this identity.
        credentials = pki.issue_client(self.access.pki, f"system:node:{node.name}", ["system:nodes"])
        write_kubeconfig(
            node.directory / "kubeconfig", self.access.server, self.access.pki, credentials, f"system:node:{node.name}"
        )

    def _start_namespace(self, node: RealNode) -> None:
        record = self._spawn(
            node, "namespace", ["unshare", "--mount", "--propagation", "private", "--", "sleep", "infinity"]
        )
        own = host.mount_namespace(os.getpid())
        deadline = time.monotonic() + 10
        while host.mount_namespace(record.pid) in (None, own):
            if not alive(record) or time.monotonic() > deadline:
                raise NodeError(
                    f"{node.name}: unshare did not create a mount namespace:\n{tail(node.logs / 'namespace.log')}"
                )
            time.sleep(0.02)
        for target in host.NODE_BIND_TARGETS:
            host.bind_in_namespace(record.pid, node.bind_source(target), target)

    def _start_relay(self, node: RealNode) -> None:
        """The API server at the node's IP, for its pods' in-cluster clients (``relay``)."""
        upstream = urlsplit(self.access.server)
        record = self._spawn(
            node,
            "apiserver-relay",
            [
                sys.executable,
                "-m",
                "fabriccap_devtools.controlplane.relay",
                f"--listen={node.ip}:{relay.RELAY_PORT}",
                f"--upstream={upstream.hostname}:{upstream.port}",
            ],
        )
        if not relay.wait_listening((node.ip, relay.RELAY_PORT), RELAY_READY_TIMEOUT, lambda: alive(record)):
            raise NodeError(
                f"{node.name}: the API server relay did not start:\n{tail(node.logs / 'apiserver-relay.log')}"
            )

    def _start_containerd(self, node: RealNode) -> None:
        record = self._spawn(
            node,
            "containerd",
            [*_in_namespace(node), "containerd", "--config", str(node.directory / "containerd.toml")],
        )
        deadline = time.monotonic() + CONTAINERD_READY_TIMEOUT
        while not _ctr(node, "version", check=False):
            if not alive(record) or time.monotonic() > deadline:
                raise NodeError(f"{node.name}: containerd did not start:\n{tail(node.logs / 'containerd.log')}")
            time.sleep(0.1)
        # Before the kubelet: its first sandbox needs the pause image, and nothing can be pulled.
        for tarball in self.images.tarballs.values():
            _ctr(node, "--namespace", "k8s.io", "images", "import", str(tarball))

    def import_image(self, archive: Path, base_name: str) -> None:
        """Load an OCI archive into every node's containerd, as ``base_name@<manifest digest>``.

        The kubelet then finds a pod's ``base_name:tag@digest`` image without pulling: CRI
        resolves a reference that has both by its digest alone. ``--digests`` is what records
        that name (without it containerd keeps only the archive's tag annotation).
        """
        for node in self.nodes.values():
            _ctr(node, "--namespace", "k8s.io", "images", "import", "--base-name", base_name, "--digests", str(archive))

    def start_kubelet(self, name: str) -> None:
        node = self.nodes[name]
        current = node.processes.get("kubelet")
        if current is not None and alive(current):
            raise NodeError(f"{name}: the kubelet already runs (pid {current.pid})")
        (healthz_port,) = free_ports(1)
        config = kubelet_config(node, ca_file=self.access.pki.ca_cert, healthz_port=healthz_port, options=self.options)
        (node.directory / "kubelet-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        self._spawn(node, "kubelet", kubelet_argv(node, self.kubelet))

    def stop_kubelet(self, name: str) -> None:
        node = self.nodes[name]
        record = node.processes.pop("kubelet", None)
        if record is not None:
            terminate(record, KUBELET_STOP_TIMEOUT)
        self._record(node)

    def kubelet_running(self, name: str) -> bool:
        record = self.nodes[name].processes.get("kubelet")
        return record is not None and alive(record)

    def wait_ready(self, name: str) -> None:
        """Until the Node object says Ready; fails fast when the kubelet exits."""
        node = self.nodes[name]
        record = node.processes["kubelet"]
        deadline = time.monotonic() + self.options.startup_timeout
        while not node_ready(get_json(f"{self.access.server}/api/v1/nodes/{name}", self.access.admin)):
            if not alive(record):
                raise NodeError(f"{name}: the kubelet exited:\n{tail(node.logs / 'kubelet.log')}")
            if time.monotonic() > deadline:
                raise NodeError(
                    f"{name}: not Ready after {self.options.startup_timeout:.0f}s; "
                    f"last lines of {node.logs / 'kubelet.log'}:\n{tail(node.logs / 'kubelet.log')}"
                )
            time.sleep(0.2)

    def _spawn(self, node: RealNode, role: str, argv: list[str]) -> ProcessRecord:
        record, _ = spawn(f"{node.name}-{role}", argv, node.logs / f"{role}.log", cwd=node.directory)
        node.processes[role] = record
        self._record(node)
        return record


def node_ready(node: Mapping[str, Any] | None) -> bool:
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _ctr(node: RealNode, *args: str, check: bool = True) -> bool:
    argv = ["ctr", f"--address={node.containerd_socket}", *args]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=CTR_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise NodeError(f"{node.name}: `{' '.join(argv)}` took longer than {CTR_TIMEOUT}s") from None
    if check and result.returncode != 0:
        raise NodeError(f"{node.name}: `{' '.join(argv)}` failed: {result.stderr.strip()}")
    return result.returncode == 0


def _progress(message: str) -> None:
    print(f"fabriccap-dev controlplane: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Teardown


def recorded_nodes(directory: Path) -> list[RealNode]:
    state = read_state(directory) or {}
    return [RealNode.from_json(entry) for entry in state.get("nodes", [])]


def teardown(directory: Path, *, registry: host.HostRegistry | None = None) -> None:
    """Stop every node recorded in `directory` and undo what it changed on the machine.

    Keeps going past a failure (a stuck process must not leave bridges and sysctls behind) and
    reports them all at the end. Logs stay in each node's directory.
    """
    registry = registry or host.HostRegistry()
    state = read_state(directory) or {}
    if "nodes" not in state:
        return  # a control plane without nodes: nothing on the machine to undo
    problems: list[str] = []
    for node in recorded_nodes(directory):
        problems += _teardown_node(node)
        _forget(directory, node.name)
    registry.leave(Path(directory).resolve())
    update_state(directory, lambda s: s.pop("nodes", None))
    if problems:
        raise NodeError("; ".join(problems))


def _forget(directory: Path, name: str) -> None:
    def change(state: dict[str, Any]) -> None:
        state["nodes"] = [e for e in state.get("nodes", []) if e.get("name") != name]

    update_state(directory, change)


def _teardown_node(node: RealNode) -> list[str]:
    problems = []

    def attempt(step: str, action: Any, *args: Any) -> None:
        try:
            action(*args)
        except (ProcessError, host.HostError, NodeError, OSError) as error:
            problems.append(f"{node.name}: {step}: {error}")

    # The kubelet first: it would restart whatever else is stopped under it.
    if "kubelet" in node.processes:
        attempt("stopping the kubelet", terminate, node.processes["kubelet"], KUBELET_STOP_TIMEOUT)
    if "containerd" in node.processes:
        attempt("stopping containerd", terminate, node.processes["containerd"], RUNTIME_STOP_TIMEOUT)
    if "apiserver-relay" in node.processes:
        attempt("stopping the API server relay", terminate, node.processes["apiserver-relay"], RUNTIME_STOP_TIMEOUT)
    # Shims outlive containerd by design (their own session); they carry its socket in argv.
    attempt(
        "stopping shims",
        kill_unrecorded,
        host.processes_mentioning(str(node.containerd_socket), command_prefix="containerd-shim"),
    )
    # What runs in the node's cgroups is a container of this node.
    attempt("stopping containers", kill_unrecorded, host.cgroup_processes(node.cgroup))
    holder = node.processes.get("namespace")
    if holder is not None and alive(holder):
        # Only while the holder lives is the namespace id certainly ours (ids are reused).
        namespace = host.mount_namespace(holder.pid)
        if namespace is not None:
            attempt(
                "stopping processes left in the mount namespace",
                kill_unrecorded,
                host.processes_in_mount_namespace(namespace, exclude=[holder.pid]),
            )
        attempt("stopping the mount namespace", terminate, holder, RUNTIME_STOP_TIMEOUT)
    # Nothing of a node is mounted on the host; anything found there is a leak to undo.
    for point in host.host_mounts_under(node.directory):
        host.unmount_lazily(point)
        problems.append(f"{node.name}: {point} was mounted on the host (unmounted)")
    attempt("deleting the bridge", host.delete_bridge, node.bridge)
    left = host.remove_cgroup_root(node.cgroup)
    if left:
        problems.append(f"{node.name}: cgroups left: {', '.join(map(str, left))}")
    if holder is not None and alive(holder):
        # Its binds still cover the node's directories: removing files there would reach into them.
        problems.append(f"{node.name}: the mount namespace (pid {holder.pid}) survived; files left in place")
    else:
        attempt("removing runtime files", _remove_runtime_dirs, node)
    return problems


def _remove_runtime_dirs(node: RealNode) -> None:
    """Snapshots, checkpoints and pod volumes (tens of MB); the logs stay for reading."""
    if host.host_mounts_under(node.directory):
        raise NodeError(f"{node.directory} still has mounts; not removing files under it")
    for directory in (
        *(node.directory / sub for sub in ("containerd", "runc", "binds", "cni", "volume-plugins")),
        node.runtime_dir,
    ):
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(directory)
