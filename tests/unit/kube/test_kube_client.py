"""Credentials for the aiohttp Kubernetes client: kubeconfig files, rotating tokens, exec plugins, in-cluster."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import base64
import contextlib
import datetime
import json
import os
import re
import signal
import socket
import ssl
import stat
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import ClientResponse, web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fabriccap.kube import client as client_module
from fabriccap.kube import credentials as kube
from fabriccap.kube import exchanges
from fabriccap.kube.client import (
    BUSY_STREAM_BYTES,
    BUSY_STREAM_RECEIVE_BYTES,
    TLS_RECEIVE_BUFFER_BYTES,
    KubeClient,
    bound_tls_receive_buffers,
)
from fabriccap.kube.credentials import Credentials, load_credentials, load_in_cluster, load_kubeconfig
from fabriccap.kube.errors import KubeError
from support.fakeapi import fake_api

CA_PEM = b"-----BEGIN CERTIFICATE-----\nfake CA\n-----END CERTIFICATE-----\n"
CERT_PEM = b"-----BEGIN CERTIFICATE-----\nfake client\n-----END CERTIFICATE-----\n"
KEY_PEM = b"-----BEGIN EC PRIVATE KEY-----\nfake key\n-----END EC PRIVATE KEY-----\n"


@pytest.fixture(autouse=True)
def _no_ambient_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither the developer's kubeconfig nor a CI pod's service account may leak in."""
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(kube, "SERVICE_ACCOUNT_DIR", tmp_path / "no-service-account")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_kubeconfig(
    path: Path,
    *,
    cluster: Mapping[str, Any] | None = None,
    user: Mapping[str, Any] | None = None,
    current_context: str | None = "ctx",
    context_cluster: str = "c",
    extra: Mapping[str, Any] | None = None,
) -> Path:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": dict(cluster or {"server": "https://api.example:6443"})}],
        "users": [{"name": "u", "user": dict(user or {})}],
        "contexts": [{"name": "ctx", "context": {"cluster": context_cluster, "user": "u"}}],
    }
    if current_context is not None:
        document["current-context"] = current_context
    document.update(extra or {})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


# --- kubeconfig: where the cluster is, and certificates --------------------------------------


def test_client_certificate_and_ca_data(tmp_path: Path) -> None:
    config = write_kubeconfig(
        tmp_path / "config",
        cluster={
            "server": "https://api.example:6443/",
            "certificate-authority-data": b64(CA_PEM),
            "tls-server-name": "kubernetes.default",
        },
        user={"client-certificate-data": b64(CERT_PEM), "client-key-data": b64(KEY_PEM)},
    )
    credentials = load_kubeconfig(str(config))
    assert credentials.server == "https://api.example:6443"  # trailing slash dropped
    assert credentials.ca_data == CA_PEM
    assert credentials.client_cert_data == CERT_PEM
    assert credentials.client_key_data == KEY_PEM
    assert credentials.tls_server_name == "kubernetes.default"
    assert credentials.insecure is False
    assert credentials.token is None
    assert credentials.headers() == {}
    assert credentials.source == f"kubeconfig {config}"


def test_certificate_files_are_relative_to_the_kubeconfig_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "kube"
    (directory / "pki").mkdir(parents=True)
    (directory / "pki" / "ca.crt").write_bytes(CA_PEM)
    (directory / "pki" / "client.crt").write_bytes(CERT_PEM)
    absolute_key = tmp_path / "elsewhere" / "client.key"
    absolute_key.parent.mkdir()
    absolute_key.write_bytes(KEY_PEM)
    config = write_kubeconfig(
        directory / "config",
        cluster={"server": "https://api.example:6443", "certificate-authority": "pki/ca.crt"},
        user={"client-certificate": "pki/client.crt", "client-key": str(absolute_key)},
    )
    monkeypatch.chdir(tmp_path)  # not the kubeconfig's directory: "pki/ca.crt" must not resolve from here
    credentials = load_kubeconfig(str(config))
    assert credentials.ca_data == CA_PEM
    assert credentials.client_cert_data == CERT_PEM
    assert credentials.client_key_data == KEY_PEM


def test_data_takes_precedence_over_a_file(tmp_path: Path) -> None:
    config = write_kubeconfig(
        tmp_path / "config",
        cluster={
            "server": "https://api.example:6443",
            "certificate-authority": "absent.crt",
            "certificate-authority-data": b64(CA_PEM),
        },
    )
    assert load_kubeconfig(str(config)).ca_data == CA_PEM


def test_base64_wrapped_over_lines_is_accepted_like_kubectl(tmp_path: Path) -> None:
    # `base64 ca.crt` wraps at 76 columns; kubectl (Go's decoder) ignores the newlines.
    wrapped = "\n".join(b64(CA_PEM * 4)[i : i + 76] for i in range(0, len(b64(CA_PEM * 4)), 76)) + "\n"
    assert "\n" in wrapped.strip()
    config = write_kubeconfig(
        tmp_path / "config", cluster={"server": "https://api.example:6443", "certificate-authority-data": wrapped}
    )
    assert load_kubeconfig(str(config)).ca_data == CA_PEM * 4


