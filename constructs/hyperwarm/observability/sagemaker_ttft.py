"""Time to first token of a SageMaker production variant: a PromQL alarm, a chart, and the queries behind them.

SageMaker's ``AWS/SageMaker`` namespace has no TTFT metric. Detailed observability stores the serving
container's own TTFT histogram (vLLM's or SGLang's) in CloudWatch as an OpenTelemetry metric, read with
PromQL: a CloudWatch PromQL alarm can watch it, but no documented classic-dashboard widget charts
PromQL. So each variant gets an alarm on p99 that reads the source directly (with an alarm status
widget), a p50/p95/p99 graph of the endpoint metrics bridge's ``Hyperwarm/Endpoints`` metrics
(:class:`~hyperwarm.observability.endpoint_metrics.EndpointMetricsBridge`), and a text widget with the queries.
Every query comes from :mod:`hyperwarm.functions.endpoint_metrics.promql`; which engine and window it reads,
from :mod:`hyperwarm.observability.ttft_source`.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch, aws_cloudwatch_actions as actions, aws_sns as sns
from constructs import Construct

from hyperwarm._internal.durations import FIVE_MINUTES, ONE_MINUTE
from hyperwarm.endpoints.base import IInferenceEndpoint
from hyperwarm.functions.endpoint_metrics import promql
from hyperwarm.observability.endpoint_metrics import EndpointMetricsBridge
from hyperwarm.observability.ttft_source import query_window, variant_engine

PENDING = FIVE_MINUTES
"""How long p99 must stay above the threshold before the alarm fires (and below it before it clears)."""
QUERY_STUDIO_DOCS = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-PromQL-QueryStudio.html"
INSIGHTS_DOCS = "https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch-detailed-observability.html"
_STATS = ("p50", "p95", "p99")


def variant_ttft(scope: Construct, endpoint: IInferenceEndpoint, variant: str, *, threshold: cdk.Duration,
                 topic: sns.ITopic, bridge: EndpointMetricsBridge
                 ) -> tuple[cloudwatch.PromQLAlarm, list[cloudwatch.IWidget]]:
    """The variant's p99 TTFT alarm (notifying ``topic``) and its dashboard widgets: the bridge's
    p50/p95/p99 and prefix-cache graphs, the alarm's status, and the queries behind them."""
    where = f"{endpoint.node.id}/{variant}"
    engine, why = variant_engine(endpoint, variant)
    scope_labels = dict(endpoint=endpoint.endpoint_name, variant=variant, engine=engine,
                        window=query_window(endpoint))
    seconds = threshold.to_milliseconds() / 1000
    alarm = cloudwatch.PromQLAlarm(
        scope, f"{endpoint.node.id}-{variant}TtftP99", query=promql.ttft_above(seconds, **scope_labels),
        evaluation_interval=ONE_MINUTE, pending_period=PENDING, recovery_period=PENDING,
        alarm_description=f"{where}: p99 time to first token above {seconds:g} s for 5 minutes "
                          f"({engine}'s histogram via SageMaker AI detailed observability; {why})")
    alarm.add_alarm_action(actions.SnsAction(topic))
    widgets: list[cloudwatch.IWidget] = [
        *bridge_widgets(bridge, endpoint, variant),
        cloudwatch.AlarmStatusWidget(alarms=[alarm], title=f"{where}: TTFT p99 alarm (PromQL)", width=6, height=6),
        cloudwatch.TextWidget(markdown=_queries_text(scope, where, engine, why, scope_labels, seconds),
                              width=6, height=6)]
    return alarm, widgets


def bridge_widgets(bridge: EndpointMetricsBridge, endpoint: IInferenceEndpoint,
                   variant: str) -> list[cloudwatch.GraphWidget]:
    """TTFT p50/p95/p99 of the variant, and the engine's prefix-cache hit rate beside the bridge's failed queries."""
    where = f"{endpoint.node.id}/{variant}"
    source = "Hyperwarm/Endpoints, endpoint metrics bridge from detailed observability"
    return [
        cloudwatch.GraphWidget(
            title=f"{where}: TimeToFirstToken p50/p95/p99, milliseconds ({source})",
            left=[bridge.metric_time_to_first_token(endpoint, variant, statistic=s, label=s) for s in _STATS],
            width=6, height=6),
        cloudwatch.GraphWidget(
            title=f"{where}: PrefixCacheHitRate % (vLLM) and QueryFailures ({source})",
            left=[bridge.metric_prefix_cache_hit_rate(endpoint, variant)],
            left_y_axis=cloudwatch.YAxisProps(min=0, max=100),
            right=[bridge.metric_query_failures(endpoint, variant)], width=6, height=6),
    ]


def _queries_text(scope: Construct, where: str, engine: str, why: str, labels: dict[str, str], seconds: float) -> str:
    region = cdk.Stack.of(scope).region
    console = f"https://console.aws.amazon.com/cloudwatch/home?region={region}"
    return "\n".join([
        f"#### {where}: TTFT sources (PromQL, seconds)",
        f"Engine metric `{promql.TTFT_METRICS[engine]}` ({why}).", "",
        f"* alarm, p99 above {seconds:g} s for 5 minutes: `{promql.ttft_quantile(0.99, **labels)}`",
        f"* graph, the bridge's per-minute buckets: `{promql.ttft_buckets_per_minute(**labels)}`", "",
        f"Other quantiles in the [CloudWatch console]({console}) Query Studio ([how]({QUERY_STUDIO_DOCS})); "
        f"SageMaker AI Insights charts TTFT per endpoint ([how]({INSIGHTS_DOCS})). The graph has no data while "
        "the bridge fails (its Errors alarm); the alarm reads the source itself."])
