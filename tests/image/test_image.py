"""The operator image itself, built by scripts/build-image.sh (`make image`) and read from its OCI archive.

The build is the one `make image` runs (base and layers cached under
``${FABRICCAP_CACHE_DIR:-~/.cache/fabriccap}/image``: ~1 minute cold, ~10 s warm), writing to a
temporary directory instead of dist/. The archive is then read with the standard library
(tests/image/ociimage.py): no container engine. It needs root (buildah and mmdebstrap); as
another user these tests skip, except under ``CI=true``, where they fail. Deselect them with
``-m "not image"``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import ociimage
from ociimage import Image

pytestmark = pytest.mark.image

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_IMAGE = REPO_ROOT / "scripts" / "build-image.sh"
REQUIREMENTS = REPO_ROOT / "requirements.txt"
REQUIREMENTS_DEV = REPO_ROOT / "requirements-dev.txt"
PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
IMAGE_NAME = "ghcr.io/fabriccap/fabriccap"
VENV = "/opt/fabriccap"
UID = GID = 65532
# A cold build: the base (mmdebstrap), the dependency layer, and syft if it was never built.
BUILD_TIMEOUT_SECONDS = 1800
RUN_TIMEOUT_SECONDS = 60


def _keep(path: str) -> bool:
    """The files whose content the checks read (the rest is kept as metadata only)."""
    return (
        path.endswith(("/METADATA", ".pyc"))
        or path == "/var/lib/dpkg/status"
        or path == f"{VENV}/bin/fabriccap"
        or (path.startswith(VENV + "/") and path.endswith(".py"))  # to verify hash-based .pyc
    )


@dataclass(frozen=True)
class Build:
    archive: Path
    printed_digest: str
    image: Image

    @property
    def digest_file(self) -> Path:
        return self.archive.with_name(self.archive.name + ".digest")

    @property
    def sbom(self) -> Path:
        return self.archive.with_name(self.archive.name + ".spdx.json")


def _ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="module")
def build(pytestconfig: pytest.Config) -> Iterator[Build]:
    if os.geteuid() != 0:
        message = "building the image needs root (buildah storage and chroot isolation, mmdebstrap)"
        if _ci():
            pytest.fail(f"{message}: under CI these tests must run (scripts/bootstrap.sh --test as root)")
        pytest.skip(message)
    with tempfile.TemporaryDirectory(prefix="fabriccap-image-") as out:
        capture = pytestconfig.getoption("capture")
        result = subprocess.run(
            ["bash", str(BUILD_IMAGE)],
            env={**os.environ, "FABRICCAP_IMAGE_OUT": out},
            stdout=subprocess.PIPE,
            # A cold build takes a minute or more: with -s its progress shows as it happens.
            stderr=None if capture == "no" else subprocess.PIPE,
            text=True,
            timeout=BUILD_TIMEOUT_SECONDS,
            check=False,
        )
        assert result.returncode == 0, f"scripts/build-image.sh failed ({result.returncode}):\n{result.stderr}"
        archive = Path(out) / f"fabriccap-{PROJECT['version']}.oci.tar"
        yield Build(archive, result.stdout.strip(), ociimage.load(archive, _keep))


# ---------------------------------------------------------------------------------------------
# The archive and its digest


def test_digest_file_names_the_manifest_containerd_imports(build: Build) -> None:
    """`ctr images import --base-name NAME --digests` records NAME@<this digest>; the chart takes it."""
    written = build.digest_file.read_text().strip()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", written)
    # ociimage.load checked that the manifest blob hashes to the digest index.json gives it.
    assert written == build.printed_digest == build.image.manifest_digest
    with tarfile.open(build.archive) as outer:
        index_file = outer.extractfile("index.json")
        assert index_file is not None
        index = json.load(index_file)
    (descriptor,) = index["manifests"]
    assert descriptor["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    ref = f"{IMAGE_NAME}:{PROJECT['version']}"
    assert descriptor["annotations"]["org.opencontainers.image.ref.name"] == ref


def test_image_is_for_linux_on_this_architecture(build: Build) -> None:
    machine = os.uname().machine
    assert build.image.config["os"] == "linux"
    assert build.image.config["architecture"] == {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


# ---------------------------------------------------------------------------------------------
# How it runs


def test_runs_as_the_numeric_non_root_user(build: Build) -> None:
    assert build.image.runtime["User"] == f"{UID}:{GID}"


def test_entrypoint_is_fabriccap_from_the_venv(build: Build) -> None:
    image = build.image
    assert image.runtime["Entrypoint"] == ["fabriccap"]
    assert image.runtime["Cmd"] == ["run", "--standalone"]
    # On the image's PATH, as the runtime looks it up.
    found = None
    for directory in image.env["PATH"].split(":"):
        candidate = ociimage.resolve(image.files, f"{directory}/fabriccap")
        if candidate and image.files[candidate].kind == "file" and image.files[candidate].mode & 0o111:
            found = candidate
            break
    assert found == f"{VENV}/bin/fabriccap"
    script = image.files[found].data or b""
    shebang = script.split(b"\n", 1)[0].decode()
    assert shebang == f"#!{VENV}/bin/python", shebang
    interpreter = ociimage.resolve(image.files, shebang[2:])
    assert interpreter is not None, f"{shebang[2:]} does not exist in the image"
    assert image.files[interpreter].kind == "file" and image.files[interpreter].mode & 0o111
    assert re.fullmatch(r"/usr/bin/python3\.\d+", interpreter), interpreter


@pytest.fixture(scope="module")
def rootfs(build: Build) -> Iterator[Path]:
    """The image's filesystem extracted (160 MB: removed afterwards), with the examples under /examples."""
    with tempfile.TemporaryDirectory(prefix="fabriccap-rootfs-") as directory:
        root = Path(directory)
        ociimage.extract(build.archive, root)
        shutil.copytree(REPO_ROOT / "examples", root / "examples")
        # "/" as a runtime makes it (a temporary directory is mode 700), and the pod's /tmp is an
        # emptyDir (tarfile's filter dropped the image's sticky and world-write bits).
        root.chmod(0o755)
        (root / "tmp").chmod(0o1777)
        yield root