def test_insecure_skip_tls_verify(tmp_path: Path) -> None:
    config = write_kubeconfig(
        tmp_path / "config", cluster={"server": "https://api.example:6443", "insecure-skip-tls-verify": True}
    )
    credentials = load_kubeconfig(str(config))
    assert credentials.insecure is True
    context = credentials.ssl_context()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_NONE
    assert context.check_hostname is False


def _self_signed(common_name: str) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def test_ssl_context_trusts_the_ca_and_presents_the_client_certificate() -> None:
    ca_pem, _ = _self_signed("test-ca")
    cert_pem, key_pem = _self_signed("system:admin")
    credentials = Credentials(
        server="https://api.example:6443", ca_data=ca_pem, client_cert_data=cert_pem, client_key_data=key_pem
    )
    context = credentials.ssl_context()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is True
    assert [cert["subject"] for cert in context.get_ca_certs()] == [((("commonName", "test-ca"),),)]
    # A key that does not match the certificate is refused, proving the pair was loaded.
    _, other_key = _self_signed("other")
    mismatched = Credentials(
        server="https://api.example:6443", ca_data=ca_pem, client_cert_data=cert_pem, client_key_data=other_key
    )
    with pytest.raises(ssl.SSLError):
        mismatched.ssl_context()


def test_plain_http_needs_no_ssl_context() -> None:
    assert Credentials(server="http://127.0.0.1:8080").ssl_context() is False


# --- tokens, token files, basic auth ---------------------------------------------------------


def test_token(tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "config", user={"token": "abc.def"})
    credentials = load_credentials(str(config))
    assert credentials.headers() == {"Authorization": "Bearer abc.def"}


def test_token_file_is_read_relative_to_the_kubeconfig_and_rotates(tmp_path: Path) -> None:
    token_file = tmp_path / "kube" / "token"
    token_file.parent.mkdir()
    token_file.write_text("first\n")
    config = write_kubeconfig(tmp_path / "kube" / "config", user={"tokenFile": "token"})
    credentials = load_credentials(str(config))
    assert credentials.token_file == token_file
    assert credentials.headers() == {"Authorization": "Bearer first"}

    token_file.write_text("second\n")
    credentials.refresh()  # read moments ago: not re-read yet
    assert credentials.headers() == {"Authorization": "Bearer first"}
    credentials.refresh(force=True)
    assert credentials.headers() == {"Authorization": "Bearer second"}


