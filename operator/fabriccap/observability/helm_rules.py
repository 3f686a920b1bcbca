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
# OperatorDown's "no target": the chart knows the shard count and its namespace only at install.
NO_TARGET_PLACEHOLDER = "__fabriccap_no_target__"
SHARD_PLACEHOLDER = "__fabriccap_shard__"
NAMESPACE_PLACEHOLDER = "__fabriccap_namespace__"
# Keys of a rendered rule that chart_rules rewrites; any other (keep_firing_for, say) passes through.
_HANDLED = {"alert", "for", "expr", "labels", "annotations"}


def chart_rules() -> dict[str, Any]:
    """``{group, rules: [{alert, for, severity, expr, labels, annotations}]}`` with placeholders."""
    settings = alerts.AlertSettings(
        job=JOB_PLACEHOLDER,
        for_overrides={rule.name: FOR_PLACEHOLDER for rule in alerts.ALERTS},
        no_target_placeholder=NO_TARGET_PLACEHOLDER,
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
    # Unsharded, the text itself; sharded, one term per shard, which templates/prometheusrule.yaml
    # joins as alerts.no_target does (a test compares the two).
    no_target = {
        "unsharded": alerts.no_target(alerts.AlertSettings(job=JOB_PLACEHOLDER)),
        "shard": f"absent({alerts.shard_target(JOB_PLACEHOLDER, NAMESPACE_PLACEHOLDER, SHARD_PLACEHOLDER)})",
    }
    return {"group": group["name"], "noTarget": no_target, "rules": rules}


def rendered_files() -> dict[str, str]:
    header = generated_header(__name__) + (
        f"# {JOB_PLACEHOLDER}, {FOR_PLACEHOLDER} and {NO_TARGET_PLACEHOLDER} are filled in by"
        " templates/prometheusrule.yaml.\n"
    )
    return {FILE: to_yaml(chart_rules(), header)}
