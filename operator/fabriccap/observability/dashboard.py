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
from fabriccap.observability.targets import PER_POOL

UID = "fabriccap"
DASHBOARD_FILE = "dashboard.json"
CONFIGMAP_FILE = "dashboard-configmap.yaml"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Every query selects one install: its scrape job, and its cluster where series carry a
# `cluster` label (an external label, or a relabeling). Where they carry none the cluster
# variable has no value, and `cluster=~""` matches exactly the series without the label.
INSTALL = 'job=~"$job",cluster=~"$cluster"'
# Every pool query carries these too, so the fabric/pool variables filter every pool panel.
POOL = f'{INSTALL},fabric=~"$fabric",pool=~"$pool"'
# Every replica of the operator exports the pool series (each with its own instance and
# pod, and sharded its `shard`): panels take one series per pool, whatever the number of
# replicas, with the alerts' PER_POOL (observability.targets). Sharded, a pool moved by a
# change of `shards` is exported by two shards for a while.
GRID_WIDTH = 24
# Labels Prometheus (or the Prometheus Operator) adds to every target: noise in a table.
TARGET_LABELS = ("job", "instance", "pod", "namespace", "service", "endpoint", "container", "cluster")


def pool_series(metric: str, matchers: str = "") -> str:
    """``metric`` of the selected pools, once per pool."""
    return f"{PER_POOL} ({metric}{{{POOL}{',' + matchers if matchers else ''}}})"


def install_series(metric: str) -> str:
    """``metric`` of the selected install, per replica."""
    return f"{metric}{{{INSTALL}}}"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False  # tables show the current value, not a range


@dataclass(frozen=True)
class Panel:
    title: str
    panel_type: str  # Grafana's: table, stat, timeseries
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
                (Query(pool_series("fabriccap_pool_ready"), "{{name}}"),),
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
                    Query(pool_series("fabriccap_pool_ready"), instant=True),
                    Query(pool_series("fabriccap_pool_nodes"), instant=True),
                    Query(pool_series("fabriccap_pool_advertising_nodes"), instant=True),
                    Query(pool_series("fabriccap_pool_uniform_allocatable"), instant=True),
                    Query(pool_series("fabriccap_pool_cordoned_nodes"), instant=True),
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
                    Query(pool_series("fabriccap_pool_nodes"), "{{name}} nodes"),
                    Query(pool_series("fabriccap_pool_advertising_nodes"), "{{name}} advertising"),
                ),
                width=12,
                description="A gap between the two lines is nodes that advertise 0 of the fabric resource.",
            ),
            Panel(
                "Gap nodes by kind",
                "timeseries",
                (Query(pool_series("fabriccap_pool_gap_nodes") + " > 0", "{{name}} {{kind}}"),),
                width=12,
                description="plugin_ready_not_advertised: the plugin runs, the resource is 0."
                " unhealthy: capacity above allocatable. advertised_without_plugin: no Ready plugin pod.",
            ),
            Panel(
                "Nodes by advertised count",
                "bargauge",
                (
                    Query(
                        pool_series("fabriccap_pool_nodes_by_allocatable"),
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
                (Query(pool_series("fabriccap_pool_condition", 'status!="true"') + " == 1", instant=True),),
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
                (Query(install_series("up"), "{{instance}}"),),
                width=6,
                height=5,
                description="Whether Prometheus scrapes each replica of the operator. Every replica serves"
                " /metrics; one of them, the Lease holder, writes.",
                options=(("mappings", UP_MAPPINGS),),
            ),
            Panel(
                "Time since last evaluation",
                "stat",
                (Query("time() - " + install_series("fabriccap_last_evaluation_timestamp_seconds"), "{{instance}}"),),
                width=6,
                height=5,
                description="Per replica. Pools are re-evaluated on change and at least every resyncSeconds"
                " (300 s); far above that the evaluation loop is stuck (FabricCapabilityStale).",
                unit="s",
            ),
            Panel(
                "Build",
                "table",
                (Query(install_series("fabriccap_build_info"), instant=True),),
                width=6,
                height=5,
                description="The operator version each replica runs.",
            ),
            Panel(
                "Unpooled target nodes",
                "stat",
                (Query(f"{PER_POOL} ({install_series('fabriccap_unpooled_nodes')})"),),
                width=6,
                height=5,
                description="Target nodes carrying none of the pool label keys: never published.",
            ),
            Panel(
                "Pool evaluations",
                "timeseries",
                (
                    Query(
                        f"sum by (instance) (rate({install_series('fabriccap_evaluations_total')}[$__rate_interval]))",
                        "{{instance}}",
                    ),
                ),
                width=8,
                unit="ops",
                description="Pool evaluations per second, per replica: every replica evaluates, so each has the"
                " answer ready when it takes over.",
            ),
            Panel(
                "Status writes by result",
                "timeseries",
                (
                    Query(
                        f"sum by (result) (rate({install_series('fabriccap_status_writes_total')}[$__rate_interval]))",
                        "{{result}}",
                    ),
                ),
                width=8,
                unit="ops",
                description="Writes happen only on change, and only on the leader: a steady cluster shows none.",
            ),
            Panel(
                "Watch events by kind",
                "timeseries",
                (
                    Query(
                        f"sum by (kind) (rate({install_series('fabriccap_watch_events_total')}[$__rate_interval]))",
                        "{{kind}}",
                    ),
                ),
                width=8,
                unit="ops",
                description="Watch events received per second, by kind, summed over the replicas. Node status"
                " heartbeats dominate; a flat zero means the watches stopped.",
            ),
            Panel(
                "Evaluation latency",
                "timeseries",
                (
                    Query(
                        "histogram_quantile(0.99, sum by (le)"
                        f" (rate({install_series('fabriccap_evaluation_duration_seconds_bucket')}[$__rate_interval])))",
                        "p99",
                    ),
                    Query(
                        "histogram_quantile(0.5, sum by (le)"
                        f" (rate({install_series('fabriccap_evaluation_duration_seconds_bucket')}[$__rate_interval])))",
                        "p50",
                    ),
                ),
                width=12,
                unit="s",
                description="Time to re-evaluate the dirty pools of one debounce window.",
            ),
            Panel(
                "Status write wait by lane (p99)",
                "timeseries",
                (
                    Query(
                        "histogram_quantile(0.99, sum by (lane, le)"
                        f" (rate({install_series('fabriccap_status_write_wait_seconds_bucket')}[$__rate_interval])))",
                        "{{lane}}",
                    ),
                ),
                width=12,
                unit="s",
                description="How long a changed status waited for a writer before it was sent, by lane. The"
                " conditions lane (what gates and alerts read) should stay near zero; a growing urgent or routine"
                " wait means the workload reports change faster than they are written.",
            ),
        ),
    ),
)


