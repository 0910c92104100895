"""``EndpointConfiguration``: one ``AWS::SageMaker::EndpointConfig`` built from hyperwarm's variants.

Every EndpointConfig property is replace-on-change in CloudFormation, so the configuration has no
explicit name: a routing change creates a new EndpointConfig under the same logical id, and the
endpoint moves to it (blue/green on a new fleet) while the Models stay untouched.

``MetricsConfig.EnableDetailedObservability`` is always written out: SageMaker's default depends on
the config's creation date (true only for configs created after 2026-06-17), and the time-to-first-token
alarms of :mod:`hyperwarm.observability.dashboard` read what detailed observability publishes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam, aws_kms as kms, aws_sagemaker as sagemaker
from constructs import Construct

from hyperwarm.endpoints.props import ProductionVariant
from hyperwarm.endpoints.rules import metrics_problems, takes_volume_key


def production_variant_api_shape(variant: ProductionVariant, model_name: str | None) -> dict[str, Any]:
    """The ``ProductionVariant`` of CreateEndpointConfig for ``variant``. CloudFormation's
    ``AWS::SageMaker::EndpointConfig.ProductionVariant`` uses the same names, so the construct
    builds its L1 property from this. ``model_name`` is None for inference-component variants."""
    shape: dict[str, Any] = {"VariantName": variant.name}
    if model_name is not None:
        shape["ModelName"] = model_name
    if variant.serverless is not None:
        serverless = {"MemorySizeInMB": variant.serverless.memory_size.to_mebibytes(),
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


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _cfn_struct(owner: type, name: str, shape: Mapping[str, Any]) -> Any:
    """``shape`` (API spelling) as the typed L1 struct ``owner.<name>Property``; jsii rejects unknown keys."""
    struct = getattr(owner, f"{name}Property")
    return struct(**{_snake(k): _cfn_struct(owner, k, v) if isinstance(v, Mapping) else v for k, v in shape.items()})


@dataclass(frozen=True)
class EndpointConfigurationProps:
    """Properties of :class:`EndpointConfiguration`."""

    variants: Sequence[ProductionVariant]
    """The production variants (validated by :class:`~hyperwarm.endpoints.endpoint.InferenceEndpoint`)."""
    model_names: Mapping[str, str] = field(default_factory=dict)
    """The model name of each variant bound to a model directly; inference-component variants have
    none. Default: none."""
    encryption_key: kms.IKey | None = None
    """Encrypts the storage volumes; applied only when SageMaker accepts it (no variant is serverless
    or runs on an instance type with local NVMe). Default: SageMaker's own encryption."""
    execution_role: iam.IRole | None = None
    """The role inference components run as. Default: none (no inference components)."""
    data_capture: sagemaker.CfnEndpointConfig.DataCaptureConfigProperty | None = None
    """Default: no data capture."""
    detailed_observability: bool = True
    """``MetricsConfig.EnableDetailedObservability``: publish the serving container's metrics (vLLM/SGLang
    time to first token among them) to CloudWatch, read with PromQL. Default: true."""
    metric_publish_frequency: cdk.Duration | None = None
    """``MetricsConfig.MetricPublishFrequencyInSeconds``: 10, 30, 60, 120, 180, 240 or 300 seconds.
    Default: SageMaker's (60 seconds)."""


class EndpointConfiguration(Construct):
    """A SageMaker EndpointConfig. ``node.default_child`` is the ``CfnEndpointConfig``."""

    def __init__(self, scope: Construct, id: str, props: EndpointConfigurationProps) -> None:
        super().__init__(scope, id)
        problems = metrics_problems(props.metric_publish_frequency)
        if problems:
            raise ValueError(f"{self.node.path}: " + "; ".join(problems))
        self.variants: tuple[ProductionVariant, ...] = tuple(props.variants)
        """The production variants, in order."""
        self.encryption_key: kms.IKey | None = props.encryption_key if takes_volume_key(props.variants) else None
        """The storage-volume key, or None where SageMaker encrypts the volumes itself."""
        self._resource = sagemaker.CfnEndpointConfig(
            self, "Default",
            production_variants=[
                _cfn_struct(sagemaker.CfnEndpointConfig, "ProductionVariant",
                            production_variant_api_shape(v, props.model_names.get(v.name)))
                for v in props.variants
            ],
            kms_key_id=self.encryption_key.key_arn if self.encryption_key else None,
            execution_role_arn=props.execution_role.role_arn if props.execution_role else None,
            data_capture_config=props.data_capture,
            metrics_config=_metrics_config(props),
        )
        self.node.default_child = self._resource
        if any(v.routing and v.routing.strategy == "KV_AWARE" for v in props.variants):
            # The CloudFormation schemas bundled with cfn-lint 1.58 and aws-cdk-lib 2.275 predate KV_AWARE
            # (the live property is a free string; botocore >= 1.44.4 lists KV_AWARE).
            self._resource.add_metadata("cfn-lint", {"config": {"ignore_checks": ["E3030"]}})
            cdk.Validations.of(self._resource).acknowledge(cdk.Acknowledgment(
                id="CloudFormation-Validate::W3030",
                reason="KV_AWARE is valid in the SageMaker API (botocore 1.44.8); the bundled schema predates it"))
        self.endpoint_config_name: str = self._resource.attr_endpoint_config_name
        """The configuration's generated name."""
        self.endpoint_config_arn: str = self._resource.ref
        """The configuration's ARN."""
        self.detailed_observability: bool = props.detailed_observability
        """Whether SageMaker publishes the container's metrics (what the PromQL TTFT alarms read)."""
        self.metric_publish_frequency: cdk.Duration | None = props.metric_publish_frequency
        """How often SageMaker publishes them; None: SageMaker's default (60 seconds)."""


def _metrics_config(props: EndpointConfigurationProps) -> sagemaker.CfnEndpointConfig.MetricsConfigProperty:
    frequency = props.metric_publish_frequency
    return sagemaker.CfnEndpointConfig.MetricsConfigProperty(
        enable_detailed_observability=props.detailed_observability,
        metric_publish_frequency_in_seconds=frequency.to_seconds() if frequency else None)
