"""Watch lines left undecoded (kube.unread): only new pods whose facts would be empty, and each
mark the extractor reads a pod by is one that keeps a line decoded."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fabriccap.core.config import ConfigError
from fabriccap.core.facts import FactsExtractor
from fabriccap.kube.kinds import BY_KIND
from fabriccap.kube.unread import UnreadEvent, UnreadRule, _only_version
from fabriccap_devtools import world
from fabriccap_devtools.scalesim.world import CPU_POD_TEMPLATE, ScaleWorld
from support.configs import build_config

EXTRACTOR = FactsExtractor(build_config({"workloads": {"enabled": True}}))
RULE = BY_KIND["Pod"].unread_rule(EXTRACTOR)


def go_line(event_type: str, body: dict[str, Any], version: str = "41") -> bytes:
    """An event line as kube-apiserver writes it (Go's encoder: no spaces, <>& escaped), with
    its newline, as the client's reader hands it over (``kube.client.watch_lines``)."""
    served = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
    text = json.dumps({"type": event_type, "object": served}, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode() + b"\n"


def cpu_pod(name: str = "sidecar-0", **kwargs: Any) -> dict[str, Any]:
    return world.workload_pod("n1", name, gpu=None, **kwargs)


def facts_of(body: dict[str, Any]) -> tuple[object, object]:
    return EXTRACTOR.pod(body), EXTRACTOR.workload_pod(body)


def test_pods_rule_is_built_from_the_extractors_marks() -> None:
    assert RULE is not None
    marks = EXTRACTOR.pod_marks()
    assert {"DaemonSet", "resourceClaim", "FI_PROVIDER", "NCCL_NET"} <= marks | {"resourceClaim"}
    assert EXTRACTOR.resources and all(any(mark in resource for mark in marks) for resource in EXTRACTOR.resources)
    # A new Node is always read (its heartbeats are another rule's: test_unchanged.py).
    assert not isinstance(BY_KIND["Node"].unread_rule(EXTRACTOR), UnreadRule)


def test_a_new_pod_of_no_fabric_is_left_undecoded_with_its_version() -> None:
    assert RULE is not None
    assert facts_of(cpu_pod()) == (None, None)
    assert RULE.unread(go_line("ADDED", cpu_pod(), "12345")) == UnreadEvent("12345")
    # The fake API's spacing (Python's default separators) reads the same.
    spaced = json.dumps({"type": "ADDED", "object": {**cpu_pod(), "metadata": {"resourceVersion": "7"}}}).encode()
    assert RULE.unread(spaced) == UnreadEvent("7")
    # Without its newline, or with the whitespace JSON allows after it, the line reads the same;
    # a byte that is not JSON's whitespace (a form feed) ends no event: decoded, and refused.
    line = go_line("ADDED", cpu_pod(), "12345").removesuffix(b"\n")
    assert RULE.unread(line) == RULE.unread(line + b" \t\r\n") == UnreadEvent("12345")
    assert RULE.unread(line + b"\x0c\n") is None


@pytest.mark.parametrize(
    "line",
    [
        go_line("MODIFIED", cpu_pod()),  # a held pod may have changed: decoded
        go_line("DELETED", cpu_pod()),
        go_line("ADDED", cpu_pod())[:200],  # cut short
        go_line("ADDED", cpu_pod(labels={"resourceVersion": "1"})),  # two resourceVersion keys
        go_line("ADDED", cpu_pod(), "v7"),  # not etcd's revision
        go_line("ADDED", cpu_pod(labels={"note": "a<b"})),  # an escape (\u003c) could spell a mark
        go_line("ADDED", cpu_pod(labels={"path": "a/b"})).replace(b"a/b", b"a\\/b"),
        b'{"object":{},"type":"ADDED"}',  # the type is not the first key
        b"not json at all",
    ],
)
def test_any_other_line_is_decoded(line: bytes) -> None:
    assert RULE is not None
    assert RULE.unread(line) is None


def test_an_escape_that_cannot_spell_a_mark_leaves_the_line_undecoded() -> None:
    """A quote inside a string (a JSON annotation, as CNI plugins write) is escaped as \\":
    the line has a backslash, yet no escape that could spell a mark's letters."""
    assert RULE is not None
    line = go_line("ADDED", cpu_pod(labels={"note": 'say "hi"'}), "88")
    assert b'\\"' in line
    assert RULE.unread(line) == UnreadEvent("88")


# Pieces of the marks and the escapes, which joined make texts that hold them whole, in part,
# or overlapping one another.
PIECES = st.sampled_from(
    [
        *("NCCL_", "NET", "SOCKET_IFNAME", "FI_", "PROVIDER", "nvidia.com/", "gpu", "vpc.amazonaws.com/", "efa"),
        *("resourceClaim", "Name", "Template", "Daemon", "Set", "\\", "u", "/", "x", "-"),
    ]
)


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(PIECES, max_size=8))
@example(pieces=["\\", "u"])
@example(pieces=["\\", "/"])
@example(pieces=["NCCL_", "NCCL_", "NET"])
@example(pieces=["resourceClaim", "Template", "Name"])
@example(pieces=["nvidia.com/", "efa"])
def test_a_line_is_left_undecoded_exactly_when_it_holds_no_mark_and_no_escape(pieces: list[str]) -> None:
    """The one search finds whichever of its texts a line holds, wherever they overlap."""
    assert isinstance(RULE, UnreadRule)
    text = "".join(pieces).encode()
    line = go_line("ADDED", cpu_pod(labels={"note": "@@"}), "9").replace(b"@@", text)
    holds = any(mark in line for mark in RULE.marks) or b"\\u" in line or b"\\/" in line
    assert (RULE.unread(line) is None) == holds, line


def reference_unread(rule: UnreadRule, line: bytes) -> UnreadEvent | None:
    """The rule as it read a line before its search counted the version keys: any mark or
    escape means decode, else the version of a line with exactly one version key."""
    if not line.lstrip().startswith(b'{"type":"ADDED",') or not line.rstrip().endswith(b"}"):
        return None
    if any(mark in line for mark in rule.marks) or b"\\u" in line or b"\\/" in line:
        return None
    version = _only_version(line)
    return UnreadEvent(version) if version is not None else None


# Pieces that make a second version key, a key's text without its quotes, a key a mark
# overlaps, or a key whose value is no number.
VERSION_PIECES = st.sampled_from(
    ['"resourceVersion"', "resourceVersion", '"', ":", '"7"', "x", "NCCL_", "NET", "\\", "u", "Version"]
)


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(VERSION_PIECES, max_size=8), where=st.sampled_from(["label", "before the version"]))
@example(pieces=['"resourceVersion"', ":", '"7"'], where="label")  # a second key: decode
@example(pieces=["resourceVersion", '"'], where="label")  # the key's text with no opening quote
@example(pieces=[], where="label")
@example(pieces=['"resourceVersion"', "resourceVersion", '"'], where="label")  # two keys sharing a quote
def test_the_version_keys_counted_in_the_search_read_as_a_second_find_did(pieces: list[str], where: str) -> None:
    """One pass that finds the marks and the version keys says what the marks' search and
    ``_only_version`` said, on lines that are JSON and on lines that are not."""
    assert isinstance(RULE, UnreadRule) and RULE._finds_version
    text = "".join(pieces).encode()
    line = go_line("ADDED", cpu_pod(labels={"note": "@@"}), "9").replace(b"@@", text)
    if where == "before the version":
        line = line.replace(b'"resourceVersion"', text + b'"resourceVersion"', 1)
    assert RULE.unread(line) == reference_unread(RULE, line), line


