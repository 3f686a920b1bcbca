"""Node heartbeats left undecoded (kube.unread.UnchangedRule): a MODIFIED line that differs
from the last one applied for its object only in values the facts never read, and nothing else."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccap.core.facts import FactsExtractor
from fabriccap.kube.kinds import BY_KIND
from fabriccap.kube.unread import UnchangedRule, UnreadEvent
from fabriccap_devtools import world
from support.configs import build_config

EXTRACTOR = FactsExtractor(build_config({"workloads": {"enabled": True}}))


def rule() -> UnchangedRule:
    made = BY_KIND["Node"].unread_rule(EXTRACTOR)
    assert isinstance(made, UnchangedRule)
    return made


def served(body: dict[str, Any], version: str) -> dict[str, Any]:
    return {**body, "metadata": {**body["metadata"], "resourceVersion": version}}


def go_line(event_type: str, body: dict[str, Any], version: str) -> bytes:
    """As kube-apiserver writes it (no spaces, <>& escaped), with its newline, as the client's
    reader hands it over (``kube.client.watch_lines``)."""
    text = json.dumps({"type": event_type, "object": served(body, version)}, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode() + b"\n"


def busy_node(name: str = "ip-10-0-0-1.us-west-2.compute.internal") -> dict[str, Any]:
    body = world.node(name, pool="p5", efa=32, images=40, heavy=True)
    body["metadata"]["managedFields"] = [
        {"manager": "kubelet", "operation": "Update", "subresource": "status", "time": "2026-11-30T10:00:00Z"}
    ]
    return body


def heartbeat(body: dict[str, Any], at: str) -> dict[str, Any]:
    """What the kubelet and the node monitoring agent change on a heartbeat."""
    beat = copy.deepcopy(body)
    for condition in beat["status"]["conditions"]:
        condition["lastHeartbeatTime"] = at
    for entry in beat["metadata"]["managedFields"]:
        entry["time"] = at
    return beat


def applied(checker: UnchangedRule, event_type: str, body: dict[str, Any], version: str) -> None:
    """A line decoded and applied, as the informer does it."""
    assert checker.unread(go_line(event_type, body, version)) is None
    checker.settled(event_type, served(body, version), applied=True)


def test_the_node_rule_blanks_only_what_a_heartbeat_moves() -> None:
    assert EXTRACTOR.node_unread_keys() == {"lastHeartbeatTime", "time", "resourceVersion"}
    assert BY_KIND["Pod"].unread_rule(EXTRACTOR) is not None
    assert not isinstance(BY_KIND["Pod"].unread_rule(EXTRACTOR), UnchangedRule)


def test_a_key_the_config_reads_as_a_label_is_never_blanked() -> None:
    extractor = FactsExtractor(build_config({"poolLabels": ["time"]}))
    assert extractor.node_unread_keys() == {"lastHeartbeatTime", "resourceVersion"}


def test_a_heartbeat_after_an_applied_line_is_left_undecoded_with_its_version() -> None:
    checker, body = rule(), busy_node()
    applied(checker, "ADDED", body, "100")  # the streaming list's line: MODIFIED after it reads the same
    assert checker.unread(go_line("MODIFIED", heartbeat(body, "2026-11-30T10:00:40Z"), "101")) == UnreadEvent(
        "101", "unchanged"
    )
    assert EXTRACTOR.node(heartbeat(body, "2026-11-30T10:00:40Z")) == EXTRACTOR.node(body)
    assert len(checker) == 1


def change(path: Callable[[dict[str, Any]], object]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def changed(body: dict[str, Any]) -> dict[str, Any]:
        copied = copy.deepcopy(body)
        path(copied)
        return copied

    return changed


CHANGES_READ = {
    "the EFA count": change(lambda b: b["status"]["allocatable"].update({"vpc.amazonaws.com/efa": "16"})),
    "the pool label": change(lambda b: b["metadata"]["labels"].update({"eks.amazonaws.com/nodegroup": "p4"})),
    "Ready": change(lambda b: [c.update(status="False") for c in b["status"]["conditions"] if c["type"] == "Ready"]),
    "a cordon": change(lambda b: b["spec"].update(unschedulable=True)),
    "the provider ID": change(lambda b: b["spec"].update(providerID="aws:///us-west-2b/i-0123")),
}


@pytest.mark.parametrize("changed", CHANGES_READ.values(), ids=CHANGES_READ.keys())
def test_a_change_the_facts_read_is_decoded(changed: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    checker, body = rule(), busy_node()
    applied(checker, "MODIFIED", body, "100")
    assert EXTRACTOR.node(changed(body)) != EXTRACTOR.node(body)
    assert checker.unread(go_line("MODIFIED", heartbeat(changed(body), "2026-11-30T10:01:00Z"), "101")) is None


def test_only_what_was_applied_is_compared() -> None:
    body = busy_node()
    beat = go_line("MODIFIED", heartbeat(body, "2026-11-30T10:00:40Z"), "101")
    fresh = rule()
    assert fresh.unread(beat) is None  # nothing applied yet
    refused = rule()
    assert refused.unread(go_line("MODIFIED", body, "100")) is None
    refused.settled("MODIFIED", served(body, "100"), applied=False)  # rejected or ignored: not held
    assert refused.unread(beat) is None
    deleted = rule()
    applied(deleted, "MODIFIED", body, "100")
    deleted.unread(go_line("DELETED", body, "102"))
    deleted.settled("DELETED", served(body, "102"), applied=True)
    assert deleted.unread(beat) is None and len(deleted) == 0
    relisted = rule()
    applied(relisted, "MODIFIED", body, "100")
    relisted.listing_began()  # a LIST that does not name the node: it was deleted meanwhile
    relisted.listing_ended()
    assert relisted.unread(beat) is None and len(relisted) == 0
    other = rule()
    applied(other, "MODIFIED", busy_node("ip-10-0-0-2.us-west-2.compute.internal"), "100")
    assert other.unread(beat) is None  # another node's line is no digest of this one


def test_a_listing_keeps_no_digest_and_the_first_change_after_it_makes_one() -> None:
    """A listing's lines are all decoded: the digests it would make (4.5-5 s of a 100,000-node
    start) are not made, and those from before are dropped as it begins, not
    kept among the garbage of its bodies. A node's first line after it is decoded and makes
    the digest its next heartbeat is compared with."""
    checker = rule()
    quiet, gone = (busy_node(f"ip-10-0-0-{number}.us-west-2.compute.internal") for number in (1, 2))
    for body in (quiet, gone):
        applied(checker, "MODIFIED", body, "100")
    checker.listing_began()
    assert len(checker) == 0
    applied(checker, "ADDED", quiet, "200")
    checker.listing_ended()
    assert len(checker) == 0
    beat = go_line("MODIFIED", heartbeat(quiet, "2026-11-30T10:05:00Z"), "201")
    assert checker.unread(beat) is None  # the first line after the listing: decoded
    checker.settled("MODIFIED", served(heartbeat(quiet, "2026-11-30T10:05:00Z"), "201"), applied=True)
    assert len(checker) == 1
    next_beat = go_line("MODIFIED", heartbeat(quiet, "2026-11-30T10:05:40Z"), "202")
    assert checker.unread(next_beat) == UnreadEvent("202", "unchanged")


def test_a_value_with_an_escape_is_not_blanked() -> None:
    """A value that holds an escape is compared as it is: changed, the line is decoded."""
    checker, body = rule(), busy_node()
    escaped = busy_node()
    escaped["metadata"]["managedFields"][0]["time"] = "2026-11-30T10:00:00Z<"
    applied(checker, "MODIFIED", escaped, "100")
    line = go_line("MODIFIED", heartbeat(escaped, "2026-11-30T10:00:40Z<"), "101")
    assert b'"time":"2026-11-30T10:00:40Z\\u003c"' in line
    assert checker.unread(line) is None
    assert checker.unread(go_line("MODIFIED", escaped, "102")) == UnreadEvent("102", "unchanged")
    assert body != escaped


def test_a_key_that_ends_in_a_blanked_one_is_compared() -> None:
    """``example.com/runtime`` ends in ``time"``: a key of its own, read here (a pool label),
    whose change is decoded, however the blanked key ``time`` is found."""
    extractor = FactsExtractor(build_config({"poolLabels": ["example.com/runtime"]}))
    checker = BY_KIND["Node"].unread_rule(extractor)
    assert isinstance(checker, UnchangedRule) and "time" in extractor.node_unread_keys()
    body = busy_node()
    body["metadata"]["labels"]["example.com/runtime"] = "pool-a"
    applied(checker, "MODIFIED", body, "100")
    moved = heartbeat(body, "2026-11-30T10:00:40Z")
    moved["metadata"]["labels"]["example.com/runtime"] = "pool-b"
    assert checker.unread(go_line("MODIFIED", moved, "101")) is None
    assert extractor.node(moved) != extractor.node(body)


@pytest.mark.parametrize(
    ("key", "before", "after", "written"),
    [
        # ``"time":"..."`` inside a string is escaped (``\\"time\\":\\"``): not a key.
        ("note", '{"time":"a"}', '{"time":"b"}', b'\\"time\\":\\"b\\"'),
        # The key ``x"time`` is written ``"x\\"time"``: the quote before ``time`` is escaped.
        ('x"time', "a", "b", b'"x\\"time":"b"'),
    ],
    ids=["quoted-inside-a-value", "after-an-escaped-quote"],
)
def test_a_blanked_key_that_is_not_one_is_compared(key: str, before: str, after: str, written: bytes) -> None:
    """Text that reads as a blanked key but is not one: a change to the value that holds it is
    seen, and a heartbeat after it is still left undecoded."""
    checker, body = rule(), busy_node()
    body["metadata"].setdefault("annotations", {})[key] = before
    applied(checker, "MODIFIED", body, "100")
    moved = heartbeat(body, "2026-11-30T10:00:40Z")
    moved["metadata"]["annotations"][key] = after
    assert written in go_line("MODIFIED", moved, "101")
    assert checker.unread(go_line("MODIFIED", moved, "101")) is None
    assert checker.unread(go_line("MODIFIED", heartbeat(body, "2026-11-30T10:01:20Z"), "102")) == UnreadEvent(
        "102", "unchanged"
    )


def test_pythons_spacing_reads_the_same() -> None:
    """The fake API of the tests writes a space after each colon and comma."""
    checker, body = rule(), busy_node()
    line = json.dumps({"type": "MODIFIED", "object": served(body, "100")}).encode()
    assert checker.unread(line) is None
    checker.settled("MODIFIED", served(body, "100"), applied=True)
    beat = json.dumps({"type": "MODIFIED", "object": served(heartbeat(body, "2026-11-30T10:00:40Z"), "101")})
    assert checker.unread(beat.encode()) == UnreadEvent("101", "unchanged")


MUTATIONS: dict[str, Callable[[dict[str, Any], str], object]] = {
    "heartbeat": lambda b, v: [c.update(lastHeartbeatTime=v) for c in b["status"]["conditions"]],
    "managed time": lambda b, v: [e.update(time=v) for e in b["metadata"]["managedFields"]],
    "label time": lambda b, v: b["metadata"]["labels"].update(time=v),  # a label nobody reads
    "pool label": lambda b, v: b["metadata"]["labels"].update({"eks.amazonaws.com/nodegroup": v}),
    "instance type": lambda b, v: b["metadata"]["labels"].update({"node.kubernetes.io/instance-type": v}),
    "efa": lambda b, v: b["status"]["allocatable"].update({"vpc.amazonaws.com/efa": str(len(v))}),
    "gpu capacity": lambda b, v: b["status"]["capacity"].update({"nvidia.com/gpu": str(len(v) % 9)}),
    "ready": lambda b, v: [c.update(status=v) for c in b["status"]["conditions"] if c["type"] == "Ready"],
    "cordon": lambda b, v: b["spec"].update(unschedulable=len(v) % 2 == 1),
    "annotation": lambda b, v: b["metadata"].setdefault("annotations", {}).update(note=v),
    "an image": lambda b, v: b["status"]["images"][1]["names"].append(v),
}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(sorted(MUTATIONS)), st.sampled_from(["", "True", "False", "p4", "2026-12-01T00:00:00Z"])
        ),
        max_size=4,
    )
)
def test_a_line_left_undecoded_always_has_the_facts_held(mutations: list[tuple[str, str]]) -> None:
    """Whatever changed between the last applied line and the next: if the rule leaves the
    next one undecoded, its facts are those of the one applied."""
    checker, before = rule(), busy_node()
    applied(checker, "MODIFIED", before, "100")
    after = copy.deepcopy(before)
    for name, value in mutations:
        MUTATIONS[name](after, value)
    if checker.unread(go_line("MODIFIED", after, "101")) is not None:
        assert EXTRACTOR.node(after) == EXTRACTOR.node(before)


def test_an_encoder_that_sorts_keys_reads_the_same() -> None:
    """Go's encoder of a map (scalesim's objects) sorts the keys: the name comes after the
    labels. The event's framing is written type first, as every API server writes it."""
    checker, body = rule(), busy_node()

    def sorted_line(node: dict[str, Any], version: str) -> bytes:
        return b'{"type":"MODIFIED","object":' + json.dumps(served(node, version), sort_keys=True).encode() + b"}"

    first = sorted_line(body, "100")
    assert first.index(b'"labels"') < first.index(b'"name": "ip-10-0-0-1')
    assert checker.unread(first) is None
    checker.settled("MODIFIED", served(body, "100"), applied=True)
    assert checker.unread(sorted_line(heartbeat(body, "2026-11-30T10:00:40Z"), "101")) == UnreadEvent(
        "101", "unchanged"
    )


def test_a_line_with_two_version_keys_is_never_left_undecoded() -> None:
    """Only the version of a line with one such key can be taken without decoding it."""
    checker, body = rule(), busy_node()
    body["metadata"]["labels"]["resourceVersion"] = "7"
    applied(checker, "MODIFIED", body, "100")
    assert len(checker) == 0
    assert checker.unread(go_line("MODIFIED", heartbeat(body, "2026-11-30T10:00:40Z"), "101")) is None
