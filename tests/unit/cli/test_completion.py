"""``fabriccap completion bash|zsh``: the scripts, loaded into the real shells.

bash: the script is sourced and its completion function driven the way readline drives it
(COMP_WORDS/COMP_CWORD), and ``complete -p`` shows it registered. zsh: syntax (``zsh -n``),
registration with compinit, and a completion typed into an interactive zsh on a pseudo-terminal
(zsh/zpty). What each completion must offer is read from the parser, not written here.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fabriccap.cli import commands as cli
from fabriccap.cli.completion import bash_script, commands_of, zsh_script

PARSER = cli.build_parser()
COMMANDS = {command.name: command for command in commands_of(PARSER)}
SHELL_TIMEOUT = 30


def _script(shell: str, tmp_path: Path) -> Path:
    result = subprocess.run(
        [sys.executable, "-m", "fabriccap", "completion", shell],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stderr == ""
    path = tmp_path / f"fabriccap.{shell}"
    path.write_text(result.stdout)
    return path


# --- bash --------------------------------------------------------------------------------------------

needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


@pytest.fixture(scope="module")
def bash_completion(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _script("bash", tmp_path_factory.mktemp("bash"))


def complete_bash(script: Path, *words: str, cwd: Path | None = None) -> list[str]:
    """What <Tab> offers after ``words`` (the last one is the word being completed)."""
    driver = (
        f'source "{script}"\n'
        'COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n'
        "_fabriccap_complete\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", driver, "bash", *words],
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT,
        cwd=cwd,
        check=False,
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return [line for line in result.stdout.splitlines() if line]


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


@needs_bash
def test_bash_registers_the_completion(bash_completion: Path) -> None:
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", f'source "{bash_completion}" && complete -p fabriccap'],
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT,
        check=True,
    )
    assert result.stdout.strip() == "complete -F _fabriccap_complete fabriccap"


@needs_bash
def test_bash_completes_commands(bash_completion: Path) -> None:
    assert set(complete_bash(bash_completion, "fabriccap", "")) == set(COMMANDS) | _flags(PARSER)
    assert complete_bash(bash_completion, "fabriccap", "expl") == ["explain"]
    assert complete_bash(bash_completion, "fabriccap", "co") == ["config-schema", "completion"]


@needs_bash
@pytest.mark.parametrize("name", list(COMMANDS))
def test_bash_completes_each_commands_flags(name: str, bash_completion: Path) -> None:
    subparser = cli._subcommand_parsers(PARSER)[name]
    assert set(complete_bash(bash_completion, "fabriccap", name, "-")) == _flags(subparser)
    long_flags = {flag for flag in _flags(subparser) if flag.startswith("--")}
    assert set(complete_bash(bash_completion, "fabriccap", name, "--")) == long_flags


@needs_bash
@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (("evaluate", "-o", ""), ["table", "wide", "json", "yaml", "name"]),
        (("evaluate", "--output", "j"), ["json"]),
        (("evaluate", "--output", "=", "y"), ["yaml"]),  # --output=y: bash splits at '='
        (("explain", "p5", "-o", ""), ["table", "json"]),
        (("run", "--log-level", "w"), ["warning"]),
        (("completion", ""), ["bash", "zsh"]),
        (("run", "--metrics-port", ""), []),  # a number: nothing to offer
    ],
)
def test_bash_completes_flag_values_and_positional_choices(
    words: tuple[str, ...], expected: list[str], bash_completion: Path
) -> None:
    assert complete_bash(bash_completion, "fabriccap", *words) == expected


@needs_bash
def test_bash_completes_files_and_directories(bash_completion: Path, tmp_path: Path) -> None:
    (tmp_path / "cluster.json").write_text("{}")
    (tmp_path / "configs").mkdir()
    assert complete_bash(bash_completion, "fabriccap", "evaluate", "-f", "clu", cwd=tmp_path) == ["cluster.json"]
    assert complete_bash(bash_completion, "fabriccap", "explain", "x", "--config", "c", cwd=tmp_path) == [
        "cluster.json",
        "configs",
    ]
    assert complete_bash(bash_completion, "fabriccap", "demo", "--dir", "c", cwd=tmp_path) == ["configs"]


def test_the_scripts_follow_the_parser() -> None:
    """A flag added to the parser shows in both scripts without touching the generator."""
    parser = cli.build_parser()
    subparser = cli._subcommand_parsers(parser)["explain"]
    subparser.add_argument("--brand-new-flag", metavar="FILE", help="new (default: none)")
    assert "--brand-new-flag" in bash_script(parser) and "--brand-new-flag" in zsh_script(parser)
    assert "--brand-new-flag" not in bash_script(PARSER)


# --- zsh ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def zsh_completion(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The zsh script; without zsh the zsh tests skip on a laptop and fail under CI=true, where
    a silent skip would pass a script no shell has read."""
    if shutil.which("zsh") is None:
        if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
            pytest.fail("zsh is missing under CI: scripts/bootstrap.sh --test installs Debian's zsh")
        pytest.skip("zsh is not installed (apt-get install zsh, or scripts/bootstrap.sh --test)")
    return _script("zsh", tmp_path_factory.mktemp("zsh"))


