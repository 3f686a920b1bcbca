"""Running ``fabriccap`` in-process for the reference pages, its output captured."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence

from fabriccap.cli import commands as cli


class CommandFailedError(RuntimeError):
    pass


def run_cli(argv: Sequence[str]) -> str:
    """What ``fabriccap ARGV`` prints on stdout; a non-zero exit is an error (the page would lie)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    if code != 0:
        raise CommandFailedError(f"fabriccap {' '.join(argv)} exited {code}: {err.getvalue().strip()}")
    return out.getvalue()
