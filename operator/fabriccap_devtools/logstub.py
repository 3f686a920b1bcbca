"""An HTTP front of the API server that answers pods' logs itself, or holds them back.

A control plane without kubelets cannot serve ``pods/log``: the API server asks the pod's
kubelet for it. The benchmark and the demo put this in front of such a control plane: the
operator's kubeconfig points here (plain HTTP, 127.0.0.1 only), and every request goes on to
the API server as it came, with the identity of the kubeconfig this front was given, except
``GET …/pods/{name}/log``, which ``logs`` (namespace, pod, container -> bytes, or None) may
answer here, honouring ``limitBytes`` as the kubelet does. On real nodes it answers nothing
itself and only counts and holds: the test of a pod deleted while its log is read holds that
pod's answer after its first bytes, deletes the pod, then lets go.

Threads, not asyncio: one per connection (a watch lasts a minute); the standard library's
HTTP server and client, so the dev tools bring no HTTP dependency of their own.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import re
import ssl
import sys
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml

from fabriccap.kube.credentials import Credentials, load_credentials
from fabriccap_devtools.checkout import REPO

LOG_PATH = re.compile(r"^/api/v1/namespaces/(?P<namespace>[^/]+)/pods/(?P<pod>[^/]+)/log$")
CHUNK_BYTES = 64 * 1024
# Headers a request keeps on its way to the API server (authentication is this front's own).
FORWARDED_HEADERS = ("Accept", "Content-Type", "User-Agent")
UPSTREAM_TIMEOUT_SECONDS = 300.0

LogSource = Callable[[str, str, str], bytes | None]


@dataclass
class LogStats:
    requests: int = 0  # pods/log GETs
    bytes: int = 0  # of log bodies sent
    by_pod: Counter[str] = field(default_factory=Counter)  # namespace/name -> requests
    forwarded: int = 0  # every other request, passed on to the API server


class LogStub:
    """``start()`` it, point a kubeconfig at ``url`` (``kubeconfig_for``), ``stop()`` it."""

    def __init__(self, kubeconfig: Path, logs: LogSource | None = None) -> None:
        self.credentials: Credentials = load_credentials(str(kubeconfig))
        self.logs = logs
        self.stats = LogStats()
        self._lock = threading.Lock()
        self._held: dict[str, threading.Event] = {}
        self._waiting: set[str] = set()  # held pods whose answer has started and waits
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> str:
        stub = self

        class Handler(_Handler):
            owner = stub

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="logstub", daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        for event in list(self._held.values()):
            event.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> LogStub:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def kubeconfig_for(self, path: Path) -> Path:
        """A kubeconfig that reaches the cluster through this front (no credentials: it adds them)."""
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "logstub", "cluster": {"server": self.url}}],
            "users": [{"name": "logstub", "user": {}}],
            "contexts": [{"name": "logstub", "context": {"cluster": "logstub", "user": "logstub"}}],
            "current-context": "logstub",
        }
        path.write_text(yaml.safe_dump(document))
        return path

    # -- holding a pod's log

    def hold(self, namespace: str, pod: str) -> None:
        """Answer the next reads of this pod's log with their first bytes only, until released."""
        with self._lock:
            self._held[f"{namespace}/{pod}"] = threading.Event()

    def release(self, namespace: str, pod: str) -> None:
        with self._lock:
            event = self._held.pop(f"{namespace}/{pod}", None)
        if event is not None:
            event.set()

    def waiting(self, namespace: str, pod: str) -> bool:
        """Whether a read of this held pod's log has begun and waits."""
        return f"{namespace}/{pod}" in self._waiting

    def _count(self, pod: str) -> None:
        with self._lock:
            self.stats.requests += 1
            self.stats.by_pod[pod] += 1

    def _forwarded(self) -> None:
        with self._lock:
            self.stats.forwarded += 1

    def _sent(self, size: int) -> None:
        with self._lock:
            self.stats.bytes += size

    # -- upstream

    def connect(self) -> http.client.HTTPConnection:
        parts = urlsplit(self.credentials.server)
        host, port = parts.hostname or "127.0.0.1", parts.port
        if parts.scheme == "https":
            context = self.credentials.ssl_context()
            return http.client.HTTPSConnection(
                host,
                port,
                timeout=UPSTREAM_TIMEOUT_SECONDS,
                context=context if isinstance(context, ssl.SSLContext) else None,
            )
        return http.client.HTTPConnection(host, port, timeout=UPSTREAM_TIMEOUT_SECONDS)


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        # A client that goes (an operator stopped, a watch it drops) resets its connections:
        # that is no error of the front's, and not worth a traceback on stderr.
        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError | TimeoutError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class _Handler(BaseHTTPRequestHandler):
    owner: LogStub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: the operator's own log says what it asked

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _handle(self) -> None:
        split = urlsplit(self.path)
        if split.path == "/_logstub/stats":
            self._answer(200, json.dumps(vars(self.owner.stats) | {"by_pod": dict(self.owner.stats.by_pod)}).encode())
            return
        match = LOG_PATH.match(split.path)
        if self.command == "GET" and match is not None:
            self._log(match["namespace"], match["pod"], parse_qs(split.query))
            return
        self._forward()

    def _body(self) -> bytes | None:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    def _answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _upstream(self) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        connection = self.owner.connect()
        headers = {name: value for name in FORWARDED_HEADERS if (value := self.headers.get(name))}
        headers.update(self.owner.credentials.headers())
        connection.request(self.command, self.path, body=self._body(), headers=headers)
        return connection, connection.getresponse()

    def _forward(self) -> None:
        self.owner._forwarded()
        connection, response = self._upstream()
        try:
            self._stream(response)
        finally:
            connection.close()

    def _start_chunked(self, status: int, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _stream(self, response: http.client.HTTPResponse, on_data: Callable[[bytes], None] = lambda _: None) -> None:
        """The upstream answer as it comes (a watch streams for a minute)."""
        self._start_chunked(response.status, response.getheader("Content-Type") or "application/json")
        with contextlib.suppress(OSError, http.client.HTTPException):
            while data := response.read1(CHUNK_BYTES):
                on_data(data)
                self._chunk(data)
            self._end_chunks()

    def _log(self, namespace: str, pod: str, query: dict[str, list[str]]) -> None:
        key = f"{namespace}/{pod}"
        self.owner._count(key)
        container = (query.get("container") or [""])[0]
        served = self.owner.logs(namespace, pod, container) if self.owner.logs is not None else None
        held = self.owner._held.get(key)
        if served is not None:
            limit = int((query.get("limitBytes") or [str(len(served))])[0])
            body = served[:limit]
            self._start_chunked(200, "text/plain")
            self._send_log(key, body, held)
            return
        connection, response = self._upstream()
        try:
            if response.status != 200 or held is None:
                self._stream(response, on_data=lambda data: self.owner._sent(len(data)))
                return
            body = response.read()
            self._start_chunked(200, response.getheader("Content-Type") or "text/plain")
            self._send_log(key, body, held)
        finally:
            connection.close()

    def _send_log(self, key: str, body: bytes, held: threading.Event | None) -> None:
        with contextlib.suppress(OSError):
            first, rest = (body[:64], body[64:]) if held is not None else (body, b"")
            self._chunk(first)
            self.owner._sent(len(first))
            if held is not None:
                self.owner._waiting.add(key)
                held.wait(UPSTREAM_TIMEOUT_SECONDS)
                self.owner._waiting.discard(key)
            for start in range(0, len(rest), CHUNK_BYTES):
                self._chunk(rest[start : start + CHUNK_BYTES])
            self.owner._sent(len(rest))
            self._end_chunks()


# -- logs for a control plane without kubelets: real NCCL output from the corpus

CORPUS = REPO / "tests" / "fixtures" / "nccl"
# Per hundred pods: their NCCL chose sockets, fabric, or has not said yet (the log is read again).
BENCH_LOGS: tuple[tuple[int, str], ...] = (
    (10, "nccl-tests-166-channels-socket.log"),  # NET/Socket channels: decisive
    (20, "pytorch-146118-internal-plugin-no-choice.log"),  # cut before the choice: undecided
    (100, "aws-efa-eks-readme-p4d-mpijob-efa.log"),  # EFA channels: decisive
)


def corpus_logs(prefix: bytes = b"") -> LogSource:
    """Each pod gets a corpus excerpt chosen by a hash of its name (``BENCH_LOGS``'s shares),
    after ``prefix`` (a training script's own output, say)."""
    texts = [(share, prefix + (CORPUS / name).read_bytes()) for share, name in BENCH_LOGS]

    def logs(namespace: str, pod: str, container: str) -> bytes:
        bucket = zlib.crc32(f"{namespace}/{pod}".encode()) % 100
        return next(text for share, text in texts if bucket < share)

    return logs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fabriccap_devtools.logstub", description=__doc__)
    parser.add_argument("--kubeconfig", required=True, help="the API server, and the identity to reach it with")
    parser.add_argument("--out", required=True, help="where to write the kubeconfig that reaches the front")
    parser.add_argument(
        "--serve",
        choices=("bench", "demo"),
        default="bench",
        help="bench: every pod a corpus excerpt (BENCH_LOGS); demo: the demo's one job (demo_transport)",
    )
    args = parser.parse_args(argv)
    if args.serve == "demo":
        from fabriccap_devtools.demo_transport import served_log

        logs: LogSource = served_log
    else:
        logs = corpus_logs()
    stub = LogStub(Path(args.kubeconfig), logs)
    stub.start()
    # Written whole at once: whoever waits for the file may read it as soon as it exists.
    scratch = Path(f"{args.out}.partial")
    stub.kubeconfig_for(scratch)
    scratch.replace(args.out)
    print(f"serving {args.serve} logs in front of {stub.credentials.server} at {stub.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        stub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
