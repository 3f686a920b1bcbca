"""``make generate``: every generated or copied file of the repository, written from one table.

Alert rules and the dashboard come from their generators; kustomize and Helm refuse files
outside their own directories, and a wheel has no repository around it, so the CRD, the rules,
the dashboard and the example cluster are copied where each tool looks. A unit test compares
every entry with what is committed, so a stale file fails the suite instead of a release.

    python -m fabriccap.dev.generate            # write every file that differs
    python -m fabriccap.dev.generate --check    # list stale files, exit 1 if any
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fabriccap.observability import alerts, dashboard

# operator/fabriccap/dev/generate.py -> the repository root (this only runs from a checkout).
REPO = Path(__file__).resolve().parents[3]
CRD = REPO / "crds" / "fabriccapabilities.yaml"
MONITORING = REPO / "monitoring"
MANIFESTS = REPO / "manifests"
CHART = REPO / "charts" / "fabriccap"
PACKAGE_DATA = REPO / "operator" / "fabriccap" / "dev" / "data"
EXAMPLE_CLUSTER = REPO / "examples" / "eks-cluster.json"


@dataclass(frozen=True)
class Generated:
    path: Path
    render: Callable[[], str]
    source: str  # what to edit instead, for the stale-file message

    @property
    def relative(self) -> str:
        return str(self.path.relative_to(REPO))


def _copy_of(source: Path) -> Callable[[], str]:
    return lambda: source.read_text(encoding="utf-8")


def _rendered(files: Callable[[], dict[str, str]], name: str) -> Callable[[], str]:
    return lambda: files()[name]


def generated_files() -> list[Generated]:
    """Every generated file, in dependency order (copies after what they copy)."""
    entries = [
        Generated(
            MONITORING / name, _rendered(alerts.rendered_files, name), "operator/fabriccap/observability/alerts.py"
        )
        for name in sorted(alerts.rendered_files())
    ]
    entries += [
        Generated(
            MONITORING / name,
            _rendered(dashboard.rendered_files, name),
            "operator/fabriccap/observability/dashboard.py",
        )
        for name in sorted(dashboard.rendered_files())
    ]
    copies = {
        MANIFESTS / "crd" / "fabriccapabilities.yaml": CRD,
        CHART / "crds" / "fabriccapabilities.yaml": CRD,
        PACKAGE_DATA / "fabriccapabilities.yaml": CRD,
        PACKAGE_DATA / "demo-cluster.json": EXAMPLE_CLUSTER,
        MANIFESTS / "components" / "prometheusrule" / "prometheusrule.yaml": MONITORING / "prometheusrule.yaml",
        MANIFESTS / "components" / "dashboard" / "dashboard-configmap.yaml": MONITORING / "dashboard-configmap.yaml",
        CHART / "files" / "prometheusrule.yaml": MONITORING / "prometheusrule.yaml",
        CHART / "files" / "dashboard.json": MONITORING / "dashboard.json",
    }
    entries += [Generated(copy, _copy_of(source), str(source.relative_to(REPO))) for copy, source in copies.items()]
    return entries


def stale_files() -> list[Generated]:
    stale = []
    for entry in generated_files():
        current = entry.path.read_text(encoding="utf-8") if entry.path.exists() else None
        if current != entry.render():
            stale.append(entry)
    return stale


def write_all() -> list[Generated]:
    written = []
    for entry in generated_files():  # in order, so a copy sees its freshly written source
        content = entry.render()
        if not entry.path.exists() or entry.path.read_text(encoding="utf-8") != content:
            entry.path.parent.mkdir(parents=True, exist_ok=True)
            entry.path.write_text(content, encoding="utf-8")
            written.append(entry)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fabriccap.dev.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only list stale files; exit 1 if any")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        for entry in stale:
            print(f"stale: {entry.relative} (from {entry.source}); run `make generate`")
        return 1 if stale else 0
    for entry in write_all():
        print(f"wrote {entry.relative}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
