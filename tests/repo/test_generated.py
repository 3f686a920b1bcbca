"""Every generated or copied file is what `make generate` writes today.

The suite's one check that committed files are current: other tests check what the generators
write (the rules, the dashboard, the argocd-cm patch...), never the committed copy again."""

from __future__ import annotations

import pytest

from fabriccap_devtools.generate import Generated, generated_files


@pytest.mark.parametrize("entry", generated_files(), ids=lambda entry: entry.relative)
def test_generated_file_is_current(entry: Generated) -> None:
    assert entry.path.exists(), f"{entry.relative} is missing: run `make generate`"
    assert entry.path.read_text(encoding="utf-8") == entry.render(), (
        f"{entry.relative} is stale (generated from {entry.source}): run `make generate`"
    )


def test_the_table_covers_every_file_kustomize_helm_and_argocd_need() -> None:
    relative = {entry.relative for entry in generated_files()}
    assert {
        "manifests/crd/fabriccapabilities.yaml",
        "charts/fabriccap/crds/fabriccapabilities.yaml",
        "charts/fabriccap/files/dashboard.json",
        "charts/fabriccap/files/alerts.yaml",
        "charts/fabriccap/values.schema.json",
        "gitops/argocd-cm-patch.yaml",
    } <= relative
