"""``InferenceEndpoint``: a SageMaker real-time endpoint whose production variants each choose
their own request routing (RANDOM, LEAST_OUTSTANDING_REQUESTS, PREFIX_AWARE, KV_AWARE).

Resources: one ``AWS::SageMaker::Model`` per variant, one ``AWS::SageMaker::EndpointConfig``,
the ``AWS::SageMaker::Endpoint`` (``node.default_child``), and optionally inference components,
Application Auto Scaling targets, rollback alarms and a data-capture bucket.

Every EndpointConfig property is replace-on-change in CloudFormation. The EndpointConfig
therefore has no explicit name: a routing change creates a new EndpointConfig under the same
logical id, CloudFormation updates the endpoint to it (blue/green on a new fleet), and the
Model resources, which carry nothing about routing, stay untouched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from cache_refresh import naming
from constructs import Construct

from .catalog import CATALOG
from .images import INFERENCE_AMI_CUDA, ContainerImage, cuda_ami_problem
from .nag import acknowledge, acknowledge_checkov, arn_prefix, object_arn_finding, pseudo
from .serving import (
    SERVING_METADATA,
    ServerSettings,
    Serving,
    sagemaker_placement,
    server_settings,
    serving_metadata,
)

ROUTING_STRATEGIES = ("RANDOM", "LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE", "KV_AWARE")
PREFIX_LENGTH_RANGE = (1024, 65536)
"""Bytes of the request body (characters of message text for the OpenAI-compatible API)."""
CONCURRENCY_THRESHOLD_RANGE = (1, 1024)
"""In-flight requests on an instance (or inference-component copy) before a request spills over."""
_CACHE_AWARE = ("PREFIX_AWARE", "KV_AWARE")
VARIANT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>\S+)$")
SCALING_METRICS = {
    "InvocationsPerInstance": appscaling.PredefinedMetric.SAGEMAKER_VARIANT_INVOCATIONS_PER_INSTANCE,
    "ConcurrentRequestsPerModel":
        appscaling.PredefinedMetric.SAGEMAKER_VARIANT_CONCURRENT_REQUESTS_PER_MODEL_HIGH_RESOLUTION,
}
# EC2 families with local NVMe instance store beyond hyperwarm's catalog: SageMaker rejects an
# EndpointConfig KmsKeyId when any variant runs on one (the volumes are hardware-encrypted).
_LOCAL_STORAGE_FAMILY = re.compile(r"^ml\.([a-z]+\d+[a-z]*d[a-z]*|g5|g6|g6e|g7e|p5|p5e|p5en|p6-[a-z0-9]+|p6e-[a-z0-9]+"
                                   r"|trn1|trn1n|trn2|dl1)\.")


# -- routing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Routing:
    """How a variant spreads requests over its instances. Use the static factories."""

    strategy: str = "RANDOM"
    prefix_length: int | None = None
    concurrency_threshold: int | None = None

    @staticmethod
    def random() -> "Routing":
        """SageMaker's default: any instance."""
        return Routing("RANDOM")

    @staticmethod
    def least_outstanding_requests() -> "Routing":
        """The instance with the fewest in-flight requests: for uneven, long-running LLM requests."""
        return Routing("LEAST_OUTSTANDING_REQUESTS")

    @staticmethod
    def prefix_aware(*, prefix_length: int, concurrency_threshold: int) -> "Routing":
        """Requests whose first ``prefix_length`` bytes match go to the same instance, so its KV cache
        is reused, until it has ``concurrency_threshold`` requests in flight."""
        return Routing("PREFIX_AWARE", prefix_length, concurrency_threshold)

    @staticmethod
    def kv_aware() -> "Routing":
        """The instance whose KV cache holds the prompt start, weighed against load (vLLM DLC only)."""
        return Routing("KV_AWARE")

    def api_shape(self) -> dict[str, Any]:
        """``ProductionVariantRoutingConfig`` as the SageMaker API (and CloudFormation) spell it."""
        shape: dict[str, Any] = {"RoutingStrategy": self.strategy}
        if self.prefix_length is not None or self.concurrency_threshold is not None:
            prefix: dict[str, Any] = {}
            if self.prefix_length is not None:
                prefix["PrefixLength"] = self.prefix_length
            if self.concurrency_threshold is not None:
                prefix["ConcurrencyThreshold"] = self.concurrency_threshold
            shape["PrefixAwareRoutingConfig"] = prefix
        return shape

    def describe(self) -> str:
        if self.strategy == "PREFIX_AWARE":
            return f"PREFIX_AWARE (prefix {self.prefix_length} B, threshold {self.concurrency_threshold})"
        return self.strategy


