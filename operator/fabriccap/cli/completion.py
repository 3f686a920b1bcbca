"""Shell completion scripts (bash, zsh) generated from the argparse parser itself.

The parser is the one source of truth for commands, flags and flag values: a flag added to
``cli/commands.py`` completes without touching this module. Scripts complete the commands
``--help`` lists, each command's flags, the values of flags with choices (``-o``), files for FILE
flags and directories for DIR flags, and positional choices (``completion bash|zsh``).
FabricCapability names are not completed: that would read the cluster on every <Tab>.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fabriccap import __version__

PROG = "fabriccap"
FILE_METAVARS = frozenset({"FILE"})
DIR_METAVARS = frozenset({"DIR"})
MAX_SUMMARY = 90


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    summary: str
    takes_value: bool
    choices: tuple[str, ...]
    metavar: str
    repeatable: bool

    @property
    def completes_files(self) -> bool:
        return self.metavar in FILE_METAVARS

    @property
    def completes_dirs(self) -> bool:
        return self.metavar in DIR_METAVARS


@dataclass(frozen=True)
class Positional:
    metavar: str
    summary: str
    choices: tuple[str, ...]


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    options: tuple[Option, ...]
    positionals: tuple[Positional, ...]

    @property
    def flags(self) -> tuple[str, ...]:
        return tuple(flag for option in self.options for flag in option.flags)


def _summary(action: argparse.Action) -> str:
    """The flag's help without its default, short enough for a completion menu: asides in
    parentheses go first, then what follows a ';', then words."""
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": PROG}
    text = re.sub(r"\s*\(default:[^)]*\)\s*$", "", " ".join(text.split()))
    if len(text) > MAX_SUMMARY:
        while (shorter := re.sub(r"\s*\([^()]*\)", "", text)) != text:
            text = shorter
    if len(text) > MAX_SUMMARY:
        text = text.split(";")[0].strip()
    if len(text) > MAX_SUMMARY:
        text = text[: MAX_SUMMARY - 1].rsplit(" ", 1)[0] + "…"
    return text


def _options(parser: argparse.ArgumentParser) -> tuple[Option, ...]:
    options = []
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
        options.append(
            Option(
                flags=tuple(action.option_strings),
                summary=_summary(action),
                takes_value=action.nargs != 0,
                choices=tuple(str(choice) for choice in action.choices or ()),
                metavar=metavar,
                repeatable=isinstance(action, argparse._AppendAction),
            )
        )
    return tuple(options)


def _positionals(parser: argparse.ArgumentParser) -> tuple[Positional, ...]:
    return tuple(
        Positional(
            metavar=action.metavar if isinstance(action.metavar, str) else action.dest,
            summary=_summary(action),
            choices=tuple(str(choice) for choice in action.choices or ()),
        )
        for action in parser._actions
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction)
    )


def commands_of(parser: argparse.ArgumentParser) -> tuple[Command, ...]:
    """Every subcommand ``--help`` lists, in its order (one it leaves out, such as ``demo``
    without the development tools, is not completed either)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return tuple(
                Command(
                    name=name,
                    summary=summaries[name],
                    options=_options(subparser),
                    positionals=_positionals(subparser),
                )
                for name, subparser in action.choices.items()
                if name in summaries
            )
    return ()


# ---------------------------------------------------------------------------------------------
# bash


def _words(words: Sequence[str]) -> str:
    return " ".join(words)


def _bash_command_case(command: Command) -> list[str]:
    lines = [f"        {command.name})", '            case "$prev" in']
    for option in command.options:
        if not option.takes_value:
            continue
        pattern = "|".join(option.flags)
        if option.choices:
            action = f'_fabriccap_reply "{_words(option.choices)}"'
        elif option.completes_files:
            action = "_fabriccap_files -f"
        elif option.completes_dirs:
            action = "_fabriccap_files -d"
        else:
            action = "COMPREPLY=()"  # a value nothing can be offered for (a number, a name)
        lines.append(f"                {pattern}) {action}; return 0 ;;")
    lines.append("            esac")
    choices = [choice for positional in command.positionals for choice in positional.choices]
    lines += [
        '            if [[ "$cur" == -* ]]; then',
        f'                _fabriccap_reply "{_words(command.flags)}"',
        "            else",
        f'                _fabriccap_reply "{_words(choices)}"',
        "            fi",
        "            ;;",
    ]
    return lines


