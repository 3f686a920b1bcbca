"""The log-serving front (fabriccap_devtools.logstub) in front of the fake API server: every
request goes through as it came, a watch streams, pods' logs are answered from the source
given (limitBytes honoured) or passed on, counted, and held when asked."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from fabriccap.kube.client import KubeClient
from fabriccap.kube.credentials import load_credentials
from fabriccap.kube.paths import NODES, pod_log
from fabriccap_devtools.logstub import LogStub, corpus_logs
from support.fakeapi import LogScript, event, eventually, fake_api

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "upstream-token"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


async def _read_log(client: KubeClient, namespace: str, pod: str, limit: int = 1 << 20) -> bytes:
    async with client.stream(
        pod_log(namespace, pod), {"container": "c", "limitBytes": limit}, max_bytes=limit
    ) as chunks:
        return b"".join([chunk async for chunk in chunks])


async def test_requests_pass_through_with_the_fronts_identity_and_logs_are_served(tmp_path: Path) -> None:
    served = {("ml", "p0"): b"NCCL INFO Using network Socket\n" * 10}
    async with fake_api() as (api, _):
        api.serve(NODES.collection(), "Node", [NODE], "5")
        api.logs[pod_log("ml", "real")] = LogScript(chunks=lambda: [b"from the kubelet\n"])
        stub = LogStub(_kubeconfig(tmp_path / "upstream", api.url), lambda ns, pod, c: served.get((ns, pod)))
        stub.start()
        try:
            client = KubeClient(load_credentials(str(stub.kubeconfig_for(tmp_path / "front"))))
            listed = await client.get(NODES.collection())
            assert [item["metadata"]["name"] for item in listed["items"]] == ["n1"]
            assert api.requests[-1][3] == "Bearer upstream-token"  # the front's identity
            # A watch streams through as events come.
            watched: list[str] = []

            async def watch() -> None:
                async for seen in client.watch(NODES.collection(), "5", timeout_seconds=30):
                    watched.append(seen["object"]["metadata"]["name"])
                    return

            task = asyncio.create_task(watch())
            await api.emit(NODES.collection(), event("ADDED", {**NODE, "metadata": {"name": "n2"}}, "6"))
            await asyncio.wait_for(task, 10)
            assert watched == ["n2"]
            assert await _read_log(client, "ml", "p0", limit=40) == served[("ml", "p0")][:40]
            assert await _read_log(client, "ml", "real") == b"from the kubelet\n"  # not served: passed on
            assert stub.stats.requests == 2 and stub.stats.by_pod == {"ml/p0": 1, "ml/real": 1}
            await client.close()
        finally:
            stub.stop()


async def test_a_held_log_sends_its_first_bytes_and_waits(tmp_path: Path) -> None:
    async with fake_api() as (api, _):
        stub = LogStub(_kubeconfig(tmp_path / "upstream", api.url), corpus_logs())
        stub.start()
        try:
            client = KubeClient(load_credentials(str(stub.kubeconfig_for(tmp_path / "front"))))
            stub.hold("ml", "slow")
            reading = asyncio.create_task(_read_log(client, "ml", "slow"))
            await eventually(lambda: stub.waiting("ml", "slow"), "the read to wait")
            assert not reading.done()
            stub.release("ml", "slow")
            body = await asyncio.wait_for(reading, 10)
            assert b"NCCL INFO" in body and len(body) > 64
            await client.close()
        finally:
            stub.stop()
