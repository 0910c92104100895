"""Properties of :class:`~hyperwarm.endpoints.endpoint.InferenceEndpoint`: frozen dataclasses, one per concept.

Loading this module does not load aws-cdk: the cdk types are annotations only, and a default
``Duration`` is made when a dataclass is created (by then the caller has aws-cdk loaded).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from hyperwarm.endpoints.routing import Routing
from hyperwarm.serving.settings import Serving

if TYPE_CHECKING:
    import aws_cdk as cdk
    from aws_cdk import aws_cloudwatch as cloudwatch
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_s3 as s3

    from hyperwarm.serving.images import ContainerImage

SCALING_METRICS = ("InvocationsPerInstance", "ConcurrentRequestsPerModel")
"""What :class:`Autoscaling` may track (SageMaker's predefined variant metrics)."""
METRIC_PUBLISH_FREQUENCIES = (10, 30, 60, 120, 180, 240, 300)
"""``MetricsConfig.MetricPublishFrequencyInSeconds`` values SageMaker accepts."""


def _minutes(n: int) -> "cdk.Duration":
    import aws_cdk as cdk

    return cdk.Duration.minutes(n)


@dataclass(frozen=True)
class ModelSpec:
    """What a variant serves."""

    image: ContainerImage
    """Serving container: ``ContainerImage.official("vllm", "0.27.1")``, ``.from_uri(...)`` or ``.from_ecr_repository(...)``."""
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

    memory_size_mb: int
    """1024..6144 in steps of 1024."""
    max_concurrency: int
    """1..200."""
    provisioned_concurrency: int | None = None
    """Default: none."""


@dataclass(frozen=True)
class Autoscaling:
    """Target tracking on the variant's instance count (Application Auto Scaling)."""

    max_capacity: int
    """Most instances."""
    target_value: float
    """Target of ``metric`` per instance (or per model copy for ConcurrentRequestsPerModel)."""
    min_capacity: int = 1
    """Fewest instances. Default: 1."""
    metric: str = "ConcurrentRequestsPerModel"
    """``ConcurrentRequestsPerModel`` (high resolution, suits long LLM requests) or
    ``InvocationsPerInstance``. Default: ConcurrentRequestsPerModel."""
    scale_in_cooldown: cdk.Duration = field(default_factory=lambda: _minutes(10))
    """Default: 10 minutes (GPU instances take minutes to start; do not drop them eagerly)."""
    scale_out_cooldown: cdk.Duration = field(default_factory=lambda: _minutes(2))
    """Default: 2 minutes."""


@dataclass(frozen=True)
class InferenceComponentSpec:
    """Serve the variant's model as an inference component: copies share instances, routing applies
    per copy, and SageMaker can cache the model artifacts and image on the instances."""

    copies: int = 1
    """Model copies. Default: 1."""
    accelerators_per_copy: float | None = None
    """GPUs each copy needs. Default: none (SageMaker places by memory)."""
    min_memory_mb: int = 1024
    """Host memory each copy needs. Default: 1024."""
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
    instance_count: int = 1
    """Initial instances. Default: 1."""
    initial_weight: float = 1.0
    """Share of traffic relative to the other variants; positive. Default: 1."""
    routing: Routing | None = None
    """Default: none, which SageMaker treats as RANDOM."""
    serverless: ServerlessSpec | None = None
    """Default: an instance-based variant."""
    autoscaling: Autoscaling | None = None
    """Default: a fixed instance count."""
    inference_component: InferenceComponentSpec | None = None
    """Default: the model is bound to the variant directly."""
    model_data_download_timeout: cdk.Duration | None = None
    """60..3600 s. Default: SageMaker's (raise it for models of tens of GB)."""
    container_startup_health_check_timeout: cdk.Duration | None = None
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

    type: str = "ALL_AT_ONCE"
    """ALL_AT_ONCE, CANARY or LINEAR. Default: ALL_AT_ONCE."""
    percent: int | None = None
    """Canary size or linear step in percent of capacity; CANARY and LINEAR only. Default: none."""
    wait: cdk.Duration = field(default_factory=lambda: _minutes(5))
    """Bake time between steps. Default: 5 minutes."""

    @staticmethod
    def all_at_once(wait: cdk.Duration | None = None) -> "TrafficShift":
        """All traffic at once, then ``wait`` (default 5 minutes) of baking."""
        return TrafficShift("ALL_AT_ONCE", None, wait or _minutes(5))

    @staticmethod
    def canary(percent: int, wait: cdk.Duration | None = None) -> "TrafficShift":
        """``percent`` of capacity first (1..50), then the rest after ``wait`` (default 10 minutes)."""
        return TrafficShift("CANARY", percent, wait or _minutes(10))

    @staticmethod
    def linear(percent: int, wait: cdk.Duration | None = None) -> "TrafficShift":
        """Steps of ``percent`` of capacity (10..50) every ``wait`` (default 5 minutes)."""
        return TrafficShift("LINEAR", percent, wait or _minutes(5))


@dataclass(frozen=True)
class DeploymentGuardrails:
    """Blue/green endpoint updates with traffic shifting and alarm-driven automatic rollback."""

    traffic: TrafficShift = field(default_factory=TrafficShift.all_at_once)
    """Default: all at once after 5 minutes of baking."""
    rollback_alarms: Sequence[cloudwatch.IAlarm] = ()
    """Alarms that roll the update back. Default: none besides the 5XX alarms below."""
    alarm_on_5xx_errors: bool = True
    """Add one Invocation5XXErrors alarm per variant to the rollback alarms (needs ``endpoint_name``). Default: true."""
    termination_wait: cdk.Duration = field(default_factory=lambda: _minutes(5))
    """How long the old fleet stays after the shift. Default: 5 minutes."""


@dataclass(frozen=True)
class DataCapture:
    """Capture requests and responses to S3, encrypted with the endpoint's KMS key."""

    sampling_percentage: int = 10
    """0..100. Default: 10."""
    bucket: s3.IBucket | None = None
    """Default: a new bucket (KMS, versioned, block public access, SSL only, retained)."""
    prefix: str = "data-capture"
    """Key prefix. Default: ``data-capture``."""


@dataclass(frozen=True)
class InferenceEndpointProps:
    """Properties of :class:`~hyperwarm.endpoints.endpoint.InferenceEndpoint`."""

    variants: Sequence[ProductionVariant]
    """One or more production variants."""
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
    metric_publish_frequency: cdk.Duration | None = None
    """``MetricsConfig.MetricPublishFrequencyInSeconds``: 10, 30, 60, 120, 180, 240 or 300 seconds.
    Default: SageMaker's (60 seconds)."""
