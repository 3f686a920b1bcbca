"""The product's boundary: the wheel holds the product alone; the checkout's editable install adds
the dev tools.

Both are built from a copy of exactly what the Dockerfile copies (pyproject.toml, setup.py,
build_backend.py, README.md, operator/ with the dev tools in it), through the build backend, as
pip builds them: isolated, with setuptools from PyPI (pip's cache). The wheel is what the image
installs; the editable install is the one scripts/bootstrap.sh makes, here into a scratch venv.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# What the Dockerfile's builder stage copies: the wheel is built from this and nothing else.
BUILD_INPUTS = ("pyproject.toml", "setup.py", "build_backend.py", "MANIFEST.in", "README.md")
BUILD_TIMEOUT_SECONDS = 600
DEVTOOLS = "fabriccap_devtools"
VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build inputs, copied: a build writes build/ and *.egg-info next to its sources."""
    copy = tmp_path_factory.mktemp("source")
    for name in BUILD_INPUTS:
        shutil.copy2(REPO_ROOT / name, copy / name)
    shutil.copytree(
        REPO_ROOT / "operator", copy / "operator", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    assert (copy / "operator" / DEVTOOLS / "images" / "go.mod").is_file(), "the copy must hold the dev tools"
    return copy


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
def wheel(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    out = tmp_path_factory.mktemp("wheel")
    _pip("wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(source))
    (built,) = out.glob("fabriccap-*.whl")
    with zipfile.ZipFile(built) as archive:
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
    assert top_level == {"fabriccap", f"fabriccap-{VERSION}.dist-info"}, top_level
    assert "fabriccap-dev" not in _entry_points(wheel)


def test_the_editable_install_provides_the_dev_tools_and_their_command(source: Path, tmp_path: Path) -> None:
    """The install scripts/bootstrap.sh makes (pip install -e), into an empty venv: the dev tools
    import from the checkout and ``fabriccap-dev`` is installed, pointing at them."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
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
