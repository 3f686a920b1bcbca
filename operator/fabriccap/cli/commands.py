"""Command line: ``fabriccap evaluate | explain | transport | run | config-schema | completion | demo``.

``demo`` belongs to the development tools (``fabriccap_devtools``), which a checkout's editable
install provides and the wheel and the image leave out: the product never imports them, it
hands the command over by name when they are there (``cmd_demo``), and says in one line how to
run the demo when they are not.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import importlib
import importlib.util
import ipaddress
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from fabriccap import __version__
from fabriccap.configfile import MAX_CONFIG_BYTES, load_config
from fabriccap.core.config import Config, ConfigError, default_config
from fabriccap.core.explain import ExplainError
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.index import FactIndex
from fabriccap.core.quantity import parse_quantity
from fabriccap.core.references import OncePerCause
from fabriccap.core.text import escape_controls
from fabriccap.core.transport import SIGNATURES, signature_for
from fabriccap.core.workload_explain import WorkloadExplainError, explain_workload
from fabriccap.core.workload_kinds import WorkloadKind
from fabriccap.inputfile import bounded_line, size_text
from fabriccap.kube.errors import KubeError
from fabriccap.kube.kinds import WATCHED_KINDS, snapshot_kubectl, snapshot_leave_out
from fabriccap.offline.explain import (
    EXPLAIN_OUTPUTS,
    explain,
    explain_live,
    explain_workload_live,
    format_explain_output,
)
from fabriccap.offline.pipeline import (
    NO_LOGS_IN_A_SNAPSHOT,
    all_ready,
    evaluate_facts,
    evaluation_objects,
    live_facts,
)
from fabriccap.offline.render import NO_RESOURCES, OUTPUTS, TABLE_OUTPUTS, WIDE_COLUMNS, format_output
from fabriccap.offline.snapshot import DEFAULT_MAX_INPUT_BYTES, SnapshotError, load_snapshots
from fabriccap.offline.transport import (
    DEFAULT_MAX_LOG_BYTES,
    TRANSPORT_OUTPUTS,
    LogInputError,
    format_transport_output,
    passes,
    read_logs,
)
from fabriccap.offline.workload_explain import (
    WorkloadQueryError,
    format_workload_explanation,
    matches,
    parse_workload_query,
)

EXIT_OK, EXIT_NOT_READY, EXIT_USAGE = 0, 1, 2
CONFIG_FILE_KIND = f"a file or a pipe of at most {size_text(MAX_CONFIG_BYTES)}"
# The kinds evaluate, explain and run read, as the help names them: from the one table of them.
READ_KINDS = ", ".join(watched.kind for watched in WATCHED_KINDS)

DESCRIPTION = """\
fabriccap tells, per node pool, whether the pool's nodes really advertise a high-speed fabric
(AWS EFA, AKS RDMA) uniformly: one FabricCapability object per (fabric, pool), with Ready as
the flip criterion for enabling fabric wiring, plus Prometheus metrics and Events."""

DEMO_EXAMPLE = "  fabriccap demo                                   # a local cluster, the operator, every outcome\n"
EPILOG = """\
examples:
{demo}  {snapshot} > cluster.json
  fabriccap evaluate -f cluster.json               # what the operator would publish
  fabriccap explain p5-training -f cluster.json    # one pool, node by node
  fabriccap run --config config.yaml               # the operator (in a pod: in-cluster credentials)

