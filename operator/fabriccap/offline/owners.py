"""The owners a live ``fabriccap explain KIND/NAMESPACE/NAME`` reads, as the operator reads them.

A live read lists pods, not their owners: without them a Deployment's pod would be told its
ReplicaSet is the top, and a JobSet's pod its Job. Each owner ``owner_chain`` lacks is read
with one GET of its metadata (``kube.lookups``, the operator's path and media type) and put in
the index by ``learn_lookup``, the function the operator's resolver puts its answers in with:
one rule for what an owner's read means. Unlike the operator, nothing is retried: an owner that
cannot be read ends its chain, and why is kept for the explanation to say.

Bounded: at most ``MAX_OWNER_READS`` distinct reads an explain, ``PARALLEL_OWNER_READS`` at a
time, each within the client's timeout. A loop of owners ends the walk by itself
(``owner_chain`` stops at the first owner named again), so asking again terminates too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fabriccap.core.references import RefusalHook
from fabriccap.core.text import clean_text
from fabriccap.core.workloads import OWNER_LOOKUP_KINDS, LookupKey, learn_lookup
from fabriccap.kube.errors import KubeError, ResponseTooLargeError
from fabriccap.kube.lookups import MAX_LOOKUP_BYTES, NO_FURTHER_OWNER_STATUSES, lookup_accept, lookup_path

if TYPE_CHECKING:
    from fabriccap.core.index import FactIndex
    from fabriccap.kube.client import KubeClient

# A user waits for these: a namespace of many owners is read this far, and the explanation says
# which owner it stopped at and why.
MAX_OWNER_READS = 64
PARALLEL_OWNER_READS = 4
MAX_REASON = 200

OwnerKey = tuple[str, str, str]


@dataclass
class OwnerReader:
    """Reads owners into ``facts``, sharing one bound across the calls of ``read_until_known``."""

    client: KubeClient
    facts: FactIndex
    refused: RefusalHook | None = None
    max_reads: int = MAX_OWNER_READS
    parallel: int = PARALLEL_OWNER_READS
    # Why each owner read could not tell its owner, by the owner's key (``ObjectRef.key``).
    unread: dict[OwnerKey, str] = field(default_factory=dict)
    _asked: set[LookupKey] = field(default_factory=set)

    async def read_until_known(self, wanted: Callable[[], Sequence[LookupKey]]) -> None:
        """Read what ``wanted`` names, ask it again, and so on until it names nothing not read
        yet, or the bound is reached (the reads then wanted are said unread, for it)."""
        slots = asyncio.Semaphore(self.parallel)
        while fresh := list(dict.fromkeys(key for key in wanted() if key not in self._asked)):
            room = self.max_reads - len(self._asked)
            if room <= 0:
                for key in fresh:
                    self.unread.setdefault(key.owner_key, f"explain reads at most {self.max_reads} owners")
                return
            batch = fresh[:room]
            self._asked.update(batch)
            await asyncio.gather(*(self._read(key, slots) for key in batch))

    async def _read(self, key: LookupKey, slots: asyncio.Semaphore) -> None:
        try:
            path = lookup_path(key)
        except ValueError:
            # Refused where the pod became facts (core.references): never sent, no further owner.
            learn_lookup(self.facts, key, None, self.refused)
            return
        try:
            async with slots:
                body = await self.client.get(path, max_body_bytes=MAX_LOOKUP_BYTES, accept=lookup_accept(key))
        except ResponseTooLargeError:
            self.unread[key.owner_key] = f"its answer is larger than {MAX_LOOKUP_BYTES} bytes"
            learn_lookup(self.facts, key, None, self.refused)
            return
        except KubeError as error:
            self.unread[key.owner_key] = _why(key, error)
            if error.status in NO_FURTHER_OWNER_STATUSES:
                learn_lookup(self.facts, key, None, self.refused)
            # Else nothing is learned: the chain ends at it as at an owner not yet read.
            return
        if not isinstance(body, dict):
            self.unread[key.owner_key] = "its answer is not an object"
            return
        learn_lookup(self.facts, key, body, self.refused)


def _why(key: LookupKey, error: KubeError) -> str:
    """One line: why the read of ``key`` told nothing, and for a 403 what to grant."""
    if error.status == 403:
        row = OWNER_LOOKUP_KINDS[key.owner_key[0]]  # lookup_path read only a row's kind
        resource = f"{row.plural}.{row.group}" if row.group else row.plural
        return f"403 Forbidden: grant get on {resource} in namespace {key.namespace}"
    if error.status == 404:
        return "404 Not Found: it is gone"
    return clean_text(str(error), MAX_REASON)