def test_token_file_is_re_read_after_a_minute(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first")
    credentials = load_credentials(str(write_kubeconfig(tmp_path / "config", user={"tokenFile": str(token_file)})))
    token_file.write_text("second")
    credentials._token_read_at -= kube.TOKEN_FILE_REREAD_SECONDS + 1  # as if read over a minute ago
    credentials.refresh()
    assert credentials.token == "second"


def test_unreadable_token_file(tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "config", user={"tokenFile": "missing-token"})
    with pytest.raises(KubeError, match=r"cannot read token file .*missing-token"):
        load_credentials(str(config))


def test_basic_auth(tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "config", user={"username": "admin", "password": "s3cret"})
    credentials = load_credentials(str(config))
    expected = base64.b64encode(b"admin:s3cret").decode()
    assert credentials.headers() == {"Authorization": f"Basic {expected}"}


# --- exec credential plugins ------------------------------------------------------------------

PLUGIN = """#!{python}
import json, os, pathlib, sys

here = pathlib.Path(__file__).resolve().parent
calls = here / "calls"
count = int(calls.read_text()) + 1 if calls.exists() else 1
calls.write_text(str(count))
(here / "last-call.json").write_text(json.dumps({{
    "argv": sys.argv[1:],
    "env": os.environ.get("PLUGIN_REGION"),
    "exec_info": json.loads(os.environ["KUBERNETES_EXEC_INFO"]),
    "cwd": os.getcwd(),
}}))
if (here / "fail").exists():
    print("starting", file=sys.stderr)
    print("error: the session has expired", file=sys.stderr)
    sys.exit(3)
status = {{"token": "token-%d" % count}}
expiry = (here / "expiry").read_text().strip()
if expiry:
    status["expirationTimestamp"] = expiry
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}}))
"""


class Plugin:
    """An exec credential plugin in a directory of its own, counting its invocations."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.script = directory / "get-token"
        self.script.write_text(PLUGIN.format(python=sys.executable))
        self.script.chmod(self.script.stat().st_mode | stat.S_IXUSR)
        self.expires_in(None)

    def expires_in(self, seconds: float | None) -> None:
        if seconds is None:
            (self.directory / "expiry").write_text("")
            return
        moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
        (self.directory / "expiry").write_text(moment.strftime("%Y-%m-%dT%H:%M:%SZ"))

    @property
    def calls(self) -> int:
        calls = self.directory / "calls"
        return int(calls.read_text()) if calls.exists() else 0

    @property
    def last_call(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads((self.directory / "last-call.json").read_text())
        return result

    def kubeconfig(self, command: str | None = None) -> Path:
        return write_kubeconfig(
            self.directory / "config",
            user={
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": command or str(self.script),
                    "args": ["eks", "get-token", "--cluster-name", "prod"],
                    "env": [{"name": "PLUGIN_REGION", "value": "us-west-2"}],
                    "interactiveMode": "Never",
                }
            },
        )


def test_exec_plugin_runs_once_then_again_after_expiry_and_on_force(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path / "plugin")
    plugin.expires_in(3600)
    credentials = load_credentials(str(plugin.kubeconfig()))
    assert plugin.calls == 1
    assert credentials.headers() == {"Authorization": "Bearer token-1"}
    assert plugin.last_call["argv"] == ["eks", "get-token", "--cluster-name", "prod"]
    assert plugin.last_call["env"] == "us-west-2"
    assert plugin.last_call["exec_info"] == {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "spec": {"interactive": False},
    }

    credentials.refresh()  # an hour left: the token is reused
    credentials.refresh()
    assert plugin.calls == 1

    plugin.expires_in(30)  # inside the refresh margin: as good as expired
    credentials.refresh(force=True)
    assert plugin.calls == 2
    assert credentials.token == "token-2"

    plugin.expires_in(3600)
    credentials.refresh()  # token-2 is (nearly) expired: the plugin runs again
    assert plugin.calls == 3
    assert credentials.headers() == {"Authorization": "Bearer token-3"}
    credentials.refresh()
    assert plugin.calls == 3


def test_exec_plugin_without_expiry_runs_only_when_forced(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path / "plugin")
    credentials = load_credentials(str(plugin.kubeconfig()))
    credentials.refresh()
    credentials.refresh()
    assert plugin.calls == 1
    credentials.refresh(force=True)
    assert (plugin.calls, credentials.token) == (2, "token-2")


def test_exec_plugin_relative_command_runs_in_the_kubeconfig_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = Plugin(tmp_path / "plugin")
    monkeypatch.chdir(tmp_path)
    credentials = load_credentials(str(plugin.kubeconfig(command="./get-token")))
    assert credentials.token == "token-1"
    assert Path(plugin.last_call["cwd"]) == plugin.directory.resolve()


def test_exec_plugin_failure_reports_its_last_error_line(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path / "plugin")
    (plugin.directory / "fail").touch()
    with pytest.raises(KubeError, match=r"credential plugin .*get-token exited 3: error: the session has expired$"):
        load_credentials(str(plugin.kubeconfig()))


def test_exec_plugin_missing_command(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path / "plugin")
    with pytest.raises(KubeError, match=r"credential plugin /nonexistent/aws-iam-authenticator failed"):
        load_credentials(str(plugin.kubeconfig(command="/nonexistent/aws-iam-authenticator")))


# --- KUBECONFIG with several files -------------------------------------------------------------


def test_kubeconfig_list_first_file_wins_per_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = tmp_path / "a" / "config"
    first.parent.mkdir()
    first.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "shared", "cluster": {"server": "https://first:6443"}}],
                "users": [{"name": "admin", "user": {"token": "first-token"}}],
            }
        )
    )
    second = tmp_path / "b" / "config"
    second.parent.mkdir()
    second.write_text(
        yaml.safe_dump(
            {
                "current-context": "work",
                "clusters": [
                    {"name": "shared", "cluster": {"server": "https://second:6443"}},
                    {"name": "only-second", "cluster": {"server": "https://only-second:6443"}},
                ],
                "users": [{"name": "admin", "user": {"token": "second-token"}}],
                "contexts": [
                    {"name": "work", "context": {"cluster": "shared", "user": "admin"}},
                    {"name": "lab", "context": {"cluster": "only-second", "user": "admin"}},
                ],
            }
        )
    )
    third = write_kubeconfig(tmp_path / "c" / "config", current_context="ctx")
    missing = tmp_path / "missing" / "config"  # a missing entry in the list is skipped
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(missing), str(second), str(third)]))

    credentials = load_credentials()
    assert credentials.server == "https://first:6443"  # current-context of the second file, names of the first
    assert credentials.token == "first-token"
    assert credentials.source == f"kubeconfig {os.pathsep.join(map(str, [first, missing, second, third]))}"

    lab = load_kubeconfig(context="lab")
    assert (lab.server, lab.token) == ("https://only-second:6443", "first-token")
    other = load_kubeconfig(context="ctx")
    assert other.server == "https://api.example:6443"


# --- errors ------------------------------------------------------------------------------------


def test_missing_kubeconfig_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    with pytest.raises(
        KubeError, match=re.escape(f"no Kubernetes cluster configured: kubeconfig {missing} does not exist")
    ):
        load_credentials(str(missing))


def test_default_kubeconfig_missing(tmp_path: Path) -> None:
    expected = tmp_path / "home" / ".kube" / "config"
    with pytest.raises(KubeError, match=re.escape(f"kubeconfig {expected} does not exist")):
        load_credentials()


def test_kubeconfig_list_with_no_existing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "x"), str(tmp_path / "y")]))
    with pytest.raises(KubeError, match="no Kubernetes cluster configured: no kubeconfig in") as caught:
        load_credentials()
    assert str(tmp_path / "y") in str(caught.value)


# Review 64-cli F2: a kubeconfig of the wrong shape is one KubeError (one `error:` line), never
# a UnicodeDecodeError, ValueError or TypeError traceback.
MALFORMED_KUBECONFIGS = [
    ("binary", b"\x89\xff\xfe\x00garbage", "not a text file (not UTF-8)"),
    ("context-a-string", b'current-context: x\ncontexts: [{name: x, context: "str"}]\n', "context x is not a mapping"),
    (
        "clusters-an-int",
        b"current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\nclusters: 5\n",
        "clusters is not a list",
    ),
    (
        "exec-env-of-ints",
        b"current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
        b"clusters: [{name: c, cluster: {server: 'https://a:1'}}]\n"
        b"users: [{name: u, user: {exec: {command: /bin/true, env: [1]}}}]\n",
        "env is not a list of name and value",
    ),
]
# Review 64c F9: `exec: {command: 5, args: 7}` was "unusable: TypeError: 'int' object is not
# iterable"; each exec field of the wrong type is named, with the user and the file.
EXEC_KUBECONFIG = (
    "current-context: x\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\n"
    "clusters: [{{name: c, cluster: {{server: 'https://a:1'}}}}]\n"
    "users: [{{name: u, user: {{exec: {exec}}}}}]\n"
)
MISTYPED_EXEC_FIELDS = {
    "{command: 5, args: 7}": "exec.command is not a string",
    "{command: /bin/true, args: 7}": "exec.args is not a list of strings",
    "{command: /bin/true, args: [a, [b]]}": "exec.args is not a list of strings",
    "{command: /bin/true, env: [{name: A, value: 1}]}": "exec.env is not a list of name and value (strings)",
    "{command: /bin/true, env: [{name: A}]}": "exec.env is not a list of name and value (strings)",
    "{command: /bin/true, apiVersion: 1}": "exec.apiVersion is not a string",
    "{command: /bin/true, interactiveMode: Sometimes}": "exec.interactiveMode is not one of Always, IfAvailable, Never",
    "[/bin/true]": "exec is not a mapping",
}


def test_a_field_no_check_foresees_is_still_one_kube_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The backstop: a TypeError or ValueError reading the kubeconfig is one line, not a traceback."""
    config = tmp_path / "config"
    config.write_text(EXEC_KUBECONFIG.format(exec="{command: /bin/true}"))

    def unforeseen(*_: object) -> None:
        raise TypeError("'int' object is not iterable")

    monkeypatch.setattr(kube, "_file_or_data", unforeseen)
    with pytest.raises(KubeError, match=re.escape(f"kubeconfig {config} is unusable: TypeError: ")):
        load_kubeconfig(str(config))


@pytest.mark.parametrize(("exec_entry", "problem"), MISTYPED_EXEC_FIELDS.items(), ids=list(MISTYPED_EXEC_FIELDS))
def test_a_mistyped_exec_field_is_named_with_its_user_and_file(tmp_path: Path, exec_entry: str, problem: str) -> None:
    config = tmp_path / "config"
    config.write_text(EXEC_KUBECONFIG.format(exec=exec_entry))
    with pytest.raises(KubeError, match=re.escape(f"kubeconfig {config}: user u's {problem}")):
        load_kubeconfig(str(config))


@pytest.mark.parametrize(
    ("content", "problem"),
    [case[1:] for case in MALFORMED_KUBECONFIGS],
    ids=[case[0] for case in MALFORMED_KUBECONFIGS],
)
def test_a_malformed_kubeconfig_is_one_kube_error(tmp_path: Path, content: bytes, problem: str) -> None:
    config = tmp_path / "config"
    config.write_bytes(content)
    with pytest.raises(KubeError, match=re.escape(problem)):
        load_kubeconfig(str(config))


def test_a_kubeconfig_is_read_from_a_fifo_as_kubectl_reads_it(tmp_path: Path) -> None:
    # `--kubeconfig <(sops -d kubeconfig)` (review 64-cli F3).
    written = write_kubeconfig(tmp_path / "written")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = os.fork()
    if writer == 0:  # the child writes the FIFO and leaves at once
        try:
            with open(fifo, "wb") as out:
                out.write(written.read_bytes())
        finally:
            os._exit(0)
    try:
        assert load_kubeconfig(str(fifo)).server == "https://api.example:6443"
    finally:
        os.kill(writer, signal.SIGKILL)  # a writer nothing read from would wait forever
        os.waitpid(writer, 0)


def test_a_kubeconfig_that_is_a_directory_says_so(tmp_path: Path) -> None:
    with pytest.raises(KubeError, match=r"is a directory, not a file$"):
        load_kubeconfig(str(tmp_path))


def test_a_kubeconfig_past_the_size_limit_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_kubeconfig(tmp_path / "config")
    monkeypatch.setattr(kube, "MAX_KUBECONFIG_BYTES", 10)
    with pytest.raises(KubeError, match="larger than the input limit of 10 bytes"):
        load_kubeconfig(str(config))


def test_no_current_context(tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "config", current_context=None)
    with pytest.raises(KubeError, match=re.escape(f"kubeconfig {config} has no current context")):
        load_kubeconfig(str(config))


@pytest.mark.parametrize(("current", "explicit"), [("gone", None), ("ctx", "gone")])
def test_context_that_does_not_exist_is_named(tmp_path: Path, current: str, explicit: str | None) -> None:
    config = write_kubeconfig(tmp_path / "config", current_context=current)
    with pytest.raises(KubeError, match=re.escape(f"kubeconfig {config}: context gone does not exist")):
        load_kubeconfig(str(config), context=explicit)


def test_context_naming_an_unknown_cluster(tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "config", context_cluster="nowhere")
    with pytest.raises(KubeError, match=re.escape(f"kubeconfig {config}: context ctx names unknown cluster nowhere")):
        load_kubeconfig(str(config))


def test_cluster_without_server(tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "config", cluster={"certificate-authority-data": b64(CA_PEM)})
    with pytest.raises(KubeError, match=re.escape(f"kubeconfig {config}: cluster c has no server")):
        load_kubeconfig(str(config))


def test_auth_provider_is_unsupported(tmp_path: Path) -> None:
    config = write_kubeconfig(
        tmp_path / "config", user={"auth-provider": {"name": "gcp", "config": {"cmd-path": "gcloud"}}}
    )
    with pytest.raises(KubeError, match="auth-provider credentials are not supported; use an exec plugin"):
        load_kubeconfig(str(config))


@pytest.mark.parametrize(
    ("cluster", "user", "what"),
    [
        ({"certificate-authority-data": "not base64!"}, {}, "certificate-authority-data"),
        ({}, {"client-certificate-data": "@@@@"}, "client-certificate-data"),
        ({}, {"client-key-data": "abc"}, "client-key-data"),  # bad padding
    ],
)
def test_invalid_base64(tmp_path: Path, cluster: dict[str, str], user: dict[str, str], what: str) -> None:
    config = write_kubeconfig(tmp_path / "config", cluster={"server": "https://api.example:6443", **cluster}, user=user)
    with pytest.raises(KubeError, match=re.escape(f"kubeconfig: {what} is not valid base64")):
        load_kubeconfig(str(config))


def test_unreadable_certificate_file(tmp_path: Path) -> None:
    config = write_kubeconfig(
        tmp_path / "config", cluster={"server": "https://api.example:6443", "certificate-authority": "nope.crt"}
    )
    with pytest.raises(
        KubeError, match=re.escape(f"kubeconfig: cannot read certificate-authority {tmp_path / 'nope.crt'}")
    ):
        load_kubeconfig(str(config))


def test_kubeconfig_that_is_not_yaml(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("clusters: [unclosed\n")
    with pytest.raises(KubeError, match=re.escape(f"kubeconfig {config} is unreadable")):
        load_kubeconfig(str(config))


# --- in-cluster ----------------------------------------------------------------------------------


@pytest.fixture
def service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "token").write_text("sa-token-1\n")
    (directory / "ca.crt").write_bytes(CA_PEM)
    monkeypatch.setattr(kube, "SERVICE_ACCOUNT_DIR", directory)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    return directory


def test_in_cluster(service_account: Path) -> None:
    credentials = load_credentials()
    assert credentials.server == "https://10.96.0.1:443"
    assert credentials.ca_data == CA_PEM
    assert credentials.token_file == service_account / "token"
    assert credentials.headers() == {"Authorization": "Bearer sa-token-1"}
    assert credentials.source == "in-cluster service account"
    # The kubelet rotates the projected token: a forced refresh (after a 401) picks it up.
    (service_account / "token").write_text("sa-token-2\n")
    credentials.refresh(force=True)
    assert credentials.headers() == {"Authorization": "Bearer sa-token-2"}


def test_in_cluster_ipv6_host_is_bracketed(service_account: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    assert load_credentials().server == "https://[fd00:10:96::1]:6443"


def test_in_cluster_default_port(service_account: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT")
    assert load_in_cluster().server == "https://10.96.0.1:443"


def test_in_cluster_without_ca(service_account: Path) -> None:
    (service_account / "ca.crt").unlink()
    with pytest.raises(KubeError, match="in-cluster CA unreadable"):
        load_credentials()


def test_in_cluster_outside_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KubeError, match=r"not running in a cluster \(KUBERNETES_SERVICE_HOST is unset\)"):
        load_in_cluster()


def test_explicit_kubeconfig_wins_in_a_pod(service_account: Path, tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "config", user={"token": "from-kubeconfig"})
    credentials = load_credentials(str(config))
    assert (credentials.server, credentials.token) == ("https://api.example:6443", "from-kubeconfig")


def test_without_a_service_account_token_the_kubeconfig_is_used(
    service_account: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (service_account / "token").unlink()  # automountServiceAccountToken: false
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "config", user={"token": "t"})))
    assert load_credentials().server == "https://api.example:6443"


