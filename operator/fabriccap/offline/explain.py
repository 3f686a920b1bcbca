"""``fabriccap explain``: one pool node by node, from snapshots or one live read.

The facts are read and evaluated exactly as ``fabriccap evaluate`` reads and evaluates them
(the same fact index, ``core.evaluate.evaluate``); the per-node view comes from
``core.explain``. This module only picks the pool and prints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fabriccap.core.api import ConditionType
from fabriccap.core.config import Config
from fabriccap.core.evaluate import evaluate
from fabriccap.core.explain import (
    NodeExplanation,
    PodExplanation,
    PoolExplanation,
    explain_capability,
    find_capability,
)
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.index import FactIndex
from fabriccap.core.text import escape_controls
from fabriccap.core.workload_explain import WorkloadExplanation, explain_workload, owner_reads
from fabriccap.core.workload_kinds import WorkloadKind
from fabriccap.offline.logs import PodLogReads
from fabriccap.offline.owners import OwnerReader
from fabriccap.offline.pipeline import drop_unread_transport, live_facts, live_object
from fabriccap.offline.render import align

if TYPE_CHECKING:
    from fabriccap.kube.client import KubeClient

EXPLAIN_OUTPUTS: tuple[str, ...] = ("table", "json")
NODE_COLUMNS: tuple[str, ...] = (
    "NODE",
    "INSTANCE-TYPE",
    "MAX",
    "CAPACITY",
    "ALLOCATABLE",
    "DRA",
    "COUNT",
    "SOURCE",
    "PLUGIN",
    "PLUGIN-POD",
    "LEFT-OUT",
    "GAP",
    "BREAKS",
)
NONE = "-"  # an empty cell, where kubectl describe would print <none>
# A live explain reads the logs of at most this many of the pool's pods (the first by name),
# at the config's concurrency and rate: a user waits for them.
MAX_LIVE_READS = 64
POD_COLUMNS: tuple[str, ...] = ("POD", "NODE", "OWNER", "REQUESTS-FABRIC", "TRANSPORT", "EVIDENCE")


def explain(config: Config, facts: FactIndex, query: str) -> PoolExplanation:
    """The pool ``query`` names (see ``core.explain.find_capability``), node by node.
    Raises ExplainError when it names nothing or more than one thing."""
    evaluation = evaluate(config, facts)
    return explain_capability(config, facts, find_capability(evaluation, facts, query))


async def explain_live(
    config: Config, extractor: FactsExtractor, query: str, kubeconfig: str | None, context: str | None
) -> PoolExplanation:
    """``explain`` of the live cluster, its owners and claims read as ``evaluate`` reads them
    (``pipeline.read_lookups``); with transport on, the pool's pods' logs are read then (the
    first ``MAX_LIVE_READS`` by name, ``read_pod_logs``), as the operator reads them, so their
    verdicts show."""
    from fabriccap.kube.client import connect  # aiohttp only for a live read

    async with await connect(kubeconfig, context) as client:
        facts = await live_facts(extractor, client=client, lookups=True)
        explanation = explain(config, facts, query)
        if not explanation.pods:
            return explanation
        await read_pod_logs(client, config, facts, explanation.pods)
    return explain(config, facts, query)


async def explain_workload_live(
    config: Config,
    extractor: FactsExtractor,
    kind: WorkloadKind,
    namespace: str,
    name: str,
    kubeconfig: str | None,
    context: str | None,
) -> WorkloadExplanation | None:
    """``explain KIND/NAMESPACE/NAME`` of the live cluster (None when there is no such object).
    The owners it lacks are read first (``offline.owners``): the object's own chain to its top
    before its namespace's pods', so the bound on reads never cuts the chain for the pods' sake.
    With transport on, its pods' logs are read then, as ``explain_live`` reads a pool's."""
    from fabriccap.kube.client import connect  # aiohttp only for a live read

    async with await connect(kubeconfig, context) as client:
        facts = await live_facts(extractor, client=client)
        body = await live_object(kind, namespace, name, client=client)
        if body is None:
            return None
        owners = OwnerReader(client, facts, extractor.on_refused)
        await owners.read_until_known(lambda: owner_reads(body, facts)[0])
        await owners.read_until_known(lambda: [key for keys in owner_reads(body, facts) for key in keys])
        unread = owners.unread
        explanation = explain_workload(config, evaluate(config, facts), facts, body, unread=unread)
        if not explanation.pods:
            return explanation
        await read_pod_logs(client, config, facts, explanation.pods)
    return explain_workload(config, evaluate(config, facts), facts, body, unread=unread)


async def read_pod_logs(client: KubeClient, config: Config, facts: FactIndex, pods: Sequence[PodExplanation]) -> None:
    """Read the accelerator containers' logs of ``pods`` once (the first ``MAX_LIVE_READS``),
    bounded as a live evaluate's reads (``offline.logs``), and keep each pod's verdicts in
    ``facts``; a pod left unread shows why."""
    keys = [(namespace, name) for namespace, _, name in (pod.name.partition("/") for pod in pods)]
    bound = f"explain reads at most {MAX_LIVE_READS} pods' logs"
    await PodLogReads(client, config, facts, max_pods=MAX_LIVE_READS, bound=bound).read(keys)


def explanation_object(explanation: PoolExplanation) -> dict[str, Any]:
    """``-o json``: the per-node view, and the status ``evaluate`` computes for the pool
    (without generations or transition times: no object was written); without its transport
    block when no pod's log was read (a snapshot), as ``evaluate -f`` prints it."""
    obj = explanation.to_json()
    if explanation.pods and not any(pod.read for pod in explanation.pods):
        status = obj.get("status")
        if isinstance(status, dict):
            drop_unread_transport(status)
    return obj


