"""Benchmark (not a test): the event loop's lag, /healthz and memory while /metrics is hammered.

    nice -n 10 python benchmarks/scrape_bench.py     # 1000 and 5000 pools, 50 and 200 scrapers, 10 s
    python benchmarks/scrape_bench.py --pools 1000 --scrapers 50 --modes shared

The operator's side runs here: an ``OperatorMetrics`` holding N pools (statuses as the
operator computes them: one evaluation of N one-node pools, every 10th with mixed counts), its
/metrics server, and its /healthz server (``start_health_server``, the one ``fabriccap run``
starts, with a report that answers at once) on one event loop. A probe task sleeps 10 ms in a loop and records how
late it wakes: the loop's lag, which is what every watch, status write and /healthz answer of
the operator waits behind. The scrapers run in a child process (so their own CPU does not
count as the loop's): S concurrent clients scraping /metrics back to back for D seconds, each
with a 10 s timeout, and one client asking /healthz every 0.2 s (2 s timeout).

Modes:
- ``shared``: the operator's server (``start_metrics_server``): one render per second at most,
  in a worker thread, shared; at most 4 scrapes at once, the rest 503.
- ``per-request``: the server as it was before (round 3, L24): each scrape renders the
  exposition on the event loop, no bound on concurrent scrapes.

Each pool size first runs a baseline: the same server, the same /healthz client, no scraper.
Every run is its own process (so its peak RSS is its own) and prints one JSON line; at the end a
table gives each run's loop lag and /healthz latency in seconds with its ratio to that
baseline, measured in the same invocation on the same machine.

Printed per run: scrapes answered 200 / 503 / failed, renders, the loop's lag (p50, p99,
max), /healthz answers (ok / failed, median and slowest), and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from fabriccap.controller.metrics import (
    OperatorMetrics,
    SharedExposition,
    start_health_server,
    start_metrics_server,
)
from fabriccap.core.config import default_config
from fabriccap.core.evaluate import evaluate
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.index import FactIndex
from fabriccap.offline.snapshot import add_bodies
from fabriccap_devtools.world import daemon_set, node, plugin_pods

LAG_TICK_SECONDS = 0.01

SCRAPER = r"""
import asyncio, json, sys, time
import aiohttp