# --- exec plugins run off the event loop -------------------------------------------------------

SLOW_PLUGIN = """#!{python}
import json, pathlib, sys, time
here = pathlib.Path(__file__).resolve().parent
calls = here / "calls"
count = int(calls.read_text()) + 1 if calls.exists() else 1
calls.write_text(str(count))
time.sleep(0.5)
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {{"token": "slow-%d" % count}}}}))
"""


async def test_an_exec_plugin_runs_off_the_event_loop_once_for_concurrent_callers(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path / "plugin")
    plugin.script.write_text(SLOW_PLUGIN.format(python=sys.executable))
    credentials = kube.load_kubeconfig(str(plugin.kubeconfig()))
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    try:
        await asyncio.gather(*(credentials.refresh_async() for _ in range(5)))
    finally:
        ticker.cancel()
    assert plugin.calls == 1  # five callers, one run
    assert credentials.token == "slow-1"
    # The plugin slept 0.5 s; a loop blocked by it would not have ticked meanwhile.
    assert ticks >= 20, ticks
    await credentials.refresh_async(force=True)
    assert (plugin.calls, credentials.token) == (2, "slow-2")


async def test_load_credentials_async_runs_the_plugin_first(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path / "plugin")
    credentials = await kube.load_credentials_async(str(plugin.kubeconfig()))
    assert (plugin.calls, credentials.token) == (1, "token-1")


