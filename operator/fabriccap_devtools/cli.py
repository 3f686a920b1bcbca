"""``fabriccap-dev``: the development tools' own command (docs/reference/command-line.md).

    fabriccap-dev controlplane up [--dir DIR] [--nodes N]   # etcd + kube-apiserver (+ real nodes)
        [--feature-gates GATES]                           # e.g. DRAExtendedResource=true
    fabriccap-dev controlplane down [--dir DIR]
    fabriccap-dev generate [--check]                        # make generate
    fabriccap-dev catalog [--check]                         # the EFA instance catalog (Go module cache)

Installed with the dev tools by the checkout's editable install, never with the wheel (also
``python -m fabriccap_devtools``). Usage
errors follow the product's one-line ``error: …`` convention: the parser is the product's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from fabriccap.cli.commands import CommandParser, parse_args

DEFAULT_DIR = Path(".fabriccap-cp")
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


def cmd_controlplane(args: argparse.Namespace) -> int:
    # Imported here: `fabriccap-dev generate` needs neither the PKI (cryptography) nor the binaries.
    from fabriccap_devtools.controlplane.binaries import BinaryError
    from fabriccap_devtools.controlplane.cluster import ControlPlaneError, down, up

    directory = Path(args.dir or DEFAULT_DIR).resolve()
    try:
        if args.action == "up":
            gates = [gate for gate in (args.feature_gates or "").split(",") if gate]
            info = up(directory, nodes=args.nodes, feature_gates=gates)
            nodes = f" with node(s) {', '.join(info.nodes)}" if info.nodes else ""
            # stdout carries only the line to `eval`; everything else goes to stderr.
            stop = f"fabriccap-dev controlplane down --dir {directory}"
            print(f"control plane ready at {info.server}{nodes} (stop: {stop})", file=sys.stderr)
            print(info.export_line)
        else:
            # Stops whatever was recorded too: the operator of a demo left running, say.
            down(directory)
    except (ControlPlaneError, BinaryError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from fabriccap_devtools.generate import stale_files, write_all

    if args.check:
        stale = stale_files()
        for entry in stale:
            print(f"stale: {entry.relative} (from {entry.source}); run `make generate`")
        return 1 if stale else 0
    for entry in write_all():
        print(f"wrote {entry.relative}")
    return 0


def cmd_catalog(args: argparse.Namespace) -> int:
    from fabriccap_devtools.catalog import CATALOG, CatalogSourceError, download_module, generate

    try:
        text = generate(download_module())
    except CatalogSourceError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    current = CATALOG.read_text(encoding="utf-8") if CATALOG.exists() else None
    if args.check:
        if current != text:
            print(f"stale: {CATALOG} differs from a regeneration; run `fabriccap-dev catalog`")
            return 1
        return 0
    if current != text:
        CATALOG.parent.mkdir(parents=True, exist_ok=True)
        CATALOG.write_text(text, encoding="utf-8")
        print(f"wrote {CATALOG}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="fabriccap-dev",
        description="fabriccap's development tools: the local control plane and the generated files. A checkout's\n"
        "editable install (make demo, make test) provides them; the wheel and the operator image do not.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(
        dest="command", required=True, parser_class=CommandParser, metavar="COMMAND", title="commands"
    )

    controlplane = commands.add_parser(
        "controlplane",
        help="a local etcd + kube-apiserver (+ real nodes)",
        description="Start (up) or stop (down) a local etcd + kube-apiserver that outlives the shell; with --nodes,\n"
        "also kube-controller-manager, kube-scheduler and real kubelets. 'up' prints the line to eval\n"
        "(export KUBECONFIG=...) on stdout.",
        epilog='examples:\n  eval "$(fabriccap-dev controlplane up --dir /tmp/cp)" && kubectl get nodes\n'
        "  fabriccap-dev controlplane down --dir /tmp/cp",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    controlplane.add_argument("action", choices=("up", "down"), help="start or stop it")
    controlplane.add_argument("--dir", metavar="DIR", help=f"state directory (default: ./{DEFAULT_DIR})")
    controlplane.add_argument(
        "--nodes",
        type=_node_count,
        default=0,
        metavar="N",
        help="also run kube-controller-manager, kube-scheduler and N real kubelets, each with its own"
        " containerd (root only; about 150 MiB each; default: 0)",
    )
    controlplane.add_argument(
        "--feature-gates",
        metavar="GATES",
        help="Kubernetes feature gates for kube-apiserver (and kube-scheduler and kube-controller-manager"
        " with --nodes), e.g. DRAExtendedResource=true (KEP-5004, alpha in v1.35)",
    )
    controlplane.set_defaults(handler=cmd_controlplane)

    generate = commands.add_parser(
        "generate",
        help="write every generated or copied file of the repository (make generate)",
        description="Write every generated or copied file that differs from what its generator makes now.",
    )
    generate.add_argument("--check", action="store_true", help="only list stale files; exit 1 if any")
    generate.set_defaults(handler=cmd_generate)

    catalog = commands.add_parser(
        "catalog",
        help="regenerate the EFA instance catalog from Karpenter's AWS provider module",
        description="Regenerate operator/fabriccap/data/efa-catalog.json from github.com/aws/karpenter-provider-aws\n"
        "(pkg/providers/drametadata, the pinned version) in the Go module cache, downloading it through\n"
        "the Go module proxy when missing, and the checked-in supplement.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    catalog.add_argument("--check", action="store_true", help="only compare with the checked-in file; exit 1 if stale")
    catalog.set_defaults(handler=cmd_catalog)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return 130
