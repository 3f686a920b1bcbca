"""The container images real nodes run, built without a registry or a container engine.

The Go module in ``fabriccap_devtools/images/`` (read from the checkout, like the rest of the dev
tools; never in the wheel) holds small static programs: ``pause`` (the pod
sandbox), ``sleeper`` (a test workload that prints what Allocate gave it), ``efa-device-plugin``
(the test EFA device plugin, on the kubelet's own v1beta1 API) and ``mkimage``, which packs a
binary into a one-layer OCI image with go-containerregistry (pinned in go.mod). Nothing can
be pulled on these machines, so the kubelet must never try: pods use ``imagePullPolicy:
Never`` and every node imports the tarballs before its first pod.

Built once into ``<cache>/images/<hash of go.mod, go.sum and every source file>/``; the committed
go.sum is complete (``-mod=readonly``), so a build never rewrites it.
``python -m fabriccap_devtools.controlplane.binaries --nodes`` builds them with the node binaries.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from fabriccap_devtools.cache import cache_root

BUILD_TIMEOUT_SECONDS = 900
# Fully qualified: a bare `pause:3.10` is normalised to docker.io/library/pause:3.10.
PAUSE_IMAGE = "fabriccap.local/pause:3.10"
SLEEPER_IMAGE = "fabriccap.local/sleeper:v1"
# The chart's appVersion, marked as ours.
EFA_PLUGIN_IMAGE = "fabriccap.local/aws-efa-k8s-device-plugin:v0.5.13-fabriccap"
# image reference -> (program, its path inside the image)
IMAGES: dict[str, tuple[str, str]] = {
    PAUSE_IMAGE: ("pause", "/pause"),
    SLEEPER_IMAGE: ("sleeper", "/sleeper"),
    EFA_PLUGIN_IMAGE: ("efa-device-plugin", "/efa-device-plugin"),
}


class ImageError(RuntimeError):
    """No Go toolchain, or the programs or images could not be built."""


@dataclass(frozen=True)
class NodeImages:
    """OCI tarballs (docker-save format, as ``ctr images import`` takes them), by reference."""

    tarballs: dict[str, Path]


def source_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "images"


def source_files(source: Path) -> list[Path]:
    return sorted(p for p in source.rglob("*") if p.is_file() and (p.suffix == ".go" or p.name in ("go.mod", "go.sum")))


def source_digest(source: Path) -> str:
    digest = hashlib.sha256()
    for path in source_files(source):
        digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def images_dir(source: Path | None = None) -> Path:
    return cache_root() / "images" / source_digest(source or source_dir())


def _expected(directory: Path) -> dict[str, Path]:
    return {reference: directory / f"{program}.tar" for reference, (program, _) in IMAGES.items()}


def ensure_images(source: Path | None = None) -> NodeImages:
    """The node images, built first if this version of the sources has none in the cache."""
    source = source or source_dir()
    target = images_dir(source)
    tarballs = _expected(target)
    if all(p.is_file() for p in tarballs.values()):
        return NodeImages(tarballs)
    go = shutil.which("go")
    if go is None:
        raise ImageError("building the node images needs a Go toolchain on PATH (Go >= 1.25)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f"{target.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel sessions build once
        if all(p.is_file() for p in tarballs.values()):
            return NodeImages(tarballs)
        print(f"fabriccap-dev controlplane: building the node images into {target} (once)", file=sys.stderr, flush=True)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f".{target.name}-", dir=target.parent) as scratch:
            scratch_dir = Path(scratch)
            binaries = scratch_dir / "bin"
            _go(
                go, ["build", "-trimpath", "-mod=readonly", "-ldflags=-s -w", "-o", f"{binaries}/", "./cmd/..."], source
            )
            built = scratch_dir / "images"
            built.mkdir()
            for reference, (program, path_in_image) in IMAGES.items():
                _run(
                    [
                        str(binaries / "mkimage"),
                        "-o",
                        str(built / f"{program}.tar"),
                        "-tag",
                        reference,
                        "-file",
                        f"{binaries / program}:{path_in_image}",
                        "-entrypoint",
                        path_in_image,
                    ],
                    source,
                )
            for program in ("efa-device-plugin", "sleeper", "pause"):
                shutil.copy2(binaries / program, built / program)  # handy outside a container too
            # The directory appears complete or not at all.
            os.replace(built, target)
        print(
            f"fabriccap-dev controlplane: node images ready in {time.monotonic() - started:.0f}s",
            file=sys.stderr,
            flush=True,
        )
    return NodeImages(tarballs)


def _go(go: str, args: list[str], source: Path) -> None:
    # GOFLAGS from the environment (-mod=mod, say) must not loosen the committed go.sum.
    env = {**os.environ, "CGO_ENABLED": "0", "GOWORK": "off", "GOFLAGS": "-buildvcs=false"}
    _run([go, *args], source, env)


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    try:
        result = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        raise ImageError(f"`{' '.join(argv)}` took longer than {BUILD_TIMEOUT_SECONDS}s") from None
    if result.returncode != 0:
        raise ImageError(f"`{' '.join(argv)}` failed:\n{result.stderr.strip()}")