def test_a_context_other_than_the_current_one_can_be_chosen(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "a", "cluster": {"server": "https://a.example:6443"}},
                    {"name": "b", "cluster": {"server": "https://b.example:6443"}},
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "first", "context": {"cluster": "a", "user": "u"}},
                    {"name": "second", "context": {"cluster": "b", "user": "u"}},
                ],
                "current-context": "first",
            }
        )
    )
    assert load_credentials(str(config)).server == "https://a.example:6443"
    assert load_credentials(str(config), context="second").server == "https://b.example:6443"


# --- proxies, as kubectl reads them ------------------------------------------------------------


@pytest.fixture
def clean_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("server", "no_proxy", "expected"),
    [
        ("https://api.example:6443", "", "http://proxy.corp:3128"),
        ("https://api.example:6443", "example", "DIRECT"),  # a domain suffix
        ("https://api.example:6443", ".example", "DIRECT"),
        ("https://api.example:6443", "other.example", "http://proxy.corp:3128"),
        ("https://api.example:6443", "api.example:443", "http://proxy.corp:3128"),  # another port
        ("https://api.example:6443", "api.example:6443", "DIRECT"),
        ("https://10.1.2.3:6443", "10.0.0.0/8", "DIRECT"),
        ("https://10.1.2.3:6443", "192.168.0.0/16", "http://proxy.corp:3128"),
        ("https://api.example:6443", "*", "DIRECT"),
        ("https://127.0.0.1:6443", "", "DIRECT"),  # loopback is never proxied, as in Go
        ("https://localhost:6443", "", "DIRECT"),
        ("https://[::1]:6443", "", "DIRECT"),
    ],
)
def test_https_proxy_and_no_proxy(
    clean_proxy_environment: pytest.MonkeyPatch, server: str, no_proxy: str, expected: str
) -> None:
    clean_proxy_environment.setenv("HTTPS_PROXY", "proxy.corp:3128")
    clean_proxy_environment.setenv("NO_PROXY", no_proxy)
    assert (kube.proxy_from_environment(server) or "DIRECT") == expected


