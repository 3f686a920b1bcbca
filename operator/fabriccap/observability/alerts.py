"""The shipped Prometheus alert rules, declared once as data and rendered two ways.

``monitoring/fabriccap-alerts.rules.yaml`` (a plain rules file for ``rule_files:``) and
``monitoring/prometheusrule.yaml`` (a Prometheus Operator ``PrometheusRule``) are both
rendered from ``ALERTS`` below, so they cannot drift apart; a unit test fails when the
committed files differ from what this module renders. Regenerate them with::

    python -m fabriccap.alerts --out monitoring/

Expressions and annotations are Prometheus text with ``@name`` placeholders (``@job``,
``@for``, ``@stale_after``, ``@watch_stale_after``, ``@no_target``) filled in from
``AlertSettings``; ``@`` appears in neither these PromQL expressions nor Go templates, so it
cannot collide with ``{{ $labels }}``.
"""

from __future__ import annotations

import argparse
import string
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from fabriccap.core.names import is_dns_label
from fabriccap.core.shard import MAX_SHARDS
from fabriccap.core.text import clean_text
from fabriccap.inputfile import bounded_line
from fabriccap.observability.generated import generated_header
from fabriccap.observability.generated import to_yaml as render_yaml
from fabriccap.observability.targets import PER_POOL, SHARD_TARGET_LABEL

RUNBOOK_URL = "https://github.com/fabriccap/fabriccap/blob/main/docs/runbook.md"
RULES_FILE = "fabriccap-alerts.rules.yaml"
PROMETHEUS_RULE_FILE = "prometheusrule.yaml"
GROUP_NAME = "fabriccap"
GENERATED_HEADER = generated_header(__name__)


@dataclass(frozen=True)
class AlertRule:
    name: str
    expr: str
    for_: str  # the default `for:`; AlertSettings may override it
    severity: str
    summary: str
    description: str
    anchor: str  # section of docs/runbook.md

    @property
    def runbook_url(self) -> str:
        return f"{RUNBOOK_URL}#{self.anchor}"


@dataclass(frozen=True)
class AlertSettings:
    """What differs between installations (and between production and the end-to-end test)."""

    job: str = "fabriccap"  # the scrape job's name; OperatorDown can only see the job it names
    stale_after_seconds: int = 900
    # Watches hear from the API server at least every minute (a renewed watch counts).
    watch_stale_after_seconds: int = 300
    for_all: str | None = None  # one `for:` for every alert (tests use a few seconds)
    for_overrides: Mapping[str, str] = field(default_factory=dict)  # alert name -> `for:`
    # Sharded (chart sharding.shards, run --shards): how many shards, and the namespace their
    # targets are in. With more than one, "no target" is asked per shard (``no_target``).
    shards: int = 1
    namespace: str = ""
    # What stands for "no target" instead (helm_rules: the chart fills it in once it knows the
    # shard count, its namespace and whether its own ServiceMonitor, which adds `shard`, scrapes).
    no_target_placeholder: str | None = None

    def for_duration(self, rule: AlertRule) -> str:
        return self.for_overrides.get(rule.name) or self.for_all or rule.for_


def shard_target(job: str, namespace: str, shard: str) -> str:
    """The `up` series of one shard's targets, as OperatorDown asks for it when sharded."""
    namespace_matcher = f',namespace="{namespace}"' if namespace else ""
    return f'up{{job="{job}"{namespace_matcher},{SHARD_TARGET_LABEL}="{shard}"}}'


def no_target(settings: AlertSettings) -> str:
    """OperatorDown's "nothing scraped": unsharded, no target of the job at all; sharded, no
    target of some shard (all its pods Pending, say, so not even up=0 exists for it), one
    alert per such shard. Prometheus cannot count to N, but whoever renders the rules knows it."""
    if settings.no_target_placeholder is not None:
        return settings.no_target_placeholder
    if settings.shards <= 1:
        return f'absent(up{{job="{settings.job}"}})'
    terms = (f"absent({shard_target(settings.job, settings.namespace, str(i))})" for i in range(settings.shards))
    return "(" + " or ".join(terms) + ")"


