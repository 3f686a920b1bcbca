"""A watched kind is a row: a toy kind, defined here and nowhere in the product, is listed,
watched, relisted and read from snapshots by the same code as the real kinds.

What the informers and the snapshot reader know of a kind is its ``WatchedKind`` row and the
``Table`` its facts live in. If either ever branches on a kind again, the toy kind below stops
working (or the grep at the end finds the branch).
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fabriccap.controller import informers as watchers
from fabriccap.controller.informers import build_informers
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.store import FactStore
from fabriccap.core.config import default_config
from fabriccap.core.facts import FactsError, FactsExtractor
from fabriccap.core.index import FactIndex, Table
from fabriccap.kube.kinds import Facet, Problem, WatchedKind
from fabriccap.kube.paths import DEVICE_CLASSES
from fabriccap.offline.snapshot import SnapshotError, load_snapshots
from support.builders import node
from support.fakeapi import event, eventually, fake_api, recorded_sleeps

REPO = Path(__file__).resolve().parents[3]
CLASSES = DEVICE_CLASSES.collection()


@dataclass(frozen=True, slots=True)
class ClassFacts:
    name: str
    driver: str
    selectors: int


def _extract(_extractor: FactsExtractor, body: Mapping[str, Any]) -> ClassFacts | None:
    name = (body.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise FactsError("DeviceClass without metadata.name")
    selectors = (body.get("spec") or {}).get("selectors") or []
    drivers = {
        expression.split('"')[1]
        for selector in selectors
        if isinstance((expression := (selector.get("cel") or {}).get("expression")), str) and '"' in expression
    }
    if not drivers:
        return None  # a class of no driver concerns no fabric
    return ClassFacts(name, sorted(drivers)[0], len(selectors))


def _problems(facts: ClassFacts) -> tuple[Problem, ...]:
    if facts.selectors > 1:
        return (Problem(logging.WARNING, f"DeviceClass {facts.name}: {facts.selectors} selectors", "many selectors"),)
    return ()


class Touches:
    """What each change to the toy table touched, as the index reports it to the table."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, str | None]] = []

    def __call__(self, _index: FactIndex, _key: str, previous: ClassFacts | None, current: ClassFacts | None) -> None:
        self.seen.append((previous.driver if previous else None, current.driver if current else None))


TOUCHES = Touches()
CLASS_FACTS: Table[str, ClassFacts] = Table("deviceclasses", False, lambda facts: facts.name, TOUCHES)
DEVICE_CLASS = WatchedKind(
    label="deviceclass",
    resource=DEVICE_CLASSES,
    per_plugin_namespace=False,
    facets=(Facet(CLASS_FACTS, _extract, _problems),),
    page_size=2,
    unique_in_snapshots=True,
)


def device_class(name: str, *drivers: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}} for driver in drivers]},
    }


@pytest.fixture(autouse=True)
def _fresh_touches(monkeypatch: pytest.MonkeyPatch) -> None:
    TOUCHES.seen.clear()
    recorded_sleeps(monkeypatch, watchers)


async def test_an_informer_lists_watches_and_relists_a_kind_it_has_never_heard_of(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="fabriccap.controller.informers")
    async with fake_api() as (api, client):
        listed = [device_class("efa", "dra.net"), device_class("gpu", "gpu.nvidia.com"), device_class("none")]
        api.serve(CLASSES, "DeviceClass", listed, "10")
        store, metrics = FactStore(), OperatorMetrics()
        (informer,) = build_informers(client, store, FactsExtractor(default_config()), metrics, rows=(DEVICE_CLASS,))
        assert (informer.path, informer.kind, informer.page_size) == (CLASSES, "deviceclass", 2)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.listed.wait(), 5)
            classes = store.held(CLASS_FACTS)
            assert classes == {"efa": ClassFacts("efa", "dra.net", 1), "gpu": ClassFacts("gpu", "gpu.nvidia.com", 1)}
            assert api.lists(CLASSES) == [{"limit": "2"}, {"limit": "2", "continue": "page-2"}]

            await api.emit(CLASSES, event("MODIFIED", device_class("efa", "dra.net", "efa.aws"), "11"))
            await api.emit(CLASSES, event("DELETED", device_class("gpu", "gpu.nvidia.com"), "12"))
            # Another kind in this watch is rejected as it is in the real kinds' watches.
            await api.emit(CLASSES, event("ADDED", node("n1"), "13"))
            await eventually(lambda: len(api.watches(CLASSES)) == 2, "the watch resumed after the Node")
            assert api.watches(CLASSES)[1]["resourceVersion"] == "12"
            assert classes == {"efa": ClassFacts("efa", "dra.net", 2)}
            assert TOUCHES.seen == [
                (None, "dra.net"),
                (None, "gpu.nvidia.com"),
                ("dra.net", "dra.net"),
                ("gpu.nvidia.com", None),
            ]
            assert caplog.messages[0] == "DeviceClass efa: 2 selectors"  # its problem, said when it appeared
            assert "rejected a line (wrong kind: 'Node' in a watch of DeviceClass" in caplog.messages[1]

            # Gone while unwatched: a fresh LIST forgets it.
            api.serve(CLASSES, "DeviceClass", [device_class("new", "dra.net")], "20")
            await api.emit(CLASSES, {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "gone"}})
            await eventually(lambda: set(classes) == {"new"}, "the relist")
            assert store.fresh() and not task.done()
            applied = metrics.registry.get_sample_value(
                "fabriccap_watch_events_total", {"kind": "deviceclass", "result": "applied"}
            )
            assert applied == 3 + 2 + 1  # listed, two events, listed again
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def test_snapshots_read_a_kind_they_have_never_heard_of(tmp_path: Path) -> None:
    snapshot = tmp_path / "classes.json"
    items = [device_class("efa", "dra.net"), device_class("none"), node("n1")]
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    rows = {"DeviceClass": DEVICE_CLASS}
    facts = load_snapshots([str(snapshot)], FactsExtractor(default_config()), kinds=rows)
    assert facts.held(CLASS_FACTS) == {"efa": ClassFacts("efa", "dra.net", 1)}
    assert facts.nodes == {}  # not a row of this reading

    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({"kind": "List", "items": [device_class("efa", "a.b"), device_class("efa", "a.b")]}))
    with pytest.raises(SnapshotError, match="DeviceClass efa appears twice"):
        load_snapshots([str(twice)], FactsExtractor(default_config()), kinds=rows)

    many = tmp_path / "many.json"
    many.write_text(json.dumps(device_class("efa", "a.b", "c.d")))
    with pytest.raises(SnapshotError, match="many selectors"):
        load_snapshots([str(many)], FactsExtractor(default_config()), kinds=rows)


def test_no_code_outside_the_rows_branches_on_a_kind() -> None:
    """Issue 21's check: `git grep -n 'kind == "'` finds no kind branch in the product."""
    found = subprocess.run(
        ["git", "grep", "-n", 'kind == "', "--", "operator/"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert found.returncode in (0, 1), found.stderr
    assert found.stdout == ""
