"""docs/reference/: each generated page covers everything its source of truth declares.

tests/repo/test_generated.py already fails when a committed page differs from what its
generator renders today. These tests check the generators themselves, each against an
independent reading of the same source (the CRD file, a real metrics exposition, `--help`
output, the JSON Schema), so a generator that skipped something could not pass.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from fabriccap.cli import commands as cli
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.core.api import CONDITIONS, REASONS, ConditionType
from fabriccap.core.config import BUILTIN_PROFILES, Config, build_config, config_input_schema
from fabriccap.observability.alerts import ALERTS, rule_group
from fabriccap_devtools import reference
from fabriccap_devtools.generate import generated_files
from fabriccap_devtools.reference import alerts as alerts_page
from fabriccap_devtools.reference import commandline, configuration, how_it_decides
from fabriccap_devtools.reference.markdown import anchors, cell, code, slug

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "reference"


def page(name: str) -> str:
    return (REFERENCE / name).read_text(encoding="utf-8")


def rows(markdown: str) -> list[list[str]]:
    """The cells of every table body row of a page (heading rows left out)."""
    lines = markdown.splitlines()
    return [
        [part.strip() for part in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        for line, following in zip(lines, [*lines[1:], ""], strict=True)
        if line.startswith("| ") and not following.startswith("|---")
    ]


def section(markdown: str, title: str) -> str:
    """The text under the heading ``title`` up to the next heading of the same or a higher level."""
    matched = re.search(rf"^(#+) {re.escape(title)}\n", markdown, flags=re.MULTILINE)
    assert matched, f"no section {title!r}"
    level = len(matched.group(1))
    rest = markdown[matched.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, flags=re.MULTILINE)
    return rest[: end.start()] if end else rest


def test_every_reference_page_is_generated() -> None:
    registered = {entry.relative for entry in generated_files()}
    on_disk = {f"docs/reference/{path.name}" for path in REFERENCE.glob("*.md")}
    assert on_disk == registered & {name for name in registered if name.startswith("docs/reference/")}
    assert {f"docs/reference/{p.name}" for p in reference.pages()} | {"docs/reference/README.md"} == on_disk


def test_the_index_links_every_page() -> None:
    index = page("README.md")
    for entry in reference.pages():
        assert f"]({entry.name})" in index


# --- The FabricCapability resource ---------------------------------------------------------


def _crd_status() -> dict[str, Any]:
    crd = yaml.safe_load((REPO / "crds" / "fabriccapabilities.yaml").read_text(encoding="utf-8"))
    (version,) = crd["spec"]["versions"]
    status: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    return status


def _crd_paths(schema: dict[str, Any], path: str) -> list[tuple[str, str]]:
    found = []
    for name, child in schema.get("properties", {}).items():
        found.append((f"{path}.{name}", " ".join(child["description"].split())))
        below = child.get("items", child) if child.get("type") == "array" else child
        found += _crd_paths(below, f"{path}.{name}[]" if child.get("type") == "array" else f"{path}.{name}")
    return found


def test_resource_page_has_every_status_field_with_its_description() -> None:
    by_field = {row[0]: row for row in rows(page("fabriccapability.md"))}
    paths = _crd_paths(_crd_status(), "status")
    assert len(paths) > 40
    for path, description in paths:
        assert code(path) in by_field, path
        assert cell(description) in by_field[code(path)][3], path


def test_resource_page_has_every_condition_and_reason() -> None:
    text = page("fabriccapability.md")
    for meaning in CONDITIONS:
        part = section(text, meaning.type.value)
        reasons = [row for row in rows(part) if len(row) == 4]
        expected = [entry for entry in REASONS if entry.condition is meaning.type]
        assert len(reasons) == len(expected), meaning.type
        for entry in expected:
            assert [
                code(entry.status.value),
                code(entry.reason.value),
                cell(entry.meaning),
                cell(entry.action),
            ] in reasons


def test_resource_page_has_every_printer_column() -> None:
    text = section(page("fabriccapability.md"), "`kubectl get fcap`")
    for column in ("FABRIC", "POOL", "NODES", "ADVERTISING", "COUNT", "GAP", "READY", "REASON", "AGE", "RESOURCE"):
        assert f"| `{column}` |" in text


# --- Configuration -------------------------------------------------------------------------


def _schema_keys(schema: dict[str, Any]) -> set[str]:
    keys = set(schema.get("properties", {}))
    for definition in schema.get("$defs", {}).values():
        keys |= set(definition.get("properties", {}))
    return keys


def test_configuration_page_has_every_key_a_file_may_hold() -> None:
    listed = {row[0].strip("`").rsplit(".", 1)[-1].removesuffix("[]") for row in rows(page("configuration.md"))}
    assert _schema_keys(config_input_schema()) <= listed


def test_every_config_field_is_described() -> None:
    undescribed = [field.path for field in configuration.config_fields() if not field.description]
    assert undescribed == []


def test_configuration_page_shows_each_default() -> None:
    by_field = {row[0]: row for row in rows(page("configuration.md"))}
    assert by_field["`poolGracePeriodSeconds`"][2] == "`600.0`"
    assert by_field["`fabrics[].devicePlugin.namespaces`"][2] == '`["kube-system"]`'
    assert by_field["`fabrics[].name`"][2] == "required"
    defaults = Config.model_fields
    assert by_field["`debounceSeconds`"][2] == code(json.dumps(defaults["debounce_seconds"].default))


@pytest.mark.parametrize("name", sorted(BUILTIN_PROFILES))
def test_configuration_page_has_each_builtin_profile_and_its_whole_table(name: str) -> None:
    text = section(page("configuration.md"), f"`{name}`")
    (profile,) = build_config({"fabrics": [{"name": name}]}).fabrics
    shown = {row[0].strip("`"): row[1] for row in rows(text) if len(row) == 2}
    assert shown == {instance_type: str(maximum) for instance_type, maximum in profile.instance_types.items()}
    values = yaml.safe_load(re.search(r"```yaml\n(.*?)```", text, flags=re.DOTALL).group(1))  # type: ignore[union-attr]
    assert values["resource"] == profile.resource
    assert values["devicePlugin"]["namespaces"] == list(profile.device_plugin.namespaces)


def test_instance_types_are_listed_by_family_then_size() -> None:
    names = ["p5.48xlarge", "g6.12xlarge", "g6.metal", "g6.2xlarge", "g6.xlarge", "g6f.large"]
    assert sorted(names, key=configuration.instance_type_order) == [
        "g6.xlarge",
        "g6.2xlarge",
        "g6.12xlarge",
        "g6.metal",
        "g6f.large",
        "p5.48xlarge",
    ]


# --- Metrics -------------------------------------------------------------------------------


def test_metrics_page_has_every_family_the_operator_exposes(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["evaluate", "-f", str(REPO / "examples" / "eks-cluster.json"), "-o", "json"]) == 0
    metrics = OperatorMetrics()
    for obj in json.loads(capsys.readouterr().out)["items"]:
        status = obj["status"]
        metrics.pools.set_pool(obj["metadata"]["name"], status["fabric"], status["pool"]["value"], status)
    metrics.api_errors.labels("get", "500").inc()  # families without a series yet are listed too
    exposed = {
        sample.name: set(sample.labels) - {"le"}
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for sample in family.samples
        if sample.name.startswith("fabriccap_")
    }
    text = page("metrics.md")
    by_name = {name.strip("`"): row for row in rows(text) for name in row[0].split("<br>")}
    for name, labels in exposed.items():
        assert name in by_name, name
        for label in labels:
            assert f"`{label}`" in text, (name, label)
    # and a family with no series in this exposition (nothing set it yet)
    assert "fabriccap_unschedulable_fabric_pods" in by_name


def test_metrics_page_lists_label_values_of_pool_families() -> None:
    by_name = {row[0].strip("`"): row for row in rows(page("metrics.md"))}
    gap = by_name["fabriccap_pool_gap_nodes"][2]
    for kind in ("plugin_ready_not_advertised", "unhealthy", "advertised_without_plugin"):
        assert f"`{kind}`" in gap
    condition = by_name["fabriccap_pool_condition"][2]
    for condition_type in ConditionType:
        assert f"`{condition_type.value}`" in condition


# --- Alerts --------------------------------------------------------------------------------


def test_alerts_page_has_every_rule_as_shipped() -> None:
    text = page("alerts.md")
    shipped = {rule["alert"]: rule for rule in rule_group()["rules"]}
    for rule in ALERTS:
        part = section(text, rule.name)
        assert shipped[rule.name]["expr"].strip() in part
        assert f"- severity: `{rule.severity}`" in part
        assert f"- for: `{shipped[rule.name]['for']}`" in part
        assert f"(../runbook.md#{rule.anchor})" in part


def test_a_runbook_link_to_a_missing_section_is_an_error(tmp_path: Path) -> None:
    runbook = tmp_path / "runbook.md"
    runbook.write_text("# Runbook\n\n## FabricMixedRollout\n", encoding="utf-8")
    assert alerts_page.runbook_link("fabricmixedrollout", runbook) == "../runbook.md#fabricmixedrollout"
    with pytest.raises(alerts_page.MissingRunbookSectionError, match="#fabricdeviceplugingap"):
        alerts_page.render(runbook)


# --- Command line --------------------------------------------------------------------------


def _help_of(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.main([*argv, "--help"])
    return out.getvalue()


def _subcommand_names(parser: argparse.ArgumentParser) -> list[str]:
    return [
        name for action in parser._actions if isinstance(action, argparse._SubParsersAction) for name in action.choices
    ]


def test_command_line_page_has_every_command_and_flag() -> None:
    text = page("command-line.md")
    commands = [[], *([name] for name in _subcommand_names(cli.build_parser()))]
    for argv in commands:
        part = section(text, code(" ".join(["fabriccap", *argv])))
        flags = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", _help_of(argv).split("options:", 1)[-1]))
        for flag in flags - {"-h", "--help"}:
            assert f"`{flag}`" in part, (argv, flag)


def test_command_line_page_does_not_depend_on_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    narrow = commandline.render()
    monkeypatch.setenv("COLUMNS", "250")
    assert commandline.render() == narrow


def test_help_fields_are_filled_in() -> None:
    assert "%(" not in page("command-line.md")
    assert "(default: info)" in page("command-line.md")


# --- How it decides --------------------------------------------------------------------------


@pytest.mark.parametrize("quoting", [REFERENCE / "how-it-decides.md", REPO / "README.md"], ids=lambda path: path.name)
def test_quoted_evaluate_output_is_what_evaluate_prints(capsys: pytest.CaptureFixture[str], quoting: Path) -> None:
    """Each quoted command's lines are, line for line, what it prints now."""
    text = quoting.read_text(encoding="utf-8")
    blocks = [block for block in how_it_decides.quoted_blocks(text) if block[0] == "run"]
    assert blocks
    for _, arguments, content in blocks:
        quoted = content.strip().removeprefix("```console\n").removesuffix("```").splitlines()
        assert quoted[0] == f"$ fabriccap {arguments}"
        with contextlib.chdir(REPO):
            assert cli.main(arguments.split()) == 0
        assert quoted[1:] == capsys.readouterr().out.splitlines()


