"""``fabriccap explain``: the table, -o json, exit codes and one-line errors, as a user runs it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabriccap.core.stamping import strip_volatile
from fabriccap.offline.explain import NODE_COLUMNS, workload_lines
from support.builders import KARPENTER, daemon_set, healthy_pool, kube_list, node, plugin_pods, pod
from support.cli import Result, assert_one_line_error, closed_port, run, write_json


@pytest.fixture
def partial_cluster(tmp_path: Path) -> str:
    """Pool p5: n1, n2 advertise 32; n3 advertises 0 though its plugin pod is Ready; n4 is
    cordoned; n5 has a plugin pod that is not Ready. Pool train: Ready."""
    bodies = [
        daemon_set(),
        node("n1"),
        node("n2"),
        node("n3", efa=0),
        node("n4", cordoned=True),
        node("n5"),
        *plugin_pods(["n1", "n2", "n3", "n4"]),
        pod("n5", ready=False),
        *healthy_pool(pool="train", prefix="t"),
    ]
    return write_json(tmp_path / "cluster.json", kube_list(bodies))


def rows(out: str) -> dict[str, dict[str, str]]:
    """The node table, cut at the header's column starts (an empty cell is '-')."""
    lines = out.splitlines()
    header_index = next(index for index, line in enumerate(lines) if line.startswith("NODE "))
    header = lines[header_index]
    starts = [header.index(column) for column in NODE_COLUMNS]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    table: dict[str, dict[str, str]] = {}
    for line in lines[header_index + 1 :]:
        if not line.strip():
            break
        cells = {column: line[start:end].strip() for column, (start, end) in zip(NODE_COLUMNS, bounds, strict=True)}
        table[cells["NODE"]] = cells
    return table


def test_the_table_shows_each_node_and_why(partial_cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["explain", "p5", "-f", partial_cluster], capsys)
    assert (code, err) == (0, "")
    assert out.splitlines()[0].split() == ["Name:", "efa-p5"]
    table = rows(out)
    assert list(table) == ["n1", "n2", "n3", "n4", "n5"]
    assert {name: (cells["COUNT"], cells["PLUGIN"], cells["LEFT-OUT"]) for name, cells in table.items()} == {
        "n1": ("32", "Ready", "-"),
        "n2": ("32", "Ready", "-"),
        "n3": ("0", "Ready", "-"),
        "n4": ("32", "Ready", "cordoned"),
        "n5": ("32", "NotReady", "-"),
    }
    assert table["n3"]["SOURCE"] == "-" and table["n1"]["SOURCE"] == "devicePlugin"
    assert (table["n3"]["INSTANCE-TYPE"], table["n3"]["MAX"]) == ("p5.48xlarge", "32")
    assert table["n3"]["GAP"] == "pluginReadyNotAdvertised"
    assert table["n3"]["BREAKS"] == "Advertised,Homogeneous,MatchesInstanceType"
    assert table["n5"]["BREAKS"] == "DevicePluginReady"
    assert table["n4"]["BREAKS"] == "not judged"
    assert table["n1"]["BREAKS"] == "-"
    why = out[out.index("\nWhy:\n") : out.index("\nConditions:\n")]
    assert "n3 (keeps the pool from Ready)" in why
    assert (
        "Advertised NotAdvertised: advertises 0: its device-plugin pod is Ready, yet the node advertises nothing" in why
    )
    assert "n1" not in why
    assert "Ready                 False    PartialRollout" in out
    assert "\nWorkloads:\n" in out


def test_json_carries_the_status_evaluate_computes(partial_cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["explain", "efa-p5", "-f", partial_cluster, "-o", "json"], capsys)
    assert (code, err) == (0, "")
    explanation = json.loads(out)
    assert (explanation["name"], explanation["pool"]) == (
        "efa-p5",
        {"key": "eks.amazonaws.com/nodegroup", "value": "p5"},
    )
    by_name = {entry["name"]: entry for entry in explanation["nodes"]}
    assert by_name["n3"]["count"] == 0 and by_name["n3"]["gaps"] == ["pluginReadyNotAdvertised"]
    assert by_name["n5"]["pluginPods"][0]["ready"] is False
    assert {finding["reason"] for finding in by_name["n3"]["findings"]} >= {"NotAdvertised", "PartialRollout"}

    code, out, _ = run(["evaluate", "-f", partial_cluster, "-o", "json"], capsys)
    published = {item["metadata"]["name"]: item["status"] for item in json.loads(out)["items"]}
    assert strip_volatile(explanation["status"]) == strip_volatile(published["efa-p5"])


@pytest.mark.parametrize(("pool", "code"), [("train", 0), ("p5", 1)])
def test_require_ready_exits_1_unless_the_pool_is_ready(
    pool: str, code: int, partial_cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["explain", pool, "-f", partial_cluster, "--require-ready"], capsys)[0] == code
    assert run(["explain", pool, "-f", partial_cluster], capsys)[0] == 0


