"""docs/reference/how-it-decides.md: written by hand, its quoted output refreshed by ``make generate``.

The page quotes ``fabriccap evaluate`` on the example cluster. Each quote sits between a marker
comment saying what it quotes and ``<!-- end -->``; ``refresh`` rewrites what is between them
from a fresh run, and leaves every other line as written. So the stale-file test fails when the
example cluster or the evaluation changes what the page quotes, and ``make generate`` fixes it.

    <!-- run: evaluate -f examples/eks-cluster.json -o wide -->    the command and its output
    <!-- conditions: POOL [TYPE ...] -->                            a table of the pool's conditions
    <!-- status: POOL FIELD [FIELD ...] -->                         those status fields, as YAML
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from fabriccap_devtools.reference.markdown import code, fenced, table
from fabriccap_devtools.reference.running import run_cli

PAGE = "how-it-decides.md"
SOURCE = "docs/reference/how-it-decides.md (by hand) and examples/eks-cluster.json"
SNAPSHOT = "examples/eks-cluster.json"
BLOCK = re.compile(r"^<!-- (run|conditions|status): (.+?) -->\n(.*?)^<!-- end -->$", re.MULTILINE | re.DOTALL)


class BadMarkerError(ValueError):
    pass


@cache
def _objects(repo: Path) -> dict[str, dict[str, Any]]:
    """The example cluster's FabricCapabilities, by pool value."""
    with contextlib.chdir(repo):
        items = json.loads(run_cli(["evaluate", "-f", SNAPSHOT, "-o", "json"]))["items"]
    return {item["status"]["pool"]["value"]: item for item in items}


def _pool(repo: Path, pool: str) -> dict[str, Any]:
    objects = _objects(repo)
    if pool not in objects:
        raise BadMarkerError(f"{PAGE}: no FabricCapability for pool {pool!r} in {SNAPSHOT} (pools: {sorted(objects)})")
    return objects[pool]


def run_block(repo: Path, arguments: str) -> str:
    argv = shlex.split(arguments)
    with contextlib.chdir(repo):
        output = run_cli(argv)
    return fenced(f"$ fabriccap {arguments}\n{output}", "console")


def conditions_block(repo: Path, arguments: str) -> str:
    pool, *types = arguments.split()
    obj = _pool(repo, pool)
    conditions = obj["status"]["conditions"]
    known = [condition["type"] for condition in conditions]
    if unknown := [name for name in types if name not in known]:
        raise BadMarkerError(f"{PAGE}: pool {pool} has no condition {', '.join(unknown)}")
    shown = [condition for condition in conditions if not types or condition["type"] in types]
    rows = [
        [code(condition["type"]), code(condition["status"]), code(condition["reason"]), condition["message"]]
        for condition in shown
    ]
    return f"`{obj['metadata']['name']}`:\n\n" + table(["condition", "status", "reason", "message"], rows)


def status_block(repo: Path, arguments: str) -> str:
    pool, *fields = arguments.split()
    status = _pool(repo, pool)["status"]
    missing = [name for name in fields if name not in status]
    if not fields or missing:
        raise BadMarkerError(
            f"{PAGE}: status of pool {pool}: name fields that it has (missing: {missing or 'none given'})"
        )
    picked = {name: status[name] for name in fields}
    return fenced(yaml.safe_dump({"status": picked}, sort_keys=False, width=120), "yaml")


RENDERERS: dict[str, Callable[[Path, str], str]] = {
    "run": run_block,
    "conditions": conditions_block,
    "status": status_block,
}


def refresh(text: str, repo: Path) -> str:
    """The page with every quoted block rewritten from a fresh run; everything else as written."""
    _objects.cache_clear()  # each refresh reads the example cluster as it is now

    def replace(matched: re.Match[str]) -> str:
        kind, arguments = matched.group(1), matched.group(2).strip()
        return f"<!-- {kind}: {arguments} -->\n{RENDERERS[kind](repo, arguments)}<!-- end -->"

    return BLOCK.sub(replace, text)


def quoted_blocks(text: str) -> list[tuple[str, str, str]]:
    """(kind, arguments, content) of every quoted block of a page, in order."""
    return [(m.group(1), m.group(2).strip(), m.group(3)) for m in BLOCK.finditer(text)]
