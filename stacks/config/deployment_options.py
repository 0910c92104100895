"""What a cached model's HyperPod deployment may set beyond its model: scaling and serving options.

Each model maps onto one field of the operator's ``InferenceEndpointConfig`` (CRD in
``manifests/crds/``, rendered by :mod:`manifests.options`). Everything is opt-in: a model without
these keys gets exactly the object it had before, and the operator's defaults.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from hyperwarm.caches import autoscaling

from .strict import StrictModel, described, pattern_in_words

_AMP_WORKSPACE = described(
    autoscaling.AMP_WORKSPACE,
    "an Amazon Managed Service for Prometheus workspace URL, "
    "e.g. https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567")
_HTTP_PATH = described(r"^/[a-zA-Z0-9\-_./]*$", "an HTTP path starting with /, e.g. /ping")
_ACM_ARN = described(r"^arn:aws:acm:[a-z0-9-]+:[0-9]{12}:certificate/[a-fA-F0-9-]+$",
                     "an ACM certificate ARN, e.g. arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d-...")
_DOMAIN = described(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$",
                    "a lower-case domain name without wildcard, e.g. chat.example.com")
_S3_URI = described(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$",
                    "an S3 URI, e.g. s3://my-bucket/certificates/")
_REDIS_URL = described(r"^rediss?://[^\s]+$", "a redis:// or rediss:// URL, e.g. rediss://kv.example.internal:6379")

MetricType = Literal["Average", "Value"]


class CloudWatchTrigger(StrictModel):
    """Scale on a CloudWatch metric (KEDA's aws-cloudwatch scaler)."""

    namespace: str = Field(min_length=1, max_length=255, description="e.g. AWS/SageMaker")
    metric_name: str = Field(min_length=1, max_length=255)
    dimensions: dict[str, str] = Field(default_factory=dict, description="dimension name -> value")
    statistic: str = Field(default="Average", pattern=described(
        autoscaling.STATISTIC,
        "a CloudWatch statistic: Average, Sum, Minimum, Maximum, SampleCount or a percentile such as p99"))
    target_value: float = Field(gt=0, description="the value per replica (metric_type Average) KEDA keeps")
    activation_target_value: float = Field(default=0, ge=0, description="scale from 0 above this; min_replicas 0")
    metric_type: MetricType = "Average"
    period_s: int = Field(default=300, ge=autoscaling.PERIOD_S[0], le=autoscaling.PERIOD_S[1],
                          description="the CloudWatch query period; default 300")
    min_value: float = Field(default=0, description="the value assumed when CloudWatch returns no data")

    def to_spec(self) -> autoscaling.CloudWatchTrigger:
        return autoscaling.CloudWatchTrigger(
            self.namespace, self.metric_name, self.target_value, dict(self.dimensions), self.statistic,
            self.activation_target_value, self.metric_type, self.period_s, self.min_value)


class PrometheusTrigger(StrictModel):
    """Scale on a PromQL query against an Amazon Managed Service for Prometheus workspace."""

    server_address: str = Field(pattern=_AMP_WORKSPACE)
    query: str = Field(min_length=1, max_length=4096)
    target_value: float = Field(gt=0)
    activation_target_value: float = Field(default=0, ge=0)
    metric_type: MetricType = "Average"

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
    activation_target_value: float = Field(default=0, ge=0, description="scale from 0 above this; min_replicas 0")
    statistic: Literal["Average", "Maximum"] = "Average"
    period_s: int = Field(default=60, ge=autoscaling.PERIOD_S[0], le=autoscaling.PERIOD_S[1],
                          description="the CloudWatch query period; the exporter publishes every 60 s")
    min_value: float = Field(
        default=0, ge=0,
        description="what KEDA assumes while the metric has no data (the exporter failed, or could not read every "
                    "pod: RequestsWaiting is then not published). 0 fails open: without data the model scales in "
                    "to min_replicas, even under load. To hold capacity instead, give target_value x the replicas "
                    "to keep (e.g. 16 with target_value 8 holds 2)")

    def to_spec(self, *, cluster_name: str, model: str) -> autoscaling.CloudWatchTrigger:
        return autoscaling.CloudWatchTrigger.on_exporter(
            self.metric, cluster_name=cluster_name, model=model, target_value=self.target_value,
            activation_target_value=self.activation_target_value, statistic=self.statistic, period_s=self.period_s,
            min_value=self.min_value)


class Trigger(StrictModel):
    """Exactly one of ``cloudwatch``, ``prometheus`` and ``exporter``."""

    cloudwatch: CloudWatchTrigger | None = None
    prometheus: PrometheusTrigger | None = None
    exporter: ExporterTrigger | None = None

    @model_validator(mode="after")
    def _one(self) -> "Trigger":
        if sum(t is not None for t in (self.cloudwatch, self.prometheus, self.exporter)) != 1:
            raise ValueError("give exactly one of cloudwatch, prometheus and exporter")
        return self


def _bounded(name: str, **kwargs: Any) -> Any:
    """A field within the library's range for ``name`` (:data:`hyperwarm.caches.autoscaling.RANGES`, the CRD's)."""
    low, high = autoscaling.RANGES[name]
    return Field(ge=low, le=high, **kwargs)


class AutoScaling(StrictModel):
    """The operator's ``autoScalingSpec`` (KEDA): replicas between min and max, driven by one trigger."""

    min_replicas: int = _bounded("min_replicas", default=1, description="0 scales to zero; default 1")
    max_replicas: int = _bounded("max_replicas")
    trigger: Trigger
    polling_interval_s: int = _bounded("polling_interval_s", default=30, description="how often KEDA reads the metric")
    cooldown_s: int = _bounded("cooldown_s", default=300, description="wait before scaling to zero (min 0)")
    initial_cooldown_s: int = _bounded("initial_cooldown_s", default=300,
                                       description="no scaling this long after creation")
    scale_up_stabilization_s: int = _bounded("scale_up_stabilization_s", default=0)
    scale_down_stabilization_s: int = _bounded("scale_down_stabilization_s", default=300,
                                               description="the highest recommendation of this window wins")

    def to_spec(self, *, model: str, cluster_name: str) -> autoscaling.HyperPodAutoScaling:
        """The construct library's autoscaling of ``model`` (``cluster_name``: the EKS cluster's, for an
        exporter trigger)."""
        t = self.trigger
        trigger = (t.exporter.to_spec(cluster_name=cluster_name, model=model) if t.exporter
                   else t.cloudwatch.to_spec() if t.cloudwatch else t.prometheus.to_spec())
        return autoscaling.HyperPodAutoScaling(
            self.max_replicas, trigger, self.min_replicas, self.polling_interval_s, self.cooldown_s,
            self.initial_cooldown_s, self.scale_up_stabilization_s, self.scale_down_stabilization_s)

    @model_validator(mode="after")
    def _range(self) -> "AutoScaling":
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas {self.min_replicas} -- must not exceed max_replicas ({self.max_replicas})")
        return self


class Probes(StrictModel):
    """HTTP probes of the serving container; the startup probe's budget is the planner's cold start.

    The startup probe holds the liveness probe off until the server first answers, for as long as a
    pod on a cold node needs to pull the image and download the weights (``python -m stacks plan
    cache``), so a cold start is never killed as a hung server.
    """

    path: str = Field(default="/ping", pattern=_HTTP_PATH, description="the server's health path")
    period_s: int = Field(default=10, ge=1, le=300)
    timeout_s: int = Field(default=5, ge=1, le=300)
    liveness_failures: int = Field(default=3, ge=1, le=100, description="failed checks before a restart")
    readiness: bool = Field(default=True, description="also take the pod out of service while it fails")
    # One check fails on one slow answer; a busy 70B pod answers its health path between engine steps,
    # and the planner's engine (constructs/hyperwarm/planner/sim.py: 8,192-token prefill steps at 36,900 tokens/s, about
    # 0.22 s each, behind a queue of them under load) can delay one answer past the timeout. Three
    # failures in a row at the default period (30 s) are a server that stopped answering, not a busy one.
    readiness_failures: int = Field(default=3, ge=1, le=100,
                                    description="failed checks before the pod leaves service; at most liveness_failures")

    @model_validator(mode="after")
    def _ready_before_restarted(self) -> "Probes":
        if self.readiness and self.readiness_failures > self.liveness_failures:
            raise ValueError(f"readiness_failures {self.readiness_failures} -- must not exceed liveness_failures "
                             f"({self.liveness_failures}): a failing pod leaves service before it is restarted")
        return self


class Metrics(StrictModel):
    """The operator's metrics scrape of the serving container."""

    enabled: bool = True
    scrape_interval_s: int = Field(default=15, ge=5, le=300)
    path: str = Field(default="/metrics", pattern=_HTTP_PATH)
    port: int | None = Field(default=None, ge=1024, le=65535, description="default: the model's port")


class KvCache(StrictModel):
    """Tiered KV cache: L1 in the pod's CPU memory, L2 in redis or the operator's tiered storage."""

    l1: bool = Field(default=True, description="offload KV blocks to the pod's CPU memory")
    l2: Literal["redis", "tieredstorage"] | None = None
    l2_url: str | None = Field(default=None, description="redis: the rediss:// URL; tieredstorage: optional")

    @model_validator(mode="after")
    def _l2(self) -> "KvCache":
        if self.l2 == "redis" and not self.l2_url:
            raise ValueError("l2 redis needs l2_url, e.g. rediss://kv.example.internal:6379")
        if self.l2 == "redis" and not re.match(_REDIS_URL, self.l2_url or ""):
            raise ValueError(f"l2_url {self.l2_url!r} -- {pattern_in_words(_REDIS_URL)}")
        if self.l2_url and not self.l2:
            raise ValueError("l2_url needs l2 (redis or tieredstorage)")
        return self


class LoadBalancer(StrictModel):
    """The Application Load Balancer the operator puts in front of the deployment."""

    health_check_path: str = Field(default="/ping", pattern=_HTTP_PATH)
    idle_timeout_s: int = Field(default=60, ge=1, le=4000, description="long generations need more than 60")
    routing_algorithm: Literal["least_outstanding_requests", "round_robin"] = "least_outstanding_requests"


class Tls(StrictModel):
    """Your ACM certificate, or where the operator writes its self-signed one."""

    certificate_arn: str | None = Field(default=None, pattern=_ACM_ARN)
    domain_name: str | None = Field(default=None, pattern=_DOMAIN, max_length=253)
    certificate_output_s3_uri: str | None = Field(
        default=None, pattern=_S3_URI, description="where the operator stores a generated certificate")

    @model_validator(mode="after")
    def _pair(self) -> "Tls":
        if (self.certificate_arn is None) != (self.domain_name is None):
            raise ValueError("certificate_arn and domain_name go together (the domain must be on the certificate)")
        if not (self.certificate_arn or self.certificate_output_s3_uri):
            raise ValueError("give certificate_arn with domain_name, or certificate_output_s3_uri")
        return self


class RequestLimits(StrictModel):
    """Fail fast at the pod's proxy instead of queueing without bound."""

    max_concurrent_requests: int = Field(ge=1, le=100_000)
    max_queue_size: int = Field(default=0, ge=0, le=100_000, description="0: reject at the limit")
    overflow_status_code: int = Field(default=429, ge=400, le=599)
