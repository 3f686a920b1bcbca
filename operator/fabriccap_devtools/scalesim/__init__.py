"""scalesim: a simulated API server for the kinds fabriccap watches, for benchmarks at scale.

The server is Go (the ``*.go`` files beside this one, standard library only), built once into
the cache by ``fabriccap_devtools.gotools``. It serves the protocol the operator uses (paged
LIST from one snapshot with continue tokens, WATCH with bookmarks and 410 Gone, streaming
lists with ``sendInitialEvents=true``, gzip like kube-apiserver), over TLS with a kubeconfig
it writes. Objects come from a world file (``scalesim.world``: templates made with the demo
world's builders) or from clients creating them; churn, probes and faults are driven through
an admin port. See ``docs/performance.md`` for how it was checked against kube-apiserver.

    with Simulator(directory, world=spec) as sim:
        run the operator with sim.kubeconfig; read sim.stats(); sim.post("/churn", {...})
"""

from __future__ import annotations

import http.client
import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabriccap_devtools.gotools import build_go_tool
from fabriccap_devtools.reference.fabriccapability import crd_status_default

SOURCE = Path(__file__).resolve().parent
READY_TIMEOUT_SECONDS = 600.0  # a million-pod world takes a while to load
STOP_TIMEOUT_SECONDS = 30.0


class SimulatorError(RuntimeError):
    """The simulator did not start, or its admin API refused a request."""


def simulator_binary() -> Path:
    """The scalesim binary, built from the Go sources beside this module (once per change)."""
    return build_go_tool(SOURCE)


# How the Go runtime starts the report of a crash: a panic, a fatal error (a map written while
# it is read), or a signal it dies of.
GO_CRASH_LINES = ("panic: ", "fatal error: ", "SIGABRT: ", "SIGBUS: ", "SIGQUIT: ", "SIGSEGV: ")


@dataclass(frozen=True)
class SimulatorInfo:
    server: str
    admin: str
    kubeconfig: Path  # the operator's: faults apply to it, its watches make the delivery figures
    bench_kubeconfig: Path  # the benchmark's own: faults spare it
    pid: int


