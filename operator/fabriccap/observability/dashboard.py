"""The Grafana dashboard, declared as data and rendered to ``monitoring/``.

``monitoring/dashboard.json`` (import it, or provision it) and
``monitoring/dashboard-configmap.yaml`` (the same JSON in a ConfigMap labelled
``grafana_dashboard: "1"`` for Grafana's dashboard sidecar) are both rendered from
``dashboard()``; a unit test fails when the committed files differ. Regenerate with::

    python -m fabriccap.dashboard --out monitoring/
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabriccap.observability.generated import generated_header, to_yaml

UID = "fabriccap"
DASHBOARD_FILE = "dashboard.json"
CONFIGMAP_FILE = "dashboard-configmap.yaml"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Every pool query carries these, so the fabric/pool variables filter every pool panel.
POOL = 'fabric=~"$fabric",pool=~"$pool"'
GRID_WIDTH = 24


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False  # tables show the current value, not a range


@dataclass(frozen=True)
class Panel:
    title: str
    kind: str  # Grafana panel type
    queries: tuple[Query, ...]
    width: int
    height: int = 8
    description: str = ""
    unit: str = "short"
    options: tuple[tuple[str, Any], ...] = ()
    overrides: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


READY_MAPPINGS = [
    {
        "type": "value",
        "options": {
            "0": {"text": "Not ready", "color": "red", "index": 0},
            "1": {"text": "Ready", "color": "green", "index": 1},
        },
    }
]

UP_MAPPINGS = [
    {
        "type": "value",
        "options": {
            "0": {"text": "Down", "color": "red", "index": 0},
            "1": {"text": "Up", "color": "green", "index": 1},
        },
    }
]

ROWS: tuple[Row, ...] = (
    Row(
        "Pools",
        (
            Panel(
                "Pool readiness",
                "state-timeline",
                (Query(f"fabriccap_pool_ready{{{POOL}}}", "{{name}}"),),
                width=24,
                height=7,
                description="Ready is the flip criterion: every schedulable target node advertises the same"
                " count N > 0 and runs a Ready device-plugin pod.",
                options=(("mappings", READY_MAPPINGS),),
            ),
            Panel(
                "Pools now",
                "table",
                (
                    Query(f"fabriccap_pool_ready{{{POOL}}}", instant=True),
                    Query(f"fabriccap_pool_nodes{{{POOL}}}", instant=True),
                    Query(f"fabriccap_pool_advertising_nodes{{{POOL}}}", instant=True),
                    Query(f"fabriccap_pool_uniform_allocatable{{{POOL}}}", instant=True),
                    Query(f"fabriccap_pool_cordoned_nodes{{{POOL}}}", instant=True),
                ),
                width=24,
                description="One row per FabricCapability. An empty uniform count means the counts differ:"
                " do not wire the fabric.",
                overrides=(
                    {
                        "matcher": {"id": "byName", "options": "Ready"},
                        "properties": [
                            {"id": "mappings", "value": READY_MAPPINGS},
                            {"id": "custom.cellOptions", "value": {"type": "color-background"}},
                        ],
                    },
                ),
            ),
            Panel(
                "Advertising vs schedulable target nodes",
                "timeseries",
                (
                    Query(f"fabriccap_pool_nodes{{{POOL}}}", "{{name}} nodes"),
                    Query(f"fabriccap_pool_advertising_nodes{{{POOL}}}", "{{name}} advertising"),
                ),
                width=12,
                description="A gap between the two lines is nodes that advertise 0 of the fabric resource.",
            ),
            Panel(
                "Gap nodes by kind",
                "timeseries",
                (Query(f"fabriccap_pool_gap_nodes{{{POOL}}} > 0", "{{name}} {{kind}}"),),
                width=12,
                description="plugin_ready_not_advertised: the plugin runs, the resource is 0."
                " unhealthy: capacity above allocatable. advertised_without_plugin: no Ready plugin pod.",
            ),
            Panel(
                "Nodes by advertised count",
                "bargauge",
                (
                    Query(
                        f"fabriccap_pool_nodes_by_allocatable{{{POOL}}}",
                        "{{name}} allocatable={{allocatable}}",
                        instant=True,
                    ),
                ),
                width=12,
                description="More than one bar for a pool is a mixed or partial rollout.",
                options=(("displayMode", "basic"), ("orientation", "horizontal")),
            ),
            Panel(
                "Conditions that are not True",
                "table",
                (Query(f'fabriccap_pool_condition{{{POOL},status!="true"}} == 1', instant=True),),
                width=12,
                description="Stalled is abnormal-true: its False is the healthy state.",
            ),
        ),
    ),
    Row(
        "Operator",
        (
            Panel(
                "Operator up",
                "stat",
                (Query('up{job=~"$job"}', "{{instance}}"),),
                width=6,
                height=5,
                options=(("mappings", UP_MAPPINGS),),
            ),
            Panel(
                "Time since last evaluation",
                "stat",
                (Query("time() - fabriccap_last_evaluation_timestamp_seconds", "{{instance}}"),),
                width=6,
                height=5,
                unit="s",
            ),
            Panel(
                "Build",
                "table",
                (Query("fabriccap_build_info", instant=True),),
                width=6,
                height=5,
            ),
            Panel(
                "Unpooled target nodes",
                "stat",
                (Query("sum(fabriccap_unpooled_nodes)"),),
                width=6,
                height=5,
                description="Target nodes carrying none of the pool label keys: never published.",
            ),
            Panel(
                "Pool evaluations",
                "timeseries",
                (Query("sum by (instance) (rate(fabriccap_evaluations_total[$__rate_interval]))", "{{instance}}"),),
                width=8,
                unit="ops",
            ),
            Panel(
                "Status writes by result",
                "timeseries",
                (Query("sum by (result) (rate(fabriccap_status_writes_total[$__rate_interval]))", "{{result}}"),),
                width=8,
                unit="ops",
                description="Writes happen only on change: a steady cluster shows none.",
            ),
            Panel(
                "Watch events by kind",
                "timeseries",
                (Query("sum by (kind) (rate(fabriccap_watch_events_total[$__rate_interval]))", "{{kind}}"),),
                width=8,
                unit="ops",
            ),
            Panel(
                "Evaluation latency",
                "timeseries",
                (
                    Query(
                        "histogram_quantile(0.99, sum by (le)"
                        " (rate(fabriccap_evaluation_duration_seconds_bucket[$__rate_interval])))",
                        "p99",
                    ),
                    Query(
                        "histogram_quantile(0.5, sum by (le)"
                        " (rate(fabriccap_evaluation_duration_seconds_bucket[$__rate_interval])))",
                        "p50",
                    ),
                ),
                width=24,
                unit="s",
                description="Time to re-evaluate the dirty pools of one debounce window.",
            ),
        ),
    ),
)


def _template_variables() -> list[dict[str, Any]]:
    def label_variable(name: str, query: str) -> dict[str, Any]:
        return {
            "name": name,
            "label": name.capitalize(),
            "type": "query",
            "datasource": DATASOURCE,
            "query": {"query": query, "refId": f"{name}-variable"},
            "definition": query,
            "refresh": 2,  # on time range change: pools come and go
            "includeAll": True,
            "multi": True,
            "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
            "sort": 1,
        }

    return [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
        },
        label_variable("job", "label_values(fabriccap_build_info, job)"),
        label_variable("fabric", "label_values(fabriccap_pool_nodes, fabric)"),
        label_variable("pool", 'label_values(fabriccap_pool_nodes{fabric=~"$fabric"}, pool)'),
    ]


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    targets = []
    for index, query in enumerate(panel.queries):
        target: dict[str, Any] = {
            "datasource": DATASOURCE,
            "expr": query.expr,
            "refId": chr(ord("A") + index),
            "legendFormat": query.legend or "__auto",
        }
        if query.instant:
            target.update(instant=True, range=False, format="table")
        targets.append(target)
    options = dict(panel.options)
    result: dict[str, Any] = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "targets": targets,
        "fieldConfig": {
            "defaults": {"unit": panel.unit, "mappings": options.pop("mappings", [])},
            "overrides": list(panel.overrides),
        },
        "options": options,
    }
    if panel.kind == "table" and len(panel.queries) > 1:
        # Several instant queries become one row per pool: join on the labels, drop the noise.
        result["transformations"] = [
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": {"Time": True, "__name__": True, "job": True, "instance": True},
                    "renameByName": {
                        "Value #A": "Ready",
                        "Value #B": "Nodes",
                        "Value #C": "Advertising",
                        "Value #D": "Uniform count",
                        "Value #E": "Cordoned",
                    },
                },
            },
        ]
    elif panel.kind == "table":
        result["transformations"] = [
            {"id": "organize", "options": {"excludeByName": {"Time": True, "__name__": True, "Value": True}}}
        ]
    return result


def dashboard() -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    next_id = 1
    y = 0
    for row in ROWS:
        panels.append(
            {
                "id": next_id,
                "type": "row",
                "title": row.title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y},
                "panels": [],
            }
        )
        next_id += 1
        y += 1
        x = 0
        row_height = 0
        for panel in row.panels:
            if x + panel.width > GRID_WIDTH:
                x, y, row_height = 0, y + row_height, 0
            panels.append(_panel_json(panel, next_id, x, y))
            next_id += 1
            x += panel.width
            row_height = max(row_height, panel.height)
        y += row_height
    return {
        "uid": UID,
        "title": "fabriccap: fabric capability per node pool",
        "description": "Do the nodes of each pool advertise the fabric resource uniformly, with a Ready device plugin?",
        "tags": ["fabriccap", "efa", "kubernetes"],
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "browser",
        "templating": {"list": _template_variables()},
        "annotations": {"list": []},
        "links": [
            {
                "title": "Runbook",
                "type": "link",
                "url": "https://github.com/fabriccap/fabriccap/blob/main/docs/runbook.md",
                "targetBlank": True,
            }
        ],
        "panels": panels,
    }


def dashboard_json() -> str:
    return json.dumps(dashboard(), indent=2, sort_keys=False) + "\n"


def configmap_yaml(dashboard_text: str) -> str:
    """The dashboard for Grafana's sidecar, which loads ConfigMaps labelled grafana_dashboard=1."""
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "fabriccap-dashboard",
            "labels": {"grafana_dashboard": "1", "app.kubernetes.io/name": "fabriccap"},
        },
        "data": {"fabriccap.json": dashboard_text},
    }

    return to_yaml(configmap, generated_header(__name__))


def rendered_files() -> dict[str, str]:
    text = dashboard_json()
    return {DASHBOARD_FILE: text, CONFIGMAP_FILE: configmap_yaml(text)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fabriccap.dashboard", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, metavar="DIR", help="directory to write the dashboard files into")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, content in rendered_files().items():
        (out / name).write_text(content, encoding="utf-8")
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
