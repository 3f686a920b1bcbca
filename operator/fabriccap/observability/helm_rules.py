"""The shipped alert rules as the Helm chart renders them (``charts/fabriccap/files/alerts.yaml``).

The chart cannot run ``alerts.py``, and what differs per release (the scrape job, which
follows ``nameOverride``; an alert's ``for:``, severity, whether it is on) is only known when
Helm renders. So the rules are rendered here once with placeholders in place of the job and
of ``for:``, with each alert's default ``for:`` and severity beside them, and
``templates/prometheusrule.yaml`` fills them in per release. A chart rendered with the
defaults is exactly ``monitoring/prometheusrule.yaml`` (tests/repo/test_chart.py).
"""

from __future__ import annotations

from typing import Any

from fabriccap.observability import alerts
from fabriccap.observability.generated import generated_header, to_yaml

FILE = "alerts.yaml"
# Neither occurs in PromQL nor in Go templates; the chart replaces both literally.
JOB_PLACEHOLDER = "__fabriccap_job__"
FOR_PLACEHOLDER = "__fabriccap_for__"
# Keys of a rendered rule that chart_rules rewrites; any other (keep_firing_for, say) passes through.
_HANDLED = {"alert", "for", "expr", "labels", "annotations"}


def chart_rules() -> dict[str, Any]:
    """``{group, rules: [{alert, for, severity, expr, labels, annotations}]}`` with placeholders."""
    settings = alerts.AlertSettings(
        job=JOB_PLACEHOLDER, for_overrides={rule.name: FOR_PLACEHOLDER for rule in alerts.ALERTS}
    )
    group = alerts.rule_group(settings)
    defaults = {rule.name: rule for rule in alerts.ALERTS}
    rules = []
    for rendered in group["rules"]:
        rule = defaults[rendered["alert"]]
        labels = {key: value for key, value in rendered["labels"].items() if key != "severity"}
        rules.append(
            {
                "alert": rule.name,
                "for": rule.for_,
                "severity": rendered["labels"]["severity"],
                "expr": rendered["expr"],
                "labels": labels,
                "annotations": rendered["annotations"],
                **{key: value for key, value in rendered.items() if key not in _HANDLED},
            }
        )
    return {"group": group["name"], "rules": rules}


def rendered_files() -> dict[str, str]:
    header = generated_header(__name__) + (
        f"# {JOB_PLACEHOLDER} and {FOR_PLACEHOLDER} are filled in by templates/prometheusrule.yaml.\n"
    )
    return {FILE: to_yaml(chart_rules(), header)}
