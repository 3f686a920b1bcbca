"""The command line on both sides of the product's boundary.

Where the dev tools are installed (this checkout), ``fabriccap demo`` is a listed command handed
over to them. Where they are not (the wheel, the image), ``--help`` and completion leave it out
and ``fabriccap demo`` says in one line how to run it, exit 2. The control plane is
``fabriccap-dev``'s, never ``fabriccap``'s. Absence is simulated in a fresh interpreter whose
sys.path holds the product and not the dev tools, as an installed wheel's would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabriccap.cli.commands import DEMO_FROM_A_CHECKOUT, build_parser, listed_commands

REPO_ROOT = Path(__file__).resolve().parents[3]
OPERATOR = REPO_ROOT / "operator"
EXAMPLE = REPO_ROOT / "examples" / "eks-cluster.json"
TIMEOUT_SECONDS = 60

# Drops the source root (the editable install's .pth puts it on sys.path, with the dev tools in
# it) and puts back the product alone, linked from a directory of its own.
_WITHOUT_DEVTOOLS = """
import os, sys
source, product_only = sys.argv[1], sys.argv[2]
sys.path[:] = [entry for entry in sys.path if os.path.realpath(entry or ".") != source]
sys.path.insert(0, product_only)
import importlib.util
assert importlib.util.find_spec("fabriccap_devtools") is None, "the dev tools are still importable"
from fabriccap.cli.commands import main
sys.exit(main(sys.argv[3:]))
"""


def run_without_devtools(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    product_only = tmp_path / "product-only"
    product_only.mkdir(exist_ok=True)
    link = product_only / "fabriccap"
    if not link.exists():
        link.symlink_to(OPERATOR / "fabriccap", target_is_directory=True)
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_DEVTOOLS, str(OPERATOR.resolve()), str(product_only), *argv],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "120"},
    )


def test_with_the_dev_tools_demo_is_listed() -> None:
    parser = build_parser()
    assert "demo" in listed_commands(parser)
    assert "fabriccap demo" in (parser.epilog or "")


def test_the_control_plane_is_not_a_product_command(capsys: pytest.CaptureFixture[str]) -> None:
    from fabriccap.cli.commands import main

    assert "controlplane" not in listed_commands(build_parser())
    with pytest.raises(SystemExit) as exit_:
        main(["controlplane", "up"])
    assert exit_.value.code == 2
    assert "invalid choice: 'controlplane'" in capsys.readouterr().err


def test_without_the_dev_tools_demo_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    for argv in (["demo"], ["demo", "--keep-running", "--dir", str(tmp_path / "cp")]):
        result = run_without_devtools(tmp_path, *argv)
        assert (result.returncode, result.stdout) == (2, ""), result.stderr
        assert result.stderr == f"error: {DEMO_FROM_A_CHECKOUT}\n"
        assert "make demo" in result.stderr
        assert not (tmp_path / "cp").exists()


def test_without_the_dev_tools_help_and_completion_leave_demo_out(tmp_path: Path) -> None:
    helped = run_without_devtools(tmp_path, "--help")
    assert helped.returncode == 0, helped.stderr
    listed = helped.stdout.split("commands:", 1)[1]
    assert "evaluate" in listed and "completion" in listed
    assert "demo" not in listed and "controlplane" not in listed
    completion = run_without_devtools(tmp_path, "completion", "bash")
    assert completion.returncode == 0, completion.stderr
    assert "config-schema" in completion.stdout
    assert "demo" not in completion.stdout
    # What still works there works the same: the one-shot evaluation.
    evaluated = run_without_devtools(tmp_path, "evaluate", "-f", str(EXAMPLE), "-o", "name")
    assert evaluated.returncode == 0, evaluated.stderr
    assert "fabriccapability.fabriccap.dev/efa-p5-training" in evaluated.stdout.splitlines()
