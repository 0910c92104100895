"""What a cached model's HyperPod deployment may set beyond its model: scaling and serving options.

The serving options (probes, metrics, KV cache, load balancer, TLS, request limits) are the library's props
(:mod:`hyperwarm.caches.props`), derived field by field (:mod:`stacks.config.library`). Autoscaling keeps its
cdk.json form (the trigger chosen by key) and builds the library's :class:`~hyperwarm.caches.HyperPodAutoScaling`,
whose ranges and defaults it takes. Everything is opt-in: a model without these keys gets the operator's defaults.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, Literal

import aws_cdk as cdk
from hyperwarm.caches import autoscaling, props
from pydantic import Field, model_validator

from .library import config_model
from .strict import StrictModel, described

_AMP_WORKSPACE = described(
    autoscaling.AMP_WORKSPACE,
    "an Amazon Managed Service for Prometheus workspace URL, "
    "e.g. https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567")
MetricType = Literal["Average", "Value"]


def _library_default(cls: type, name: str) -> Any:
    """The default of field ``name`` of the library's dataclass ``cls`` in cdk.json's form (a Duration in whole
    seconds): defaults are written once, there. ``MISSING`` for a required field."""
    item = next(f for f in fields(cls) if f.name == name)
    default = item.default_factory() if item.default_factory is not MISSING else item.default
    return default.to_seconds() if isinstance(default, cdk.Duration) else default


class CloudWatchTrigger(StrictModel):
    """Scale on a CloudWatch metric (KEDA's aws-cloudwatch scaler)."""

    namespace: str = Field(min_length=1, max_length=255, description="e.g. AWS/SageMaker")
    metric_name: str = Field(min_length=1, max_length=255)
    dimensions: dict[str, str] = Field(default_factory=dict, description="dimension name -> value")
    statistic: str = Field(default=_library_default(autoscaling.CloudWatchTrigger, "statistic"), pattern=described(
        autoscaling.STATISTIC,
        "a CloudWatch statistic: Average, Sum, Minimum, Maximum, SampleCount or a percentile such as p99"))
    target_value: float = Field(gt=0, description="the value per replica (metric_type Average) KEDA keeps")
    activation_target_value: float = Field(default=_library_default(autoscaling.CloudWatchTrigger, "activation_target_value"), ge=0,
                                           description="scale from 0 above this; min_replicas 0")
    metric_type: MetricType = _library_default(autoscaling.CloudWatchTrigger, "metric_type")
    period_s: int = Field(default=_library_default(autoscaling.CloudWatchTrigger, "period"), ge=autoscaling.PERIOD_S[0],
                          le=autoscaling.PERIOD_S[1], description="the CloudWatch query period")
    min_value: float = Field(default=_library_default(autoscaling.CloudWatchTrigger, "min_value"), description="the value assumed when CloudWatch returns no data")

    def to_spec(self) -> autoscaling.CloudWatchTrigger:
        return autoscaling.CloudWatchTrigger(
            self.namespace, self.metric_name, self.target_value, dict(self.dimensions), self.statistic,
            self.activation_target_value, self.metric_type, cdk.Duration.seconds(self.period_s), self.min_value)


class PrometheusTrigger(StrictModel):
    """Scale on a PromQL query against an Amazon Managed Service for Prometheus workspace."""

    server_address: str = Field(pattern=_AMP_WORKSPACE)
    query: str = Field(min_length=1, max_length=4096)
    target_value: float = Field(gt=0)
    activation_target_value: float = Field(default=_library_default(autoscaling.PrometheusTrigger, "activation_target_value"), ge=0)
    metric_type: MetricType = _library_default(autoscaling.PrometheusTrigger, "metric_type")

    def to_spec(self) -> autoscaling.PrometheusTrigger:
        return autoscaling.PrometheusTrigger(self.server_address, self.query, self.target_value,
                                             self.activation_target_value, self.metric_type)


class ExporterTrigger(StrictModel):
    """Scale on a metric hyperwarm's cache metrics exporter publishes for this model.

    Rendered as a CloudWatch trigger on ``Hyperwarm/Caches`` with the dimensions the exporter uses
    (``ClusterName``: the EKS cluster, ``Model``: this model), so no name is spelled twice. The exporter
    runs while ``observability.enabled`` (checked at synth).
    """

    metric: Literal["RequestsWaiting"] = Field(
        description="RequestsWaiting: requests queued in the model's engines (vLLM num_requests_waiting, summed)")
    target_value: float = Field(gt=0, description="the value per replica KEDA keeps (metric_type Average)")
    activation_target_value: float = Field(default=_library_default(autoscaling.ExporterTrigger, "activation_target_value"), ge=0,
                                           description="scale from 0 above this; min_replicas 0")
    statistic: Literal["Average", "Maximum"] = _library_default(autoscaling.ExporterTrigger, "statistic")
    period_s: int = Field(default=_library_default(autoscaling.ExporterTrigger, "period"), ge=autoscaling.PERIOD_S[0], le=autoscaling.PERIOD_S[1],
                          description="the CloudWatch query period; the exporter publishes every 60 s")
    min_value: float = Field(
        default=_library_default(autoscaling.ExporterTrigger, "min_value"), ge=0,
        description="what KEDA assumes while the metric has no data (the exporter failed, or could not read every "
                    "pod: RequestsWaiting is then not published). 0 fails open: without data the model scales in "
                    "to min_replicas, even under load. To hold capacity instead, give target_value x the replicas "
                    "to keep (e.g. 16 with target_value 8 holds 2)")

    def to_spec(self) -> autoscaling.ExporterTrigger:
        return autoscaling.ExporterTrigger(self.metric, self.target_value, self.activation_target_value,
                                           self.statistic, cdk.Duration.seconds(self.period_s), self.min_value)


class Trigger(StrictModel):
    """Exactly one of ``cloudwatch``, ``prometheus`` and ``exporter``."""

    cloudwatch: CloudWatchTrigger | None = None
    prometheus: PrometheusTrigger | None = None
    exporter: ExporterTrigger | None = None

    @model_validator(mode="after")
    def _one(self) -> Trigger:
        if sum(t is not None for t in (self.cloudwatch, self.prometheus, self.exporter)) != 1:
            raise ValueError("give exactly one of cloudwatch, prometheus and exporter")
        return self


def _bounded(name: str, **kwargs: Any) -> Any:
    """The cdk.json field ``name`` (``<library field>_s`` for a Duration) with the library's range and default
    (:data:`hyperwarm.caches.autoscaling.RANGES`, the CRD's, and :class:`~hyperwarm.caches.HyperPodAutoScaling`'s)."""
    library = name.removesuffix("_s")
    low, high = autoscaling.RANGES[library]
    default = _library_default(autoscaling.HyperPodAutoScaling, library)
    return Field(ge=low, le=high, **({} if default is MISSING else {"default": default}), **kwargs)


class AutoScaling(StrictModel):
    """The operator's ``autoScalingSpec`` (KEDA): replicas between min and max, driven by one trigger."""

    min_replicas: int = _bounded("min_replicas", description="0 scales to zero")
    max_replicas: int = _bounded("max_replicas")
    trigger: Trigger
    polling_interval_s: int = _bounded("polling_interval_s", description="how often KEDA reads the metric")
    cooldown_s: int = _bounded("cooldown_s", description="wait before scaling to zero (min 0)")
    initial_cooldown_s: int = _bounded("initial_cooldown_s", description="no scaling this long after creation")
    scale_up_stabilization_s: int = _bounded("scale_up_stabilization_s")
    scale_down_stabilization_s: int = _bounded("scale_down_stabilization_s",
                                               description="the highest recommendation of this window wins")

    def to_spec(self) -> autoscaling.HyperPodAutoScaling:
        """The library's autoscaling (an exporter trigger is resolved by the construct, which knows the cluster)."""
        t = self.trigger
        trigger = (t.exporter.to_spec() if t.exporter
                   else t.cloudwatch.to_spec() if t.cloudwatch else t.prometheus.to_spec())
        seconds = cdk.Duration.seconds
        return autoscaling.HyperPodAutoScaling(
            self.max_replicas, trigger, self.min_replicas, seconds(self.polling_interval_s), seconds(self.cooldown_s),
            seconds(self.initial_cooldown_s), seconds(self.scale_up_stabilization_s),
            seconds(self.scale_down_stabilization_s))

    @model_validator(mode="after")
    def _range(self) -> AutoScaling:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas {self.min_replicas} -- must not exceed max_replicas ({self.max_replicas})")
        return self


Probes = config_model(props.Probes)
Metrics = config_model(props.Metrics)
KvCache = config_model(props.KvCache)
LoadBalancer = config_model(props.LoadBalancer)
Tls = config_model(props.Tls)
RequestLimits = config_model(props.RequestLimits)
