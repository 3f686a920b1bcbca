"""Benchmark (not a test): issue 26's figures on the real API server, a streaming list against pages.

    python benchmarks/realapi_bench.py --nodes 10000                  # nodes only, both listings
    python benchmarks/realapi_bench.py --nodes 10000 --pods 100000    # with workload pods
    python benchmarks/realapi_bench.py --nodes 20000 --listing streaming

For each listing, a fresh local control plane (kube-apiserver + etcd on 127.0.0.1), populated as
``workloads_bench`` populates it (nodes of 10-12 KB with EFA 32 and a Ready plugin pod each, in
pools of 50; ``--pods`` workload pods of ~2.5 KB owned by Jobs that do not exist):

- ``streaming``: kube-apiserver with ``WatchList=true`` (its default since 1.34): the operator
  reads each collection as a streaming list (``sendInitialEvents=true``);
- ``paged``: ``WatchList=false`` (as 1.33's default): the server answers a streaming list 422,
  and the operator lists in pages from then on.

In the same run, per listing:
- the baseline, the best plain client (``scale_bench``'s, in a child process): every collection
  the operator reads, concurrently, as a paged LIST with the operator's page sizes, JSON-decoded,
  median of ``--baseline-runs``; and as a streaming list where the server offers one;
- start: ``fabriccap run`` starting to every FabricCapability having a status, as a ratio to the
  paged baseline (the issue's target: 1.2x) and to the best one; from the end of the first
  listing to the last first status (the writes), the cores the operator, kube-apiserver and
  etcd used and the writes the API server audited; with ``--apiserver-profile``,
  kube-apiserver's own CPU profile of the seconds after the listing (``go tool pprof``);
- memory: the operator's RSS after the start and its peak (VmHWM); kube-apiserver's RSS before
  the operator started and its highest while the operator listed (sampled every 0.1 s);
- relist: kube-apiserver SIGKILLed and started again (what losing an API server does to every
  watch): the watches the operator had to list again (``fabriccap_watch_expirations_total``,
  ``fabriccap_watch_relists_total``), how long until its CPU was quiet again, its highest RSS
  through it, its RSS after, and status writes meanwhile (nothing changed: 0 expected); and where
  the highest RSS was reached: from the kill to the nodes' listing, from there to the pods'
  listing, and from there on (from the operator's "expired; listing again" lines).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from operator_bench import all_published, free_port, install_crd
from scale_bench import (
    LISTED_LINE,
    STATUS_WRITTEN_LINE,
    baseline,
    cpu_seconds,
    expirations,
    first_logged,
    grown,
    grown_by_kind,
    rss_mib,
    scrape,
)
from workloads_bench import DEBOUNCE, audited_at, populate

from fabriccap.kube.client import connect
from fabriccap_devtools.controlplane import LocalControlPlane
from fabriccap_devtools.controlplane.cluster import read_info
from fabriccap_devtools.controlplane.pki import write_private
from fabriccap_devtools.launch import local_run_command

LISTINGS = {"streaming": "WatchList=true", "paged": "WatchList=false"}
SAMPLE_SECONDS = 0.1
# The processes whose CPU the start's writes take.
WRITERS_SIDES = ("operator", "apiserver", "etcd")
# After the API server is back: the operator counts as done relisting once its CPU took less
# than QUIET_CPU_SHARE of a core over QUIET_SECONDS, or after RELIST_WAIT_SECONDS in all.
QUIET_SECONDS = 2.0
QUIET_CPU_SHARE = 0.05
RELIST_WAIT_SECONDS = 600.0
# How long after the API server is back a watch's expiry or relist may take to show.
RELIST_SHOWN_SECONDS = 90.0
# The operator's first log line: the interpreter is up and fabriccap imported.
STARTING_LINE = re.compile(r"INFO fabriccap: fabriccap starting against")
START_PARTS = {"logged": STARTING_LINE, "listed": LISTED_LINE, "first_status": STATUS_WRITTEN_LINE}
# The relist's phases: each begins with its collection's expiry in the operator's log.
RELIST_PHASES = {
    "nodes": re.compile(r"watch of /api/v1/nodes expired; listing again"),
    "pods": re.compile(r"watch of /api/v1/pods expired; listing again"),
}
RELISTS = "fabriccap_watch_relists_total{"
STATUS_WRITES = "fabriccap_status_writes_total{"


class PeakRss:
    """The highest RSS (MiB) each process reached while sampled, every SAMPLE_SECONDS, and
    each one's CPU seconds over time (how busy each was in a part of the start)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = dict(pids)
        self.peaks = {name: 0.0 for name in pids}
        # The first process's samples: (the time, as time.time(), its RSS in MiB).
        self.timeline: list[tuple[float, float]] = []
        # Each process's samples: (the time, as time.time(), its CPU seconds so far).
        self.cpu: dict[str, list[tuple[float, float]]] = {name: [] for name in pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="rss sampler", daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            for index, (name, pid) in enumerate(list(self.pids.items())):  # the relist adds the API server
                try:
                    rss = rss_mib(pid)[0]
                    self.peaks[name] = max(self.peaks[name], rss)
                    self.cpu.setdefault(name, []).append((time.time(), cpu_seconds(pid)))
                    if index == 0:
                        self.timeline.append((time.time(), rss))
                except (FileNotFoundError, ProcessLookupError):
                    continue  # killed meanwhile (the API server, in the relist)

    def cores_between(self, name: str, start: float, end: float) -> float | None:
        """The cores ``name`` used from ``start`` to ``end`` (time.time()), from the samples
        nearest inside; None if fewer than two fall there."""
        inside = [(at, cpu) for at, cpu in self.cpu.get(name, []) if start <= at <= end]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def wait_relisted(port: int, before: dict[str, float], deadline: float) -> bool:
    """Until a watch expired or was replaced by a LIST (the operator reconnects on a backoff, so
    a quiet CPU alone could be the wait before it); False if none did by the deadline."""
    while time.monotonic() < deadline:
        after = scrape(port)
        if expirations(before, after) or grown(before, after, RELISTS):
            return True
        time.sleep(0.5)
    return False


def wait_quiet(pid: int, deadline: float) -> None:
    """Until the process used less than QUIET_CPU_SHARE of a core over QUIET_SECONDS."""
    while time.monotonic() < deadline:
        used = cpu_seconds(pid)
        time.sleep(QUIET_SECONDS)
        if cpu_seconds(pid) - used < QUIET_CPU_SHARE * QUIET_SECONDS:
            return


def api_server_pid(directory: Path) -> int:
    info = read_info(directory)
    if info is None or "kube-apiserver" not in info.pids:
        raise RuntimeError(f"no kube-apiserver recorded in {directory}")
    return info.pids["kube-apiserver"]


async def one_listing(listing: str, args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"listing": listing, "nodes": args.nodes, "pods": args.pods}
    with (
        tempfile.TemporaryDirectory(prefix="fabriccap-realapi-bench-") as tmp,
        LocalControlPlane(Path(tmp) / "cp", feature_gates=[LISTINGS[listing]]) as cp,
    ):
        info = cp.info
        install_crd([str(info.kubectl), f"--kubeconfig={info.kubeconfig}"])
        config = Path(tmp) / "config.yaml"
        config.write_text(f"debounceSeconds: {DEBOUNCE}\n")
        async with await connect(str(info.kubeconfig)) as client:
            started = time.perf_counter()
            _bodies, pools = await populate(client, args.nodes, args.pods)
            results["populate_s"] = time.perf_counter() - started
            print(f"{listing}: populated in {results['populate_s']:.1f}s", flush=True)
            apiserver = api_server_pid(cp.directory)
            for mode in ("paged", "streaming") if listing == "streaming" else ("paged",):
                results[f"baseline_{mode}"] = baseline(info.kubeconfig, config, mode, args.baseline_runs, apiserver)
                print(f"{listing}: {mode} baseline {results[f'baseline_{mode}']}", flush=True)
            results["apiserver_rss_before_mib"] = rss_mib(apiserver)[0]

            port = free_port()
            log_path = Path(tmp) / "operator-0.log"  # as scale_bench.first_logged reads it
            with log_path.open("w") as log:
                started, started_ns = time.perf_counter(), time.time_ns()
                operator = subprocess.Popen(
                    local_run_command(info.kubeconfig, config, port), stdout=log, stderr=subprocess.STDOUT
                )
                try:
                    processes = {"operator": operator.pid, "apiserver": apiserver, "etcd": info.pids["etcd"]}
                    with contextlib.ExitStack() as stack:
                        peaks = stack.enter_context(PeakRss(processes))
                        if args.apiserver_profile:
                            profile = ApiServerProfile(
                                info.kubeconfig, log_path, args.profile_seconds, args.apiserver_profile
                            )
                            stack.enter_context(profile)
                        await asyncio.wait_for(all_published(client, {f"efa-{pool}" for pool in pools}, operator), 1800)
                        results["start_s"] = time.perf_counter() - started
                    results["operator_cpu_start_s"] = cpu_seconds(operator.pid)
                    # The start in parts: the interpreter and the imports, the first listing,
                    # the first status written (from the operator's log, to the millisecond).
                    for part, seconds in first_logged(Path(tmp), started_ns, START_PARTS).items():
                        results[f"start_{part}_s"] = seconds
                    results.update(writes_phase(peaks, started_ns / 1e9, results))
                    results["start_writes"] = writes_audited(cp, started_ns / 1e9, time.time())
                    results["start_writes_done_s"] = last_write_audited(cp, started_ns / 1e9)
                    results["apiserver_rss_peak_during_start_mib"] = peaks.peaks["apiserver"]
                    await asyncio.sleep(2.0)
                    results["rss_after_start_mib"], results["peak_rss_after_start_mib"] = rss_mib(operator.pid)
                    results.update(relist(cp, operator.pid, port, Path(tmp), started_ns))
                    results["peak_rss_mib"] = rss_mib(operator.pid)[1]
                finally:
                    operator.send_signal(signal.SIGTERM)
                    operator.wait(timeout=60)
            if args.keep_logs:
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                shutil.copy(log_path, args.keep_logs / f"operator-{listing}.log")
            results["listing_lines"] = [
                line.strip()[:200]
                for line in log_path.read_text().splitlines()
                if "streaming list" in line or "in pages" in line or "expired" in line
            ][:20]
    paged = (results.get("baseline_paged") or {}).get("median_s")
    streaming = (results.get("baseline_streaming") or {}).get("median_s")
    best = min(value for value in (paged, streaming, float("inf")) if value is not None)
    if "start_s" in results and paged:
        results["start_ratio_paged"] = results["start_s"] / paged
        results["start_ratio_best"] = results["start_s"] / best
    return results


class ApiServerProfile:
    """kube-apiserver's CPU profile (Go pprof) of the ``seconds`` after the operator's log says
    its first listing ended: where the API server's time goes while the start writes."""

    def __init__(self, kubeconfig: Path, log: Path, seconds: int, out: Path) -> None:
        self.kubeconfig, self.log, self.seconds, self.out = kubeconfig, log, seconds, out
        self._thread = threading.Thread(target=self._profile, name="apiserver profile", daemon=True)

    def __enter__(self) -> ApiServerProfile:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._thread.join(timeout=self.seconds + 60)

    def _profile(self) -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not LISTED_LINE.search(self.log.read_text(errors="replace")):
            time.sleep(0.05)
        config = yaml.safe_load(self.kubeconfig.read_text())
        cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
        context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        # ssl loads a client's key from a file only: the admin's, for as long as that takes.
        pem = self.out.with_suffix(".pem")
        certificate, key = (base64.b64decode(user[field]) for field in ("client-certificate-data", "client-key-data"))
        write_private(pem, certificate + key)
        try:
            context.load_cert_chain(pem)
        finally:
            pem.unlink()
        url = f"{cluster['server']}/debug/pprof/profile?seconds={self.seconds}"
        with urllib.request.urlopen(url, context=context, timeout=self.seconds + 30) as response:
            self.out.write_bytes(response.read())
        print(f"kube-apiserver's profile of {self.seconds} s after the listing: {self.out}", flush=True)


def writes_phase(peaks: PeakRss, started: float, results: dict[str, Any]) -> dict[str, Any]:
    """How busy each process was from the end of the first listing to the last first status
    (the writes' part of the start): if the three together use less than the machine's cores,
    the writes wait on something other than CPU."""
    listed = results.get("start_listed_s")
    if listed is None or "start_s" not in results:
        return {}
    start, end = started + listed, started + results["start_s"]
    return {f"writes_{name}_cores": peaks.cores_between(name, start, end) for name in peaks.pids}


def writes_audited(cp: LocalControlPlane, start: float, end: float) -> dict[str, int]:
    """The writes the API server audited from ``start`` to ``end`` (time.time()), counted by
    verb and resource (nothing but the operator writes then)."""
    counted: dict[str, int] = {}
    for event in cp.audit_events():
        at = audited_at(event, "requestReceivedTimestamp")
        if at is not None and start <= at <= end:
            target = event.get("objectRef") or {}
            what = "/".join(part for part in (target.get("resource"), target.get("subresource")) if part)
            key = f"{event.get('verb')} {what}"
            counted[key] = counted.get(key, 0) + 1
    return dict(sorted(counted.items()))


def last_write_audited(cp: LocalControlPlane, start: float, quiet: float = 1.0, limit: float = 120.0) -> float | None:
    """Seconds from ``start`` (time.time()) to the last write of a FabricCapability the API
    server audited after it, once none newer has come for ``quiet`` seconds: the start's ready
    labels, which follow its statuses and their Events (not every Event: the workloads'
    Warnings go on at their own pace). None: still writing after ``limit`` seconds."""
    deadline, seen = time.monotonic() + limit, None
    while time.monotonic() < deadline:
        newest = max(
            (
                at
                for event in cp.audit_events()
                if event.get("verb") in ("create", "patch", "update")
                and (event.get("objectRef") or {}).get("resource") == "fabriccapabilities"
                and (at := audited_at(event, "requestReceivedTimestamp")) is not None
                and at >= start
            ),
            default=None,
        )
        if newest is not None and newest == seen and time.time() - newest >= quiet:
            return newest - start
        seen = newest
        time.sleep(quiet)
    return None


def relist(cp: LocalControlPlane, operator: int, port: int, logs: Path, started_ns: int) -> dict[str, Any]:
    """kube-apiserver killed and started again: what the operator's watches and memory do
    (``logs``: the operator's log directory; ``started_ns``: when it started, for its phases)."""
    before = scrape(port)
    with PeakRss({"operator": operator}) as peaks:
        started = time.monotonic()
        cp.kill("kube-apiserver")  # SIGKILL: a graceful stop drains its watches for longer than kill waits
        cp.restart("kube-apiserver")
        restarted = time.monotonic() - started
        apiserver = api_server_pid(cp.directory)
        peaks.pids["apiserver"] = apiserver
        peaks.peaks["apiserver"] = 0.0
        relisted = wait_relisted(port, before, time.monotonic() + RELIST_SHOWN_SECONDS)
        wait_quiet(operator, time.monotonic() + RELIST_WAIT_SECONDS)
        quiet = time.monotonic() - started
    time.sleep(2.0)
    return {
        "relist_apiserver_back_s": restarted,
        "relisted": relisted,
        "relist_quiet_s": quiet,
        **relist_figures(before, scrape(port)),
        "relist_operator_peak_rss_mib": peaks.peaks["operator"],
        "relist_apiserver_peak_rss_mib": peaks.peaks["apiserver"],
        "rss_after_relist_mib": rss_mib(operator)[0],
        **relist_phases(peaks.timeline, logs, started_ns),
    }


def relist_phases(timeline: list[tuple[float, float]], logs: Path, started_ns: int) -> dict[str, Any]:
    """The operator's highest RSS in each phase of the relist: before the nodes' listing began
    (the API server away, the watches failing), from it to the pods' listing, and after."""
    began = first_logged(logs, started_ns, RELIST_PHASES)
    bounds = [(phase, None if at is None else started_ns / 1e9 + at) for phase, at in began.items()]
    phases: dict[str, Any] = {}
    for index, (phase, start) in enumerate([("away", timeline[0][0] if timeline else None), *bounds]):
        end = bounds[index][1] if index < len(bounds) else None
        samples = [rss for at, rss in timeline if start is not None and at >= start and (end is None or at < end)]
        phases[f"relist_peak_rss_{phase}_mib"] = max(samples, default=None)
    return phases


def relist_figures(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """The kinds whose watch expired (410), those a LIST replaced, and the status writes."""
    return {
        "relist_expired": expirations(before, after),
        "relist_listed": grown_by_kind(before, after, RELISTS),
        "relist_status_writes": int(sum(grown(before, after, STATUS_WRITES).values())),
    }


def kinds(counted: dict[str, int]) -> str:
    return f"{len(counted)} ({', '.join(sorted(counted))})" if counted else "0"


def summary(runs: list[dict[str, Any]]) -> str:
    def figure(value: Any, unit: str = "", digits: int = 1) -> str:
        return "n/a" if value is None else f"{value:.{digits}f}{unit}" if isinstance(value, float) else str(value)

    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("paged baseline, median", lambda r: figure((r.get("baseline_paged") or {}).get("median_s"), " s", 2)),
        ("streaming baseline, median", lambda r: figure((r.get("baseline_streaming") or {}).get("median_s"), " s", 2)),
        ("operator start -> all published", lambda r: figure(r.get("start_s"), " s", 2)),
        ("start ratio to the paged baseline", lambda r: figure(r.get("start_ratio_paged"), "x", 2)),
        ("start ratio to the best baseline", lambda r: figure(r.get("start_ratio_best"), "x", 2)),
        (
            "of it: first log line / listed / first status at",
            lambda r: " / ".join(figure(r.get(f"start_{part}_s"), " s", 2) for part in START_PARTS),
        ),
        (
            "the start's last FabricCapability write (a ready label) at",
            lambda r: figure(r.get("start_writes_done_s"), " s", 2),
        ),
        ("operator CPU during the start", lambda r: figure(r.get("operator_cpu_start_s"), " s")),
        (
            "writes during the start",
            lambda r: ", ".join(f"{count} {what}" for what, count in (r.get("start_writes") or {}).items()) or "0",
        ),
        (
            "cores from listed to all published: operator / apiserver / etcd",
            lambda r: " / ".join(figure(r.get(f"writes_{name}_cores"), "", 2) for name in WRITERS_SIDES),
        ),
        (
            "operator RSS after start / peak",
            lambda r: f"{figure(r.get('rss_after_start_mib'))} / {figure(r.get('peak_rss_after_start_mib'))} MiB",
        ),
        (
            "kube-apiserver RSS before / highest while listed",
            lambda r: (
                f"{figure(r.get('apiserver_rss_before_mib'))}"
                f" / {figure(r.get('apiserver_rss_peak_during_start_mib'))} MiB"
            ),
        ),
        (
            "relist: API server back after / operator quiet after",
            lambda r: f"{figure(r.get('relist_apiserver_back_s'))} / {figure(r.get('relist_quiet_s'))} s",
        ),
        (
            "relist: watches expired (410) / replaced by a LIST",
            lambda r: f"{kinds(r.get('relist_expired') or {})} / {kinds(r.get('relist_listed') or {})}",
        ),
        ("relist: status writes", lambda r: figure(r.get("relist_status_writes"))),
        (
            "relist: operator highest RSS / after",
            lambda r: f"{figure(r.get('relist_operator_peak_rss_mib'))} / {figure(r.get('rss_after_relist_mib'))} MiB",
        ),
        (
            "relist: operator highest RSS before the nodes' listing / from it / from the pods'",
            lambda r: (
                " / ".join(figure(r.get(f"relist_peak_rss_{phase}_mib")) for phase in ("away", *RELIST_PHASES)) + " MiB"
            ),
        ),
        ("relist: kube-apiserver highest RSS", lambda r: f"{figure(r.get('relist_apiserver_peak_rss_mib'))} MiB"),
        ("operator peak RSS (whole run)", lambda r: f"{figure(r.get('peak_rss_mib'))} MiB"),
    ]
    lines = [f"| {runs[0]['nodes']} nodes / {runs[0]['pods']} pods | " + " | ".join(r["listing"] for r in runs) + " |"]
    lines.append("|---|" + "---:|" * len(runs))
    lines += [f"| {label} | " + " | ".join(value(r) for r in runs) + " |" for label, value in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=0)
    parser.add_argument("--listing", choices=[*LISTINGS, "both"], default="both")
    parser.add_argument("--baseline-runs", type=int, default=3)
    parser.add_argument("--keep-logs", type=Path, help="a directory to copy the operator's logs into")
    parser.add_argument(
        "--apiserver-profile", type=Path, help="kube-apiserver's CPU profile after the listing, for go tool pprof"
    )
    # pprof takes whole seconds (anything else is its default, 30 s).
    parser.add_argument("--profile-seconds", type=int, default=2, help="how long that profile lasts, in seconds")
    args = parser.parse_args()
    listings = list(LISTINGS) if args.listing == "both" else [args.listing]
    runs = []
    for listing in listings:
        runs.append(asyncio.run(one_listing(listing, args)))
        print(json.dumps(runs[-1], indent=1, default=str), flush=True)
    print(summary(runs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