def _template_variables() -> list[dict[str, Any]]:
    def query_variable(name: str, label: str, query: str, *, multi: bool) -> dict[str, Any]:
        variable: dict[str, Any] = {
            "name": name,
            "label": label,
            "type": "query",
            "datasource": DATASOURCE,
            "query": {"query": query, "refId": f"{name}-variable"},
            "definition": query,
            "refresh": 2,  # on time range change: pools and installs come and go
            "includeAll": multi,
            "multi": multi,
            "sort": 1,
        }
        if multi:
            # ".+", not ".*": "All" must not also match series that lack the label.
            variable.update(allValue=".+", current={"selected": True, "text": ["All"], "value": ["$__all"]})
        return variable

    return [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
        },
        # One cluster and one install at a time: every query selects both.
        query_variable("cluster", "Cluster", "label_values(fabriccap_build_info, cluster)", multi=False),
        query_variable("job", "Job", 'label_values(fabriccap_build_info{cluster=~"$cluster"}, job)', multi=False),
        query_variable("fabric", "Fabric", f"label_values(fabriccap_pool_nodes{{{INSTALL}}}, fabric)", multi=True),
        query_variable(
            "pool", "Pool", f'label_values(fabriccap_pool_nodes{{{INSTALL},fabric=~"$fabric"}}, pool)', multi=True
        ),
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
        "type": panel.panel_type,
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
    if panel.panel_type == "table" and len(panel.queries) > 1:
        # Several instant queries become one row per pool: join on the labels, drop the noise.
        result["transformations"] = [
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": {"Time": True, "__name__": True, **dict.fromkeys(TARGET_LABELS, True)},
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
    elif panel.panel_type == "table":
        result["transformations"] = [
            {
                "id": "organize",
                "options": {
                    "excludeByName": {
                        "Time": True,
                        "__name__": True,
                        "Value": True,
                        **dict.fromkeys(TARGET_LABELS, True),
                    }
                },
            }
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
        # Provisioned from a file or a ConfigMap: edits in the UI would be lost on the next sync.
        "editable": False,
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
