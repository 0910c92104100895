"""Autoscaling of a HyperPod model deployment: the inference operator's ``autoScalingSpec`` (KEDA).

Frozen dataclasses that validate themselves and render the operator's CRD field
(:meth:`HyperPodAutoscaling.to_crd`): :class:`~hyperwarm.caches.CachedModels` takes them as a model's
``autoscaling``; your own ``InferenceEndpointConfig`` can use them directly. Times are ``aws_cdk.Duration``s
(the CRD's fields are whole seconds); ranges are the CRD's (operator CRD 3.3), on the fields
(:mod:`hyperwarm._internal.constraints`). Unresolved tokens are not checked.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal

import aws_cdk as cdk
from annotated_types import Ge, Gt, Interval, Len

from hyperwarm._internal.constraints import Matches, Measured, check, seconds
from hyperwarm._internal.tokens import resolved
from hyperwarm.functions.cache_exporter.placement import NAMESPACE as EXPORTER_NAMESPACE

AMP_WORKSPACE = Matches(
    r"^https://aps-workspaces\.[a-z0-9-]+\.amazonaws\.com/workspaces/ws-[a-zA-Z0-9-]+$",
    "an Amazon Managed Service for Prometheus workspace URL, "
    "e.g. https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567")
"""A Prometheus trigger's server."""
STATISTIC = Matches(r"^(Average|Sum|Minimum|Maximum|SampleCount|p\d{1,2}(\.\d+)?)$",
                    "a CloudWatch statistic: Average, Sum, Minimum, Maximum, SampleCount or a percentile such as p99")
"""A CloudWatch statistic KEDA's scaler accepts."""
MetricType = Literal["Average", "Value"]
ExporterMetric = Literal["RequestsWaiting"]
"""The cache metrics exporter's metrics fit to scale on: per model, once a minute, a load figure."""
EXPORTER_SCALING_METRICS: tuple[str, ...] = typing.get_args(ExporterMetric)
ExporterStatistic = Literal["Average", "Maximum"]


def crd_seconds(low: int, high: int) -> Measured:
    """A time the operator's CRD takes in whole seconds, ``low..high``; cdk.json gives it as ``<name>_s``."""
    return seconds(Interval(ge=low, le=high), key_suffix="_s")


Period = Annotated[cdk.Duration, crd_seconds(60, 86400)]
"""A CloudWatch trigger's query period."""
Target = Annotated[float, Gt(0)]
"""The value per replica KEDA keeps."""
Activation = Annotated[float, Ge(0)]


@dataclass(frozen=True)
class CloudWatchTrigger:
    """Scale on a CloudWatch metric (KEDA's aws-cloudwatch scaler, with the operator's KEDA role)."""

    namespace: Annotated[str, Len(1, 255)]
    """E.g. AWS/SageMaker."""
    metric_name: Annotated[str, Len(1, 255)]
    target_value: Target
    """The value per replica KEDA keeps (> 0)."""
    dimensions: Mapping[str, str] = field(default_factory=dict)
    """Dimension name -> value. Default: none."""
    statistic: Annotated[str, STATISTIC] = "Average"
    """Average, Sum, Minimum, Maximum, SampleCount or a percentile such as p99. Default: Average."""
    activation_target_value: Activation = 0
    """Scale from zero above this (with ``min_replicas`` 0). Default: 0."""
    metric_type: MetricType = "Average"
    """Average (per replica) or Value. Default: Average."""
    period: Period = field(default_factory=lambda: cdk.Duration.seconds(300))
    """The CloudWatch query period, 60..86400 seconds. Default: 5 minutes."""
    min_value: float = 0
    """What KEDA assumes when CloudWatch returns no data. Default: 0 (fails open: scale in toward
    ``min_replicas``, even under load); ``target_value`` x N holds N replicas instead."""

    @classmethod
    def on_exporter(cls, metric: str, *, cluster_name: str, model: str, target_value: float,
                    statistic: str = "Average", activation_target_value: float = 0,
                    metric_type: MetricType = "Average", period: cdk.Duration | None = None,
                    min_value: float = 0) -> CloudWatchTrigger:
        """A trigger on a metric the cache metrics exporter publishes for ``model`` of the EKS cluster
        ``cluster_name`` (``Hyperwarm/Caches``, the exporter's dimensions; default period 60 s, its rate)."""
        if metric not in EXPORTER_SCALING_METRICS:
            raise ValueError(f"metric = {metric!r} -- allowed: {', '.join(EXPORTER_SCALING_METRICS)}")
        return cls(EXPORTER_NAMESPACE, metric, target_value, {"ClusterName": cluster_name, "Model": model},
                   statistic=statistic, activation_target_value=activation_target_value, metric_type=metric_type,
                   period=period or cdk.Duration.seconds(60), min_value=min_value)

    def to_crd(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "metricName": self.metric_name,
                "dimensions": [{"name": k, "value": v} for k, v in sorted(self.dimensions.items())],
                "metricStat": self.statistic, "metricType": self.metric_type, "targetValue": self.target_value,
                "activationTargetValue": self.activation_target_value, "metricCollectionPeriod": self.period.to_seconds(),
                "minValue": self.min_value}


@dataclass(frozen=True)
class PrometheusTrigger:
    """Scale on a PromQL query against an Amazon Managed Service for Prometheus workspace."""

    server_address: Annotated[str, AMP_WORKSPACE]
    """The workspace URL, e.g. https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd."""
    query: Annotated[str, Len(1, 4096)]
    target_value: Target
    """The value per replica KEDA keeps (> 0)."""
    activation_target_value: Activation = 0
    """Scale from zero above this. Default: 0."""
    metric_type: MetricType = "Average"
    """Average (per replica) or Value. Default: Average."""

    def to_crd(self) -> dict[str, Any]:
        return {"serverAddress": self.server_address, "query": self.query, "targetValue": self.target_value,
                "activationTargetValue": self.activation_target_value, "metricType": self.metric_type}


