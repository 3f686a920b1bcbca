"""The suite collects as one run: `make test` runs every directory under tests/ in one pytest.

Test directories have no ``__init__.py`` (pytest's default "prepend" import mode), so two test
modules with one basename collide at collection and stop the whole run before any test runs.
Stop 29's CI failed so (tests/e2e and tests/unit/controller both had test_watch_faults.py),
while every directory passed when run on its own.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_basename_is_unique() -> None:
    by_name: defaultdict[str, list[str]] = defaultdict(list)
    for module in sorted(TESTS.rglob("test_*.py")):
        by_name[module.name].append(str(module.relative_to(TESTS)))
    assert by_name, f"no test module found under {TESTS}"
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"test modules share a basename (pytest cannot collect both): {clashes}"