def _resolved(value: Any) -> bool:
    return value is not None and not cdk.Token.is_unresolved(value)


def routing_problems(routing: Routing, *, serverless: bool = False, min_instances: Any = 1,
                     max_instances: Any = 1) -> tuple[list[str], list[str]]:
    """(errors, warnings) of ``routing`` on a variant, each as ``field = value -- rule``.

    Shared by the construct and the ``endpoints`` config model so both say the same thing.
    """
    errors: list[str] = []
    warnings: list[str] = []
    strategy = routing.strategy
    if serverless:
        errors.append(f"routing.strategy = {strategy!r} -- serverless variants take no routing; "
                      "remove routing or give the variant an instance type")
    if _resolved(strategy) and strategy not in ROUTING_STRATEGIES:
        errors.append(f"routing.strategy = {strategy!r} -- allowed: {', '.join(ROUTING_STRATEGIES)}")
    for name, value, (low, high) in (("prefix_length", routing.prefix_length, PREFIX_LENGTH_RANGE),
                                     ("concurrency_threshold", routing.concurrency_threshold,
                                      CONCURRENCY_THRESHOLD_RANGE)):
        if strategy == "PREFIX_AWARE":
            if value is None:
                errors.append(f"routing.{name} = None -- PREFIX_AWARE needs both prefix_length "
                              f"({PREFIX_LENGTH_RANGE[0]}..{PREFIX_LENGTH_RANGE[1]}) and concurrency_threshold "
                              f"({CONCURRENCY_THRESHOLD_RANGE[0]}..{CONCURRENCY_THRESHOLD_RANGE[1]})")
            elif _resolved(value) and not (isinstance(value, int) and low <= value <= high):
                errors.append(f"routing.{name} = {value!r} -- allowed: an integer {low}..{high}")
        elif value is not None and _resolved(strategy):
            errors.append(f"routing.{name} = {value!r} -- only PREFIX_AWARE takes {name}; "
                          f"strategy is {strategy}")
    if strategy in _CACHE_AWARE and not serverless and _resolved(max_instances) and _resolved(min_instances):
        if max_instances < 2:
            errors.append(f"routing.strategy = {strategy!r} -- the variant is fixed at {max_instances} instance "
                          f"and {strategy} only routes between two or more; raise the instance count or the "
                          "autoscaling max to 2+, or use LEAST_OUTSTANDING_REQUESTS")
        elif min_instances < 2:
            warnings.append(f"routing.strategy = {strategy!r} -- has no effect while the variant runs "
                            f"{min_instances} instance; it applies once autoscaling adds a second")
    return errors, warnings


# -- props ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """What a variant serves."""

    image: ContainerImage
    """Serving container: ``ContainerImage.official("vllm", "0.27.1")``, ``.from_uri(...)`` or ``.from_ecr_repository(...)``."""
    model_data: str | None = None
    """``s3://bucket/key``: a ``.tar.gz`` object, or a prefix of uncompressed files (e.g. safetensors).
    Default: none (the container brings or downloads its model)."""
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
    scale_in_cooldown: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(10))
    """Default: 10 minutes (GPU instances take minutes to start; do not drop them eagerly)."""
    scale_out_cooldown: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(2))
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
    instance_type: str | None = None
    """An ``ml.*`` type; required unless ``serverless``."""
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
        return self.autoscaling.max_capacity if self.autoscaling else self.instance_count

    @property
    def min_instances(self) -> Any:
        return self.autoscaling.min_capacity if self.autoscaling else self.instance_count


@dataclass(frozen=True)
class TrafficShift:
    """How blue/green updates move traffic to the new fleet. Use the static factories."""

    type: str = "ALL_AT_ONCE"
    percent: int | None = None
    wait: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(5))

    @staticmethod
    def all_at_once(wait: cdk.Duration | None = None) -> "TrafficShift":
        return TrafficShift("ALL_AT_ONCE", None, wait or cdk.Duration.minutes(5))

    @staticmethod
    def canary(percent: int, wait: cdk.Duration | None = None) -> "TrafficShift":
        """``percent`` of capacity first (1..50), then the rest after ``wait``."""
        return TrafficShift("CANARY", percent, wait or cdk.Duration.minutes(10))

    @staticmethod
    def linear(percent: int, wait: cdk.Duration | None = None) -> "TrafficShift":
        """Steps of ``percent`` of capacity (10..50) every ``wait``."""
        return TrafficShift("LINEAR", percent, wait or cdk.Duration.minutes(5))


