"""Find, or build once from the Go module proxy, the Kubernetes binaries and etcd.

kube-apiserver, etcd and kubectl serve every end-to-end test; kubelet, kube-controller-manager
and kube-scheduler are built only when real nodes are asked for.

The binaries are resolved the way controller-runtime's envtest does (so assets a developer
already has are reused): ``TEST_ASSET_KUBE_APISERVER`` / ``TEST_ASSET_ETCD`` /
``TEST_ASSET_KUBECTL`` first, then the ``KUBEBUILDER_ASSETS`` directory. Failing both, they
come from a cache directory outside the repository, keyed by version, and are built there the
first time. Release tarballs cannot be downloaded on our machines, but the Go module proxy is
reachable, and both projects are ordinary Go modules.

Run ``python -m fabriccap_devtools.controlplane.binaries`` to ensure the binaries and print their paths.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from fabriccap_devtools.cache import cache_root
from fabriccap_devtools.controlplane.images import ImageError, ensure_images

KUBERNETES_VERSION = "v1.35.4"
# The commit the v1.35.4 tag points at, as release builds stamp it (`kubectl version -o json`).
KUBERNETES_COMMIT = "7b8c6cf0edd376b3d7c2f255142977c7f93db258"
ETCD_VERSION = "v3.6.16"
# Bumped when the way the binaries are built changes, so the cache does not serve old ones:
# "stamped1" added the release version stamps (a bare `go build` reports v0.0.0-master, which
# `helm install` refuses against the chart's kubeVersion).
BUILD_RECIPE = "stamped1"
# k8s.io/kubernetes v1.35 declares `go 1.25.0`; the wrapper module must not ask for less.
KUBERNETES_WRAPPER_GO_VERSION = "1.25.0"
# etcd v3.6.16's go.mod declares `go 1.26.0`.
ETCD_WRAPPER_GO_VERSION = "1.26.0"

KUBE_APISERVER = "kube-apiserver"
ETCD = "etcd"
KUBECTL = "kubectl"
KUBELET = "kubelet"
KUBE_CONTROLLER_MANAGER = "kube-controller-manager"
KUBE_SCHEDULER = "kube-scheduler"
# What the control plane alone needs (envtest's set), and what real nodes add.
COMPONENTS: tuple[str, ...] = (KUBE_APISERVER, ETCD, KUBECTL)
NODE_COMPONENTS: tuple[str, ...] = (KUBELET, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER)
KUBERNETES_COMMANDS: tuple[str, ...] = (KUBE_APISERVER, KUBECTL, *NODE_COMPONENTS)

_ENV_BY_COMPONENT: Mapping[str, str] = {
    KUBE_APISERVER: "TEST_ASSET_KUBE_APISERVER",
    ETCD: "TEST_ASSET_ETCD",
    KUBECTL: "TEST_ASSET_KUBECTL",
    KUBELET: "TEST_ASSET_KUBELET",
    KUBE_CONTROLLER_MANAGER: "TEST_ASSET_KUBE_CONTROLLER_MANAGER",
    KUBE_SCHEDULER: "TEST_ASSET_KUBE_SCHEDULER",
}

# In k8s.io/kubernetes' go.mod every staging module is replaced by a path in its own tree,
# e.g. `k8s.io/api => ./staging/src/k8s.io/api`. Replaces only apply to the main module, so
# a wrapper module must repeat them, pointing at the published `v0.x.y` tags instead.
_STAGING_REPLACE = re.compile(r"^\s*(?:replace\s+)?(k8s\.io/[\w.\-/]+)\s*=>\s*\./staging/src/\1\s*$")


class BinaryError(RuntimeError):
    """A binary is missing, misconfigured, or could not be built."""


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    etcd: Path
    kubectl: Path


def cache_bin_dir() -> Path:
    return cache_root() / "bin" / f"k8s-{KUBERNETES_VERSION}-etcd-{ETCD_VERSION}-{BUILD_RECIPE}"


def version_ldflags() -> str:
    """The linker flags a Kubernetes release build stamps its version with (hack/lib/version.sh),
    for both places the commands read it from."""
    major, minor, _ = KUBERNETES_VERSION.lstrip("v").split(".")
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {package}.gitVersion={KUBERNETES_VERSION}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitCommit={KUBERNETES_COMMIT}",
            f"-X {package}.gitTreeState=clean",
            f"-X {package}.buildDate=1970-01-01T00:00:00Z",
        ]
    return " ".join(flags)


def locate(component: str) -> Path:
    """Where `component` is expected, by envtest's order; the path may not exist yet.

    An explicitly configured path that is missing is an error rather than a reason to fall
    back: silently using another binary than the one asked for hides version mistakes.
    """
    if component not in _ENV_BY_COMPONENT:
        raise ValueError(f"unknown component {component!r}; expected one of {tuple(_ENV_BY_COMPONENT)}")
    env_name = _ENV_BY_COMPONENT[component]
    explicit = os.environ.get(env_name)
    if explicit:
        path = Path(explicit).expanduser()
        if not _is_executable(path):
            raise BinaryError(f"{env_name}={explicit} is not an executable file")
        return path
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        path = Path(assets).expanduser() / component
        if not _is_executable(path):
            raise BinaryError(f"KUBEBUILDER_ASSETS={assets} has no executable {component}")
        return path
    return cache_bin_dir() / component


def ensure_binaries(components: Iterable[str] = COMPONENTS) -> dict[str, Path]:
    """Paths of the requested components, building the missing cached ones first."""
    wanted = list(dict.fromkeys(components))
    paths = {component: locate(component) for component in wanted}
    missing = [c for c, p in paths.items() if not _is_executable(p)]
    if missing:
        _build_into_cache(missing)
    return paths


@dataclass(frozen=True)
class NodeBinaries:
    """What real nodes add: the kubelet, and the controllers and scheduler that serve it."""

    kubelet: Path
    kube_controller_manager: Path
    kube_scheduler: Path


def ensure_all() -> Binaries:
    paths = ensure_binaries(COMPONENTS)
    return Binaries(kube_apiserver=paths[KUBE_APISERVER], etcd=paths[ETCD], kubectl=paths[KUBECTL])


def ensure_node_binaries() -> NodeBinaries:
    paths = ensure_binaries(NODE_COMPONENTS)
    return NodeBinaries(
        kubelet=paths[KUBELET],
        kube_controller_manager=paths[KUBE_CONTROLLER_MANAGER],
        kube_scheduler=paths[KUBE_SCHEDULER],
    )


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _progress(message: str) -> None:
    print(f"fabriccap-dev controlplane: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Serialise builders across processes (parallel pytest sessions, CI steps)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _progress(f"waiting for another process building into {lock_path.parent} ...")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_into_cache(missing: list[str]) -> None:
    target = cache_bin_dir()
    with _exclusive_lock(target.parent / f"{target.name}.lock"):
        # Another process may have finished the build while we waited for the lock.
        still_missing = [c for c in missing if not _is_executable(target / c)]
        if not still_missing:
            return
        go = shutil.which("go")
        if go is None:
            raise BinaryError(
                f"missing {', '.join(still_missing)} in {target} and no `go` toolchain on PATH "
                "to build them; set KUBEBUILDER_ASSETS or TEST_ASSET_* to existing binaries"
            )
        target.mkdir(parents=True, exist_ok=True)
        # Build next to the target so the final rename stays on one filesystem (atomic).
        with tempfile.TemporaryDirectory(prefix=".build-", dir=target.parent) as scratch:
            scratch_dir = Path(scratch)
            built: dict[str, Path] = {}
            wanted = [c for c in KUBERNETES_COMMANDS if c in still_missing]
            if wanted:
                built.update(_build_kubernetes(go, scratch_dir / "kubernetes", wanted))
            if ETCD in still_missing:
                built[ETCD] = _build_etcd(go, scratch_dir / "etcd")
            for component, path in built.items():
                os.replace(path, target / component)
        _progress(f"binaries ready in {target}")


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    # Static binaries, independent of the host's libc; a stray go.work must not take over.
    env.update({"CGO_ENABLED": "0", "GOWORK": "off"})
    return env


def _run_go(go: str, args: list[str], workdir: Path, log: Path, step: str) -> str:
    _progress(f"{step} ...")
    started = time.monotonic()
    with log.open("a") as log_handle:
        log_handle.write(f"$ go {' '.join(args)}\n")
        log_handle.flush()
        result = subprocess.run(
            [go, *args],
            cwd=workdir,
            env=_go_env(),
            stdout=subprocess.PIPE,
            stderr=log_handle,
            text=True,
            check=False,
        )
    if result.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise BinaryError(f"{step} failed (go {' '.join(args)}, exit {result.returncode}):\n{tail}")
    _progress(f"{step}: done in {time.monotonic() - started:.0f}s")
    return result.stdout


def _staging_version(kubernetes_version: str) -> str:
    """k8s.io/kubernetes v1.X.Y publishes its staging modules as v0.X.Y."""
    major, minor, patch = kubernetes_version.lstrip("v").split(".")
    if major != "1":
        raise BinaryError(f"unexpected Kubernetes version {kubernetes_version}")
    return f"v0.{minor}.{patch}"


def staging_replacements(kubernetes_gomod: str, kubernetes_version: str) -> list[tuple[str, str]]:
    """(module, version) pairs for every staging replace in k8s.io/kubernetes' go.mod."""
    version = _staging_version(kubernetes_version)
    modules = [m.group(1) for line in kubernetes_gomod.splitlines() if (m := _STAGING_REPLACE.match(line))]
    if not modules:
        raise BinaryError("found no ./staging replace lines in k8s.io/kubernetes' go.mod")
    return [(module, version) for module in modules]


