"""Benchmark (not a test): the operator's memory when pods name hostile owners (round 3, S4).

    nice -n 10 python benchmarks/traversal_bench.py                 # 2,000 nodes of ~15 KB, 8 pods
    python benchmarks/traversal_bench.py --nodes 500 --pods 4

Round 3 made 8 pods whose owner names were paths (``../../../../api/v1/nodes?limit=0``...)
against 2,000 nodes of 15 KB: the operator read the 32 MB Node list once per pod and its peak
RSS went from 97 to 286 MiB, past the chart's 256 MiB limit.

Here the operator's side holds the facts of ``--nodes`` heavy nodes (one pool), then resolves
the owners of ``--pods`` hostile pods: half with the traversal names of round 3, half with
valid names. The API server, in a child process (its memory is not ours), answers *every* GET
with the whole Node list of those nodes, streamed: worse than a real API server, which answers
a valid name with one object or a 404. So each valid-named lookup meets a 32 MB answer and
shows what the bounded read holds; each traversal name shows whether it becomes a request.

Printed: requests the server saw, the peak RSS (VmHWM) before the lookups (the baseline: the
same process holding the same nodes) and after them, their ratio, and the lookups' seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import time
from pathlib import Path

from fabriccap.controller.lookups import LookupResolver
from fabriccap.controller.store import FactStore
from fabriccap.core.config import default_config
from fabriccap.core.evaluate import evaluate
from fabriccap.core.facts import FactsExtractor
from fabriccap.kube.client import KubeClient
from fabriccap.kube.credentials import Credentials
from fabriccap.kube.kinds import BY_KIND
from fabriccap_devtools.world import daemon_set, node, owner_reference, plugin_pods, workload_pod

TRAVERSAL_NAMES = [
    "../../../../api/v1/nodes?limit=0",
    "../../../../../../api/v1/pods",
    "x?watch=true",
    "../../namespaces/victim/pods/victim-pod",
]

# The API server: every GET is answered with the Node list, streamed in 1 MiB chunks. It prints
# its port, then the count of requests it saw when its stdin closes.
SERVER = r"""
import asyncio, json, logging, socket, sys
from aiohttp import web
logging.getLogger("aiohttp").setLevel(logging.CRITICAL)  # a client that stops reading is the point
sys.path[:0] = [sys.argv[2]]
from fabriccap_devtools.world import kube_list, node

body = json.dumps(kube_list([node(f"n{i}", heavy=True, images=40) for i in range(int(sys.argv[1]))])).encode()
seen = []

async def handle(request):
    seen.append(request.path_qs)
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    try:
        for start in range(0, len(body), 1 << 20):
            await response.write(body[start:start + (1 << 20)])
    except (ConnectionResetError, RuntimeError):
        pass  # the client stopped reading: a bounded read
    return response

async def main():
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    print(json.dumps({"port": sock.getsockname()[1], "list_bytes": len(body)}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    print(json.dumps({"requests": seen}), flush=True)
    await runner.cleanup()

asyncio.run(main())
"""


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


async def run(nodes: int, pods: int) -> dict[str, object]:
    config = default_config()
    store = FactStore()
    extractor = FactsExtractor(config)
    names = [f"n{index}" for index in range(nodes)]
    for body in [daemon_set(), *plugin_pods(names)]:
        BY_KIND[str(body["kind"])].upsert(store, extractor, body)
    for name in names:
        BY_KIND["Node"].upsert(store, extractor, node(name, heavy=True, images=40))
    hostile = [
        workload_pod(
            names[index % nodes],
            f"hostile-{index}",
            owner={
                **owner_reference("Job", "batch/v1", "x"),
                "name": TRAVERSAL_NAMES[index // 2 % len(TRAVERSAL_NAMES)] if index % 2 == 0 else f"valid-{index}",
            },
        )
        for index in range(pods)
    ]
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(nodes), str(Path(__file__).resolve().parents[1] / "operator")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    ready = json.loads(server.stdout.readline())
    gc.collect()
    baseline_kib = status_kib("VmHWM")
    for body in hostile:
        BY_KIND["Pod"].upsert(store, extractor, body)
    client = KubeClient(Credentials(server=f"http://127.0.0.1:{ready['port']}"))
    resolver = LookupResolver(client, store)
    started = time.perf_counter()
    await resolver.resolve_now(evaluate(config, store).lookups, timeout=120)
    seconds = time.perf_counter() - started
    await resolver.close()
    await client.close()
    peak_kib = status_kib("VmHWM")
    server.stdin.close()
    requests = json.loads(server.stdout.readline())["requests"]
    server.wait(timeout=30)
    return {
        "nodes": nodes,
        "pods": pods,
        "node_list_mib": round(ready["list_bytes"] / 2**20, 1),
        "requests": requests,
        "baseline_peak_rss_mib": round(baseline_kib / 1024, 1),
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "ratio": round(peak_kib / baseline_kib, 2),
        "lookup_seconds": round(seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=8)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.nodes, args.pods))), flush=True)


if __name__ == "__main__":
    main()