def test_http_servers_use_http_proxy(clean_proxy_environment: pytest.MonkeyPatch) -> None:
    clean_proxy_environment.setenv("HTTPS_PROXY", "http://secure.corp:3128")
    clean_proxy_environment.setenv("http_proxy", "http://plain.corp:3128")
    assert kube.proxy_from_environment("http://api.example:8080") == "http://plain.corp:3128"
    assert kube.proxy_from_environment("https://api.example:6443") == "http://secure.corp:3128"


def test_the_clusters_proxy_url_wins_over_the_environment(
    clean_proxy_environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_proxy_environment.setenv("HTTPS_PROXY", "http://env.corp:3128")
    config = write_kubeconfig(
        tmp_path / "config", cluster={"server": "https://api.example:6443", "proxy-url": "http://kube.corp:8888"}
    )
    assert load_credentials(str(config)).proxy == "http://kube.corp:8888"


def test_the_environments_proxy_is_read_once_per_server(clean_proxy_environment: pytest.MonkeyPatch) -> None:
    # As Go's http.ProxyFromEnvironment: the environment as it was at the first request.
    clean_proxy_environment.setenv("HTTPS_PROXY", "http://first.corp:3128")
    credentials = Credentials(server="https://api.example:6443")
    assert credentials.proxy == "http://first.corp:3128"
    clean_proxy_environment.setenv("HTTPS_PROXY", "http://second.corp:3128")
    assert credentials.proxy == "http://first.corp:3128"
    credentials.server = "https://other.example:6443"  # another server is looked up again
    assert credentials.proxy == "http://second.corp:3128"


@pytest.mark.parametrize("proxy_url", ["socks5://proxy:1080", "ftp://proxy:21"])
def test_an_unsupported_proxy_scheme_is_named(tmp_path: Path, proxy_url: str) -> None:
    config = write_kubeconfig(
        tmp_path / "config", cluster={"server": "https://api.example:6443", "proxy-url": proxy_url}
    )
    with pytest.raises(KubeError, match=r"proxy-url .*: scheme (socks5|ftp) is not supported \(http, https\)"):
        load_credentials(str(config))


async def test_requests_go_through_the_proxy(clean_proxy_environment: pytest.MonkeyPatch) -> None:
    """A forward proxy sees the absolute URL of every request (plain HTTP through a proxy)."""
    seen: list[str] = []

    async def proxy(request: web.Request) -> web.Response:
        seen.append(str(request.url))
        return web.json_response({"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": []})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy)
    async with _serving(app) as port:
        credentials = kube.Credentials(server="http://api.invalid:8080", proxy_url=f"http://127.0.0.1:{port}")
        async with KubeClient(credentials) as client:
            await client.get("/api/v1/nodes")
    assert seen == ["http://api.invalid:8080/api/v1/nodes"]