'fabriccap COMMAND --help' describes a command and its flags."""


class CommandParser(argparse.ArgumentParser):
    """argparse, but usage errors follow the project's one-line ``error: …`` convention and
    point at the help of the command that was being parsed."""

    def error(self, message: str) -> NoReturn:
        hint = f" (see '{self.prog} --help')"
        self.exit(EXIT_USAGE, f"error: {bounded_line(message + hint)}\n")


def _command_parser(
    commands: argparse._SubParsersAction[CommandParser],
    name: str,
    summary: str,
    description: str,
    example: str,
    *,
    listed: bool = True,
) -> CommandParser:
    """One command. Without ``listed`` it still parses, but ``--help`` and completion leave it out
    (argparse lists a command only when it is given a ``help``)."""
    settings: dict[str, Any] = {
        "description": description,
        "epilog": f"example{'s' if example.count(chr(10)) else ''}:\n{example}",
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }
    if listed:
        settings["help"] = summary
    return commands.add_parser(name, **settings)


def _input_size(text: str) -> int:
    try:
        size = parse_quantity(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (use e.g. 512Mi or 2Gi)") from None
    if size <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive size")
    return size


def _fail(message: str) -> int:
    # The message may quote an input (a name in a snapshot): shown, never obeyed by the
    # terminal, and cut to one bounded line.
    print(f"error: {bounded_line(escape_controls(message))}", file=sys.stderr)
    return EXIT_USAGE


class _LowercaseLevel(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return escape_controls(f"{record.levelname.lower()}: {record.getMessage()}")


def _log_to_stderr() -> None:
    """Warnings (a ResourceSlice left out, a kind not served) as ``warning: …`` lines on stderr,
    beside the output, like the ``error: …`` lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LowercaseLevel())
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)


def _read_input(args: argparse.Namespace, logs: bool = False) -> tuple[Config, FactIndex]:
    """The config and the facts: from ``-f`` snapshots, else one read of the live cluster (with
    ``logs``, the pods' logs the operator reads too, transport on). Raises ConfigError,
    SnapshotError or KubeError with a message naming what failed."""
    config = load_config(args.config)
    # An owner reference naming no possible object: one `warning:` line per cause.
    extractor = FactsExtractor(config, on_refused=OncePerCause(logging.getLogger("fabriccap.references").warning))
    if args.files:
        return config, load_snapshots(args.files, extractor, max_input_bytes=args.max_input_size)
    return config, asyncio.run(live_facts(extractor, args.kubeconfig, args.context, lookups=True, logs=logs))


def cmd_evaluate(args: argparse.Namespace) -> int:
    _log_to_stderr()
    try:
        config, facts = _read_input(args, logs=True)
    except (ConfigError, SnapshotError, KubeError) as error:
        return _fail(str(error))
    # A snapshot holds no logs: its transport counts would read as an answer (0 sockets).
    logs_missing = config.transport.enabled and bool(args.files)
    if logs_missing:
        logging.getLogger(__name__).warning("%s", NO_LOGS_IN_A_SNAPSHOT)
    evaluation = evaluate_facts(config, facts)
    objects = evaluation_objects(evaluation, logs=not logs_missing)
    text = format_output(objects, args.output)
    if text:  # -o name of nothing prints nothing, as kubectl does
        print(text)
    elif not objects and args.output in TABLE_OUTPUTS:
        print(NO_RESOURCES, file=sys.stderr)
    if args.require_ready:
        return EXIT_OK if all_ready(evaluation) else EXIT_NOT_READY
    return EXIT_OK


def _explain_workload(args: argparse.Namespace, kind: WorkloadKind, namespace: str, name: str) -> int:
    """``explain KIND/NAMESPACE/NAME``: the object from the snapshots, or one GET of it (live, with
    transport on, its pods' logs are read too)."""
    kept: list[Mapping[str, Any]] = []
    try:
        config = load_config(args.config)
        extractor = FactsExtractor(config, on_refused=OncePerCause(logging.getLogger("fabriccap.references").warning))
        if args.files:
            held: set[tuple[str, str, str]] = set()
            keep = matches(kind, namespace, name, held)
            facts = load_snapshots(args.files, extractor, max_input_bytes=args.max_input_size, keep=keep, kept=kept)
            if not kept:
                raise WorkloadQueryError(f"no {kind.kind} ({kind.api_version}) {namespace}/{name} in the snapshots")
            explanation = explain_workload(config, evaluate_facts(config, facts), facts, kept[-1], held)
        else:
            found = asyncio.run(
                explain_workload_live(config, extractor, kind, namespace, name, args.kubeconfig, args.context)
            )
            if found is None:
                raise WorkloadQueryError(f"no {kind.kind} ({kind.api_version}) {namespace}/{name} in the cluster")
            explanation = found
    except (ConfigError, SnapshotError, KubeError, WorkloadQueryError, WorkloadExplainError) as error:
        return _fail(str(error))
    print(format_workload_explanation(explanation, args.output))
    if args.require_ready:
        return EXIT_OK if explanation.ready else EXIT_NOT_READY
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    _log_to_stderr()
    try:
        workload = parse_workload_query(args.target)
    except WorkloadQueryError as error:
        return _fail(str(error))
    if workload is not None:
        return _explain_workload(args, *workload)
    try:
        if args.files:
            config, facts = _read_input(args)
            explanation = explain(config, facts, args.target)
        else:
            config = load_config(args.config)
            explanation = asyncio.run(
                explain_live(config, FactsExtractor(config), args.target, args.kubeconfig, args.context)
            )
    except (ConfigError, SnapshotError, KubeError, ExplainError) as error:
        return _fail(str(error))
    print(format_explain_output(explanation, args.output))
    if args.require_ready:
        return EXIT_OK if explanation.status.is_ready else EXIT_NOT_READY
    return EXIT_OK


