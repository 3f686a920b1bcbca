"""Transport in the core: the config, the facts the log reader needs, the verdicts the index
keeps, and what the evaluation publishes from them (status.workloads.transport, FabricNotUsed
offenders and Events, the recommendation's env)."""

from __future__ import annotations

from typing import Any

import pytest

from fabriccap.core.config import Config, ConfigError, build_config
from fabriccap.core.evaluate import evaluate
from fabriccap.core.facts import MAX_READ_CONTAINERS, ContainerRun, FactsExtractor
from fabriccap.core.index import WORKLOAD_POD_FACTS, FactIndex
from fabriccap.core.transport import EVIDENCE_CHARS, Verdict, scan, signature_for
from fabriccap.core.verdicts import (
    ContainerRead,
    FabricVerdict,
    PodTransport,
    combine,
    likely_cause,
    read_failure_reason,
)
from fabriccap.core.workloads import FABRIC_NOT_USED, INTENT_WITHOUT_REQUEST, WITHOUT_FABRIC, problems_present
from fabriccap_devtools.world import owner_reference, trainjob_pods, workload_pod
from support.builders import EFA, capability, facts_of, healthy_pool
from support.nccl import nccl_lines

ON = build_config({"transport": {"enabled": True}})
OFF = build_config({})
SOCKET_LINE = "ip-10-0-0-1:41:52 [0] NCCL INFO Using network Socket"
PROVIDER_TCP = "ip-10-0-0-1:41:52 [0] NCCL INFO NET/OFI Selected Provider is tcp;ofi_rxm"
FABRIC_LINE = "ip-10-0-0-1:41:52 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Libfabric/0/GDRDMA"


# --- Config --------------------------------------------------------------------------------


def test_transport_is_off_by_default_with_the_documented_settings() -> None:
    transport = OFF.transport
    assert not transport.enabled
    assert transport.max_bytes == 4 * 1024 * 1024
    assert (transport.max_concurrent_reads, transport.reads_per_second) == (4, 10.0)
    assert transport.read_after_seconds == (60.0, 300.0, 900.0, 3600.0)


def test_max_bytes_reads_a_quantity_and_refuses_what_it_cannot_hold() -> None:
    assert build_config({"transport": {"maxBytes": "512Ki"}}).transport.max_bytes == 512 * 1024
    assert build_config({"transport": {"maxBytes": 1048576}}).transport.max_bytes == 1048576
    for bad in ("lots", "1Gi", "64Ki", 10, -1):
        with pytest.raises(ConfigError, match=r"transport\.maxBytes"):
            build_config({"transport": {"maxBytes": bad}})


@pytest.mark.parametrize("steps", [[300, 60], [60, 60], [-1, 60], [], list(range(1, 20))])
def test_read_steps_must_be_ascending_non_negative_and_few(steps: list[int]) -> None:
    with pytest.raises(ConfigError, match=r"transport\.readAfterSeconds"):
        build_config({"transport": {"readAfterSeconds": steps}})


def test_transport_needs_workload_reporting() -> None:
    with pytest.raises(ConfigError, match=r"transport\.enabled needs workloads\.enabled"):
        build_config({"transport": {"enabled": True}, "workloads": {"enabled": False}})


