"""``fabriccap explain`` with transport on: each pod of the pool (or of the workload, for
``explain KIND/NS/NAME``) that requests the fabric or an accelerator, with what its NCCL chose
and the line of its log that shows it. From a snapshot the logs are not there (said so); live,
the pods' logs are read through a fake API server, the same streamed read the operator does."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from fabriccap.cli.commands import main
from fabriccap.core.config import build_config
from fabriccap.core.evaluate import evaluate
from fabriccap.core.explain import PodExplanation
from fabriccap.core.transport import Verdict
from fabriccap.core.verdicts import FabricVerdict, PodTransport
from fabriccap.core.workload_explain import NOTHING_TO_CHANGE, explain_workload
from fabriccap.kube.paths import DAEMON_SETS, NODES, PODS, ApiResource, pod_log
from fabriccap.offline.explain import explain, format_explain_output
from fabriccap.offline.workload_explain import format_workload_explanation
from fabriccap_devtools.world import NODEGROUP, owner_reference, workload_pod
from support.builders import facts_of, healthy_pool
from support.cli import write_kubeconfig
from support.fakeapi import LogScript, fake_api
from support.nccl import corpus_log

ON = build_config({"transport": {"enabled": True}})
SOCKET_LINE = "ip-10-0-0-1:41:52 [0] NCCL INFO Using network Socket"
EFA = "vpc.amazonaws.com/efa"


def pods() -> list[dict[str, Any]]:
    job = owner_reference("Job", "batch/v1", "bert")
    return [
        workload_pod("n1", "bert-0", efa=32, owner=job),
        workload_pod("n2", "gpu-only", efa=None),
        workload_pod("n1", "cpu", gpu=None, efa=None, env={"FI_PROVIDER": "efa"}),  # no accelerator: not listed
    ]


def test_from_a_snapshot_the_pods_are_listed_as_not_read() -> None:
    explanation = explain(ON, facts_of([*healthy_pool(), *pods()], ON), "p5")
    assert explanation.pods is not None
    assert [(pod.name, pod.requests_fabric, pod.read) for pod in explanation.pods] == [
        ("ml/bert-0", True, False),
        ("ml/gpu-only", False, False),
    ]
    text = format_explain_output(explanation, "table")
    assert "not read (a snapshot has no logs" in text


def test_without_transport_there_is_no_pods_part() -> None:
    config = build_config({})
    explanation = explain(config, facts_of([*healthy_pool(), *pods()], config), "p5")
    assert explanation.pods is None
    assert "Pods (what their NCCL chose" not in format_explain_output(explanation, "table")


def test_each_pods_verdict_and_evidence_are_shown() -> None:
    bodies = pods()
    index = facts_of([*healthy_pool(), *bodies], ON)
    socket = FabricVerdict("efa", Verdict.SOCKET, SOCKET_LINE, decisive=True)
    index.put_transport(("ml", "bert-0"), PodTransport(bodies[0]["metadata"]["uid"], (socket,)))
    unknown = FabricVerdict("efa", Verdict.UNKNOWN, "", decisive=False)
    refused = PodTransport(bodies[1]["metadata"]["uid"], (unknown,), "403 Forbidden: no get on pods/log")
    index.put_transport(("ml", "gpu-only"), refused)
    explanation = explain(ON, index, "p5")
    assert explanation.pods == [
        PodExplanation(
            name="ml/bert-0",
            node="n1",
            owner="Job/bert",
            requests_fabric=True,
            transport=Verdict.SOCKET,
            evidence=SOCKET_LINE,
            read=True,
        ),
        PodExplanation(
            name="ml/gpu-only",
            node="n2",
            owner="Pod/gpu-only",
            requests_fabric=False,
            transport=Verdict.UNKNOWN,
            read=True,
            reason="403 Forbidden: no get on pods/log",
        ),
    ]
    table = format_explain_output(explanation, "table")
    rows = table[table.index("Pods (") :].splitlines()
    assert rows[1].split()[:6] == ["POD", "NODE", "OWNER", "REQUESTS-FABRIC", "TRANSPORT", "EVIDENCE"]
    assert rows[2].split()[:5] == ["ml/bert-0", "n1", "Job/bert", "yes", "socket"]
    assert rows[2].endswith(SOCKET_LINE)
    assert rows[3].endswith("not read: 403 Forbidden: no get on pods/log")
    as_json = json.loads(format_explain_output(explanation, "json"))
    assert as_json["pods"][0] == {
        "name": "ml/bert-0",
        "node": "n1",
        "owner": "Job/bert",
        "requestsFabric": True,
        "transport": "socket",
        "evidence": SOCKET_LINE,
        "read": True,
        "reason": "",
    }


def serve_pool(api: Any, cluster: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
    """The healthy pool's nodes, plugin DaemonSet and pods, and ``pods``, as the fake API server's."""
    api.serve(NODES.collection(), "Node", [b for b in cluster if b["kind"] == "Node"], "10")
    daemon_sets = [b for b in cluster if b["kind"] == "DaemonSet"]
    api.serve(DAEMON_SETS.collection("kube-system"), "DaemonSet", daemon_sets, "10")
    api.serve(PODS.collection(), "Pod", [*[b for b in cluster if b["kind"] == "Pod"], *pods], "10")


def script_logs(api: Any, tmp_path: Path) -> tuple[Path, Path]:
    """bert-0's log says sockets, gpu-only's is refused; a kubeconfig and a transport-on config."""
    api.logs[pod_log("ml", "bert-0")] = LogScript(chunks=lambda: [corpus_log("nccl-tests-166-channels-socket.log")])
    api.logs[pod_log("ml", "gpu-only")] = LogScript(status=403, message='pods "gpu-only" is forbidden')
    config = tmp_path / "config.yaml"
    config.write_text("transport: {enabled: true}\n")
    return write_kubeconfig(tmp_path, api.url), config


def bert_job() -> dict[str, Any]:
    """The batch Job that owns bert-0: it selects p5 and asks for EFA (nothing to change there)."""
    container = {"name": "trainer", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8", EFA: "32"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "bert", "namespace": "ml"},
        "spec": {"template": {"spec": {"nodeSelector": {NODEGROUP: "p5"}, "containers": [container]}}},
    }


def test_a_workloads_pods_show_what_their_nccl_chose() -> None:
    """It asks for everything it should, yet NCCL uses sockets: the note says so with the Event's
    words (the pod, its log line, the likely cause), and only its own pods are listed."""
    bodies = pods()
    index = facts_of([*healthy_pool(), *bodies, bert_job()], ON)
    socket = FabricVerdict("efa", Verdict.SOCKET, SOCKET_LINE, decisive=True)
    index.put_transport(("ml", "bert-0"), PodTransport(bodies[0]["metadata"]["uid"], (socket,)))
    explanation = explain_workload(ON, evaluate(ON, index), index, bert_job())
    assert explanation.pods is not None
    assert [(pod.name, pod.transport, pod.evidence) for pod in explanation.pods] == [
        ("ml/bert-0", Verdict.SOCKET, SOCKET_LINE)
    ]
    assert explanation.change == NOTHING_TO_CHANGE
    assert explanation.note is not None
    assert explanation.note.startswith(
        f'1 of its pods request {EFA} but NCCL uses TCP sockets (pod ml/bert-0: "{SOCKET_LINE}"); '
        "likely cause: the image lacks the aws-ofi-nccl plugin"
    )
    table = format_workload_explanation(explanation, "table")
    assert "Pods (what their NCCL chose" in table and table.rstrip().endswith(SOCKET_LINE)


def test_a_workload_whose_nccl_uses_the_fabric_has_no_note() -> None:
    bodies = pods()
    index = facts_of([*healthy_pool(), *bodies, bert_job()], ON)
    fabric = FabricVerdict("efa", Verdict.FABRIC, "NET/OFI Selected provider is efa", decisive=True)
    index.put_transport(("ml", "bert-0"), PodTransport(bodies[0]["metadata"]["uid"], (fabric,)))
    explanation = explain_workload(ON, evaluate(ON, index), index, bert_job())
    assert explanation.pods is not None and [pod.transport for pod in explanation.pods] == [Verdict.FABRIC]
    assert explanation.note is None
    off = build_config({})
    assert explain_workload(off, evaluate(off, index), index, bert_job()).pods is None


async def test_live_explain_of_a_workload_reads_its_pods_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bodies = pods()
    cluster = healthy_pool()
    jobs = ApiResource.of("batch/v1", "jobs", "Job", namespaced=True).collection("ml")
    async with fake_api() as (api, _client):
        serve_pool(api, cluster, bodies)
        api.serve(jobs, "Job", [bert_job()], "10")
        kubeconfig, config = script_logs(api, tmp_path)

        code = await asyncio.to_thread(
            main, ["explain", "job/ml/bert", "--kubeconfig", str(kubeconfig), "--config", str(config), "-o", "json"]
        )
        # The workload's own pods only: gpu-only is another workload's.
        assert [path for path, _ in api.log_reads] == [pod_log("ml", "bert-0")]
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert [(pod["name"], pod["transport"]) for pod in result["pods"]] == [("ml/bert-0", "socket")]
    assert "via NET/Socket" in result["pods"][0]["evidence"]
    assert "but NCCL uses TCP sockets" in result["note"]


async def test_live_explain_reads_the_pools_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bodies = pods()
    cluster = healthy_pool()
    async with fake_api() as (api, _client):
        serve_pool(api, cluster, bodies)
        kubeconfig, config = script_logs(api, tmp_path)

        code = await asyncio.to_thread(
            main, ["explain", "p5", "--kubeconfig", str(kubeconfig), "--config", str(config), "-o", "json"]
        )
        assert [path for path, _ in api.log_reads] == [pod_log("ml", "bert-0"), pod_log("ml", "gpu-only")]
    assert code == 0
    listed = {pod["name"]: pod for pod in json.loads(capsys.readouterr().out)["pods"]}
    assert listed["ml/bert-0"]["transport"] == "socket" and "via NET/Socket" in listed["ml/bert-0"]["evidence"]
    assert listed["ml/gpu-only"]["transport"] == "unknown"
    assert listed["ml/gpu-only"]["reason"].startswith('403 Forbidden: pods "gpu-only" is forbidden')
