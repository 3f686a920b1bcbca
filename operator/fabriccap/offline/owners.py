"""The owners a live ``fabriccap explain`` or ``evaluate`` reads, as the operator reads them.

A live read lists pods, not their owners: without them a Deployment's pod would be told its
ReplicaSet is the top, and a JobSet's pod its Job. Each owner ``owner_chain`` lacks is read
with one GET of its metadata (``kube.lookups``, the operator's path and media type) and put in
the index by ``learn_lookup``, the function the operator's resolver puts its answers in with:
one rule for what an owner's read means. A read the server may answer if asked again (a 429, a
5xx, a cut connection: ``kube.lookups.may_answer_if_asked_again``) is asked again after each of
``RETRY_PAUSES_SECONDS``; the operator retries for as long as it runs, but a
user waits. An owner that still cannot be read ends its chain, and why is kept for the
explanation to say.

Bounded: at most ``MAX_OWNER_READS`` distinct reads for one workload's explain, and
``MAX_CLUSTER_READS`` for a whole cluster's (``offline.pipeline.read_lookups``: the owners and
claims of every pod the operator would read them for), a few at a time, each within the
client's timeout. A loop of owners ends the walk by itself
(``owner_chain`` stops at the first owner named again), so asking again terminates too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from fabriccap.core.facts import ClaimRef
from fabriccap.core.references import RefusalHook
from fabriccap.core.text import clean_text
from fabriccap.core.workloads import CLAIM_LOOKUP_KINDS, OWNER_LOOKUP_KINDS, LookupKey, learn_lookup
from fabriccap.kube.errors import KubeError, ResponseTooLargeError
from fabriccap.kube.lookups import (
    CLAIM_API_VERSION,
    MAX_LOOKUP_BYTES,
    NO_FURTHER_OWNER_STATUSES,
    lookup_accept,
    lookup_path,
    may_answer_if_asked_again,
)

if TYPE_CHECKING:
    from fabriccap.core.index import FactIndex
    from fabriccap.kube.client import KubeClient

# A user waits for these: a namespace of many owners is read this far, and the explanation says
# which owner it stopped at and why.
MAX_OWNER_READS = 64
PARALLEL_OWNER_READS = 4
# A whole cluster's owners and claims: the operator reads them 8 at a time
# (controller.lookups.PARALLEL_LOOKUPS) with no cap, in the background; a user waits, so at most
# this many (at a few milliseconds each, seconds), and what was left unread is said.
MAX_CLUSTER_READS = 2000
PARALLEL_CLUSTER_READS = 8
MAX_REASON = 200
# A user waits: each read gets this long (the client's own default is 60 s), and all of one
# command's reads together ``max_seconds`` (review 65-fixesb F2: 2,000 reads 8 at a time on a
# slow server were hours). What is left then is said unread, for that.
READ_TIMEOUT_SECONDS = 10.0
MAX_OWNER_READ_SECONDS = 30.0
MAX_CLUSTER_READ_SECONDS = 120.0
# Lines that say what a whole cluster's read left unread: the commonest reasons, then the rest.
MAX_UNREAD_LINES = 5
# A read that failed for a cause that passes (one API server replica restarting behind the load
# balancer, a short 429 burst) is asked again after each of these pauses: a single 503 left an
# owner unread, and the explanation named the ReplicaSet, not the Deployment.
RETRY_PAUSES_SECONDS = (0.5, 1.5)

OwnerKey = tuple[str, str, str]
K = TypeVar("K")
CLAIM_API_GROUP = CLAIM_API_VERSION.partition("/")[0]


@dataclass
class OwnerReader:
    """Reads owners into ``facts``, sharing one bound across the calls of ``read_until_known``."""

    client: KubeClient
    facts: FactIndex
    refused: RefusalHook | None = None
    max_reads: int = MAX_OWNER_READS
    parallel: int = PARALLEL_OWNER_READS
    # Said of each read the bound leaves out (the default: ``explain``'s).
    bound: str = ""
    max_seconds: float = MAX_OWNER_READ_SECONDS
    read_timeout: float = READ_TIMEOUT_SECONDS
    retry_pauses: tuple[float, ...] = RETRY_PAUSES_SECONDS
    # Why each owner read could not tell its owner, by the owner's key (``ObjectRef.key``).
    unread: dict[OwnerKey, str] = field(default_factory=dict)
    # The same, by lookup (owners and claims): what ``unread_lines`` counts.
    unread_lookups: dict[LookupKey, str] = field(default_factory=dict)
    _asked: set[LookupKey] = field(default_factory=set)
    _deadline: float | None = None  # the event loop's time the reads end by, from the first call

    def __post_init__(self) -> None:
        self.bound = self.bound or f"explain reads at most {self.max_reads} owners"

    async def read_until_known(self, wanted: Callable[[], Sequence[LookupKey]]) -> None:
        """Read what ``wanted`` names, ask it again, and so on until it names nothing not read
        yet, or a bound is reached, in reads or in time (the reads then wanted are said unread,
        for it). Both bounds are shared by every call."""
        loop = asyncio.get_running_loop()
        if self._deadline is None:
            self._deadline = loop.time() + self.max_seconds
        slots = asyncio.Semaphore(self.parallel)
        while fresh := list(dict.fromkeys(key for key in wanted() if key not in self._asked)):
            room = self.max_reads - len(self._asked)
            out_of_time = loop.time() >= self._deadline
            if room <= 0 or out_of_time:
                why = f"not read within {self.max_seconds:.3g} s" if out_of_time else self.bound
                for key in fresh:
                    self._unread(key, why, keep=True)
                return
            batch = fresh[:room]
            self._asked.update(batch)
            await asyncio.gather(*(self._read(key, slots, self._deadline) for key in batch))

    async def _read(self, key: LookupKey, slots: asyncio.Semaphore, deadline: float) -> None:
        try:
            path = lookup_path(key)
        except ValueError:
            # Refused where the pod became facts (core.references): never sent, no further owner.
            learn_lookup(self.facts, key, None, self.refused)
            return
        try:
            body = await self._get(key, path, slots, deadline)
        except TimeoutError:
            if asyncio.get_running_loop().time() >= deadline:  # the reads' deadline, not the read's own bound
                self._unread(key, f"not read within {self.max_seconds:.3g} s")
            else:
                self._unread(key, f"no answer within {self.read_timeout:.3g} s")
            return
        except ResponseTooLargeError:
            self._unread(key, f"its answer is larger than {MAX_LOOKUP_BYTES} bytes")
            learn_lookup(self.facts, key, None, self.refused)
            return
        except KubeError as error:
            self._unread(key, _why(key, error))
            if error.status in NO_FURTHER_OWNER_STATUSES:
                learn_lookup(self.facts, key, None, self.refused)
            # Else nothing is learned: the chain ends at it as at an owner not yet read.
            return
        if not isinstance(body, dict):
            self._unread(key, "its answer is not an object")
            return
        learn_lookup(self.facts, key, body, self.refused)

    async def _get(self, key: LookupKey, path: str, slots: asyncio.Semaphore, deadline: float) -> Any:
        """One owner's metadata, asked again after a failure that may pass, while the reads'
        deadline allows; each attempt takes a slot, and its pause before the next holds none.
        Raises what the last attempt raised; TimeoutError when out of time."""
        loop = asyncio.get_running_loop()
        for attempt in range(len(self.retry_pauses) + 1):
            try:
                async with slots:
                    seconds = min(self.read_timeout, deadline - loop.time())
                    if seconds <= 0:
                        raise TimeoutError
                    async with asyncio.timeout(seconds):
                        return await self.client.get(path, max_body_bytes=MAX_LOOKUP_BYTES, accept=lookup_accept(key))
            except KubeError as error:
                last = attempt == len(self.retry_pauses)
                if last or isinstance(error, ResponseTooLargeError) or not may_answer_if_asked_again(error):
                    raise
                pause = self.retry_pauses[attempt]
                if loop.time() + pause >= deadline:
                    raise
                await asyncio.sleep(pause)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _unread(self, key: LookupKey, why: str, keep: bool = False) -> None:
        """Record why ``key``'s read told nothing (``keep``: unless a reason is known already)."""
        if keep:
            self.unread.setdefault(key.owner_key, why)
            self.unread_lookups.setdefault(key, why)
        else:
            self.unread[key.owner_key] = why
            self.unread_lookups[key] = why

    def unread_lines(self) -> list[str]:
        """What a whole cluster's read left unread, one line per reason (the commonest first,
        at most ``MAX_UNREAD_LINES``), and what that does to the answer."""
        return [_unread_line(why, keys, self.facts) for why, keys in commonest_reasons(self.unread_lookups)]


