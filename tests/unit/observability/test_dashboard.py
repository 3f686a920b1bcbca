"""The shipped dashboard works for more than one install: the rules of Grafana's dashboard
linter that matter here, checked on the generated dashboard (the linter itself is not
served by any registry reachable from CI).

- every query selects by the ``$job`` and ``$cluster`` variables (a cluster variable that is
  empty where series carry no ``cluster`` label: ``cluster=~""`` matches those);
- every panel says what it shows (a description);
- the data source is a variable, used by every panel, target and variable;
- the dashboard is not editable (provisioned dashboards are overwritten on restart);
- multi-value variables with "All" use ``allValue: ".+"`` (``.*`` also matches series
  without the label);
- pool series are taken ``max without (instance, pod)``: every replica exports them.

The selector scan is a small PromQL tokenizer; its own tests below show it finds what a
missing matcher looks like, so a dashboard without them fails.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from fabriccap.observability import dashboard

JOB = 'job=~"$job"'
CLUSTER = 'cluster=~"$cluster"'
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Keywords that take a parenthesised list of label names rather than an expression.
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
OPERATORS = {"and", "or", "unless", "bool", "offset", "atan2"}
TOKEN = re.compile(
    r'"(?:\\.|[^"\\])*"'  # a string
    r"|\[[^\]]*\]"  # a range or subquery
    r'|\{(?:"(?:\\.|[^"\\])*"|[^}"])*\}'  # matchers (a "}" may be inside a value)
    r"|[A-Za-z_:][A-Za-z0-9_:]*"  # a name
    r"|\S"
)
MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:\\.|[^"\\])*")\s*,?')

Selector = tuple[str, tuple[str, ...]]


def selectors(expr: str) -> list[Selector]:
    """Every vector selector of a PromQL expression: (metric name, matchers as written)."""
    tokens = TOKEN.findall(expr)
    found: list[Selector] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        following = tokens[index + 1] if index + 1 < len(tokens) else ""
        if token in LABEL_LIST_KEYWORDS and following == "(":
            index = tokens.index(")", index)  # label lists hold no selector
        elif token.startswith("{"):
            found.append(("", _matchers(token)))
        elif re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", token) and token not in LABEL_LIST_KEYWORDS | OPERATORS:
            if following == "(" or following in ("by", "without"):
                pass  # a function or an aggregation (`sum by (le) (...)`)
            elif following.startswith("{"):
                found.append((token, _matchers(following)))
                index += 1
            else:
                found.append((token, ()))
        index += 1
    return found


def _matchers(braces: str) -> tuple[str, ...]:
    body = braces[1:-1]
    matchers = tuple(f"{name}{op}{value}" for name, op, value in MATCHER.findall(body))
    assert "".join(MATCHER.sub("", body).split()) == "", f"unparsed matchers in {braces}"
    return matchers


def test_the_selector_scan_finds_selectors_and_their_matchers() -> None:
    assert selectors('sum by (le) (rate(m_bucket{job=~"$job"}[$__rate_interval]))') == [("m_bucket", (JOB,))]
    assert selectors("time() - m") == [("m", ())]
    assert selectors('max without (instance, pod) (a{x="1,}"}) == 0 unless on (job, name) b > 1') == [
        ("a", ('x="1,}"',)),
        ("b", ()),
    ]
    assert selectors('up{job=~"$job", cluster=~"$cluster"}') == [("up", (JOB, CLUSTER))]


def _panels() -> list[dict[str, Any]]:
    return [panel for panel in dashboard.dashboard()["panels"] if panel["type"] != "row"]


def _queries() -> Iterator[tuple[str, str]]:
    for panel in _panels():
        for target in panel["targets"]:
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for variable in dashboard.dashboard()["templating"]["list"]:
        if variable["type"] == "query" and variable["name"] not in ("cluster", "job"):
            # label_values(SELECTOR, LABEL): the selector is the query.
            match = re.fullmatch(r"label_values\((.*),\s*\w+\)", variable["query"]["query"])
            assert match, variable["query"]["query"]
            yield f"variable {variable['name']}", match.group(1)


QUERIES = list(_queries())


def unfiltered(expr: str, required: str) -> list[str]:
    return [name or "{...}" for name, matchers in selectors(expr) if required not in matchers]


@pytest.mark.parametrize(("where", "expr"), QUERIES, ids=[where for where, _ in QUERIES])
def test_every_query_selects_by_job_and_cluster(where: str, expr: str) -> None:
    assert selectors(expr), f"{where}: no selector found in {expr}"
    assert unfiltered(expr, JOB) == [], f"{where}: without {JOB}: {expr}"
    assert unfiltered(expr, CLUSTER) == [], f"{where}: without {CLUSTER}: {expr}"


def test_the_check_fails_a_query_without_the_variables() -> None:
    # The control, on queries as the dashboard had them before these rules.
    assert unfiltered("time() - fabriccap_last_evaluation_timestamp_seconds", JOB) == [
        "fabriccap_last_evaluation_timestamp_seconds"
    ]
    assert unfiltered('up{job=~"$job"}', CLUSTER) == ["up"]


def test_the_job_and_cluster_variables_chain() -> None:
    variables = {variable["name"]: variable for variable in dashboard.dashboard()["templating"]["list"]}
    cluster, job = variables["cluster"], variables["job"]
    assert cluster["query"]["query"] == "label_values(fabriccap_build_info, cluster)"
    assert job["query"]["query"] == f"label_values(fabriccap_build_info{{{CLUSTER}}}, job)"
    # One cluster and one install at a time: "All" clusters would mix their pools, and "All"
    # jobs (".+") would select every scrape job's `up`.
    for variable in (cluster, job):
        assert variable["multi"] is False and variable["includeAll"] is False, variable["name"]
    names = [variable["name"] for variable in variables.values()]
    assert names.index("cluster") < names.index("job") < names.index("fabric") < names.index("pool")


def test_every_panel_has_a_description() -> None:
    missing = [panel["title"] for panel in _panels() if not panel.get("description", "").strip()]
    assert missing == []


def _datasources(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        if "datasource" in node:
            yield node["datasource"]
        for value in node.values():
            yield from _datasources(value)
    elif isinstance(node, list):
        for value in node:
            yield from _datasources(value)


def test_the_datasource_is_a_variable_used_everywhere() -> None:
    board = dashboard.dashboard()
    variables = {variable["name"]: variable for variable in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    used = list(_datasources(board["panels"])) + list(_datasources(board["templating"]["list"]))
    assert used and all(reference == DATASOURCE for reference in used), used
    for panel in _panels():
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert all(target["datasource"] == DATASOURCE for target in panel["targets"]), panel["title"]


def test_the_dashboard_is_not_editable() -> None:
    assert dashboard.dashboard()["editable"] is False


def test_multi_value_all_variables_use_dot_plus() -> None:
    variables = [v for v in dashboard.dashboard()["templating"]["list"] if v.get("includeAll")]
    assert {variable["name"] for variable in variables} == {"fabric", "pool"}
    for variable in variables:
        assert variable["multi"] is True
        assert variable["allValue"] == ".+", variable["name"]


def test_pool_series_count_once_whatever_the_replicas_and_shards() -> None:
    """As the alerts count them (one PER_POOL): sharded, the targets carry `shard` too."""
    for where, expr in QUERIES:
        if where.startswith("panel") and ("fabriccap_pool_" in expr or "fabriccap_unpooled_" in expr):
            assert expr.startswith("max without (instance, pod, shard) ("), f"{where}: {expr}"


def test_panel_ids_are_unique_and_panels_fit_the_grid() -> None:
    panels = dashboard.dashboard()["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        position = panel["gridPos"]
        assert position["x"] + position["w"] <= dashboard.GRID_WIDTH, panel["title"]