def _cell(value: object) -> str:
    if value is None or value == "" or value == []:
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def node_row(node: NodeExplanation) -> list[str]:
    serving_pod = next((pod for pod in node.plugin_pods if pod.ready), None) or next(iter(node.plugin_pods), None)
    return [
        node.name,
        _cell(node.instance_type),
        _cell(node.max_count),
        _cell(node.capacity),
        _cell(node.allocatable),
        _cell(node.dra_devices),
        str(node.count),
        _cell(",".join(node.sources)),
        node.plugin.value,
        _cell(serving_pod.name.partition("/")[2] if serving_pod else None),
        _cell(node.left_out),
        _cell(",".join(gap.value for gap in node.gaps)),
        _cell("not judged" if node.left_out else ",".join(node.breaks)),
    ]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _indented(rows: Sequence[Sequence[str]]) -> list[str]:
    return ["  " + line for line in align(rows).splitlines()]


def workload_lines(workloads: Mapping[str, Any] | None) -> list[str]:
    """``status.workloads`` (docs/reference/fabriccapability.md, docs/workloads.md), read from the
    status as published."""
    if not isinstance(workloads, Mapping):
        return ["  not reported (the status has no workloads: workload reporting is off or not in this version)"]
    lines = []
    for field, label in (
        ("requestingFabric", "requesting the fabric"),
        ("withoutFabric", "accelerator without the fabric (TCP fallback)"),
        ("intentWithoutRequest", "fabric environment without a request"),
    ):
        entry = workloads.get(field)
        if isinstance(entry, Mapping):
            lines.append(f"  {label}: {entry.get('pods', 0)} pods, {entry.get('workloads', 0)} workloads")
    offenders = [entry for entry in workloads.get("offenders") or [] if isinstance(entry, Mapping)]
    if offenders:
        header = ["NAMESPACE", "KIND", "NAME", "PODS", "PROBLEM"]
        rows = [[str(entry.get(key.lower(), "")) for key in header] for entry in offenders]
        lines += _indented([header, *rows])
    return lines or ["  none"]


def pod_lines(pods: Sequence[PodExplanation] | None) -> list[str]:
    """Each pod's transport verdict and the line of its log that shows it (transport on)."""
    if pods is None:
        return []
    lines = ["", "Pods (what their NCCL chose; docs/transport.md):"]
    if not pods:
        return [*lines, "  none request the fabric or an accelerator"]

    def evidence(pod: PodExplanation) -> str:
        if not pod.read:
            return "not read (a snapshot has no logs; live, the operator reads them)"
        if pod.reason:
            return f"not read: {pod.reason}"
        return pod.evidence or NONE

    rows = [
        [pod.name, pod.node, pod.owner, _cell(pod.requests_fabric), pod.transport.value, evidence(pod)] for pod in pods
    ]
    return [*lines, *_indented([list(POD_COLUMNS), *rows])]


def format_explanation(explanation: PoolExplanation) -> str:
    status = explanation.status
    ready = status.condition(ConditionType.READY)
    judged = [node for node in explanation.nodes if not node.left_out]
    left_out: dict[str, int] = {}
    for node in explanation.nodes:
        if node.left_out:
            left_out[node.left_out] = left_out.get(node.left_out, 0) + 1
    reasons = "".join(f", {count} {why}" for why, count in sorted(left_out.items()))
    targets = f"{_plural(len(explanation.nodes), 'target node')} ({len(judged)} judged{reasons})"
    if explanation.other_nodes:
        shown = ", ".join(explanation.other_nodes[:5])
        more = len(explanation.other_nodes) - 5
        shown += f" (+{more} more)" if more > 0 else ""
        targets += f"; not target nodes: {shown}"
    summary = [
        ["Name:", explanation.name],
        ["Fabric:", f"{explanation.fabric} ({explanation.resource_name})"],
        ["Pool:", f"{explanation.pool.key}={explanation.pool.value}"],
        ["Nodes:", targets],
        ["Ready:", f"{ready.status} {ready.reason}: {ready.message}" if ready else NONE],
    ]
    if explanation.device_classes is not None:
        summary.append(["Device classes:", "; ".join(item.describe() for item in explanation.device_classes) or NONE])
    if status.uniform_count is not None:
        summary.append(["Uniform count:", str(status.uniform_count)])
    lines = align(summary).splitlines()
    lines.append("")
    lines += align([list(NODE_COLUMNS), *(node_row(node) for node in explanation.nodes)]).splitlines()

    why = [node for node in explanation.nodes if node.findings or node.notes]
    lines += ["", "Why:"]
    if not why:
        lines.append("  no node breaks a condition")
    for node in why:
        entries = [f"{finding.condition.value} {finding.reason}: {finding.detail}" for finding in node.findings]
        entries += [f"note: {note}" for note in node.notes]
        marker = " (keeps the pool from Ready)" if node.blocks_ready else ""
        lines.append(f"  {node.name}{marker}")
        lines += [f"    {entry}" for entry in entries]

    lines += ["", "Conditions:"]
    lines += _indented(
        [["TYPE", "STATUS", "REASON", "MESSAGE"]]
        + [[condition.type, condition.status, condition.reason, condition.message] for condition in status.conditions]
    )
    lines += ["", "Workloads:", *workload_lines(status.to_json().get("workloads"))]
    lines += pod_lines(explanation.pods)
    # Names and messages come from objects: shown escaped, one line each, as kubectl shows them.
    return "\n".join(escape_controls(line) for line in lines)


def format_explain_output(explanation: PoolExplanation, output: str) -> str:
    if output == "json":
        return json.dumps(explanation_object(explanation), indent=2)
    return format_explanation(explanation)
