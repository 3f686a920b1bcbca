"""What the real-node modules share: whether this machine can run real kubelets, and a
module's own control plane with real nodes and the FabricCapability CRD applied.

Real nodes need root, containerd and the rest (``host.missing_prerequisites``): elsewhere the
tests skip, and under ``CI=true`` they fail instead, so a CI machine that lost a prerequisite
cannot pass by skipping them.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from fabriccap_devtools.controlplane import host
from fabriccap_devtools.controlplane.binaries import ensure_all, ensure_node_binaries
from fabriccap_devtools.controlplane.cluster import LocalControlPlane
from fabriccap_devtools.controlplane.nodes import NodeSpec
from harness import EXTERNAL_KUBECONFIG_ENV, E2ECluster

CRD = Path(__file__).resolve().parents[2] / "crds" / "fabriccapabilities.yaml"


def require_real_nodes() -> None:
    if os.environ.get(EXTERNAL_KUBECONFIG_ENV):
        pytest.skip(f"real nodes run on the local control plane only ({EXTERNAL_KUBECONFIG_ENV} is set)")
    missing = host.missing_prerequisites()
    if missing:
        message = f"real nodes need {'; '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message} (CI=true: not skipping)")
        pytest.skip(message)


@contextlib.contextmanager
def real_node_cluster(
    directory: Path,
    nodes: Sequence[NodeSpec],
    *,
    uncaptured: Callable[[], contextlib.AbstractContextManager[None]],
    timings: Any,
    what: str,
    **options: Any,
) -> Iterator[tuple[E2ECluster, LocalControlPlane]]:
    """A control plane with ``nodes`` (``options``: LocalControlPlane's), started, the CRD
    established; stopped, and the host's changes undone, on the way out. ``what`` names the
    set-up in the real-node timings."""
    require_real_nodes()
    with uncaptured():  # the first build takes minutes: let its progress through
        binaries, node_binaries = ensure_all(), ensure_node_binaries()
    control_plane = LocalControlPlane(directory, binaries=binaries, node_binaries=node_binaries, nodes=nodes, **options)
    started = time.monotonic()
    with uncaptured():
        control_plane.start()
    timings.record("setup", what, time.monotonic() - started)
    try:
        cluster = E2ECluster(kubeconfig=control_plane.kubeconfig, kubectl=control_plane.kubectl, local=control_plane)
        cluster.run_kubectl("apply", "--server-side", "-f", str(CRD))
        cluster.run_kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD))
        yield cluster, control_plane
    finally:
        stopped = time.monotonic()
        control_plane.stop()
        timings.record("teardown", "stop everything, undo the host changes", time.monotonic() - stopped)
