"""Where the API server is and how to authenticate, as kubectl finds it.

Kubeconfig files (``KUBECONFIG`` lists merged), contexts, client certificates, tokens and
token files, exec plugins (``aws eks get-token``), in-cluster service-account tokens that are
re-read as they rotate, and proxies (the cluster's ``proxy-url``, else ``HTTPS_PROXY`` /
``NO_PROXY``, with loopback never proxied, as Go's net/http does for kubectl).

An exec plugin may take up to a minute: ``refresh_async`` runs it in a worker thread, one
run at a time, so the event loop keeps serving watches and probes meanwhile.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import math
import os
import ssl
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from fabriccap.inputfile import NOT_A_FILE_HINT, InputFileError, read_input_file, shown_path
from fabriccap.kube.errors import KubeError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# Exec credentials are refreshed this long before they expire.
EXPIRY_MARGIN_SECONDS = 60.0
TOKEN_FILE_REREAD_SECONDS = 60.0
# A kubeconfig is kilobytes; one with a thousand clusters' certificates embedded is a few
# megabytes. Past this it is no kubeconfig, and is not read into memory.
MAX_KUBECONFIG_BYTES = 16 * 1024 * 1024


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
    # The cluster's `proxy-url`; None means the environment decides (see `proxy`).
    proxy_url: str | None = None
    source: str = ""
    _expires_at: float | None = field(default=None, repr=False)
    # Never, not 0.0: the monotonic clock starts near 0 at boot, so on a node up for less than
    # TOKEN_FILE_REREAD_SECONDS a token file never read counted as fresh (review 65-flaky F2).
    _token_read_at: float = field(default=-math.inf, repr=False)
    _exec_ran_at: float = field(default=-math.inf, repr=False)
    _refreshing: asyncio.Lock | None = field(default=None, repr=False)
    _refreshing_loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    # The environment's proxy for ``server``, as it was when first asked (server, proxy).
    _environment_proxy: tuple[str, str | None] | None = field(default=None, repr=False, compare=False)

    @property
    def rotating(self) -> bool:
        """Whether these credentials can be renewed (after a 401, say)."""
        return self.exec_plugin is not None or self.token_file is not None

    def needs_refresh(self, force: bool = False) -> bool:
        now = time.monotonic()
        token_file_due = self.token_file is not None and (
            force or now - self._token_read_at > TOKEN_FILE_REREAD_SECONDS
        )
        exec_due = self.exec_plugin is not None and (
            force
            or (self.token is None and self.client_cert_data is None)
            or (self._expires_at is not None and now >= self._expires_at)
        )
        return token_file_due or exec_due

    def refresh(self, force: bool = False) -> None:
        """Re-read rotating credentials: the token file, or an exec plugin near expiry.

        Blocking (an exec plugin may run for a minute): call it outside an event loop, and
        ``refresh_async`` inside one.
        """
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

    async def refresh_async(self, force: bool = False) -> None:
        """``refresh`` off the event loop; concurrent callers share one run of the plugin."""
        if not self.needs_refresh(force):
            return
        loop = asyncio.get_running_loop()
        if self._refreshing is None or self._refreshing_loop is not loop:
            self._refreshing, self._refreshing_loop = asyncio.Lock(), loop
        requested = time.monotonic()
        async with self._refreshing:
            # Someone else refreshed while we waited for the lock: their result will do.
            if force and max(self._token_read_at, self._exec_ran_at) >= requested:
                return
            if not self.needs_refresh(force):
                return
            await asyncio.to_thread(self.refresh, force)

    @property
    def proxy(self) -> str | None:
        """The proxy to reach the server through, or None for a direct connection."""
        if self.proxy_url:
            return self.proxy_url
        # Read from the environment once, as Go's http.ProxyFromEnvironment does: every request
        # asks, and parsing the server's address each time was 0.5 s of a 100,000-node start.
        if self._environment_proxy is None or self._environment_proxy[0] != self.server:
            self._environment_proxy = (self.server, proxy_from_environment(self.server))
        return self._environment_proxy[1]

    def _run_exec_plugin(self, plugin: ExecPlugin) -> None:
        self._exec_ran_at = time.monotonic()
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
    """Merge a kubeconfig section across files: the first file to define a name wins. A section
    that is not a list, or an entry whose value is not a mapping, is refused (kubectl refuses
    them too), not read as something else."""
    merged: dict[str, tuple[Path, dict[str, Any]]] = {}
    field_name = section.removesuffix("s")
    for path, document in documents:
        entries = document.get(section) or []
        if not isinstance(entries, list):
            raise KubeError(f"kubeconfig {shown_path(str(path))}: {section} is not a list")
        for entry in entries:
            if isinstance(entry, Mapping) and entry.get("name") is not None:
                value = entry.get(field_name) or {}
                if not isinstance(value, Mapping):
                    name = shown_path(str(entry["name"]))
                    raise KubeError(f"kubeconfig {shown_path(str(path))}: {field_name} {name} is not a mapping")
                merged.setdefault(str(entry["name"]), (path, dict(value)))
    return merged


def _read_kubeconfig(path: Path) -> Any:
    """One kubeconfig file's document, read as every file a user names is (inputfile): a FIFO
    or ``<(sops -d kubeconfig)`` is read, a directory or a device is refused as what it is, and
    no more than MAX_KUBECONFIG_BYTES is read."""
    name = str(path)
    shown = shown_path(name)
    try:
        # "-" is a file of that name here, not standard input (kubectl reads no kubeconfig there).
        text = read_input_file(name if name != "-" else "./-", MAX_KUBECONFIG_BYTES).decode("utf-8")
    except InputFileError as error:
        # No "- for standard input" here: a kubeconfig is never read from there.
        raise KubeError(f"kubeconfig {shown} is unreadable: {error.problem.removesuffix(NOT_A_FILE_HINT)}") from None
    except UnicodeDecodeError:
        raise KubeError(f"kubeconfig {shown} is unreadable: not a text file (not UTF-8)") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise KubeError(f"kubeconfig {shown} is unreadable: {error}") from None


def load_kubeconfig(kubeconfig: str | None = None, context: str | None = None) -> Credentials:
    paths = _kubeconfig_paths(kubeconfig)
    shown = os.pathsep.join(shown_path(str(path)) for path in paths)
    documents = []
    for path in paths:
        if not path.exists():
            if kubeconfig or len(paths) == 1:
                raise KubeError(f"no Kubernetes cluster configured: kubeconfig {shown_path(str(path))} does not exist")
            continue
        document = _read_kubeconfig(path)
        if isinstance(document, Mapping):
            documents.append((path, dict(document)))
    if not documents:
        raise KubeError(f"no Kubernetes cluster configured: no kubeconfig in {shown}")
    try:
        return _credentials(documents, shown, context)
    except (TypeError, ValueError, AttributeError) as error:
        # A field of a type no check above foresaw (a token that is a list): one line, never a
        # traceback (SPEC: a config error is one ``error:`` line).
        raise KubeError(f"kubeconfig {shown} is unusable: {type(error).__name__}: {error}") from None


def _credentials(documents: list[tuple[Path, dict[str, Any]]], shown: str, context: str | None) -> Credentials:
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
        exec_plugin=_exec_plugin(exec_entry, user_name, user_path),
        proxy_url=check_proxy_url(str(cluster["proxy-url"]), f"kubeconfig {shown}")
        if cluster.get("proxy-url")
        else None,
        source=f"kubeconfig {shown}",
    )
    if not credentials.server:
        raise KubeError(f"kubeconfig {shown}: cluster {cluster_name} has no server")
    return credentials


# An exec plugin's interactiveMode, as client-go's ExecConfig spells it. The plugin runs with no
# terminal here, as under kubectl with none (``spec.interactive`` false).
INTERACTIVE_MODES = frozenset({"Never", "IfAvailable", "Always"})


def _exec_plugin(entry: Any, user: str, path: Path) -> ExecPlugin | None:
    """A user's ``exec`` plugin, each field checked for the type client-go's ExecConfig gives it,
    so a wrong one is said by its name and file rather than by the error reading it raised
    (review 64c F9); None without one (or with no command, as before)."""
    if entry is None:
        return None
    where = f"kubeconfig {shown_path(str(path))}: user {shown_path(user)}'s exec"
    if not isinstance(entry, Mapping):
        raise KubeError(f"{where} is not a mapping")
    command, args, api_version = entry.get("command"), entry.get("args"), entry.get("apiVersion")
    if command is not None and not isinstance(command, str):
        raise KubeError(f"{where}.command is not a string")
    if args is not None and not (isinstance(args, list) and all(isinstance(arg, str) for arg in args)):
        raise KubeError(f"{where}.args is not a list of strings")
    if api_version is not None and not isinstance(api_version, str):
        raise KubeError(f"{where}.apiVersion is not a string")
    mode = entry.get("interactiveMode")
    if mode is not None and mode not in INTERACTIVE_MODES:
        raise KubeError(f"{where}.interactiveMode is not one of {', '.join(sorted(INTERACTIVE_MODES))}")
    env = entry.get("env")
    if env is not None and not (
        isinstance(env, list)
        and all(
            isinstance(e, Mapping) and isinstance(e.get("name"), str) and isinstance(e.get("value"), str) for e in env
        )
    ):
        raise KubeError(f"{where}.env is not a list of name and value (strings)")
    if not command:
        return None
    return ExecPlugin(
        command=command,
        args=list(args or []),
        env={e["name"]: e["value"] for e in env or []},
        api_version=api_version or "client.authentication.k8s.io/v1",
        base_dir=path.parent,
    )


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


def _resolve(kubeconfig: str | None, context: str | None) -> Credentials:
    in_pod = os.environ.get("KUBERNETES_SERVICE_HOST") and (SERVICE_ACCOUNT_DIR / "token").exists()
    if kubeconfig is None and context is None and in_pod:
        return load_in_cluster()
    return load_kubeconfig(kubeconfig, context)


def load_credentials(kubeconfig: str | None = None, context: str | None = None) -> Credentials:
    """In-cluster credentials in a pod (unless a kubeconfig or context is given), else kubeconfig.

    Blocking: a first exec-plugin run happens here. Inside an event loop use
    ``load_credentials_async``.
    """
    credentials = _resolve(kubeconfig, context)
    if credentials.rotating:
        credentials.refresh(force=True)
    return credentials


async def load_credentials_async(kubeconfig: str | None = None, context: str | None = None) -> Credentials:
    credentials = _resolve(kubeconfig, context)
    if credentials.rotating:
        await credentials.refresh_async(force=True)
    return credentials


# -- proxies, the way Go's net/http (and so kubectl) reads the environment

_SUPPORTED_PROXY_SCHEMES = ("http", "https")


def check_proxy_url(proxy_url: str, source: str) -> str:
    scheme = urlsplit(proxy_url).scheme
    if scheme not in _SUPPORTED_PROXY_SCHEMES:
        raise KubeError(f"{source}: proxy-url {proxy_url}: scheme {scheme or '(none)'} is not supported (http, https)")
    return proxy_url


def _environment(*names: str) -> str:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return ""


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether NO_PROXY exempts ``host``: ``*``, exact hosts, domain suffixes, IPs and CIDRs."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        entry_host, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if entry_port and port is not None and entry_port != str(port):
            continue
        if address is not None:
            try:
                if address in ipaddress.ip_network(entry_host, strict=False):
                    return True
            except ValueError:
                pass
            continue
        suffix = entry_host.lstrip("*").lstrip(".")
        if host == suffix or host.endswith("." + suffix):
            return True
    return False


def proxy_from_environment(server: str) -> str | None:
    """HTTPS_PROXY (or HTTP_PROXY for http servers) unless NO_PROXY or loopback exempts the host."""
    parts = urlsplit(server)
    host = (parts.hostname or "").lower()
    if not host or host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass
    if parts.scheme == "https":
        proxy = _environment("HTTPS_PROXY", "https_proxy")
    else:
        proxy = _environment("HTTP_PROXY", "http_proxy")
    if not proxy or _bypassed(host, parts.port, _environment("NO_PROXY", "no_proxy")):
        return None
    if "://" not in proxy:
        proxy = f"http://{proxy}"  # Go accepts a bare host:port
    return check_proxy_url(proxy, "HTTPS_PROXY" if parts.scheme == "https" else "HTTP_PROXY")