def _build_kubernetes(go: str, workdir: Path, components: list[str]) -> dict[str, Path]:
    workdir.mkdir(parents=True)
    log = workdir / "build.log"
    module = f"k8s.io/kubernetes@{KUBERNETES_VERSION}"
    _progress(
        f"building {', '.join(components)} {KUBERNETES_VERSION} from the Go module proxy "
        f"(takes minutes the first time; log: {log})"
    )
    download = json.loads(_run_go(go, ["mod", "download", "-json", module], workdir, log, f"download {module}"))
    gomod = Path(download["GoMod"]).read_text()
    replaces = staging_replacements(gomod, KUBERNETES_VERSION)
    replace_block = "\n".join(f"\t{name} => {name} {version}" for name, version in replaces)
    (workdir / "go.mod").write_text(
        "module fabriccap.dev/controlplane-build\n\n"
        f"go {KUBERNETES_WRAPPER_GO_VERSION}\n\n"
        f"require k8s.io/kubernetes {KUBERNETES_VERSION}\n\n"
        f"replace (\n{replace_block}\n)\n"
    )
    # Importing the commands from a build-tagged file makes `go mod tidy` resolve (and pin in
    # go.sum) every dependency they need, without a package that could ever be compiled.
    imports = "".join(f'\t_ "k8s.io/kubernetes/cmd/{command}"\n' for command in KUBERNETES_COMMANDS)
    (workdir / "tools.go").write_text(f"//go:build tools\n\npackage tools\n\nimport (\n{imports})\n")
    _run_go(go, ["mod", "tidy"], workdir, log, "go mod tidy (kubernetes wrapper module)")
    # One `go build` for every command: the packages they share compile once.
    out = workdir / "out"
    out.mkdir()
    packages = [f"k8s.io/kubernetes/cmd/{component}" for component in components]
    _run_go(
        go,
        ["build", "-trimpath", "-ldflags", version_ldflags(), "-o", f"{out}/", *packages],
        workdir,
        log,
        f"go build {', '.join(components)}",
    )
    return {component: out / component for component in components}


