"""``hyperwarm-<env>-endpoints``: the environment's SageMaker real-time endpoints.

Separate from the cluster stack: SageMaker endpoints need neither the VPC nor the HyperPod
cluster, so they deploy (and roll back) on their own.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from constructs import Construct

from hyperwarm import (
    DataCapture,
    DeploymentGuardrails,
    InferenceEndpoint,
    InferenceEndpointProps,
    ModelSpec,
    ProductionVariant,
    ServingImage,
    read_through_outputs,
)
from hyperwarm.endpoints import parse_s3_uri
from hyperwarm.serving import cuda_ami_problem, official_image_uri
from stacks.config import ConfigError, EndpointConfig, EnvironmentConfig, VariantConfig
from stacks.config.endpoints import endpoint_name


def variant_props(v: VariantConfig, keys: Mapping[str, kms.IKey] | None = None) -> ProductionVariant:
    """A config variant as the construct's :class:`ProductionVariant`; ``keys``: the customer-managed KMS
    keys of model buckets, by bucket name."""
    image = ServingImage.from_uri(v.image.uri) if v.image.uri \
        else ServingImage.official(str(v.image.framework), str(v.image.version))
    return ProductionVariant(
        name=v.name,
        model=ModelSpec(image=image, model_data=v.model_data, serving=v.serving.to_serving(),
                        model_data_key=(keys or {}).get(parse_s3_uri(v.model_data)[0]) if v.model_data else None),
        instance_type=v.instance_type,
        instance_count=v.instance_count,
        initial_weight=v.initial_weight,
        routing=v.routing, serverless=v.serverless, autoscaling=v.autoscaling,  # parsed into the props already
        model_data_download_timeout=v.model_data_download_timeout,
        container_startup_health_check_timeout=v.container_startup_health_check_timeout,
        inference_ami_version=v.inference_ami_version,
    )


def endpoint_props(env_name: str, endpoint: EndpointConfig,
                   keys: Mapping[str, kms.IKey] | None = None) -> InferenceEndpointProps:
    g = endpoint.guardrails
    guardrails = DeploymentGuardrails(traffic=g.to_traffic(), alarm_on_5xx_errors=g.alarm_on_5xx_errors) if g else None
    capture = endpoint.data_capture
    return InferenceEndpointProps(
        variants=[variant_props(v, keys) for v in endpoint.variants],
        endpoint_name=endpoint_name(env_name, endpoint),
        guardrails=guardrails,
        data_capture=DataCapture(sampling_percentage=capture.sampling_percentage) if capture else None,
        network_isolation=endpoint.network_isolation,
        detailed_observability=endpoint.detailed_observability,
        metric_publish_frequency=endpoint.metric_publish_frequency,
    )


def check_official_images(env_name: str, config: EnvironmentConfig) -> None:
    """Each official image's CUDA runs on its variant's host AMI, reported as a configuration error (the
    image tag is only known once resolved for the region, so pydantic cannot check it)."""
    problems = []
    for i, endpoint in enumerate(config.endpoints):
        for j, v in enumerate(endpoint.variants):
            if v.image.framework and v.serverless is None:
                uri = official_image_uri(v.image.framework, str(v.image.version), config.region)
                problem = cuda_ami_problem(uri, v.inference_ami_version)
                if problem:
                    problems.append(f"environments.{env_name}.endpoints[{i}].variants[{j}].inference_ami_version: "
                                    f"{v.inference_ami_version!r} -- {problem}")
    if problems:
        raise ConfigError(f"invalid configuration for environment {env_name!r}:\n  " + "\n  ".join(problems))


class EndpointsStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, env_name: str, config: EnvironmentConfig, **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        check_official_images(env_name, config)
        keys = {name: kms.Key.from_key_arn(self, f"ModelBucketKey-{name}", arn)
                for name, arn in config.bucket_keys().items()}
        self.endpoints = {
            e.name: InferenceEndpoint(self, e.name, endpoint_props(env_name, e, keys)) for e in config.endpoints
        }
        for name, endpoint in self.endpoints.items():
            cdk.CfnOutput(self, f"{name}EndpointName", value=endpoint.endpoint_name,
                          description=f"SageMaker endpoint {name}")
        read_through_outputs(self, REFERENCE_STRENGTH)  # also what is added later (grants, the refresh guard)


REFERENCE_STRENGTH = cdk.ReferenceStrength.BOTH
"""How other stacks read this stack's resources (the refresh stack: each endpoint's execution role, key and
rollback alarms): ``Fn::GetStackOutput``, so the endpoints stack can remove or rename a variant, its 5XX alarm,
or replace a role or key; BOTH also keeps the exports that stacks deployed by an earlier hyperwarm import until
those stacks deploy again, after which nothing imports them."""