_SHIFT_PERCENT = {"CANARY": (1, 50), "LINEAR": (10, 50)}


@dataclass(frozen=True)
class DeploymentGuardrails:
    """Blue/green endpoint updates with traffic shifting and alarm-driven automatic rollback."""

    traffic: TrafficShift = field(default_factory=TrafficShift.all_at_once)
    """Default: all at once after 5 minutes of baking."""
    rollback_alarms: Sequence[cloudwatch.IAlarm] = ()
    """Alarms that roll the update back. Default: none besides the 5XX alarms below."""
    alarm_on_5xx_errors: bool = True
    """Add one Invocation5XXErrors alarm per variant to the rollback alarms (needs ``endpoint_name``). Default: true."""
    termination_wait: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(5))
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
    """Properties of :class:`InferenceEndpoint`."""

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


# -- API shape (shared with tests and the config-refresh Lambda) ------------------------------


def production_variant_api_shape(variant: ProductionVariant, model_name: str | None) -> dict[str, Any]:
    """The ``ProductionVariant`` of CreateEndpointConfig for ``variant``. CloudFormation's
    ``AWS::SageMaker::EndpointConfig.ProductionVariant`` uses the same names, so the construct
    builds its L1 property from this. ``model_name`` is None for inference-component variants."""
    shape: dict[str, Any] = {"VariantName": variant.name}
    if model_name is not None:
        shape["ModelName"] = model_name
    if variant.serverless is not None:
        serverless = {"MemorySizeInMB": variant.serverless.memory_size_mb,
                      "MaxConcurrency": variant.serverless.max_concurrency}
        if variant.serverless.provisioned_concurrency is not None:
            serverless["ProvisionedConcurrency"] = variant.serverless.provisioned_concurrency
        shape["ServerlessConfig"] = serverless
    else:
        shape["InstanceType"] = variant.instance_type
        shape["InitialInstanceCount"] = variant.instance_count
    shape["InitialVariantWeight"] = variant.initial_weight
    if variant.routing is not None:
        shape["RoutingConfig"] = variant.routing.api_shape()
    if variant.inference_ami_version is not None:
        shape["InferenceAmiVersion"] = variant.inference_ami_version
    if variant.model_data_download_timeout is not None:
        shape["ModelDataDownloadTimeoutInSeconds"] = variant.model_data_download_timeout.to_seconds()
    if variant.container_startup_health_check_timeout is not None:
        shape["ContainerStartupHealthCheckTimeoutInSeconds"] = \
            variant.container_startup_health_check_timeout.to_seconds()
    return shape


def variant_server_settings(variant: ProductionVariant) -> ServerSettings:
    """What ``variant``'s model container is told (environment) and what is wrong with it."""
    spec = variant.inference_component
    placement = sagemaker_placement(
        instance_type=variant.instance_type, serverless=variant.serverless is not None, component=spec is not None,
        accelerators_per_copy=spec.accelerators_per_copy if spec else None,
        has_model_data=variant.model.model_data is not None)
    image = variant.model.image
    return server_settings(variant.model.serving, placement, image=image.describe(),
                           image_framework=image.framework, image_uri=image.literal_uri)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _cfn_struct(owner: type, name: str, shape: Mapping[str, Any]) -> Any:
    """``shape`` (API spelling) as the typed L1 struct ``owner.<name>Property``; jsii rejects unknown keys."""
    struct = getattr(owner, f"{name}Property")
    return struct(**{_snake(k): _cfn_struct(owner, k, v) if isinstance(v, Mapping) else v for k, v in shape.items()})


