"""`fabriccap evaluate -f` is a pure read of files: it never loads the HTTP client.

aiohttp costs start-up time and memory that snapshot evaluation does not need; only live mode
and the operator import ``fabriccap.kube.client``. Checked in a fresh interpreter, with the
import log Python itself writes (``-X importtime``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = REPO_ROOT / "examples" / "eks-cluster.json"


def imported_modules(*argv: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "fabriccap", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # "import time: self [us] | cumulative | imported package", one line per module imported.
    modules = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    return result, modules


def test_evaluate_from_a_file_never_imports_aiohttp() -> None:
    result, modules = imported_modules("evaluate", "-f", str(EXAMPLE), "-o", "name")
    assert result.returncode == 0, result.stderr
    assert "fabriccap.offline.snapshot" in modules, "the import log must list what was imported"
    assert not {module for module in modules if module.split(".")[0] in ("aiohttp", "kopf", "fabriccap_devtools")}
    assert "fabriccap.kube.client" not in modules