def test_zsh_script_parses(zsh_completion: Path) -> None:
    result = subprocess.run(["zsh", "-n", str(zsh_completion)], capture_output=True, text=True, timeout=SHELL_TIMEOUT)
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.parametrize("how", ["source", "fpath"])
def test_zsh_registers_the_completion(how: str, zsh_completion: Path, tmp_path: Path) -> None:
    functions = tmp_path / "functions"
    functions.mkdir()
    (functions / "_fabriccap").write_text(zsh_completion.read_text())
    load = f'source "{zsh_completion}"' if how == "source" else ""
    script = (
        f'fpath=("{functions}" $fpath); autoload -U compinit; compinit -u -d "{tmp_path}/zcompdump"; {load}\n'
        "print -r -- ${_comps[fabriccap]}"
    )
    result = subprocess.run(["zsh", "-f", "-c", script], capture_output=True, text=True, timeout=SHELL_TIMEOUT)
    assert (result.stdout.strip(), result.stderr) == ("_fabriccap", "")


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r")


def complete_zsh(script: Path, line: str, tmp_path: Path, expect: str) -> str:
    """Type ``line`` and two <Tab>s into an interactive zsh with the script loaded; what the
    terminal shows after the line (the completed word, or the list offered)."""
    driver = tmp_path / "drive.zsh"
    driver.write_text(
        "zmodload zsh/zpty\n"
        "zpty -b shell zsh -f -i\n"
        f'zpty -w shell \'PS1="%% "; unsetopt zle_bracketed_paste 2>/dev/null; autoload -U compinit; '
        f'compinit -u -d "{tmp_path}/zcompdump"; source "{script}"; fabriccap() {{ : }}; print LOADED\'\n'
        f"zpty -n -w shell {_zsh_quote(line)}$'\\t\\t'\n"
        'local seen="" chunk; integer tries=0\n'
        f"while (( tries++ < 100 )) && [[ $seen != *{_zsh_quote(expect)}* ]]; do\n"
        "  if zpty -r -t shell chunk; then seen+=$chunk; else sleep 0.05; fi\n"
        "done\n"
        "print -r -- $seen\n"
        "zpty -d shell\n"
    )
    result = subprocess.run(
        ["zsh", "-f", str(driver)], capture_output=True, text=True, timeout=SHELL_TIMEOUT, cwd=tmp_path
    )
    shown = _ANSI.sub("", result.stdout)
    return shown[shown.rindex("LOADED") :] if "LOADED" in shown else shown


def _zsh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("fabriccap evaluate -o ", ["json", "name", "table", "wide", "yaml"]),
        ("fabriccap completion ", ["zsh", "bash"]),  # waits for the last: "zsh" is in the setup line too
        ("fabriccap expl", ["fabriccap explain"]),
        ("fabriccap explain p5 --requ", ["--require-ready"]),
    ],
)
def test_zsh_completes_in_a_real_shell(line: str, expected: list[str], zsh_completion: Path, tmp_path: Path) -> None:
    shown = complete_zsh(zsh_completion, line, tmp_path, expected[-1])
    assert all(word in shown for word in expected), shown
