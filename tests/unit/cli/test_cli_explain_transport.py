"""``fabriccap explain`` and ``evaluate`` with transport on: each pod of the pool (or of the
workload, for ``explain KIND/NS/NAME``) that requests the fabric or an accelerator, with what its
NCCL chose and the line of its log that shows it. From a snapshot the logs are not there (said
so, and ``evaluate`` leaves ``status.workloads.transport`` out); live, the pods' logs are read
through a fake API server, the same streamed read the operator does, bounded (review 66d F4)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator
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
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import DAEMON_SETS, NODES, PODS, ApiResource, pod_log
from fabriccap.offline.explain import explain, format_explain_output
from fabriccap.offline.logs import PodLogReads, cluster_log_pods
from fabriccap.offline.workload_explain import format_workload_explanation
from fabriccap_devtools.world import NODEGROUP, owner_reference, workload_pod
from support.builders import facts_of, healthy_pool
from support.cli import run, write_json, write_kubeconfig
from support.fakeapi import LogScript, fake_api
from support.nccl import REPO_ROOT, corpus_log

ON = build_config({"transport": {"enabled": True}})
EXAMPLE = REPO_ROOT / "examples" / "eks-cluster.json"
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


# -- A live ``fabriccap evaluate`` reads the logs the operator reads (review 66d F4)

JOBS = ApiResource.of("batch/v1", "jobs", "Job", namespaced=True).collection("ml")


async def run_live_evaluate(
    api: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str = "json"
) -> tuple[str, list[str]]:
    """The pool, its pods and bert's Job served, bert-0's log socket and gpu-only's refused:
    ``evaluate`` of it, live with transport on; its stdout and its stderr's lines."""
    serve_pool(api, healthy_pool(), pods())
    api.serve(JOBS, "Job", [bert_job()], "10")
    kubeconfig, config = script_logs(api, tmp_path)
    argv = ["evaluate", "--kubeconfig", str(kubeconfig), "--config", str(config), "-o", output]
    code = await asyncio.to_thread(main, argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err.splitlines()


def efa_cell(table: str, column: str) -> str:
    """The cell of ``column`` in the efa row of a ``-o wide`` table, by the header's offsets
    (an empty cell leaves no word to count)."""
    header, *rows = table.splitlines()
    (row,) = [row for row in rows if row.split()[1] == "efa"]
    start = header.index(column)
    following = header.find("   ", start + len(column))
    end = len(row) if following < 0 else next(i for i in range(following, len(header)) if header[i] != " ")
    return row[start:end].strip()


def efa_status(out: str) -> dict[str, Any]:
    (status,) = [item["status"] for item in json.loads(out)["items"] if item["status"]["fabric"] == "efa"]
    return dict(status)


async def test_a_live_evaluate_reads_the_logs_the_operator_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bert-0 requests EFA and its NCCL uses sockets: FabricNotUsed, as the operator publishes it
    (it printed every pod unknown, readErrors [] and no offender: no log was read)."""
    async with fake_api() as (api, _client):
        out, warnings = await run_live_evaluate(api, tmp_path, capsys)
        # The operator's rule: the pods that request the fabric or an accelerator (not cpu).
        assert [path for path, _ in api.log_reads] == [pod_log("ml", "bert-0"), pod_log("ml", "gpu-only")]
    transport = efa_status(out)["workloads"]["transport"]
    assert transport["socket"] == {"pods": 1, "workloads": 1, "requestingFabricPods": 1}
    assert transport["unknown"]["pods"] == 1
    assert [error["pods"] for error in transport["readErrors"]] == [1]
    assert transport["readErrors"][0]["reason"].startswith('403 Forbidden: pods "gpu-only" is forbidden')
    offenders = efa_status(out)["workloads"]["offenders"]
    assert [(entry["kind"], entry["name"], entry["problem"]) for entry in offenders if entry["kind"] == "Job"] == [
        ("Job", "bert", "FabricNotUsed")
    ]
    assert [line for line in warnings if "not read" in line] == [
        one_pods_log_not_read("403 Forbidden: grant get on pods/log (the chart's transport.enabled)")
    ]


def one_pods_log_not_read(why: str) -> str:
    """The stderr line of a live evaluate that left one pod's log unread for ``why``."""
    return (
        f"warning: not read ({why}): 1 pods' logs: their transport is unknown"
        " (status.workloads.transport.readErrors), not counted as sockets or the fabric"
    )


async def test_a_live_evaluates_tcp_column_counts_the_pods_on_sockets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with fake_api() as (api, _client):
        out, _ = await run_live_evaluate(api, tmp_path, capsys, output="wide")
    assert efa_cell(out, "TCP") == "1"


async def test_a_live_evaluate_reads_at_most_its_bound_and_says_what_it_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("fabriccap.offline.logs.MAX_CLUSTER_LOG_PODS", 1)
    async with fake_api() as (api, _client):
        out, warnings = await run_live_evaluate(api, tmp_path, capsys)
        assert [path for path, _ in api.log_reads] == [pod_log("ml", "bert-0")]  # the first by name
    transport = efa_status(out)["workloads"]["transport"]
    assert transport["unknown"]["pods"] == 1
    assert transport["readErrors"] == [{"reason": "a live evaluate reads at most 1 pods' logs", "pods": 1}]
    assert [line for line in warnings if "not read" in line] == [
        one_pods_log_not_read("a live evaluate reads at most 1 pods' logs")
    ]


async def test_a_live_evaluate_without_transport_reads_no_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with fake_api() as (api, _client):
        serve_pool(api, healthy_pool(), pods())
        api.serve(JOBS, "Job", [bert_job()], "10")
        kubeconfig = write_kubeconfig(tmp_path, api.url)
        code = await asyncio.to_thread(main, ["evaluate", "--kubeconfig", str(kubeconfig), "-o", "json"])
        assert api.log_reads == []
    out, err = capsys.readouterr()
    assert code == 0 and "transport" not in err and "not read" not in err
    assert "transport" not in efa_status(out)["workloads"]


async def test_log_reads_end_within_their_bounds_in_time() -> None:
    """A kubelet that sends nothing holds a read ``read_timeout``, and all of them ``max_seconds``:
    those pods are unknown, with why (the operator's own read would wait 60 s each)."""
    # 4 at a time (maxConcurrentReads): two rounds of 0.2 s, then a third cut at 0.5 s.
    names = [f"silent-{number:02}" for number in range(12)]
    bodies = [workload_pod("n1", name, efa=32) for name in names]
    index = facts_of([*healthy_pool(), *bodies], ON)
    async with fake_api() as (api, client):
        for name in names:
            api.logs[pod_log("ml", name)] = LogScript(silent=True)
        reads = PodLogReads(client, ON, index, max_pods=20, bound="-", read_timeout=0.2, max_seconds=0.5)
        started = asyncio.get_running_loop().time()
        await reads.read(cluster_log_pods(index))
        assert asyncio.get_running_loop().time() - started < 3.0
    assert set(reads.unread) == {("ml", name) for name in names}
    assert set(reads.unread.values()) == {"no answer within 0.2 s", "not read within 0.5 s"}
    for name in names:
        (verdict,) = index.transport[("ml", name)].verdicts
        assert verdict.verdict is Verdict.UNKNOWN
    assert [line.partition(")")[0] for line in reads.unread_lines()] == [
        "not read (no answer within 0.2 s",
        "not read (not read within 0.5 s",
    ]


def test_a_snapshot_with_transport_on_claims_no_tcp_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A snapshot has no logs: no transport block (its every pod unknown and 0 sockets read as an
    answer), the TCP column blank as kubectl prints a field not there, and stderr says why."""
    snapshot = write_json(tmp_path / "cluster.json", {"kind": "List", "items": [*healthy_pool(), *pods()]})
    config = tmp_path / "config.yaml"
    config.write_text("transport: {enabled: true}\n")
    code, out, err = run(["evaluate", "-f", snapshot, "--config", str(config), "-o", "json"], capsys)
    assert code == 0
    assert "transport" not in efa_status(out)["workloads"]
    assert err.splitlines() == [
        "warning: transport is on in the config, but a snapshot holds no pod logs: status.workloads.transport is"
        " left out (the TCP column is blank) and no FabricNotUsed offender can be found; evaluate the live"
        " cluster (no -f) to read the logs the operator reads"
    ]
    code, out, _ = run(["evaluate", "-f", snapshot, "--config", str(config), "-o", "wide"], capsys)
    assert efa_cell(out, "TCP") == "" and efa_cell(out, "NO-FABRIC") == "1"
    code, out, err = run(["evaluate", "-f", snapshot, "-o", "json"], capsys)
    assert err == ""  # transport off: nothing to say


async def test_a_live_explain_says_which_pods_its_bound_left_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past its bound a pod was shown as from a snapshot ('a snapshot has no logs'): live, why."""
    monkeypatch.setattr("fabriccap.offline.explain.MAX_LIVE_READS", 1)
    async with fake_api() as (api, _client):
        serve_pool(api, healthy_pool(), pods())
        kubeconfig, config = script_logs(api, tmp_path)
        code = await asyncio.to_thread(
            main, ["explain", "p5", "--kubeconfig", str(kubeconfig), "--config", str(config), "-o", "json"]
        )
        assert [path for path, _ in api.log_reads] == [pod_log("ml", "bert-0")]
    assert code == 0
    listed = {pod["name"]: pod for pod in json.loads(capsys.readouterr().out)["pods"]}
    assert listed["ml/gpu-only"]["read"] is True
    assert listed["ml/gpu-only"]["reason"] == "explain reads at most 1 pods' logs"


class SocketsAndRefused:
    """Container ``node``'s log shows NCCL on sockets (a real log of the corpus); ``node2``'s read
    is refused (403)."""

    @contextlib.asynccontextmanager
    async def stream(self, path: str, params: Any, **_: Any) -> AsyncIterator[AsyncIterator[bytes]]:
        if params["container"] == "node2":
            raise KubeError('pods "two" is forbidden', status=403)
        body = corpus_log("nccl-tests-166-channels-socket.log")

        async def chunks() -> AsyncIterator[bytes]:
            yield body if isinstance(body, bytes) else body.encode()

        yield chunks()


async def test_a_pod_one_of_whose_logs_shows_sockets_is_not_said_unread() -> None:
    """Review 66f F6: one container's log proves sockets and the other's read is refused: the
    pod is judged by what was read (sockets, counted in TCP), and stderr said its transport was
    unknown, "not counted as sockets"."""
    on = build_config({"transport": {"enabled": True}})
    pod = workload_pod("n1", "two", efa=32)
    second = copy.deepcopy(pod["spec"]["containers"][0]) | {"name": "node2"}
    pod["spec"]["containers"].append(second)
    pod["status"]["containerStatuses"].append(copy.deepcopy(pod["status"]["containerStatuses"][0]) | {"name": "node2"})
    index = facts_of([*healthy_pool(), pod], on)
    reads = PodLogReads(SocketsAndRefused(), on, index, max_pods=20, bound="-")  # type: ignore[arg-type]
    await reads.read(cluster_log_pods(index))
    (verdict,) = index.transport[("ml", "two")].verdicts
    assert verdict.verdict is Verdict.SOCKET
    assert reads.unread_lines() == []


def test_explain_of_a_snapshot_prints_no_transport_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Review 66f F7: with transport on, ``evaluate -f`` leaves ``status.workloads.transport``
    out (no log was read: 0 sockets would read as an answer); ``explain -f -o json`` of the same
    pool printed it, 0 sockets."""
    config = tmp_path / "config.yaml"
    config.write_text("transport: {enabled: true}\n")
    code, out, err = run(["explain", "p5-training", "-f", str(EXAMPLE), "--config", str(config), "-o", "json"], capsys)
    assert code == 0, err
    workloads = json.loads(out)["status"]["workloads"]
    assert "transport" not in workloads and workloads["requestingFabric"]["pods"] > 0
