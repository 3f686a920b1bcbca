"""The shipped alert rules: generated from one source, valid for promtool, tested by promtool.

promtool comes from Debian's ``prometheus`` package (``scripts/bootstrap.sh --test``). Without
it these tests skip on a laptop but fail under ``CI=true``: a CI run that silently skipped
the only check of the alert expressions would prove nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fabriccap.observability import alerts, dashboard

REPO_ROOT = Path(__file__).resolve().parents[3]
MONITORING = REPO_ROOT / "monitoring"
RULES_TEST = REPO_ROOT / "tests" / "rules" / "alerts-test.yaml"
SHARDED_RULES_TEST = REPO_ROOT / "tests" / "rules" / "sharded-alerts-test.yaml"
RUNBOOK = REPO_ROOT / "docs" / "runbook.md"
SPEC_ALERTS = {
    "FabricMixedRollout",
    "FabricDevicePluginGap",
    "FabricCapabilityNotReady",
    "FabricCapabilityOperatorDown",
    "FabricCapabilityNoLeader",
    "FabricCapabilityStale",
    "FabricNotRequested",
    "FabricRequestUnschedulable",
    "FabricNotUsed",
    "FabricAdvertiserConflict",
}
# Shipped beyond the SPEC's list: a status write refused, so the object says less than the
# operator knows (review 64-observe F1).
MORE_ALERTS = {"FabricCapabilityStatusWriteRefused"}
SHIPPED_ALERTS = SPEC_ALERTS | MORE_ALERTS


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is not None:
        return found
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
        pytest.fail("promtool is missing under CI: install Debian's prometheus package (scripts/bootstrap.sh --test)")
    pytest.skip("promtool not installed (apt-get install prometheus, or scripts/bootstrap.sh --test)")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False, cwd=REPO_ROOT)


def test_both_renderings_carry_the_same_rules() -> None:
    plain = yaml.safe_load((MONITORING / alerts.RULES_FILE).read_text())
    operator_rule = yaml.safe_load((MONITORING / alerts.PROMETHEUS_RULE_FILE).read_text())
    assert operator_rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert operator_rule["kind"] == "PrometheusRule"
    assert operator_rule["spec"]["groups"] == plain["groups"]


def test_every_spec_alert_is_shipped_with_severity_annotations_and_a_runbook_section() -> None:
    rules = alerts.rules_file()["groups"][0]["rules"]
    assert {rule["alert"] for rule in rules} == SHIPPED_ALERTS
    # GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens.
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in RUNBOOK.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }
    for rule in rules:
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert set(rule["annotations"]) == {"summary", "description", "runbook_url"}, rule["alert"]
        url = rule["annotations"]["runbook_url"]
        assert url.startswith(alerts.RUNBOOK_URL + "#"), url
        assert url.partition("#")[2] in anchors, f"docs/runbook.md has no section for {url}"


def test_for_durations_job_and_threshold_are_configurable() -> None:
    settings = alerts.AlertSettings(
        job="monitoring/fabriccap-metrics",
        stale_after_seconds=120,
        for_all="2s",
        for_overrides={"FabricCapabilityStale": "7s"},
    )
    rules = {rule["alert"]: rule for rule in alerts.rules_file(settings)["groups"][0]["rules"]}
    assert {name: rule["for"] for name, rule in rules.items()} == {
        **dict.fromkeys(SHIPPED_ALERTS, "2s"),
        "FabricCapabilityStale": "7s",
    }
    assert 'up{job="monitoring/fabriccap-metrics"}' in rules["FabricCapabilityOperatorDown"]["expr"]
    assert rules["FabricCapabilityStale"]["expr"].endswith("> 120")
    # Durations named in the text follow the setting, so the page does not lie.
    assert "for 2s" in rules["FabricCapabilityNotReady"]["annotations"]["description"]
    # No placeholder survives rendering.
    assert "@" not in yaml.safe_dump(alerts.rules_file(settings))


def test_cli_writes_both_files(tmp_path: Path) -> None:
    assert alerts.main(["--out", str(tmp_path), "--for-all", "3s", "--for", "FabricCapabilityStale=9s"]) == 0
    plain = yaml.safe_load((tmp_path / alerts.RULES_FILE).read_text())
    durations = {rule["alert"]: rule["for"] for rule in plain["groups"][0]["rules"]}
    assert durations["FabricCapabilityStale"] == "9s"
    assert durations["FabricMixedRollout"] == "3s"
    assert (tmp_path / alerts.PROMETHEUS_RULE_FILE).exists()


@pytest.mark.prometheus
def test_promtool_check_rules() -> None:
    promtool = _promtool()
    result = _run(promtool, "check", "rules", str(MONITORING / alerts.RULES_FILE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(SHIPPED_ALERTS)} rules found" in result.stdout


@pytest.mark.prometheus
def test_promtool_test_rules() -> None:
    promtool = _promtool()
    result = _run(promtool, "test", "rules", str(RULES_TEST))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.prometheus
def test_promtool_test_rules_rendered_for_two_shards(tmp_path: Path) -> None:
    """A shard with no target at all (its pods Pending) while another is up (hostile review
    64-shard F3): the rules as the chart renders them for 2 shards, next to their tests."""
    promtool = _promtool()
    assert alerts.main(["--out", str(tmp_path), "--shards", "2", "--namespace", "fc"]) == 0
    shutil.copy(SHARDED_RULES_TEST, tmp_path / SHARDED_RULES_TEST.name)
    result = _run(promtool, "test", "rules", str(tmp_path / SHARDED_RULES_TEST.name))
    assert result.returncode == 0, result.stdout + result.stderr


def test_unsharded_rules_ask_for_no_shard_and_sharded_ones_for_each() -> None:
    """Unsharded targets carry no `shard`: grouping by it changes nothing, and "no target" is
    the job's absent() as before."""
    unsharded = {rule["alert"]: rule["expr"] for rule in alerts.rules_file()["groups"][0]["rules"]}
    assert unsharded["FabricCapabilityOperatorDown"].endswith('\nabsent(up{job="fabriccap"})')
    sharded = alerts.rules_file(alerts.AlertSettings(shards=3, namespace="fc"))["groups"][0]["rules"]
    (down,) = [rule["expr"] for rule in sharded if rule["alert"] == "FabricCapabilityOperatorDown"]
    assert down.endswith(
        '(absent(up{job="fabriccap",namespace="fc",shard="0"}) or absent(up{job="fabriccap",namespace="fc",shard="1"})'
        ' or absent(up{job="fabriccap",namespace="fc",shard="2"}))'
    )


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        (["--shards", "0"], "'0' is not a shard count: 1 to 64"),
        (["--shards", "-3"], "'-3' is not a shard count"),
        (["--shards", "65", "--namespace", "fc"], "'65' is not a shard count: 1 to 64"),
        (["--shards", "100000", "--namespace", "fc"], "'100000' is not a shard count"),
        (["--shards", "two"], "'two' is not a shard count"),
        (["--shards", "2", "--namespace", 'fc"}'], "is not a namespace (a DNS-1123 label"),
        (["--shards", "2", "--namespace", "x" * 100_000], "is not a namespace"),
        (["--shards", "2"], "--shards above 1 needs --namespace"),
        (["--job", 'fc"} or vector(1)'], "is not a scrape job name PromQL can quote"),
    ],
)
def test_the_generator_refuses_flags_that_make_wrong_rules_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], refused: str
) -> None:
    """--shards 0 or -3 quietly gave unsharded rules, 100000 a 6 MB rules file (run refuses
    more than 64), --namespace 'fc"}' rules that do not parse, and --shards 2 without a
    namespace let another namespace's release mask a Pending shard (hostile review 64b F7)."""
    with pytest.raises(SystemExit) as exit_:
        alerts.main(["--out", str(tmp_path), *flags])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1 and len(error) < 1_000
    assert refused in error
    assert not list(tmp_path.iterdir()), "nothing written"


