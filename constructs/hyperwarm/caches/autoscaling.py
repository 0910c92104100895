"""Autoscaling of a HyperPod model deployment: the inference operator's ``autoScalingSpec`` (KEDA).

Frozen dataclasses that validate themselves and render the operator's CRD field
(:meth:`HyperPodAutoScaling.to_crd`): :class:`~hyperwarm.caches.CachedModels` takes them as a model's
``autoscaling``; your own ``InferenceEndpointConfig`` can use them directly. Times are ``aws_cdk.Duration``s
(the CRD's fields are whole seconds); ranges are the CRD's (operator CRD 3.3). Unresolved tokens are not checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import aws_cdk as cdk

from hyperwarm._internal.tokens import resolved
from hyperwarm._internal.validation import raise_problems
from hyperwarm.observability.metric_catalog import EXPORTER_NAMESPACE

AMP_WORKSPACE = r"^https://aps-workspaces\.[a-z0-9-]+\.amazonaws\.com/workspaces/ws-[a-zA-Z0-9-]+$"
"""An Amazon Managed Service for Prometheus workspace URL (a Prometheus trigger's server)."""
STATISTIC = r"^(Average|Sum|Minimum|Maximum|SampleCount|p\d{1,2}(\.\d+)?)$"
"""A CloudWatch statistic KEDA's scaler accepts."""
PERIOD_S = (60, 86400)
"""A CloudWatch trigger's query period, seconds."""
METRIC_TYPES = ("Average", "Value")
EXPORTER_SCALING_METRICS = ("RequestsWaiting",)
"""The cache metrics exporter's metrics fit to scale on: per model, once a minute, a load figure."""
EXPORTER_STATISTICS = ("Average", "Maximum")


@dataclass(frozen=True)
class CloudWatchTrigger:
    """Scale on a CloudWatch metric (KEDA's aws-cloudwatch scaler, with the operator's KEDA role)."""

    namespace: str
    metric_name: str
    target_value: float
    """The value per replica KEDA keeps (> 0)."""
    dimensions: Mapping[str, str] = field(default_factory=dict)
    """Dimension name -> value. Default: none."""
    statistic: str = "Average"
    """Average, Sum, Minimum, Maximum, SampleCount or a percentile such as p99. Default: Average."""
    activation_target_value: float = 0
    """Scale from zero above this (with ``min_replicas`` 0). Default: 0."""
    metric_type: str = "Average"
    """Average (per replica) or Value. Default: Average."""
    period: cdk.Duration = field(default_factory=lambda: cdk.Duration.seconds(300))
    """The CloudWatch query period, 60..86400 seconds. Default: 5 minutes."""
    min_value: float = 0
    """What KEDA assumes when CloudWatch returns no data. Default: 0 (fails open: scale in toward
    ``min_replicas``, even under load); ``target_value`` x N holds N replicas instead."""

    @classmethod
    def on_exporter(cls, metric: str, *, cluster_name: str, model: str, target_value: float,
                    **options: Any) -> CloudWatchTrigger:
        """A trigger on a metric the cache metrics exporter publishes for ``model`` of the EKS cluster
        ``cluster_name`` (``Hyperwarm/Caches``, the exporter's dimensions; default period 60 s, its rate)."""
        if metric not in EXPORTER_SCALING_METRICS:
            raise ValueError(f"metric = {metric!r} -- allowed: {', '.join(EXPORTER_SCALING_METRICS)}")
        return cls(EXPORTER_NAMESPACE, metric, target_value, {"ClusterName": cluster_name, "Model": model},
                   **{"period": cdk.Duration.seconds(60), **options})

    def problems(self) -> list[str]:
        out = []
        if resolved(self.target_value) and not self.target_value > 0:
            out.append(f"trigger.target_value = {self.target_value} -- must be positive")
        if resolved(self.statistic) and not re.match(STATISTIC, self.statistic):
            out.append(f"trigger.statistic = {self.statistic!r} -- allowed: Average, Sum, Minimum, Maximum, "
                       "SampleCount or a percentile such as p99")
        period = self.period.to_seconds()
        if resolved(period) and not PERIOD_S[0] <= period <= PERIOD_S[1]:
            out.append(f"trigger.period = {period} s -- allowed: {PERIOD_S[0]}..{PERIOD_S[1]} seconds")
        return out + _common(self)

    def to_crd(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "metricName": self.metric_name,
                "dimensions": [{"name": k, "value": v} for k, v in sorted(self.dimensions.items())],
                "metricStat": self.statistic, "metricType": self.metric_type, "targetValue": self.target_value,
                "activationTargetValue": self.activation_target_value, "metricCollectionPeriod": self.period.to_seconds(),
                "minValue": self.min_value}


@dataclass(frozen=True)
class PrometheusTrigger:
    """Scale on a PromQL query against an Amazon Managed Service for Prometheus workspace."""

    server_address: str
    """The workspace URL, e.g. https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd."""
    query: str
    target_value: float
    """The value per replica KEDA keeps (> 0)."""
    activation_target_value: float = 0
    """Scale from zero above this. Default: 0."""
    metric_type: str = "Average"
    """Average (per replica) or Value. Default: Average."""

    def problems(self) -> list[str]:
        out = []
        if resolved(self.server_address) and not re.match(AMP_WORKSPACE, self.server_address):
            out.append(f"trigger.server_address = {self.server_address!r} -- allowed: an Amazon Managed Service for "
                       "Prometheus workspace URL, e.g. https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123")
        if resolved(self.target_value) and not self.target_value > 0:
            out.append(f"trigger.target_value = {self.target_value} -- must be positive")
        return out + _common(self)

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

    metric: str
    """RequestsWaiting: requests queued in the model's engines (vLLM ``num_requests_waiting``, summed)."""
    target_value: float
    """The value per replica KEDA keeps (> 0)."""
    activation_target_value: float = 0
    """Scale from zero above this (with ``min_replicas`` 0). Default: 0."""
    statistic: str = "Average"
    """Average or Maximum. Default: Average."""
    period: cdk.Duration = field(default_factory=lambda: cdk.Duration.seconds(60))
    """The CloudWatch query period, 60..86400 seconds; the exporter publishes every 60 s. Default: 1 minute."""
    min_value: float = 0
    """What KEDA assumes while the metric has no data (the exporter failed, or could not read every pod:
    RequestsWaiting is then not published). Default: 0, which fails open: without data the model scales in to
    ``min_replicas``, even under load. To hold capacity instead, give ``target_value`` x the replicas to keep."""

    def on(self, *, cluster_name: str, model: str) -> CloudWatchTrigger:
        """The CloudWatch trigger on this metric of ``model`` on the EKS cluster ``cluster_name``."""
        return CloudWatchTrigger.on_exporter(
            self.metric, cluster_name=cluster_name, model=model, target_value=self.target_value,
            activation_target_value=self.activation_target_value, statistic=self.statistic,
            period=self.period, min_value=self.min_value)

    def problems(self) -> list[str]:
        out = []
        if resolved(self.metric) and self.metric not in EXPORTER_SCALING_METRICS:
            out.append(f"trigger.metric = {self.metric!r} -- allowed: {', '.join(EXPORTER_SCALING_METRICS)}")
        if resolved(self.statistic) and self.statistic not in EXPORTER_STATISTICS:
            out.append(f"trigger.statistic = {self.statistic!r} -- allowed: {', '.join(EXPORTER_STATISTICS)}")
        if resolved(self.min_value) and self.min_value < 0:
            out.append(f"trigger.min_value = {self.min_value} -- must not be negative")
        return out + self.on(cluster_name="cluster", model="model").problems()


def _common(trigger: CloudWatchTrigger | PrometheusTrigger) -> list[str]:
    out = []
    if resolved(trigger.metric_type) and trigger.metric_type not in METRIC_TYPES:
        out.append(f"trigger.metric_type = {trigger.metric_type!r} -- allowed: {', '.join(METRIC_TYPES)}")
    if resolved(trigger.activation_target_value) and trigger.activation_target_value < 0:
        out.append(f"trigger.activation_target_value = {trigger.activation_target_value} -- must not be negative")
    return out


RANGES = {"min_replicas": (0, 1000), "max_replicas": (1, 1000), "polling_interval": (1, 3600),
          "cooldown": (0, 86400), "initial_cooldown": (0, 86400), "scale_up_stabilization": (0, 3600),
          "scale_down_stabilization": (0, 3600)}
"""Each :class:`HyperPodAutoScaling` field's (low, high), the CRD's: replicas, or whole seconds of a Duration."""


def _seconds(value: int | cdk.Duration) -> int | float:
    return value.to_seconds() if isinstance(value, cdk.Duration) else value


def _show(value: int | cdk.Duration) -> str:
    return f"{value.to_seconds()} s" if isinstance(value, cdk.Duration) else str(value)


@dataclass(frozen=True)
class HyperPodAutoScaling:
    """Replicas of a model deployment between ``min_replicas`` and ``max_replicas``, driven by one trigger."""

    max_replicas: int
    """1..1000."""
    trigger: CloudWatchTrigger | PrometheusTrigger | ExporterTrigger
    """An :class:`ExporterTrigger` becomes a CloudWatch trigger once the model and cluster are known
    (:meth:`for_model`)."""
    min_replicas: int = 1
    """0..1000 (0 scales to zero). Default: 1."""
    polling_interval: cdk.Duration = field(default_factory=lambda: cdk.Duration.seconds(30))
    """How often KEDA reads the metric, 1..3600 seconds. Default: 30 seconds."""
    cooldown: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(5))
    """Wait before scaling to zero, 0..86400 seconds. Default: 5 minutes."""
    initial_cooldown: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(5))
    """No scaling this long after creation, 0..86400 seconds. Default: 5 minutes."""
    scale_up_stabilization: cdk.Duration = field(default_factory=lambda: cdk.Duration.seconds(0))
    """0..3600 seconds. Default: none."""
    scale_down_stabilization: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(5))
    """The highest recommendation of this window wins, 0..3600 seconds. Default: 5 minutes."""

    def __post_init__(self) -> None:
        problems = [f"{name} = {_show(getattr(self, name))} -- allowed: {low}..{high}"
                    + ("" if name.endswith("replicas") else " seconds")
                    for name, (low, high) in RANGES.items()
                    if resolved(_seconds(getattr(self, name))) and not low <= _seconds(getattr(self, name)) <= high]
        if resolved(self.min_replicas) and resolved(self.max_replicas) and self.min_replicas > self.max_replicas:
            problems.append(f"min_replicas = {self.min_replicas} -- must not exceed max_replicas ({self.max_replicas})")
        raise_problems("HyperPodAutoScaling", "autoscaling", problems + self.trigger.problems())

    def for_model(self, *, cluster_name: str, model: str) -> HyperPodAutoScaling:
        """This autoscaling of ``model`` on the EKS cluster ``cluster_name`` (an exporter trigger resolved)."""
        if not isinstance(self.trigger, ExporterTrigger):
            return self
        return replace(self, trigger=self.trigger.on(cluster_name=cluster_name, model=model))

    def to_crd(self) -> dict[str, Any]:
        """The operator's ``autoScalingSpec`` (an exporter trigger must be resolved first: :meth:`for_model`)."""
        if isinstance(self.trigger, ExporterTrigger):
            raise TypeError("HyperPodAutoScaling.trigger: an ExporterTrigger names the model and cluster; "
                             "render for_model(cluster_name=..., model=...)")
        key = "cloudWatchTrigger" if isinstance(self.trigger, CloudWatchTrigger) else "prometheusTrigger"
        return {"minReplicaCount": self.min_replicas, "maxReplicaCount": self.max_replicas,
                "pollingInterval": self.polling_interval.to_seconds(), "cooldownPeriod": self.cooldown.to_seconds(),
                "initialCooldownPeriod": self.initial_cooldown.to_seconds(),
                "scaleUpStabilizationTime": self.scale_up_stabilization.to_seconds(),
                "scaleDownStabilizationTime": self.scale_down_stabilization.to_seconds(), key: self.trigger.to_crd()}
