"""A real kube-apiserver backed by etcd on 127.0.0.1, like controller-runtime's envtest; with
real nodes on request.

Without nodes there is no kubelet, scheduler or controller-manager: tests create the Nodes,
Pods and DaemonSets they need. With ``nodes`` (root only) the control plane adds
kube-controller-manager and kube-scheduler and starts that many kubelets, each with its own
containerd (``nodes``, ``controllers``). Everything lives in one directory:

    DIR/kubeconfig            admin (CN=admin, O=system:masters)
    DIR/users/*.kubeconfig    users minted by `kubeconfig_for`
    DIR/bin/kubectl           the kubectl matching the apiserver
    DIR/pki/                  CA (with its key, to mint users later), serving cert, SA key
    DIR/components/           identities of kcm, the scheduler, the apiserver's kubelet client
    DIR/nodes/<name>/         each real node's files and logs
    DIR/etcd-data/            etcd's data, wiped at every start
    DIR/<server>.log          etcd, kube-apiserver, kube-controller-manager, kube-scheduler
    DIR/state.json            what runs and what changed, so `down(DIR)` works from another process

`LocalControlPlane` is for code that owns the control plane's lifetime (a pytest fixture);
`up`/`down` are for a shell, where the control plane must outlive the command that started it.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import json
import re
import shutil
import signal
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from fabriccap_devtools.controlplane import host, pki
from fabriccap_devtools.controlplane.access import client_ssl_context, https_ok, write_kubeconfig
from fabriccap_devtools.controlplane.controllers import (
    DEFAULT_CONTROLLER_OPTIONS,
    KUBE_CONTROLLER_MANAGER,
    KUBE_SCHEDULER,
    ControllerOptions,
    Identities,
    apiserver_node_flags,
    controller_manager_argv,
    issue_identities,
    scheduler_argv,
)
from fabriccap_devtools.controlplane.nodes import (
    DEFAULT_NODE_OPTIONS,
    ControlPlaneAccess,
    NodeError,
    NodeFleet,
    NodeOptions,
    NodeSpec,
    node_specs,
    teardown,
)
from fabriccap_devtools.controlplane.processes import (
    ProcessError,
    ProcessRecord,
    alive,
    free_ports,
    signal_group,
    spawn,
    tail,
    terminate,
)
from fabriccap_devtools.controlplane.state import STATE_FILE as STATE_FILE  # re-exported: callers name state.json by it
from fabriccap_devtools.controlplane.state import StateError, read_state, remove_state, update_state
from fabriccap_devtools.waiting import WaitTimeoutError, wait_until

if TYPE_CHECKING:
    # Imported lazily at run time: the package re-exports this module, and importing
    # `binaries` along with the package would make `python -m fabriccap.controlplane.binaries`
    # load that module twice.
    from fabriccap_devtools.controlplane.binaries import Binaries, NodeBinaries

ADMIN_USER = "admin"
# system:masters bypasses RBAC entirely, which is what a test harness's admin needs.
ADMIN_GROUPS = ("system:masters",)
# The reads (get, list, watch) of users in this group are audited too: a test that must prove
# what the operator reads, not only what it writes, runs it as such a user.
AUDITED_READS_GROUP = "fabriccap.dev:audited-reads"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVER_NAMES = ("etcd", "kube-apiserver")
CONTROL_PLANE_NAMES = (*SERVER_NAMES, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER)

DEFAULT_STARTUP_TIMEOUT = 120.0
DEFAULT_STOP_TIMEOUT = 10.0
# Ports are probed free, then released and handed to etcd/apiserver: another process can grab
# one in between. Rare, so a few fresh attempts are enough.
_PORT_ATTEMPTS = 3


class ControlPlaneError(RuntimeError):
    """The control plane could not be started, found, or stopped."""


@dataclass(frozen=True)
class ControlPlaneInfo:
    directory: Path
    server: str
    etcd_url: str
    kubeconfig: Path
    kubectl: Path
    pids: dict[str, int]
    nodes: tuple[str, ...] = ()

    @property
    def export_line(self) -> str:
        """The shell line that points kubectl (and the operator) at this control plane."""
        return f"export KUBECONFIG={self.kubeconfig}"


class _PortTakenError(ControlPlaneError):
    """A probed-free port was taken by someone else before our server bound it."""


class LocalControlPlane:
    """etcd + kube-apiserver (+ kcm, scheduler and real nodes) owned by this Python process.

    `start(stop_at_exit=True)` registers an atexit fallback so an interrupted test session
    does not leave servers (or nodes, bridges and changed sysctls) behind; `up()` passes
    False so they outlive the CLI.
    """

    def __init__(
        self,
        directory: Path,
        *,
        binaries: Binaries | None = None,
        nodes: int | Sequence[NodeSpec] = 0,
        node_options: NodeOptions = DEFAULT_NODE_OPTIONS,
        controller_options: ControllerOptions = DEFAULT_CONTROLLER_OPTIONS,
        node_binaries: NodeBinaries | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
        feature_gates: Sequence[str] = (),
        runtime_config: Sequence[str] = (),
    ) -> None:
        self.directory = Path(directory).resolve()
        # ``Name=true`` entries for kube-apiserver (and the scheduler and controller-manager
        # when nodes run): DRAExtendedResource for KEP-5004, alpha and off in v1.35.
        self._feature_gates = [_feature_gate(gate) for gate in feature_gates]
        # ``group/version=true`` entries for kube-apiserver's --runtime-config: an alpha API
        # version a gate alone does not serve (resource.k8s.io/v1alpha3 DeviceTaintRules in v1.35).
        self._runtime_config = [_runtime_config(entry) for entry in runtime_config]
        self._binaries = binaries
        self._node_specs = node_specs(nodes) if isinstance(nodes, int) else list(nodes)
        self._node_options = node_options
        self._controller_options = controller_options
        self._node_binaries = node_binaries
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._pki = pki.PkiPaths(self.directory / "pki")
        self._processes: list[tuple[ProcessRecord, subprocess.Popen[bytes]]] = []
        self._argv: dict[str, list[str]] = {}  # how each server was started, to restart it
        self._info: ControlPlaneInfo | None = None
        self._fleet: NodeFleet | None = None
        # Only the instance that wrote state.json may remove it: another may be running there.
        self._owns_state = False

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def kubectl(self) -> Path:
        return self.directory / "bin" / "kubectl"

    @property
    def info(self) -> ControlPlaneInfo:
        if self._info is None:
            raise ControlPlaneError("the control plane is not started")
        return self._info

    @property
    def server(self) -> str:
        return self.info.server

    @property
    def fleet(self) -> NodeFleet:
        """The real nodes (to stop and start a kubelet, find a node's files)."""
        if self._fleet is None:
            raise ControlPlaneError("this control plane runs no real nodes")
        return self._fleet

    def kubeconfig_for(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig authenticating as `user` in `groups` (see module-level `kubeconfig_for`)."""
        return _mint_kubeconfig(self.directory, self._pki, self.info.server, user, groups)

    def start(self, *, stop_at_exit: bool = True) -> ControlPlaneInfo:
        if self._processes:
            raise ControlPlaneError("already started")
        existing = read_info(self.directory)
        if existing is not None:
            raise ControlPlaneError(
                f"a control plane already runs in {self.directory} (pids {existing.pids}); stop it with down() first"
            )
        if self._node_specs:
            # Before anything starts or builds: one line saying what is missing.
            missing = host.missing_prerequisites()
            if missing:
                raise ControlPlaneError(f"real nodes need {'; '.join(missing)}")
        # A crashed earlier run may have left one of the servers, or nodes, alive.
        down(self.directory)
        if self._binaries is None:
            from fabriccap_devtools.controlplane.binaries import ensure_all

            self._binaries = ensure_all()
        if self._node_specs and self._node_binaries is None:
            from fabriccap_devtools.controlplane.binaries import ensure_node_binaries

            self._node_binaries = ensure_node_binaries()
        binaries = self._binaries
        self.directory.mkdir(parents=True, exist_ok=True)
        # With nodes, the serving certificate also names each node IP, where the node's relay
        # takes its pods' in-cluster clients to the apiserver (relay.py).
        pki.ensure_pki(self._pki, node_ips=host.every_node_ip() if self._node_specs else ())
        self._link_kubectl(binaries.kubectl)
        if stop_at_exit:
            atexit.register(self.stop)
        try:
            for attempt in range(1, _PORT_ATTEMPTS + 1):
                try:
                    info = self._start_servers(binaries)
                    break
                except _PortTakenError:
                    self._stop_processes()
                    if attempt == _PORT_ATTEMPTS:
                        raise
            if self._node_specs:
                info = self._start_nodes(info)
        except NodeError as error:
            self._stop_after_failure()
            raise ControlPlaneError(str(error)) from None
        except BaseException:
            self._stop_after_failure()
            raise
        self._info = info
        return info

    def stop(self) -> None:
        """Stop what others recorded, the nodes, then the servers; safe to call twice."""
        atexit.unregister(self.stop)
        problems = []
        if self._owns_state:
            self._stop_recorded_extras()
            try:
                teardown(self.directory)
            except NodeError as error:
                problems.append(str(error))
        self._fleet = None
        self._stop_processes()
        if self._owns_state:
            remove_state(self.directory)
            self._owns_state = False
        self._info = None
        if problems:
            raise ControlPlaneError("; ".join(problems))

    def _stop_after_failure(self) -> None:
        # The start's own error is the one to report; a cleanup problem must not replace it.
        with contextlib.suppress(ControlPlaneError):
            self.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _link_kubectl(self, kubectl: Path) -> None:
        self.kubectl.parent.mkdir(parents=True, exist_ok=True)
        self.kubectl.unlink(missing_ok=True)
        try:
            self.kubectl.symlink_to(kubectl.resolve())
        except OSError:
            shutil.copy2(kubectl, self.kubectl)

    def _start_servers(self, binaries: Binaries) -> ControlPlaneInfo:
        etcd_client_port, etcd_peer_port, apiserver_port = free_ports(3)
        etcd_url = f"http://127.0.0.1:{etcd_client_port}"
        peer_url = f"http://127.0.0.1:{etcd_peer_port}"
        server = f"https://127.0.0.1:{apiserver_port}"
        data_dir = self.directory / "etcd-data"
        # A fresh store each start: stale objects from an earlier run would make tests lie,
        # and etcd remembers its old peer URL, which no longer matches the new ports.
        shutil.rmtree(data_dir, ignore_errors=True)

        self._spawn(
            "etcd",
            [
                str(binaries.etcd),
                "--name=fabriccap",
                f"--data-dir={data_dir}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=fabriccap={peer_url}",
                "--initial-cluster-state=new",
                # Throwaway data: durability only costs test time (envtest does the same).
                "--unsafe-no-fsync=true",
            ],
        )
        self._write_state(server, etcd_url)
        self._wait_until(lambda: _etcd_healthy(etcd_url), what=f"etcd at {etcd_url}")

        if self._node_specs:
            identities = issue_identities(self.directory / "components", self._pki, server)
            access_flags = apiserver_node_flags(self._pki, identities)
        else:
            access_flags = [
                "--authorization-mode=RBAC",
                # No controller-manager creates `default` ServiceAccounts, so this admission
                # plugin would reject every Pod a test creates.
                "--disable-admission-plugins=ServiceAccount",
            ]
        self._spawn(
            "kube-apiserver",
            [
                str(binaries.kube_apiserver),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={apiserver_port}",
                f"--tls-cert-file={self._pki.serving_cert}",
                f"--tls-private-key-file={self._pki.serving_key}",
                f"--client-ca-file={self._pki.ca_cert}",
                *access_flags,
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={self._pki.service_account_public_key}",
                f"--service-account-signing-key-file={self._pki.service_account_key}",
                # The `kubernetes` Endpoints cannot hold a loopback address; without this the
                # apiserver logs a validation error every few seconds.
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                f"--cert-dir={self._pki.directory / 'apiserver-generated'}",
                # Every write (reads only of AUDITED_READS_GROUP), with who made it: tests prove
                # from this log that only the leader writes, that nothing writes Nodes, Pods or
                # DaemonSets, and what the operator reads.
                f"--audit-policy-file={self._write_audit_policy()}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-maxsize=200",
                "--audit-log-maxbackup=1",
                *self._feature_gate_flags(),
                *([f"--runtime-config={','.join(self._runtime_config)}"] if self._runtime_config else []),
            ],
        )
        self._write_state(server, etcd_url)
        admin = pki.issue_client(self._pki, ADMIN_USER, ADMIN_GROUPS)
        write_kubeconfig(self.kubeconfig, server, self._pki, admin, ADMIN_USER)
        admin_context = client_ssl_context(self._pki, admin, ADMIN_USER)
        self._wait_until(
            lambda: https_ok(f"{server}/readyz", admin_context), what=f"kube-apiserver /readyz at {server}"
        )
        # /readyz does not wait for the bootstrap controller that creates `default`; tests
        # that create objects there right away would race it.
        self._wait_until(
            lambda: https_ok(f"{server}/api/v1/namespaces/default", admin_context),
            what="the default namespace",
        )
        if self._node_specs:
            self._start_controllers(server, etcd_url, identities)
        return ControlPlaneInfo(
            directory=self.directory,
            server=server,
            etcd_url=etcd_url,
            kubeconfig=self.kubeconfig,
            kubectl=self.kubectl,
            pids={record.name: record.pid for record, _ in self._processes},
        )

    @property
    def audit_log(self) -> Path:
        return self.directory / "audit.log"

    def _write_audit_policy(self) -> Path:
        policy = self.directory / "audit-policy.yaml"
        policy.write_text(
            json.dumps(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived"],
                    "rules": [
                        {"level": "Metadata", "userGroups": [AUDITED_READS_GROUP]},
                        {"level": "None", "verbs": ["get", "list", "watch"]},
                        {"level": "Metadata"},
                    ],
                }
            )
        )
        return policy

    def audit_events(self) -> list[dict[str, Any]]:
        """Every write the API server has audited so far, and the reads of AUDITED_READS_GROUP
        (one JSON object a line)."""
        if not self.audit_log.exists():
            return []
        events = []
        for line in self.audit_log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
        return events

    def kill(self, name: str, signum: signal.Signals = signal.SIGKILL) -> None:
        """Signal one server (a fault test: etcd or kube-apiserver dies) and wait until it is gone."""
        for index, (record, process) in enumerate(self._processes):
            if record.name == name:
                signal_group(record, signum)
                process.wait(self._stop_timeout)
                del self._processes[index]
                return
        raise ControlPlaneError(f"{name} is not running")

    def restart(self, name: str) -> None:
        """Start a killed server again, as it was (same ports, same data), and wait until it serves."""
        if any(record.name == name for record, _ in self._processes):
            raise ControlPlaneError(f"{name} is still running")
        self._spawn(name, self._argv[name])
        info = self.info
        if name == "etcd":
            self._wait_until(lambda: _etcd_healthy(info.etcd_url), what=f"etcd at {info.etcd_url}")
        else:
            admin = pki.issue_client(self._pki, ADMIN_USER, ADMIN_GROUPS)
            context = client_ssl_context(self._pki, admin, ADMIN_USER)
            self._wait_until(lambda: https_ok(f"{info.server}/readyz", context), what="kube-apiserver /readyz")
        self._write_state(info.server, info.etcd_url)

    def _start_controllers(self, server: str, etcd_url: str, identities: Identities) -> None:
        assert self._node_binaries is not None
        kcm_port, scheduler_port = free_ports(2)
        components = self.directory / "components"
        self._spawn(
            KUBE_CONTROLLER_MANAGER,
            [
                *controller_manager_argv(
                    self._node_binaries.kube_controller_manager,
                    identities,
                    self._pki,
                    kcm_port,
                    self._controller_options,
                ),
                # Its self-signed serving certificate; the default directory is /var/run/kubernetes.
                f"--cert-dir={components / 'kcm-serving'}",
                *self._feature_gate_flags(),
            ],
        )
        self._spawn(
            KUBE_SCHEDULER,
            [
                *scheduler_argv(self._node_binaries.kube_scheduler, identities, scheduler_port),
                f"--cert-dir={components / 'scheduler-serving'}",
                *self._feature_gate_flags(),
            ],
        )
        self._write_state(server, etcd_url)
        # Their own self-signed certificates: only liveness is asked of them here.
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE

        def healthy(port: int) -> Callable[[], bool]:
            return lambda: https_ok(f"https://127.0.0.1:{port}/healthz", insecure)

        self._wait_until(healthy(kcm_port), what=f"{KUBE_CONTROLLER_MANAGER} /healthz")
        self._wait_until(healthy(scheduler_port), what=f"{KUBE_SCHEDULER} /healthz")

    def _start_nodes(self, info: ControlPlaneInfo) -> ControlPlaneInfo:
        from fabriccap_devtools.controlplane.images import ImageError, ensure_images

        assert self._node_binaries is not None
        try:
            images = ensure_images()
        except ImageError as error:
            raise NodeError(str(error)) from None
        admin = pki.issue_client(self._pki, ADMIN_USER, ADMIN_GROUPS)
        access = ControlPlaneAccess(
            directory=self.directory,
            server=info.server,
            pki=self._pki,
            admin=client_ssl_context(self._pki, admin, ADMIN_USER),
        )
        self._fleet = NodeFleet(
            access,
            self._node_specs,
            kubelet=self._node_binaries.kubelet,
            images=images,
            options=self._node_options,
        )
        self._fleet.start()
        return dataclasses.replace(info, nodes=tuple(spec.name for spec in self._node_specs))

    def _feature_gate_flags(self) -> list[str]:
        return [f"--feature-gates={','.join(self._feature_gates)}"] if self._feature_gates else []

    def _spawn(self, name: str, argv: list[str]) -> None:
        self._argv[name] = argv
        record, process = spawn(name, argv, self.directory / f"{name}.log", cwd=self.directory)
        self._processes.append((record, process))

    def _write_state(self, server: str, etcd_url: str) -> None:
        own = [record.to_json() for record, _ in reversed(self._processes)]

        def change(state: dict[str, Any]) -> None:
            # Others' processes (recorded with record_process) and the nodes stay as they are.
            others = [e for e in state.get("processes", []) if e.get("name") not in CONTROL_PLANE_NAMES]
            state.update(
                {
                    "server": server,
                    "etcd_url": etcd_url,
                    "kubeconfig": str(self.kubeconfig),
                    "kubectl": str(self.kubectl),
                    # Stop order: the newest first, so the apiserver never sees etcd vanish.
                    "processes": [*others, *own],
                }
            )

        update_state(self.directory, change, create=True)
        self._owns_state = True

    def _wait_until(self, ready: Callable[[], bool], *, what: str) -> None:
        def probe() -> bool:
            self._raise_if_exited(what)
            return ready()

        try:
            wait_until(probe, what, timeout=self._startup_timeout, interval=0.2)
        except WaitTimeoutError:
            tails = "\n".join(
                f"--- last lines of {self.directory / f'{r.name}.log'}:\n{tail(self.directory / f'{r.name}.log')}"
                for r, _ in self._processes
            )
            raise ControlPlaneError(
                f"timed out after {self._startup_timeout:.0f}s waiting for {what}\n{tails}"
            ) from None

    def _raise_if_exited(self, what: str) -> None:
        for record, process in self._processes:
            if process.poll() is not None:
                log = self.directory / f"{record.name}.log"
                log_tail = tail(log)
                message = f"{record.name} exited with {process.returncode} while waiting for {what}"
                if "address already in use" in log_tail:
                    raise _PortTakenError(message)
                raise ControlPlaneError(f"{message}; last lines of {log}:\n{log_tail}")

    def _stop_recorded_extras(self) -> None:
        """Processes others recorded here with ``record_process`` go first (they use the servers)."""
        for record in _recorded(self.directory, extras=True):
            _stop(record, self._stop_timeout)

    def _stop_processes(self) -> None:
        # Newest first: the scheduler, kcm, the apiserver, then etcd.
        while self._processes:
            record, process = self._processes.pop()
            _stop(record, self._stop_timeout, process)


def _feature_gate(gate: str) -> str:
    """``Name=true|false``, or ``Name`` meaning ``Name=true``; anything else is a usage error."""
    name, _, value = gate.partition("=")
    value = value or "true"
    if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", name) or value not in ("true", "false"):
        raise ControlPlaneError(f"feature gate {gate!r}: expected Name=true or Name=false")
    return f"{name}={value}"


def _runtime_config(entry: str) -> str:
    """``group/version=true|false`` (``group/version`` meaning ``=true``); anything else is a
    usage error."""
    api_version, _, value = entry.partition("=")
    value = value or "true"
    if not re.fullmatch(r"[a-z0-9.-]+/v[0-9]+((alpha|beta)[0-9]+)?", api_version) or value not in ("true", "false"):
        raise ControlPlaneError(f"runtime config {entry!r}: expected group/version=true or group/version=false")
    return f"{api_version}={value}"


def up(
    directory: Path,
    *,
    nodes: int = 0,
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
    feature_gates: Sequence[str] = (),
) -> ControlPlaneInfo:
    """Start a control plane in `directory` that outlives this process; return once ready.

    Idempotent: if one already runs there with as many nodes, its info is returned unchanged.
    """
    existing = read_info(directory)
    if existing is not None:
        if len(existing.nodes) != nodes:
            raise ControlPlaneError(
                f"a control plane with {len(existing.nodes)} node(s) already runs in {existing.directory}; "
                f"stop it first (fabriccap-dev controlplane down --dir {existing.directory})"
            )
        return existing
    return LocalControlPlane(
        directory, nodes=nodes, startup_timeout=startup_timeout, feature_gates=feature_gates
    ).start(stop_at_exit=False)


def down(directory: Path, *, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
    """Stop the control plane recorded in `directory`, from any process. No-op if none.

    Order: what others recorded (the demo's operator), the nodes (and what they changed on the
    machine), then the scheduler, kcm, the apiserver and etcd.
    """
    try:
        state = read_state(directory)
    except StateError as error:
        raise ControlPlaneError(str(error)) from None
    if state is None:
        return
    problems = []
    for record in _recorded(directory, extras=True):
        _stop(record, timeout)
    try:
        teardown(directory)
    except NodeError as error:
        problems.append(str(error))
    for record in _recorded(directory, extras=False):
        _stop(record, timeout)
    remove_state(directory)
    if problems:
        raise ControlPlaneError("; ".join(problems))


def read_info(directory: Path) -> ControlPlaneInfo | None:
    """The running control plane in `directory`, or None if none (or only part of one) runs."""
    directory = Path(directory).resolve()
    try:
        state = read_state(directory)
    except StateError as error:
        raise ControlPlaneError(str(error)) from None
    if state is None:
        return None
    records = [ProcessRecord.from_json(e) for e in state.get("processes", [])]
    servers = [r for r in records if r.name in SERVER_NAMES]
    if {r.name for r in servers} != set(SERVER_NAMES) or not all(alive(r) for r in servers):
        return None
    return ControlPlaneInfo(
        directory=directory,
        server=state["server"],
        etcd_url=state["etcd_url"],
        kubeconfig=Path(state["kubeconfig"]),
        kubectl=Path(state["kubectl"]),
        pids={r.name: r.pid for r in records},
        nodes=tuple(str(entry["name"]) for entry in state.get("nodes", [])),
    )


def record_process(directory: Path, name: str, pid: int) -> None:
    """Have ``down(directory)`` stop another process too (the demo's operator, say).

    It is stopped before the nodes and servers, with the same guard against a recycled PID.
    """
    if name in CONTROL_PLANE_NAMES:
        raise ControlPlaneError(f"{name!r} is the name of a control-plane server")
    record = ProcessRecord.of(name, pid)

    def change(state: dict[str, Any]) -> None:
        others = [entry for entry in state.get("processes", []) if entry.get("name") != name]
        state["processes"] = [record.to_json(), *others]

    if not update_state(directory, change):
        raise ControlPlaneError(f"no control plane runs in {directory}")


def stop_recorded(directory: Path, name: str, *, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
    """Stop one process recorded with ``record_process`` and forget it; no-op if unknown."""
    for record in _recorded(directory, extras=True):
        if record.name == name:
            _stop(record, timeout)

    def change(state: dict[str, Any]) -> None:
        state["processes"] = [entry for entry in state.get("processes", []) if entry.get("name") != name]

    update_state(directory, change)


def _recorded(directory: Path, *, extras: bool) -> list[ProcessRecord]:
    """The recorded processes in stop order: others' (``extras``) or the control plane's own."""
    state = read_state(directory) or {}
    records = [ProcessRecord.from_json(entry) for entry in state.get("processes", [])]
    return [r for r in records if (r.name not in CONTROL_PLANE_NAMES) == extras]


def _stop(record: ProcessRecord, timeout: float, process: subprocess.Popen[bytes] | None = None) -> None:
    try:
        terminate(record, timeout, process)
    except ProcessError as error:
        raise ControlPlaneError(str(error)) from None


def kubeconfig_for(directory: Path, user: str, groups: Sequence[str] = ()) -> Path:
    """Mint a kubeconfig for `user` in `groups` against the control plane in `directory`.

    The apiserver maps a client certificate's CN to the user name and each O to a group, so
    e.g. user="system:serviceaccount:ns:name" with groups=["system:serviceaccounts", ...]
    is indistinguishable, for RBAC, from that ServiceAccount's token.
    """
    info = read_info(directory)
    if info is None:
        raise ControlPlaneError(f"no control plane runs in {directory}")
    return _mint_kubeconfig(info.directory, pki.PkiPaths(info.directory / "pki"), info.server, user, groups)


def _mint_kubeconfig(directory: Path, paths: pki.PkiPaths, server: str, user: str, groups: Sequence[str]) -> Path:
    slug = re.sub(r"[^A-Za-z0-9.-]+", "_", user)[:60]
    digest = hashlib.sha256(json.dumps([user, sorted(groups)]).encode()).hexdigest()[:10]
    path = directory / "users" / f"{slug}-{digest}.kubeconfig"
    write_kubeconfig(path, server, paths, pki.issue_client(paths, user, groups), user)
    return path


def _etcd_healthy(etcd_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{etcd_url}/health", timeout=5) as response:
            return bool(json.loads(response.read()).get("health") == "true")
    except (urllib.error.URLError, OSError, ValueError):
        return False
