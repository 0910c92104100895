"""A refreshed HyperPod model's warm version changes on the dashboard, and the alarms that say one went wrong.

The refresh function moves a node-cached HyperPod model in stages (docs/operating-guide.md, "Fresh caches"): the new version
staged on every node by the model's filler, the deployment switched once the nodes that can host its pods hold
it, the old version dropped. Each step publishes :data:`~hyperwarm.functions.cache_refresh.contract.ROLLOUT_METRICS`
in ``Hyperwarm`` with the dimensions ``service`` and ``target`` (the target id), and a rollout that fails
publishes ``RefreshFailed`` with a ``Reason`` (the one contract both sides import). Two figures say whether it
stayed warm: the function's ``RefreshColdPods`` (once per refresh: pods of the new version found on a node without
its ready label) and the cache exporter's ``ColdPods`` of the model, every minute.
"""

from __future__ import annotations

import math

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from typing_extensions import Unpack

from hyperwarm._internal.durations import FIVE_MINUTES, ONE_MINUTE
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.metric_options import MetricOptions, over_defaults
from hyperwarm.observability.cache_exporter import CacheMetricsExporter
from hyperwarm.observability.metric_catalog import find

SOURCE = "Hyperwarm, the refresh function's warm rollout"
STAGING_TIMEOUT = "staging-timeout"
SWITCH_TIMEOUT = "switch-timeout"
COLD_PERIOD = cdk.Duration.minutes(math.ceil(2 * contract.ROLLOUT_POLL_SECONDS / 60))
"""The cold-pod-during-a-refresh alarm's period (whole minutes, as CloudWatch alarms on periods over a minute
need): the workflow steps (and publishes ``RolloutInProgress``) every ``ROLLOUT_POLL_SECONDS`` plus the step's
own time, so a period of two polls holds a step, while the exporter's ``ColdPods`` comes every minute; a cold
pod stays cold for its whole download, so a period that missed the step sees it in the next one."""


def rollout_metric(name: str, target: str, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
    """A catalogued warm-rollout metric of the refresh ``target`` (its id). Default: Maximum over 1 minute."""
    published = find(contract.METRICS_NAMESPACE, name)
    return cloudwatch.Metric(namespace=published.namespace, metric_name=published.name,
                             dimensions_map={"service": contract.SERVICE, "target": target},
                             **over_defaults(options, statistic="Maximum", period=ONE_MINUTE))


def refresh_failed(reason: str, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
    """Refreshes that failed for ``reason`` (``RefreshFailed`` by ``Reason``). Default: Sum over 5 minutes."""
    published = find(contract.METRICS_NAMESPACE, "RefreshFailed")
    return cloudwatch.Metric(namespace=published.namespace, metric_name=published.name,
                             dimensions_map={"service": contract.SERVICE, "Reason": reason},
                             **over_defaults(options, statistic="Sum", period=FIVE_MINUTES))


def cold_during_rollout(exporter: CacheMetricsExporter, model: str, target: str) -> cloudwatch.MathExpression:
    """1 in a period where ``model`` had a cold pod while its refresh ``target`` staged or switched, else 0."""
    return cloudwatch.MathExpression(
        # Missing is 0: no step (no rollout) or no exporter run is no cold pod during a rollout.
        expression="IF(FILL(rollout, 0) > 0 AND FILL(cold, 0) > 0, 1, 0)", period=COLD_PERIOD,
        label="cold pods while a refresh stages or switches (1 = yes)",
        using_metrics={"rollout": rollout_metric("RolloutInProgress", target, period=COLD_PERIOD),
                       "cold": exporter.metric_cold_pods(model, period=COLD_PERIOD)})


def rollout_widgets(exporter: CacheMetricsExporter, model: str, target: str) -> list[cloudwatch.GraphWidget]:
    """Staging progress (nodes ready with the new version of all it must reach), time to warm and to switch,
    and the model's cold pods beside whether a refresh is under way."""
    def metric(name: str, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
        return rollout_metric(name, target, **options)

    once: MetricOptions = {"period": FIVE_MINUTES}  # published once per rollout: one point per rollout
    return [
        cloudwatch.GraphWidget(
            title=f"{model}: refresh staging, StagingReadyNodes of StagingTargetNodes ({SOURCE})",
            left=[metric("StagingReadyNodes"), metric("StagingTargetNodes")], width=8),
        cloudwatch.GraphWidget(
            title=f"{model}: refresh TimeToWarm (staged on the nodes) and TimeToSwitch (rolled out), seconds; "
                  f"RolloutAborted ({SOURCE})",
            left=[metric("TimeToWarm", **once), metric("TimeToSwitch", **once)],
            right=[metric("RolloutAborted", statistic="Sum", period=FIVE_MINUTES)], width=8),
        cloudwatch.GraphWidget(
            title=f"{model}: ColdPods (Hyperwarm/Caches, cache exporter) and RefreshColdPods (per refresh) beside "
                  f"RolloutInProgress ({SOURCE}): a warm refresh keeps both at 0",
            left=[exporter.metric_cold_pods(model), metric("RefreshColdPods", **once)],
            right=[metric("RolloutInProgress")], right_y_axis=cloudwatch.YAxisProps(min=0, max=1), width=8),
    ]