# --- TLS connections' receive buffers ---------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ASYNCIO_TLS_RECEIVE_BUFFER = 256 * 1024  # asyncio.sslproto.SSLProtocol.max_size, Python 3.11


def _tls_receive_buffer() -> int:
    """How many bytes a TLS connection opened now reads the socket into (asyncio's
    BufferedProtocol.get_buffer, as its transport asks before each read)."""
    loop = asyncio.new_event_loop()
    try:
        protocol = asyncio.sslproto.SSLProtocol(
            loop, asyncio.Protocol(), ssl.create_default_context(), loop.create_future(), server_hostname="api.example"
        )
        return len(protocol.get_buffer(-1))
    finally:
        loop.close()


def test_tls_connections_opened_after_the_bound_receive_into_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", ASYNCIO_TLS_RECEIVE_BUFFER)
    assert _tls_receive_buffer() == ASYNCIO_TLS_RECEIVE_BUFFER
    bound_tls_receive_buffers()
    assert _tls_receive_buffer() == TLS_RECEIVE_BUFFER_BYTES < ASYNCIO_TLS_RECEIVE_BUFFER


@contextlib.asynccontextmanager
async def _tls_server(tmp_path: Path, nodes: Handler) -> AsyncIterator[kube.Credentials]:
    """A real aiohttp server on 127.0.0.1 over TLS, answering /api/v1/nodes with ``nodes``."""
    certificate, key = _self_signed("127.0.0.1")
    (tmp_path / "tls.crt").write_bytes(certificate)
    (tmp_path / "tls.key").write_bytes(key)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    app = web.Application()
    app.router.add_get("/api/v1/nodes", nodes)
    async with _serving(app, served) as port:
        yield kube.Credentials(server=f"https://127.0.0.1:{port}", insecure=True)