def run_in_image(build: Build, rootfs: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``argv`` run chrooted into the image's filesystem, as its user, with its environment."""
    chroot = shutil.which("chroot")
    assert chroot is not None, "chroot (coreutils) is not on PATH"
    return subprocess.run(
        [chroot, f"--userspec={UID}:{GID}", str(rootfs), *argv],
        env=build.image.env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )


def test_image_runs_fabriccap_as_its_user(build: Build, rootfs: Path) -> None:
    """The entrypoint, as 65532: it starts, and gives the answer this checkout gives."""
    entrypoint = build.image.runtime["Entrypoint"]
    version = run_in_image(build, rootfs, *entrypoint, "--version")
    assert (version.returncode, version.stdout.strip()) == (0, f"fabriccap {PROJECT['version']}"), version.stderr
    evaluate = ["evaluate", "-f", "eks-cluster.json", "--config", "config.yaml", "-o", "json"]
    in_image = run_in_image(build, rootfs, *entrypoint, *(f"/examples/{a}" if "." in a else a for a in evaluate))
    assert in_image.returncode == 0, in_image.stderr
    here = subprocess.run(
        [sys.executable, "-m", "fabriccap", *evaluate],
        cwd=REPO_ROOT / "examples",
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    assert here.returncode == 0, here.stderr
    # Transition times are "now" in each run, which may fall in different seconds.
    assert without_transition_times(json.loads(in_image.stdout)) == without_transition_times(json.loads(here.stdout))


def without_transition_times(listed: dict[str, Any]) -> dict[str, Any]:
    for item in listed["items"]:
        for condition in item["status"]["conditions"]:
            condition.pop("lastTransitionTime")
    return listed


def test_image_leaves_the_dev_tools_out_of_its_command_line(build: Build, rootfs: Path) -> None:
    """The product alone: --help lists no command that cannot work here, ``demo`` says in one line
    how to run it from a checkout (exit 2), and neither ``controlplane`` nor ``fabriccap-dev`` exists."""
    entrypoint = build.image.runtime["Entrypoint"]
    helped = run_in_image(build, rootfs, *entrypoint, "--help")
    assert helped.returncode == 0, helped.stderr
    listed = helped.stdout.split("commands:", 1)[1]
    assert "evaluate" in listed and "run" in listed
    assert "demo" not in listed and "controlplane" not in listed
    demo = run_in_image(build, rootfs, *entrypoint, "demo")
    assert (demo.returncode, demo.stdout) == (2, "")
    assert len(demo.stderr.splitlines()) == 1 and "make demo" in demo.stderr, demo.stderr
    controlplane = run_in_image(build, rootfs, *entrypoint, "controlplane", "up")
    assert controlplane.returncode == 2 and "invalid choice: 'controlplane'" in controlplane.stderr


def test_image_holds_no_dev_module_go_source_or_demo_data(build: Build) -> None:
    files = build.image.files
    assert [path for path in files if "fabriccap_devtools" in path] == []
    assert f"{VENV}/bin/fabriccap-dev" not in files
    assert [path for path in files if path.endswith((".go", "/go.mod", "/go.sum"))] == []
    assert [path for path in files if path.endswith(("/eks-cluster.json", "/demo-cluster.json"))] == []
    # The package is code: modules, their bytecode and the typing marker, and the one data file
    # it ships (the instance catalog, setup.py's package_data), nothing else.
    package = f"{ociimage.site_packages(files, VENV)[0]}/fabriccap/"
    assert [
        path
        for path, entry in files.items()
        if path.startswith(package) and entry.kind != "dir" and not path.endswith((".py", ".pyc", "/py.typed"))
    ] == [f"{package}data/efa-catalog.json"]


def test_image_user_cannot_write_the_venv_nor_get_pip(build: Build, rootfs: Path) -> None:
    touch = run_in_image(build, rootfs, "/usr/bin/touch", f"{VENV}/written")
    assert touch.returncode != 0 and "Permission denied" in touch.stderr
    # Without ensurepip's wheels a new venv cannot bootstrap pip (Debian's venv says so).
    venv = run_in_image(build, rootfs, "/usr/bin/python3", "-m", "venv", "/tmp/venv")
    assert venv.returncode != 0, "python -m venv installed pip inside the image"
    assert "ensurepip" in venv.stdout + venv.stderr


# ---------------------------------------------------------------------------------------------
# What it holds


def test_no_compiler_assembler_or_linker(build: Build) -> None:
    assert ociimage.find_compilers(build.image.files) == []


def test_no_pip_in_any_form(build: Build) -> None:
    """No pip executable or module, and no wheel with which `python -m venv` would install one."""
    assert ociimage.find_pip(build.image.files) == []


def test_venv_holds_exactly_the_pinned_requirements_and_fabriccap(build: Build) -> None:
    files = build.image.files
    sites = ociimage.site_packages(files, VENV)
    assert len(sites) == 1, sites
    installed, other = ociimage.distributions(files, sites[0])
    assert other == []
    expected = ociimage.read_pins(REQUIREMENTS) | {PROJECT["name"]: PROJECT["version"]}
    assert installed == expected
    # The dev tools' dependencies (the local control plane's PKI) stay out: requirements-dev.txt is not installed.
    assert not set(installed) & set(ociimage.read_pins(REQUIREMENTS_DEV))
    assert "cryptography" not in installed


def test_venv_is_not_writable_by_the_image_user(build: Build) -> None:
    assert ociimage.find_writable(build.image.files, VENV, UID, GID) == []


def test_base_holds_exactly_the_locked_debian_packages(build: Build) -> None:
    architecture = build.image.config["architecture"]
    lock = ociimage.lock_pins(REPO_ROOT / "scripts" / f"base-packages-{architecture}.lock")
    assert ociimage.dpkg_packages(build.image.files) == lock


def test_no_stale_bytecode(build: Build) -> None:
    """Every .pyc is one Python uses: with a read-only root filesystem, a stale one would be
    recompiled in memory at every start. The build clamps mtimes (reproducible), so the
    venv's must be hash-based (the Dockerfile's ARG SOURCE_DATE_EPOCH)."""
    files = build.image.files
    assert ociimage.find_stale_bytecode(files) == []
    venv_bytecode = [p for p in files if p.startswith(VENV + "/") and p.endswith(".pyc")]
    assert len(venv_bytecode) > 100


# ---------------------------------------------------------------------------------------------
# The SBOM


def _sbom_packages(sbom: dict[str, object], purl_type: str) -> list[str]:
    found = []
    packages = sbom["packages"]
    assert isinstance(packages, list)
    for package in packages:
        purls = [ref["referenceLocator"] for ref in package.get("externalRefs", []) if ref["referenceType"] == "purl"]
        if any(purl.startswith(f"pkg:{purl_type}/") for purl in purls):
            found.append(f"{package['name']}={package['versionInfo']}")
    return sorted(found)


def test_sbom_lists_every_package_of_the_image(build: Build) -> None:
    sbom = json.loads(build.sbom.read_text())
    assert sbom["spdxVersion"] == "SPDX-2.3"
    creators = sbom["creationInfo"]["creators"]
    assert any(re.fullmatch(r"Tool: syft-\d+\.\d+\.\d+", c) for c in creators), creators
    assert sbom["name"] == IMAGE_NAME
    assert _sbom_packages(sbom, "deb") == ociimage.dpkg_packages(build.image.files)
    expected = ociimage.read_pins(REQUIREMENTS) | {PROJECT["name"]: PROJECT["version"]}
    assert _sbom_packages(sbom, "pypi") == sorted(f"{name}={version}" for name, version in expected.items())