class Simulator:
    """A scalesim process on 127.0.0.1, owned by this Python process (a context manager)."""

    def __init__(
        self,
        directory: Path,
        *,
        world: Mapping[str, Any] | Path | None = None,
        plain_http: bool = False,
        history: int | None = None,
        bookmark_interval_seconds: float | None = None,
        snapshot_ttl_seconds: float | None = None,
        background_writes: int | None = None,
        read_lag_period_seconds: float | None = None,
    ) -> None:
        self.directory = Path(directory)
        self._world = world
        self._options: list[str] = []
        if plain_http:
            self._options.append("--plain-http")
        if history is not None:
            self._options.append(f"--history={history}")
        if bookmark_interval_seconds is not None:
            self._options.append(f"--bookmark-interval={bookmark_interval_seconds}s")
        if snapshot_ttl_seconds is not None:
            self._options.append(f"--snapshot-ttl={snapshot_ttl_seconds}s")
        # Versions taken a second by writes to kinds it does not serve (None: the world's
        # nodes/10 + 1, its nodes' Lease renewals; 0: none, so an idle version stays put).
        if background_writes is not None:
            self._options.append(f"--background-writes={background_writes}")
        # How often the operator's reads of its watches are sampled (readlag.go); None: never.
        # Each sample reads /proc/net/tcp, which walks the kernel's whole connection table.
        if read_lag_period_seconds is not None:
            self._options.append(f"--read-lag-period={read_lag_period_seconds}s")
        self._process: subprocess.Popen[bytes] | None = None
        self._info: SimulatorInfo | None = None
        # Where this run's lines begin in the log (a reused directory appends to an older one).
        self._log_offset = 0

    @property
    def info(self) -> SimulatorInfo:
        if self._info is None:
            raise SimulatorError("the simulator is not started")
        return self._info

    @property
    def kubeconfig(self) -> Path:
        return self.info.kubeconfig

    @property
    def log_path(self) -> Path:
        return self.directory / "scalesim.log"

    def start(self) -> SimulatorInfo:
        if self._process is not None:
            raise SimulatorError("already started")
        binary = simulator_binary()
        self.directory.mkdir(parents=True, exist_ok=True)
        ready = self.directory / "ready.json"
        ready.unlink(missing_ok=True)
        command = [
            str(binary),
            f"--kubeconfig={self.directory / 'kubeconfig'}",
            f"--bench-kubeconfig={self.directory / 'bench.kubeconfig'}",
            f"--ready-file={ready}",
            # As the API server serves a FabricCapability whose status is not written yet.
            f"--status-default=fabriccapabilities={json.dumps(crd_status_default(), separators=(',', ':'))}",
            *self._options,
        ]
        if self._world is not None:
            world_path = self._world if isinstance(self._world, Path) else self.directory / "world.json"
            if not isinstance(self._world, Path):
                world_path.write_text(json.dumps(self._world, separators=(",", ":")))
            command.append(f"--world={world_path}")
        with self.log_path.open("ab") as log:
            self._log_offset = log.tell()
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while not ready.exists():
            if self._process.poll() is not None:
                self._process = None
                raise SimulatorError(f"scalesim exited while starting; see {self.log_path}:\n{self._tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise SimulatorError(f"scalesim not ready after {READY_TIMEOUT_SECONDS:.0f}s; see {self.log_path}")
            time.sleep(0.05)
        addresses = json.loads(ready.read_text())
        self._info = SimulatorInfo(
            server=addresses["server"],
            admin=addresses["admin"],
            kubeconfig=self.directory / "kubeconfig",
            bench_kubeconfig=self.directory / "bench.kubeconfig",
            pid=self._process.pid,
        )
        return self._info

    def _run_log(self) -> list[str]:
        """The lines this run wrote to the log, not an earlier run's in the same directory."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(self._log_offset)
                return log.read().decode(errors="replace").splitlines()
        except OSError:
            return []

    def _tail(self, count: int = 20, lines: list[str] | None = None) -> str:
        """The last ``count`` of ``lines`` (default: this run's log, read now)."""
        return "\n".join((self._run_log() if lines is None else lines)[-count:])

    @staticmethod
    def _cause(lines: list[str]) -> str:
        """The first line of a Go crash among ``lines`` (a goroutine dump follows it, longer than
        any tail), as ``: <line>``; empty when there is none."""
        crash = next((line for line in lines if line.startswith(GO_CRASH_LINES)), None)
        return "" if crash is None else f": {crash.strip()}"

    def stop(self) -> None:
        process, self._process, self._info = self._process, None, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_SECONDS)

    def __enter__(self) -> Simulator:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- the admin API

    def request(self, method: str, path: str, body: Any = None, timeout: float = 60.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.info.admin + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raise SimulatorError(
                f"{method} {path}: {error.code} {error.read().decode(errors='replace').strip()}"
            ) from None
        except (OSError, http.client.HTTPException) as error:
            # No answer: the simulator's log says why (a panic, an exit), and it goes with a
            # benchmark's scratch directory.
            process = self._process
            state = "running" if process is not None and process.poll() is None else "exited"
            if process is not None and process.returncode is not None:
                state = f"exited with {process.returncode}"
            lines = self._run_log()  # read once for the crash and the tail
            raise SimulatorError(
                f"{method} {path}: no answer ({error!r}); scalesim {state}{self._cause(lines)}; its log ends:\n"
                f"{self._tail(40, lines)}"
            ) from error

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = self.get("/stats")
        return result

    def status_writes(self, since_ns: int = 0, name: str = "") -> list[dict[str, Any]]:
        """FabricCapability status writes (of one, or all) that arrived since (unix ns), each with
        its status."""
        query = urllib.parse.urlencode({"since": since_ns, "name": name})
        result: list[dict[str, Any]] = self.get(f"/writes?{query}") or []
        return result

    def published(self) -> tuple[int, int]:
        """How many FabricCapabilities have a status, and when (unix ns) the last got its first."""
        result = self.get("/published")
        return int(result["withStatus"]), int(result["lastFirstAt"])


__all__ = ["SOURCE", "Simulator", "SimulatorError", "SimulatorInfo", "simulator_binary"]