def test_snapshot_from_stdin(
    partial_cluster: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(Path(partial_cluster).read_text()))
    code, out, _ = run(["explain", "train", "-f", "-", "-o", "json"], capsys)
    assert code == 0 and json.loads(out)["status"]["uniformCount"] == 32


@pytest.mark.parametrize(
    ("extra_bodies", "query", "fragments"),
    [
        ([], "nope", ["error: no FabricCapability or pool 'nope'", "efa-p5, efa-train"]),
        (
            [node("k1", pool="p5", pool_key=KARPENTER)],
            "p5",
            # Both names are hashed in the collision (round 3); each is named with its pool.
            ["error: 'p5' matches 2 FabricCapabilities", "(efa, pool eks.amazonaws.com/nodegroup=p5)"],
        ),
    ],
)
def test_nothing_or_many_is_a_one_line_error(
    extra_bodies: list[dict[str, Any]],
    query: str,
    fragments: list[str],
    partial_cluster: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    items = json.loads(Path(partial_cluster).read_text())["items"] + extra_bodies
    snapshot = write_json(tmp_path / "more.json", kube_list(items))
    assert_one_line_error(run(["explain", query, "-f", snapshot], capsys), *fragments)


def test_input_and_config_errors_are_evaluates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert_one_line_error(run(["explain", "p5", "-f", str(broken)], capsys), f"error: {broken}: malformed")
    config = tmp_path / "config.yaml"
    config.write_text("bogus: 1\n")
    cluster = write_json(tmp_path / "ok.json", kube_list(healthy_pool()))
    assert_one_line_error(run(["explain", "p5", "-f", cluster, "--config", str(config)], capsys), "bogus")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["explain"], "the following arguments are required: NAME|POOL"),
        (["explain", "p5", "-o", "yaml"], "invalid choice: 'yaml'"),
        (["explain", "p5", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_point_at_explains_help(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_one_line_error(run(argv, capsys), fragment, "(see 'fabriccap explain --help')")


def _two_context_kubeconfig(tmp_path: Path, current_port: int, other_port: int) -> str:
    def cluster(name: str, port: int) -> dict[str, Any]:
        return {"name": name, "cluster": {"server": f"https://127.0.0.1:{port}"}}

    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster("current", current_port), cluster("other", other_port)],
                "users": [{"name": "u", "user": {"token": "not-a-secret"}}],
                "contexts": [
                    {"name": "current", "context": {"cluster": "current", "user": "u"}},
                    {"name": "other", "context": {"cluster": "other", "user": "u"}},
                ],
                "current-context": "current",
            }
        )
    )
    return str(path)


@pytest.mark.parametrize("command", [["evaluate"], ["explain", "p5"]])
def test_live_mode_reads_the_context_named(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    current, other = closed_port(), closed_port()
    kubeconfig = _two_context_kubeconfig(tmp_path, current, other)
    result: Result = run([*command, "--kubeconfig", kubeconfig], capsys)
    assert_one_line_error(result, "cannot reach the Kubernetes API", f"127.0.0.1:{current}")
    result = run([*command, "--kubeconfig", kubeconfig, "--context", "other"], capsys)
    assert_one_line_error(result, "cannot reach the Kubernetes API", f"127.0.0.1:{other}")
    result = run([*command, "--kubeconfig", kubeconfig, "--context", "absent"], capsys)
    assert_one_line_error(result, "context absent does not exist")


def test_live_mode_is_used_without_f(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    port = closed_port()
    monkeypatch.setenv("KUBECONFIG", _two_context_kubeconfig(tmp_path, port, port))
    assert os.environ["KUBECONFIG"]
    assert_one_line_error(run(["explain", "p5"], capsys), f"127.0.0.1:{port}")


def test_workloads_are_shown_from_the_status_in_the_specs_shape() -> None:
    """``status.workloads`` comes with workload reporting (docs/workloads.md); the renderer reads
    the published shape, so it shows as soon as the evaluation fills it in."""
    workloads = {
        "requestingFabric": {"pods": 8, "workloads": 1},
        "withoutFabric": {"pods": 2, "workloads": 1},
        "intentWithoutRequest": {"pods": 0, "workloads": 0},
        "offenders": [{"namespace": "ml", "kind": "PyTorchJob", "name": "llm", "pods": 2, "problem": "withoutFabric"}],
    }
    lines = workload_lines(workloads)
    assert lines[0] == "  requesting the fabric: 8 pods, 1 workloads"
    assert lines[1] == "  accelerator without the fabric (TCP fallback): 2 pods, 1 workloads"
    assert lines[3].split() == ["NAMESPACE", "KIND", "NAME", "PODS", "PROBLEM"]
    assert lines[4].split() == ["ml", "PyTorchJob", "llm", "2", "withoutFabric"]
    assert workload_lines(None)[0].startswith("  not reported")
