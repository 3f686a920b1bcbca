"""Getting at the control plane: kubeconfig files, and the few reads its own start-up waits on.

Kubeconfigs are JSON (valid YAML: kubectl, kubernetes_asyncio and kopf all read it) with the
PEMs embedded, so a file stays usable after being copied elsewhere.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from fabriccap_devtools.controlplane import pki

CONTEXT_NAME = "fabriccap-local"


def write_kubeconfig(
    path: Path, server: str, paths: pki.PkiPaths, credentials: pki.ClientCredentials, user: str
) -> None:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT_NAME,
                "cluster": {"server": server, "certificate-authority-data": b64(paths.ca_cert.read_bytes())},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(credentials.cert_pem),
                    "client-key-data": b64(credentials.key_pem),
                },
            }
        ],
        "contexts": [{"name": CONTEXT_NAME, "context": {"cluster": CONTEXT_NAME, "user": user}}],
        "current-context": CONTEXT_NAME,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(config, handle, indent=2)
        handle.write("\n")
    os.replace(temporary, path)


def client_ssl_context(paths: pki.PkiPaths, credentials: pki.ClientCredentials, name: str) -> ssl.SSLContext:
    """An SSL context that trusts our CA and presents `credentials` (stored as NAME.crt/.key)."""
    context = ssl.create_default_context(cafile=str(paths.ca_cert))
    # ssl loads client certificates from files only.
    cert_file, key_file = paths.directory / f"{name}.crt", paths.directory / f"{name}.key"
    cert_file.write_bytes(credentials.cert_pem)
    pki.write_private(key_file, credentials.key_pem)
    context.load_cert_chain(cert_file, key_file)
    return context


def https_ok(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def get_json(url: str, context: ssl.SSLContext) -> dict[str, Any] | None:
    """The object at `url`, or None when it cannot be read (absent, or the server not up)."""
    try:
        with urllib.request.urlopen(url, context=context, timeout=5) as response:
            body = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return body if isinstance(body, dict) else None
