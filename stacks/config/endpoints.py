"""The ``endpoints`` section of an environment: SageMaker real-time endpoints and their variants.

Validated like the rest of ``cdk.json`` (strict, frozen, one error per problem naming the field
path). Routing rules come from :func:`hyperwarm.endpoints.routing.routing_problems`, the same function the
construct uses, so config and library users get the same messages.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from hyperwarm.endpoints.props import METRIC_PUBLISH_FREQUENCIES, SCALING_METRICS
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.serving.inference_ami import cuda_ami_problem
from hyperwarm.endpoints.routing import (
    CONCURRENCY_THRESHOLD_RANGE,
    PREFIX_LENGTH_RANGE,
    ROUTING_STRATEGIES,
    Routing,
    routing_problems,
)
from hyperwarm.serving.settings import sagemaker_placement, server_settings

from .serving import ServingConfig
from .strict import StrictModel, described, repeated

_NAME = described(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$",
                  "1..63 letters, digits or hyphens, starting and ending with a letter or digit, e.g. prefix-aware")
_S3_URI = described(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/\S+$",
                    "an S3 URI of an object or prefix, e.g. s3://my-models/llama-3.1-8b-instruct/v1/")
_ECR_URI = described(r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/\S+$",
                     "an ECR image URI, e.g. 123456789012.dkr.ecr.us-west-2.amazonaws.com/my-server:1.0")
_FRAMEWORK = described(r"^[a-z0-9-]+$",
                       "lower-case letters, digits or hyphens, e.g. vllm or djl-lmi")
_VERSION = described(r"^[0-9][0-9a-z.+-]*$",
                     "a version starting with a digit, e.g. 0.27.1")
_INSTANCE_TYPE = described(r"^ml\.[a-z0-9-]+\.[a-z0-9]+$",
                           "an ml.* instance type, e.g. ml.g5.2xlarge")
_AMI_VERSION = described(r"^[a-z0-9][a-z0-9-]{0,62}$",
                         "an InferenceAmiVersion, e.g. al2023-ami-sagemaker-inference-gpu-4-1")
_ENDPOINT_NAME = described(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,40}$",
                           "1..41 letters, digits or hyphens, starting and ending with a letter or digit, e.g. chat")


class RoutingConfig(StrictModel):
    """``RoutingConfig`` of a variant; PREFIX_AWARE needs both prefix fields, others take none."""

    strategy: Literal["RANDOM", "LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE", "KV_AWARE"]
    prefix_length: Annotated[int, Field(ge=PREFIX_LENGTH_RANGE[0], le=PREFIX_LENGTH_RANGE[1])] | None = None
    concurrency_threshold: Annotated[
        int, Field(ge=CONCURRENCY_THRESHOLD_RANGE[0], le=CONCURRENCY_THRESHOLD_RANGE[1])] | None = None

    def to_routing(self) -> Routing:
        return Routing(self.strategy, self.prefix_length, self.concurrency_threshold)

    @model_validator(mode="after")
    def _prefix_fields(self) -> "RoutingConfig":
        errors, _ = routing_problems(self.to_routing(), max_instances=2, min_instances=2)
        if errors:
            raise ValueError("; ".join(errors))
        return self


assert set(ROUTING_STRATEGIES) == set(RoutingConfig.model_fields["strategy"].annotation.__args__)


class ImageConfig(StrictModel):
    """Either an explicit ECR ``uri`` or an official ``framework`` with its ``version``."""

    uri: str | None = Field(default=None, pattern=_ECR_URI)
    framework: str | None = Field(default=None, pattern=_FRAMEWORK,
                                  description="sagemaker image_uris framework, e.g. vllm, djl-lmi, huggingface-llm")
    version: str | None = Field(default=None, pattern=_VERSION)

    @model_validator(mode="after")
    def _one_source(self) -> "ImageConfig":
        if bool(self.uri) == bool(self.framework):
            raise ValueError("give either uri, or framework with version")
        if self.framework and not self.version:
            raise ValueError(f"framework {self.framework!r} needs a version")
        if self.uri and self.version:
            raise ValueError("version goes with framework, not with uri")
        return self


class AutoscalingConfig(StrictModel):
    min_capacity: int = Field(default=1, ge=1)
    max_capacity: int = Field(ge=1)
    metric: Literal["ConcurrentRequestsPerModel", "InvocationsPerInstance"] = "ConcurrentRequestsPerModel"
    target_value: float = Field(gt=0)
    scale_in_cooldown_seconds: int = Field(default=600, ge=0, le=86400)
    scale_out_cooldown_seconds: int = Field(default=120, ge=0, le=86400)

    @model_validator(mode="after")
    def _order(self) -> "AutoscalingConfig":
        if self.max_capacity < self.min_capacity:
            raise ValueError(f"max_capacity {self.max_capacity} is below min_capacity {self.min_capacity}")
        return self


assert set(SCALING_METRICS) == set(AutoscalingConfig.model_fields["metric"].annotation.__args__)


class ServerlessConfig(StrictModel):
    memory_size_mb: Literal[1024, 2048, 3072, 4096, 5120, 6144]
    max_concurrency: int = Field(ge=1, le=200)


class VariantConfig(StrictModel):
    """One production variant: its model, capacity, weight and routing."""

    name: str = Field(pattern=_NAME, description="1..63 letters, digits or hyphens")
    image: ImageConfig
    model_data: str | None = Field(default=None, pattern=_S3_URI, description="s3://bucket/key (object or prefix)")
    serving: ServingConfig = Field(default_factory=ServingConfig,
                                   description="what the model server is told beyond the derived settings")
    instance_type: str | None = Field(default=None, pattern=_INSTANCE_TYPE,
                                      description="an ml.* instance type")
    instance_count: int = Field(default=1, ge=1)
    initial_weight: float = Field(default=1.0, gt=0)
    routing: RoutingConfig | None = Field(default=None, description="none means RANDOM, as in SageMaker")
    autoscaling: AutoscalingConfig | None = None
    serverless: ServerlessConfig | None = None
    model_data_download_timeout_seconds: int | None = Field(default=None, ge=60, le=3600)
    container_startup_health_check_timeout_seconds: int | None = Field(default=None, ge=60, le=3600)
    inference_ami_version: str | None = Field(
        default=None, pattern=_AMI_VERSION,
        description="InferenceAmiVersion (host AMI and GPU driver); needed for images built for a newer CUDA")

    @property
    def max_instances(self) -> int:
        return self.autoscaling.max_capacity if self.autoscaling else self.instance_count

    @property
    def min_instances(self) -> int:
        return self.autoscaling.min_capacity if self.autoscaling else self.instance_count

    @model_validator(mode="after")
    def _capacity(self) -> "VariantConfig":
        if self.serverless is None and self.instance_type is None:
            raise ValueError(f"variant {self.name!r}: instance_type is required unless the variant is serverless")
        if self.serverless is not None and (self.instance_type or self.autoscaling):
            raise ValueError(f"variant {self.name!r}: serverless variants take no instance_type or autoscaling")
        if self.image.uri is not None and self.serverless is None:
            problem = cuda_ami_problem(self.image.uri, self.inference_ami_version)
            if problem:
                raise ValueError(f"variant {self.name!r}: inference_ami_version = {self.inference_ami_version!r} "
                                 f"-- {problem}")
        if self.routing is not None:
            errors, _ = routing_problems(self.routing.to_routing(), serverless=self.serverless is not None,
                                         min_instances=self.min_instances, max_instances=self.max_instances)
            if errors:
                raise ValueError(f"variant {self.name!r}: " + "; ".join(errors))
        return self


class GuardrailsConfig(StrictModel):
    traffic: Literal["ALL_AT_ONCE", "CANARY", "LINEAR"] = "ALL_AT_ONCE"
    percent: int | None = Field(default=None, validate_default=True,
                                ge=min(low for low, _ in contract.SHIFT_PERCENT.values()),
                                le=max(high for _, high in contract.SHIFT_PERCENT.values()),
                                description="percent of the variant's instances: CANARY 1..50, LINEAR 10..50")
    wait_seconds: int = Field(default=300, ge=contract.WAIT_SECONDS_RANGE[0], le=contract.WAIT_SECONDS_RANGE[1])
    alarm_on_5xx_errors: bool = True

    @field_validator("percent")
    @classmethod
    def _percent(cls, percent: int | None, info: ValidationInfo) -> int | None:
        traffic = info.data.get("traffic")  # absent when it failed its own check
        if traffic is not None and traffic not in contract.SHIFT_PERCENT and percent is not None:
            raise ValueError(f"only CANARY and LINEAR take a percent, not {traffic}")
        if traffic is not None and (problem := contract.shift_percent_problem(traffic, percent)):
            raise ValueError(problem if percent is not None else f"a percent is needed: {problem}")
        return percent


assert GuardrailsConfig.model_fields["traffic"].annotation.__args__ == contract.TRAFFIC_TYPES


class DataCaptureConfig(StrictModel):
    sampling_percentage: int = Field(default=10, ge=0, le=100)


class EndpointConfig(StrictModel):
    """One SageMaker endpoint of the environment (named ``hyperwarm-<env>-<name>``)."""

    name: str = Field(pattern=_ENDPOINT_NAME, description="1..41 letters, digits or hyphens")
    variants: tuple[VariantConfig, ...] = Field(min_length=1, max_length=10)
    guardrails: GuardrailsConfig | None = None
    data_capture: DataCaptureConfig | None = None
    network_isolation: bool = True
    detailed_observability: bool = Field(
        default=True, description="SageMaker AI detailed observability: the container's metrics, TTFT among them")
    metric_publish_frequency_seconds: int | None = Field(
        default=None, description="10, 30, 60, 120, 180, 240 or 300; none: SageMaker's 60")

    @field_validator("metric_publish_frequency_seconds")
    @classmethod
    def _frequency(cls, value: int | None) -> int | None:
        if value is not None and value not in METRIC_PUBLISH_FREQUENCIES:
            raise ValueError(f"allowed: {', '.join(str(s) for s in METRIC_PUBLISH_FREQUENCIES)} seconds")
        return value

    @model_validator(mode="after")
    def _unique_variants(self) -> "EndpointConfig":
        names = [v.name for v in self.variants]
        dupes = repeated(names)
        if dupes:
            raise ValueError(f"endpoint {self.name!r}: variant names must be unique; repeated: {', '.join(dupes)}")
        return self


def serving_problems(endpoints: tuple[EndpointConfig, ...]) -> list[str]:
    """What each variant's model server is told, checked against its instance type (see :mod:`hyperwarm.serving.settings`)."""
    problems = []
    for e, endpoint in enumerate(endpoints):
        for i, v in enumerate(endpoint.variants):
            placement = sagemaker_placement(instance_type=v.instance_type, serverless=v.serverless is not None,
                                            has_model_data=v.model_data is not None)
            image = f"{v.image.framework} {v.image.version}" if v.image.framework else str(v.image.uri)
            settings = server_settings(v.serving.to_serving(), placement, image=image,
                                       image_framework=v.image.framework, image_uri=v.image.uri)
            problems += [p.at(f"endpoints[{e}].variants[{i}]") for p in settings.problems]
    return problems


def endpoint_name(env_name: str, endpoint: EndpointConfig) -> str:
    """The SageMaker name of an environment's endpoint: ``hyperwarm-<env>-<name>``."""
    return f"hyperwarm-{env_name}-{endpoint.name}"


def _unique_endpoint_names(endpoints: tuple[EndpointConfig, ...]) -> tuple[EndpointConfig, ...]:
    names = [e.name for e in endpoints]
    dupes = repeated(names)
    if dupes:
        raise ValueError(f"endpoint names must be unique; repeated: {', '.join(dupes)}")
    return endpoints


Endpoints = Annotated[tuple[EndpointConfig, ...], AfterValidator(_unique_endpoint_names)]
"""The type of ``EnvironmentConfig.endpoints``."""