def test_quoted_conditions_are_what_evaluate_writes(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["evaluate", "-f", str(REPO / "examples" / "eks-cluster.json"), "-o", "json"]) == 0
    written = {
        (item["status"]["pool"]["value"], c["type"]): c
        for item in json.loads(capsys.readouterr().out)["items"]
        for c in item["status"]["conditions"]
    }
    checked = 0
    for kind, arguments, content in how_it_decides.quoted_blocks(page("how-it-decides.md")):
        if kind != "conditions":
            continue
        pool = arguments.split()[0]
        for row in rows(content):
            condition = written[(pool, row[0].strip("`"))]
            assert row[1:] == [code(condition["status"]), code(condition["reason"]), cell(condition["message"])]
            checked += 1
    assert checked >= 10


def test_each_worked_case_names_only_reasons_its_quotes_show() -> None:
    """The prose of a worked case may drift from the example; the reasons it names may not."""
    text = section(page("how-it-decides.md"), "Worked cases")
    cases = re.split(r"^### ", text, flags=re.MULTILINE)[1:]
    reasons = {entry.reason.value for entry in REASONS}
    pools_seen = set()
    for case in cases:
        pool = re.match(r"`([^`]+)`", case).group(1)  # type: ignore[union-attr]
        pools_seen.add(pool)
        quoted = "".join(content for _, arguments, content in how_it_decides.quoted_blocks(case))
        assert all(arguments.split()[0] == pool for _, arguments, _ in how_it_decides.quoted_blocks(case)), pool
        named = {word for word in re.findall(r"`([A-Z][A-Za-z]+)`", case.split("<!--")[0]) if word in reasons}
        assert named, pool
        for reason in named:
            assert f"`{reason}`" in quoted, (pool, reason)
    published = {obj["status"]["pool"]["value"] for obj in how_it_decides._objects(REPO).values()}
    assert pools_seen == published


