"""Time to first token of a SageMaker production variant: a PromQL alarm and the queries that chart it.

SageMaker's ``AWS/SageMaker`` namespace has no TTFT metric. Detailed observability stores the serving
container's own TTFT histogram (vLLM's or SGLang's) in CloudWatch as an OpenTelemetry metric, read with
PromQL: a CloudWatch PromQL alarm can watch it, but no documented classic-dashboard widget charts
PromQL. So each variant gets an alarm on p99 (with an alarm status widget) and a text widget with the
exact p50/p95/p99 queries, to paste into Query Studio; SageMaker AI Insights charts TTFT per endpoint.
Every query comes from :mod:`hyperwarm.promql`.
"""

from __future__ import annotations

import math

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from . import promql
from .endpoint import InferenceEndpoint
from .endpoint_base import IInferenceEndpoint
from .endpoint_rules import variant_server_settings

PENDING = cdk.Duration.minutes(5)
"""How long p99 must stay above the threshold before the alarm fires (and below it before it clears)."""
QUERY_STUDIO_DOCS = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-PromQL-QueryStudio.html"
INSIGHTS_DOCS = "https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch-detailed-observability.html"
_QUANTILES = (0.5, 0.95, 0.99)


def variant_engine(endpoint: IInferenceEndpoint, variant: str) -> tuple[str, str]:
    """(engine whose TTFT metric to read, why): the variant's serving convention where hyperwarm built
    the endpoint; vLLM's metric otherwise, said so (an imported endpoint, or LMI, TGI, custom servers)."""
    if isinstance(endpoint, InferenceEndpoint):
        convention = variant_server_settings(endpoint.variants[variant]).convention
        name = convention.name if convention else "unknown"
        if name in promql.TTFT_METRICS:
            return name, f"the variant's container follows the {name} convention"
        return "vllm", f"assumed: the {name} container's TTFT metric is not known to hyperwarm; vLLM's is queried"
    return "vllm", "assumed: an imported endpoint's engine is unknown; vLLM's metric is queried"


def query_window(endpoint: IInferenceEndpoint) -> str:
    """The ``rate`` window: 5 minutes (SageMaker's example), or 4 publish intervals where SageMaker publishes
    less often than every 75 s (``rate`` needs several samples in its window)."""
    frequency = endpoint.endpoint_config.metric_publish_frequency if isinstance(endpoint, InferenceEndpoint) else None
    seconds = frequency.to_seconds() if frequency is not None and not frequency.is_unresolved() else 60
    return f"{max(5, math.ceil(4 * seconds / 60))}m"


def detailed_observability_off(endpoint: IInferenceEndpoint) -> bool:
    """True when hyperwarm built the endpoint with detailed observability off (then no TTFT is published)."""
    return isinstance(endpoint, InferenceEndpoint) and not endpoint.endpoint_config.detailed_observability


def variant_ttft(scope: Construct, endpoint: IInferenceEndpoint, variant: str, *, threshold: cdk.Duration,
                 topic: sns.ITopic) -> tuple[cloudwatch.PromQLAlarm, list[cloudwatch.IWidget]]:
    """The variant's p99 TTFT alarm (notifying ``topic``) and its two dashboard widgets."""
    where = f"{endpoint.node.id}/{variant}"
    engine, why = variant_engine(endpoint, variant)
    scope_labels = dict(endpoint=endpoint.endpoint_name, variant=variant, engine=engine,
                        window=query_window(endpoint))
    seconds = threshold.to_milliseconds() / 1000
    alarm = cloudwatch.PromQLAlarm(
        scope, f"{endpoint.node.id}{variant}TtftP99", query=promql.ttft_above(seconds, **scope_labels),
        evaluation_interval=cdk.Duration.minutes(1), pending_period=PENDING, recovery_period=PENDING,
        alarm_description=f"{where}: p99 time to first token above {seconds:g} s for 5 minutes "
                          f"({engine}'s histogram via SageMaker AI detailed observability; {why})")
    alarm.add_alarm_action(actions.SnsAction(topic))
    lines = [f"#### {where}: time to first token (SageMaker AI detailed observability, PromQL, seconds)",
             f"Engine metric: `{promql.TTFT_METRICS[engine]}` ({why}).", ""]
    lines += [f"* p{q * 100:g}: `{promql.ttft_quantile(q, **scope_labels)}`" for q in _QUANTILES]
    region = cdk.Stack.of(scope).region
    console = f"https://console.aws.amazon.com/cloudwatch/home?region={region}"
    lines += ["", f"Chart them in the [CloudWatch console]({console}): Query Studio, PromQL editor "
              f"([how]({QUERY_STUDIO_DOCS})); TTFT per endpoint is on the SageMaker AI Insights dashboard "
              f"([how]({INSIGHTS_DOCS})). The alarm beside this fires when p99 stays above {seconds:g} s for 5 minutes."]
    widgets: list[cloudwatch.IWidget] = [
        cloudwatch.TextWidget(markdown="\n".join(lines), width=16, height=6),
        cloudwatch.AlarmStatusWidget(alarms=[alarm], title=f"{where}: TTFT p99 alarm (PromQL)", width=8, height=6)]
    return alarm, widgets