def pool_series(metric: str, matchers: str = "") -> str:
    """``metric`` of every pool, one series per pool whatever the number of replicas."""
    return f'{PER_POOL} ({metric}{{job="@job"{"," + matchers if matchers else ""}}})'


def _pool_value(metric: str, matchers: str = "") -> str:
    """A Go-template snippet printing ``metric`` of the alert's own pool (same job and name)."""
    selector = f"{PER_POOL} ({metric}{{{matchers}job=%q,name=%q}})"
    return (
        f'{{{{ with printf "{selector}" $labels.job $labels.name | query }}}}{{{{ . | first | value }}}}{{{{ end }}}}'
    )


_POOL = "FabricCapability {{ $labels.name }} (fabric {{ $labels.fabric }}, pool {{ $labels.pool }})"

# Nodes per advertised count, e.g. "0: 1, 32: 3" (sorted as strings: Go templates cannot sort numerically).
_COUNT_DISTRIBUTION = (
    f'{{{{ range $i, $s := printf "{PER_POOL} (fabriccap_pool_nodes_by_allocatable{{job=%q,name=%q}})" '
    '$labels.job $labels.name | query | sortByLabel "allocatable" }}'
    "{{ if $i }}, {{ end }}{{ $s.Labels.allocatable }}: {{ $s.Value }}{{ end }}"
)

# The pool means to carry the fabric: some node advertises it, or runs a Ready device plugin
# (it then advertises, or is a plugin-ready-not-advertised gap). A GPU inference pool of
# g6.12xlarge (maximum 1, never wired) shows neither.
_INTENDS_FABRIC = (
    "(" + pool_series("fabriccap_pool_advertising_nodes") + " > 0\n"
    " or " + pool_series("fabriccap_pool_gap_nodes", 'kind="plugin_ready_not_advertised"') + " > 0\n"
    # Or workloads already ask for it there: a pool nobody wired for EFA, running jobs that
    # request it, is exactly a pool that must become Ready.
    " or " + pool_series("fabriccap_pool_workload_pods", 'use="requesting_fabric"') + " > 0)"
)