def bash_script(parser: argparse.ArgumentParser) -> str:
    commands = commands_of(parser)
    top_flags = [flag for option in _options(parser) for flag in option.flags]
    lines = [
        f"# bash completion for {PROG} {__version__}, generated by '{PROG} completion bash'.",
        f"# Load it in this shell: source <({PROG} completion bash)",
        "",
        "_fabriccap_reply() {",
        '    mapfile -t COMPREPLY < <(compgen -W "$1" -- "$cur")',
        "}",
        "",
        "_fabriccap_files() {",
        '    mapfile -t COMPREPLY < <(compgen "$1" -- "$cur")',
        "    compopt -o filenames 2>/dev/null",
        "}",
        "",
        "_fabriccap_complete() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        "    # --flag=value: bash splits at '=', so the flag is one word further back.",
        '    if [[ "$cur" == "=" ]]; then',
        '        cur=""',
        '        prev="${COMP_WORDS[COMP_CWORD-1]}"',
        '    elif [[ "$prev" == "=" && COMP_CWORD -ge 2 ]]; then',
        '        prev="${COMP_WORDS[COMP_CWORD-2]}"',
        "    fi",
        '    local command="" index',
        "    for ((index = 1; index < COMP_CWORD; index++)); do",
        '        case "${COMP_WORDS[index]}" in',
        "            -*) ;;",
        '            *) command="${COMP_WORDS[index]}"; break ;;',
        "        esac",
        "    done",
        '    case "$command" in',
        '        "")',
        f'            _fabriccap_reply "{_words([*(command.name for command in commands), *top_flags])}"',
        "            ;;",
    ]
    for command in commands:
        lines += _bash_command_case(command)
    lines += [
        "        *) COMPREPLY=() ;;",
        "    esac",
        "    return 0",
        "}",
        "",
        f"complete -F _fabriccap_complete {PROG}",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# zsh


def _zsh_quoted(text: str) -> str:
    """``text`` inside single quotes."""
    return "'" + text.replace("'", "'\\''") + "'"


def _zsh_description(text: str) -> str:
    """Text for the [description] of an _arguments spec: brackets and backslashes escaped."""
    return re.sub(r"([\[\]\\])", r"\\\1", text)


def _zsh_message(text: str) -> str:
    """Text for the message field of an _arguments spec, where ':' would end the field."""
    return text.replace(":", " ").replace("\\", "")


def _zsh_option_spec(option: Option) -> str:
    exclusive = "" if option.repeatable else "(" + " ".join(option.flags) + ")"
    description = f"[{_zsh_description(option.summary)}]"
    value = ""
    if option.takes_value:
        if option.choices:
            action = "(" + " ".join(option.choices) + ")"
        elif option.completes_files:
            action = "_files"
        elif option.completes_dirs:
            action = "_files -/"
        else:
            action = " "
        value = f":{_zsh_message(option.metavar)}:{action}"
    if option.flags in (("-h", "--help"), ("--version",)):
        exclusive = "(- *)"  # alone on the line: nothing else completes after them
    star = "*" if option.repeatable else ""
    if len(option.flags) == 1:
        return _zsh_quoted(f"{exclusive}{star}{option.flags[0]}{description}{value}")
    # '(excl)'{-o,--output}'[desc]:msg:action': one spec per spelling, by brace expansion.
    return _zsh_quoted(f"{exclusive}{star}") + "{" + ",".join(option.flags) + "}" + _zsh_quoted(f"{description}{value}")


def _zsh_positional_spec(position: int, positional: Positional) -> str:
    action = "(" + " ".join(positional.choices) + ")" if positional.choices else " "
    return _zsh_quoted(f"{position}:{_zsh_message(positional.metavar)}:{action}")


def zsh_script(parser: argparse.ArgumentParser) -> str:
    commands = commands_of(parser)
    top = [_zsh_option_spec(option) for option in _options(parser)]
    lines = [
        f"#compdef {PROG}",
        f"# zsh completion for {PROG} {__version__}, generated by '{PROG} completion zsh'.",
        f"# Load it in this shell: source <({PROG} completion zsh)   (after compinit)",
        f"# or save it as _{PROG} in a directory of $fpath.",
        "",
        "_fabriccap() {",
        '  local curcontext="$curcontext" state line',
        "  typeset -A opt_args",
        "  _arguments -C \\",
        *(f"    {spec} \\" for spec in top),
        "    '1:command:->command' \\",
        "    '*::argument:->argument'",
        "  case $state in",
        "    command)",
        "      local -a commands",
        "      commands=(",
        *(f"        {_zsh_quoted(command.name + ':' + command.summary)}" for command in commands),
        "      )",
        "      _describe -t commands 'fabriccap command' commands",
        "      ;;",
        "    argument)",
        '      curcontext="${curcontext%:*:*}:fabriccap-$words[1]:"',
        "      case $words[1] in",
    ]
    for command in commands:
        specs = [_zsh_option_spec(option) for option in command.options]
        specs += [_zsh_positional_spec(index, item) for index, item in enumerate(command.positionals, start=1)]
        lines.append(f"        {command.name})")
        lines.append("          _arguments \\")
        lines += [f"            {spec} \\" for spec in specs[:-1]]
        lines.append(f"            {specs[-1]}")
        lines.append("          ;;")
    lines += [
        "      esac",
        "      ;;",
        "  esac",
        "}",
        "",
        "# Autoloaded from $fpath, this file is the function's body; sourced, it registers it.",
        'if [[ "$funcstack[1]" == "_fabriccap" ]]; then',
        '  _fabriccap "$@"',
        "else",
        f"  compdef _fabriccap {PROG}",
        "fi",
        "",
    ]
    return "\n".join(lines)


SCRIPTS: dict[str, Callable[[argparse.ArgumentParser], str]] = {"bash": bash_script, "zsh": zsh_script}
