"""``fabriccap evaluate``: outputs, inputs, exit codes, one-line errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabriccap_devtools import world
from support.builders import KARPENTER, daemon_set, healthy_pool, kube_list, node, plugin_pods, pod
from support.cli import Result, assert_one_line_error, closed_port, run, write_json, write_kubeconfig


@pytest.fixture
def mixed_cluster(tmp_path: Path) -> str:
    """Three pools: train (Ready), infer (not advertised), spot (karpenter, mixed counts)."""
    bodies = [
        *healthy_pool(pool="train", prefix="t"),
        node("i1", pool="infer", efa=0),
        node("k1", pool="spot", pool_key=KARPENTER, efa=16),
        node("k2", pool="spot", pool_key=KARPENTER, efa=32),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "kube-system"}},
    ]
    # Reverse order: the output order must not follow the input order.
    return write_json(tmp_path / "cluster.json", kube_list(list(reversed(bodies))))


@pytest.fixture
def ready_cluster(tmp_path: Path) -> str:
    return write_json(tmp_path / "ready.json", kube_list(healthy_pool(pool="train")))


# --- success -----------------------------------------------------------------------------------------


def test_table_output(mixed_cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["evaluate", "-f", mixed_cluster], capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "FABRIC", "POOL", "NODES", "ADVERTISING", "COUNT", "GAP", "READY", "REASON"]
    # Cut at the header's column starts: like kubectl, an absent value is an empty cell.
    starts = [lines[0].index(column) for column in lines[0].split()]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    rows = {cells[0]: cells[1:] for cells in ([line[a:b].strip() for a, b in bounds] for line in lines[1:])}
    assert rows["efa-train"] == ["efa", "train", "2", "2", "32", "0", "True", "UniformCapability"]
    assert rows["efa-infer"] == ["efa", "infer", "1", "0", "0", "0", "False", "NotAdvertised"]
    # A Karpenter NodePool's pool is readable too when no other pool is named spot (round 3).
    assert rows["efa-spot"] == ["efa", "spot", "2", "2", "", "0", "False", "MixedCounts"]


def test_json_output_is_a_v1_list_sorted_by_name(mixed_cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["evaluate", "-f", mixed_cluster, "-o", "json"], capsys)
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert document["apiVersion"] == "v1"
    assert document["kind"] == "List"
    names = [item["metadata"]["name"] for item in document["items"]]
    assert len(names) == 3
    assert names == sorted(names)
    train = document["items"][names.index("efa-train")]
    assert train["apiVersion"] == "fabriccap.dev/v1alpha1"
    assert train["kind"] == "FabricCapability"
    assert train["status"]["uniformCount"] == 32
    assert train["status"]["observedGeneration"] == 1
    ready = next(c for c in train["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert ready["lastTransitionTime"].endswith("Z")


def test_yaml_output(mixed_cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["evaluate", "-f", mixed_cluster, "-o", "yaml"], capsys)
    assert code == 0
    document = yaml.safe_load(out)
    assert document["kind"] == "List"
    assert [item["metadata"]["name"] for item in document["items"]][:2] == ["efa-infer", "efa-spot"]
    assert document["items"][2]["status"]["pool"] == {"key": "eks.amazonaws.com/nodegroup", "value": "train"}


def test_json_and_yaml_carry_the_same_objects(mixed_cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, as_json, _ = run(["evaluate", "-f", mixed_cluster, "-o", "json"], capsys)
    _, as_yaml, _ = run(["evaluate", "-f", mixed_cluster, "-o", "yaml"], capsys)

    def without_times(document: dict[str, Any]) -> dict[str, Any]:
        for item in document["items"]:
            for condition in item["status"]["conditions"]:
                condition.pop("lastTransitionTime")
        return document

    assert without_times(json.loads(as_json)) == without_times(yaml.safe_load(as_yaml))


def test_stdin(ready_cluster: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(Path(ready_cluster).read_text()))
    code, out, _ = run(["evaluate", "-f", "-", "-o", "json"], capsys)
    assert code == 0
    assert [item["metadata"]["name"] for item in json.loads(out)["items"]] == ["efa-train"]


def test_multiple_files_are_merged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = write_json(tmp_path / "nodes.json", kube_list([node("n1"), node("n2")]))
    plugin = write_json(tmp_path / "plugin.json", kube_list([daemon_set(), *plugin_pods(["n1", "n2"])]))
    code, out, _ = run(["evaluate", "-f", nodes, "-f", plugin, "-o", "json", "--require-ready"], capsys)
    assert code == 0
    (item,) = json.loads(out)["items"]
    assert item["status"]["devicePlugin"]["readyNodes"] == 2
    # Without the second file the plugin is missing.
    code, out, _ = run(["evaluate", "-f", nodes, "-o", "json", "--require-ready"], capsys)
    assert code == 1
    assert json.loads(out)["items"][0]["status"]["devicePlugin"]["daemonSets"] == []


def test_single_object_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_json(tmp_path / "node.json", node("n1", pool="solo"))
    code, out, _ = run(["evaluate", "-f", path], capsys)
    assert code == 0
    assert "efa-solo" in out
    assert "DevicePluginGap" in out


def test_typed_list_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = [{key: value for key, value in node("n1", pool="typed").items() if key != "kind"}]
    path = write_json(tmp_path / "nodes.json", {"apiVersion": "v1", "kind": "NodeList", "items": items})
    code, out, _ = run(["evaluate", "-f", path], capsys)
    assert code == 0
    assert "efa-typed" in out


def test_yaml_multi_document_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cluster.yaml"
    documents = [daemon_set(), node("n1", pool="y"), None, pod("n1"), kube_list([node("n2", pool="y"), pod("n2")])]
    path.write_text(yaml.safe_dump_all(documents))
    code, out, _ = run(["evaluate", "-f", str(path), "-o", "json", "--require-ready"], capsys)
    assert code == 0
    (item,) = json.loads(out)["items"]
    assert item["metadata"]["name"] == "efa-y"
    assert item["status"]["nodes"] == 2


def test_other_kinds_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    others: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"}, "spec": "odd"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": "not even a mapping"},
        {"apiVersion": "v1", "kind": "Event"},
    ]
    path = write_json(tmp_path / "others.json", kube_list(others))
    code, out, err = run(["evaluate", "-f", path], capsys)
    # As kubectl: the words on stderr, nothing on stdout for a script to parse (review 66d F8).
    assert (code, out, err) == (0, "", "No resources found\n")


@pytest.mark.parametrize(
    ("fixture", "flags", "expected"),
    [
        ("ready_cluster", ["--require-ready"], 0),
        ("mixed_cluster", ["--require-ready"], 1),
        ("mixed_cluster", [], 0),
    ],
)
def test_require_ready(
    fixture: str, flags: list[str], expected: int, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    path = request.getfixturevalue(fixture)
    code, out, _ = run(["evaluate", "-f", path, *flags], capsys)
    assert code == expected
    assert out.startswith("NAME")


def test_require_ready_without_pools_is_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_json(tmp_path / "cpu.json", kube_list([node("c1", efa=None, gpu=None)]))
    assert run(["evaluate", "-f", path, "--require-ready"], capsys)[0] == 1
    assert run(["evaluate", "-f", path], capsys)[0] == 0


def test_require_ready_one_pool_not_ready(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bodies = [*healthy_pool(pool="good"), node("x1", pool="bad", efa=0), pod("x1")]
    path = write_json(tmp_path / "c.json", kube_list(bodies))
    code, out, _ = run(["evaluate", "-f", path, "--require-ready", "-o", "json"], capsys)
    assert code == 1
    statuses = {
        item["metadata"]["name"]: next(c for c in item["status"]["conditions"] if c["type"] == "Ready")["status"]
        for item in json.loads(out)["items"]
    }
    assert statuses == {"efa-bad": "False", "efa-good": "True"}


def test_custom_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("poolLabels: [karpenter.sh/nodepool]\n")
    path = write_json(tmp_path / "c.json", kube_list([node("n1", pool="ng", labels={KARPENTER: "kp"})]))
    code, out, _ = run(["evaluate", "-f", path, "--config", str(config), "-o", "json"], capsys)
    assert code == 0
    assert [item["metadata"]["name"] for item in json.loads(out)["items"]] == ["efa-kp"]


# --- exit 2 -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        pytest.param('{"kind": "List", "items": [', ["malformed JSON at line 1"], id="malformed-json-object"),
        pytest.param('[{"kind": "Node",]', ["malformed JSON"], id="malformed-json-array"),
        pytest.param("kind: Node\nmetadata: [unclosed\n", ["malformed YAML at line"], id="malformed-yaml"),
        pytest.param("kind: Node\n  bad: indent\n", ["malformed YAML"], id="malformed-yaml-indent"),
        pytest.param("[1, 2]", ["not a Kubernetes object"], id="json-array"),
        pytest.param('{"a": 1}', ["not a Kubernetes object"], id="object-without-kind"),
        pytest.param("just text", ["not a Kubernetes object"], id="yaml-scalar"),
        pytest.param('{"kind": 7}', ["not a Kubernetes object"], id="kind-not-a-string"),
        pytest.param('{"kind": "List", "items": {"a": 1}}', ["List.items is not a list"], id="items-not-a-list"),
        pytest.param('{"kind": "List", "items": [3]}', ["items[0] is not an object"], id="item-not-an-object"),
        pytest.param('{"kind": "List", "items": [{"a": 1}]}', ["items[0] is not a Kubernetes object"], id="item-kind"),
        pytest.param("", ["empty input"], id="empty"),
        pytest.param(
            json.dumps(kube_list([node("n1", efa="lots", efa_capacity=32)])),
            ["Node n1: status.allocatable[vpc.amazonaws.com/efa]: 'lots' is not a quantity"],
            id="invalid-quantity",
        ),
        pytest.param(
            "kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {vpc.amazonaws.com/efa: .inf}}\n",
            ["Node n1", "not a quantity"],
            id="infinite-quantity",
        ),
        pytest.param('{"kind": "Node", "metadata": {"labels": {}}}', ["Node without metadata.name"], id="node-no-name"),
        pytest.param(
            json.dumps(kube_list([world.dranet_daemon_set(), {**world.device_taint_rule("x"), "metadata": {}}])),
            ["DeviceTaintRule without metadata.name"],
            id="device-taint-rule-no-name",
        ),
        pytest.param(
            json.dumps({**pod("n1", name="p"), "status": "Running"}),
            ["Pod kube-system/p: spec/status is not a mapping"],
            id="malformed-pod",
        ),
    ],
)
def test_bad_input_exit_2_one_line(
    content: str, fragments: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "input.json"
    path.write_text(content)
    assert_one_line_error(run(["evaluate", "-f", str(path)], capsys), f"error: {path}: ", *fragments)


def test_bad_input_after_good_input_prints_nothing(
    ready_cluster: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert_one_line_error(run(["evaluate", "-f", ready_cluster, "-f", str(bad)], capsys), str(bad))


def test_bad_stdin_names_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("{oops"))
    assert_one_line_error(run(["evaluate", "-f", "-"], capsys), "error: <stdin>: malformed JSON")


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "absent.json"
    assert_one_line_error(run(["evaluate", "-f", str(path)], capsys), f"error: {path}: no such file")


def test_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(run(["evaluate", "-f", str(tmp_path)], capsys), f"error: {tmp_path}: is a directory")


def test_binary_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(b"\xff\xfe\x00\x01\x80")
    assert_one_line_error(run(["evaluate", "-f", str(path)], capsys), f"error: {path}: not a text file")


@pytest.mark.parametrize(
    ("config_text", "fragments"),
    [
        ("fabrics:\n- name: efa\n  instanceTypes: {p5.48xlarge: -1}\n", ["fabrics.0.instanceTypes", "negative"]),
        ("poolLabels: [Not A Label]\n", ["poolLabels", "not a valid label key"]),
        ("bogus: 1\n", ["bogus", "Extra inputs"]),
        ("fabrics: [name: efa\n", ["not valid YAML"]),
        ("- a\n- b\n", ["must be a mapping"]),
    ],
)
def test_invalid_config_exit_2(
    config_text: str, fragments: list[str], ready_cluster: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(config_text)
    result = run(["evaluate", "-f", ready_cluster, "--config", str(config)], capsys)
    assert_one_line_error(result, f"error: {config}: ", *fragments)


def test_missing_config_exit_2(ready_cluster: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "absent.yaml"
    result = run(["evaluate", "-f", ready_cluster, "--config", str(config)], capsys)
    assert_one_line_error(result, f"error: {config}: cannot read config")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["evaluate", "--bogus"], "unrecognized arguments: --bogus"),
        (["evaluate", "-o", "xml"], "invalid choice: 'xml'"),
        (["evaluate", "-f"], "expected one argument"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        ([], "required"),
    ],
)
def test_usage_error_exit_2(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(run(argv, capsys), fragment)


# --- live mode ---------------------------------------------------------------------------------------


def _kubeconfig(tmp_path: Path, port: int) -> Path:
    return write_kubeconfig(tmp_path, f"https://127.0.0.1:{port}", token="not-a-secret")


def _live_env(kubeconfig: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("KUBERNETES_SERVICE")}
    env["KUBECONFIG"] = str(kubeconfig)
    return env


def test_live_mode_unreachable_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In-process, --kubeconfig: kubernetes_asyncio reads $KUBECONFIG once, at import time.
    port = closed_port()
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kubeconfig = str(_kubeconfig(tmp_path, port))
    result = run(["evaluate", "--kubeconfig", kubeconfig], capsys)
    assert_one_line_error(result, "error: cannot reach the Kubernetes API", f"127.0.0.1:{port}")


def test_live_mode_missing_kubeconfig_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    missing = str(tmp_path / "absent")
    result = run(["evaluate", "--kubeconfig", missing], capsys)
    assert_one_line_error(result, "error: no Kubernetes cluster configured", missing)


@pytest.mark.parametrize("command", [["evaluate"], ["explain", "p5"], ["explain", "job/ml/x"]])
def test_a_kubeconfig_that_is_no_text_is_one_line(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Review 64-cli F2: was a UnicodeDecodeError traceback and exit 1.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    binary = tmp_path / "kubeconfig"
    binary.write_bytes(b"\x89\xff\xfe\x00 not a kubeconfig")
    result = run([*command, "--kubeconfig", str(binary)], capsys)
    assert_one_line_error(result, str(binary), "not a text file (not UTF-8)")


def _subprocess(argv: Sequence[str], env: dict[str, str] | None = None, stdin: str | None = None) -> Result:
    completed = subprocess.run(
        [sys.executable, "-m", "fabriccap", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    return completed.returncode, completed.stdout, completed.stderr


def test_subprocess_live_mode_unreachable_cluster(tmp_path: Path) -> None:
    port = closed_port()
    result = _subprocess(["evaluate", "-o", "json"], env=_live_env(_kubeconfig(tmp_path, port)))
    assert_one_line_error(result, "cannot reach the Kubernetes API", f"127.0.0.1:{port}")


def test_subprocess_live_mode_missing_kubeconfig(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    code, out, err = _subprocess(["evaluate"], env=_live_env(missing))
    assert code == 2
    assert out == ""
    assert err.splitlines()[-1].startswith("error: no Kubernetes cluster configured")
    assert str(missing) in err.splitlines()[-1]


def test_subprocess_live_mode_missing_kubeconfig_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    assert_one_line_error(_subprocess(["evaluate"], env=_live_env(missing)), str(missing))


def test_subprocess_evaluate_json(mixed_cluster: str) -> None:
    code, out, err = _subprocess(["evaluate", "-f", mixed_cluster, "-o", "json"])
    assert (code, err) == (0, "")
    names = [item["metadata"]["name"] for item in json.loads(out)["items"]]
    assert names == sorted(names) and len(names) == 3


def test_subprocess_stdin_require_ready(ready_cluster: str, mixed_cluster: str) -> None:
    assert _subprocess(["evaluate", "-f", "-", "--require-ready"], stdin=Path(ready_cluster).read_text())[0] == 0
    assert _subprocess(["evaluate", "-f", "-", "--require-ready"], stdin=Path(mixed_cluster).read_text())[0] == 1


def test_subprocess_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: Node\nmetadata: [unclosed\n")
    assert_one_line_error(_subprocess(["evaluate", "-f", str(path)]), f"error: {path}: malformed YAML")
    assert_one_line_error(_subprocess(["evaluate", "--nope"]), "unrecognized arguments")


def test_a_snapshots_empty_nodepool_is_read_through_its_watched_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Karpenter's objects in a snapshot go through the same watched-kind rows the operator's
    informers use: an empty NodePool becomes a Ready pool from the catalog; turned off, none."""
    requirements = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}]
    objects = [daemon_set(), world.node_pool("p5-elastic", requirements), world.ec2_node_class()]
    path = write_json(tmp_path / "c.json", kube_list(objects))
    code, out, _ = run(["evaluate", "-f", path, "-o", "json"], capsys)
    assert code == 0
    (item,) = json.loads(out)["items"]
    assert item["metadata"]["name"] == "efa-p5-elastic"
    ready = next(c for c in item["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], item["status"]["nodes"]) == ("True", "UniformCapability", 0)
    assert item["status"]["recommendation"]["resourcesPerNode"] == {"vpc.amazonaws.com/efa": "32"}
    off = tmp_path / "off.yaml"
    off.write_text("karpenter: {enabled: false}\n")
    code, out, _ = run(["evaluate", "-f", path, "--config", str(off), "-o", "json"], capsys)
    assert (code, json.loads(out)["items"]) == (0, [])


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--shard", "2", "--shards", "2"], "shard 2 does not exist: shards are numbered 0 to 1"),
        (["--shards", "0"], "Input should be greater than or equal to 1"),
        (["--shard", "-1", "--shards", "3"], "Input should be greater than or equal to 0"),
    ],
)
def test_run_refuses_a_shard_that_cannot_be_before_touching_the_cluster(
    flags: list[str], problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The kubeconfig does not exist: an error about it would mean the cluster was reached for.
    result = run(["run", *flags, "--kubeconfig", str(tmp_path / "absent")], capsys)
    line = assert_one_line_error(result, problem)
    assert line.startswith("error: --shard ")
