"""What ``evaluate`` and ``explain`` print of text that objects carry: shown escaped, never
obeyed by the terminal (reliability round 3, O17 and S7; issue 27 item 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabriccap.offline.explain import workload_lines
from fabriccap.offline.render import align
from fabriccap_devtools.world import owner_reference, workload_pod
from support.builders import daemon_set, kube_list, node, plugin_pods
from support.cli import run, write_json

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"
FORGED = "\n2026-12-01 23:59:59,000 INFO fabriccap.controller.leader: released the lease"


def no_control(text: str) -> bool:
    return not any((ord(character) < 0x20 and character != "\n") or 0x7F <= ord(character) < 0xA0 for character in text)


@pytest.fixture
def hostile_snapshot(tmp_path: Path) -> str:
    """A pool whose label value, one node's name, a pod's name and its owner carry escapes."""
    pool = f"p5{ESCAPES}{FORGED}"
    owner = {**owner_reference("Job", "batch/v1", "x"), "kind": f"Evil{FORGED}{ESCAPES}", "name": f"x/y{FORGED}"}
    bodies = [
        daemon_set(),
        node(f"n1{ESCAPES}", pool=pool, efa=0),
        node("n2", pool=pool),
        *plugin_pods([f"n1{ESCAPES}", "n2"]),
        workload_pod("n2", f"pod{ESCAPES}", owner=owner),
    ]
    return write_json(tmp_path / "hostile.json", kube_list(bodies))


@pytest.mark.parametrize("output", ["table", "wide", "json", "yaml"])
def test_evaluate_prints_no_escape_sequence(
    hostile_snapshot: str, output: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["evaluate", "-f", hostile_snapshot, "-o", output], capsys)
    assert code == 0, err
    assert no_control(out), out
    if output in ("table", "wide"):
        assert len(out.splitlines()) == 2  # the header and the one pool: no row broken in two


def test_explain_prints_no_escape_sequence_and_no_forged_line(
    hostile_snapshot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, name, err = run(["evaluate", "-f", hostile_snapshot, "-o", "name"], capsys)
    assert code == 0, err
    code, out, err = run(["explain", "-f", hostile_snapshot, name.strip()], capsys)
    assert code == 0, err
    assert no_control(out), out
    assert not [line for line in out.splitlines() if line.startswith("2026-12-01")]


def test_cells_and_workload_lines_show_control_characters_escaped() -> None:
    table = align([["NAME", "KIND"], [f"a{ESCAPES}", f"b{FORGED}"]])
    assert no_control(table) and len(table.splitlines()) == 2
    assert "\\x1b[2J" in table
    published = {
        "requestingFabric": {"pods": 0, "workloads": 0},
        "offenders": [{"namespace": "ml", "kind": f"K{ESCAPES}", "name": f"n{FORGED}", "pods": 1, "problem": "x"}],
    }
    lines = workload_lines(published)
    assert all(no_control(line) and "\n" not in line for line in lines)
