"""Hostile files for ``evaluate``, ``explain`` and ``--config`` (issue 27, items 17-19 and 21;
round 3 O1-O5, O10, O12, O14): each is refused cheaply, with one ``error:`` line naming the
file and the problem, exit 2, never a traceback, a hang or memory past the input limit.

The tests written against a hang or a memory blow-up run the command bounded
(``support.bounded``): without the fix they fail instead of stopping the suite.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from support.bounded import hang_guard, run_fabriccap
from support.builders import healthy_pool, kube_list, node
from support.cli import Result, assert_one_line_error, run

# How long an in-process command may take before it counts as hung: far beyond what a bounded
# refusal costs (milliseconds), far below the minutes the unbounded one took.
HANG_SECONDS = 20.0
MiB = 1024 * 1024


def run_guarded(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Result:
    with hang_guard(HANG_SECONDS):
        return run(argv, capsys)


@pytest.fixture
def snapshot(tmp_path: Path) -> str:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(kube_list(healthy_pool())))
    return str(path)


def command(name: str, snapshot: str) -> list[str]:
    """The argv of ``name`` (evaluate, explain, run) up to where a --config is added."""
    return {"evaluate": ["evaluate", "-f", snapshot], "explain": ["explain", "p5", "-f", snapshot], "run": ["run"]}[
        name
    ]


COMMANDS = ["evaluate", "explain", "run"]


# --- 17 (O3): keys that are not strings, values of the wrong type --------------------------------

NOT_STRING_KEYS = {
    "list-key": ("? [a, b]\n: x\n", "a mapping key must be a string, not a sequence"),
    "map-key": ("? {a: b}\n: x\n", "a mapping key must be a string, not a mapping"),
    "flow-list-key": ("{[a]: x}\n", "a mapping key must be a string, not a sequence"),
    "nested-int-key": (
        "fabrics:\n- name: efa\n  maxima: {1: 2}\n",
        "a mapping key must be a string, not an integer",
    ),
    "nested-null-key": ("poolLabels: [a]\ntargetNodes: {~: x}\n", "a mapping key must be a string, not null"),
    "bool-key": ("on: x\n", "a mapping key must be a string, not a boolean"),
}


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("shape", NOT_STRING_KEYS, ids=str)
def test_a_config_key_that_is_not_a_string_is_one_error_line(
    name: str, shape: str, snapshot: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, problem = NOT_STRING_KEYS[shape]
    config = tmp_path / "config.yaml"
    config.write_text(text)
    result = run_guarded([*command(name, snapshot), "--config", str(config)], capsys)
    line = assert_one_line_error(result, str(config), problem)
    assert "line " in line


@pytest.mark.parametrize("name", ["[a]", "{a: b}", "[]"])
def test_a_fabric_name_of_the_wrong_type_is_one_error_line(
    name: str, snapshot: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"fabrics:\n- name: {name}\n  resource: vpc.amazonaws.com/efa\n")
    assert_one_line_error(
        run_guarded(["evaluate", "-f", snapshot, "--config", str(config)], capsys), str(config), "fabrics.0.name"
    )


def test_duplicate_keys_are_refused_and_merge_keys_merge(tmp_path: Path) -> None:
    from fabriccap.configfile import load_config
    from fabriccap.core.config import ConfigError

    config = tmp_path / "config.yaml"
    config.write_text("poolLabels: [a]\npoolLabels: [b]\n")
    with pytest.raises(ConfigError, match=r"duplicate key 'poolLabels' \(first at line 1\)"):
        load_config(config)
    config.write_text(
        "targetNodes: &targets {acceleratorLabels: ['x=y']}\n"
        "fabrics:\n- name: efa\n  targetNodes:\n    <<: *targets\n    acceleratorResources: [a/b]\n"
    )
    with pytest.raises(ConfigError, match="targetNodes"):  # merged, then refused at the top level only
        load_config(config)
    config.write_text(
        "x: &targets {acceleratorLabels: ['x=y']}\n"
        "fabrics:\n- name: efa\n  targetNodes:\n    <<: *targets\n    acceleratorResources: [a/b]\n"
    )
    with pytest.raises(ConfigError, match=r"invalid config at x"):
        load_config(config)


# Review 64-cli F4: a snapshot's duplicate key is refused by the config's rule, not last-wins
# (a Node listing efa "0" then "32" came out Ready).
def test_a_snapshots_duplicate_key_is_refused_in_json_and_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    allocatable = '"allocatable": {"vpc.amazonaws.com/efa": "0", "vpc.amazonaws.com/efa": "32"}'
    text = json.dumps(kube_list(healthy_pool())).replace('"allocatable": {', allocatable[:-1] + ", ", 1)
    as_json = tmp_path / "cluster.json"
    as_json.write_text(text)
    assert_one_line_error(
        run_guarded(["evaluate", "-f", str(as_json)], capsys),
        str(as_json),
        "duplicate key 'vpc.amazonaws.com/efa' in a JSON object",
    )
    as_yaml = tmp_path / "cluster.yaml"
    as_yaml.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  name: b\n")
    assert_one_line_error(
        run_guarded(["evaluate", "-f", str(as_yaml)], capsys),
        f"{as_yaml} at line 5: duplicate key 'name' (first at line 4)",
    )


# --- 18 (O4, O5): what is not a file is refused before it is read ------------------------------


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(1)
        yield path


@pytest.mark.parametrize(
    ("name", "device"), [("evaluate", "/dev/zero"), ("run", "/dev/zero"), ("explain", "/dev/urandom")]
)
def test_a_config_that_never_ends_is_refused_up_front(name: str, device: str, snapshot: str) -> None:
    """Without the fix the device is read until memory runs out (here: the child's 2 GiB cap)."""
    finished = run_fabriccap([*command(name, snapshot), "--config", device])
    assert_one_line_error(
        (finished.code, finished.out, finished.err), f"{device}: cannot read config: is a character device, not a file"
    )


@pytest.mark.parametrize("name", COMMANDS)
def test_a_config_that_is_an_empty_device_is_refused(
    name: str, snapshot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """/dev/null reads as an empty file, and an empty config is the defaults: a device named
    by mistake must not pass for one."""
    result = run_guarded([*command(name, snapshot), "--config", "/dev/null"], capsys)
    assert_one_line_error(result, "/dev/null: cannot read config: is a character device, not a file")


@pytest.mark.parametrize("name", ["evaluate", "run"])
def test_a_config_that_is_a_directory_or_a_socket_is_refused(
    name: str, snapshot: str, tmp_path: Path, unix_socket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, kind in ((str(tmp_path), "a directory"), (unix_socket, "a socket")):
        result = run_guarded([*command(name, snapshot), "--config", path], capsys)
        assert_one_line_error(result, f"{path}: cannot read config: is {kind}, not a file")


@pytest.mark.parametrize("name", ["evaluate", "explain"])
def test_a_snapshot_that_is_a_directory_or_a_socket_is_refused(
    name: str, snapshot: str, tmp_path: Path, unix_socket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = command(name, snapshot)[:-1]  # without the snapshot
    for path, kind in ((str(tmp_path), "a directory"), (unix_socket, "a socket"), ("/dev/zero", "a character device")):
        assert_one_line_error(run_guarded([*argv, path], capsys), f"{path}: is {kind}, not a file")


@pytest.mark.parametrize("name", ["evaluate", "run"])
def test_a_config_fifo_without_a_writer_does_not_hang(name: str, snapshot: str, tmp_path: Path) -> None:
    """Without the fix the open blocks for ever (the child is killed at the bound)."""
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    finished = run_fabriccap([*command(name, snapshot), "--config", str(fifo)], timeout=30)
    assert_one_line_error(
        (finished.code, finished.out, finished.err), f"{fifo}: cannot read config: empty input (a FIFO that nothing"
    )


def test_a_config_fifo_with_a_writer_is_read(snapshot: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--config <(helm template …)``: a pipe with a writer is a config like any other."""
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with fifo.open("w") as writer:
            writer.write("poolLabels: [eks.amazonaws.com/nodegroup]\n")

    writer = threading.Thread(target=write)
    writer.start()
    try:
        time.sleep(0.2)  # the writer has the FIFO open before the reader looks, as <(...) does
        code, out, err = run_guarded(["evaluate", "-f", snapshot, "--config", str(fifo), "-o", "name"], capsys)
    finally:
        writer.join(5)
    assert (code, out, err) == (0, "fabriccapability.fabriccap.dev/efa-p5\n", "")


def test_a_config_over_its_size_limit_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("# padding\n" * (MiB // 10 + 1))
    assert_one_line_error(
        run_guarded(["evaluate", "-f", "-", "--config", str(config)], capsys),
        f"{config}: cannot read config: larger than the input limit of 1 MiB",
    )


# --- 19 (O1, O2): YAML aliases are counted at their expanded size ------------------------------

NODE = json.dumps(node("n1"))


def alias_amplified_pods(aliases: int) -> str:
    """O1: one pod whose 1,000 containers share one 1,000-variable env list, aliased."""
    env = ", ".join(["*e"] * 1000)
    containers = ", ".join(["*c"] * 1000)
    return (
        f"kind: List\nanchors: {{e: &e {{name: FI_PROVIDER, value: efa}}, E: &E [{env}], c: &c {{name: c, env: *E}},"
        f" C: &C [{containers}], p: &p {{apiVersion: v1, kind: Pod, metadata: {{name: p, namespace: d}},"
        f" spec: {{nodeName: n1, containers: *C}}}}}}\nitems: [{NODE}, {', '.join(['*p'] * aliases)}]\n"
    )


def alias_amplified_slices(aliases: int) -> str:
    """O2: one 5,000-device list in aliased ResourceSlices."""
    devices = ", ".join(f"{{name: d{index}}}" for index in range(5000))
    a_slice = (
        "{apiVersion: resource.k8s.io/v1, kind: ResourceSlice, metadata: {name: s}, spec: {driver: efa.amazonaws.com,"
        " nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: *D}}"
    )
    return (
        f"kind: List\nanchors: {{D: &D [{devices}], s: &s {a_slice}}}\nitems: [{NODE}, {', '.join(['*s'] * aliases)}]\n"
    )


ALIAS_SHAPES = {
    "O1-pods-200-aliases": lambda: alias_amplified_pods(200),
    "O1-pods-100000-aliases": lambda: alias_amplified_pods(100_000),
    "O2-slices-20000-aliases": lambda: alias_amplified_slices(20_000),
}


@pytest.mark.parametrize("name", ["evaluate", "explain"])
@pytest.mark.parametrize("shape", ALIAS_SHAPES, ids=str)
def test_alias_amplification_is_refused_by_the_node_budget(
    name: str, shape: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the fix: 66 s of CPU for the 10 KB shape, hours for the 0.5 MB one."""
    path = tmp_path / "aliases.yaml"
    path.write_text(ALIAS_SHAPES[shape]())
    argv = ["evaluate", "-f", str(path)] if name == "evaluate" else ["explain", "p5", "-f", str(path)]
    line = assert_one_line_error(run_guarded(argv, capsys), str(path), "nodes through its YAML aliases")
    from fabriccap.core.documents import node_budget

    assert f"{node_budget(path.stat().st_size):,} nodes" in line  # all ASCII: characters are bytes


def test_the_budget_stops_composing_at_the_bound() -> None:
    """The refusal comes when the count passes the budget, not after composing everything:
    the work done is the budget's, whatever the aliases would have expanded to."""
    from fabriccap.core.documents import BoundedLoader, RefusedDocumentError

    text = alias_amplified_pods(100_000)
    loader = BoundedLoader(text)
    try:
        with pytest.raises(RefusedDocumentError, match="nodes through its YAML aliases"):
            loader.get_single_node()
        assert loader.node_budget < loader.nodes_expanded <= loader.node_budget + 1_000_000
    finally:
        loader.dispose()


def test_aliases_within_the_budget_and_merge_keys_still_load() -> None:
    from fabriccap.core.documents import NODE_BUDGET_BASE, load_yaml_documents, node_budget

    text = "base: &b {name: efa, env: [1, 2, 3]}\nuses: [*b, *b, *b]\nmerged: {<<: *b, name: other}\n"
    (document,) = load_yaml_documents(text)
    assert document["uses"] == [document["base"]] * 3
    assert document["merged"] == {"name": "other", "env": [1, 2, 3]}
    assert node_budget(0) == NODE_BUDGET_BASE


def test_an_alias_inside_what_it_names_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("kind: List\nitems: &a [*a]\n")
    assert_one_line_error(run_guarded(["evaluate", "-f", str(path)], capsys), "sits inside the node it names")


# --- 21 (O10, O12): surrogates and huge integers --------------------------------------------------


def _labelled(value: str) -> str:
    """A snapshot whose node's pool label value is the JSON text ``value``."""
    return json.dumps(kube_list(healthy_pool())).replace('"p5"', value, 1)


@pytest.mark.parametrize("name", ["evaluate", "explain"])
@pytest.mark.parametrize(
    ("text", "suffix"),
    [
        pytest.param(_labelled(r'"\ud800"'), "json", id="json-label-value"),
        pytest.param(_labelled(r'"p5\udfff"'), "json", id="json-low-surrogate"),
        pytest.param(
            json.dumps(kube_list(healthy_pool())).replace('"kubernetes.io/os"', r'"\udc80"'), "json", id="json-key"
        ),
        pytest.param("kind: List\nitems:\n- " + _labelled(r'"\ud800"'), "yaml", id="yaml-label-value"),
        pytest.param("kind: List\nitems:\n- " + _labelled(r'"\U0000dbff"'), "yaml", id="yaml-long-escape"),
    ],
)
def test_a_lone_surrogate_is_an_input_error(
    name: str, text: str, suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the fix: UnicodeEncodeError in names._digest (the pool's name is a hash of it)."""
    path = tmp_path / f"cluster.{suffix}"
    path.write_text(text)
    argv = ["evaluate", "-f", str(path), "-o", "json"] if name == "evaluate" else ["explain", "p5", "-f", str(path)]
    line = assert_one_line_error(run_guarded(argv, capsys), str(path))
    # libyaml refuses the escape itself; PyYAML's own parser (a build without libyaml) leaves
    # it to the loader's check.
    problem = (
        "invalid Unicode character escape" if suffix == "yaml" and yaml.__with_libyaml__ else "lone UTF-16 surrogate"
    )
    assert problem in line, line


def test_a_surrogate_pair_is_one_character_and_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cluster.json"
    bodies = healthy_pool()
    bodies[0]["metadata"]["annotations"] = {"note": "\U0001f600"}
    path.write_text(json.dumps(kube_list(bodies)))  # ensure_ascii: written as \ud83d\ude00
    assert "\\ud83d\\ude00" in path.read_text()
    assert run_guarded(["evaluate", "-f", str(path), "-o", "name"], capsys)[0] == 0


def test_a_lone_surrogate_in_a_config_is_an_input_error(
    snapshot: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text('fabrics:\n- name: efa\n  recommendedEnv: [{name: FI_PROVIDER, value: "\\ud800"}]\n')
    assert_one_line_error(
        run_guarded(["evaluate", "-f", snapshot, "--config", str(config)], capsys), str(config), "not valid YAML"
    )


HUGE_INTEGERS = {
    "hexadecimal": "0x" + "f" * 5000,
    "sexagesimal": "1" + ":59" * 5000,
    "octal": "0" + "7" * 5000,
    "binary": "0b" + "1" * 5000,
    "underscores": "1" + "_000" * 2000,
    "hexadecimal-past-64-bits": "0x1" + "0" * 16,
    "sexagesimal-past-64-bits": "1" + ":00" * 11,
}


@pytest.mark.parametrize("where", ["quantity", "pool-label-value", "generation"])
@pytest.mark.parametrize("shape", HUGE_INTEGERS, ids=str)
def test_a_huge_yaml_integer_is_an_input_error(
    where: str, shape: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the fix: ValueError (int-string limit) from quantity.shown_value or str()."""
    bodies = healthy_pool()
    a_node = next(body for body in bodies if body["kind"] == "Node")
    placeholder = '"HUGE-INTEGER"'
    if where == "quantity":
        a_node["status"]["allocatable"]["vpc.amazonaws.com/efa"] = "HUGE-INTEGER"
    elif where == "pool-label-value":
        a_node["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] = "HUGE-INTEGER"
    else:
        a_node["metadata"]["generation"] = "HUGE-INTEGER"
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "kind: List\nitems:\n"
        + "".join(f"- {json.dumps(body)}\n" for body in bodies).replace(placeholder, HUGE_INTEGERS[shape])
    )
    for argv in (["evaluate", "-f", str(path), "-o", "json"], ["explain", "p5", "-f", str(path)]):
        assert_one_line_error(run_guarded(argv, capsys), str(path), "out of range")


@pytest.mark.parametrize("shape", ["hexadecimal", "sexagesimal"])
def test_a_huge_yaml_integer_in_a_config_is_an_input_error(
    shape: str, snapshot: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"staleAfterSeconds: {HUGE_INTEGERS[shape]}\n")
    assert_one_line_error(
        run_guarded(["evaluate", "-f", snapshot, "--config", str(config)], capsys), str(config), "out of range"
    )


def test_int64_integers_in_every_yaml_form_still_load() -> None:
    from fabriccap.core.documents import load_yaml_documents

    (document,) = load_yaml_documents(
        "a: [0x7fffffffffffffff, -9223372036854775808, 0b101, 017, '1:30', 1:30, 1_000, 1.5e+3]\n"
    )
    assert document["a"] == [2**63 - 1, -(2**63), 5, 15, "1:30", 90, 1000, 1500.0]


@pytest.mark.parametrize("output", ["json", "yaml", "table", "wide"])
def test_a_json_integer_just_under_pythons_limit_is_no_traceback(
    output: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSON's integers are bounded by Python's parser (4,300 digits); one just under it is a
    quantity out of range, which fails its node closed, not a traceback."""
    bodies = healthy_pool()
    next(body for body in bodies if body["kind"] == "Node")["status"]["allocatable"]["vpc.amazonaws.com/efa"] = "HUGE"
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(kube_list(bodies)).replace('"HUGE"', "9" * 4000))
    code, out, err = run_guarded(["evaluate", "-f", str(path), "-o", output], capsys)
    assert "Traceback" not in err
    assert code == 2 or (code == 0 and out), (code, err)


# --- O14: what an error echoes is bounded ---------------------------------------------------------

LONG = "a" * 100_000


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["explain", LONG, "-f", "SNAPSHOT"], id="explain-target"),
        pytest.param(["evaluate", "-f", "SNAPSHOT", LONG], id="unrecognized-argument"),
        pytest.param(["evaluate", "-f", "SNAPSHOT", "--max-input-size", LONG], id="flag-value"),
        pytest.param(["evaluate", "-f", LONG], id="file-name"),
        pytest.param([LONG], id="command"),
    ],
)
def test_an_error_echoes_a_long_argument_bounded(
    argv: list[str], snapshot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_guarded([snapshot if part == "SNAPSHOT" else part for part in argv], capsys)
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith("error: ")
    assert len(line) <= 1100, len(line)


def test_a_long_config_value_is_echoed_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"poolLabels: [{LONG}]\n")
    for argv in (["evaluate", "-f", "-", "--config", str(config)], ["run", "--config", str(config)]):
        line = assert_one_line_error(run_guarded(argv, capsys), str(config), "poolLabels")
        assert len(line) <= 1100, len(line)


# --- 6: memory ----------------------------------------------------------------------------------

# What the interpreter, the imports and a small evaluation take is measured (a baseline run);
# a hostile input may add the input limit and this much, no more.
MEMORY_SLACK = 48 * MiB
LIMIT = "16Mi"


@pytest.fixture(scope="module")
def baseline_rss(tmp_path_factory: pytest.TempPathFactory) -> int:
    path = tmp_path_factory.mktemp("baseline") / "cluster.json"
    path.write_text(json.dumps(kube_list(healthy_pool())))
    finished = run_fabriccap(["evaluate", "-f", str(path), "--max-input-size", LIMIT])
    assert finished.code == 0, finished
    return finished.peak_rss_bytes


def _hostile_inputs(tmp: Path) -> dict[str, list[str]]:
    files = {
        "aliases-pods.yaml": alias_amplified_pods(100_000),
        "aliases-slices.yaml": alias_amplified_slices(20_000),
        "hex.yaml": "kind: List\nitems:\n- " + _labelled("0x" + "f" * 5000),
        "sexagesimal.yaml": "kind: List\nitems:\n- " + _labelled("1" + ":59" * 50_000),
        "surrogate.json": _labelled(r'"\ud800"'),
        "deep.json": '{"kind": "List", "items": [' + "[" * 100_000 + "]" * 100_000 + "]}",
        "config.yaml": "poolLabels: &a ["
        + ", ".join(["x"] * 1000)
        + "]\n"
        + "".join(f"k{i}: *a\n" for i in range(1000)),
    }
    for name, text in files.items():
        (tmp / name).write_text(text)
    snapshot = str(tmp / "cluster.json")
    (tmp / "cluster.json").write_text(json.dumps(kube_list(healthy_pool())))
    return {
        **{name: ["evaluate", "-f", str(tmp / name)] for name in files if name != "config.yaml"},
        "config-aliases": ["evaluate", "-f", snapshot, "--config", str(tmp / "config.yaml")],
        "config-dev-zero": ["evaluate", "-f", snapshot, "--config", "/dev/zero"],
        "snapshot-dev-zero": ["evaluate", "-f", "/dev/zero"],
    }


@pytest.mark.parametrize(
    "shape",
    [
        "aliases-pods.yaml",
        "aliases-slices.yaml",
        "hex.yaml",
        "sexagesimal.yaml",
        "surrogate.json",
        "deep.json",
        "config-aliases",
        "config-dev-zero",
        "snapshot-dev-zero",
    ],
)
def test_no_hostile_input_grows_memory_past_the_limit(shape: str, baseline_rss: int, tmp_path: Path) -> None:
    argv = _hostile_inputs(tmp_path)[shape]
    finished = run_fabriccap([*argv, "--max-input-size", LIMIT])
    assert finished.code == 2, finished
    assert len(finished.err.splitlines()) == 1, finished.err
    assert finished.peak_rss_bytes <= baseline_rss + 16 * MiB + MEMORY_SLACK, (
        f"{shape}: peak {finished.peak_rss_bytes / MiB:.0f} MiB, baseline {baseline_rss / MiB:.0f} MiB"
    )


def test_an_endless_stdin_stays_within_the_limit(baseline_rss: int) -> None:
    with open("/dev/zero", "rb") as zeros:
        finished = run_fabriccap(["evaluate", "-f", "-", "--max-input-size", LIMIT], stdin=zeros.fileno())
    assert (
        finished.err.strip() == "error: <stdin>: larger than the input limit of 16 MiB (raise it with --max-input-size)"
    )
    assert finished.peak_rss_bytes <= baseline_rss + 16 * MiB + MEMORY_SLACK, finished.peak_rss_bytes / MiB
