"""The product's boundary: the wheel holds the product alone; the checkout's editable install adds
the dev tools.

Both are built from a copy of exactly what the Dockerfile copies (pyproject.toml, setup.py,
build_backend.py, README.md, LICENSE, operator/ with the dev tools in it), through the build
backend. The wheel is built as the Dockerfile builds it: with the setuptools requirements-build.txt
pins (hash-checked, from PyPI or pip's cache), no isolated build env. The editable install is the
one scripts/bootstrap.sh makes (isolated, as pip does it), here into a scratch venv.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO_ROOT = Path(__file__).resolve().parents[2]
# What the Dockerfile's builder stage copies: the wheel is built from this and nothing else.
BUILD_INPUTS = ("pyproject.toml", "setup.py", "build_backend.py", "MANIFEST.in", "README.md", "LICENSE")
BUILD_REQUIREMENTS = REPO_ROOT / "requirements-build.txt"
BUILD_TIMEOUT_SECONDS = 600
DEVTOOLS = "fabriccap_devtools"
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
DIST_INFO = f"fabriccap-{VERSION}.dist-info"
# sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt, the canonical text.
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def _copy_build_inputs(destination: Path) -> Path:
    """The build inputs, copied: a build writes build/ and *.egg-info next to its sources."""
    destination.mkdir(exist_ok=True)
    for name in BUILD_INPUTS:
        shutil.copy2(REPO_ROOT / name, destination / name)
    shutil.copytree(
        REPO_ROOT / "operator", destination / "operator", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    assert (destination / "operator" / DEVTOOLS / "images" / "go.mod").is_file(), "the copy must hold the dev tools"
    return destination


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy_build_inputs(tmp_path_factory.mktemp("source"))


def _empty_venv(where: Path) -> Path:
    """A venv without pip: this interpreter's pip installs into it (pip --python)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    return where / "bin" / "python"


def _pinned_setuptools() -> str:
    """The version requirements-build.txt pins (the setuptools the image's wheel is built with)."""
    (line,) = [raw for raw in BUILD_REQUIREMENTS.read_text().splitlines() if raw.strip() and not raw.startswith("#")]
    requirement = Requirement(line.split(" --hash=")[0])
    ((specifier,),) = [list(requirement.specifier)]
    assert (requirement.name, specifier.operator) == ("setuptools", "=="), line
    return specifier.version


@pytest.fixture(scope="module")
def build_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Dockerfile's build env: requirements-build.txt, hash-checked, and nothing else."""
    python = _empty_venv(tmp_path_factory.mktemp("build-venv") / "venv")
    _pip(
        "--python",
        str(python),
        "install",
        "--no-deps",
        "--only-binary=:all:",
        "--require-hashes",
        "--quiet",
        "-r",
        str(BUILD_REQUIREMENTS),
    )
    return python


def _build_wheel(python: Path, source: Path, out: Path) -> Path:
    """`pip wheel` as the Dockerfile's `pip install --no-build-isolation` builds: with the
    setuptools of ``python``'s env, which must satisfy [build-system] requires."""
    _pip(
        "--python",
        str(python),
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--check-build-dependencies",
        "--quiet",
        "--wheel-dir",
        str(out),
        str(source),
    )
    (built,) = out.glob("fabriccap-*.whl")
    return built


def _pip(*args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SECONDS,
        check=False,
    )
    assert result.returncode == 0, f"pip {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"


