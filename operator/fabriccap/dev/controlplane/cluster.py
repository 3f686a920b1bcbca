"""A real kube-apiserver backed by etcd on 127.0.0.1, like controller-runtime's envtest.

There is no kubelet, scheduler or controller-manager: tests create the Nodes, Pods and
DaemonSets they need. Everything lives in one directory:

    DIR/kubeconfig            admin (CN=admin, O=system:masters)
    DIR/users/*.kubeconfig    users minted by `kubeconfig_for`
    DIR/bin/kubectl           the kubectl matching the apiserver
    DIR/pki/                  CA (with its key, to mint users later), serving cert, SA key
    DIR/etcd-data/            etcd's data, wiped at every start
    DIR/etcd.log, DIR/kube-apiserver.log
    DIR/state.json            PIDs and URLs, so `down(DIR)` works from another process

`LocalControlPlane` is for code that owns the control plane's lifetime (a pytest fixture);
`up`/`down` are for a shell, where the control plane must outlive the command that started it.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from fabriccap.dev.controlplane import pki
from fabriccap.dev.waiting import WaitTimeoutError, wait_until

if TYPE_CHECKING:
    # Imported lazily at run time: the package re-exports this module, and importing
    # `binaries` along with the package would make `python -m fabriccap.controlplane.binaries`
    # load that module twice.
    from fabriccap.dev.controlplane.binaries import Binaries

STATE_FILE = "state.json"
ADMIN_USER = "admin"
# system:masters bypasses RBAC entirely, which is what a test harness's admin needs.
ADMIN_GROUPS = ("system:masters",)
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
CONTEXT_NAME = "fabriccap-local"
SERVER_NAMES = ("etcd", "kube-apiserver")

DEFAULT_STARTUP_TIMEOUT = 120.0
DEFAULT_STOP_TIMEOUT = 10.0
# Ports are probed free, then released and handed to etcd/apiserver: another process can grab
# one in between. Rare, so a few fresh attempts are enough.
_PORT_ATTEMPTS = 3
_LOG_TAIL_LINES = 40


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

    @property
    def export_line(self) -> str:
        """The shell line that points kubectl (and the operator) at this control plane."""
        return f"export KUBECONFIG={self.kubeconfig}"


@dataclass(frozen=True)
class _ProcessRecord:
    """Enough to signal a process later without hitting a recycled PID."""

    name: str
    pid: int
    start_time: str | None

    @classmethod
    def of(cls, name: str, pid: int) -> _ProcessRecord:
        return cls(name=name, pid=pid, start_time=_proc_start_time(pid))


class _PortTakenError(ControlPlaneError):
    """A probed-free port was taken by someone else before our server bound it."""


class LocalControlPlane:
    """etcd + kube-apiserver owned by this Python process.

    `start(stop_at_exit=True)` registers an atexit fallback so an interrupted test session
    does not leave servers behind; `up()` passes False so they outlive the CLI.
    """

    def __init__(
        self,
        directory: Path,
        *,
        binaries: Binaries | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
    ) -> None:
        self.directory = Path(directory).resolve()
        self._binaries = binaries
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._pki = pki.PkiPaths(self.directory / "pki")
        self._processes: list[tuple[_ProcessRecord, subprocess.Popen[bytes]]] = []
        self._argv: dict[str, list[str]] = {}  # how each server was started, to restart it
        self._info: ControlPlaneInfo | None = None
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
        # A crashed earlier run may have left one of the two servers alive.
        down(self.directory)
        if self._binaries is None:
            from fabriccap.dev.controlplane.binaries import ensure_all

            self._binaries = ensure_all()
        binaries = self._binaries
        self.directory.mkdir(parents=True, exist_ok=True)
        pki.ensure_pki(self._pki)
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
        except BaseException:
            self.stop()
            raise
        self._info = info
        return info

    def stop(self) -> None:
        """Stop the apiserver, then etcd; safe to call twice."""
        atexit.unregister(self.stop)
        if self._owns_state:
            self._stop_recorded_extras()
        self._stop_processes()
        if self._owns_state:
            (self.directory / STATE_FILE).unlink(missing_ok=True)
            self._owns_state = False
        self._info = None

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
        etcd_client_port, etcd_peer_port, apiserver_port = _free_ports(3)
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
                "--authorization-mode=RBAC",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={self._pki.service_account_public_key}",
                f"--service-account-signing-key-file={self._pki.service_account_key}",
                # No controller-manager creates `default` ServiceAccounts, so this admission
                # plugin would reject every Pod a test creates.
                "--disable-admission-plugins=ServiceAccount",
                # The `kubernetes` Endpoints cannot hold a loopback address; without this the
                # apiserver logs a validation error every few seconds.
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                f"--cert-dir={self._pki.directory / 'apiserver-generated'}",
                # Every write (never a read), with who made it: tests prove from this log that
                # only the leader writes and that nothing writes Nodes, Pods or DaemonSets.
                f"--audit-policy-file={self._write_audit_policy()}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-maxsize=200",
                "--audit-log-maxbackup=1",
            ],
        )
        self._write_state(server, etcd_url)
        admin = pki.issue_client(self._pki, ADMIN_USER, ADMIN_GROUPS)
        _write_kubeconfig(self.kubeconfig, server, self._pki, admin)
        admin_context = _client_ssl_context(self._pki, admin)
        self._wait_until(
            lambda: _https_ok(f"{server}/readyz", admin_context), what=f"kube-apiserver /readyz at {server}"
        )
        # /readyz does not wait for the bootstrap controller that creates `default`; tests
        # that create objects there right away would race it.
        self._wait_until(
            lambda: _https_ok(f"{server}/api/v1/namespaces/default", admin_context),
            what="the default namespace",
        )
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
                        {"level": "None", "verbs": ["get", "list", "watch"]},
                        {"level": "Metadata"},
                    ],
                }
            )
        )
        return policy

    def audit_events(self) -> list[dict[str, Any]]:
        """Every write the API server has audited so far (one JSON object a line)."""
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
                _signal_group(record, signum)
                process.wait(self._stop_timeout)
                del self._processes[index]
                return
        raise ControlPlaneError(f"{name} is not running")

    def restart(self, name: str) -> None:
        """Start a killed server again, as it was (same ports, same data), and wait until it serves."""
        if any(record.name == name for record, _ in self._processes):
            raise ControlPlaneError(f"{name} is still running")
        self._spawn(name, self._argv[name], append_log=True)
        info = self.info
        if name == "etcd":
            self._wait_until(lambda: _etcd_healthy(info.etcd_url), what=f"etcd at {info.etcd_url}")
        else:
            admin = pki.issue_client(self._pki, ADMIN_USER, ADMIN_GROUPS)
            context = _client_ssl_context(self._pki, admin)
            self._wait_until(lambda: _https_ok(f"{info.server}/readyz", context), what="kube-apiserver /readyz")
        self._write_state(info.server, info.etcd_url)

    def _spawn(self, name: str, argv: list[str], append_log: bool = False) -> None:
        self._argv[name] = argv
        with (self.directory / f"{name}.log").open("ab" if append_log else "wb") as log:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                # Own session and process group: immune to the terminal's SIGHUP/Ctrl-C (the
                # CLI's `up` must outlive its shell), and stoppable as a group with killpg.
                start_new_session=True,
            )
        self._processes.append((_ProcessRecord.of(name, process.pid), process))

    def _write_state(self, server: str, etcd_url: str) -> None:
        state = {
            "server": server,
            "etcd_url": etcd_url,
            "kubeconfig": str(self.kubeconfig),
            "kubectl": str(self.kubectl),
            # Listed in stop order: the apiserver first, so it never sees etcd vanish.
            "processes": [
                {"name": r.name, "pid": r.pid, "start_time": r.start_time} for r, _ in reversed(self._processes)
            ],
        }
        self._owns_state = True
        temporary = self.directory / f".{STATE_FILE}.tmp"
        temporary.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(temporary, self.directory / STATE_FILE)

    def _wait_until(self, ready: Callable[[], bool], *, what: str) -> None:
        def probe() -> bool:
            self._raise_if_exited(what)
            return ready()

        try:
            wait_until(probe, what, timeout=self._startup_timeout, interval=0.2)
        except WaitTimeoutError:
            tails = "\n".join(
                f"--- last lines of {self.directory / f'{r.name}.log'}:\n{_tail(self.directory / f'{r.name}.log')}"
                for r, _ in self._processes
            )
            raise ControlPlaneError(
                f"timed out after {self._startup_timeout:.0f}s waiting for {what}\n{tails}"
            ) from None

    def _raise_if_exited(self, what: str) -> None:
        for record, process in self._processes:
            if process.poll() is not None:
                log = self.directory / f"{record.name}.log"
                tail = _tail(log)
                message = f"{record.name} exited with {process.returncode} while waiting for {what}"
                if "address already in use" in tail:
                    raise _PortTakenError(message)
                raise ControlPlaneError(f"{message}; last lines of {log}:\n{tail}")

    def _stop_recorded_extras(self) -> None:
        """Processes others recorded here with ``record_process`` go first (they use the servers)."""
        state = _read_state(self.directory / STATE_FILE)
        for entry in (state or {}).get("processes", []):
            if entry.get("name") not in SERVER_NAMES:
                _terminate(
                    _ProcessRecord(entry["name"], int(entry["pid"]), entry.get("start_time")), self._stop_timeout
                )

    def _stop_processes(self) -> None:
        # Newest first: the apiserver, then etcd.
        while self._processes:
            record, process = self._processes.pop()
            _terminate(record, self._stop_timeout, process)


def up(directory: Path, *, startup_timeout: float = DEFAULT_STARTUP_TIMEOUT) -> ControlPlaneInfo:
    """Start a control plane in `directory` that outlives this process; return once ready.

    Idempotent: if one already runs there, its info is returned unchanged.
    """
    existing = read_info(directory)
    if existing is not None:
        return existing
    return LocalControlPlane(directory, startup_timeout=startup_timeout).start(stop_at_exit=False)


def down(directory: Path, *, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
    """Stop the control plane recorded in `directory`, from any process. No-op if none."""
    state_path = Path(directory).resolve() / STATE_FILE
    state = _read_state(state_path)
    if state is None:
        return
    for entry in state.get("processes", []):
        _terminate(_ProcessRecord(entry["name"], int(entry["pid"]), entry.get("start_time")), timeout)
    state_path.unlink(missing_ok=True)


def read_info(directory: Path) -> ControlPlaneInfo | None:
    """The running control plane in `directory`, or None if none (or only part of one) runs."""
    directory = Path(directory).resolve()
    state = _read_state(directory / STATE_FILE)
    if state is None:
        return None
    records = [_ProcessRecord(e["name"], int(e["pid"]), e.get("start_time")) for e in state.get("processes", [])]
    servers = [r for r in records if r.name in SERVER_NAMES]
    if {r.name for r in servers} != set(SERVER_NAMES) or not all(_alive(r) for r in servers):
        return None
    return ControlPlaneInfo(
        directory=directory,
        server=state["server"],
        etcd_url=state["etcd_url"],
        kubeconfig=Path(state["kubeconfig"]),
        kubectl=Path(state["kubectl"]),
        pids={r.name: r.pid for r in records},
    )


def record_process(directory: Path, name: str, pid: int) -> None:
    """Have ``down(directory)`` stop another process too (the demo's operator, say).

    It is stopped before the servers, with the same guard against a recycled PID.
    """
    state_path = Path(directory).resolve() / STATE_FILE
    state = _read_state(state_path)
    if state is None:
        raise ControlPlaneError(f"no control plane runs in {directory}")
    record = _ProcessRecord.of(name, pid)
    others = [entry for entry in state.get("processes", []) if entry.get("name") != name]
    state["processes"] = [{"name": record.name, "pid": record.pid, "start_time": record.start_time}, *others]
    temporary = state_path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(temporary, state_path)


def stop_recorded(directory: Path, name: str, *, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
    """Stop one process recorded with ``record_process`` and forget it; no-op if unknown."""
    state_path = Path(directory).resolve() / STATE_FILE
    state = _read_state(state_path)
    if state is None:
        return
    remaining = []
    for entry in state.get("processes", []):
        if entry.get("name") == name:
            _terminate(_ProcessRecord(entry["name"], int(entry["pid"]), entry.get("start_time")), timeout)
        else:
            remaining.append(entry)
    state["processes"] = remaining
    temporary = state_path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(temporary, state_path)


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
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_kubeconfig(path, server, paths, pki.issue_client(paths, user, groups), user=user)
    return path


def _write_kubeconfig(
    path: Path, server: str, paths: pki.PkiPaths, credentials: pki.ClientCredentials, *, user: str = ADMIN_USER
) -> None:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    # JSON is valid YAML: kubectl, kubernetes_asyncio and kopf all read it, and embedding the
    # PEMs keeps the file self-contained (usable after copying it elsewhere).
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT_NAME,
                "cluster": {"server": server, "certificate-authority-data": b64(paths.ca_cert.read_bytes())},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(credentials.cert_pem),
                    "client-key-data": b64(credentials.key_pem),
                },
            }
        ],
        "contexts": [{"name": CONTEXT_NAME, "context": {"cluster": CONTEXT_NAME, "user": user}}],
        "current-context": CONTEXT_NAME,
    }
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(config, handle, indent=2)
        handle.write("\n")
    os.replace(temporary, path)


def _client_ssl_context(paths: pki.PkiPaths, credentials: pki.ClientCredentials) -> ssl.SSLContext:
    """An SSL context that trusts our CA and presents `credentials`."""
    context = ssl.create_default_context(cafile=str(paths.ca_cert))
    # ssl loads client certificates from files only.
    cert_file, key_file = paths.directory / "admin.crt", paths.directory / "admin.key"
    cert_file.write_bytes(credentials.cert_pem)
    pki.write_private(key_file, credentials.key_pem)
    context.load_cert_chain(cert_file, key_file)
    return context


def _https_ok(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _etcd_healthy(etcd_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{etcd_url}/health", timeout=5) as response:
            return bool(json.loads(response.read()).get("health") == "true")
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        # Hold all of them open together so the kernel hands out distinct ports.
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _read_state(path: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as error:
        raise ControlPlaneError(f"{path} is not valid JSON: {error}") from error
    if not isinstance(state, dict):
        raise ControlPlaneError(f"{path} does not hold a JSON object")
    return state


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log file)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


def _proc_start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (field 22 of /proc/PID/stat); None off Linux or if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    return stat.rsplit(")", 1)[1].split()[19]


def _proc_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _alive(record: _ProcessRecord) -> bool:
    # If we are the parent, reap it: otherwise a dead child lingers as a zombie that looks
    # alive. Only when the start time matches, so we never steal a recycled PID's exit status.
    if record.start_time is not None and _proc_start_time(record.pid) == record.start_time:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(record.pid, os.WNOHANG)
    if Path("/proc/self/stat").exists():
        state = _proc_state(record.pid)
        if state is None or state in ("Z", "X"):
            return False
        # A different start time means the PID was recycled by an unrelated process.
        return record.start_time is None or _proc_start_time(record.pid) == record.start_time
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(record: _ProcessRecord, signum: signal.Signals) -> None:
    # Each server leads its own process group (start_new_session), so its PID is the group id
    # and killpg also reaches anything it forked.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(record.pid, signum)


def _terminate(record: _ProcessRecord, timeout: float, process: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM the process group, SIGKILL it after `timeout`, and wait until it is gone."""
    if not _alive(record):
        return
    _signal_group(record, signal.SIGTERM)
    if _wait_gone(record, timeout, process):
        return
    _signal_group(record, signal.SIGKILL)
    if not _wait_gone(record, timeout, process):
        raise ControlPlaneError(f"{record.name} (pid {record.pid}) survived SIGKILL")


def _wait_gone(record: _ProcessRecord, timeout: float, process: subprocess.Popen[bytes] | None) -> bool:
    if process is not None:
        try:
            process.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout
    while _alive(record):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
