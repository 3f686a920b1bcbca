"""A TCP relay from a node's IP to the API server: how pods on real nodes reach it.

In a cluster, a pod reaches the API server at the ``kubernetes`` Service's ClusterIP
(``KUBERNETES_SERVICE_HOST``), which kube-proxy turns into the apiserver's address. Here the
apiserver listens on 127.0.0.1 only, no kube-proxy runs, and a pod's network reaches nothing but
its node's /24 (``nodes.cni_config``: no gateway role, no masquerade). So each node runs this
relay on its node IP, port 443, a plain L4 copy to the apiserver, like kube-proxy's old
userspace mode: TLS passes through untouched, the pod verifies the apiserver's own certificate
(which names every node IP, ``pki.ensure_pki``) and authenticates with its ServiceAccount token,
so the apiserver and its audit log see the pod's identity. A pod opts in with
``KUBERNETES_SERVICE_HOST`` from ``status.hostIP`` (``relay.IN_CLUSTER_ENV``).

The node IP lives on the node's bridge (198.18.<slot>.1, RFC 2544, never routed): only that
node's pods and this machine can connect, as with the kubelet's :10250.

    python -m fabriccap_devtools.controlplane.relay --listen 198.18.1.1:443 --upstream 127.0.0.1:6443
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

RELAY_PORT = 443  # the `kubernetes` Service's port: the kubelet injects KUBERNETES_SERVICE_PORT=443
READ_SIZE = 64 * 1024
CONNECT_TIMEOUT_SECONDS = 5.0

# The container environment that sends a pod's in-cluster client through its node's relay.
# Explicit container variables win over the ones the kubelet derives from the Service.
IN_CLUSTER_ENV: tuple[dict[str, Any], ...] = (
    {"name": "KUBERNETES_SERVICE_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
)


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"not HOST:PORT: {text!r}")
    return host, int(port)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One direction until EOF, which is passed on as a half-close (the other direction may
    still be answering)."""
    try:
        while data := await reader.read(READ_SIZE):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


async def _serve_one(
    client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter, upstream: tuple[str, int]
) -> None:
    try:
        upstream_reader, upstream_writer = await asyncio.wait_for(
            asyncio.open_connection(*upstream), CONNECT_TIMEOUT_SECONDS
        )
    except (OSError, TimeoutError):
        client_writer.close()  # the apiserver is down (a fault test): the client retries
        return
    try:
        await asyncio.gather(_copy(client_reader, upstream_writer), _copy(upstream_reader, client_writer))
    finally:
        for writer in (client_writer, upstream_writer):
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()


async def relay(listen: tuple[str, int], upstream: tuple[str, int]) -> None:
    """Serve until SIGTERM or SIGINT."""
    server = await asyncio.start_server(
        lambda r, w: _serve_one(r, w, upstream), listen[0], listen[1], reuse_address=True
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"relaying {listen[0]}:{listen[1]} -> {upstream[0]}:{upstream[1]}", flush=True)
    try:
        async with server:
            await stop.wait()
    finally:
        # In-process callers (the unit tests) keep their own signal handling afterwards.
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def wait_listening(address: tuple[str, int], timeout: float, alive: Callable[[], bool] | None = None) -> bool:
    """Whether something accepts connections at `address` within `timeout` seconds; stops early
    when ``alive()`` says the relay exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(address, timeout=1.0):
            return True
        if alive is not None and not alive():
            return False
        time.sleep(0.05)
    return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fabriccap_devtools.controlplane.relay", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--listen", type=parse_address, required=True, help="HOST:PORT to accept connections on")
    parser.add_argument("--upstream", type=parse_address, required=True, help="HOST:PORT to copy them to")
    args = parser.parse_args(argv)
    try:
        asyncio.run(relay(args.listen, args.upstream))
    except OSError as error:
        print(f"relay: cannot listen on {args.listen[0]}:{args.listen[1]}: {error.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