ALERTS: tuple[AlertRule, ...] = (
    AlertRule(
        name="FabricMixedRollout",
        expr=pool_series("fabriccap_pool_condition", 'condition="Homogeneous",status="false"') + " == 1",
        # A node that just joined needs its device plugin to start before it advertises;
        # that takes a minute or two, a real mixed rollout stays.
        for_="10m",
        severity="warning",
        summary="Nodes of pool {{ $labels.pool }} advertise different {{ $labels.fabric }} counts.",
        description=(
            f"{_POOL}: the gate-set nodes do not all advertise the same count of the fabric resource"
            f" (count: nodes = {_COUNT_DISTRIBUTION}), so fabric wiring must stay off for this pool."
            " `kubectl describe fcap {{ $labels.name }}` names the offending nodes."
        ),
        anchor="fabricmixedrollout",
    ),
    AlertRule(
        name="FabricDevicePluginGap",
        expr=pool_series("fabriccap_pool_gap_nodes", 'kind="plugin_ready_not_advertised"') + " > 0",
        for_="10m",
        severity="warning",
        summary="{{ $value }} node(s) of pool {{ $labels.pool }} run a Ready {{ $labels.fabric }} device plugin"
        " but advertise none.",
        description=(
            f"{_POOL}: {{{{ $value }}}} node(s) have a Ready device-plugin pod and allocatable 0: the provider"
            " is present, the capability is not (wrong instance type, devices not attached, or the plugin"
            " cannot see them). `kubectl get fcap {{ $labels.name }} -o jsonpath='{.status.gap.nodes}'`"
            " lists them."
        ),
        anchor="fabricdeviceplugingap",
    ),
    AlertRule(
        name="FabricAdvertiserConflict",
        expr=pool_series("fabriccap_pool_gap_nodes", 'kind="conflicting_advertisers"') + " > 0",
        # Unlike a rollout in progress, two advertisers on one node do not sort themselves out,
        # and every minute a job may be handed devices another already holds.
        for_="5m",
        severity="critical",
        summary="{{ $value }} node(s) of pool {{ $labels.pool }} advertise {{ $labels.fabric }} through both a"
        " device plugin and a DRA driver.",
        description=(
            f"{_POOL}: {{{{ $value }}}} node(s) advertise the fabric in node allocatable (a device plugin) and"
            " in ResourceSlices (a DRA driver) at once: the scheduler can give the same devices to a pod that"
            " requests the extended resource and to a ResourceClaim (AWS: silent oversubscription). Remove one"
            " of the two from these nodes. `kubectl get fcap {{ $labels.name }} -o jsonpath='{.status.gap.nodes}'`"
            " lists them."
        ),
        anchor="fabricadvertiserconflict",
    ),
    AlertRule(
        name="FabricCapabilityNotReady",
        # Stalled pools (instance types that cannot carry the fabric, or an unsupported mix)
        # will not become Ready by waiting; kstatus already reports them as Failed. Pools that
        # do not mean to carry the fabric (inference, web) are not paged about at all.
        expr=(
            pool_series("fabriccap_pool_ready") + " == 0\n"
            "unless on (job, name) "
            + pool_series("fabriccap_pool_condition", 'condition="Stalled",status="true"')
            + " == 1\n"
            "and on (job, name) " + _INTENDS_FABRIC
        ),
        for_="30m",
        severity="warning",
        summary="FabricCapability {{ $labels.name }} has not been Ready for @for.",
        description=(
            f"{_POOL} has not been Ready for @for: the fabric resource is advertised on"
            f" {_pool_value('fabriccap_pool_advertising_nodes')} of {_pool_value('fabriccap_pool_nodes')}"
            " schedulable target nodes. Workloads gated on this pool stay without fabric wiring."
            " `kubectl get fcap {{ $labels.name }}` shows the reason."
        ),
        anchor="fabriccapabilitynotready",
    ),
    AlertRule(
        name="FabricCapabilityOperatorDown",
        # Down (every target's up is 0) or gone (no target discovered, e.g. the ServiceMonitor
        # selects nothing); both branches keep the `job` label for routing. Per namespace too:
        # every release's Service scrapes as one job (app.kubernetes.io/name), and a healthy
        # release's max would hide a dead one (series without a namespace form one group). And
        # per shard: a shard whose replicas all crash-loop while another is up froze its pools
        # silently. Unsharded targets carry no `shard`, so the groups are the same as before.
        expr='max by (job, namespace, shard) (up{job="@job"}) == 0\nor\n@no_target',
        for_="10m",
        severity="critical",
        summary="The fabriccap operator is down or not scraped (job @job).",
        description=(
            'No target of the scrape job "@job" has been up for @for. FabricCapability status is frozen at'
            " its last value and the fabriccap_* metrics are gone, so gates that read the status may admit"
            " pools whose nodes changed since. Sharded, the label shard says whose pools are frozen."
        ),
        anchor="fabriccapabilityoperatordown",
    ),
    AlertRule(
        name="FabricCapabilityNoLeader",
        # No replica of a shard leads (every one reports 0, or none reports at all while the job
        # is up): a holder that is no replica of this install keeps renewing the Lease, or the
        # Lease cannot be written (RBAC). Nothing of that shard's pools is published; unsharded,
        # the one shard is 0. While the job itself is down, OperatorDown says so: this one stays quiet.
        # Per namespace, as OperatorDown: releases in two namespaces (a Lease each) share the job.
        expr=(
            "(\n  max by (job, namespace, shard) (\n"
            '    fabriccap_leader{job="@job"}\n'
            "    * on (job, namespace, instance) group_left (shard)\n"
            '    fabriccap_shard_info{job="@job"}\n'
            "  ) == 0\n"
            '  or\n  absent(fabriccap_leader{job="@job"})\n)\n'
            "unless on (job, namespace)\n"
            '(max by (job, namespace) (up{job="@job"}) == 0 or absent(up{job="@job"}))'
        ),
        for_="5m",
        severity="critical",
        summary="No fabriccap replica leads (job @job): nothing is being published.",
        description=(
            'No replica of the scrape job "@job" has held the leader Lease for @for, so no FabricCapability'
            " is written, created or deleted: their status is frozen at its last value, whatever the nodes do"
            " (every replica's fabriccap_publishing reads 0). Another holder keeps renewing the Lease, or the"
            " replicas cannot write it. Sharded (run --shard), the label shard says whose pools are frozen."
        ),
        anchor="fabriccapabilitynoleader",
    ),
    AlertRule(
        name="FabricCapabilityStale",
        # Two ways an operator that answers scrapes stops describing the cluster: its watches no
        # longer hear from the API server (a partition; evaluations would go on over old facts),
        # or its evaluation loop is stuck.
        expr=(
            'time() - min by (job, instance) (fabriccap_watch_last_event_timestamp_seconds{job="@job"})'
            " > @watch_stale_after\n"
            "or\n"
            'time() - max by (job, instance) (fabriccap_last_evaluation_timestamp_seconds{job="@job"})'
            " > @stale_after"
        ),
        for_="5m",
        severity="warning",
        summary="The fabriccap operator {{ $labels.instance }} is working from stale data.",
        description=(
            "The fabriccap operator {{ $labels.instance }} (job {{ $labels.job }}) has gone"
            " {{ $value | humanizeDuration }} without fresh data: its watches have made no progress (no"
            " completed LIST, no event or bookmark that advanced their resourceVersion) for over"
            " @{watch_stale_after}s, or it has not evaluated its pools for over"
            " @{stale_after}s. It is up, but cut off from the API server or stuck, so FabricCapability status"
            " may no longer describe the nodes (fabriccap_pool_ready reads 0 meanwhile)."
        ),
        anchor="fabriccapabilitystale",
    ),
    AlertRule(
        name="FabricNotRequested",
        expr=pool_series("fabriccap_pool_workload_pods", 'use="without_fabric"') + " > 0",
        # A job's pods are created before a user notices; 15 minutes of GPUs talking over TCP
        # is a real job, not a rollout in progress.
        for_="15m",
        severity="warning",
        summary="{{ $value }} pod(s) on pool {{ $labels.pool }} use accelerators without {{ $labels.fabric }}.",
        description=(
            f"{_POOL} advertises the fabric, but {{{{ $value }}}} pod(s) bound to its nodes request an"
            " accelerator and not the fabric: NCCL falls back to TCP sockets, silently and slowly."
            " `kubectl get fcap {{ $labels.name }} -o jsonpath='{.status.workloads.offenders}'` names the"
            " workloads; a Warning Event (FabricNotRequested) on each says what to request and where."
        ),
        anchor="fabricnotrequested",
    ),
    AlertRule(
        name="FabricNotUsed",
        # Pods that request the fabric while their own NCCL log shows sockets (only while
        # transport is read). As for FabricNotRequested: 15 minutes is a running job, and a
        # job restarted with a fixed image within that time never fires.
        expr=pool_series("fabriccap_pool_transport_pods", 'transport="socket",request="fabric"') + " > 0",
        for_="15m",
        severity="warning",
        summary="{{ $value }} pod(s) on pool {{ $labels.pool }} request {{ $labels.fabric }}"
        " but NCCL uses TCP sockets.",
        description=(
            f"{_POOL}: {{{{ $value }}}} pod(s) request the fabric and hold its devices, but NCCL's own log"
            " shows it chose its TCP sockets (NET/Socket): the image lacks the fabric's NCCL plugin"
            " (aws-ofi-nccl for EFA) or it failed to load. The job runs, slowly."
            " `kubectl get fcap {{ $labels.name }} -o jsonpath='{.status.workloads.offenders}'` names the"
            " workloads (problem FabricNotUsed); a Warning Event (FabricNotUsed) on each quotes the log line"
            " and the likely cause."
        ),
        anchor="fabricnotused",
    ),
    AlertRule(
        name="FabricRequestUnschedulable",
        expr='max without (instance, pod, shard) (fabriccap_unschedulable_fabric_pods{job="@job"}) > 0',
        for_="10m",
        severity="warning",
        summary="{{ $value }} pod(s) request {{ $labels.fabric }} that no node can give them.",
        description=(
            "{{ $value }} Pending pod(s) request the {{ $labels.fabric }} fabric and the scheduler found no"
            " node with enough of it: they stay Pending until a pool offers the count they ask for. A"
            " Warning Event (FabricUnschedulable) on each workload names the pools that could take the"
            " request, or says that none can."
        ),
        anchor="fabricrequestunschedulable",
    ),
    AlertRule(
        name="FabricCapabilityStatusWriteRefused",
        # A refused status is retried after about a minute, then up to every 5 minutes: 10
        # minutes is a refusal that outlived a few retries, not a webhook's brief hiccup.
        expr='max without (instance, pod) (fabriccap_status_writes_refused{job="@job"}) > 0',
        for_="10m",
        severity="warning",
        summary="The API server refuses the newest status of {{ $value }} FabricCapabilities.",
        description=(
            "The operator's status writes of {{ $value }} FabricCapabilities have been refused as invalid"
            " (400 or 422) for 10 minutes: most often an admission policy or webhook denying updates of"
            " fabriccapabilities/status. Those objects show an older status, or, where that said Ready and"
            " the refused one differs in what gates and jobs act on (Ready, the count, the"
            " recommendation), a summary with Ready=False (StatusWriteRefused). The operator's log"
            " quotes the refusal."
        ),
        anchor="fabriccapabilitystatuswriterefused",
    ),
)


