"""`fabriccap controlplane up|down [--dir DIR] [--nodes N]`: a local control plane that outlives the shell."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fabriccap.dev.controlplane.binaries import BinaryError
from fabriccap.dev.controlplane.cluster import ControlPlaneError, down, up

DEFAULT_DIR = Path(".fabriccap-cp")


def main(args: argparse.Namespace) -> int:
    directory = Path(args.dir or DEFAULT_DIR).resolve()
    try:
        if args.action == "up":
            info = up(directory, nodes=args.nodes)
            nodes = f" with node(s) {', '.join(info.nodes)}" if info.nodes else ""
            # stdout carries only the line to `eval`; everything else goes to stderr.
            print(
                f"control plane ready at {info.server}{nodes} (stop: fabriccap controlplane down --dir {directory})",
                file=sys.stderr,
            )
            print(info.export_line)
        else:
            # Stops whatever was recorded too: the operator of a demo left running, say.
            down(directory)
    except (ControlPlaneError, BinaryError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0
