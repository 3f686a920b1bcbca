"""The dev control plane's feature gates: what reaches kube-apiserver, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabriccap_devtools.cli import build_parser
from fabriccap_devtools.controlplane.cluster import ControlPlaneError, LocalControlPlane


def test_gates_become_one_flag(tmp_path: Path) -> None:
    plane = LocalControlPlane(tmp_path, feature_gates=["DRAExtendedResource", "DRAConsumableCapacity=false"])
    assert plane._feature_gate_flags() == ["--feature-gates=DRAExtendedResource=true,DRAConsumableCapacity=false"]
    assert LocalControlPlane(tmp_path)._feature_gate_flags() == []


@pytest.mark.parametrize("gate", ["draExtendedResource=true", "DRAExtendedResource=yes", "A=true,B=true", ""])
def test_a_malformed_gate_is_refused_in_one_line(tmp_path: Path, gate: str) -> None:
    with pytest.raises(ControlPlaneError, match=r"^feature gate .*: expected Name=true or Name=false$"):
        LocalControlPlane(tmp_path, feature_gates=[gate])


def test_the_command_line_takes_them() -> None:
    args = build_parser().parse_args(["controlplane", "up", "--feature-gates", "DRAExtendedResource=true"])
    assert args.feature_gates == "DRAExtendedResource=true"