async def main(metrics_url, healthz_url, scrapers, seconds):
    stop = time.monotonic() + seconds
    counts = {"ok": 0, "busy": 0, "failed": 0}
    health = {"ok": 0, "failed": 0}
    latencies = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        async def scrape():
            while time.monotonic() < stop:
                try:
                    async with session.get(metrics_url, timeout=aiohttp.ClientTimeout(total=10)) as response:
                        await response.read()
                        counts["ok" if response.status == 200 else "busy" if response.status == 503 else "failed"] += 1
                except Exception:
                    counts["failed"] += 1
        async def healthz():
            while time.monotonic() < stop:
                started = time.monotonic()
                try:
                    async with session.get(healthz_url, timeout=aiohttp.ClientTimeout(total=2)) as response:
                        await response.read()
                        health["ok" if response.status == 200 else "failed"] += 1
                except Exception:
                    health["failed"] += 1
                latencies.append(time.monotonic() - started)
                await asyncio.sleep(0.2)
        await asyncio.gather(*(scrape() for _ in range(scrapers)), healthz())
    latencies.sort()
    health["median_s"] = latencies[len(latencies) // 2] if latencies else None
    health["slowest_s"] = latencies[-1] if latencies else None
    print(json.dumps({"scrapes": counts, "healthz": health}))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
"""


def statuses(pools: int) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(name, fabric, pool, status JSON) of ``pools`` one-node pools, as one evaluation makes them."""
    config = default_config()
    names = [f"n{index}" for index in range(pools)]
    bodies = [daemon_set(), *plugin_pods(names)]
    for index, name in enumerate(names):
        bodies.append(node(name, pool=f"pool-{index}", efa=16 if index % 10 == 0 else 32))
    facts = FactIndex()
    add_bodies(facts, FactsExtractor(config), bodies, "bench")
    return [
        (capability.name, capability.fabric, capability.pool.value, capability.status.to_json())
        for capability in evaluate(config, facts).capabilities
    ]


def rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def per_request_server(metrics: OperatorMetrics, host: str, port: int, renders: list[int]) -> web.AppRunner:
    """The /metrics server as it was before round 3's fix: a render per scrape, on the loop."""

    async def serve_metrics(_: web.Request) -> web.Response:
        renders.append(1)
        return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", serve_metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


async def run(pools: int, mode: str, scrapers: int, seconds: float) -> None:
    metrics = OperatorMetrics()
    for name, fabric, pool, status in statuses(pools):
        metrics.pools.set_pool(name, fabric, pool, status)
    exposition_bytes = len(metrics.exposition())
    started = time.perf_counter()
    metrics.exposition()
    render_seconds = time.perf_counter() - started

    health_runner = await start_health_server(lambda: {"alive": True}, "127.0.0.1", 0)
    healthz_url = f"http://127.0.0.1:{health_runner.addresses[0][1]}/healthz"
    port = free_port()
    renders: list[int] = []
    shared = SharedExposition(metrics.exposition)
    if mode == "shared":
        runner = await start_metrics_server(metrics, "127.0.0.1", port, exposition=shared)
    else:
        runner = await per_request_server(metrics, "127.0.0.1", port, renders)

    lags: list[float] = []
    last_wake = [time.perf_counter()]

    async def probe_lag() -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(LAG_TICK_SECONDS)
            last_wake[0] = time.perf_counter()
            lags.append(last_wake[0] - before - LAG_TICK_SECONDS)

    rss_before = rss_kib("VmRSS")
    asyncio.create_task(probe_lag())  # noqa: RUF006  # the process ends with the report (see report)

    def report() -> None:
        """In a thread, not on the loop: with the per-request server one loop iteration can run
        hundreds of queued renders, long after the scrapers left, and nothing on the loop would
        get to report. The scrapers' window is the measurement; a stall still open at its end
        counts as a lag of its length so far."""
        urls = [f"http://127.0.0.1:{port}/metrics", healthz_url]
        hammer = subprocess.Popen(
            [sys.executable, "-c", SCRAPER, *urls, str(scrapers), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        output, _ = hammer.communicate()
        ordered = sorted([*lags, time.perf_counter() - last_wake[0]])
        result = json.loads(output)
        figures = {
            "pools": pools,
            "mode": mode,
            "scrapers_n": scrapers,
            "exposition_kib": exposition_bytes // 1024,
            "render_s": round(render_seconds, 3),
            "scrapes": result["scrapes"],
            "renders": shared.renders if mode == "shared" else len(renders),
            "lag_p50_ms": round(statistics.median(ordered) * 1000, 1),
            "lag_p99_ms": round(ordered[int(len(ordered) * 0.99)] * 1000, 1),
            "lag_max_ms": round(ordered[-1] * 1000, 1),
            "healthz": result["healthz"],
            "rss_before_mib": rss_before // 1024,
            "peak_rss_mib": rss_kib("VmHWM") // 1024,
        }
        print(json.dumps(figures), flush=True)
        # Without cleanup: the per-request server may hold hundreds of accepted scrapes, each a
        # render on the loop, long after their clients left. The process ends without them.
        os._exit(0)

    threading.Thread(target=report, daemon=True).start()
    await asyncio.Event().wait()  # the loop serves until report() ends the process
    del runner, health_runner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pools", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--modes", nargs="+", choices=("shared", "per-request"), default=["shared", "per-request"])
    parser.add_argument("--scrapers", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: one run, one JSON line
    args = parser.parse_args()
    if args.one:
        asyncio.run(run(args.pools[0], args.modes[0], args.scrapers[0], args.seconds))  # ends the process
    results = []
    for pools in args.pools:
        # The baseline first: no scraper, only the /healthz client.
        runs = [("shared", 0)] + [(mode, scrapers) for scrapers in args.scrapers for mode in args.modes]
        for mode, scrapers in runs:
            # One process per run: the peak RSS is that run's.
            argv = ["--one", "--pools", str(pools), "--modes", mode, "--scrapers", str(scrapers)]
            child = subprocess.run(
                [sys.executable, __file__, *argv, "--seconds", str(args.seconds)],
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            )
            print(child.stdout.strip(), flush=True)
            results.append(json.loads(child.stdout))
    print_table(results)


def ratio(value: float | None, baseline: float | None) -> str:
    if value is None or not baseline:
        return "-"
    return f"{value / baseline:.1f}x"


def print_table(results: list[dict[str, Any]]) -> None:
    """Seconds, and their ratio to the baseline (no scraper) at the same pool count."""
    print()
    print(
        f"{'pools':>6} {'mode':<12} {'scrapers':>8} | {'lag p99 s':>9} {'ratio':>7} | {'lag max s':>9} {'ratio':>7}"
        f" | {'healthz p50 s':>13} {'ratio':>7} | {'healthz max s':>13} {'ratio':>7} | {'health fail':>11}"
        f" | {'200/503/fail':>14} {'renders':>7} {'peak MiB':>8}"
    )
    baselines = {result["pools"]: result for result in results if result["scrapers_n"] == 0}
    for result in results:
        base = baselines[result["pools"]]
        health, base_health = result["healthz"], base["healthz"]
        scrapes = result["scrapes"]
        lag_p99, lag_max = result["lag_p99_ms"] / 1000, result["lag_max_ms"] / 1000
        mode_name = result["mode"] if result["scrapers_n"] else "baseline"
        print(
            f"{result['pools']:>6} {mode_name:<12} {result['scrapers_n']:>8}"
            f" | {lag_p99:>9.3f} {ratio(lag_p99, base['lag_p99_ms'] / 1000):>7}"
            f" | {lag_max:>9.3f} {ratio(lag_max, base['lag_max_ms'] / 1000):>7}"
            f" | {health['median_s'] or 0:>13.4f} {ratio(health['median_s'], base_health['median_s']):>7}"
            f" | {health['slowest_s'] or 0:>13.4f} {ratio(health['slowest_s'], base_health['slowest_s']):>7}"
            f" | {health['failed']:>11}"
            f" | {scrapes['ok']:>4}/{scrapes['busy']}/{scrapes['failed']:<6} {result['renders']:>7}"
            f" {result['peak_rss_mib']:>8}"
        )


if __name__ == "__main__":
    main()
