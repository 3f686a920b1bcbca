"""A missing or corrupt instance catalog stops the commands at start: one line, exit 2, nothing evaluated."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabriccap import catalogfile
from fabriccap_devtools.world import kube_list, node
from support.cli import assert_one_line_error, run, write_json


@pytest.mark.parametrize("content", [None, "{ not json", '{"format": "fabriccap.instance-catalog/v0"}'])
def test_evaluate_refuses_to_start_without_a_usable_catalog(
    content: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    if content is not None:
        (data / "efa-catalog.json").write_text(content)
    monkeypatch.setattr(catalogfile, "_data", lambda: data)
    snapshot = write_json(tmp_path / "cluster.json", kube_list([node("n1")]))
    line = assert_one_line_error(run(["evaluate", "-f", snapshot], capsys), "instance catalog", "efa-catalog.json")
    assert ("cannot read" in line) if content is None else ("reinstall fabriccap" in line)
