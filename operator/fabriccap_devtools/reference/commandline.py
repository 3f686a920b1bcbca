"""docs/reference/command-line.md: every command and flag, from ``fabriccap.cli.commands.build_parser()``
and, for the development tools' ``fabriccap-dev``, ``fabriccap_devtools.cli.build_parser()``.

The parser is walked as argparse holds it: each (sub)command's help, description, usage and
epilog, and each argument's flags, value, choices, default and help. A command or flag added
to the parser appears here at ``make generate``. Usage lines are formatted at a fixed width so
the page does not depend on the terminal that ran the generator.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from fabriccap.cli.commands import build_parser
from fabriccap_devtools.cli import build_parser as build_devtools_parser
from fabriccap_devtools.reference.markdown import code, fenced, header, slug, table

SOURCE = "operator/fabriccap/cli/commands.py and operator/fabriccap_devtools/cli.py"
USAGE_WIDTH = 100


@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]  # ("fabriccap", "evaluate")
    parser: argparse.ArgumentParser
    help: str  # the one line the parent's --help shows

    @property
    def name(self) -> str:
        return " ".join(self.path)


@contextmanager
def _fixed_width() -> Iterator[None]:
    """argparse sizes its output to $COLUMNS; the page must not."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(USAGE_WIDTH + 2)  # argparse keeps 2 columns of margin
    try:
        yield
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) in seen:  # an alias of a command already listed
                    continue
                seen.add(id(child))
                found.append((name, child, helps.get(name, "")))
    return found


def commands(
    parser: argparse.ArgumentParser | None = None, path: tuple[str, ...] = (), help: str = ""
) -> list[Command]:
    """The parser and every subcommand below it, depth first, in the order they were added."""
    parser = parser or build_parser()
    path = path or (parser.prog,)
    found = [Command(path, parser, help)]
    for name, child, child_help in _subcommands(parser):
        found += commands(child, (*path, name), child_help)
    return found


def expanded_help(action: argparse.Action, prog: str) -> str:
    """An argument's help with argparse's ``%(default)s``-style fields filled in, as --help shows it."""
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    params = {key: value for key, value in vars(action).items() if value is not argparse.SUPPRESS}
    params["prog"] = prog
    for key in ("choices",):
        if params.get(key) is not None:
            params[key] = ", ".join(str(choice) for choice in params[key])
    return action.help % params


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return " | ".join(code(choice) for choice in action.choices)
    metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    return code(metavar)


def _default(action: argparse.Action, help_text: str) -> str:
    """The default, unless the help already says it (in words users type: 512Mi, not 536870912)."""
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], ()) or "default" in help_text:
        return ""
    return code(action.default)


def _arguments(command: Command) -> list[list[str]]:
    rows = []
    for action in command.parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        flags = ", ".join(code(flag) for flag in action.option_strings) or code(action.metavar or action.dest)
        repeat = " (repeatable)" if isinstance(action, argparse._AppendAction) else ""
        help_text = expanded_help(action, command.parser.prog)
        rows.append([flags + repeat, _value(action), _default(action, help_text), help_text])
    return rows


def paragraphs(text: str) -> str:
    """A description as markdown paragraphs: its blank lines kept, its line breaks inside one dropped."""
    blocks = [" ".join(block.split()) for block in re.split(r"\n\s*\n", text.strip())]
    return "".join(f"{block}\n\n" for block in blocks if block).removesuffix("\n")


def _section(command: Command) -> str:
    depth = min(len(command.path) + 1, 6)
    parser = command.parser
    with _fixed_width():
        usage = parser.format_usage().strip()
    parts = [f"{'#' * depth} `{command.name}`\n"]
    if command.help:
        sentence = command.help[0].upper() + command.help[1:]
        parts.append((sentence if sentence.endswith(".") else sentence + ".") + "\n")
    if parser.description:
        parts.append(paragraphs(parser.description))
    parts.append(fenced(usage, "text"))
    children = _subcommands(parser)
    if children:
        rows = [
            [f"[{code(f'{command.name} {name}')}](#{slug(f'{command.name} {name}')})", help]
            for name, _, help in children
        ]
        parts.append(table(["command", "what it does"], rows))
    arguments = _arguments(command)
    if arguments:
        parts.append(table(["argument", "value", "default", "meaning"], arguments))
    if parser.epilog:
        parts.append(fenced(parser.epilog, "text"))
    return "\n".join(parts)


def render() -> str:
    product, devtools = commands(), commands(build_devtools_parser())
    return (
        header("Command line", SOURCE)
        + "\nEvery command and flag of `fabriccap`, as `fabriccap COMMAND --help` describes them, then those of"
        " `fabriccap-dev`, the development tools' command (a checkout only). Every command also takes `-h` /"
        " `--help`.\n\n" + "\n".join(_section(command) for command in [*product, *devtools])
    )
