"""Go programs and files the tests take from the Go module proxy, cached outside the repository.

- ``build_go_tool``: the small Go harnesses under ``gitops/`` (``kstatus-check`` around
  sigs.k8s.io/cli-utils' kstatus, ``argocd-health-check`` around Argo CD's own Lua runner),
  built once into ``<cache>/bin/<name>-<hash of go.mod, go.sum and the sources>/``. The
  committed go.sum is complete (``-mod=readonly``), so a build never rewrites it.
- ``go_module_file``: one file of a released Go module (a third party's CRD YAML, say),
  downloaded with ``go mod download`` into Go's own module cache, which checks the module
  against the checksum database, and then checked against the sha256 pinned by the caller.

    python -m fabriccap_devtools.gotools gitops/kstatus-check gitops/argocd-health-check
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from fabriccap_devtools.cache import cache_root

BUILD_TIMEOUT_SECONDS = 1200  # Argo CD's util/lua pulls in ~1,400 packages: 4 min cold on 2 cores
DOWNLOAD_TIMEOUT_SECONDS = 600


class GoToolError(RuntimeError):
    """No Go toolchain, or a build or download failed."""


def go_binary() -> str:
    found = shutil.which("go")
    if found is None:
        raise GoToolError("no Go toolchain on PATH (Go >= 1.25; Debian: apt-get install golang-go)")
    return found


def _go_env() -> dict[str, str]:
    # GOFLAGS from the environment (-mod=mod, say) must not loosen the committed go.sum.
    return {**os.environ, "CGO_ENABLED": "0", "GOWORK": "off", "GOFLAGS": ""}


def source_digest(source: Path) -> str:
    """What the binary is built from: go.mod, go.sum and every .go file but the tests."""
    digest = hashlib.sha256()
    sources = sorted(path for path in source.glob("*.go") if not path.name.endswith("_test.go"))
    files = [source / "go.mod", source / "go.sum", *sources]
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def tool_path(source: Path) -> Path:
    name = source.name
    return cache_root() / "bin" / f"{name}-{source_digest(source)}" / name


def _go(
    cwd: Path, *arguments: str, timeout: float = BUILD_TIMEOUT_SECONDS, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``go <arguments>`` in ``cwd``, bounded; a failed run is the caller's to word."""
    try:
        return subprocess.run(
            [go_binary(), *arguments],
            cwd=cwd,
            env={**_go_env(), **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise GoToolError(f"go {' '.join(arguments)} in {cwd} took longer than {timeout:.0f}s") from None


def build_go_tool(source: Path) -> Path:
    """The binary of the Go main package in ``source`` (named after the directory), built once."""
    target = tool_path(source)
    if os.access(target, os.X_OK):
        return target
    go_binary()  # no toolchain: said before anything is made
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel sessions build it once
        if os.access(target, os.X_OK):
            return target
        print(f"building {source.name} from the Go module proxy into {target.parent} (once)", file=sys.stderr)
        with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
            output = Path(scratch) / source.name
            started = time.monotonic()
            result = _go(source, "build", "-trimpath", "-buildvcs=false", "-mod=readonly", "-o", str(output), ".")
            if result.returncode != 0:
                raise GoToolError(f"go build {source} failed:\n{result.stderr}")
            os.replace(output, target)
            print(f"built {target} in {time.monotonic() - started:.0f}s", file=sys.stderr)
    return target


def run_go_tests(source: Path) -> str:
    """Run the Go tests of the package in ``source``; their output, or GoToolError with it."""
    result = _go(source, "test", "-count=1", "-mod=readonly", "./...")
    if result.returncode != 0:
        raise GoToolError(f"go test {source} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def go_module_file(module: str, version: str, path: str, sha256: str) -> Path:
    """``path`` inside ``module@version`` from Go's module cache, downloaded if needed.

    ``go mod download`` verifies the module zip against go.sum's checksum database
    (GOSUMDB); the sha256 pins the one file the caller uses, so a different release or a
    retagged version fails here instead of testing against other YAML.
    """
    outside = Path(tempfile.gettempdir())  # outside any module: the download is not a dependency
    result = _go(
        outside,
        "mod",
        "download",
        "-json",
        f"{module}@{version}",
        timeout=DOWNLOAD_TIMEOUT_SECONDS,
        env={"GO111MODULE": "on"},
    )
    try:
        info = json.loads(result.stdout)
    except json.JSONDecodeError:
        info = {}
    if result.returncode != 0 or "Dir" not in info:
        reason = info.get("Error") or result.stderr.strip() or f"exit code {result.returncode}"
        raise GoToolError(f"go mod download {module}@{version}: {reason}")
    file = Path(info["Dir"]) / path
    if not file.is_file():
        raise GoToolError(f"{module}@{version} has no {path}")
    actual = hashlib.sha256(file.read_bytes()).hexdigest()
    if actual != sha256:
        raise GoToolError(f"{module}@{version}/{path}: sha256 {actual}, pinned {sha256}")
    return file


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fabriccap_devtools.gotools", description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", type=Path, metavar="DIR", help="directory of a Go main package")
    args = parser.parse_args(argv)
    try:
        for source in args.sources:
            print(build_go_tool(source.resolve()))
    except GoToolError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
