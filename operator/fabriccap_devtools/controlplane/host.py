"""What real nodes change on this machine, and how each change is undone.

Each node gets a bridge (its node IP lives there), a cgroup root in every hierarchy, and a
mount namespace whose private binds cover the host paths kubelet and containerd hard-code
(``NODE_BIND_TARGETS``). Everything they mount then exists only in that namespace and goes
with it.

Some changes are shared by every node on the machine, whichever control plane it belongs to
(two test sessions and a demo may run at once): the empty mount-point directories, and the
sysctls the kubelet sets at start (``setupKernelTunables``: ``vm.overcommit_memory=1``,
``kernel.panic=10``, ``kernel.panic_on_oops=1``; there is no setting that only warns). The
``HostRegistry`` counts who uses them: the first node in saves the sysctls and creates the
directories, the last one out restores and removes exactly those. It also hands out the node
slots (bridge ``fcap<slot>``, subnet ``198.18.<slot>.0/24``, cgroup ``/fabriccap-<slot>``) so
concurrent control planes never share one.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from fabriccap_devtools.controlplane.processes import ProcessRecord, alive
from fabriccap_devtools.controlplane.state import StateError, read_state

REGISTRY_DIR = Path("/run/fabriccap-nodes")  # also holds each node's sockets (slot_runtime_dir)
# Hard-coded host paths: the kubelet's root and device-plugin directory, the CNI result cache,
# pod and container logs, containerd's shim sockets, the CRI's netns files, and the test
# device plugin's hostPath (each node's own health files).
NODE_BIND_TARGETS: tuple[Path, ...] = tuple(
    Path(p)
    for p in (
        "/var/lib/kubelet",
        "/var/lib/cni",
        "/var/log/pods",
        "/var/log/containers",
        "/run/containerd",
        "/run/netns",
        "/var/lib/fabriccap-efa",
    )
)
# What setupKernelTunables may set; saved whether or not the kubelet changes them here.
KUBELET_SYSCTLS: tuple[str, ...] = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
# 198.18.0.0/15 (RFC 2544, benchmarking) is neither private nor routed: it never leaves the VM.
NODE_NETWORK = ipaddress.ip_network("198.18.0.0/16")
MAX_SLOT = 254
BRIDGE_PREFIX = "fcap"
CGROUP_PREFIX = "fabriccap-"
CNI_PLUGIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
RUNC = Path("/usr/sbin/runc")
COMMAND_TIMEOUT_SECONDS = 30


class HostError(RuntimeError):
    """The machine cannot host real nodes, or a change to it failed."""


def _progress(message: str) -> None:
    print(f"fabriccap-dev controlplane: {message}", file=sys.stderr, flush=True)


def run(argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        raise HostError(f"`{' '.join(argv)}` took longer than {COMMAND_TIMEOUT_SECONDS}s") from None
    if check and result.returncode != 0:
        raise HostError(f"`{' '.join(argv)}` failed: {(result.stderr or result.stdout).strip()}")
    return result


# ---------------------------------------------------------------------------------------------
# Prerequisites


def missing_prerequisites() -> list[str]:
    """What this machine lacks to run real nodes, one short phrase each; empty when ready."""
    missing = []
    if os.geteuid() != 0:
        missing.append(f"root (running as uid {os.geteuid()})")
    packages = {
        "containerd": "containerd",
        "ctr": "containerd",
        "containerd-shim-runc-v2": "containerd",
    }
    absent_packages = sorted({package for command, package in packages.items() if shutil.which(command) is None})
    if not os.access(RUNC, os.X_OK):
        absent_packages.append("runc")
    if not all((CNI_PLUGIN_DIR / plugin).is_file() for plugin in CNI_PLUGINS):
        absent_packages.append("containernetworking-plugins")
    if absent_packages:
        missing.append(f"the Debian packages {', '.join(absent_packages)} (scripts/bootstrap.sh --test installs them)")
    tools = [tool for tool in ("unshare", "nsenter", "mount", "umount", "ip") if shutil.which(tool) is None]
    if tools:
        missing.append(f"{', '.join(tools)} (util-linux, iproute2)")
    if not cgroup_hierarchies():
        missing.append("cgroup file systems under /sys/fs/cgroup")
    return missing


# ---------------------------------------------------------------------------------------------
# The registry of shared changes and node slots


@dataclass
class HostRegistry:
    """Machine-wide bookkeeping, in a tmpfs (/run) so a reboot, which undoes the changes too,
    also forgets it. Every operation holds an exclusive lock."""

    directory: Path = REGISTRY_DIR
    sysctl_root: Path = Path("/proc/sys")
    bind_targets: Sequence[Path] = NODE_BIND_TARGETS
    slot_in_use: Callable[[int], bool] = field(default=lambda slot: slot_taken_on_host(slot))
    owner_gone: Callable[[str], bool] = field(default=lambda owner: control_plane_gone(Path(owner)))

    @property
    def _file(self) -> Path:
        return self.directory / "registry.json"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        lock = self._acquire()
        try:
            registry = json.loads(self._file.read_text()) if self._file.exists() else {}
            registry.setdefault("members", {})
            yield registry
            if registry["members"] or registry.get("sysctls") or registry.get("created_dirs"):
                temporary = self._file.with_name(f".registry.{os.getpid()}.tmp")
                temporary.write_text(json.dumps(registry, indent=2) + "\n")
                os.replace(temporary, self._file)
            else:
                # Nothing is left to remember: leave no trace, the lock included (whoever
                # waits on it notices it was unlinked and starts over).
                self._file.unlink(missing_ok=True)
                (self.directory / "lock").unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    self.directory.rmdir()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()

    def _acquire(self) -> IO[str]:
        for _ in range(100):
            self.directory.mkdir(parents=True, exist_ok=True)
            lock = (self.directory / "lock").open("a")
            fcntl.flock(lock, fcntl.LOCK_EX)
            with contextlib.suppress(FileNotFoundError):
                if os.fstat(lock.fileno()).st_ino == (self.directory / "lock").stat().st_ino:
                    return lock
            lock.close()  # the last member removed this lock file while we waited for it
        raise HostError(f"could not lock {self.directory / 'lock'}")

    def join(self, owner: Path, count: int) -> list[int]:
        """Reserve `count` node slots for the control plane in `owner`; the first member on the
        machine saves the sysctls and creates the mount points."""
        with self._locked() as registry:
            members: dict[str, list[int]] = registry["members"]
            for stale in [o for o in members if o != str(owner) and self.owner_gone(o)]:
                _progress(f"forgetting the nodes of {stale} (its state.json is gone)")
                del members[stale]
            if not members and "sysctls" not in registry:
                # A snapshot left by a crashed last member is the machine's real original: keep it.
                registry["sysctls"] = {key: self._read_sysctl(key) for key in KUBELET_SYSCTLS}
            created: list[str] = registry.setdefault("created_dirs", [])
            for target in self.bind_targets:
                if not target.exists():
                    target.mkdir(parents=True)
                    created.append(str(target))
            taken = {slot for slots in members.values() for slot in slots}
            slots: list[int] = []
            for slot in range(1, MAX_SLOT + 1):
                if len(slots) == count:
                    break
                if slot not in taken and not self.slot_in_use(slot):
                    slots.append(slot)
            if len(slots) < count:
                raise HostError(f"no free node slot left on this machine ({len(taken)} in use)")
            members.setdefault(str(owner), []).extend(slots)
            return slots

    def leave(self, owner: Path) -> None:
        """Release the owner's slots; the last member out restores the sysctls and removes the
        mount points. A no-op when the machine has no registry (no node ever ran)."""
        if not self._file.exists():
            return
        with self._locked() as registry:
            members: dict[str, list[int]] = registry["members"]
            members.pop(str(owner), None)
            if members:
                return
            for key, value in (registry.pop("sysctls", None) or {}).items():
                if self._read_sysctl(key) != value:
                    (self.sysctl_root / key).write_text(value + "\n")
            for directory in reversed(registry.pop("created_dirs", None) or []):
                try:
                    Path(directory).rmdir()
                except FileNotFoundError:
                    pass
                except OSError as error:
                    _progress(f"left {directory} in place: {error.strerror}")

    def _read_sysctl(self, key: str) -> str:
        return (self.sysctl_root / key).read_text().strip()


def control_plane_gone(directory: Path) -> bool:
    """No state.json, or nothing it records still runs: a control plane killed without `down`.
    (Its bridges and cgroups, if any, stay until `down` runs on its directory; their slots are
    skipped meanwhile.)"""
    try:
        state = read_state(directory)
    except StateError:
        return False  # unreadable is not proof of death
    if state is None:
        return True
    entries = [*state.get("processes", [])]
    for node in state.get("nodes", []):
        entries += (node.get("processes") or {}).values()
    return not any(alive(ProcessRecord.from_json(entry)) for entry in entries)


def slot_taken_on_host(slot: int) -> bool:
    """A bridge or cgroup of this slot exists: left by someone, so not ours to reuse."""
    return link_exists(bridge_name(slot)) or any((h / cgroup_name(slot)).exists() for h in cgroup_hierarchies())


def slot_runtime_dir(slot: int) -> Path:
    """Short paths of a slot's node (its containerd socket): unix socket paths are limited."""
    return REGISTRY_DIR / f"node-{slot}"


