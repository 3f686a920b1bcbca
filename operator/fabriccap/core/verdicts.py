"""What the operator keeps of a pod's NCCL log: its transport verdict, per fabric, with one
evidence line, and why the log could not be read when it could not. Pure: no I/O, no clock.

The log reader (``controller.logreader``) reads each accelerator container's log through the
parser (``core.transport``) and combines its containers here; the index keeps the result
(``FactIndex.put_transport``) until the pod goes; the evaluation counts it per pool
(``core.workloads``). Nothing else of the log is kept: a verdict, a line of at most
``EVIDENCE_CHARS`` characters already cleaned by the parser, and a short reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fabriccap.core.api import MAX_READ_ERROR_REASON
from fabriccap.core.transport import (
    EVIDENCE_CHARS,
    JOB_VERDICT_ORDER,
    UNPROVEN_WITHOUT_EVERY_RANK,
    TransportReport,
    Verdict,
    evidence_line,
    network_of_line,
    provider_of_line,
)

# A failed read's reason, as the status and explain show it: the HTTP status and the start of
# the API server's message (which names the pod, the kubelet or the RBAC rule, never the log).
REASON_CHARS = MAX_READ_ERROR_REASON


@dataclass(frozen=True, slots=True)
class FabricVerdict:
    """One fabric's verdict on a log: the profiles read NCCL's network differently (IB is the
    fabric for aks-rdma and another network for efa)."""

    fabric: str
    verdict: Verdict
    evidence: str  # the line that shows it, cleaned, at most EVIDENCE_CHARS; "" when none
    decisive: bool  # the job's verdict is settled: read the log no more (TransportScanner.decisive)
    # A rank of it is unknown over a network that is not the fabric (TransportReport.could_fall_back):
    # the pod's other containers cannot make it pass.
    could_fall_back: bool = False

    @classmethod
    def from_report(cls, report: TransportReport) -> FabricVerdict:
        """What is kept of a parser's report on one container's log."""
        return cls(report.fabric, report.verdict, report.evidence, report.decisive, report.could_fall_back)


@dataclass(frozen=True, slots=True)
class ContainerRead:
    """The outcome of the last read of one container's log (one run of it)."""

    verdicts: tuple[FabricVerdict, ...]  # one per fabric read; empty when the read failed
    reason: str = ""  # why the log could not be read; "" when it was

    def of(self, fabric: str) -> FabricVerdict | None:
        return next((entry for entry in self.verdicts if entry.fabric == fabric), None)

    @property
    def failed(self) -> bool:
        """The log could not be read: no verdict came of it."""
        return not self.verdicts

    def decided(self, fabrics: Iterable[str]) -> bool:
        """Whether every one of ``fabrics`` has a decisive verdict: nothing left to read."""
        return all((entry := self.of(fabric)) is not None and entry.decisive for fabric in fabrics)


@dataclass(frozen=True, slots=True)
class PodTransport:
    """A pod's transport, as the index keeps it: its containers' reads combined. ``uid`` ties
    it to one pod: a pod recreated under the same name starts again."""

    uid: str
    verdicts: tuple[FabricVerdict, ...]
    reason: str = ""  # a container's log could not be read (and no other decided)

    def of(self, fabric: str) -> FabricVerdict | None:
        return next((entry for entry in self.verdicts if entry.fabric == fabric), None)


