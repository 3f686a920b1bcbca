"""A small async Kubernetes client on aiohttp: kubeconfig or in-cluster credentials, raw JSON.

Why not kubernetes_asyncio: importing it costs ~35 MB of resident memory (its generated
models; kopf imports them too when the package is present), a third of the operator's budget,
and the operator never uses a model: objects become facts right away. What users expect from
credentials is kept: kubeconfig files (``KUBECONFIG`` lists merged), client certificates,
tokens and token files, exec plugins (``aws eks get-token``), and in-cluster service-account
tokens that are re-read as they rotate.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from fabriccap.errors import KubeError

__all__ = ["Credentials", "KubeClient", "KubeError", "connect", "load_credentials"]

MERGE_PATCH = "application/merge-patch+json"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# Exec credentials are refreshed this long before they expire.
EXPIRY_MARGIN_SECONDS = 60.0
TOKEN_FILE_REREAD_SECONDS = 60.0


@dataclass
class ExecPlugin:
    command: str
    args: list[str]
    env: dict[str, str]
    api_version: str
    base_dir: Path


@dataclass
class Credentials:
    """Where the API server is and how to authenticate; enough for aiohttp and for kopf."""

    server: str
    ca_data: bytes | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    token: str | None = None
    token_file: Path | None = None
    client_cert_data: bytes | None = None
    client_key_data: bytes | None = None
    username: str | None = None
    password: str | None = None
    exec_plugin: ExecPlugin | None = None
    source: str = ""
    _expires_at: float | None = field(default=None, repr=False)
    _token_read_at: float = field(default=0.0, repr=False)

    def refresh(self, force: bool = False) -> None:
        """Re-read rotating credentials: the token file, or an exec plugin near expiry."""
        now = time.monotonic()
        if self.token_file is not None and (force or now - self._token_read_at > TOKEN_FILE_REREAD_SECONDS):
            try:
                self.token = self.token_file.read_text().strip()
            except OSError as error:
                raise KubeError(f"cannot read token file {self.token_file}: {error.strerror}") from None
            self._token_read_at = now
        if self.exec_plugin is not None and (
            force
            or (self.token is None and self.client_cert_data is None)
            or (self._expires_at is not None and now >= self._expires_at)
        ):
            self._run_exec_plugin(self.exec_plugin)

    def _run_exec_plugin(self, plugin: ExecPlugin) -> None:
        exec_info = {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
        try:
            result = subprocess.run(
                [plugin.command, *plugin.args],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=plugin.base_dir,
                env={**os.environ, **plugin.env, "KUBERNETES_EXEC_INFO": json.dumps(exec_info)},
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise KubeError(f"credential plugin {plugin.command} failed: {error}") from None
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise KubeError(f"credential plugin {plugin.command} exited {result.returncode}: {last}")
        try:
            status = json.loads(result.stdout)["status"]
        except (ValueError, KeyError, TypeError):
            raise KubeError(f"credential plugin {plugin.command} printed no ExecCredential status") from None
        self.token = status.get("token")
        if status.get("clientCertificateData") and status.get("clientKeyData"):
            self.client_cert_data = str(status["clientCertificateData"]).encode()
            self.client_key_data = str(status["clientKeyData"]).encode()
        expiry = status.get("expirationTimestamp")
        self._expires_at = None
        if expiry:
            remaining = datetime.fromisoformat(str(expiry).replace("Z", "+00:00")).timestamp() - time.time()
            self._expires_at = time.monotonic() + max(remaining - EXPIRY_MARGIN_SECONDS, 0.0)

    def headers(self) -> dict[str, str]:
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        if self.username is not None and self.password is not None:
            basic = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            return {"Authorization": f"Basic {basic}"}
        return {}

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.server.startswith("https://"):
            return False
        context = ssl.create_default_context(cadata=self.ca_data.decode() if self.ca_data else None)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.client_cert_data and self.client_key_data:
            # ssl loads client certificates from files only: a private, short-lived directory.
            with tempfile.TemporaryDirectory(prefix="fabriccap-tls-") as directory:
                cert, key = Path(directory) / "tls.crt", Path(directory) / "tls.key"
                cert.write_bytes(self.client_cert_data)
                key.touch(mode=0o600)
                key.write_bytes(self.client_key_data)
                context.load_cert_chain(cert, key)
        return context


def _b64(value: Any, what: str) -> bytes:
    try:
        # Like kubectl (Go's decoder), ignore line breaks: `base64` wraps its output at 76 columns.
        return base64.b64decode(str(value).replace("\r", "").replace("\n", ""), validate=True)
    except ValueError:
        raise KubeError(f"kubeconfig: {what} is not valid base64") from None


def _file_or_data(entry: Mapping[str, Any], key: str, base_dir: Path) -> bytes | None:
    if entry.get(f"{key}-data"):
        return _b64(entry[f"{key}-data"], f"{key}-data")
    if entry.get(key):
        path = base_dir / Path(str(entry[key])).expanduser()
        try:
            return path.read_bytes()
        except OSError as error:
            raise KubeError(f"kubeconfig: cannot read {key} {path}: {error.strerror}") from None
    return None


def _kubeconfig_paths(kubeconfig: str | None) -> list[Path]:
    if kubeconfig:
        return [Path(kubeconfig).expanduser()]
    environment = os.environ.get("KUBECONFIG", "")
    if environment:
        return [Path(part).expanduser() for part in environment.split(os.pathsep) if part]
    return [Path("~/.kube/config").expanduser()]


def _named(documents: list[tuple[Path, dict[str, Any]]], section: str) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Merge a kubeconfig section across files: the first file to define a name wins."""
    merged: dict[str, tuple[Path, dict[str, Any]]] = {}
    for path, document in documents:
        for entry in document.get(section) or []:
            if isinstance(entry, Mapping) and entry.get("name") is not None:
                merged.setdefault(str(entry["name"]), (path, dict(entry.get(section.removesuffix("s")) or {})))
    return merged