def test_a_mark_that_may_begin_inside_the_version_key_is_searched_without_it() -> None:
    """``Version`` begins inside ``resourceVersion"``: a search of both would report the key
    and hide the mark, so the version keys are counted apart and the mark is found."""
    rule = UnreadRule.holding_none_of({"Version", "nvidia.com/gpu"})
    assert not rule._finds_version and isinstance(RULE, UnreadRule) and RULE._finds_version
    line = go_line("ADDED", cpu_pod(), "31")
    assert b"Version" in line and RULE.unread(line) == UnreadEvent("31")
    assert rule.unread(line) is None
    assert UnreadRule.holding_none_of({"nvidia.com/gpu"}).unread(line) == UnreadEvent("31")


def test_an_empty_mark_keeps_every_line_decoded() -> None:
    """An empty mark is one every line holds (as ``in`` says). The way one came, a recommended
    variable with no name, is refused by the config now (``EnvVar``); the rule stays sound."""
    unnamed = {"name": "efa", "recommendedEnv": [{"name": "", "value": "1"}]}
    with pytest.raises(ConfigError, match="not an environment variable name"):
        build_config({"workloads": {"enabled": True}, "fabrics": [unnamed]})
    rule = UnreadRule.holding_none_of({"", *EXTRACTOR.pod_marks()})
    assert RULE is not None and RULE.unread(go_line("ADDED", cpu_pod())) is not None
    assert rule.unread(go_line("ADDED", cpu_pod())) is None


POD_READ_BY_ONE_MARK = {
    "a GPU request": world.workload_pod("n1", "train-0", gpu=8),
    "an EFA request": world.workload_pod("n1", "train-1", gpu=None, efa=32),
    "a claim": cpu_pod("claim-0", claims=[{"name": "nic", "resourceClaimName": "efa-claim"}]),
    "a claim template": cpu_pod("claim-1", claims=[{"name": "nic", "resourceClaimTemplateName": "efa"}]),
    "libfabric's provider": cpu_pod("env-0", env={"FI_PROVIDER": "efa"}),
    "NCCL's network": cpu_pod("env-1", env={"NCCL_NET": "ofi"}),
    "a plugin's pod": world.pod("n1"),
}


@pytest.mark.parametrize("body", POD_READ_BY_ONE_MARK.values(), ids=POD_READ_BY_ONE_MARK.keys())
def test_a_pod_with_facts_is_decoded(body: dict[str, Any]) -> None:
    assert RULE is not None
    assert facts_of(body) != (None, None)
    assert RULE.unread(go_line("ADDED", body)) is None


