"""Text that pod creators and node labellers choose, as it reaches statuses and Events: cleaned
and bounded where the facts are made (reliability round 3, S5, S10, O17; issue 27 item 10)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from fabriccap.core.api import PoolRef
from fabriccap.core.config import default_config
from fabriccap.core.evaluate import evaluate
from fabriccap.core.facts import FactsExtractor, ObjectRef
from fabriccap.core.names import is_dns_subdomain
from fabriccap.core.text import MAX_MESSAGE, clean_text, escape_controls
from fabriccap.core.workloads import WorkloadEvent, not_requested_key, not_requested_wording
from fabriccap_devtools.world import SCHEDULER_EFA_MESSAGE, owner_reference, workload_pod
from support.builders import capability, daemon_set, facts_of, node, plugin_pods

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"
FORGED_LINE = "\n2026-12-01 23:59:59,000 INFO fabriccap.controller.leader: released the lease"
HOSTILE_KIND = f"Evil\nName{ESCAPES}"
HOSTILE_NAME = f"x/y{FORGED_LINE}{ESCAPES}"
CONTROLS = [chr(code) for code in (*range(0x20), *range(0x7F, 0xA0))] + ["\u2028", "\u2029", "\u202e"]


def has_control(text: str) -> bool:
    return any(character in text for character in CONTROLS)


def strings_of(document: Any) -> list[str]:
    if isinstance(document, str):
        return [document]
    if isinstance(document, dict):
        return [text for key, value in document.items() for text in (*strings_of(key), *strings_of(value))]
    if isinstance(document, list):
        return [text for value in document for text in strings_of(value)]
    return []


def hostile_pool(pod_owner: dict[str, Any], **pod_fields: Any) -> list[dict[str, Any]]:
    """An advertising pool, and on it a GPU pod that asks for no EFA, owned by ``pod_owner``."""
    return [
        daemon_set(),
        node("n1", efa=32),
        node("n2", efa=32),
        *plugin_pods(["n1", "n2"]),
        workload_pod("n1", "victim-of-nothing", owner=pod_owner, **pod_fields),
    ]


# -- the function


def test_clean_text_removes_escapes_and_controls_and_collapses_line_breaks() -> None:
    assert clean_text(HOSTILE_KIND, 63) == "Evil Name"
    assert clean_text("a\r\n\r\nb\tc\x00d\x7fe\x80f\u202eg", 63) == "a b cdefg"
    assert clean_text("lone \ud800 surrogate", 63) == "lone \ufffd surrogate"
    assert clean_text("p5-training", 63) == "p5-training"
    assert clean_text(42, 63) == "42"


def test_clean_text_cuts_to_its_limit_with_an_ellipsis() -> None:
    assert clean_text("a" * 600_000, 253) == "a" * 250 + "..."
    assert len(clean_text(ESCAPES * 100_000 + "b" * 1000, 100)) <= 100
    assert clean_text("abcdef", 6) == "abcdef"


def test_escape_controls_shows_what_it_does_not_obey() -> None:
    assert escape_controls(HOSTILE_NAME).count("\n") == 0
    assert escape_controls("a\nb\x1b[2J\u202e") == "a\\nb\\x1b[2J\\u202e"
    assert escape_controls(escape_controls("a\nb")) == "a\\nb"


@given(st.text(max_size=300))
def test_clean_text_is_always_clean_and_bounded(text: str) -> None:
    cleaned = clean_text(text, 64)
    assert len(cleaned) <= 64
    assert not has_control(cleaned)
    cleaned.encode("utf-8")  # raises on a lone surrogate


# -- where facts are made


def test_owner_kind_and_name_reach_the_status_and_the_event_cleaned() -> None:
    owner = {**owner_reference("Job", "batch/v1", "x"), "kind": HOSTILE_KIND, "name": HOSTILE_NAME}
    facts = facts_of(hostile_pool(owner))
    evaluation = evaluate(default_config(), facts)
    status = capability(evaluation, "efa-p5").status
    texts = strings_of(status.to_json())
    assert not [text for text in texts if has_control(text)]
    (event,) = evaluation.workload_events
    assert not has_control(event.message)
    assert not has_control(event.involved.kind) and not has_control(event.involved.name)
    assert is_dns_subdomain(event.event_name), event.event_name


def test_600000_character_owner_kind_and_name_make_small_statuses_and_events() -> None:
    owner = {**owner_reference("Job", "batch/v1", "x"), "kind": "K" * 600_000, "name": "n" * 600_000}
    evaluation = evaluate(default_config(), facts_of(hostile_pool(owner)))
    status = capability(evaluation, "efa-p5").status
    assert len(json.dumps(status.to_json())) < 8_000
    (event,) = evaluation.workload_events
    assert len(event.message) <= MAX_MESSAGE
    assert len(event.involved.name) <= 253 and len(event.involved.kind) <= 63
    assert len(event.event_name) <= 253


def test_pool_values_and_node_names_from_a_snapshot_are_cleaned() -> None:
    hostile_node = node(f"n1{ESCAPES}", efa=0, pool=f"p5{FORGED_LINE}{ESCAPES}")
    other = node("n2", efa=32, pool=f"p5{FORGED_LINE}{ESCAPES}")
    facts = facts_of([daemon_set(), hostile_node, other, *plugin_pods([f"n1{ESCAPES}", "n2"])])
    pool = next(iter(facts.pool_members))
    assert not has_control(pool.value) and len(pool.value) <= 253
    status = evaluate(default_config(), facts).capabilities[0].status
    assert not [text for text in strings_of(status.to_json()) if has_control(text)]
    # The node is still matched with its plugin pod: both names were cleaned the same way.
    assert status.device_plugin.ready_nodes == 2


def test_a_scheduler_message_with_escapes_is_cleaned() -> None:
    message = SCHEDULER_EFA_MESSAGE.format(nodes=2) + FORGED_LINE + ESCAPES
    pending = workload_pod(None, "pending", efa=32, unschedulable=message)
    extractor = FactsExtractor(default_config())
    facts = extractor.workload_pod(pending)
    assert facts is not None and facts.unschedulable is not None
    assert not has_control(facts.unschedulable)


@given(
    name=st.text(min_size=1, max_size=400),
    kind=st.text(min_size=1, max_size=80),
    pool=st.text(min_size=1, max_size=100),
)
def test_an_event_name_is_a_dns_subdomain_whatever_the_owner_is_called(name: str, kind: str, pool: str) -> None:
    owner = ObjectRef("v1", kind, "ml", name)
    key = not_requested_key("efa", owner, PoolRef(key="karpenter.sh/nodepool", value=pool))
    event = WorkloadEvent(involved=owner, reason="FabricNotRequested", text="m", key=key)
    assert is_dns_subdomain(event.event_name), event.event_name


def test_a_readable_event_name_keeps_the_owner_name_when_it_can() -> None:
    config = default_config()
    profile = config.enabled_fabrics[0]
    status = capability(evaluate(config, facts_of(hostile_pool(owner_reference("Job", "batch/v1", "bert")))), "efa-p5")
    event = not_requested_wording(profile, "efa-p5", status.status).event(ObjectRef("batch/v1", "Job", "ml", "bert"), 1)
    assert event.event_name.startswith("bert.fabriccap-")
    ending_badly = WorkloadEvent(ObjectRef("batch/v1", "Job", "ml", "a" * 199 + "-b"), "R", "m", "k")
    assert is_dns_subdomain(ending_badly.event_name)


def test_an_event_keeps_the_name_it_had_before_its_key_was_a_digest() -> None:
    """A restart after an upgrade finds the Warnings sent before it by name (a 409), so the name
    of a problem's Event is what the round-2 code named it: this one was computed with it."""
    owner = ObjectRef("batch/v1", "Job", "ml", "bert", uid="4b1c2a6e-0000-4000-8000-000000000001")
    key = not_requested_key("efa", owner, PoolRef(key="eks.amazonaws.com/nodegroup", value="p5"))
    event = WorkloadEvent(owner, "FabricNotRequested", "m", key)
    assert event.event_name == "bert.fabriccap-243fbdf5662ab43e"
