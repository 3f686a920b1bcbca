"""End-to-end fixtures: a real kube-apiserver + etcd, or any cluster you point at.

By default a local control plane (fabriccap.controlplane) starts once per test session; its
binaries are built once into ~/.cache/fabriccap the first time (minutes). Set
``FABRICCAP_E2E_KUBECONFIG=/path/to/kubeconfig`` to run the same tests against another
cluster instead (kind on a laptop, a dev cluster); tests that mint users then skip, since only
the local control plane's CA key is at hand.

Every test under tests/e2e is marked ``e2e``: deselect them with ``-m "not e2e"``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from fabriccap.kube.paths import NAMESPACES
from fabriccap_devtools.controlplane.binaries import KUBECTL, ensure_all, ensure_binaries
from fabriccap_devtools.controlplane.cluster import LocalControlPlane
from harness import EXTERNAL_KUBECONFIG_ENV, E2ECluster, SyncKube

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parents[1]
CRD_FILE = REPO_ROOT / "crds" / "fabriccapabilities.yaml"
# KEP-5004 (DeviceClass.spec.extendedResourceName): alpha, off by default in v1.35; without the
# gate the API server drops the field and test_dra_apiserver's extended-resource case skips.
E2E_FEATURE_GATES = ("DRAExtendedResource=true",)


def external_kubeconfig() -> Path | None:
    configured = os.environ.get(EXTERNAL_KUBECONFIG_ENV)
    return Path(configured).expanduser() if configured else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees the whole session's items, not only this directory's.
    for item in items:
        if item.path.is_relative_to(E2E_DIR):
            item.add_marker(pytest.mark.e2e)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """On failure, show what the fixtures can tell (operator logs, published objects).

    Any fixture value with a ``report_sections() -> [(title, text)]`` method contributes.
    """
    report: pytest.TestReport = yield
    if report.failed and item.path.is_relative_to(E2E_DIR):
        for value in getattr(item, "funcargs", {}).values():
            sections = getattr(value, "report_sections", None)
            if callable(sections):
                with contextlib.suppress(Exception):  # a report helper must not mask the failure
                    for title, text in sections():
                        report.sections.append((f"{title} [{call.when}]", text))
    return report


class Timings:
    """Measured durations a test reports; printed at the end of the session, whatever the outcome."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, float]] = []

    def record(self, group: str, what: str, seconds: float) -> None:
        self.rows.append((group, what, seconds))


_TIMINGS = pytest.StashKey[Timings]()


@pytest.fixture(scope="session")
def timings(pytestconfig: pytest.Config) -> Timings:
    return pytestconfig.stash.setdefault(_TIMINGS, Timings())


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    measured = config.stash.get(_TIMINGS, None)
    if measured is None or not measured.rows:
        return
    terminalreporter.section("real-node timings")
    for group, what, seconds in measured.rows:
        terminalreporter.write_line(f"{group:>15}  {seconds:6.1f} s  {what}")


@pytest.fixture(scope="session")
def uncaptured(pytestconfig: pytest.Config) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """``with uncaptured():`` lets long set-up steps (first builds) print their progress."""
    return lambda: _uncaptured(pytestconfig)


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2ECluster]:
    external = external_kubeconfig()
    if external is not None:
        on_path = shutil.which("kubectl")
        with _uncaptured(pytestconfig):
            kubectl = Path(on_path) if on_path else ensure_binaries([KUBECTL])[KUBECTL]
        target = E2ECluster(kubeconfig=external, kubectl=kubectl, local=None)
        _apply_crds(target)
        yield target
        return

    # Building the binaries the first time takes minutes: let its progress lines through.
    with _uncaptured(pytestconfig):
        binaries = ensure_all()
    with LocalControlPlane(
        tmp_path_factory.mktemp("controlplane"), binaries=binaries, feature_gates=E2E_FEATURE_GATES
    ) as control_plane:
        target = E2ECluster(kubeconfig=control_plane.kubeconfig, kubectl=control_plane.kubectl, local=control_plane)
        _apply_crds(target)
        yield target


def _apply_crds(target: E2ECluster) -> None:
    if not CRD_FILE.exists():
        return
    target.run_kubectl("apply", "--server-side", "-f", str(CRD_FILE))
    target.run_kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_FILE))


@contextlib.contextmanager
def _uncaptured(pytestconfig: pytest.Config) -> Iterator[None]:
    """Suspend pytest's output capture so long-running setup can show progress."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    if capture is None:  # run with -p no:capture
        yield
        return
    with capture.global_and_fixture_disabled():
        yield


@pytest.fixture(scope="module")
def kube(cluster: E2ECluster) -> Iterator[SyncKube]:
    """A synchronous client of the cluster, for one test module."""
    client = SyncKube(cluster.kubeconfig)
    yield client
    client.close()


@pytest.fixture(scope="module")
def plugin_namespace(kube: SyncKube) -> Iterator[str]:
    """A fresh namespace for one module's plugin DaemonSets and pods: a real plugin elsewhere
    never interferes, and "no DaemonSet at all" is reachable."""
    name = f"fcap-e2e-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    kube.delete(NAMESPACES.item(name))
