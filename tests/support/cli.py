"""The command line run in-process, as a test sees it: exit code, stdout, stderr."""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabriccap.cli.commands import main

Result = tuple[int, str, str]


def run(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> Result:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse usage errors
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def write_json(path: Path, document: Any) -> str:
    path.write_text(json.dumps(document, indent=2))
    return str(path)


def assert_one_line_error(result: Result, *fragments: str) -> str:
    code, out, err = result
    assert code == 2, result
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now: a cluster that cannot be reached."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_kubeconfig(directory: Path, server: str, token: str | None = None) -> Path:
    """A kubeconfig with one context, for ``server`` (a bearer ``token`` if given)."""
    path = directory / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": token} if token else {}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path