def test_each_recommended_variable_keeps_a_pod_decoded() -> None:
    assert RULE is not None
    variables = {env.name: env.value for fabric in EXTRACTOR.config.enabled_fabrics for env in fabric.recommended_env}
    assert variables
    for name, value in variables.items():
        body = cpu_pod("env-2", env={name: value})
        assert facts_of(body)[1] is not None, name
        assert RULE.unread(go_line("ADDED", body)) is None, name


@pytest.mark.parametrize("name", ['EFA"MODE', "C:\\EFA", "NCCL<X>", "A&B"])
def test_a_recommended_variable_named_with_what_json_escapes_keeps_its_pod_decoded(name: str) -> None:
    """A recommendedEnv name may hold any printable character but "=": the API server writes
    a quote or a backslash in it escaped, and the mark is searched as it is written."""
    config = build_config(
        {"workloads": {"enabled": True}, "fabrics": [{"name": "efa", "recommendedEnv": [{"name": name, "value": "1"}]}]}
    )
    extractor = FactsExtractor(config)
    rule = BY_KIND["Pod"].unread_rule(extractor)
    assert rule is not None
    body = cpu_pod("env-3", env={name: "1"})
    assert extractor.workload_pod(body) is not None
    assert rule.unread(go_line("ADDED", body)) is None
    # Another quote or backslash escaped (an annotation's) spells no mark: still left undecoded.
    other = cpu_pod("note-0", labels={"note": 'say "hi" C:\\ NCCL'})
    assert extractor.workload_pod(other) is None
    assert rule.unread(go_line("ADDED", other, "77")) == UnreadEvent("77")


def test_the_simulators_pod_of_no_fabric_is_left_undecoded() -> None:
    """The 800,000 CPU pods of the 100,000-node benchmark are this template."""
    assert RULE is not None
    [template] = [t for t in ScaleWorld(nodes=10, pods=10).spec()["templates"] if t["name"] == CPU_POD_TEMPLATE]
    body = json.loads(json.dumps(template["body"]).replace("@@", "x"))
    assert facts_of(body) == (None, None)
    assert RULE.unread(go_line("ADDED", body)) is not None


NAMES = st.sampled_from(
    ["cpu", "memory", "example.com/fpga", "nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi"]
)
ENV = st.sampled_from(
    ["NCCL_DEBUG", "FI_PROVIDER", "NCCL_NET", "FI_EFA_USE_DEVICE_RDMA", "OMP_NUM_THREADS", "NCCL_PROTO"]
)
VALUES = st.sampled_from(["efa", "ofi", "1", "tcp", "Simple", "WARN"])
OWNER = st.sampled_from([None, ("DaemonSet", "apps/v1"), ("Job", "batch/v1"), ("ReplicaSet", "apps/v1")])


@settings(max_examples=300, deadline=None)
@given(
    requests=st.dictionaries(NAMES, st.integers(0, 8), max_size=3),
    env=st.dictionaries(ENV, VALUES, max_size=3),
    owner=OWNER,
    namespace=st.sampled_from(["kube-system", "ml"]),
    claim=st.sampled_from([None, "resourceClaimName", "resourceClaimTemplateName"]),
    init=st.booleans(),
)
def test_a_pod_left_undecoded_has_no_facts(
    requests: dict[str, int],
    env: dict[str, str],
    owner: tuple[str, str] | None,
    namespace: str,
    claim: str | None,
    init: bool,
) -> None:
    assert RULE is not None
    container: dict[str, Any] = {
        "name": "main",
        "image": "trainer",
        "env": [{"name": key, "value": value} for key, value in env.items()],
        "resources": {"limits": {key: str(count) for key, count in requests.items()}},
    }
    spec: dict[str, Any] = {"nodeName": "n1", "containers": [] if init else [container]}
    if init:
        spec["initContainers"] = [{**container, "restartPolicy": "Always"}]
        spec["containers"] = [{"name": "app", "image": "app"}]
    if claim is not None:
        spec["resourceClaims"] = [{"name": "nic", claim: "efa"}]
    metadata: dict[str, Any] = {"name": "p", "namespace": namespace, "uid": "u"}
    if owner is not None:
        metadata["ownerReferences"] = [{"kind": owner[0], "apiVersion": owner[1], "name": "o", "uid": "o"}]
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": "Running"}}
    if RULE.unread(go_line("ADDED", body)) is not None:
        assert facts_of(body) == (None, None)


def test_without_workloads_only_a_plugin_namespaces_daemon_set_pods_are_read() -> None:
    extractor = FactsExtractor(build_config({"workloads": {"enabled": False}}))
    rule = UnreadRule.holding_none_of(extractor.pod_marks())
    assert extractor.pod_marks() == {"DaemonSet"}
    assert rule.unread(go_line("ADDED", world.workload_pod("n1", "train-0", gpu=8))) is not None
    assert rule.unread(go_line("ADDED", world.pod("n1"))) is None
