"""The command line as a user meets it: written help, defaults, examples, errors that point at
the right help, and cluster flags on every command that talks to a cluster.

Every check walks the parser, so a flag or a command added later is held to the same rules.
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from fabriccap.cli import commands as cli
from fabriccap.cli.commands import build_parser, main
from support.cli import assert_one_line_error, run

PARSER = build_parser()
COMMANDS: dict[str, argparse.ArgumentParser] = cli._subcommand_parsers(PARSER)
# The commands that read or run against a user's cluster (demo starts its own).
CLUSTER_COMMANDS = ("evaluate", "explain", "run")


def _optionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        action for action in parser._actions if action.option_strings and not isinstance(action, argparse._HelpAction)
    ]


def test_the_top_level_help_is_written_help_listing_every_command() -> None:
    text = PARSER.format_help()
    assert cli.__doc__ is not None and cli.__doc__.strip() not in text
    assert "high-speed fabric" in text and "examples:" in text
    for name in COMMANDS:
        assert f"\n    {name} " in text or f"\n    {name}\n" in text, name


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_flag_says_what_it_does_and_its_default(name: str) -> None:
    parser = COMMANDS[name]
    for action in _optionals(parser):
        assert action.help, f"{name} {action.option_strings}: no help"
        assert "default" in action.help, f"{name} {action.option_strings}: no default in {action.help!r}"
    for action in parser._actions:
        if not action.option_strings:
            assert action.help, f"{name} {action.dest}: no help"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_has_a_description_and_an_example(name: str) -> None:
    parser = COMMANDS[name]
    assert parser.description and len(parser.description) > 40
    assert parser.epilog and parser.epilog.startswith("example")
    assert f"fabriccap {name}" in parser.epilog
    help_text = parser.format_help()
    # The epilog keeps its lines (examples are commands to copy).
    assert parser.epilog.splitlines()[1] in help_text


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_mistyped_flag_points_at_the_commands_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    positionals = {"explain": ["p5"], "completion": ["bash"]}
    result = run([name, *positionals.get(name, []), "--no-such-flag"], capsys)
    assert_one_line_error(result, "unrecognized arguments: --no-such-flag", f"(see 'fabriccap {name} --help')")


def test_a_bad_flag_value_points_at_the_commands_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(run(["evaluate", "--max-input-size", "lots"], capsys), "(see 'fabriccap evaluate --help')")


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["evalute"], ["invalid choice: 'evalute'; did you mean 'evaluate'?", "(see 'fabriccap --help')"]),
        (["frobnicate"], ["invalid choice: 'frobnicate' (choose from evaluate, explain,"]),
        ([], ["required", "(see 'fabriccap --help')"]),
    ],
)
def test_command_errors_point_at_the_top_level_help(
    argv: list[str], fragments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert_one_line_error(run(argv, capsys), *fragments)


@pytest.mark.parametrize("name", CLUSTER_COMMANDS)
def test_commands_that_talk_to_a_cluster_take_kubeconfig_and_context(name: str) -> None:
    flags = {flag for action in _optionals(COMMANDS[name]) for flag in action.option_strings}
    assert {"--kubeconfig", "--context"} <= flags


def test_run_passes_kubeconfig_and_context_to_the_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    def fake_run_operator(args: argparse.Namespace) -> int:
        seen.append((args.kubeconfig, args.context))
        return 0

    monkeypatch.setattr("fabriccap.controller.main.run_operator", fake_run_operator)
    assert main(["run", "--kubeconfig", "/k", "--context", "dev"]) == 0
    assert seen == [("/k", "dev")]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.startswith("fabriccap ")


def test_as_a_kubectl_plugin_the_help_says_kubectl_fabriccap(capsys: pytest.CaptureFixture[str]) -> None:
    """`kubectl fabriccap explain ...` runs `kubectl-fabriccap explain ...`: the same commands,
    whose usage lines name what the user typed."""
    with pytest.raises(SystemExit) as exit_info:
        cli.kubectl_main(["explain", "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: kubectl fabriccap explain ")


def _help_of(command: str, dest: str) -> str:
    action = next(action for action in COMMANDS[command]._actions if action.dest == dest)
    return " ".join((action.help or "").split())


def test_the_help_names_every_kind_read_and_every_wide_column() -> None:
    # Review 64-cli F6: the help named four kinds and four wide columns of ten and six.
    from fabriccap.kube.kinds import WATCHED_KINDS
    from fabriccap.offline.render import WIDE_COLUMNS

    for command in ("evaluate", "explain"):
        files = _help_of(command, "files")
        assert all(watched.kind in files for watched in WATCHED_KINDS), files
        assert "owners of pods" in files
    run_description = " ".join((COMMANDS["run"].description or "").split())
    assert all(watched.kind in run_description for watched in WATCHED_KINDS), run_description
    assert f"wide (+{', '.join(WIDE_COLUMNS)})" in _help_of("evaluate", "output")
