"""Where the dev tooling keeps what it builds: outside the repository, shared by every checkout."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``FABRICCAP_CACHE_DIR``, or ``~/.cache/fabriccap`` (scripts/build-image.sh reads the same)."""
    configured = os.environ.get("FABRICCAP_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "fabriccap"