@dataclass(frozen=True)
class ExporterTrigger:
    """Scale on a metric hyperwarm's cache metrics exporter publishes for the model.

    A CloudWatch trigger on ``Hyperwarm/Caches`` with the exporter's dimensions (``ClusterName``, ``Model``),
    which :class:`~hyperwarm.caches.CachedModels` fills in (:meth:`on`), so no name is spelled twice. The
    exporter (:class:`~hyperwarm.observability.cache_exporter`) must run on the cluster.
    """

    metric: ExporterMetric
    """RequestsWaiting: requests queued in the model's engines (vLLM ``num_requests_waiting``, summed)."""
    target_value: Target
    """The value per replica KEDA keeps (> 0)."""
    activation_target_value: Activation = 0
    """Scale from zero above this (with ``min_replicas`` 0). Default: 0."""
    statistic: ExporterStatistic = "Average"
    """Average or Maximum. Default: Average."""
    period: Period = field(default_factory=lambda: cdk.Duration.seconds(60))
    """The CloudWatch query period, 60..86400 seconds; the exporter publishes every 60 s. Default: 1 minute."""
    min_value: Annotated[float, Ge(0)] = 0
    """What KEDA assumes while the metric has no data (the exporter failed, or could not read every pod:
    RequestsWaiting is then not published). Default: 0, which fails open: without data the model scales in to
    ``min_replicas``, even under load. To hold capacity instead, give ``target_value`` x the replicas to keep."""

    def on(self, *, cluster_name: str, model: str) -> CloudWatchTrigger:
        """The CloudWatch trigger on this metric of ``model`` on the EKS cluster ``cluster_name``."""
        return CloudWatchTrigger.on_exporter(
            self.metric, cluster_name=cluster_name, model=model, target_value=self.target_value,
            activation_target_value=self.activation_target_value, statistic=self.statistic,
            period=self.period, min_value=self.min_value)


@dataclass(frozen=True)
class HyperPodAutoscaling:
    """Replicas of a model deployment between ``min_replicas`` and ``max_replicas``, driven by one trigger."""

    max_replicas: Annotated[int, Interval(ge=1, le=1000)]
    """1..1000."""
    trigger: CloudWatchTrigger | PrometheusTrigger | ExporterTrigger
    """An :class:`ExporterTrigger` becomes a CloudWatch trigger once the model and cluster are known
    (:meth:`for_model`)."""
    min_replicas: Annotated[int, Interval(ge=0, le=1000)] = 1
    """0..1000 (0 scales to zero). Default: 1."""
    polling_interval: Annotated[cdk.Duration, crd_seconds(1, 3600)] = field(default_factory=lambda: cdk.Duration.seconds(30))
    """How often KEDA reads the metric, 1..3600 seconds. Default: 30 seconds."""
    cooldown: Annotated[cdk.Duration, crd_seconds(0, 86400)] = field(default_factory=lambda: cdk.Duration.minutes(5))
    """Wait before scaling to zero, 0..86400 seconds. Default: 5 minutes."""
    initial_cooldown: Annotated[cdk.Duration, crd_seconds(0, 86400)] = field(default_factory=lambda: cdk.Duration.minutes(5))
    """No scaling this long after creation, 0..86400 seconds. Default: 5 minutes."""
    scale_up_stabilization: Annotated[cdk.Duration, crd_seconds(0, 3600)] = field(default_factory=lambda: cdk.Duration.seconds(0))
    """0..3600 seconds. Default: none."""
    scale_down_stabilization: Annotated[cdk.Duration, crd_seconds(0, 3600)] = field(
        default_factory=lambda: cdk.Duration.minutes(5))
    """The highest recommendation of this window wins, 0..3600 seconds. Default: 5 minutes."""

    def __post_init__(self) -> None:
        check(self, self._rules)  # the trigger's fields too

    def _rules(self) -> list[str]:
        rules = []
        if resolved(self.min_replicas) and resolved(self.max_replicas) and self.min_replicas > self.max_replicas:
            rules.append(f"min_replicas = {self.min_replicas} -- must not exceed max_replicas ({self.max_replicas})")
        return rules

    def for_model(self, *, cluster_name: str, model: str) -> HyperPodAutoscaling:
        """This autoscaling of ``model`` on the EKS cluster ``cluster_name`` (an exporter trigger resolved)."""
        if not isinstance(self.trigger, ExporterTrigger):
            return self
        return replace(self, trigger=self.trigger.on(cluster_name=cluster_name, model=model))

    def to_crd(self) -> dict[str, Any]:
        """The operator's ``autoScalingSpec`` (an exporter trigger must be resolved first: :meth:`for_model`)."""
        if isinstance(self.trigger, ExporterTrigger):
            raise TypeError("HyperPodAutoscaling.trigger: an ExporterTrigger names the model and cluster; "
                             "render for_model(cluster_name=..., model=...)")
        key = "cloudWatchTrigger" if isinstance(self.trigger, CloudWatchTrigger) else "prometheusTrigger"
        return {"minReplicaCount": self.min_replicas, "maxReplicaCount": self.max_replicas,
                "pollingInterval": self.polling_interval.to_seconds(), "cooldownPeriod": self.cooldown.to_seconds(),
                "initialCooldownPeriod": self.initial_cooldown.to_seconds(),
                "scaleUpStabilizationTime": self.scale_up_stabilization.to_seconds(),
                "scaleDownStabilizationTime": self.scale_down_stabilization.to_seconds(), key: self.trigger.to_crd()}