def combine(uid: str, fabrics: Iterable[str], reads: Iterable[ContainerRead | None]) -> PodTransport:
    """A pod's verdict per fabric from its accelerator containers' reads (None: not read yet):
    the first of socket, other, fabric, none that any container shows (the job's rule, SPEC),
    else unknown with the first evidence there is.

    Fail closed (``UNPROVEN_WITHOUT_EVERY_RANK``, the rule a log's ranks past the parser's
    bound follow too): ``socket`` and ``other`` are proven by the line that shows them, whatever
    the other containers say; ``fabric`` and ``none`` only when every container's log was read,
    since the one not read could show sockets, and only when no container could fall back
    (``FabricVerdict.could_fall_back``: so far on one node over sockets, say). A pod one of whose
    logs could not be read (or not yet) is then ``unknown``, never ``fabric``. The reason of a
    failed read is kept while some container is unknown."""
    read_list = list(reads)
    every_log_read = all(read is not None and not read.failed for read in read_list)
    verdicts = []
    for fabric in fabrics:
        mine = [entry for read in read_list if read is not None and (entry := read.of(fabric)) is not None]
        chosen = next((entry for order in JOB_VERDICT_ORDER for entry in mine if entry.verdict is order), None)
        if chosen is not None and chosen.verdict in UNPROVEN_WITHOUT_EVERY_RANK:
            if not every_log_read:
                chosen = FabricVerdict(fabric, Verdict.UNKNOWN, "", decisive=False)
            elif held := next((entry for entry in mine if entry.could_fall_back), None):
                chosen = held
        if chosen is None:
            evidence = next((entry.evidence for entry in mine if entry.evidence), "")
            chosen = FabricVerdict(fabric, Verdict.UNKNOWN, evidence, decisive=False)
        verdicts.append(chosen)
    reason = next((read.reason for read in read_list if read is not None and read.reason), "")
    return PodTransport(uid=uid, verdicts=tuple(verdicts), reason=reason)


_API_MESSAGE_NOISE = re.compile(r"\s+")


def read_failure_reason(status: int | None, message: str) -> str:
    """The reason a log read failed, for the status and explain: ``403 Forbidden: …``. The
    message is the API server's or the client's, cleaned and cut like an evidence line."""
    phrase = {
        None: "no answer",
        0: "no answer",
        400: "Bad Request",
        403: "Forbidden",
        404: "Not Found",
        500: "Internal Server Error",
        503: "Service Unavailable",
    }.get(status, "HTTP error")
    head = f"{status} {phrase}" if status else phrase
    text = _API_MESSAGE_NOISE.sub(" ", evidence_line(message))
    return f"{head}: {text}"[:REASON_CHARS] if text else head


# -- what a FabricNotUsed Event says about why


@dataclass(frozen=True)
class Causes:
    """The likely causes of a fabric's network not being used, by verdict, in a profile's words."""

    socket: str
    provider: str  # the OFI plugin runs over a libfabric provider that is not the fabric's
    other_network: str  # NCCL chose another network (IB on EFA, the OFI plugin on RDMA)


CAUSES: Mapping[str, Causes] = {
    "efa": Causes(
        socket="the image lacks the aws-ofi-nccl plugin (libnccl-net.so) or it failed to load, so NCCL fell back"
        " to its TCP sockets; use an image with aws-ofi-nccl and the EFA libfabric, and set FI_PROVIDER=efa",
        provider="libfabric runs the OFI plugin over provider {provider}, not efa: set FI_PROVIDER=efa and check"
        " that the EFA devices are in the container",
        other_network="NCCL chose {network}, not the OFI plugin over EFA: the image lacks aws-ofi-nccl, or NCCL_NET"
        " points elsewhere",
    ),
    "aks-rdma": Causes(
        socket="NCCL fell back to its TCP sockets: InfiniBand is disabled (NCCL_IB_DISABLE=1) or the RDMA devices"
        " are not in the container (the rdma/hca_shared_devices_a request, IPC_LOCK)",
        provider="NCCL runs a libfabric plugin over provider {provider}, not InfiniBand verbs: drop the OFI plugin"
        " from the image or set NCCL_NET=IB",
        other_network="NCCL chose {network}, not InfiniBand verbs: check NCCL_NET and the plugins in the image",
    ),
}
_GENERIC = Causes(
    socket="NCCL fell back to its TCP sockets: the fabric's NCCL plugin or devices are missing in the container",
    provider="NCCL's plugin runs over provider {provider}, not the fabric",
    other_network="NCCL chose {network}, not the fabric",
)


def likely_cause(fabric: str, verdict: Verdict, evidence: str) -> str:
    """Why a workload that requests ``fabric`` does not use it, as far as its evidence line says."""
    causes = CAUSES.get(fabric, _GENERIC)
    if verdict is Verdict.SOCKET:
        return causes.socket
    if provider := provider_of_line(evidence):
        return causes.provider.format(provider=provider)
    network = network_of_line(evidence)
    return causes.other_network.format(network=network.strip() if network else "another network")


__all__ = [
    "EVIDENCE_CHARS",
    "ContainerRead",
    "FabricVerdict",
    "PodTransport",
    "combine",
    "likely_cause",
    "read_failure_reason",
]
