"""`fabriccap run --log-level/--log-format`: what reaches stderr."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from fabriccap.cli.commands import build_parser
from fabriccap.controller.main import setup_logging


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_carry_time_level_logger_and_message(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("info", "json")
    logging.getLogger("fabriccap").info("listed %d nodes", 3)
    logging.getLogger("fabriccap").debug("not at info")
    (line,) = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert {key: record[key] for key in ("level", "logger", "message")} == {
        "level": "INFO",
        "logger": "fabriccap",
        "message": "listed 3 nodes",
    }
    assert record["time"].endswith("+00:00")


def test_text_lines_at_the_level_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("warning", "text")
    logging.getLogger("fabriccap").info("quiet")
    logging.getLogger("fabriccap").warning("loud")
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith("WARNING fabriccap: loud")


def test_run_takes_the_flags_and_refuses_other_values(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["run", "--log-level", "debug", "--log-format", "json"])
    assert (args.log_level, args.log_format) == ("debug", "json")
    assert (build_parser().parse_args(["run"]).log_format) == "text"
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["run", "--log-format", "yaml"])
    assert exited.value.code == 2
    assert "invalid choice: 'yaml'" in capsys.readouterr().err


FORGED = "x/y\n2026-12-01 23:59:59,000 INFO fabriccap.controller.leader: released the lease\x1b[2J"


def test_a_newline_in_a_text_record_cannot_forge_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Reliability round 3, S6: an owner name carried a complete, well-formed record."""
    setup_logging("info", "text")
    logger = logging.getLogger("fabriccap.controller.lookups")
    logger.warning("reading %s %s/%s failed", "Job", "ml", FORGED)
    try:
        raise ValueError(FORGED)
    except ValueError:
        logger.exception("unexpected")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert "\\n2026-12-01 23:59:59,000 INFO" in lines[0]
    assert not [line for line in lines if "\x1b" in line]
    assert "Traceback" in lines[1] and "ValueError: x/y\\n2026" in lines[1]


def test_json_records_escape_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("info", "json")
    logging.getLogger("fabriccap").warning("owner %s", FORGED)
    (line,) = capsys.readouterr().err.splitlines()
    assert "\x1b" not in line
    assert json.loads(line)["message"] == f"owner {FORGED}"