def test_the_generator_takes_a_podmonitor_job_and_the_largest_shard_count(tmp_path: Path) -> None:
    assert alerts.main(["--out", str(tmp_path), "--job", "fc/fabriccap", "--shards", "64", "--namespace", "fc"]) == 0
    assert 'absent(up{job="fc/fabriccap",namespace="fc",shard="63"})' in (tmp_path / alerts.RULES_FILE).read_text()


@pytest.mark.prometheus
def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    # promtool parses PromQL only inside rules: wrap each panel query in a recording rule,
    # with Grafana's variables replaced by what Grafana would send.
    promtool = _promtool()
    variables = {"$__rate_interval": "1m", "$job": "fabriccap", "$cluster": "", "$fabric": ".+", "$pool": ".+"}
    exprs = []
    for panel in dashboard.dashboard()["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in variables.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, f"unknown variable in panel {panel['title']!r}: {expr}"
            exprs.append(expr)
    rules = {
        "groups": [{"name": "dashboard", "rules": [{"record": f"panel:{i}", "expr": e} for i, e in enumerate(exprs)]}]
    }
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump(rules))
    result = _run(promtool, "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.prometheus
def test_dashboard_pool_and_unpooled_panels_show_one_value_on_a_sharded_install(tmp_path: Path) -> None:
    """The dashboard kept its own "max without (instance, pod)": on a 2-shard install scraped by
    the chart's ServiceMonitor (target label `shard`) "Unpooled target nodes" showed shard 0's
    count and shard 1's 0, and a pool exported by both shards during a change of `shards`
    showed twice (hostile review 64b F3)."""
    promtool = _promtool()
    variables = {"$job": "fabriccap", "$cluster": "", "$fabric": ".+", "$pool": ".+"}

    def panel_query(title: str) -> str:
        (panel,) = [panel for panel in dashboard.dashboard()["panels"] if panel["title"] == title]
        expr = str(panel["targets"][0]["expr"])
        for variable, value in variables.items():
            expr = expr.replace(variable, value)
        return expr

    target = 'job="fabriccap",namespace="fc"'
    pool = 'fabric="efa",pool="p5",name="efa-p5"'
    suite = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f'fabriccap_unpooled_nodes{{{target},instance="a:8080",shard="0"}}', "values": "5x10"},
                    {"series": f'fabriccap_unpooled_nodes{{{target},instance="b:8080",shard="1"}}', "values": "0x10"},
                    # p5 moves from shard 1 to shard 0 (a change of `shards`): both export it.
                    {
                        "series": f'fabriccap_pool_ready{{{target},{pool},instance="a:8080",shard="0"}}',
                        "values": "1x10",
                    },
                    {
                        "series": f'fabriccap_pool_ready{{{target},{pool},instance="c:8080",shard="1"}}',
                        "values": "1x10",
                    },
                ],
                "promql_expr_test": [
                    {
                        "expr": panel_query("Unpooled target nodes"),
                        "eval_time": "5m",
                        "exp_samples": [{"labels": f"{{{target}}}", "value": 5}],
                    },
                    {
                        "expr": panel_query("Pool readiness"),
                        "eval_time": "5m",
                        "exp_samples": [{"labels": f"{{{target},{pool}}}", "value": 1}],
                    },
                ],
            }
        ],
    }
    path = tmp_path / "dashboard-sharded-test.yaml"
    path.write_text(yaml.safe_dump(suite))
    result = _run(promtool, "test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_rule_tests_cover_every_alert_firing_and_quiet() -> None:
    suite = yaml.safe_load(RULES_TEST.read_text(encoding="utf-8"))
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in suite["tests"]:
        for check in case["alert_rule_test"]:
            (fired if check["exp_alerts"] else quiet).add(check["alertname"])
    assert fired == SHIPPED_ALERTS
    assert quiet == SHIPPED_ALERTS