def test_recommended_env_asks_for_nccls_choice_only_while_transport_is_read() -> None:
    efa_off, efa_on = OFF.enabled_fabrics[0], ON.enabled_fabrics[0]
    assert [env.name for env in OFF.recommended_env(efa_off)] == [
        "FI_PROVIDER",
        "FI_EFA_USE_DEVICE_RDMA",
        "NCCL_SOCKET_IFNAME",
    ]
    names = {env.name: env.value for env in ON.recommended_env(efa_on)}
    assert names["NCCL_DEBUG"] == "INFO" and names["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    # A profile that sets one keeps its value, and it is not listed twice.
    own = build_config(
        {
            "transport": {"enabled": True},
            "fabrics": [{"name": "efa", "recommendedEnv": [{"name": "NCCL_DEBUG", "value": "TRACE"}]}],
        }
    )
    env = own.recommended_env(own.enabled_fabrics[0])
    assert [(e.name, e.value) for e in env] == [("NCCL_DEBUG", "TRACE"), ("NCCL_DEBUG_SUBSYS", "INIT,NET")]


def test_the_nccl_debug_variables_are_not_fabric_intent() -> None:
    """A pod that follows the recommendation's NCCL_DEBUG=INFO and asks for no EFA is not
    IntentWithoutRequest: logging NCCL's choice says nothing about wanting the fabric."""
    body = workload_pod("n1", "logger", efa=None, env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"})
    facts = FactsExtractor(ON).workload_pod(body)
    assert facts is not None and facts.intent == ()


def test_a_ready_pools_recommendation_carries_the_nccl_variables() -> None:
    status = capability(evaluate(ON, facts_of(healthy_pool(), ON)), "efa-p5").status
    assert status.recommendation is not None
    assert ("NCCL_DEBUG", "INFO") in {(env.name, env.value) for env in status.recommendation.env}
    plain = capability(evaluate(OFF, facts_of(healthy_pool(), OFF)), "efa-p5").status
    assert plain.recommendation is not None
    assert "NCCL_DEBUG" not in {env.name for env in plain.recommendation.env}


# --- Facts ---------------------------------------------------------------------------------


def _two_containers(**status: Any) -> dict[str, Any]:
    body = workload_pod("n1", "trainer-0", efa=32, **status)
    body["spec"]["containers"].append({"name": "sidecar", "image": "registry.invalid/log-shipper:1"})
    body["status"].setdefault("containerStatuses", []).append(
        {"name": "sidecar", "restartCount": 0, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
    )
    return body


def test_the_facts_name_the_running_accelerator_containers_only_while_transport_is_read() -> None:
    body = _two_containers(restarts=2, started_at="2026-01-01T00:10:00Z")
    facts = FactsExtractor(ON).workload_pod(body)
    assert facts is not None
    assert facts.containers == (ContainerRun("node", 2, "2026-01-01T00:10:00Z"),)  # the log shipper is not read
    assert facts.uid == body["metadata"]["uid"]
    plain = FactsExtractor(OFF).workload_pod(body)
    assert plain is not None and plain.containers == ()


@pytest.mark.parametrize(
    "status",
    [
        {"phase": "Pending"},
        {
            "containerStatuses": [
                {"name": "node", "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]
        },
        {"containerStatuses": [{"name": "node", "restartCount": -1, "state": {"running": {"startedAt": "t"}}}]},
        {"containerStatuses": "garbage"},
    ],
)
def test_a_container_that_does_not_run_has_no_log_to_read(status: dict[str, Any]) -> None:
    body = workload_pod("n1", "trainer-0", efa=32)
    body["status"].update(status)
    facts = FactsExtractor(ON).workload_pod(body)
    assert facts is not None and facts.containers == ()


# --- Verdicts ------------------------------------------------------------------------------


def _read(verdict: Verdict, evidence: str = "", decisive: bool = True, fabric: str = "efa") -> ContainerRead:
    return ContainerRead((FabricVerdict(fabric, verdict, evidence, decisive),))


def test_a_pods_containers_combine_socket_first() -> None:
    combined = combine("u", ["efa"], [_read(Verdict.FABRIC, FABRIC_LINE), _read(Verdict.SOCKET, SOCKET_LINE)])
    chosen = combined.of("efa")
    assert chosen is not None and (chosen.verdict, chosen.evidence) == (Verdict.SOCKET, SOCKET_LINE)
    nothing = combine("u", ["efa"], [ContainerRead((), reason="403 Forbidden: no")]).of("efa")
    assert nothing is not None and nothing.verdict is Verdict.UNKNOWN
    assert combine("u", ["efa"], [ContainerRead((), reason="403 Forbidden: no")]).reason == "403 Forbidden: no"


FORBIDDEN = ContainerRead((), reason="403 Forbidden: no")


@pytest.mark.parametrize(
    ("reads", "verdict"),
    [
        # fabric and none only when every container's log was read ...
        ([_read(Verdict.FABRIC, FABRIC_LINE), _read(Verdict.UNKNOWN)], Verdict.FABRIC),
        ([_read(Verdict.FABRIC, FABRIC_LINE), FORBIDDEN], Verdict.UNKNOWN),
        ([_read(Verdict.FABRIC, FABRIC_LINE), None], Verdict.UNKNOWN),
        ([_read(Verdict.NONE, "nNodes 1"), FORBIDDEN], Verdict.UNKNOWN),
        # ... while socket and other are proven by their line, whatever the others say.
        ([_read(Verdict.SOCKET, SOCKET_LINE), FORBIDDEN], Verdict.SOCKET),
        ([_read(Verdict.OTHER, PROVIDER_TCP), None], Verdict.OTHER),
    ],
)
def test_a_pod_whose_log_cannot_be_read_is_unknown_never_fabric(
    reads: list[ContainerRead | None], verdict: Verdict
) -> None:
    combined = combine("u", ["efa"], reads)
    chosen = combined.of("efa")
    assert chosen is not None and chosen.verdict is verdict
    if verdict is Verdict.UNKNOWN:
        # No fabric line stands as the evidence of an unknown pod; the failed read's reason does.
        assert chosen.evidence == "" and not chosen.decisive
        assert combined.reason == (FORBIDDEN.reason if FORBIDDEN in reads else "")


def _read_log(*nccl: str) -> ContainerRead:
    """One container's read as the log reader keeps it: the parser's report on its lines."""
    return ContainerRead((FabricVerdict.from_report(scan([nccl_lines(*nccl)], signature_for("efa"))),))


@pytest.mark.parametrize("other", [Verdict.NONE, Verdict.FABRIC])
def test_a_container_on_sockets_inside_its_node_keeps_the_pod_from_passing(other: Verdict) -> None:
    """One container per GPU: the second's NCCL has no plugin and its communicator so far stays
    on the node, over Socket (unknown). The first's none or fabric does not pass the pod: a
    communicator of the second across nodes would be TCP."""
    nodes = 1 if other is Verdict.NONE else 2
    first = _read_log(
        "w0:100:200 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 4 nics)",
        "w0:100:200 [0] NCCL INFO Using network Libfabric",
        f"w0:100:200 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes {nodes} localRanks 1 localRank 0 MNNVL 0",
    )
    socket_line = "w0:101:201 [1] NCCL INFO Using network Socket"
    second = _read_log(
        "w0:101:201 [1] NCCL INFO NET/Plugin: Could not find: libnccl-net.so.",
        socket_line,
        "w0:101:201 [1] NCCL INFO comm 0x1 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0",
    )
    assert first.verdicts[0].verdict is other and second.verdicts[0].could_fall_back
    chosen = combine("u", ["efa"], [first, second]).of("efa")
    assert chosen is not None and (chosen.verdict, chosen.evidence) == (Verdict.UNKNOWN, socket_line)
    assert not chosen.decisive


def test_the_containers_read_of_one_pod_are_bounded() -> None:
    body = workload_pod("n1", "wide-0", efa=32, started_at="2026-01-01T00:10:00Z")
    (template,) = body["spec"]["containers"]
    (status,) = body["status"]["containerStatuses"]
    body["spec"]["containers"] = [{**template, "name": f"c{index:03d}"} for index in range(MAX_READ_CONTAINERS + 4)]
    body["status"]["containerStatuses"] = [
        {**status, "name": f"c{index:03d}"} for index in range(MAX_READ_CONTAINERS + 4)
    ]
    facts = FactsExtractor(ON).workload_pod(body)
    assert facts is not None
    assert [run.name for run in facts.containers] == [f"c{index:03d}" for index in range(MAX_READ_CONTAINERS)]
    assert facts.unread_containers == 4


def test_a_failed_reads_reason_is_short_and_clean() -> None:
    reason = read_failure_reason(
        403, 'pods "x" is forbidden:\x1b[31m User cannot get resource "pods/log"\n' + "y" * 500
    )
    assert reason.startswith('403 Forbidden: pods "x" is forbidden: User cannot get resource "pods/log"')
    assert len(reason) <= 160 and "\x1b" not in reason and "\n" not in reason
    assert read_failure_reason(None, "") == "no answer"
    assert read_failure_reason(500, "kubelet: connection refused").startswith("500 Internal Server Error: kubelet")


def test_the_likely_cause_follows_the_evidence() -> None:
    assert "aws-ofi-nccl" in likely_cause("efa", Verdict.SOCKET, SOCKET_LINE)
    assert "provider tcp;ofi_rxm" in likely_cause("efa", Verdict.OTHER, PROVIDER_TCP)
    ib = "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA"
    assert likely_cause("efa", Verdict.OTHER, ib).startswith("NCCL chose IB")
    # A prefix-stripped log (the corpus's aws-ofi-nccl-1055): read as the parser reads it.
    assert likely_cause("efa", Verdict.OTHER, "NCCL INFO Using network IB").startswith("NCCL chose IB")
    assert "NCCL_IB_DISABLE" in likely_cause("aks-rdma", Verdict.SOCKET, SOCKET_LINE)


# --- The index -----------------------------------------------------------------------------


def _index(*bodies: dict[str, Any], config: Config = ON) -> FactIndex:
    return facts_of([*healthy_pool(), *bodies], config)


def _verdict(uid: str, verdict: Verdict, evidence: str = SOCKET_LINE, reason: str = "") -> PodTransport:
    return PodTransport(uid, (FabricVerdict("efa", verdict, evidence, verdict is not Verdict.UNKNOWN),), reason)


def test_a_verdict_is_kept_only_for_the_pod_that_was_read() -> None:
    body = workload_pod("n1", "trainer-0", efa=32)
    index = _index(body)
    key, uid = ("ml", "trainer-0"), body["metadata"]["uid"]
    before = index.workload_versions[key]
    assert not index.put_transport(key, _verdict("another-uid", Verdict.SOCKET))  # replaced meanwhile
    assert not index.put_transport(("ml", "gone"), _verdict(uid, Verdict.SOCKET))  # deleted meanwhile
    assert index.put_transport(key, _verdict(uid, Verdict.SOCKET))
    assert index.workload_versions[key] > before  # the pool is judged again
    assert not index.put_transport(key, _verdict(uid, Verdict.SOCKET))  # nothing new
    index.remove(WORKLOAD_POD_FACTS, key)
    assert key not in index.transport


def test_a_pod_recreated_under_the_same_name_forgets_the_old_verdict() -> None:
    body = workload_pod("n1", "trainer-0", efa=32)
    index = _index(body)
    index.put_transport(("ml", "trainer-0"), _verdict(body["metadata"]["uid"], Verdict.SOCKET))
    again = workload_pod("n1", "trainer-0", efa=32)
    again["metadata"]["uid"] = "a-new-pod"
    extractor = FactsExtractor(ON)
    facts = extractor.workload_pod(again)
    assert facts is not None
    index.put(WORKLOAD_POD_FACTS, facts)
    assert ("ml", "trainer-0") not in index.transport


# --- What the evaluation publishes ---------------------------------------------------------


def _evaluate(index: FactIndex, config: Config = ON) -> Any:
    return evaluate(config, index)


def test_transport_counts_every_pod_that_requests_the_fabric_or_an_accelerator() -> None:
    pods = [
        *trainjob_pods("bert", ["n1", "n2"], efa=32),  # two pods of one TrainJob: socket
        workload_pod("n1", "fabric-0", efa=32, owner=owner_reference("Job", "batch/v1", "ok")),
        workload_pod("n2", "gpu-only", efa=None),  # an accelerator, no fabric: read, not an offender
        workload_pod("n2", "unread", efa=32),
        workload_pod("n1", "cpu", gpu=None, efa=None, env={"FI_PROVIDER": "efa"}),  # intent only: not read
    ]
    index = _index(*pods)
    uid = {body["metadata"]["name"]: body["metadata"]["uid"] for body in pods}
    index.put_transport(("ml", "bert-node-0-0"), _verdict(uid["bert-node-0-0"], Verdict.SOCKET))
    index.put_transport(
        ("ml", "bert-node-0-1"), _verdict(uid["bert-node-0-1"], Verdict.SOCKET, "node-b " + SOCKET_LINE)
    )
    index.put_transport(("ml", "fabric-0"), _verdict(uid["fabric-0"], Verdict.FABRIC, FABRIC_LINE))
    index.put_transport(("ml", "gpu-only"), _verdict(uid["gpu-only"], Verdict.SOCKET))
    evaluation = _evaluate(index)
    workloads = capability(evaluation, "efa-p5").status.workloads
    assert workloads is not None and workloads.transport is not None
    transport = workloads.transport.to_json()
    assert transport == {
        "fabric": {"pods": 1, "workloads": 1, "requestingFabricPods": 1},
        "socket": {"pods": 3, "workloads": 2, "requestingFabricPods": 2},
        "other": {"pods": 0, "workloads": 0, "requestingFabricPods": 0},
        "none": {"pods": 0, "workloads": 0, "requestingFabricPods": 0},
        "unknown": {"pods": 1, "workloads": 1, "requestingFabricPods": 1},
        "readErrors": [],
    }
    offenders = [(o.kind, o.name, o.pods, o.problem) for o in workloads.offenders if o.problem == FABRIC_NOT_USED]
    assert offenders == [("JobSet", "bert", 2, FABRIC_NOT_USED)]
    (event,) = [e for e in evaluation.workload_events if e.reason == FABRIC_NOT_USED]
    assert event.involved.name == "bert"
    assert event.message.startswith(f"2 pods on pool p5 request {EFA} but NCCL uses TCP sockets")
    # The first pod by name, its evidence line, and what probably went wrong.
    assert f'(pod ml/bert-node-0-0: "{SOCKET_LINE}")' in event.message
    assert "aws-ofi-nccl" in event.message


def test_another_network_is_fabric_not_used_too_with_its_own_cause() -> None:
    body = workload_pod("n1", "tcp-provider", efa=32)
    index = _index(body)
    index.put_transport(("ml", "tcp-provider"), _verdict(body["metadata"]["uid"], Verdict.OTHER, PROVIDER_TCP))
    evaluation = _evaluate(index)
    (event,) = [e for e in evaluation.workload_events if e.reason == FABRIC_NOT_USED]
    assert "NCCL uses another network" in event.message and "provider tcp;ofi_rxm, not efa" in event.message


def test_the_problems_a_status_shows_are_read_from_the_json_the_evaluation_publishes() -> None:
    """``problems_present`` reads a published status (the write lanes' rule): built here by the
    evaluation itself and dumped by alias, so a renamed field or verdict key fails this."""

    def problems(*pods: tuple[dict[str, Any], Verdict | None]) -> frozenset[str]:
        index = _index(*(body for body, _ in pods))
        for body, verdict in pods:
            if verdict is not None:
                key = (body["metadata"]["namespace"], body["metadata"]["name"])
                index.put_transport(key, _verdict(body["metadata"]["uid"], verdict))
        workloads = capability(_evaluate(index), "efa-p5").status.workloads
        assert workloads is not None
        return problems_present(workloads.to_json())

    fabric, socket = Verdict.FABRIC, Verdict.SOCKET
    assert problems((workload_pod("n1", "uses-it", efa=32), fabric)) == frozenset()
    assert problems((workload_pod("n1", "gpu-only", efa=None), None)) == {WITHOUT_FABRIC}
    intent_only = workload_pod("n1", "cpu", gpu=None, efa=None, env={"FI_PROVIDER": "efa"})
    assert problems((intent_only, None)) == {INTENT_WITHOUT_REQUEST}
    assert problems((workload_pod("n1", "on-tcp", efa=32), socket)) == {FABRIC_NOT_USED}
    assert problems((workload_pod("n1", "other-net", efa=32), Verdict.OTHER)) == {FABRIC_NOT_USED}
    # Sockets in a pod that asked for no fabric: that pod is without it, not failing to use it.
    assert problems((workload_pod("n1", "gpu-tcp", efa=None), socket)) == {WITHOUT_FABRIC}
    assert problems((workload_pod("n1", "unread", efa=32), Verdict.UNKNOWN)) == frozenset()


def test_an_event_already_recorded_is_not_built_again() -> None:
    body = workload_pod("n1", "trainer-0", efa=32)
    index = _index(body)
    index.put_transport(("ml", "trainer-0"), _verdict(body["metadata"]["uid"], Verdict.SOCKET))
    assert not [e for e in evaluate(ON, index, warned=lambda key: True).workload_events if e.reason == FABRIC_NOT_USED]


def test_read_errors_say_why_logs_could_not_be_read() -> None:
    bodies = [workload_pod("n1", f"p{index}", efa=32) for index in range(8)]
    index = _index(*bodies)
    for number, body in enumerate(bodies):
        reason = f"{[403, 404, 500, 500, 500, 503, 400, 401][number]} scripted"
        index.put_transport(("ml", f"p{number}"), _verdict(body["metadata"]["uid"], Verdict.UNKNOWN, "", reason))
    transport = capability(_evaluate(index), "efa-p5").status.workloads.transport  # type: ignore[union-attr]
    assert transport is not None and transport.unknown.pods == 8
    # The five with most pods, then by reason.
    assert [(entry.reason, entry.pods) for entry in transport.read_errors] == [
        ("500 scripted", 3),
        ("400 scripted", 1),
        ("401 scripted", 1),
        ("403 scripted", 1),
        ("404 scripted", 1),
    ]


def test_without_transport_nothing_about_it_is_published() -> None:
    body = workload_pod("n1", "trainer-0", efa=32)
    index = _index(body, config=OFF)
    workloads = capability(_evaluate(index, OFF), "efa-p5").status.workloads
    assert workloads is not None and workloads.transport is None
    assert "transport" not in workloads.to_json()


def test_evidence_in_an_event_is_the_bounded_clean_line() -> None:
    body = workload_pod("n1", "trainer-0", efa=32)
    index = _index(body)
    evidence = ("x" * EVIDENCE_CHARS)[:EVIDENCE_CHARS]
    index.put_transport(("ml", "trainer-0"), _verdict(body["metadata"]["uid"], Verdict.SOCKET, evidence))
    (event,) = [e for e in _evaluate(index).workload_events if e.reason == FABRIC_NOT_USED]
    assert evidence in event.message and len(event.message) < 1024