def load_kubeconfig(kubeconfig: str | None = None, context: str | None = None) -> Credentials:
    paths = _kubeconfig_paths(kubeconfig)
    shown = os.pathsep.join(str(path) for path in paths)
    documents = []
    for path in paths:
        if not path.is_file():
            if kubeconfig or len(paths) == 1:
                raise KubeError(f"no Kubernetes cluster configured: kubeconfig {path} does not exist")
            continue
        try:
            document = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as error:
            raise KubeError(f"kubeconfig {path} is unreadable: {error}") from None
        if isinstance(document, Mapping):
            documents.append((path, dict(document)))
    if not documents:
        raise KubeError(f"no Kubernetes cluster configured: no kubeconfig in {shown}")
    context_name = context or next((str(d["current-context"]) for _, d in documents if d.get("current-context")), None)
    contexts = _named(documents, "contexts")
    if context_name is None:
        raise KubeError(f"no Kubernetes cluster configured: kubeconfig {shown} has no current context")
    if context_name not in contexts:
        raise KubeError(f"kubeconfig {shown}: context {context_name} does not exist")
    _, context_entry = contexts[context_name]
    clusters, users = _named(documents, "clusters"), _named(documents, "users")
    cluster_name, user_name = str(context_entry.get("cluster")), str(context_entry.get("user", ""))
    if cluster_name not in clusters:
        raise KubeError(f"kubeconfig {shown}: context {context_name} names unknown cluster {cluster_name}")
    cluster_path, cluster = clusters[cluster_name]
    user_path, user = users.get(user_name, (cluster_path, {}))
    if user.get("auth-provider"):
        raise KubeError(f"kubeconfig {shown}: auth-provider credentials are not supported; use an exec plugin")
    exec_entry = user.get("exec")
    credentials = Credentials(
        server=str(cluster.get("server", "")).rstrip("/"),
        ca_data=_file_or_data(cluster, "certificate-authority", cluster_path.parent),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name"),
        token=user.get("token"),
        token_file=(user_path.parent / str(user["tokenFile"])) if user.get("tokenFile") else None,
        client_cert_data=_file_or_data(user, "client-certificate", user_path.parent),
        client_key_data=_file_or_data(user, "client-key", user_path.parent),
        username=user.get("username"),
        password=user.get("password"),
        exec_plugin=ExecPlugin(
            command=str(exec_entry["command"]),
            args=[str(arg) for arg in exec_entry.get("args") or []],
            env={str(e["name"]): str(e["value"]) for e in exec_entry.get("env") or []},
            api_version=str(exec_entry.get("apiVersion", "client.authentication.k8s.io/v1")),
            base_dir=user_path.parent,
        )
        if isinstance(exec_entry, Mapping) and exec_entry.get("command")
        else None,
        source=f"kubeconfig {shown}",
    )
    if not credentials.server:
        raise KubeError(f"kubeconfig {shown}: cluster {cluster_name} has no server")
    return credentials


def load_in_cluster() -> Credentials:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise KubeError("not running in a cluster (KUBERNETES_SERVICE_HOST is unset)")
    host = f"[{host}]" if ":" in host else host
    try:
        ca = (SERVICE_ACCOUNT_DIR / "ca.crt").read_bytes()
    except OSError as error:
        raise KubeError(f"in-cluster CA unreadable: {error.strerror}") from None
    return Credentials(
        server=f"https://{host}:{port}",
        ca_data=ca,
        token_file=SERVICE_ACCOUNT_DIR / "token",
        source="in-cluster service account",
    )