def bridge_name(slot: int) -> str:
    return f"{BRIDGE_PREFIX}{slot}"


def cgroup_name(slot: int) -> str:
    return f"{CGROUP_PREFIX}{slot}"


def node_subnet(slot: int) -> ipaddress.IPv4Network:
    if not 1 <= slot <= MAX_SLOT:
        raise ValueError(f"node slot {slot} is outside 1..{MAX_SLOT}")
    return ipaddress.IPv4Network(f"{NODE_NETWORK.network_address + slot * 256}/24")


def node_ip(slot: int) -> str:
    """The node's own address on its bridge: the kubelet's InternalIP, the pods' gateway."""
    return str(node_subnet(slot).network_address + 1)


def every_node_ip() -> list[str]:
    """The address of every slot a node on this machine may get (the API server's certificate
    names them all: slots are handed out after it starts)."""
    return [node_ip(slot) for slot in range(1, MAX_SLOT + 1)]


# ---------------------------------------------------------------------------------------------
# Bridges


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def create_bridge(name: str, address: ipaddress.IPv4Interface) -> None:
    run(["ip", "link", "add", name, "type", "bridge"])
    run(["ip", "addr", "add", str(address), "dev", name])
    run(["ip", "link", "set", name, "up"])


def delete_bridge(name: str) -> None:
    """The bridge and any veth still attached (normally each goes with its pod's netns)."""
    if not link_exists(name):
        return
    ports = Path("/sys/class/net", name, "brif")
    for port in sorted(p.name for p in ports.iterdir()) if ports.is_dir() else []:
        run(["ip", "link", "del", port], check=False)
    run(["ip", "link", "del", name], check=False)