class _Placeholders(string.Template):
    delimiter = "@"


def _fill(text: str, rule: AlertRule, settings: AlertSettings) -> str:
    return _Placeholders(text).substitute(
        no_target=no_target(settings),
        job=settings.job,
        stale_after=str(settings.stale_after_seconds),
        watch_stale_after=str(settings.watch_stale_after_seconds),
        **{"for": settings.for_duration(rule)},
    )


def rule_group(settings: AlertSettings | None = None) -> dict[str, Any]:
    """The one rule group both renderings share."""
    settings = settings or AlertSettings()
    rules = [
        {
            "alert": rule.name,
            "expr": _fill(rule.expr, rule, settings),
            "for": settings.for_duration(rule),
            "labels": {"severity": rule.severity},
            "annotations": {
                "summary": _fill(rule.summary, rule, settings),
                "description": _fill(rule.description, rule, settings),
                "runbook_url": rule.runbook_url,
            },
        }
        for rule in ALERTS
    ]
    return {"name": GROUP_NAME, "rules": rules}


def rules_file(settings: AlertSettings | None = None) -> dict[str, Any]:
    """A plain Prometheus rules file (``rule_files:``)."""
    return {"groups": [rule_group(settings)]}


def prometheus_rule(settings: AlertSettings | None = None, name: str = "fabriccap") -> dict[str, Any]:
    """A Prometheus Operator ``PrometheusRule``; add the labels your Prometheus' ruleSelector wants."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/name": "fabriccap", "app.kubernetes.io/component": "alerts"},
        },
        "spec": {"groups": [rule_group(settings)]},
    }


def to_yaml(document: Mapping[str, Any]) -> str:
    return render_yaml(document, GENERATED_HEADER)


def rendered_files(settings: AlertSettings | None = None) -> dict[str, str]:
    """File name -> content, as committed under monitoring/."""
    return {
        RULES_FILE: to_yaml(rules_file(settings)),
        PROMETHEUS_RULE_FILE: to_yaml(prometheus_rule(settings)),
    }


def _parse_override(text: str) -> tuple[str, str]:
    name, sep, duration = text.partition("=")
    known = {rule.name for rule in ALERTS}
    if not sep or name not in known:
        raise argparse.ArgumentTypeError(f"expected ALERT=DURATION with ALERT one of {', '.join(sorted(known))}")
    return name, duration


# A usage error: one line, as the fabriccap command's (cli.commands.EXIT_USAGE).
EXIT_USAGE = 2
# The most of a refused flag's value shown back in its error.
MAX_SHOWN_VALUE = 100


class _Parser(argparse.ArgumentParser):
    """Usage errors on one ``error: …`` line, as the fabriccap command's (``CommandParser``)."""

    def error(self, message: str) -> NoReturn:
        hint = f" (see '{self.prog} --help')"
        self.exit(EXIT_USAGE, f"error: {bounded_line(message + hint)}\n")