def cmd_transport(args: argparse.Namespace) -> int:
    files = args.files
    if not files:
        if sys.stdin is None or sys.stdin.isatty():
            return _fail(
                "no log to read: pass -f FILE, or pipe the log in (kubectl logs job/NAME | fabriccap transport)"
            )
        files = ["-"]
    fabric = args.fabric or default_config().enabled_fabrics[0].name
    try:
        report = read_logs(files, signature_for(fabric), sys.stdin.buffer, limit=args.max_input_size)
    except LogInputError as error:
        return _fail(str(error))
    print(format_transport_output(report, args.output))
    return EXIT_OK if passes(report) else EXIT_NOT_READY


def cmd_run(args: argparse.Namespace) -> int:
    from fabriccap.controller.main import run_operator

    return run_operator(args)


DEVTOOLS = "fabriccap_devtools"
DEMO_FROM_A_CHECKOUT = (
    "the demo needs the development tools, which this installation leaves out:"
    " run `make demo` in a checkout of the repository"
)


def _devtools_installed() -> bool:
    """Whether the development tools are importable here: finding them imports nothing."""
    return importlib.util.find_spec(DEVTOOLS) is not None


def cmd_demo(args: argparse.Namespace) -> int:
    # By name, not by an import statement: the product does not depend on its test bench
    # (import-linter's contract), it only hands the command over where a checkout installed it.
    try:
        demo = importlib.import_module(f"{DEVTOOLS}.demo")
    except ModuleNotFoundError as error:
        if error.name is not None and error.name.partition(".")[0] == DEVTOOLS:
            return _fail(DEMO_FROM_A_CHECKOUT)
        return _fail(f"the development tools need {error.name}: run scripts/bootstrap.sh")
    return int(demo.run_demo(args))


def cmd_config_schema(args: argparse.Namespace) -> int:
    import json

    from fabriccap.core.config import config_input_schema

    print(json.dumps(config_input_schema(), indent=2))
    return EXIT_OK


def cmd_completion(args: argparse.Namespace) -> int:
    from fabriccap.cli.completion import SCRIPTS

    print(SCRIPTS[args.shell](build_parser()), end="")
    return EXIT_OK


def _add_cluster_flags(parser: argparse.ArgumentParser) -> None:
    """``--kubeconfig`` and ``--context``, as kubectl spells them."""
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig file of the cluster (default: in a pod, its service account; else $KUBECONFIG, "
        "else ~/.kube/config)",
    )
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context to use (default: the current context)")


def _add_input_flags(parser: argparse.ArgumentParser) -> None:
    """What ``evaluate`` and ``explain`` read: snapshots or the live cluster, and the config."""
    parser.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        default=[],
        metavar="FILE",
        help="snapshot to read instead of the live cluster: JSON or YAML, a v1 List or single objects "
        f"({READ_KINDS}; also the owners of pods, such as Jobs and JobSets, and ResourceClaimTemplates; "
        "other kinds are ignored); repeatable; - for stdin (default: none, read the live cluster)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help=f"operator configuration file, as 'fabriccap run' reads it: {CONFIG_FILE_KIND} (default: built-in)",
    )
    parser.add_argument(
        "--max-input-size",
        type=_input_size,
        default=DEFAULT_MAX_INPUT_BYTES,
        metavar="SIZE",
        help="refuse an input file larger than SIZE, a Kubernetes quantity such as 512Mi or 2Gi (default: 512Mi)",
    )
    _add_cluster_flags(parser)


