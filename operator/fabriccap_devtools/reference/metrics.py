"""docs/reference/metrics.md: every metric family, from the operator's own registry.

The families are those an ``OperatorMetrics`` registry collects, in its order, with their
type and help; the pool families' labels come from their declarations (``POOL_FAMILIES``),
the operator families' from the metric objects themselves, and the pool families' label values
from exposing the example cluster's pools through the same collector. A family declared in
``fabriccap.controller.metrics`` appears here at ``make generate``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from fabriccap.controller.metrics import POOL_FAMILIES, POOL_LABELS, OperatorMetrics, PoolCollector
from fabriccap_devtools.reference.markdown import code, header, table
from fabriccap_devtools.reference.running import run_cli

SOURCE = "operator/fabriccap/controller/metrics.py"
PROJECT_PREFIX = "fabriccap_"


@dataclass(frozen=True)
class Family:
    name: str  # as declared; counters are exposed with _total, histograms with _bucket, _sum, _count
    type: str
    help: str
    labels: tuple[str, ...]
    declared: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # label -> its values, where fixed

    @property
    def exposed(self) -> tuple[str, ...]:
        if self.type == "counter":
            return (f"{self.name}_total",)
        if self.type == "histogram":
            return tuple(f"{self.name}_{suffix}" for suffix in ("bucket", "sum", "count"))
        return (self.name,)

    @property
    def is_pool_family(self) -> bool:
        return self.labels[: len(POOL_LABELS)] == POOL_LABELS


def families() -> list[Family]:
    """The project's families, in the registry's order."""
    metrics = OperatorMetrics()
    declared_labels = {family.name: (*POOL_LABELS, *family.extra_labels) for family in POOL_FAMILIES}
    declared_values = {family.name: family.label_values for family in POOL_FAMILIES}
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            declared_labels[value._name] = tuple(value._labelnames)
    return [
        Family(
            metric.name,
            metric.type,
            metric.documentation,
            declared_labels.get(metric.name, ()),
            declared_values.get(metric.name, {}),
        )
        for metric in metrics.families()
        if metric.name.startswith(PROJECT_PREFIX)
    ]


def pool_label_values(snapshot: Path) -> dict[tuple[str, str], list[str]]:
    """(family, label) -> the values the pool families take for the example cluster's pools."""
    objects = json.loads(run_cli(["evaluate", "-f", str(snapshot), "-o", "json"]))["items"]
    collector = PoolCollector()
    for obj in objects:
        status = obj["status"]
        collector.set_pool(obj["metadata"]["name"], status["fabric"], status["pool"]["value"], status)
    values: dict[tuple[str, str], set[str]] = {}
    for metric in collector.collect():
        for sample in metric.samples:
            for label, value in sample.labels.items():
                if label not in POOL_LABELS:
                    values.setdefault((metric.name, label), set()).add(value)
    return {key: sorted(found) for key, found in values.items()}


def _values_text(values: Sequence[str]) -> str:
    if all(value.isdigit() for value in values):
        return "a count, e.g. " + code(max(values, key=int, default="0"))
    return ", ".join(code(value) for value in values)


def _pool_rows(pool_families: list[Family], label_values: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    rows = []
    for family in pool_families:
        extra = family.labels[len(POOL_LABELS) :]
        labels = "; ".join(
            f"{code(label)}: "
            + _values_text(list(family.declared.get(label, ())) or label_values.get((family.name, label), []))
            for label in extra
        )
        rows.append([code(family.name), family.type, labels, family.help])
    return rows


def _operator_rows(operator_families: list[Family]) -> list[list[str]]:
    return [
        [
            "<br>".join(code(name) for name in family.exposed),
            family.type,
            ", ".join(code(label) for label in family.labels),
            family.help,
        ]
        for family in operator_families
    ]


def render(snapshot: Path) -> str:
    found = families()
    pool = [family for family in found if family.is_pool_family]
    operator = [family for family in found if not family.is_pool_family]
    label_values = pool_label_values(snapshot)
    pool_labels = ", ".join(code(label) for label in POOL_LABELS)
    return (
        header("Metrics", SOURCE)
        + "\nThe operator serves Prometheus metrics in the text format at `/metrics` on `--metrics-port`"
        " (default 8080). What the shipped alerts do with them: [alerts.md](alerts.md); queries and the"
        " dashboard: [observability.md](../observability.md).\n\n"
        "## Pool families\n\n"
        f"One series per FabricCapability, labelled {pool_labels} (the FabricCapability's name, its fabric and"
        " its pool label's value), plus the labels listed. They are computed at scrape time from the statuses"
        " the operator published last, so a deleted FabricCapability's series disappear with it. Every replica"
        " exports them, leader or not.\n\n"
        + table(["metric", "type", "more labels", "meaning"], _pool_rows(pool, label_values))
        + "\n## Operator families\n\n"
        "About the operator process itself. A counter is exposed with `_total`, a histogram as `_bucket`, `_sum`"
        " and `_count`.\n\n"
        + table(["metric", "type", "labels", "meaning"], _operator_rows(operator))
        + "\nThe standard `process_*` and `python_*` families of the Prometheus Python client are exposed"
        " too.\n"
    )