def _shard_count(text: str) -> int:
    """--shards: 1 to MAX_SHARDS, as ``fabriccap run --shards`` takes; 0 or -3 quietly gave
    unsharded rules, and 100,000 a 6 MB rules file."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_SHARDS:
        raise argparse.ArgumentTypeError(
            f"{clean_text(text, MAX_SHOWN_VALUE)!r} is not a shard count: 1 to {MAX_SHARDS}, as run --shards"
        )
    return count


def _namespace(text: str) -> str:
    """--namespace: a DNS-1123 label, as every namespace is; it is quoted into PromQL, and
    'fc"}' gave rules that do not parse."""
    if not is_dns_label(text):
        raise argparse.ArgumentTypeError(
            f"{clean_text(text, MAX_SHOWN_VALUE)!r} is not a namespace"
            " (a DNS-1123 label: lowercase letters, digits, '-')"
        )
    return text


def _job(text: str) -> str:
    """--job: any label value PromQL quotes as it is (a PodMonitor's job is "namespace/name"),
    so no quote, backslash or control character."""
    if not text or '"' in text or "\\" in text or not text.isprintable():
        raise argparse.ArgumentTypeError(
            f"{clean_text(text, MAX_SHOWN_VALUE)!r} is not a scrape job name PromQL can quote "
            "(no quote, backslash or control character)"
        )
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="python -m fabriccap.alerts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, metavar="DIR", help="directory to write the rule files into")
    parser.add_argument(
        "--job", type=_job, default=AlertSettings.job, help="scrape job of the operator (default: %(default)s)"
    )
    parser.add_argument(
        "--stale-after", type=int, default=AlertSettings.stale_after_seconds, metavar="SECONDS", dest="stale_after"
    )
    parser.add_argument(
        "--shards",
        type=_shard_count,
        default=AlertSettings.shards,
        metavar="N",
        help=f"sharded (run --shards N, 1 to {MAX_SHARDS}): alert on each shard with no target; needs the"
        " `shard` target label and --namespace",
    )
    parser.add_argument(
        "--namespace",
        type=_namespace,
        default=None,
        help="the operator's namespace (sharded: its targets' namespace; required with --shards above 1)",
    )
    parser.add_argument("--for-all", metavar="DURATION", help="one `for:` for every alert")
    parser.add_argument(
        "--for", dest="overrides", action="append", default=[], type=_parse_override, metavar="ALERT=DURATION"
    )
    args = parser.parse_args(argv)
    if args.shards > 1 and not args.namespace:
        # Without it, another namespace's release scraped under the same job masks a shard
        # whose pods are all Pending.
        parser.error("--shards above 1 needs --namespace, the namespace of the operator's targets")
    settings = AlertSettings(
        job=args.job,
        stale_after_seconds=args.stale_after,
        for_all=args.for_all,
        for_overrides=dict(args.overrides),
        shards=args.shards,
        namespace=args.namespace or "",
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, content in rendered_files(settings).items():
        (out / name).write_text(content, encoding="utf-8")
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