def bind_address(text: str) -> str:
    """An IP address to listen on, IPv6 in brackets or not (``[::]``, ``::``); no host name, whose
    addresses could be of either family. argparse shows the ValueError as an invalid value."""
    return str(ipaddress.ip_address(text.removeprefix("[").removesuffix("]")))


def build_parser(prog: str = "fabriccap") -> argparse.ArgumentParser:
    devtools = _devtools_installed()
    parser = CommandParser(
        prog=prog,
        description=DESCRIPTION,
        epilog=EPILOG.format(demo=DEMO_EXAMPLE if devtools else "", snapshot=snapshot_kubectl()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fabriccap {__version__}")
    commands = parser.add_subparsers(
        dest="command", required=True, parser_class=CommandParser, metavar="COMMAND", title="commands"
    )

    evaluate_parser = _command_parser(
        commands,
        "evaluate",
        "compute the FabricCapability objects once, from snapshots or the live cluster",
        "Compute the FabricCapability objects the operator would publish, once, with the operator's own\n"
        "evaluation. With transport on in the config, live, the logs the operator reads are read too\n"
        "(get on pods/log; bounded, what is left unread is said on stderr and stays unknown); a snapshot\n"
        "has no logs, so status.workloads.transport is left out.\n"
        "Exit codes: 0 done; 1 with --require-ready when no pool exists or one is not Ready;\n"
        "2 on a usage, input or config error (one 'error: ...' line on stderr, nothing on stdout).",
        f"  {snapshot_kubectl()} | fabriccap evaluate -f - -o wide\n"
        f"  # {snapshot_leave_out()}\n"
        "  fabriccap evaluate --context prod --require-ready -o name   # live; exit 1 unless all Ready",
    )
    _add_input_flags(evaluate_parser)
    evaluate_parser.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default="table",
        help=f"table (kubectl get's columns), wide (+{', '.join(WIDE_COLUMNS)}), json or yaml "
        "(a v1 List), name (fabriccapability.fabriccap.dev/NAME lines) (default: table)",
    )
    evaluate_parser.add_argument(
        "--require-ready",
        action="store_true",
        help="exit 1 unless at least one pool exists and all are Ready (default: off)",
    )
    evaluate_parser.set_defaults(handler=cmd_evaluate)

    explain_parser = _command_parser(
        commands,
        "explain",
        "show one pool node by node: counts, sources, plugin pods, and why a node is the odd one out",
        "Show one FabricCapability node by node: each target node's instance type and known maximum,\n"
        "capacity, allocatable, DRA devices, the count the evaluation uses and its source, the\n"
        "device-plugin (or DRA-driver) pod and its state, cordoned or not, the gap classes and the\n"
        "conditions it breaks, and why; then the pool's conditions and workloads. With transport on in\n"
        "the config, each pod that requests the fabric or an accelerator with what its NCCL chose and the\n"
        "line of its log that shows it (live, the pool's pods' logs are read first: get on pods/log).\n"
        "Given a workload (KIND/NAMESPACE/NAME, any kind of docs/workloads.md), show the pool it selects\n"
        "or runs on, what it requests, what the pool offers, and the exact change for its kind, or\n"
        "'nothing to change'.\n"
        "Same inputs and exit codes as 'fabriccap evaluate'.",
        "  fabriccap explain efa-p5-training                  # by name, live cluster\n"
        "  fabriccap explain p5-training -f cluster.json      # by pool value, from a snapshot\n"
        "  fabriccap explain karpenter.sh/nodepool=spot -o json --context prod\n"
        "  kubectl fabriccap explain trainjob/ml/bert         # a workload: what to change",
    )
    explain_parser.add_argument(
        "target",
        metavar="NAME|POOL|KIND/NAMESPACE/NAME",
        help="a FabricCapability name (fcap/NAME names only objects), a pool label value, KEY=VALUE "
        "for a pool of one pool label key, or a workload (trainjob/ml/bert, jobs.batch.volcano.sh/ml/x)",
    )
    _add_input_flags(explain_parser)
    explain_parser.add_argument(
        "-o",
        "--output",
        choices=EXPLAIN_OUTPUTS,
        default="table",
        help="table (a summary, one row per node, why, conditions, workloads) or json (default: table)",
    )
    explain_parser.add_argument(
        "--require-ready", action="store_true", help="exit 1 unless the pool is Ready (default: off)"
    )
    explain_parser.set_defaults(handler=cmd_explain)

    transport_parser = _command_parser(
        commands,
        "transport",
        "read NCCL logs: did the job's NCCL use the fabric, or fall back to sockets?",
        "Read NCCL's own log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET) and tell, per host and rank,\n"
        "which network NCCL used: fabric (EFA: the OFI plugin over provider efa; RDMA profiles: IB),\n"
        "socket, other, none (one node) or unknown, each with the line that shows it. The job's verdict\n"
        "is the first of socket, other, fabric, none that any rank shows. Exit codes: 0 when the job's\n"
        "verdict is fabric or none; 1 otherwise; 2 on unreadable input (one 'error: ...' line on stderr,\n"
        "nothing on stdout). docs/transport.md lists the rules.",
        "  kubectl logs job/train | fabriccap transport -f -\n"
        "  fabriccap transport -f worker-0.log -f worker-1.log -o json --fabric efa",
    )
    transport_parser.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        default=[],
        metavar="FILE",
        help="NCCL log to read, repeatable; - for standard input (default: standard input when it is not a terminal)",
    )
    transport_parser.add_argument(
        "-o",
        "--output",
        choices=TRANSPORT_OUTPUTS,
        default="table",
        help="table (the job's verdict, then one row per host and rank) or json (default: table)",
    )
    transport_parser.add_argument(
        "--fabric",
        choices=tuple(SIGNATURES),
        metavar="NAME",
        help=f"the fabric profile whose network counts as the fabric: {', '.join(SIGNATURES)} "
        "(default: the first enabled profile of the built-in configuration, efa)",
    )
    transport_parser.add_argument(
        "--max-input-size",
        type=_input_size,
        default=DEFAULT_MAX_LOG_BYTES,
        metavar="SIZE",
        help="refuse a log larger than SIZE, a Kubernetes quantity such as 512Mi or 4Gi (default: 1Gi)",
    )
    transport_parser.set_defaults(handler=cmd_transport)

    run_parser = _command_parser(
        commands,
        "run",
        "run the operator",
        "Run the operator: watch those of the kinds the config uses of\n"
        f"{READ_KINDS},\n"
        "read the owners of pods, and publish the FabricCapability objects, their Events and\n"
        "/metrics. Replicas elect a leader on a Lease unless --standalone.\n"
        "An invalid --config exits 2 before touching the cluster.",
        "  fabriccap run --config config.yaml --kubeconfig ~/.kube/config --context dev --standalone",
    )
    run_parser.add_argument(
        "--config", metavar="FILE", help=f"configuration file: {CONFIG_FILE_KIND} (default: built-in)"
    )
    run_parser.add_argument(
        "--metrics-port", type=int, default=8080, metavar="N", help="port of /metrics; 0 turns it off (default: 8080)"
    )
    run_parser.add_argument(
        "--health-port",
        type=int,
        default=8081,
        metavar="N",
        help="port of /healthz and /readyz; 0 turns it off (default: 8081)",
    )
    run_parser.add_argument(
        "--metrics-bind-address",
        metavar="ADDR",
        type=bind_address,
        help="IP address /metrics listens on (default: in a pod, where Prometheus scrapes the pod IP, :: (IPv4 "
        "and IPv6), or 0.0.0.0 without IPv6; 127.0.0.1 elsewhere)",
    )
    run_parser.add_argument(
        "--health-bind-address",
        metavar="ADDR",
        type=bind_address,
        help="IP address /healthz listens on (default: in a pod, for the kubelet's probes, :: (IPv4 and IPv6), "
        "or 0.0.0.0 without IPv6; 127.0.0.1 elsewhere)",
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
        help="skip leader election: this replica writes without holding the Lease; run only one (default: off)",
    )
    run_parser.add_argument(
        "--shards",
        type=int,
        default=1,
        metavar="N",
        help="split the pools between N shards, each run with its own --shard and Lease (default: 1, no split)",
    )
    run_parser.add_argument(
        "--shard",
        type=int,
        default=0,
        metavar="I",
        help="the shard this replica is, 0 to N-1: it answers for the pools whose value hashes to I (default: 0)",
    )
    _add_cluster_flags(run_parser)
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
        help=(
            "text lines (one per record: control characters in it are escaped), or one JSON object per"
            " record for log collectors (default: %(default)s)"
        ),
    )
    run_parser.set_defaults(handler=cmd_run)

    config_schema_parser = _command_parser(
        commands,
        "config-schema",
        "print the JSON Schema of the config file (the Helm chart's values.schema.json embeds it)",
        "Print the JSON Schema (draft 2020-12) of the file --config reads, generated from the operator's\n"
        "own config model. Editors and CI can validate a config with it before the operator does.",
        "  fabriccap config-schema > fabriccap-config.schema.json\n"
        "  # then, in an editor with yaml-language-server:\n"
        "  # yaml-language-server: $schema=fabriccap-config.schema.json",
    )
    config_schema_parser.set_defaults(handler=cmd_config_schema)

    # Listed only where the development tools are installed (a checkout): in the image it would
    # only print how to run it from a checkout.
    demo_parser = _command_parser(
        commands,
        "demo",
        "local control plane + simulated EKS cluster + operator (a checkout's development tools)",
        "Start a local etcd + kube-apiserver, load a simulated EKS cluster (pools showing each outcome,\n"
        "a DRA pool), run the operator against it with /metrics on 127.0.0.1, and show 'kubectl get fcap'\n"
        "as one pool turns Ready. Everything stops and its directory goes away at the end, unless\n"
        "--keep-running. Needs the development tools of a checkout (make demo installs them).",
        "  fabriccap demo --keep-running    # then: fabriccap-dev controlplane down --dir DIR",
        listed=devtools,
    )
    demo_parser.add_argument(
        "--keep-running",
        action="store_true",
        help="leave the control plane and the operator up for exploration (default: off)",
    )
    demo_parser.add_argument(
        "--dir", metavar="DIR", help="control-plane directory, kept afterwards (default: a temp dir, removed)"
    )
    demo_parser.add_argument(
        "--real-nodes",
        action="store_true",
        help="one pool's counts come from two real kubelets and the test EFA device plugin (root only; default: off)",
    )
    demo_parser.set_defaults(handler=cmd_demo)

    completion_parser = _command_parser(
        commands,
        "completion",
        "print a shell completion script (bash or zsh)",
        "Print a completion script for fabriccap's commands, flags and flag values, generated from\n"
        "this parser. Load it in the current shell, or install it where the shell looks for one.",
        "  source <(fabriccap completion bash)     # bash, this shell; or into ~/.bashrc\n"
        '  fabriccap completion zsh > "${fpath[1]}/_fabriccap"   # zsh, then start a new shell',
    )
    completion_parser.add_argument("shell", choices=("bash", "zsh"), help="the shell to complete in")
    completion_parser.set_defaults(handler=cmd_completion)
    return parser