def test_refresh_rewrites_only_the_quoted_blocks() -> None:
    stale = "intro\n<!-- status: p5-training uniformCount -->\nold\n<!-- end -->\noutro\n"
    fresh = how_it_decides.refresh(stale, REPO)
    assert fresh.startswith("intro\n<!-- status: p5-training uniformCount -->\n```yaml\nstatus:\n  uniformCount: 32\n")
    assert fresh.endswith("```\n<!-- end -->\noutro\n")
    assert how_it_decides.refresh(fresh, REPO) == fresh


@pytest.mark.parametrize(
    "marker",
    [
        "<!-- status: no-such-pool nodes -->",
        "<!-- status: p5-training noSuchField -->",
        "<!-- conditions: p5-training Bogus -->",
    ],
)
def test_a_marker_naming_nothing_is_an_error(marker: str) -> None:
    with pytest.raises(how_it_decides.BadMarkerError):
        how_it_decides.refresh(f"{marker}\n<!-- end -->\n", REPO)


# --- Markdown and links --------------------------------------------------------------------


def test_slugs_are_the_forges() -> None:
    assert slug("`fabriccap evaluate`") == "fabriccap-evaluate"
    assert slug("FabricMixedRollout") == "fabricmixedrollout"
    assert slug("`p5-partial`: one node without EFA") == "p5-partial-one-node-without-efa"
    assert slug("The flip criterion: `Ready`") == "the-flip-criterion-ready"
    assert slug("`fabriccap_pool_nodes`") == "fabriccap_pool_nodes"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}


def test_code_spans_and_cells_survive_what_they_hold() -> None:
    assert code("a`b") == "``a`b``"
    assert code("`x") == "`` `x ``"
    assert cell("a | b\nc") == "a \\| b c"


MARKDOWN_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_relative_links_resolve(path: Path) -> None:
    """Every relative link of the user docs names a file of the repository, and a section of it."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for target in MARKDOWN_LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        missing_section = (linked.exists() and bool(anchor) and linked.suffix == ".md") and anchor not in anchors(
            linked.read_text(encoding="utf-8")
        )
        if not linked.exists() or missing_section:
            broken.append(target)
    assert broken == []
