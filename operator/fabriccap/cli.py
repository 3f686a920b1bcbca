"""Command line: ``fabriccap evaluate | run | demo | controlplane``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from fabriccap import __version__
from fabriccap.core.config import ConfigError, load_config
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.quantity import parse_quantity
from fabriccap.kube.errors import KubeError
from fabriccap.offline.pipeline import all_ready, evaluate_facts, evaluation_objects, live_facts
from fabriccap.offline.render import OUTPUTS, format_output
from fabriccap.offline.snapshot import DEFAULT_MAX_INPUT_BYTES, SnapshotError, load_snapshots

EXIT_OK, EXIT_NOT_READY, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors follow the project's one-line ``error: …`` convention."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {message} (see '{self.prog} --help')\n")


def _input_size(text: str) -> int:
    try:
        size = parse_quantity(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (use e.g. 512Mi or 2Gi)") from None
    if size <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive size")
    return size


# Each node is a /24 of 198.18.0.0/16 and about 150 MiB; a handful is what a laptop or CI VM holds.
MAX_NODES = 8


def _node_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of nodes") from None
    if not 0 <= count <= MAX_NODES:
        raise argparse.ArgumentTypeError(f"{count} nodes: choose 0 to {MAX_NODES}")
    return count


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


class _LowercaseLevel(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


def _log_to_stderr() -> None:
    """Warnings (a ResourceSlice left out, a kind not served) as ``warning: …`` lines on stderr,
    beside the output, like the ``error: …`` lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LowercaseLevel())
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)


def cmd_evaluate(args: argparse.Namespace) -> int:
    _log_to_stderr()
    try:
        config = load_config(args.config)
    except ConfigError as error:
        return _fail(str(error))
    extractor = FactsExtractor(config)
    try:
        if args.files:
            facts = load_snapshots(args.files, extractor, max_input_bytes=args.max_input_size)
        else:
            facts = asyncio.run(live_facts(extractor, args.kubeconfig))
    except (SnapshotError, KubeError) as error:
        return _fail(str(error))
    evaluation = evaluate_facts(config, facts)
    text = format_output(evaluation_objects(evaluation), args.output)
    if text:  # -o name of nothing prints nothing, as kubectl does
        print(text)
    if args.require_ready:
        return EXIT_OK if all_ready(evaluation) else EXIT_NOT_READY
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from fabriccap.controller.main import run_operator

    return run_operator(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from fabriccap.dev.demo import run_demo

    return run_demo(args)


def cmd_controlplane(args: argparse.Namespace) -> int:
    from fabriccap.dev.controlplane import cli as controlplane_cli

    return controlplane_cli.main(args)


def cmd_config_schema(args: argparse.Namespace) -> int:
    import json

    from fabriccap.core.config import config_input_schema

    print(json.dumps(config_input_schema(), indent=2))
    return EXIT_OK


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
    evaluate_parser.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default="table",
        help="table (kubectl get's columns), wide (+RESOURCE, PLUGIN-READY, NO-FABRIC), json or yaml "
        "(a v1 List), name (fabriccapability.fabriccap.dev/NAME lines); default: table",
    )
    evaluate_parser.add_argument(
        "--require-ready", action="store_true", help="exit 1 unless at least one pool exists and all are Ready"
    )
    evaluate_parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig for live mode")
    evaluate_parser.add_argument(
        "--max-input-size",
        type=_input_size,
        default=DEFAULT_MAX_INPUT_BYTES,
        metavar="SIZE",
        help="refuse an input file larger than this (a Kubernetes quantity: 512Mi, 2Gi; default: 512Mi)",
    )
    evaluate_parser.set_defaults(handler=cmd_evaluate)

    run_parser = commands.add_parser("run", help="run the operator")
    run_parser.add_argument("--config", metavar="FILE", help="configuration file (default: built-in)")
    run_parser.add_argument(
        "--metrics-port", type=int, default=8080, metavar="N", help="port of /metrics; 0 turns it off (default: 8080)"
    )
    run_parser.add_argument(
        "--health-port", type=int, default=8081, metavar="N", help="port of /healthz; 0 turns it off (default: 8081)"
    )
    run_parser.add_argument(
        "--metrics-bind-address",
        metavar="ADDR",
        help="address /metrics listens on (default: 0.0.0.0 in a pod, where Prometheus scrapes the pod IP; "
        "127.0.0.1 elsewhere)",
    )
    run_parser.add_argument(
        "--health-bind-address",
        metavar="ADDR",
        help="address /healthz listens on (default: 0.0.0.0 in a pod, for the kubelet's probes; 127.0.0.1 elsewhere)",
    )
    run_parser.add_argument(
        "--namespace",
        metavar="NS",
        help="the operator's own namespace, where its leader Lease lives "
        "(default: the pod's service account namespace, else $POD_NAMESPACE, else default)",
    )
    run_parser.add_argument(
        "--standalone",
        action="store_true",
        help="skip leader election: this replica writes without holding the Lease (run only one)",
    )
    run_parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: in-cluster, else $KUBECONFIG)")
    run_parser.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")
    run_parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="least severe log records written (default: %(default)s)",
    )
    run_parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text lines, or one JSON object per record for log collectors (default: %(default)s)",
    )
    run_parser.set_defaults(handler=cmd_run)

    config_schema_parser = commands.add_parser(
        "config-schema",
        help="print the JSON Schema of the config file (the Helm chart's values.schema.json embeds it)",
        description="Print the JSON Schema (draft 2020-12) of the file --config reads, generated from the"
        " operator's own config model. Editors and CI can validate a config with it before the operator does.",
        epilog="example:\n  fabriccap config-schema > fabriccap-config.schema.json\n"
        "  # then, in an editor with yaml-language-server:\n"
        "  # yaml-language-server: $schema=fabriccap-config.schema.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    config_schema_parser.set_defaults(handler=cmd_config_schema)

    demo_parser = commands.add_parser("demo", help="local control plane + simulated EKS cluster + operator")
    demo_parser.add_argument("--keep-running", action="store_true", help="leave everything up for exploration")
    demo_parser.add_argument("--dir", metavar="DIR", help="control-plane directory (default: a temp dir)")
    demo_parser.add_argument(
        "--real-nodes",
        action="store_true",
        help="one pool's counts come from two real kubelets and the test EFA device plugin (root only)",
    )
    demo_parser.set_defaults(handler=cmd_demo)

    controlplane_parser = commands.add_parser("controlplane", help="a local etcd + kube-apiserver (+ real nodes)")
    controlplane_parser.add_argument("action", choices=("up", "down"))
    controlplane_parser.add_argument("--dir", metavar="DIR", help="state directory (default: ./.fabriccap-cp)")
    controlplane_parser.add_argument(
        "--nodes",
        type=_node_count,
        default=0,
        metavar="N",
        help="also run kube-controller-manager, kube-scheduler and N real kubelets, each with its own"
        " containerd (root only; about 150 MiB each)",
    )
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
