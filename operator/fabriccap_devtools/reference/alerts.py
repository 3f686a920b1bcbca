"""docs/reference/alerts.md: every shipped alert rule, from ``fabriccap.observability.alerts.ALERTS``.

Each rule is rendered with the default settings, exactly as ``monitoring/`` ships it, and its
runbook link points at its section of docs/runbook.md. A link to a section that does not exist
is an error here, so ``make generate`` (and the stale-file test) fail instead of a reader.
"""

from __future__ import annotations

from pathlib import Path

from fabriccap.observability.alerts import ALERTS, RULES_FILE, AlertSettings, rule_group
from fabriccap_devtools.reference.markdown import anchors, code, fenced, header, slug, table

SOURCE = "operator/fabriccap/observability/alerts.py"


class MissingRunbookSectionError(ValueError):
    pass


def runbook_link(anchor: str, runbook: Path) -> str:
    """The relative link from docs/reference/ to a runbook section, checked to exist."""
    if anchor not in anchors(runbook.read_text(encoding="utf-8")):
        raise MissingRunbookSectionError(f"docs/runbook.md has no section #{anchor}")
    return f"../{runbook.name}#{anchor}"


def render(runbook: Path) -> str:
    settings = AlertSettings()
    rendered = {rule["alert"]: rule for rule in rule_group(settings)["rules"]}
    summary_rows = [
        [
            f"[{code(rule.name)}](#{slug(rule.name)})",
            rule.severity,
            code(settings.for_duration(rule)),
            f"[runbook]({runbook_link(rule.anchor, runbook)})",
        ]
        for rule in ALERTS
    ]
    sections = []
    for rule in ALERTS:
        shipped = rendered[rule.name]
        annotations = shipped["annotations"]
        sections.append(
            f"## {rule.name}\n\n"
            f"- severity: {code(rule.severity)}\n"
            f"- for: {code(shipped['for'])}\n"
            f"- runbook: [{runbook.name}#{rule.anchor}]({runbook_link(rule.anchor, runbook)})\n"
            f"- summary: {code(annotations['summary'])}\n"
            + "\nExpression:\n\n"
            + fenced(shipped["expr"], "promql")
            + "\nDescription (a Go template Prometheus fills in):\n\n"
            + fenced(annotations["description"], "text")
        )
    job = code(settings.job)
    return (
        header("Alerts", SOURCE)
        + "\nThe alert rules shipped in [`monitoring/"
        + RULES_FILE
        + "`](../../monitoring/"
        + RULES_FILE
        + ")"
        " (a plain rules file), [`monitoring/prometheusrule.yaml`](../../monitoring/prometheusrule.yaml) (a"
        " Prometheus Operator PrometheusRule) and the Helm chart (`prometheusRule.enabled=true`), shown here with"
        f" their defaults. The operator's scrape job ({job} here) is a parameter of the rules, never a"
        " literal: the chart fills in its own, and `python -m fabriccap.alerts --out DIR --job JOB` renders"
        " them for another job (also `--for ALERT=DURATION`, `--stale-after SECONDS`). Pool alerts drop the"
        " `instance` and `pod` labels, so several replicas count once and an operator restart does not reset"
        " an alert's `for:`. Every alert carries `summary`, `description` and `runbook_url` annotations.\n\n"
        + table(["alert", "severity", "for", "runbook"], summary_rows)
        + "\n"
        + "\n".join(sections)
    )
