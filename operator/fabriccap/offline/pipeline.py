"""The offline pipeline: facts from snapshots or one live read, evaluated once, as objects.

The evaluation is ``fabriccap.core.evaluate.evaluate``, the function the operator calls for
every round, on the same kind of fact index: what ``fabriccap evaluate`` prints is what the
operator would publish for the same cluster.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from fabriccap.core.config import Config
from fabriccap.core.evaluate import Evaluation, evaluate
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.index import FactIndex
from fabriccap.core.stamping import RFC3339, stamp_status
from fabriccap.kube.errors import KubeError
from fabriccap.kube.kinds import kinds_for
from fabriccap.offline.snapshot import add_bodies

logger = logging.getLogger(__name__)


async def live_facts(extractor: FactsExtractor, kubeconfig: str | None = None, context: str | None = None) -> FactIndex:
    """Facts read from the cluster, kind by kind, in the scopes the operator watches."""
    # Imported here: aiohttp costs start-up time that snapshot evaluation does not need.
    from fabriccap.kube.client import connect

    facts = FactIndex()
    async with await connect(kubeconfig, context) as client:
        for watched in kinds_for(extractor.config):
            for _scope, path in watched.paths(extractor.config):
                try:
                    bodies = [body async for body in client.list_items(path, watched.page_size)]
                except KubeError as error:
                    if error.status == 404 and watched.optional:
                        # ResourceSlices before Kubernetes 1.34: device plugins only, as the operator.
                        logger.warning("%s is not served: evaluating without %ss", path, watched.kind)
                        continue
                    raise
                # As the operator reads them: an unusable quantity fails its node's pool closed.
                add_bodies(facts, extractor, bodies, "cluster", strict_quantities=False)
    return facts


def evaluate_facts(config: Config, facts: FactIndex) -> Evaluation:
    return evaluate(config, facts)


def evaluation_objects(evaluation: Evaluation, now: str | None = None) -> list[dict[str, Any]]:
    """The objects as a fresh operator would publish them (generation 1, transitions now)."""
    timestamp = now or datetime.now(UTC).strftime(RFC3339)
    objects = []
    for capability in evaluation.capabilities:
        obj = capability.to_object()
        obj["metadata"]["generation"] = 1
        obj["status"] = stamp_status(obj["status"], None, generation=1, now=timestamp)
        objects.append(obj)
    return objects


def all_ready(evaluation: Evaluation) -> bool:
    """``--require-ready``: at least one pool, and every pool Ready."""
    return bool(evaluation.capabilities) and all(capability.status.is_ready for capability in evaluation.capabilities)
