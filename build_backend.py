"""The build backend: setuptools' own, except that only an editable install gets the dev tools.

The wheel (and so the operator image, which installs it) holds the product alone: ``fabriccap``
and its ``fabriccap`` command. The checkout's editable install (``pip install -e .``, run by
scripts/bootstrap.sh) adds ``fabriccap_devtools`` and its ``fabriccap-dev`` command: the test
bench, which needs the repository around it anyway.

Why a backend and not only setup.py: the PEP 517 hook that is called (build_wheel, build_sdist
or build_editable) is the one public, stable statement of what is being built, so the choice is
made here and setup.py only reads it. Every hook but the three editable ones is setuptools'
unchanged, so anything else (pip wheel, python -m build, pip install ., the Dockerfile) builds
the product alone: leaving the dev tools out is the default, and adding them needs this path.
pyproject.toml's ``backend-path`` puts this directory on sys.path for the build frontend.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (
    build_sdist,
    build_wheel,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_wheel,
)

# Read by setup.py, which setuptools runs in this same process for every hook.
WITH_DEVTOOLS = "FABRICCAP_BUILD_WITH_DEVTOOLS"

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]


@contextmanager
def _with_devtools() -> Iterator[None]:
    previous = os.environ.get(WITH_DEVTOOLS)
    os.environ[WITH_DEVTOOLS] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(WITH_DEVTOOLS, None)
        else:
            os.environ[WITH_DEVTOOLS] = previous


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    with _with_devtools():
        return list(_setuptools.get_requires_for_build_editable(config_settings))


def prepare_metadata_for_build_editable(metadata_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    with _with_devtools():
        return str(_setuptools.prepare_metadata_for_build_editable(metadata_directory, config_settings))


def build_editable(
    wheel_directory: str, config_settings: dict[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    with _with_devtools():
        return str(_setuptools.build_editable(wheel_directory, config_settings, metadata_directory))