def load_credentials(kubeconfig: str | None = None) -> Credentials:
    """In-cluster credentials in a pod (unless a kubeconfig is given), else kubeconfig."""
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST") and (SERVICE_ACCOUNT_DIR / "token").exists():
        credentials = load_in_cluster()
    else:
        credentials = load_kubeconfig(kubeconfig)
    if credentials.exec_plugin or credentials.token_file:
        credentials.refresh(force=True)
    return credentials


def _api_message(status: int, raw: bytes) -> str:
    try:
        body = json.loads(raw)
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
    except ValueError:
        pass
    return raw.decode(errors="replace").strip()[:200] or f"HTTP {status}"


class KubeClient:
    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | bool | None = None

    @property
    def server(self) -> str:
        return self.credentials.server

    def _connection(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._ssl = self.credentials.ssl_context()
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl, limit=32),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _send(
        self, method: str, path: str, query: Mapping[str, Any] | None, body: Any, content_type: str, timeout: float
    ) -> tuple[int, bytes]:
        self.credentials.refresh()
        headers = {"Accept": "application/json", **self.credentials.headers()}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body)
        params = {key: str(value) for key, value in (query or {}).items()}
        try:
            async with self._connection().request(
                method,
                self.server + path,
                params=params,
                data=data,
                headers=headers,
                server_hostname=self.credentials.tls_server_name,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                return response.status, await response.read()
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            raise KubeError(
                f"cannot reach the Kubernetes API at {self.server}: {error or type(error).__name__}"
            ) from None

    async def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 60.0,
    ) -> Any:
        status, raw = await self._send(method, path, query, body, content_type, timeout)
        if status == 401 and (self.credentials.exec_plugin or self.credentials.token_file):
            self.credentials.refresh(force=True)  # a rotated or expired token: once more
            status, raw = await self._send(method, path, query, body, content_type, timeout)
        if status >= 400:
            raise KubeError(f"{method} {path}: {status} {_api_message(status, raw)}", status)
        return json.loads(raw) if raw else None

    async def get(self, path: str, query: Mapping[str, Any] | None = None) -> Any:
        return await self.request("GET", path, query)

    async def list_pages(self, path: str, page_size: int = 500) -> AsyncIterator[dict[str, Any]]:
        """LIST in pages so a large cluster never sits in memory as one response."""
        continue_token: str | None = None
        while True:
            query: dict[str, Any] = {"limit": page_size}
            if continue_token:
                query["continue"] = continue_token
            page: dict[str, Any] = await self.get(path, query)
            kind = str(page.get("kind", "List")).removesuffix("List")
            for item in page.get("items") or []:
                item.setdefault("kind", kind)
            yield page
            continue_token = (page.get("metadata") or {}).get("continue")
            if not continue_token:
                return

    async def list_items(self, path: str, page_size: int = 500) -> AsyncIterator[dict[str, Any]]:
        async for page in self.list_pages(path, page_size):
            for item in page.get("items") or []:
                yield item

    async def watch(
        self, path: str, resource_version: str, timeout_seconds: int = 290
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events, one parsed JSON line at a time, until the server ends the stream."""
        self.credentials.refresh()
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        try:
            async with self._connection().get(
                self.server + path,
                params=params,
                headers={"Accept": "application/json", **self.credentials.headers()},
                server_hostname=self.credentials.tls_server_name,
                # No total limit: the server ends the stream; a silent stall is caught by this.
                timeout=aiohttp.ClientTimeout(total=None, sock_read=timeout_seconds + 30),
            ) as response:
                if response.status >= 400:
                    raw = await response.read()
                    raise KubeError(
                        f"WATCH {path}: {response.status} {_api_message(response.status, raw)}", response.status
                    )
                buffer = b""
                async for chunk in response.content.iter_any():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            try:
                                event = json.loads(line)
                            except ValueError:
                                # A garbled stream: end it; the caller resumes from the last version.
                                raise KubeError(f"watch {path}: malformed event ({len(line)} bytes)") from None
                            yield event
        except (aiohttp.ClientError, OSError, TimeoutError, asyncio.IncompleteReadError) as error:
            raise KubeError(f"watch {path} broken: {error or type(error).__name__}") from None

    async def create(self, path: str, body: Mapping[str, Any]) -> Any:
        return await self.request("POST", path, body=body)

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> Any:
        return await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def delete(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        return await self.request("DELETE", path, body=body)


async def connect(kubeconfig: str | None = None) -> KubeClient:
    return KubeClient(load_credentials(kubeconfig))
