"""The Debian packages the project needs are declared once (scripts/debian-packages.txt) and
installed by their dpkg status, not by probing for one command each.

Round 2 lost four install lines in a merge and CI stayed green, because every machine the suite
ran on still had the packages from earlier work. Here the list is data, and on a machine that
``make test`` bootstrapped every package of it must be installed: a bootstrap that stops
installing one fails ``test_every_declared_package_is_installed`` on the first fresh machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "debian-packages.sh"

# The commands and files the suite and the dev tools use, and the package that must provide each.
PROVIDED_BY = {
    "promtool": "prometheus",
    "zsh": "zsh",
    "containerd": "containerd",
    "/usr/sbin/runc": "runc",
    "/usr/lib/cni/bridge": "containernetworking-plugins",
    "buildah": "buildah",
    "mmdebstrap": "mmdebstrap",
    "newuidmap": "uidmap",
    "gpg": "gpg",
    "/usr/share/keyrings/debian-archive-keyring.gpg": "debian-archive-keyring",
}


def _run(*args: str, path_prefix: Path | None = None) -> list[str]:
    env = dict(os.environ)
    if path_prefix is not None:
        env["PATH"] = f"{path_prefix}:{env['PATH']}"
    result = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60, check=True)
    return result.stdout.split()


def _stub_dpkg_query(directory: Path, status: str | None) -> Path:
    """A dpkg-query that reports every package with ``status`` (None: unknown to dpkg)."""
    stub = directory / "dpkg-query"
    body = f"echo -n '{status}'" if status is not None else "echo 'dpkg-query: no packages found' >&2; exit 1"
    stub.write_text(f"#!/bin/sh\n{body}\n")
    stub.chmod(0o755)
    return directory


def test_every_package_is_missing_on_a_machine_without_them(tmp_path: Path) -> None:
    declared = _run("list")
    assert set(PROVIDED_BY.values()) <= set(declared)
    assert _run("missing", path_prefix=_stub_dpkg_query(tmp_path, None)) == declared


def test_installed_packages_are_not_missing(tmp_path: Path) -> None:
    assert _run("missing", path_prefix=_stub_dpkg_query(tmp_path, "install ok installed")) == []


def test_a_removed_package_whose_files_remain_is_missing(tmp_path: Path) -> None:
    # `apt-get remove` leaves config files behind and dpkg-query still knows the package.
    assert _run("missing", path_prefix=_stub_dpkg_query(tmp_path, "deinstall ok config-files")) == _run("list")


def test_groups_select_the_packages_their_scripts_install() -> None:
    image, real_nodes = set(_run("list", "image")), set(_run("list", "realnodes"))
    assert {"buildah", "mmdebstrap", "uidmap", "runc"} <= image
    assert {"containerd", "runc", "containernetworking-plugins"} <= real_nodes
    assert "prometheus" not in image | real_nodes
    assert set(_run("list", "image", "realnodes")) == image | real_nodes


def _bootstrapped_here() -> bool:
    """``make test`` ran bootstrap --test as root here (CI always does)."""
    return os.environ.get("CI", "").lower() == "true" or os.geteuid() == 0


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian machine")
def test_every_declared_package_is_installed() -> None:
    if not _bootstrapped_here():
        pytest.skip("only root's bootstrap installs Debian packages")
    assert _run("missing") == [], "scripts/bootstrap.sh --test left these uninstalled"


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian machine")
@pytest.mark.parametrize(("needed", "package"), sorted(PROVIDED_BY.items()))
def test_each_command_the_suite_runs_comes_from_its_declared_package(needed: str, package: str) -> None:
    if not _bootstrapped_here():
        pytest.skip("only root's bootstrap installs Debian packages")
    found = needed if needed.startswith("/") else shutil.which(needed)
    assert found is not None and Path(found).exists(), f"{needed} is missing"
    resolved = str(Path(found).resolve())
    # Merged /usr: dpkg knows a file by the path its package shipped, /bin/zsh or /usr/bin/zsh.
    candidates = {resolved, resolved.removeprefix("/usr"), f"/usr{resolved}"}
    owners = {
        line.split(":", 1)[0]
        for candidate in sorted(candidates)
        for line in subprocess.run(
            ["dpkg-query", "-S", candidate], capture_output=True, text=True, timeout=60, check=False
        ).stdout.splitlines()
    }
    assert package in owners, f"{found} is not from {package} (dpkg-query -S: {sorted(owners)})"