@pytest.fixture(scope="module")
def wheel(source: Path, build_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    with zipfile.ZipFile(_build_wheel(build_python, source, tmp_path_factory.mktemp("wheel"))) as archive:
        yield archive


def _entry_points(wheel: zipfile.ZipFile) -> str:
    (name,) = [name for name in wheel.namelist() if name.endswith(".dist-info/entry_points.txt")]
    return wheel.read(name).decode()


def test_the_wheel_holds_the_product(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    product = (
        "fabriccap/__main__.py",
        "fabriccap/cli/commands.py",
        "fabriccap/core/evaluate.py",
        "fabriccap/py.typed",
        "fabriccap/data/efa-catalog.json",  # the instance catalog, package data
    )
    assert [module for module in product if module not in names] == []
    assert "fabriccap = fabriccap.cli.commands:main" in _entry_points(wheel)
    assert "kubectl-fabriccap = fabriccap.cli.commands:kubectl_main" in _entry_points(wheel)


def test_the_wheel_holds_no_dev_tools_go_source_or_demo_data(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    assert [name for name in names if name.split("/")[0] == DEVTOOLS] == []
    assert [name for name in names if name.endswith((".go", "/go.mod", "/go.sum"))] == []
    # The demo's data is the example cluster and the CRD; the product carries neither. Its one
    # data file is the instance catalog it reads at start (fabriccap.catalogfile).
    assert [name for name in names if name.endswith((".json", ".yaml", ".yml"))] == ["fabriccap/data/efa-catalog.json"]
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"fabriccap", DIST_INFO}, top_level
    assert "fabriccap-dev" not in _entry_points(wheel)


def test_the_editable_install_provides_the_dev_tools_and_their_command(source: Path, tmp_path: Path) -> None:
    """The install scripts/bootstrap.sh makes (pip install -e), into an empty venv: the dev tools
    import from the checkout and ``fabriccap-dev`` is installed, pointing at them."""
    venv = tmp_path / "venv"
    python = _empty_venv(venv)
    _pip("--python", str(python), "install", "--no-deps", "--quiet", "--editable", str(source))
    found = subprocess.run(
        [str(python), "-c", f"import {DEVTOOLS}.checkout as c; print(c.REPO)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (found.returncode, found.stdout.strip()) == (0, str(source)), found.stderr
    script = (venv / "bin" / "fabriccap-dev").read_text()
    assert "from fabriccap_devtools.cli import main" in script
    assert (venv / "bin" / "fabriccap").is_file()


def test_the_wheel_names_the_pinned_setuptools(wheel: zipfile.ZipFile) -> None:
    """The wheel's metadata records the setuptools that built it, and the image holds that file:
    built with requirements-build.txt's pin, never PyPI's newest of the day (hostile review
    64-boundary F1: the same commit and lock must give the same image digest)."""
    generator = [
        line for line in wheel.read(f"{DIST_INFO}/WHEEL").decode().splitlines() if line.startswith("Generator:")
    ]
    assert generator == [f"Generator: setuptools ({_pinned_setuptools()})"]


def test_the_pinned_setuptools_is_within_the_declared_build_requirement() -> None:
    (declared,) = [Requirement(line) for line in PYPROJECT["build-system"]["requires"]]
    assert declared.name == "setuptools"
    assert declared.specifier.contains(_pinned_setuptools()), (declared, _pinned_setuptools())


def test_the_declared_setuptools_floor_builds_the_project(source: Path, tmp_path: Path) -> None:
    """[build-system] requires' lowest setuptools builds the wheel: a constraints file, a distro
    packager or --no-build-isolation may pick it. 68 to 76 refused the PEP 639 license string
    (hostile review 64-boundary F2)."""
    (declared,) = [Requirement(line) for line in PYPROJECT["build-system"]["requires"]]
    ((floor,),) = [[s.version for s in declared.specifier if s.operator == ">="]]
    python = _empty_venv(tmp_path / "venv")
    _pip("--python", str(python), "install", "--no-deps", "--only-binary=:all:", "--quiet", f"setuptools=={floor}")
    source_copy = _copy_build_inputs(tmp_path / "source")
    built = _build_wheel(python, source_copy, tmp_path / "wheel")
    with zipfile.ZipFile(built) as archive:
        assert "fabriccap/cli/commands.py" in archive.namelist()


def test_the_wheel_carries_the_license_text(wheel: zipfile.ZipFile) -> None:
    """Apache-2.0 §4(a): recipients get a copy of the license, in the wheel and so in the image
    (hostile review 64-boundary F6)."""
    assert wheel.read(f"{DIST_INFO}/licenses/LICENSE") == (REPO_ROOT / "LICENSE").read_bytes()
    metadata = wheel.read(f"{DIST_INFO}/METADATA").decode().splitlines()
    assert "License-Expression: Apache-2.0" in metadata
    assert "License-File: LICENSE" in metadata


def test_the_license_is_the_apache_2_text() -> None:
    """The unmodified text apache.org serves (https://www.apache.org/licenses/LICENSE-2.0.txt)."""
    text = (REPO_ROOT / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_SHA256


def test_the_sdist_holds_the_license_and_its_editable_install_no_dev_command(
    build_python: Path, tmp_path: Path
) -> None:
    """The sdist holds the product alone; an editable install of it, unpacked, installs no
    ``fabriccap-dev`` whose package is not there (hostile review 64-boundary F5)."""
    tree = _copy_build_inputs(tmp_path / "source")
    out = tmp_path / "sdist"
    out.mkdir()
    built = subprocess.run(
        [str(build_python), "-c", f"import build_backend; print(build_backend.build_sdist({str(out)!r}))"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SECONDS,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (sdist,) = out.glob("fabriccap-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
        archive.extractall(tmp_path / "unpacked", filter="data")
    root = f"fabriccap-{VERSION}"
    assert f"{root}/LICENSE" in names
    assert [name for name in names if f"/{DEVTOOLS}/" in name] == []
    python = _empty_venv(tmp_path / "venv")
    _pip("--python", str(python), "install", "--no-deps", "--quiet", "--editable", str(tmp_path / "unpacked" / root))
    scripts = sorted(path.name for path in (tmp_path / "venv" / "bin").glob("*fabriccap*"))
    assert scripts == ["fabriccap", "kubectl-fabriccap"]