def _subcommand_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def listed_commands(parser: argparse.ArgumentParser) -> list[str]:
    """The commands ``--help`` lists, in its order (``demo`` is left out without the dev tools)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return [choice.dest for choice in action._choices_actions]
    return []


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, but an unknown flag is reported by the command it was given to
    (argparse leaves it for the top-level parser, whose help would not list the command's flags),
    and a mistyped command gets a suggestion."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    commands = _subcommand_parsers(parser)
    if arguments and not arguments[0].startswith("-") and arguments[0] not in commands:
        listed = listed_commands(parser)
        close = difflib.get_close_matches(arguments[0], listed, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f" (choose from {', '.join(listed)})"
        parser.error(f"invalid choice: {arguments[0]!r}{hint}")
    args, unknown = parser.parse_known_args(arguments)
    if unknown:
        owner = commands.get(getattr(args, "command", None) or "", parser)
        owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


KUBECTL_PLUGIN_PROG = "kubectl fabriccap"


def main(argv: Sequence[str] | None = None, prog: str = "fabriccap") -> int:
    args = parse_args(build_parser(prog), argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


def kubectl_main(argv: Sequence[str] | None = None) -> int:
    """``kubectl-fabriccap``: the same command as a kubectl plugin (kubectl runs any
    ``kubectl-NAME`` on the PATH for ``kubectl NAME``), whose help says how it is called."""
    return main(argv, prog=KUBECTL_PLUGIN_PROG)


if __name__ == "__main__":
    sys.exit(main())