# ---------------------------------------------------------------------------------------------
# cgroups


def cgroup_hierarchies() -> list[Path]:
    """Every cgroup (v1) and cgroup2 mount under /sys/fs/cgroup: the node's root goes in each."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in mounts:
        fields = line.split()
        if len(fields) >= 3 and fields[2] in ("cgroup", "cgroup2") and fields[1].startswith("/sys/fs/cgroup"):
            found.append(Path(fields[1]))
    return found


def create_cgroup_root(name: str) -> None:
    for hierarchy in cgroup_hierarchies():
        path = hierarchy / name
        path.mkdir()
        # A cpuset cgroup holds no task until it has CPUs and memory nodes.
        for setting in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / setting).exists():
                (path / setting).write_text((hierarchy / setting).read_text())


def cgroup_processes(name: str) -> list[int]:
    pids: set[int] = set()
    for hierarchy in cgroup_hierarchies():
        for procs in (hierarchy / name).rglob("cgroup.procs") if (hierarchy / name).is_dir() else []:
            with contextlib.suppress(OSError):
                pids.update(int(line) for line in procs.read_text().split())
    return sorted(pids)


def remove_cgroup_root(name: str, timeout: float = 10.0) -> list[Path]:
    """rmdir the tree bottom-up in every hierarchy; returns what could not be removed in time
    (a cgroup stays busy for a moment after its last process died)."""
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for hierarchy in cgroup_hierarchies():
            root = hierarchy / name
            if not root.is_dir():
                continue
            for directory in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    directory.rmdir()
            with contextlib.suppress(OSError):
                root.rmdir()
            if root.exists():
                left.append(root)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


# ---------------------------------------------------------------------------------------------
# Mount namespaces and processes found by where they live


def mount_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def processes_in_mount_namespace(namespace: str, *, exclude: Sequence[int] = ()) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in exclude and mount_namespace(int(entry.name)) == namespace:
            found.append(int(entry.name))
    return found


def processes_mentioning(text: str, *, command_prefix: str = "") -> list[int]:
    """Processes whose command line contains `text` (and whose name starts with the prefix)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if text in cmdline and comm.startswith(command_prefix):
            found.append(int(entry.name))
    return found


def bind_in_namespace(holder: int, source: Path, target: Path) -> None:
    run(["nsenter", f"--target={holder}", "--mount", "--", "mount", "--bind", str(source), str(target)])


def host_mounts_under(directory: Path) -> list[Path]:
    """Mount points in this (the host's) namespace at or below `directory`, deepest first."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    prefix = str(directory).rstrip("/") + "/"
    points = [Path(line.split()[4]) for line in lines if len(line.split()) > 4]
    return sorted(
        (p for p in points if str(p) == str(directory) or str(p).startswith(prefix)), key=lambda p: -len(p.parts)
    )


def unmount_lazily(point: Path) -> None:
    run(["umount", "--lazy", str(point)], check=False)
