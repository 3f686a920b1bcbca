"""The fault-injecting proxy (fabriccap_devtools.faultproxy) in front of the fake API server.

The end-to-end tests put it in front of the real kube-apiserver (tests/e2e/test_watch_faults_live.py);
here each action is checked against a server whose every request is recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from fabriccap.kube.client import KubeClient
from fabriccap.kube.credentials import Credentials, load_kubeconfig
from fabriccap.kube.errors import KubeError, WatchLineError
from fabriccap_devtools import faultproxy
from fabriccap_devtools.faultproxy import (
    Delay,
    Drop,
    FaultProxy,
    Inject,
    Pass,
    Rule,
    Silent,
    Slow,
    Status,
    Truncate,
    request_verb,
)
from support.builders import node
from support.fakeapi import FakeApi, WatchResponse, event, eventually, fake_api

NODES = "/api/v1/nodes"
CAPS = "/apis/fabriccap.dev/v1alpha1/fabriccapabilities"


@asynccontextmanager
async def proxied() -> AsyncIterator[tuple[FakeApi, FaultProxy, KubeClient]]:
    """The fake API (which wants the upstream token), the proxy holding it, and a client
    without credentials that talks to the proxy."""
    async with fake_api() as (api, _):
        api.serve(NODES, "Node", [node("n1"), node("n2")], "10")
        api.serve(CAPS, "FabricCapability", [], "10")
        api.required_token = "upstream-token"
        proxy = FaultProxy(Credentials(server=api.url, token="upstream-token")).start()
        try:
            async with KubeClient(Credentials(server=proxy.url)) as client:
                yield api, proxy, client
        finally:
            proxy.stop()


async def _watch_lines(client: KubeClient, read_timeout: float = 5.0) -> list[object]:
    return [line async for line in client.watch(NODES, "10", timeout_seconds=5, read_timeout=read_timeout)]


@pytest.mark.parametrize(
    ("method", "path", "query", "verb"),
    [
        ("GET", "/api/v1/nodes", {}, "list"),
        ("GET", "/api/v1/nodes", {"watch": "true"}, "watch"),
        ("GET", "/api/v1/nodes/n1", {}, "get"),
        ("GET", "/api/v1/namespaces", {}, "list"),
        ("GET", "/api/v1/namespaces/kube-system", {}, "get"),
        ("GET", "/api/v1/namespaces/kube-system/pods", {}, "list"),
        ("GET", "/api/v1/namespaces/kube-system/pods/p", {}, "get"),
        ("GET", "/apis/apps/v1/namespaces/kube-system/daemonsets", {"watch": "1"}, "watch"),
        ("GET", "/apis/resource.k8s.io/v1/resourceslices", {}, "list"),
        ("GET", "/version", {}, "get"),
        ("POST", CAPS, {}, "create"),
        ("PUT", f"{CAPS}/x", {}, "update"),
        ("PATCH", f"{CAPS}/x/status", {}, "patch"),
        ("DELETE", f"{CAPS}/x", {}, "delete"),
    ],
)
def test_a_request_gets_the_verb_the_api_server_would_give_it(
    method: str, path: str, query: dict[str, str], verb: str
) -> None:
    assert request_verb(method, path, query) == verb


def test_rules_refuse_an_unknown_verb_and_an_unknown_action() -> None:
    with pytest.raises(ValueError, match="verb 'wacth'"):
        Rule("wacth", NODES, Silent())
    with pytest.raises(ValueError, match="an action is an object with a kind"):
        Rule.from_json({"verb": "watch", "action": {"kind": "explode"}})
    with pytest.raises(ValueError, match="action status"):
        Rule.from_json({"verb": "watch", "action": {"kind": "status"}})  # no code
    rule = Rule.from_json({"verb": "write", "path": "/status", "action": {"kind": "status", "code": 500}, "times": 1})
    assert rule.to_json()["action"] == {"kind": "status", "code": 500, "message": "", "retry_after": None}


async def test_without_rules_everything_passes_with_the_proxys_credentials() -> None:
    async with proxied() as (api, proxy, client):
        listing = await client.get(NODES)
        assert [item["metadata"]["name"] for item in listing["items"]] == ["n1", "n2"]
        created = await client.create(CAPS, {"metadata": {"name": "efa-p5"}})
        assert created["metadata"]["name"] == "efa-p5"
        # The client sent no credentials; the API server saw the proxy's.
        assert {auth for _, _, _, auth in api.requests} == {"Bearer upstream-token"}
        assert [(seen.verb, seen.action, seen.status) for seen in proxy.requests()] == [
            ("list", "pass", 200),
            ("create", "pass", 201),
        ]


async def test_a_status_rule_answers_its_code_so_many_times_then_passes() -> None:
    async with proxied() as (api, proxy, client):
        proxy.add(Rule("list", NODES, Status(429, "slow down", retry_after=1), times=2))
        for _ in range(2):
            with pytest.raises(KubeError, match="429 slow down") as caught:
                await client.get(NODES)
            assert caught.value.status == 429
        assert (await client.get(NODES))["items"]
        assert [seen.status for seen in proxy.requests(verb="list")] == [429, 429, 200]
        assert len(api.lists(NODES)) == 1  # the refused ones never reached the server
        assert proxy.rules() == []  # spent


async def test_a_rule_for_some_seconds_is_spent_after_them() -> None:
    async with proxied() as (_, proxy, client):
        proxy.add(Rule("read", NODES, Status(503), seconds=0.2))
        with pytest.raises(KubeError, match="503"):
            await client.get(NODES)
        await eventually(lambda: proxy.rules() == [], "the rule's time to end")
        assert (await client.get(NODES))["items"]


async def test_rules_match_by_verb_group_and_path_and_the_first_live_one_acts() -> None:
    async with proxied() as (_, proxy, client):
        await client.create(CAPS, {"metadata": {"name": "a"}})
        await client.create(CAPS, {"metadata": {"name": "b"}})
        proxy.add(Rule("patch", f"{CAPS}/a/status", Pass()))  # let one object's writes through
        proxy.add(Rule("write", "/status", Status(500)))
        await client.merge_patch(f"{CAPS}/a/status", {"status": {"nodes": 1}})
        with pytest.raises(KubeError, match="500"):
            await client.merge_patch(f"{CAPS}/b/status", {"status": {"nodes": 1}})
        assert (await client.get(NODES))["items"]  # a read: no write rule applies
        assert [(seen.verb, seen.action) for seen in proxy.requests()][-3:] == [
            ("patch", "pass"),
            ("patch", "status"),
            ("list", "pass"),
        ]


async def test_a_watch_is_streamed_as_it_comes() -> None:
    async with proxied() as (api, proxy, client):
        lines: list[object] = []

        async def read() -> None:
            async for line in client.watch(NODES, "10", timeout_seconds=5):
                lines.append(line)
                if len(lines) == 2:
                    return

        reading = asyncio.create_task(read())
        await api.emit(NODES, event("ADDED", node("n3"), "11"))
        await eventually(lambda: len(lines) == 1, "the first event, before the stream ends")
        await api.emit(NODES, event("MODIFIED", node("n3", efa=1), "12"))
        await reading
        assert [line["type"] for line in lines] == ["ADDED", "MODIFIED"]  # type: ignore[index]
        assert proxy.requests(verb="watch")[0].query["resourceVersion"] == "10"


async def test_inject_writes_lines_into_a_watch_after_so_many_of_the_servers() -> None:
    async with proxied() as (api, proxy, client):
        proxy.add(Rule("watch", NODES, Inject(('"x"', "[]"), after_lines=1), times=1))
        lines: list[object] = []

        async def read() -> None:
            async for line in client.watch(NODES, "10", timeout_seconds=5):
                lines.append(line)
                if len(lines) == 4:
                    return

        reading = asyncio.create_task(read())
        await api.emit(NODES, event("ADDED", node("n3"), "11"), event("ADDED", node("n4"), "12"))
        await reading
        assert [line if not isinstance(line, dict) else line["type"] for line in lines] == ["ADDED", "x", [], "ADDED"]


async def test_truncate_ends_the_answer_cleanly_or_drops_the_connection() -> None:
    async with proxied() as (api, proxy, client):
        api.script(NODES, *[WatchResponse(events=[event("ADDED", node("n3"), "11")], close=True)] * 2)
        proxy.add(Rule("watch", NODES, Truncate(40), times=1))
        with pytest.raises(WatchLineError) as caught:
            await _watch_lines(client)
        assert caught.value.cause == "truncated line"
        proxy.add(Rule("watch", NODES, Truncate(40, abort=True), times=1))
        with pytest.raises(KubeError, match="broken") as broken:
            await _watch_lines(client)
        assert not isinstance(broken.value, WatchLineError)
        assert [seen.status for seen in proxy.requests(verb="watch")] == [200, None]


async def test_silent_accepts_and_never_speaks() -> None:
    async with proxied() as (api, proxy, client):
        proxy.add(Rule("watch", NODES, Silent()))
        with pytest.raises(KubeError, match="broken"):
            await _watch_lines(client, read_timeout=0.5)  # the client's read timeout ends it
        assert api.watches(NODES) == []  # the server was never asked
        await eventually(lambda: len(proxy.requests(verb="watch")) == 1, "the silent watch recorded")
        assert proxy.requests(verb="watch")[0].action == "silent"


async def test_delay_and_slow_forward_the_answer_whole() -> None:
    async with proxied() as (api, proxy, client):
        proxy.add(Rule("list", NODES, Delay(0.1), times=1))
        assert len((await client.get(NODES))["items"]) == 2
        api.script(NODES, WatchResponse(events=[event("ADDED", node("n3"), "11")], close=True))
        proxy.add(Rule("watch", NODES, Slow(step_bytes=200, interval=0.001), times=1))
        (line,) = await _watch_lines(client)
        assert line["object"]["metadata"]["name"] == "n3"  # type: ignore[index]
        assert [seen.action for seen in proxy.requests()] == ["delay", "slow"]


async def test_drop_closes_the_connection_without_an_answer() -> None:
    async with proxied() as (api, proxy, client):
        # Every time: aiohttp tries an idempotent request again once on a new connection.
        rule = proxy.add(Rule("list", NODES, Drop()))
        with pytest.raises(KubeError, match="cannot reach"):
            await client.get(NODES)
        assert api.lists(NODES) == []
        assert {seen.status for seen in proxy.requests()} == {None}
        proxy.remove(rule)
        assert (await client.get(NODES))["items"]


async def test_the_http_control_api_adds_lists_and_removes_rules() -> None:
    async with proxied() as (_, proxy, client), aiohttp.ClientSession() as http:
        rule = {"verb": "list", "path": NODES, "action": {"kind": "status", "code": 500}, "times": 1}
        async with http.post(f"{proxy.url}/_faultproxy/rules", json=rule) as answer:
            assert answer.status == 201
            rule_id = (await answer.json())["id"]
        async with http.post(f"{proxy.url}/_faultproxy/rules", json={"verb": "nope", "action": {}}) as answer:
            assert answer.status == 400
        async with http.get(f"{proxy.url}/_faultproxy/rules") as answer:
            assert [listed["id"] for listed in await answer.json()] == [rule_id]
        with pytest.raises(KubeError, match="500"):
            await client.get(NODES)
        async with http.get(f"{proxy.url}/_faultproxy/requests") as answer:
            assert [(seen["verb"], seen["status"]) for seen in await answer.json()] == [("list", 500)]
        proxy.add(Rule("list", NODES, Status(500)))
        async with http.delete(f"{proxy.url}/_faultproxy/rules") as answer:
            assert answer.status == 200
        assert proxy.rules() == []
        assert (await client.get(NODES))["items"]


async def test_its_kubeconfig_reaches_the_server_through_it(tmp_path: Path) -> None:
    async with proxied() as (_, proxy, _client):
        credentials = load_kubeconfig(str(proxy.kubeconfig(tmp_path / "via.kubeconfig")))
        assert credentials.server == proxy.url and credentials.headers() == {}
        async with KubeClient(credentials) as client:
            assert len((await client.get(NODES))["items"]) == 2


def test_it_listens_on_loopback_only() -> None:
    assert faultproxy._address("127.0.0.1:0") == ("127.0.0.1", 0)
    with pytest.raises(argparse.ArgumentTypeError, match="loopback"):
        faultproxy._address("0.0.0.0:8080")


def test_rules_from_a_file_at_start(tmp_path: Path) -> None:
    rules = [{"verb": "watch", "path": NODES, "action": {"kind": "inject", "lines": ["[]"]}, "times": 1}]
    (tmp_path / "rules.json").write_text(json.dumps(rules))
    (read,) = [Rule.from_json(document) for document in json.loads((tmp_path / "rules.json").read_text())]
    assert read.action == Inject(("[]",))