def commonest_reasons(unread: Mapping[K, str]) -> list[tuple[str, list[K]]]:
    """What a live read left unread (``unread``: why, by what), grouped by reason: the commonest
    first, at most ``MAX_UNREAD_LINES``, then the rest together as "N other reasons"; what
    stderr says, one line each, whatever was read (owners, claims, logs)."""
    by_reason: dict[str, list[K]] = {}
    for key, why in unread.items():
        by_reason.setdefault(why, []).append(key)
    ranked = sorted(by_reason.items(), key=lambda item: (-len(item[1]), item[0]))
    rest = [key for _, keys in ranked[MAX_UNREAD_LINES:] for key in keys]
    return ranked[:MAX_UNREAD_LINES] + ([(f"{len(ranked) - MAX_UNREAD_LINES} other reasons", rest)] if rest else [])


def _unread_line(why: str, keys: Sequence[LookupKey], facts: FactIndex) -> str:
    """``keys`` were not read for ``why``: how many, and what stands in for each answer (the
    operator's, where the answer is final: an owner's 403 or 404, a claim's)."""
    owners = sum(1 for key in keys if not key.is_claim)
    claims = [ClaimRef(key.kind, key.namespace, key.name) for key in keys if key.is_claim]
    judged = sum(1 for claim in claims if claim in facts.claim_classes)
    parts = []
    if owners:
        parts.append(f"{owners} owners: their workloads are named by the nearest owner read")
    if judged:
        parts.append(f"{judged} claims: their pods are judged as claiming no device class")
    if len(claims) > judged:
        parts.append(f"{len(claims) - judged} claims: their pods are not counted")
    return f"not read ({clean_text(why, MAX_REASON)}): {'; '.join(parts)}"


def _why(key: LookupKey, error: KubeError) -> str:
    """One line: why the read of ``key`` told nothing, and for a 403 what to grant."""
    if error.status == 403:
        if key.is_claim:
            resource = f"{CLAIM_LOOKUP_KINDS[key.kind]}.{CLAIM_API_GROUP}"
        else:
            row = OWNER_LOOKUP_KINDS[key.owner_key[0]]  # lookup_path read only a row's kind
            resource = f"{row.plural}.{row.group}" if row.group else row.plural
        return f"403 Forbidden: grant get on {resource} in namespace {key.namespace}"
    if error.status == 404:
        return "404 Not Found: it is gone"
    # Without the request's path: what failed is named by the line's count, and one reason for
    # a 500 on every read is one line, not one per owner (review 65-fixesb F3).
    text = str(error)
    request, said, rest = text.partition(": ")
    return clean_text(rest if said and request.startswith("GET ") else text, MAX_REASON)
