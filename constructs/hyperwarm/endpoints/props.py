"""Properties of :class:`~hyperwarm.endpoints.endpoint.InferenceEndpoint`: frozen dataclasses, one per concept.

These are the one definition of every field, its default and its range: ranges are ``typing.Annotated``
metadata (:mod:`hyperwarm._internal.constraints`), which the construct checks and the app's cdk.json
parsing reads. Ranges are SageMaker's, as its API model (botocore ``sagemaker`` 2017-07-24) states them.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import aws_cdk as cdk
from annotated_types import Ge, Gt, Interval, Len, MultipleOf
from aws_cdk import aws_cloudwatch as cloudwatch, aws_kms as kms, aws_s3 as s3

from hyperwarm._internal.constraints import mebibytes, seconds
from hyperwarm.endpoints.routing import Routing
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.serving.images import ServingImage
from hyperwarm.serving.settings import Serving

TrafficType = Literal["ALL_AT_ONCE", "CANARY", "LINEAR"]
"""How a blue/green update shifts traffic (``TrafficRoutingConfig.Type``; ``contract.TRAFFIC_TYPES``)."""

ScalingMetric = Literal["ConcurrentRequestsPerModel", "InvocationsPerInstance"]
SCALING_METRICS: tuple[str, ...] = typing.get_args(ScalingMetric)
"""What :class:`VariantAutoscaling` may track (SageMaker's predefined variant metrics)."""
METRIC_PUBLISH_FREQUENCIES = (10, 30, 60, 120, 180, 240, 300)
"""``MetricsConfig.MetricPublishFrequencyInSeconds`` values SageMaker accepts."""

ServerlessMemory = Annotated[cdk.Size, mebibytes(Interval(ge=1024, le=6144), MultipleOf(1024))]
"""``ServerlessMemorySizeInMB``: min 1024, max 6144, "in 1 GB increments"."""
ServerlessConcurrency = Annotated[int, Interval(ge=1, le=200)]
"""``ServerlessMaxConcurrency`` and ``ServerlessProvisionedConcurrency``: 1..200."""
StartupTimeout = Annotated[cdk.Duration, seconds(Interval(ge=60, le=3600))]
"""``ProductionVariantModelDataDownloadTimeoutInSeconds`` and
``ProductionVariantContainerStartupHealthCheckTimeoutInSeconds``: 60..3600."""
ShiftWait = Annotated[cdk.Duration, seconds(Interval(ge=contract.WAIT_SECONDS_RANGE[0],
                                                     le=contract.WAIT_SECONDS_RANGE[1]))]
"""``WaitIntervalInSeconds`` and ``TerminationWaitInSeconds``: 0..3600."""
ShiftPercent = Annotated[int, Interval(ge=min(low for low, _ in contract.SHIFT_PERCENT.values()),
                                       le=max(high for _, high in contract.SHIFT_PERCENT.values()))]
"""``CapacitySize.Value`` in percent: CANARY 1..50, LINEAR 10..50 (:func:`contract.shift_percent_problem`)."""
VARIANT_COUNT = Len(1, 10)
"""``ProductionVariantList``: 1..10 variants."""
InstanceCount = Annotated[int, Ge(1)]
"""``InitialTaskCount``: at least 1."""
VariantWeight = Annotated[float, Gt(0)]
"""``VariantWeight`` (min 0 in the API model); hyperwarm wants it positive: a variant of weight 0 gets no traffic."""
SamplingPercentage = Annotated[int, Interval(ge=0, le=100)]
"""``DataCaptureConfig.InitialSamplingPercentage``: 0..100."""
MetricPublishFrequency = Annotated[cdk.Duration, seconds()]
"""``MetricsConfig.MetricPublishFrequencyInSeconds``: one of :data:`METRIC_PUBLISH_FREQUENCIES` (a rule, not a range)."""
Cooldown = Annotated[cdk.Duration, seconds(Ge(0))]
"""Application Auto Scaling's ``ScaleInCooldown``/``ScaleOutCooldown``: seconds, no upper bound in its API model."""


def _minutes(n: int) -> cdk.Duration:
    return cdk.Duration.minutes(n)


@dataclass(frozen=True)
class ModelSpec:
    """What a variant serves."""

    image: ServingImage
    """Serving container: ``ServingImage.official("vllm", "0.27.1")``, ``.from_uri(...)`` or ``.from_ecr_repository(...)``."""
    model_data: str | None = None
    """``s3://bucket/key``: a ``.tar.gz`` object, or a prefix of uncompressed files (e.g. safetensors).
    Default: none (the container brings or downloads its model)."""
    model_data_key: kms.IKey | None = None
    """The customer-managed KMS key of ``model_data``'s bucket (SSE-KMS): the endpoint's role gets
    ``kms:Decrypt`` on it. Default: none (S3-managed or AWS-managed encryption needs no grant)."""
    serving: Serving = field(default_factory=Serving)
    """What the model server is told beyond what hyperwarm derives from the variant (model at
    ``/opt/ml/model`` when ``model_data`` is given, tensor parallelism = the GPUs of the instance type
    or of an inference-component copy): environment, server flags, and for images hyperwarm does not
    recognise, the convention they follow. Default: the derived settings only."""


@dataclass(frozen=True)
class ServerlessSpec:
    """A serverless variant (no instances, no routing)."""

    memory_size: ServerlessMemory
    """1024..6144 MiB in steps of 1024, e.g. ``Size.gibibytes(2)``."""
    max_concurrency: ServerlessConcurrency
    """1..200."""
    provisioned_concurrency: ServerlessConcurrency | None = None
    """1..200, at most ``max_concurrency``. Default: none."""


@dataclass(frozen=True)
class VariantAutoscaling:
    """Target tracking on the variant's instance count (Application Auto Scaling); named for the service it
    scales, beside HyperPod's :class:`~hyperwarm.caches.autoscaling.HyperPodAutoscaling` (KEDA)."""

    max_capacity: Annotated[int, Ge(1)]
    """Most instances; at least ``min_capacity``."""
    target_value: Annotated[float, Gt(0)]
    """Target of ``metric`` per instance (or per model copy for ConcurrentRequestsPerModel)."""
    min_capacity: Annotated[int, Ge(1)] = 1
    """Fewest instances. Default: 1."""
    metric: ScalingMetric = "ConcurrentRequestsPerModel"
    """``ConcurrentRequestsPerModel`` (high resolution, suits long LLM requests) or
    ``InvocationsPerInstance``. Default: ConcurrentRequestsPerModel."""
    scale_in_cooldown: Cooldown = field(default_factory=lambda: _minutes(10))
    """Default: 10 minutes (GPU instances take minutes to start; do not drop them eagerly)."""
    scale_out_cooldown: Cooldown = field(default_factory=lambda: _minutes(2))
    """Default: 2 minutes."""


@dataclass(frozen=True)
class InferenceComponentSpec:
    """Serve the variant's model as an inference component: copies share instances, routing applies
    per copy, and SageMaker can cache the model artifacts and image on the instances."""

    copies: Annotated[int, Ge(1)] = 1
    """Model copies, at least one (``InferenceComponentCopyCount`` allows 0, a component that serves nothing).
    Default: 1."""
    accelerators_per_copy: Annotated[float, Ge(1)] | None = None
    """GPUs each copy needs, at least 1 (``NumberOfAcceleratorDevices``). Default: none (SageMaker places by memory)."""
    min_memory: Annotated[cdk.Size, mebibytes(Ge(128))] = field(default_factory=lambda: cdk.Size.mebibytes(1024))
    """Host memory each copy needs, at least 128 MiB (``MemoryInMb``). Default: 1024 MiB."""
    enable_caching: bool = True
    """``DataCacheConfig.EnableCaching``: keep artifacts and image on the instance for faster scale-out. Default: true."""


@dataclass(frozen=True)
class ProductionVariant:
    """One production variant of an endpoint."""

    name: str
    """1..63 letters, digits or hyphens; unique in the endpoint."""
    model: ModelSpec
    """What the variant serves."""
    instance_type: str | None = None
    """An ``ml.*`` type; required unless ``serverless``. Default: none."""
    instance_count: InstanceCount = 1
    """Initial instances. Default: 1."""
    initial_weight: VariantWeight = 1.0
    """Share of traffic relative to the other variants; positive. Default: 1."""
    routing: Routing | None = None
    """Default: none, which SageMaker treats as RANDOM."""
    serverless: ServerlessSpec | None = None
    """Default: an instance-based variant."""
    autoscaling: VariantAutoscaling | None = None
    """Default: a fixed instance count."""
    inference_component: InferenceComponentSpec | None = None
    """Default: the model is bound to the variant directly."""
    model_data_download_timeout: StartupTimeout | None = None
    """60..3600 s. Default: SageMaker's (raise it for models of tens of GB)."""
    container_startup_health_check_timeout: StartupTimeout | None = None
    """60..3600 s. Default: SageMaker's (raise it for large models that load slowly)."""
    inference_ami_version: str | None = None
    """``InferenceAmiVersion``: the host AMI and so its GPU driver, e.g.
    ``al2023-ami-sagemaker-inference-gpu-4-1`` (driver 580, CUDA 13.0). Default: SageMaker's default AMI
    (driver 470 or 535); synth fails when the image's tag names a CUDA (``cu130``) that driver cannot run."""

    @property
    def max_instances(self) -> Any:
        """The most instances the variant runs: the autoscaling maximum, else the instance count."""
        return self.autoscaling.max_capacity if self.autoscaling else self.instance_count

    @property
    def min_instances(self) -> Any:
        """The fewest instances the variant runs: the autoscaling minimum, else the instance count."""
        return self.autoscaling.min_capacity if self.autoscaling else self.instance_count


@dataclass(frozen=True)
class TrafficShift:
    """How blue/green updates move traffic to the new fleet. Use the static factories."""

    type: TrafficType = "ALL_AT_ONCE"
    """ALL_AT_ONCE, CANARY or LINEAR. Default: ALL_AT_ONCE."""
    percent: ShiftPercent | None = None
    """Canary size (1..50) or linear step (10..50) in percent of capacity; CANARY and LINEAR only. Default: none."""
    wait: ShiftWait | None = None
    """Bake time between steps (``WaitIntervalInSeconds``, 0..3600 s, which SageMaker requires). Default: 10
    minutes for CANARY, whose bake must outlast the 5XX rollback alarm (2 of 3 one-minute periods) on a canary
    still warming its KV cache; 5 minutes for ALL_AT_ONCE and LINEAR (see :meth:`bake_time`)."""

    def bake_time(self) -> cdk.Duration:
        """``wait``, or the default of this type of shift."""
        return self.wait or _minutes(10 if self.type == "CANARY" else 5)

    @staticmethod
    def all_at_once(wait: cdk.Duration | None = None) -> TrafficShift:
        """All traffic at once, then ``wait`` (default 5 minutes) of baking."""
        return TrafficShift("ALL_AT_ONCE", None, wait)

    @staticmethod
    def canary(percent: int, wait: cdk.Duration | None = None) -> TrafficShift:
        """``percent`` of capacity first (1..50), then the rest after ``wait`` (default 10 minutes)."""
        return TrafficShift("CANARY", percent, wait)

    @staticmethod
    def linear(percent: int, wait: cdk.Duration | None = None) -> TrafficShift:
        """Steps of ``percent`` of capacity (10..50) every ``wait`` (default 5 minutes)."""
        return TrafficShift("LINEAR", percent, wait)


@dataclass(frozen=True)
class DeploymentGuardrails:
    """Blue/green endpoint updates with traffic shifting and alarm-driven automatic rollback."""

    traffic: TrafficShift = field(default_factory=TrafficShift.all_at_once)
    """Default: all at once after 5 minutes of baking."""
    rollback_alarms: Sequence[cloudwatch.IAlarm] = ()
    """Alarms that roll the update back. Default: none besides the 5XX alarms below."""
    alarm_on_5xx_errors: bool = True
    """Add one Invocation5XXErrors alarm per variant to the rollback alarms (needs ``endpoint_name``). Default: true."""
    termination_wait: ShiftWait = field(default_factory=lambda: _minutes(5))
    """How long the old fleet stays after the shift. Default: 5 minutes."""


@dataclass(frozen=True)
class DataCapture:
    """Capture requests and responses to S3, encrypted with the endpoint's KMS key."""

    sampling_percentage: SamplingPercentage = 10
    """0..100. Default: 10."""
    bucket: s3.IBucket | None = None
    """Default: a new bucket (KMS, versioned, block public access, SSL only, retained)."""
    prefix: str = "data-capture"
    """Key prefix. Default: ``data-capture``."""


@dataclass(frozen=True)
class InferenceEndpointProps:
    """Properties of :class:`~hyperwarm.endpoints.endpoint.InferenceEndpoint`."""

    variants: Annotated[Sequence[ProductionVariant], VARIANT_COUNT]
    """1..10 production variants (``ProductionVariantList``)."""
    endpoint_name: str | None = None
    """Default: generated by CloudFormation (then 5XX rollback alarms are unavailable)."""
    guardrails: DeploymentGuardrails | None = None
    """Default: SageMaker's blue/green, all at once, no rollback alarms."""
    data_capture: DataCapture | None = None
    """Default: no capture."""
    encryption_key: kms.IKey | None = None
    """Encrypts endpoint storage volumes (omitted for instance types with local NVMe, which SageMaker
    encrypts in hardware and rejects a key for) and captured data. Default: a new key with rotation
    when one is needed."""
    network_isolation: bool = True
    """Run containers without network access (model data still comes from S3). Default: true."""
    detailed_observability: bool = True
    """``MetricsConfig.EnableDetailedObservability``: SageMaker scrapes the serving container's metrics
    (vLLM/SGLang time to first token among them) into CloudWatch, read with PromQL. Set explicitly, since
    SageMaker's default depends on when the config was created (true only after 2026-06-17). Default: true."""
    metric_publish_frequency: MetricPublishFrequency | None = None
    """``MetricsConfig.MetricPublishFrequencyInSeconds``: 10, 30, 60, 120, 180, 240 or 300 seconds.
    Default: SageMaker's (60 seconds)."""
