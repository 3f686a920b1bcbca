"""The snapshot command the docs quote is the one the watched kinds make.

A snapshot that misses a kind the evaluation reads (DeviceClasses, Karpenter's NodePools) gives
`fabriccap evaluate` a different answer from the operator's, silently: the hand-written pages
quote ``snapshot_kubectl()`` whole, so a new kind makes this test name the stale page.
"""

from __future__ import annotations

import pytest

from fabriccap.kube.kinds import WATCHED_KINDS, snapshot_kubectl
from fabriccap_devtools.checkout import REPO

PAGES_QUOTING_IT = ["README.md", "docs/reference/how-it-decides.md", "docs/reference/command-line.md"]


@pytest.mark.parametrize("page", PAGES_QUOTING_IT)
def test_page_quotes_the_current_snapshot_command(page: str) -> None:
    text = " ".join((REPO / page).read_text(encoding="utf-8").split())
    assert snapshot_kubectl() in text, f"{page} does not quote `{snapshot_kubectl()}`"


def test_the_command_names_every_watched_kind() -> None:
    names = snapshot_kubectl().split()[2].split(",")
    assert len(names) == len(WATCHED_KINDS)
    for watched, name in zip(WATCHED_KINDS, names, strict=True):
        assert name.split(".")[0] == watched.resource.plural
