"""The offline pipeline: facts from snapshots or one live read, evaluated once, as objects.

The evaluation is ``fabriccap.core.evaluate.evaluate``, the function the operator calls for
every round, on the same kind of fact index: what ``fabriccap evaluate`` prints is what the
operator would publish for the same cluster.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fabriccap.core.config import Config
from fabriccap.core.evaluate import Evaluation, evaluate
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.index import FactIndex
from fabriccap.core.references import is_object_name
from fabriccap.core.stamping import RFC3339, stamp_status
from fabriccap.core.workload_kinds import WorkloadKind
from fabriccap.kube.errors import KubeError
from fabriccap.kube.kinds import WatchedKind, kinds_for
from fabriccap.kube.lookups import MAX_LOOKUP_BYTES
from fabriccap.kube.paths import ApiResource
from fabriccap.offline.logs import read_cluster_logs
from fabriccap.offline.owners import MAX_CLUSTER_READ_SECONDS, MAX_CLUSTER_READS, PARALLEL_CLUSTER_READS, OwnerReader
from fabriccap.offline.snapshot import add_bodies

if TYPE_CHECKING:
    from fabriccap.kube.client import KubeClient

logger = logging.getLogger(__name__)


async def live_facts(
    extractor: FactsExtractor,
    kubeconfig: str | None = None,
    context: str | None = None,
    client: KubeClient | None = None,
    *,
    lookups: bool = False,
    logs: bool = False,
) -> FactIndex:
    """Facts read from the cluster, kind by kind, in the scopes the operator watches (through
    ``client`` when given, which stays open; else a connection of its own). With ``lookups``,
    the owners and claims the operator would read for them too (``read_lookups``): what
    ``evaluate`` and a pool's ``explain`` answer is then what the operator publishes. With
    ``logs`` and transport on, the pods' logs the operator would read (``read_logs``)."""
    # Imported here: aiohttp costs start-up time that snapshot evaluation does not need.
    from fabriccap.kube.client import connect

    if client is not None:
        return await _read_live(extractor, client, lookups, logs)
    async with await connect(kubeconfig, context) as own:
        return await _read_live(extractor, own, lookups, logs)


async def _read_live(extractor: FactsExtractor, client: KubeClient, lookups: bool, logs: bool) -> FactIndex:
    facts = await _read_facts(extractor, client)
    if lookups:
        await read_lookups(extractor, client, facts)
    if logs:
        await read_logs(extractor.config, client, facts)
    return facts


async def read_logs(config: Config, client: KubeClient, facts: FactIndex) -> None:
    """With transport on, read the pods' logs the operator would read (``offline.logs``), so
    ``status.workloads.transport`` and its ``FabricNotUsed`` offenders are what it publishes.
    What was not read is said on stderr, and those pods are ``unknown`` with why."""
    if not config.transport.enabled:
        return  # the operator has no log reader then (controller.main)
    for line in await read_cluster_logs(client, config, facts):
        logger.warning("%s", line)


async def read_lookups(extractor: FactsExtractor, client: KubeClient, facts: FactIndex) -> None:
    """Read the owners and claims the operator would read for ``facts``: those the evaluation
    names (``Evaluation.lookups``, what the operator's publisher hands its resolver, of the pods
    that request the fabric or an accelerator), again until it names none not read, at most
    ``MAX_CLUSTER_READS``. What was not read is said on stderr; the evaluation then names a
    workload by its nearest owner read, as the operator does until its read succeeds."""
    config = extractor.config
    if not config.workloads.enabled:
        return  # the operator has no resolver then (controller.main)
    reader = OwnerReader(
        client,
        facts,
        extractor.on_refused,
        max_reads=MAX_CLUSTER_READS,
        max_seconds=MAX_CLUSTER_READ_SECONDS,
        parallel=PARALLEL_CLUSTER_READS,
        bound=f"a live read reads at most {MAX_CLUSTER_READS} owners and claims",
    )
    # Sorted: which reads a cut leaves out is the same from one run to the next.
    await reader.read_until_known(lambda: sorted(evaluate(config, facts).lookups))
    for line in reader.unread_lines():
        logger.warning("%s", line)


