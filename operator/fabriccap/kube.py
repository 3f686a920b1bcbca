"""A thin async Kubernetes client: kubeconfig/in-cluster auth from kubernetes_asyncio, raw JSON.

kubernetes_asyncio brings the credential handling users expect (exec plugins such as
``aws eks get-token``, in-cluster tokens, client certificates). Its generated models are
not used: objects stay plain JSON, because the caller turns them into facts right away and a
10,000-node LIST through the model layer costs seconds and hundreds of megabytes.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

from fabriccap.errors import KubeError

MERGE_PATCH = "application/merge-patch+json"
__all__ = ["KubeClient", "KubeError", "connect", "load_configuration"]

IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def _api_message(error: ApiException) -> str:
    try:
        body = json.loads(error.body) if error.body else {}
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
    except (TypeError, ValueError):
        pass
    return str(error.reason or error)


class KubeClient:
    def __init__(self, api: k8s_client.ApiClient) -> None:
        self.api = api

    @property
    def configuration(self) -> Any:
        return self.api.configuration

    async def close(self) -> None:
        await self.api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 60.0,
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            response = await self.api.call_api(
                path,
                method,
                query_params=list((query or {}).items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=timeout,
            )
            raw = await response.read()
            # With _preload_content=False kubernetes_asyncio returns error responses instead of
            # raising: a 404/409 would pass as a "successful" Status body.
            if not 200 <= response.status <= 299:
                failure = ApiException(status=response.status, reason=response.reason)
                failure.body = raw.decode(errors="replace")
                raise failure
        except ApiException as error:
            raise KubeError(f"{method} {path}: {error.status} {_api_message(error)}", error.status) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            raise KubeError(f"cannot reach the Kubernetes API at {self.configuration.host}: {error}") from None
        return json.loads(raw) if raw else None

    async def get(self, path: str, query: Mapping[str, Any] | None = None) -> Any:
        return await self.request("GET", path, query)

    async def list_items(self, path: str, page_size: int = 500) -> AsyncIterator[dict[str, Any]]:
        """LIST in pages so a large cluster never sits in memory as one response."""
        continue_token: str | None = None
        while True:
            query: dict[str, Any] = {"limit": page_size}
            if continue_token:
                query["continue"] = continue_token
            page = await self.get(path, query)
            kind = str(page.get("kind", "List")).removesuffix("List")
            for item in page.get("items") or []:
                item.setdefault("kind", kind)
                yield item
            continue_token = (page.get("metadata") or {}).get("continue")
            if not continue_token:
                return

    async def create(self, path: str, body: Mapping[str, Any]) -> Any:
        return await self.request("POST", path, body=body)

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> Any:
        return await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def delete(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        return await self.request("DELETE", path, body=body)


async def load_configuration(kubeconfig: str | None = None) -> Any:
    """In-cluster config when running in a pod (and no kubeconfig given), else KUBECONFIG."""
    configuration = k8s_client.Configuration()
    in_cluster = os.environ.get("KUBERNETES_SERVICE_HOST") and IN_CLUSTER_TOKEN.exists()
    if kubeconfig is None and in_cluster:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except k8s_config.ConfigException as error:
            raise KubeError(f"in-cluster configuration unusable: {error}") from None
        return configuration
    # Read $KUBECONFIG now, not when kubernetes_asyncio was imported (it caches it then).
    environment = os.environ.get("KUBECONFIG", "")
    path = kubeconfig or (environment if environment and os.pathsep not in environment else None)
    shown = path or environment or "~/.kube/config"
    if path is not None and not Path(path).expanduser().is_file():
        raise KubeError(f"no Kubernetes cluster configured: kubeconfig {shown} does not exist")
    # The library logs its own complaint before raising; our one-line error says it all.
    library_logger = logging.getLogger("kubernetes_asyncio.config.kube_config")
    previous_level = library_logger.level
    library_logger.setLevel(logging.CRITICAL)
    try:
        await k8s_config.load_kube_config(config_file=path, client_configuration=configuration)
    except (k8s_config.ConfigException, OSError, TypeError, ValueError, KeyError) as error:
        raise KubeError(f"no Kubernetes cluster configured (kubeconfig {shown}): {error}") from None
    finally:
        library_logger.setLevel(previous_level)
    return configuration


async def connect(kubeconfig: str | None = None) -> KubeClient:
    configuration = await load_configuration(kubeconfig)
    return KubeClient(k8s_client.ApiClient(configuration=configuration))
