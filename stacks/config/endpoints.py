"""The ``endpoints`` section of an environment: SageMaker real-time endpoints and their variants.

Validated like the rest of ``cdk.json`` (strict, frozen, one error per problem naming the field
path). The library's props are the schema: ``routing``, ``autoscaling`` and ``serverless`` are the models
:mod:`stacks.config.library` derives from :class:`~hyperwarm.endpoints.routing.Routing`,
:class:`~hyperwarm.endpoints.props.VariantAutoscaling` and :class:`~hyperwarm.endpoints.props.ServerlessSpec`
(parsed into those props), and the other fields take their annotated type and default from the props
field of the same name (times are numbers of seconds, sizes of MiB: their unit markers add no key suffix).
Rules across fields are the library's functions, so config and library users get the same messages.
"""

from __future__ import annotations

import typing
from typing import Annotated, Literal

import aws_cdk as cdk
from pydantic import (
    AfterValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from hyperwarm.endpoints import (
    METRIC_PUBLISH_FREQUENCIES,
    VARIANT_COUNT,
    VARIANT_NAME,
    DataCapture,
    DeploymentGuardrails,
    InstanceCount,
    MetricPublishFrequency,
    ProductionVariant,
    Routing,
    SamplingPercentage,
    ServerlessSpec,
    ShiftPercent,
    ShiftWait,
    StartupTimeout,
    TrafficShift,
    VariantAutoscaling,
    VariantWeight,
    autoscaling_problems,
    routing_problems,
    serverless_problems,
)
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.serving import cuda_ami_problem, sagemaker_placement, server_settings

from .library import parsed_into_props
from .serving import ServingConfig
from .strict import StrictModel, by_rule, described, library_default, repeated

RENAMED_KEYS = {f"{name}_seconds": f"{name} (seconds, as before)" for name in (
    "model_data_download_timeout", "container_startup_health_check_timeout", "scale_in_cooldown",
    "scale_out_cooldown", "wait", "metric_publish_frequency", "model_latency_p99", "ttft_p99")} | {
    "memory_size_mb": "memory_size (MiB, as before)",
    "cold_pod_share_minutes": "cold_pod_share_period (seconds, whole minutes: 15 minutes is 900)"}
"""Keys of the earlier release, named by the error for an unknown key (the props' names carry no unit)."""

_NAME = described(VARIANT_NAME.pattern,  # the library's rule (hyperwarm.endpoints.rules), in words
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


class ImageConfig(StrictModel):
    """Either an explicit ECR ``uri`` or an official ``framework`` with its ``version``."""

    uri: str | None = Field(default=None, pattern=_ECR_URI)
    framework: str | None = Field(default=None, pattern=_FRAMEWORK,
                                  description="sagemaker image_uris framework, e.g. vllm, djl-lmi, huggingface-llm")
    version: str | None = Field(default=None, pattern=_VERSION)

    @model_validator(mode="after")
    def _one_source(self) -> ImageConfig:
        if bool(self.uri) == bool(self.framework):
            raise ValueError("give either uri, or framework with version")
        if self.framework and not self.version:
            raise ValueError(f"framework {self.framework!r} needs a version")
        if self.uri and self.version:
            raise ValueError("version goes with framework, not with uri")
        return self


class VariantConfig(StrictModel):
    """One production variant: its model, capacity, weight and routing."""

    name: str = Field(pattern=_NAME, description="1..63 letters, digits or hyphens")
    image: ImageConfig
    model_data: str | None = Field(default=None, pattern=_S3_URI, description="s3://bucket/key (object or prefix)")
    serving: ServingConfig = Field(default_factory=ServingConfig,
                                   description="what the model server is told beyond the derived settings")
    instance_type: str | None = Field(default=None, pattern=_INSTANCE_TYPE,
                                      description="an ml.* instance type")
    instance_count: InstanceCount = library_default(ProductionVariant, "instance_count")
    initial_weight: VariantWeight = library_default(ProductionVariant, "initial_weight")
    routing: parsed_into_props(Routing) | None = Field(  # type: ignore[valid-type]
        default=None, description="none means RANDOM, as in SageMaker")
    autoscaling: parsed_into_props(VariantAutoscaling) | None = Field(  # type: ignore[valid-type]
        default=None, description="cooldowns in seconds")
    serverless: parsed_into_props(ServerlessSpec) | None = Field(  # type: ignore[valid-type]
        default=None, description="memory_size in MiB")
    model_data_download_timeout: StartupTimeout | None = Field(default=None, description="seconds")
    container_startup_health_check_timeout: StartupTimeout | None = Field(default=None, description="seconds")
    inference_ami_version: str | None = Field(
        default=None, pattern=_AMI_VERSION,
        description="InferenceAmiVersion (host AMI and GPU driver); needed for images built for a newer CUDA")

    # The library's own rules across a field's parts, on the field they are about.
    _routing_rule = field_validator("routing")(
        by_rule(lambda routing: routing_problems(routing, max_instances=2, min_instances=2)[0]))
    _serverless_rule = field_validator("serverless")(by_rule(serverless_problems))
    _autoscaling_rule = field_validator("autoscaling")(by_rule(autoscaling_problems))

    @property
    def max_instances(self) -> int:
        return self.autoscaling.max_capacity if self.autoscaling else self.instance_count

    @property
    def min_instances(self) -> int:
        return self.autoscaling.min_capacity if self.autoscaling else self.instance_count

    @model_validator(mode="after")
    def _capacity(self) -> VariantConfig:
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
            errors, _ = routing_problems(self.routing, serverless=self.serverless is not None,
                                         min_instances=self.min_instances, max_instances=self.max_instances)
            if errors:
                raise ValueError(f"variant {self.name!r}: " + "; ".join(errors))
        return self


class GuardrailsConfig(StrictModel):
    """:class:`~hyperwarm.endpoints.props.DeploymentGuardrails` with its :class:`TrafficShift` flattened."""

    traffic: Literal["ALL_AT_ONCE", "CANARY", "LINEAR"] = "ALL_AT_ONCE"
    percent: ShiftPercent | None = Field(default=None, validate_default=True,
                                         description="percent of the variant's instances: CANARY 1..50, LINEAR 10..50")
    wait: ShiftWait | None = Field(default=None, description="seconds; default: TrafficShift's (CANARY 600, else 300)")
    alarm_on_5xx_errors: bool = library_default(DeploymentGuardrails, "alarm_on_5xx_errors")

    def to_traffic(self) -> TrafficShift:
        """The library's :class:`TrafficShift`: its defaults (e.g. the bake time) apply where cdk.json says nothing."""
        return TrafficShift(self.traffic, self.percent, self.wait)

    @field_validator("percent")
    @classmethod
    def _percent(cls, percent: int | None, info: ValidationInfo) -> int | None:
        traffic = info.data.get("traffic")  # absent when it failed its own check
        if traffic is not None and traffic not in contract.SHIFT_PERCENT and percent is not None:
            raise ValueError(f"only CANARY and LINEAR take a percent, not {traffic}")
        if traffic is not None and (problem := contract.shift_percent_problem(traffic, percent)):
            raise ValueError(problem if percent is not None else f"a percent is needed: {problem}")
        return percent


assert typing.get_args(GuardrailsConfig.model_fields["traffic"].annotation) == contract.TRAFFIC_TYPES


class DataCaptureConfig(StrictModel):
    sampling_percentage: SamplingPercentage = library_default(DataCapture, "sampling_percentage")


class EndpointConfig(StrictModel):
    """One SageMaker endpoint of the environment (named ``hyperwarm-<env>-<name>``)."""

    name: str = Field(pattern=_ENDPOINT_NAME, description="1..41 letters, digits or hyphens")
    variants: Annotated[tuple[VariantConfig, ...], VARIANT_COUNT]
    guardrails: GuardrailsConfig | None = None
    data_capture: DataCaptureConfig | None = None
    network_isolation: bool = True
    detailed_observability: bool = Field(
        default=True, description="SageMaker AI detailed observability: the container's metrics, TTFT among them")
    metric_publish_frequency: MetricPublishFrequency | None = Field(
        default=None, description="seconds: 10, 30, 60, 120, 180, 240 or 300; none: SageMaker's 60")

    @field_validator("metric_publish_frequency")
    @classmethod
    def _frequency(cls, value: cdk.Duration | None) -> cdk.Duration | None:
        if value is not None and value.to_seconds() not in METRIC_PUBLISH_FREQUENCIES:
            raise ValueError(f"allowed: {', '.join(str(s) for s in METRIC_PUBLISH_FREQUENCIES)} seconds")
        return value

    @model_validator(mode="after")
    def _unique_variants(self) -> EndpointConfig:
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