@contextlib.asynccontextmanager
async def _serving(app: web.Application, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    """``app`` served on 127.0.0.1 (over TLS with ``tls``), on the port it yields."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    await web.SockSite(runner, listener, ssl_context=tls).start()
    try:
        yield listener.getsockname()[1]
    finally:
        await runner.cleanup()


async def test_answers_and_streams_far_larger_than_the_bound_arrive_whole_over_tls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 4 MiB answer and a stream of 300 events of 20 KB each, over TLS from a real server,
    read through connections that receive into the bound: every byte arrives, in order."""
    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", ASYNCIO_TLS_RECEIVE_BUFFER)
    bound_tls_receive_buffers()
    items = [
        {"kind": "Node", "metadata": {"name": f"node-{index:05d}"}, "data": os.urandom(1024).hex()}
        for index in range(2000)
    ]
    events = [
        {
            "type": "ADDED",
            "object": {"kind": "Node", "metadata": {"name": f"w-{index}"}, "data": os.urandom(10_000).hex()},
        }
        for index in range(300)
    ]

    async def nodes(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return web.json_response({"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items})
        response = web.StreamResponse()
        await response.prepare(request)
        for event in events:  # each event written as its own chunk
            await response.write(json.dumps(event).encode() + b"\n")
        await response.write_eof()
        return response

    async with _tls_server(tmp_path, nodes) as credentials, KubeClient(credentials) as client:
        listed = await client.get("/api/v1/nodes")
        watched = [line async for line in client.watch("/api/v1/nodes", "", 30, 30.0)]
    assert len(json.dumps(listed)) > 16 * TLS_RECEIVE_BUFFER_BYTES
    assert listed["items"] == items
    assert watched == events


async def test_a_busy_streaming_list_receives_wider_and_its_connection_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past BUSY_STREAM_BYTES a streaming list's TLS connection reads into BUSY_STREAM_RECEIVE_BYTES,
    and it is closed when the stream ends; a small one, or a watch however busy, keeps the bound
    and its connection is reused."""
    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", ASYNCIO_TLS_RECEIVE_BUFFER)
    bound_tls_receive_buffers()
    peers: list[object] = []

    async def nodes(request: web.Request) -> web.StreamResponse:
        peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        response = web.StreamResponse()
        await response.prepare(request)
        for index in range(int(request.query["timeoutSeconds"])):  # the test's stand-in for a size
            event = {"type": "ADDED", "object": {"metadata": {"name": f"n-{index}"}, "data": "x" * 20_000}}
            await response.write(json.dumps(event).encode() + b"\n")
        await response.write_eof()
        return response

    widened: list[int] = []
    widen = client_module._widen_receive_buffer

    def spy(response: ClientResponse, limit: int = BUSY_STREAM_RECEIVE_BYTES) -> None:
        widen(response, limit)
        assert response.connection is not None and response.connection.transport is not None
        widened.append(response.connection.transport._ssl_protocol.max_size)  # type: ignore[attr-defined]

    monkeypatch.setattr(client_module, "_widen_receive_buffer", spy)
    async with _tls_server(tmp_path, nodes) as credentials, KubeClient(credentials) as client:
        # A small streaming list, a busy watch (as under churn), a busy streaming list, a small one.
        for size, listing in ((3, True), (300, False), (300, True), (3, True)):
            events = [
                event async for event in client.watch("/api/v1/nodes", "", size, 30.0, send_initial_events=listing)
            ]
            assert len(events) == size
    assert widened == [BUSY_STREAM_RECEIVE_BYTES]  # once: in the busy streaming list only
    assert 300 * 20_000 > BUSY_STREAM_BYTES > 3 * 20_000 + 3 * 100
    assert peers[0] == peers[1] == peers[2] != peers[3]  # reused, reused, then a new connection


async def test_a_request_on_a_lease_is_not_queued_behind_a_full_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader's renewal goes on a connection of its own: behind a round's writes holding
    every connection it waited, unsent, past its renew deadline."""
    monkeypatch.setattr(client_module, "MAX_CONNECTIONS", 1)
    released = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await released.wait()
        return web.json_response({"kind": "NodeList", "items": []})

    async def lease(request: web.Request) -> web.Response:
        return web.json_response({"kind": "Lease", "metadata": {"name": "l"}})

    app = web.Application()
    app.router.add_get("/api/v1/nodes", slow)
    app.router.add_get("/apis/coordination.k8s.io/v1/namespaces/ops/leases/l", lease)
    async with _serving(app) as port, KubeClient(Credentials(server=f"http://127.0.0.1:{port}")) as client:
        holding = asyncio.create_task(client.get("/api/v1/nodes"))
        queued = asyncio.create_task(client.get("/api/v1/nodes"))
        try:
            await asyncio.sleep(0.1)
            answer = await client.request("GET", "/apis/coordination.k8s.io/v1/namespaces/ops/leases/l", timeout=2.0)
            assert answer["kind"] == "Lease" and not holding.done() and not queued.done()
        finally:
            released.set()  # before the server's cleanup, which waits for its handlers
            await asyncio.gather(holding, queued)


async def test_a_slow_credential_refresh_counts_in_the_requests_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A write's timeout ends where the leader's write window does; the refresh before it (an
    exec plugin on a slow STS) ran outside it, and the write went out after the window."""
    token = tmp_path / "token"
    token.write_text("t")
    real_refresh = Credentials.refresh

    def slow_refresh(self: Credentials, force: bool = False) -> None:
        time.sleep(1.0)
        real_refresh(self, force)

    monkeypatch.setattr(Credentials, "refresh", slow_refresh)
    async with fake_api() as (api, _):
        api.serve("/api/v1/nodes", "Node", [], "1")
        async with KubeClient(Credentials(server=api.url, token_file=token)) as client:
            with pytest.raises(KubeError, match="credentials were not refreshed"):
                await client.request("GET", "/api/v1/nodes", timeout=0.3)
            await asyncio.sleep(1.0)  # the refresh's thread ends; nothing is sent after it
        assert api.requests == []


async def test_a_request_retried_after_a_401_keeps_its_one_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The retry with a rotated token had a full timeout of its own: two answers of 0.7 s each
    went out under a timeout of 1 s."""
    token = tmp_path / "token"
    token.write_text("new")  # rotated on disk; the client still holds the old one
    real_exchange = exchanges.ConnectionPool.exchange

    async def slow(self: exchanges.ConnectionPool, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        await asyncio.sleep(0.7)  # the API server takes this long to answer
        return await real_exchange(self, *args, **kwargs)

    monkeypatch.setattr(exchanges.ConnectionPool, "exchange", slow)
    async with fake_api() as (api, _):
        api.serve("/api/v1/nodes", "Node", [], "1")
        api.required_token = "new"
        credentials = Credentials(server=api.url, token="old", token_file=token)
        credentials._token_read_at = time.monotonic()  # read just now: not due until the 401
        async with KubeClient(credentials) as client:
            with pytest.raises(KubeError, match="cannot reach"):
                await client.request("GET", "/api/v1/nodes", timeout=1.0)
        assert len(api.requests) == 1  # the retry was cut by the one timeout


@pytest.mark.parametrize("uptime", [30.0, 59.0, 61.0, 5000.0])
async def test_a_token_file_is_read_before_the_first_request_whatever_the_machines_uptime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uptime: float
) -> None:
    # The monotonic clock starts near 0 at boot: on a node up for less than the re-read period,
    # a token file never read counted as read, and the watches went out with no token (401s).
    token = tmp_path / "token"
    token.write_text("sa-token\n")
    monkeypatch.setattr("time.monotonic", lambda: uptime)  # the clock credentials read
    credentials = Credentials(server="https://10.0.0.1:443", token_file=token)  # as load_in_cluster builds it
    await credentials.refresh_async()
    assert credentials.headers() == {"Authorization": "Bearer sa-token"}
