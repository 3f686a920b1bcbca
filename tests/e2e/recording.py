"""Every event of a few collections, with the moment it arrived: the history a real-node test
asserts on ("no false Ready in between") and takes its latencies from.

One background thread runs its own event loop with ``fabriccap.kube.client.KubeClient``
watches (list, then watch from the list's resourceVersion; again after the server ends a
stream). All paths are watched by the same process, so the arrival time of a Node event and
of the FabricCapability event it caused differ by what the operator took, not by polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabriccap.kube.client import KubeClient, connect
from fabriccap.kube.errors import KubeError

LISTED = "LISTED"


@dataclass(frozen=True)
class Seen:
    at: float  # time.monotonic() when the event arrived
    type: str  # LISTED (from the initial list), ADDED, MODIFIED or DELETED
    obj: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def resource_version(self) -> int:
        """etcd's revision of this write: one etcd orders every object's writes in one sequence."""
        return int(self.obj["metadata"]["resourceVersion"])


class Recorder:
    """Watches `paths` (collection paths, e.g. ``/api/v1/nodes``) from ``start`` to ``stop``."""

    def __init__(self, kubeconfig: Path, paths: Sequence[str]) -> None:
        self.kubeconfig = kubeconfig
        self.paths = list(paths)
        self._events: dict[str, list[Seen]] = {path: [] for path in self.paths}
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="recorder", daemon=True)
        self._failure: BaseException | None = None

    def start(self) -> Recorder:
        self._thread.start()
        if not self._ready.wait(30):
            raise AssertionError(f"the recorder did not list {self.paths} within 30s: {self._failure!r}")
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop_tasks)
            self._thread.join(15)

    def events(self, path: str, *, since: float = 0.0, name: str | None = None) -> list[Seen]:
        with self._lock:
            return [s for s in self._events[path] if s.at >= since and (name is None or s.name == name)]

    def wait_for(
        self,
        path: str,
        predicate: Callable[[Seen], bool],
        description: str,
        *,
        since: float = 0.0,
        timeout: float = 60.0,
    ) -> Seen:
        """The first event of `path` at or after `since` that satisfies `predicate`."""
        deadline = time.monotonic() + timeout
        while True:
            if self._failure is not None:
                raise AssertionError(f"the recorder failed: {self._failure!r}")
            for seen in self.events(path, since=since):
                if predicate(seen):
                    return seen
            if time.monotonic() > deadline:
                last = self.events(path)[-3:]
                raise AssertionError(
                    f"timed out after {timeout:.0f}s waiting for {description}; last events: "
                    + "; ".join(f"{s.type} {s.name} rv={s.resource_version}" for s in last)
                )
            time.sleep(0.05)

    def wait_current(
        self, path: str, name: str, predicate: Callable[[dict[str, Any]], bool], description: str, *, timeout: float
    ) -> dict[str, Any]:
        """Until the latest state of `name` satisfies `predicate` (it may already)."""
        deadline = time.monotonic() + timeout
        while True:
            current = self.latest(path, name)
            if current is not None and predicate(current):
                return current
            if time.monotonic() > deadline:
                shown = (current or {}).get("status")
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {description}; now: {shown}")
            time.sleep(0.05)

    def latest(self, path: str, name: str, *, before: float | None = None) -> dict[str, Any] | None:
        """The last state of `name` seen (before a moment, if given)."""
        found = None
        for seen in self.events(path, name=name):
            if before is not None and seen.at > before:
                break
            found = None if seen.type == "DELETED" else seen.obj
        return found

    # -- the thread

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        with contextlib.suppress(asyncio.CancelledError):
            self._loop.run_until_complete(self._main())
        self._loop.close()

    def _stop_tasks(self) -> None:
        for task in asyncio.all_tasks(self._loop):
            task.cancel()

    async def _main(self) -> None:
        try:
            client = await connect(str(self.kubeconfig))
        except BaseException as error:
            self._failure = error
            raise
        try:
            versions = [await self._list(client, path) for path in self.paths]
            self._ready.set()
            await asyncio.gather(
                *(self._watch(client, path, rv) for path, rv in zip(self.paths, versions, strict=True))
            )
        except BaseException as error:
            if not isinstance(error, asyncio.CancelledError):
                self._failure = error
            raise
        finally:
            await client.close()

    async def _list(self, client: KubeClient, path: str) -> str:
        deadline = time.monotonic() + 30
        while True:
            try:
                body = await client.get(path)
                break
            except KubeError as error:
                # A CRD that just turned Established may still answer "storage is (re)initializing".
                if error.status != 429 or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        now = time.monotonic()
        with self._lock:
            self._events[path] += [Seen(now, LISTED, item) for item in body.get("items") or []]
        return str(body["metadata"]["resourceVersion"])

    async def _watch(self, client: KubeClient, path: str, resource_version: str) -> None:
        while True:
            try:
                async for event in client.watch(path, resource_version, timeout_seconds=300):
                    event_type, obj = event.get("type"), event.get("object") or {}
                    if event_type == "BOOKMARK":
                        resource_version = obj["metadata"]["resourceVersion"]
                        continue
                    if event_type == "ERROR":
                        raise KubeError(f"watch {path}: {obj.get('message')}", int(obj.get("code") or 0))
                    resource_version = obj["metadata"]["resourceVersion"]
                    with self._lock:
                        self._events[path].append(Seen(time.monotonic(), str(event_type), obj))
            except KubeError:
                # Expired or broken: list again (the list's items are recorded as LISTED).
                resource_version = await self._list(client, path)
