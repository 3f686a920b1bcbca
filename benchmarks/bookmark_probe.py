"""Diagnostic (not a test): which request, if any, makes a quiet watch's bookmarks advance.

    python benchmarks/bookmark_probe.py                      # every nudge, 130 s each, ~10 min
    python benchmarks/bookmark_probe.py --nudge selector --seconds 70

On a fresh local control plane (kube-apiserver + etcd, as the benchmarks start it), one watch
of ResourceSlices, which nothing writes, asks for bookmarks as the operator's watches do, while
a ConfigMap is written every second (what the node and leader Leases do in every cluster, so
etcd's revision moves). Every 10 s the probe sends one nudge, a request to the same collection:

- ``none``: nothing;
- ``limit``: a consistent LIST with ``limit=1``;
- ``full``: a consistent LIST of the whole collection (here empty: what the check reads);
- ``selector``: a consistent LIST whose field selector matches no object
  (``informers.NUDGE_SELECTOR``, what the operator sends).

It prints every line the watch hears, with its time and resourceVersion, and per nudge how many
bookmarks came and whether each advanced. kube-apiserver sends a watch a bookmark about every
minute and 2 s before the request's end, but only one that advances its version; the version of
a kind's watch cache moves with the kind's own writes, or when etcd reports progress, which a
consistent read served from the cache asks for (ConsistentListFromCache). The nudges begin
before the first bookmark is due: a cache that has seen nothing by then drops the request's
bookmarks for good (a first try here nudged only after 150 s, and heard none).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fabriccap.controller.informers import NUDGE_SELECTOR
from fabriccap.kube.client import KubeClient, connect
from fabriccap.kube.paths import RESOURCE_SLICES
from fabriccap_devtools.controlplane import LocalControlPlane

NUDGES: dict[str, dict[str, str] | None] = {
    "none": None,
    "limit": {"limit": "1"},
    "full": {},
    "selector": {"fieldSelector": NUDGE_SELECTOR},
}
NUDGE_EVERY = 10.0
CONFIG_MAPS = "/api/v1/namespaces/default/configmaps"


async def write_elsewhere(client: KubeClient, seconds: float) -> None:
    """A ConfigMap written once a second for ``seconds``, on the second: etcd's revision moves,
    the revision of the kinds the operator reads does not (what Leases do in every cluster)."""
    await client.create(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "renewed"}})
    started = time.monotonic()
    for count in range(int(seconds)):
        await asyncio.sleep(max(0.0, started + count + 1 - time.monotonic()))
        await client.merge_patch(f"{CONFIG_MAPS}/renewed", {"data": {"count": str(count)}})


async def nudge(client: KubeClient, query: dict[str, str] | None, seconds: float, began: float) -> None:
    for _ in range(int(seconds / NUDGE_EVERY)):
        await asyncio.sleep(NUDGE_EVERY)
        if query is not None:
            page = await client.get(RESOURCE_SLICES.collection(), query)
            print(
                f"  {time.monotonic() - began:6.1f} s  nudged: LIST answered at {page['metadata']['resourceVersion']}"
            )


async def watch(client: KubeClient, version: str, began: float, heard: list[tuple[float, str, str]]) -> None:
    async for line in client.watch(RESOURCE_SLICES.collection(), version, timeout_seconds=1800):
        event: dict[str, Any] = line
        at = time.monotonic() - began
        seen = str(((event.get("object") or {}).get("metadata") or {}).get("resourceVersion"))
        heard.append((at, str(event.get("type")), seen))
        print(f"  {at:6.1f} s  watch: {event.get('type')} at {seen}", flush=True)


async def probe(kubeconfig: Path, name: str, seconds: float) -> list[tuple[float, str, str]]:
    heard: list[tuple[float, str, str]] = []
    async with await connect(str(kubeconfig)) as client:
        listed = await client.get(RESOURCE_SLICES.collection())
        began = time.monotonic()
        watching = asyncio.create_task(watch(client, listed["metadata"]["resourceVersion"], began, heard))
        try:
            await asyncio.gather(write_elsewhere(client, seconds), nudge(client, NUDGES[name], seconds, began))
        finally:
            watching.cancel()
    return heard


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nudge", choices=sorted(NUDGES), action="append", help="repeatable; default: all")
    parser.add_argument("--seconds", type=float, default=130.0, help="how long each is watched")
    args = parser.parse_args()
    summary = []
    for name in args.nudge or list(NUDGES):
        print(f"nudge {name}: every {NUDGE_EVERY:.0f} s, for {args.seconds:.0f} s", flush=True)
        with (
            tempfile.TemporaryDirectory(prefix="fabriccap-bookmark-probe-") as tmp,
            LocalControlPlane(Path(tmp) / "cp") as plane,
        ):
            heard = asyncio.run(probe(plane.info.kubeconfig, name, args.seconds))
        bookmarks = [(at, version) for at, kind, version in heard if kind == "BOOKMARK"]
        shown = ", ".join(f"{at:.1f} s at {version}" for at, version in bookmarks) or "none"
        summary.append(f"{name:>9}: {len(bookmarks)} bookmark(s) in {args.seconds:.0f} s ({shown})")
    print("\n".join(["", "bookmarks heard by a quiet watch, by nudge:", *summary]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