def _build_etcd(go: str, workdir: Path) -> Path:
    workdir.mkdir(parents=True)
    log = workdir / "build.log"
    _progress(f"building etcd {ETCD_VERSION} from the Go module proxy (log: {log})")
    (workdir / "go.mod").write_text(
        "module fabriccap.dev/etcd-build\n\n"
        f"go {ETCD_WRAPPER_GO_VERSION}\n\n"
        f"require go.etcd.io/etcd/server/v3 {ETCD_VERSION}\n"
    )
    # In etcd 3.6 the server module's root package is `package main`: the etcd command itself.
    (workdir / "tools.go").write_text('//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n')
    _run_go(go, ["mod", "tidy"], workdir, log, "go mod tidy (etcd wrapper module)")
    output = workdir / "out" / ETCD
    _run_go(go, ["build", "-trimpath", "-o", str(output), "go.etcd.io/etcd/server/v3"], workdir, log, "go build etcd")
    return output


def main(argv: list[str] | None = None) -> int:
    """Ensure the binaries (building once if needed) and print `TEST_ASSET_*=path` lines.

    ``--nodes`` adds kubelet, kube-controller-manager and kube-scheduler (built together with
    the others when all are missing: one build compiles their shared packages once), and the
    node images (``images``), printed as ``IMAGE reference=tarball`` lines.
    """
    nodes = "--nodes" in (argv or [])
    wanted = (*COMPONENTS, *NODE_COMPONENTS) if nodes else COMPONENTS
    try:
        paths = ensure_binaries(wanted)
    except BinaryError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for component in wanted:
        print(f"{_ENV_BY_COMPONENT[component]}={paths[component]}")
    if nodes:
        try:
            images = ensure_images()
        except ImageError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        for reference, tarball in images.tarballs.items():
            print(f"IMAGE {reference}={tarball}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