async def _read_facts(extractor: FactsExtractor, client: KubeClient) -> FactIndex:
    facts = FactIndex()
    for watched in kinds_for(extractor.config):
        for scope, path in watched.paths(extractor.config):
            try:
                bodies = await _list_served(client, watched, scope)
            except KubeError as error:
                if error.status == 403:
                    # Fail closed (no count without every kind), but say what to grant: a role
                    # made before this release lacks the DeviceTaintRules the operator now reads.
                    raise _forbidden(watched, scope) from error
                if error.status == 404 and watched.optional:
                    # ResourceSlices before Kubernetes 1.34 (device plugins only, as the operator),
                    # or Karpenter's kinds in a cluster without Karpenter (said only if asked).
                    logger.log(
                        logging.WARNING if watched.warn_when_absent else logging.INFO,
                        "%s is not served (%s): evaluating without them",
                        path,
                        watched.absent_because,
                    )
                    continue
                raise
            # As the operator reads them: an unusable quantity fails its node's pool closed.
            add_bodies(facts, extractor, bodies, "cluster", strict_quantities=False)
    return facts


def _forbidden(watched: WatchedKind, scope: str | None) -> KubeError:
    """The one line ``fabriccap evaluate`` ends with when the API server refuses a LIST (403)."""
    where = f" in namespace {scope}" if scope is not None else ""
    resource = watched.resource
    return KubeError(
        f"cannot list {resource.plural}{where} (403 Forbidden): grant list on {resource.rbac_resource}{where}", 403
    )


async def _list_served(client: KubeClient, watched: WatchedKind, scope: str | None) -> list[dict[str, Any]]:
    """The objects of ``scope``'s collection in the newest version the API server serves
    (DeviceTaintRules: v1beta2, else v1alpha3); the last 404 is raised."""
    paths = watched.versioned_paths(scope)
    for newer in paths[:-1]:
        try:
            return [body async for body in client.list_items(newer, watched.page_size)]
        except KubeError as error:
            if error.status != 404:
                raise
    return [body async for body in client.list_items(paths[-1], watched.page_size)]


async def live_object(
    kind: WorkloadKind,
    namespace: str,
    name: str,
    kubeconfig: str | None = None,
    context: str | None = None,
    client: KubeClient | None = None,
) -> dict[str, Any] | None:
    """One workload object, read in the first of its kind's versions the cluster serves (a
    cluster has the training-operator's MPIJob v1 or the mpi-operator's v2beta1); None when
    there is no such object or kind. Through ``client`` when given, like ``live_facts``."""
    from fabriccap.kube.client import connect

    if not is_object_name(name) or not is_object_name(namespace):
        return None
    if client is not None:
        return await _read_object(kind, namespace, name, client)
    async with await connect(kubeconfig, context) as own:
        return await _read_object(kind, namespace, name, own)


async def _read_object(kind: WorkloadKind, namespace: str, name: str, client: KubeClient) -> dict[str, Any] | None:
    for version in kind.versions:
        api_version = f"{kind.group}/{version}" if kind.group else version
        path = ApiResource.of(api_version, kind.plural, kind.kind, namespaced=True).item(name, namespace)
        try:
            return dict(await client.get(path, max_body_bytes=MAX_LOOKUP_BYTES))
        except KubeError as error:
            if error.status != 404:
                raise
    return None


def evaluate_facts(config: Config, facts: FactIndex) -> Evaluation:
    return evaluate(config, facts)


# Said on stderr when a snapshot is evaluated with transport on.
NO_LOGS_IN_A_SNAPSHOT = (
    "transport is on in the config, but a snapshot holds no pod logs: status.workloads.transport is left out"
    " (the TCP column is blank) and no FabricNotUsed offender can be found; evaluate the live cluster"
    " (no -f) to read the logs the operator reads"
)


def drop_unread_transport(status: dict[str, Any]) -> None:
    """Take ``status.workloads.transport`` out of a status computed without reading any log (a
    snapshot): its counts would be every pod ``unknown`` and ``0`` sockets, which reads as an
    answer. ``evaluate`` and ``explain`` print such a status alike (review 66f F7)."""
    workloads = status.get("workloads")
    if isinstance(workloads, dict):
        workloads.pop("transport", None)


def evaluation_objects(evaluation: Evaluation, now: str | None = None, logs: bool = True) -> list[dict[str, Any]]:
    """The objects as a fresh operator would publish them (generation 1, transitions now).
    Without ``logs`` (a snapshot: none were read), no ``status.workloads.transport``: its
    counts would be every pod ``unknown`` and ``0`` sockets, which reads as an answer."""
    timestamp = now or datetime.now(UTC).strftime(RFC3339)
    objects = []
    for capability in evaluation.capabilities:
        obj = capability.to_object()
        if not logs:
            drop_unread_transport(obj["status"])
        obj["metadata"]["generation"] = 1
        obj["status"] = stamp_status(obj["status"], None, generation=1, now=timestamp)
        objects.append(obj)
    return objects


def all_ready(evaluation: Evaluation) -> bool:
    """``--require-ready``: at least one pool, and every pool Ready."""
    return bool(evaluation.capabilities) and all(capability.is_ready for capability in evaluation.capabilities)