def has_local_storage(instance_type: str) -> bool:
    """Whether ``instance_type`` brings NVMe instance store (then SageMaker refuses an EndpointConfig KMS key)."""
    spec = CATALOG.get(instance_type)
    if spec is not None:
        return spec.has_nvme
    return bool(_LOCAL_STORAGE_FAMILY.match(instance_type))


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key); raises ValueError otherwise."""
    match = S3_URI.match(uri)
    if not match:
        raise ValueError(f"{uri!r} is not s3://bucket/key")
    return match["bucket"], match["key"]


# -- the construct ----------------------------------------------------------------------------


class InferenceEndpoint(Construct):
    """A SageMaker real-time endpoint with per-variant routing.

    ``node.default_child`` is the ``AWS::SageMaker::Endpoint`` (``CfnEndpoint``).
    """

    def __init__(self, scope: Construct, id: str, props: InferenceEndpointProps) -> None:
        super().__init__(scope, id)
        self._props = props
        self._validate()
        stack = cdk.Stack.of(self)
        self._check_images(stack)
        self.variants = {v.name: v for v in props.variants}
        self.execution_role = iam.Role(
            self, "ExecutionRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker execution role of endpoint {self._label}: model data, image pull, logs",
        )
        self._grant_logs(stack)
        # SageMaker rejects a volume key if ANY variant runs on a type with (hardware-encrypted) local NVMe.
        needs_volume_key = all(v.serverless is None and v.instance_type and not has_local_storage(v.instance_type)
                               for v in props.variants)
        self.encryption_key: kms.IKey | None = props.encryption_key
        if self.encryption_key is None and (needs_volume_key or props.data_capture):
            self.encryption_key = kms.Key(self, "Key", enable_key_rotation=True,
                                          description=f"Endpoint {self._label}: storage volumes and captured data")

        self.models: dict[str, sagemaker.CfnModel] = {v.name: self._model(stack, v) for v in props.variants}
        uses_components = any(v.inference_component for v in props.variants)
        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self, "EndpointConfig",
            production_variants=[
                _cfn_struct(sagemaker.CfnEndpointConfig, "ProductionVariant", production_variant_api_shape(
                    v, None if v.inference_component else self.models[v.name].attr_model_name))
                for v in props.variants
            ],
            kms_key_id=self.encryption_key.key_arn if self.encryption_key and needs_volume_key else None,
            execution_role_arn=self.execution_role.role_arn if uses_components else None,
            data_capture_config=self._data_capture(),
        )
        if any(v.routing and v.routing.strategy == "KV_AWARE" for v in props.variants):
            # The CloudFormation schemas bundled with cfn-lint 1.58 and aws-cdk-lib 2.275 predate KV_AWARE
            # (the live property is a free string; botocore >= 1.44.4 lists KV_AWARE).
            self.endpoint_config.add_metadata("cfn-lint", {"config": {"ignore_checks": ["E3030"]}})
            cdk.Validations.of(self.endpoint_config).acknowledge(cdk.Acknowledgment(
                id="CloudFormation-Validate::W3030",
                reason="KV_AWARE is valid in the SageMaker API (botocore 1.44.8); the bundled schema predates it"))
        autoscaled = any(v.autoscaling for v in props.variants)
        self.rollback_alarms: list[cloudwatch.IAlarm] = []
        """Alarms that roll a blue/green update back (also a refresh's update of this endpoint)."""
        self._resource = sagemaker.CfnEndpoint(
            self, "Resource",
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            endpoint_name=props.endpoint_name,
            deployment_config=self._deployment_config(),
            # Keep the instance counts autoscaling has set across updates; weights still follow the config.
            retain_all_variant_properties=True if autoscaled else None,
            exclude_retained_variant_properties=[
                sagemaker.CfnEndpoint.VariantPropertyProperty(variant_property_type="DesiredWeight")
            ] if autoscaled else None,
        )
        self.node.default_child = self._resource
        self.endpoint_arn = self._resource.ref
        # The configured name where there is one: IAM policies of other stacks can then name it.
        self.endpoint_name = props.endpoint_name or self._resource.attr_endpoint_name
        self.inference_components = {v.name: self._inference_component(v) for v in props.variants
                                     if v.inference_component}
        self.scalable_targets = {v.name: self._autoscaling(v) for v in props.variants if v.autoscaling}
        self._warn()

    # -- public API ------------------------------------------------------------------------

    def grant_model_prefix_read(self, bucket: s3.IBucket, prefix: str) -> None:
        """Let the endpoint's models read every object under ``prefix`` (e.g. all versions of a model)."""
        prefix = prefix.rstrip("/") + "/"
        self.execution_role.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{prefix}*")]))
        self.execution_role.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}}))
        acknowledge(self.execution_role,
                    f"read-only on the objects of the uncompressed model under s3://{bucket.bucket_name}/{prefix} only",
                    f"IAM5[Resource::{object_arn_finding(bucket, prefix + '*')}]")

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` call InvokeEndpoint (and the streaming variant) on this endpoint."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"],
            resource_arns=[self.endpoint_arn],
        )

    def metric(self, variant_name: str, metric_name: str, **kwargs: Any) -> cloudwatch.Metric:
        """An ``AWS/SageMaker`` metric of one variant (e.g. ``Invocation5XXErrors``, ``ModelLatency``)."""
        if variant_name not in self.variants:
            raise ValueError(f"{self.node.path}: no variant {variant_name!r}; variants: {', '.join(self.variants)}")
        return _variant_metric(self._props.endpoint_name or self.endpoint_name, variant_name, metric_name, **kwargs)

    # -- validation ------------------------------------------------------------------------

    @property
    def _label(self) -> str:
        return self._props.endpoint_name or self.node.path

    def _validate(self) -> None:
        props = self._props
        errors: list[str] = []
        if not props.variants:
            errors.append("variants = [] -- an endpoint needs at least one production variant")
        name_problem = naming.endpoint_name_problem(props.endpoint_name) if _resolved(props.endpoint_name) else None
        if name_problem:
            errors.append(f"endpoint_name = {props.endpoint_name!r} -- {name_problem}")
        seen: set[str] = set()
        for v in props.variants:
            where = f"variant {v.name!r}"
            if not VARIANT_NAME.match(v.name):
                errors.append(f"{where}: name = {v.name!r} -- allowed: 1..63 letters, digits or hyphens, "
                              "starting and ending with a letter or digit")
            if v.name in seen:
                errors.append(f"{where}: name = {v.name!r} -- variant names must be unique in the endpoint")
            seen.add(v.name)
            errors += [f"{where}: {e}" for e in self._variant_problems(v)]
        if props.guardrails:
            errors += self._guardrail_problems(props.guardrails)
        if props.data_capture and _resolved(props.data_capture.sampling_percentage) \
                and not 0 <= props.data_capture.sampling_percentage <= 100:
            errors.append(f"data_capture.sampling_percentage = {props.data_capture.sampling_percentage!r} "
                          "-- allowed: 0..100")
        components = {bool(v.inference_component) for v in props.variants}
        if len(components) > 1:
            errors.append("variants -- either every variant uses an inference component or none does")
        if errors:
            raise ValueError(f"{self.node.path} (endpoint {self._label}): invalid InferenceEndpoint props:\n  "
                             + "\n  ".join(errors))

    def _check_images(self, stack: cdk.Stack) -> None:
        """Each variant's host driver runs the CUDA its image was built for (needs the region's image URI)."""
        errors = []
        for v in self._props.variants:
            if v.serverless is not None:
                continue
            uri = v.model.image.bind(stack)[0]
            problem = None if cdk.Token.is_unresolved(uri) else cuda_ami_problem(uri, v.inference_ami_version)
            if problem:
                errors.append(f"variant {v.name!r}: inference_ami_version = {v.inference_ami_version!r} -- {problem}")
            elif v.inference_ami_version is not None and v.inference_ami_version not in INFERENCE_AMI_CUDA \
                    and _resolved(v.inference_ami_version):
                cdk.Annotations.of(self).add_warning_v2(
                    f"hyperwarm:ami:{v.name}", f"variant {v.name!r}: inference_ami_version "
                    f"{v.inference_ami_version!r} is unknown to hyperwarm; its driver is not checked against the image")
        if errors:
            raise ValueError(f"{self.node.path} (endpoint {self._label}): invalid InferenceEndpoint props:\n  "
                             + "\n  ".join(errors))

    def _variant_problems(self, v: ProductionVariant) -> list[str]:
        errors: list[str] = []
        if _resolved(v.initial_weight) and not (isinstance(v.initial_weight, (int, float)) and v.initial_weight > 0):
            errors.append(f"initial_weight = {v.initial_weight!r} -- allowed: a number > 0")
        if v.serverless is None:
            if v.instance_type is None:
                errors.append("instance_type = None -- an ml.* instance type is required unless the variant is serverless")
            elif _resolved(v.instance_type) and not v.instance_type.startswith("ml."):
                errors.append(f"instance_type = {v.instance_type!r} -- allowed: an ml.* SageMaker instance type")
            if _resolved(v.instance_count) and not (isinstance(v.instance_count, int) and v.instance_count >= 1):
                errors.append(f"instance_count = {v.instance_count!r} -- allowed: an integer >= 1")
        else:
            if v.instance_type is not None:
                errors.append(f"instance_type = {v.instance_type!r} -- serverless variants take no instance type")
            if v.autoscaling is not None or v.inference_component is not None:
                errors.append("serverless -- serverless variants take neither autoscaling nor inference components")
        if v.routing is not None:
            routing_errors, _ = routing_problems(v.routing, serverless=v.serverless is not None,
                                                 min_instances=v.min_instances, max_instances=v.max_instances)
            errors += routing_errors
        data = v.model.model_data
        if data is not None and _resolved(data) and not S3_URI.match(data):
            errors.append(f"model.model_data = {data!r} -- allowed: s3://bucket/key")
        errors += [f"model.{p}" for p in variant_server_settings(v).problems]
        a = v.autoscaling
        if a is not None:
            if _resolved(a.min_capacity) and a.min_capacity < 1:
                errors.append(f"autoscaling.min_capacity = {a.min_capacity!r} -- allowed: >= 1")
            if _resolved(a.min_capacity) and _resolved(a.max_capacity) and a.max_capacity < a.min_capacity:
                errors.append(f"autoscaling.max_capacity = {a.max_capacity!r} -- allowed: >= min_capacity "
                              f"({a.min_capacity})")
            if a.metric not in SCALING_METRICS:
                errors.append(f"autoscaling.metric = {a.metric!r} -- allowed: {', '.join(SCALING_METRICS)}")
            if _resolved(a.target_value) and a.target_value <= 0:
                errors.append(f"autoscaling.target_value = {a.target_value!r} -- allowed: > 0")
            if v.inference_component is not None:
                errors.append("autoscaling -- inference-component variants scale copies, not instances; "
                              "autoscaling of inference components is not supported by hyperwarm yet")
        return errors

    def _guardrail_problems(self, g: DeploymentGuardrails) -> list[str]:
        errors: list[str] = []
        shift = g.traffic
        if shift.type in _SHIFT_PERCENT:
            low, high = _SHIFT_PERCENT[shift.type]
            if shift.percent is None or (_resolved(shift.percent) and not low <= shift.percent <= high):
                errors.append(f"guardrails.traffic.percent = {shift.percent!r} -- {shift.type} allowed: {low}..{high}")
        elif shift.type != "ALL_AT_ONCE":
            errors.append(f"guardrails.traffic.type = {shift.type!r} -- allowed: ALL_AT_ONCE, CANARY, LINEAR")
        if g.alarm_on_5xx_errors and not self._props.endpoint_name:
            errors.append("guardrails.alarm_on_5xx_errors = True -- needs an explicit endpoint_name "
                          "(the alarms name the endpoint before it exists)")
        return errors

    def _warn(self) -> None:
        for v in self._props.variants:
            if v.routing is None:
                continue
            _, warnings = routing_problems(v.routing, serverless=v.serverless is not None,
                                           min_instances=v.min_instances, max_instances=v.max_instances)
            for warning in warnings:
                cdk.Annotations.of(self).add_warning_v2(f"hyperwarm:routing:{v.name}", f"variant {v.name!r}: {warning}")

    # -- building blocks -------------------------------------------------------------------

    def _model(self, stack: cdk.Stack, v: ProductionVariant) -> sagemaker.CfnModel:
        image_uri, repository, parsed = v.model.image.bind(stack)
        if repository is not None:
            repository.grant_pull(self.execution_role)
        elif parsed is not None:
            self.execution_role.add_to_principal_policy(iam.PolicyStatement(
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                resources=[parsed.repository_arn(stack.partition)],
            ))
            self._grant_ecr_token()
        settings = variant_server_settings(v)
        container: dict[str, Any] = {"image": image_uri, "environment": settings.environment or None}
        if v.model.model_data:
            container.update(self._grant_model_data(stack, v.name, v.model.model_data))
        model = sagemaker.CfnModel(
            self, f"{v.name}Model",
            execution_role_arn=self.execution_role.role_arn,
            enable_network_isolation=self._props.network_isolation,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(**container),
        )
        # SageMaker checks the role's access when the model is created: the policy must exist first.
        model.node.add_dependency(self.execution_role)
        model.add_metadata(SERVING_METADATA, serving_metadata(settings))
        return model

    def _grant_model_data(self, stack: cdk.Stack, variant: str, uri: str) -> dict[str, Any]:
        bucket_name, key = parse_s3_uri(uri)
        bucket = s3.Bucket.from_bucket_name(self, f"{variant}ModelBucket", bucket_name)
        if key.endswith(".tar.gz"):
            self.execution_role.add_to_principal_policy(iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[bucket.arn_for_objects(key)]))
            return {"model_data_url": uri}
        prefix = key.rstrip("/") + "/"
        self.grant_model_prefix_read(bucket, prefix)
        return {"model_data_source": sagemaker.CfnModel.ModelDataSourceProperty(
            s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                s3_uri=f"s3://{bucket_name}/{prefix}", s3_data_type="S3Prefix", compression_type="None"))}

    def _grant_ecr_token(self) -> None:
        if getattr(self, "_ecr_token_granted", False):
            return
        self._ecr_token_granted = True
        self.execution_role.add_to_principal_policy(iam.PolicyStatement(
            actions=["ecr:GetAuthorizationToken"], resources=["*"]))

    def _grant_logs(self, stack: cdk.Stack) -> None:
        name = self._props.endpoint_name or "*"
        log_groups = stack.format_arn(service="logs", resource="log-group",
                                      resource_name=f"/aws/sagemaker/Endpoints/{name}:*",
                                      arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)
        self.execution_role.add_to_principal_policy(iam.PolicyStatement(
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            resources=[log_groups]))
        self.execution_role.add_to_principal_policy(iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"], resources=["*"],
            conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "AWS/SageMaker"]}}))
        acknowledge(self.execution_role,
                    "ecr:GetAuthorizationToken and cloudwatch:PutMetricData support no resource-level scoping; "
                    "image pulls themselves are limited to the model's repository",
                    "IAM5[Resource::*]")
        acknowledge(self.execution_role,
                    "log streams of this endpoint's own log group, whose stream names SageMaker generates",
                    f"IAM5[Resource::{arn_prefix(stack)}:logs:{pseudo(stack.region, 'AWS::Region')}:"
                    f"{pseudo(stack.account, 'AWS::AccountId')}:log-group:/aws/sagemaker/Endpoints/{name}:*]")

    def _data_capture(self) -> sagemaker.CfnEndpointConfig.DataCaptureConfigProperty | None:
        capture = self._props.data_capture
        if capture is None:
            return None
        assert self.encryption_key is not None
        bucket = capture.bucket
        if bucket is None:
            bucket = s3.Bucket(
                self, "DataCaptureBucket", encryption=s3.BucketEncryption.KMS, encryption_key=self.encryption_key,
                bucket_key_enabled=True, block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True,
                versioned=True, removal_policy=cdk.RemovalPolicy.RETAIN,
            )
            no_access_logs = ("written only by this endpoint's execution role; object-level access is "
                              "audited with CloudTrail S3 data events rather than server access logs")
            acknowledge(bucket, no_access_logs, "S1")
            acknowledge_checkov(bucket, no_access_logs, "CKV_AWS_18")
        self.data_capture_bucket = bucket
        prefix = capture.prefix.strip("/")
        bucket.grant_put(self.execution_role, f"{prefix}/*")
        if capture.bucket is not None:  # our own bucket's grant_put already covers its key
            self.encryption_key.grant_encrypt(self.execution_role)
        acknowledge(self.execution_role,
                    "captured data only: multipart-upload actions on the capture prefix and data-key actions on "
                    "the endpoint's own key (cdk's grant_put and grant_encrypt action groups)",
                    "IAM5[Action::s3:Abort*]", "IAM5[Action::kms:GenerateDataKey*]", "IAM5[Action::kms:ReEncrypt*]",
                    f"IAM5[Resource::{object_arn_finding(bucket, prefix + '/*')}]")
        return sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
            enable_capture=True,
            initial_sampling_percentage=capture.sampling_percentage,
            destination_s3_uri=bucket.s3_url_for_object(prefix),
            kms_key_id=self.encryption_key.key_arn,
            capture_options=[sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Input"),
                             sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Output")],
        )

    def _deployment_config(self) -> sagemaker.CfnEndpoint.DeploymentConfigProperty | None:
        g = self._props.guardrails
        if g is None:
            return None
        shift = g.traffic
        size = sagemaker.CfnEndpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=shift.percent) \
            if shift.percent is not None else None
        alarms = list(g.rollback_alarms)
        if g.alarm_on_5xx_errors:
            for v in self._props.variants:
                alarms.append(cloudwatch.Alarm(
                    self, f"{v.name}5xxAlarm",
                    metric=_variant_metric(self._props.endpoint_name, v.name, "Invocation5XXErrors",
                                           statistic="Sum", period=cdk.Duration.minutes(1)),
                    threshold=1, evaluation_periods=1,
                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                    treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                    alarm_description=f"5XX errors on variant {v.name} of {self._props.endpoint_name}: "
                                      "rolls a blue/green update back",
                ))
        self.rollback_alarms = alarms
        if alarms:
            # Deployment guardrails prerequisite: the execution role may describe its auto-rollback alarms.
            self.execution_role.add_to_principal_policy(iam.PolicyStatement(
                sid="DescribeRollbackAlarms", actions=["cloudwatch:DescribeAlarms"],
                resources=[a.alarm_arn for a in alarms]))
        return sagemaker.CfnEndpoint.DeploymentConfigProperty(
            blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
                traffic_routing_configuration=sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
                    type=shift.type, wait_interval_in_seconds=shift.wait.to_seconds(),
                    canary_size=size if shift.type == "CANARY" else None,
                    linear_step_size=size if shift.type == "LINEAR" else None,
                ),
                termination_wait_in_seconds=g.termination_wait.to_seconds(),
            ),
            auto_rollback_configuration=sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=a.alarm_name) for a in alarms]
            ) if alarms else None,
        )

    def _inference_component(self, v: ProductionVariant) -> sagemaker.CfnInferenceComponent:
        spec = v.inference_component
        assert spec is not None
        component = sagemaker.CfnInferenceComponent(
            self, f"{v.name}Component",
            endpoint_name=self.endpoint_name,
            variant_name=v.name,
            specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                model_name=self.models[v.name].attr_model_name,
                compute_resource_requirements=sagemaker.CfnInferenceComponent
                .InferenceComponentComputeResourceRequirementsProperty(
                    min_memory_required_in_mb=spec.min_memory_mb,
                    number_of_accelerator_devices_required=spec.accelerators_per_copy,
                ),
                data_cache_config=sagemaker.CfnInferenceComponent.InferenceComponentDataCacheConfigProperty(
                    enable_caching=spec.enable_caching),
            ),
            runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                copy_count=spec.copies),
        )
        component.node.add_dependency(self._resource)  # EndpointName may be a literal name, not a reference
        return component

    def _scaling_role(self) -> iam.IRole:
        """Application Auto Scaling's service-linked role for SageMaker (no role of our own to maintain)."""
        existing = self.node.try_find_child("ScalingServiceLinkedRole")
        if existing is not None:
            return existing  # type: ignore[return-value]
        arn = cdk.Stack.of(self).format_arn(
            service="iam", region="", resource="role",
            resource_name="aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
                          "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")
        return iam.Role.from_role_arn(self, "ScalingServiceLinkedRole", arn, mutable=False)

    def _autoscaling(self, v: ProductionVariant) -> appscaling.ScalableTarget:
        a = v.autoscaling
        assert a is not None
        target = appscaling.ScalableTarget(
            self, f"{v.name}Scaling",
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=f"endpoint/{self.endpoint_name}/variant/{v.name}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=a.min_capacity, max_capacity=a.max_capacity,
            role=self._scaling_role(),
        )
        # The ResourceId names the endpoint by string: without this, registration races the endpoint's
        # creation (10-40 min) and the stack rolls back (ScalableTarget reference, "add a dependency").
        target.node.add_dependency(self._resource)
        target.scale_to_track_metric(
            "TargetTracking", target_value=a.target_value, predefined_metric=SCALING_METRICS[a.metric],
            scale_in_cooldown=a.scale_in_cooldown, scale_out_cooldown=a.scale_out_cooldown,
        )
        return target


def _variant_metric(endpoint_name: str | None, variant_name: str, metric_name: str, **kwargs: Any) -> cloudwatch.Metric:
    return cloudwatch.Metric(namespace="AWS/SageMaker", metric_name=metric_name,
                             dimensions_map={"EndpointName": str(endpoint_name), "VariantName": variant_name}, **kwargs)
