"""Command line: ``fabriccap evaluate | run | demo | controlplane``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from fabriccap import __version__
from fabriccap.config import Config, ConfigError, load_config
from fabriccap.errors import KubeError
from fabriccap.evaluate import Evaluation, evaluate
from fabriccap.facts import FactsExtractor
from fabriccap.render import format_output
from fabriccap.snapshot import FactSet, SnapshotError, add_bodies, load_snapshots
from fabriccap.stamping import now_rfc3339, stamp_status

EXIT_OK, EXIT_NOT_READY, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors follow the project's one-line ``error: …`` convention."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {message} (see '{self.prog} --help')\n")


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


async def live_facts(extractor: FactsExtractor, kubeconfig: str | None = None) -> FactSet:
    """Facts read from the cluster: all nodes; pods and DaemonSets of the plugin namespaces."""
    # Imported here: aiohttp costs start-up time that snapshot evaluation does not need.
    from fabriccap.kube import connect

    facts = FactSet()
    async with await connect(kubeconfig) as client:
        add_bodies(facts, extractor, [node async for node in client.list_items("/api/v1/nodes")], "cluster")
        for namespace in sorted(extractor.plugin_namespaces):
            daemon_sets = client.list_items(f"/apis/apps/v1/namespaces/{namespace}/daemonsets")
            add_bodies(facts, extractor, [ds async for ds in daemon_sets], "cluster")
            pods = client.list_items(f"/api/v1/namespaces/{namespace}/pods")
            add_bodies(facts, extractor, [pod async for pod in pods], "cluster")
    return facts


def evaluate_facts(config: Config, facts: FactSet) -> Evaluation:
    return evaluate(config, facts.nodes.values(), facts.pods.values(), facts.daemon_sets.values())


def evaluation_objects(evaluation: Evaluation, now: str | None = None) -> list[dict[str, Any]]:
    """The objects as a fresh operator would publish them (generation 1, transitions now)."""
    timestamp = now or now_rfc3339()
    objects = []
    for capability in evaluation.capabilities:
        obj = capability.to_object()
        obj["metadata"]["generation"] = 1
        obj["status"] = stamp_status(obj["status"], None, generation=1, now=timestamp)
        objects.append(obj)
    return objects


def cmd_evaluate(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as error:
        return _fail(str(error))
    extractor = FactsExtractor(config)
    try:
        if args.files:
            facts = load_snapshots(args.files, extractor)
        else:
            facts = asyncio.run(live_facts(extractor, args.kubeconfig))
    except (SnapshotError, KubeError) as error:
        return _fail(str(error))
    evaluation = evaluate_facts(config, facts)
    print(format_output(evaluation_objects(evaluation), args.output))
    if args.require_ready:
        all_ready = bool(evaluation.capabilities) and all(
            (ready := capability.status.condition("Ready")) is not None and ready.status == "True"
            for capability in evaluation.capabilities
        )
        return EXIT_OK if all_ready else EXIT_NOT_READY
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from fabriccap.runner import run_operator

    return run_operator(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from fabriccap.demo import run_demo

    return run_demo(args)


def cmd_controlplane(args: argparse.Namespace) -> int:
    from fabriccap.controlplane import cli as controlplane_cli

    return controlplane_cli.main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fabriccap", description=__doc__)
    parser.add_argument("--version", action="version", version=f"fabriccap {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    evaluate_parser = commands.add_parser(
        "evaluate", help="compute the FabricCapability objects once, from snapshots or the live cluster"
    )
    evaluate_parser.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        default=[],
        metavar="FILE",
        help="snapshot (JSON or YAML, v1 List or single object); repeatable; - for stdin",
    )
    evaluate_parser.add_argument("--config", metavar="FILE", help="configuration file (default: built-in)")
    evaluate_parser.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    evaluate_parser.add_argument(
        "--require-ready", action="store_true", help="exit 1 unless at least one pool exists and all are Ready"
    )
    evaluate_parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig for live mode")
    evaluate_parser.set_defaults(handler=cmd_evaluate)

    run_parser = commands.add_parser("run", help="run the operator")
    run_parser.add_argument("--config", metavar="FILE")
    run_parser.add_argument("--metrics-port", type=int, default=8080, metavar="N")
    run_parser.add_argument("--health-port", type=int, default=8081, metavar="N")
    run_parser.add_argument(
        "--namespace",
        action="append",
        default=[],
        metavar="NS",
        help="namespace(s) to watch for device-plugin DaemonSets and pods (default: the profiles')",
    )
    run_parser.add_argument("--standalone", action="store_true", help="no kopf peering (single replica)")
    run_parser.add_argument(
        "--bind-address", default="0.0.0.0", metavar="ADDR", help="address for the metrics and health servers"
    )
    run_parser.add_argument("--kubeconfig", metavar="FILE")
    run_parser.set_defaults(handler=cmd_run)

    demo_parser = commands.add_parser("demo", help="local control plane + simulated EKS cluster + operator")
    demo_parser.add_argument("--keep-running", action="store_true", help="leave everything up for exploration")
    demo_parser.add_argument("--dir", metavar="DIR", help="control-plane directory (default: a temp dir)")
    demo_parser.set_defaults(handler=cmd_demo)

    controlplane_parser = commands.add_parser("controlplane", help="a local etcd + kube-apiserver")
    controlplane_parser.add_argument("action", choices=("up", "down"))
    controlplane_parser.add_argument("--dir", metavar="DIR", help="state directory (default: ./.fabriccap-cp)")
    controlplane_parser.set_defaults(handler=cmd_controlplane)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
