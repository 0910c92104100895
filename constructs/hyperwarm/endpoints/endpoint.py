"""``InferenceEndpoint``: a SageMaker real-time endpoint whose production variants each choose
their own request routing (RANDOM, LEAST_OUTSTANDING_REQUESTS, PREFIX_AWARE, KV_AWARE).

It composes the execution role, a KMS key where one is needed, one :class:`~hyperwarm.endpoints.model.InferenceModel`
per variant, an :class:`~hyperwarm.endpoints.configuration.EndpointConfiguration`, the
``AWS::SageMaker::Endpoint`` (``node.default_child``), and optionally inference components,
Application Auto Scaling targets, rollback alarms and a data-capture bucket. Props are in
:mod:`hyperwarm.endpoints.props`, their rules in :mod:`hyperwarm.endpoints.rules`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
import jsii
from aws_cdk import (
    aws_applicationautoscaling as appscaling,
    aws_cloudwatch as cloudwatch,
    aws_iam as iam,
    aws_kms as kms,
    aws_s3 as s3,
    aws_sagemaker as sagemaker,
)
from constructs import Construct

from hyperwarm._internal.durations import ONE_MINUTE
from hyperwarm._internal.fingerprint import properties_digest
from hyperwarm._internal.nag import acknowledge, arn_prefix, pseudo
from hyperwarm._internal.principals import sagemaker_principal
from hyperwarm.endpoints.base import EndpointBase, IInferenceEndpoint, ImportedInferenceEndpoint
from hyperwarm.endpoints.capture import capture_bucket, capture_config
from hyperwarm.endpoints.configuration import EndpointConfiguration, EndpointConfigurationProps
from hyperwarm.endpoints.inference_component import InferenceComponent, InferenceComponentProps
from hyperwarm.endpoints.model import InferenceModel, InferenceModelProps
from hyperwarm.endpoints.props import DeploymentGuardrails, InferenceEndpointProps, ProductionVariant
from hyperwarm.endpoints.rules import (
    endpoint_problems,
    image_problems,
    routing_warnings,
    takes_volume_key,
    variant_server_settings,
)
from hyperwarm.endpoints.scaling import scale_instances

ROLLBACK_5XX_SHARE = 0.05
ROLLBACK_5XX_MINUTES = (2, 3)
"""A blue/green update rolls back when at least 5 % of a variant's requests fail with a 5XX in 2 of 3
minutes. A single 5XX in one minute is noise for a canary: its first requests reach copies whose KV
cache is cold and whose queue is filling (a timed-out or shed request answers 5XX), and with a canary
of one instance at low traffic one error is a large share of one minute; sustained failure is a bad
version."""


class InferenceEndpoint(EndpointBase):
    """A SageMaker real-time endpoint with per-variant routing: an ``aws_sagemaker.IEndpoint``.

    ``node.default_child`` is the ``AWS::SageMaker::Endpoint`` (``CfnEndpoint``). The endpoint is the
    grantee of its execution role (``grant_principal``): ``bucket.grant_read(endpoint)`` lets its models read.
    """

    @staticmethod
    def from_endpoint_attributes(scope: Construct, id: str, *, endpoint_name: str,
                                 variant_names: Sequence[str] | None = None, execution_role: iam.IRole | None = None,
                                 encryption_key: kms.IKey | None = None, detailed_observability: bool | None = None,
                                 metric_publish_frequency: cdk.Duration | None = None,
                                 serving_engines: Mapping[str, str] | None = None,
                                 deployed_resource_arns: Sequence[str] = ()) -> IInferenceEndpoint:
        """An endpoint defined elsewhere, by name. ``variant_names`` (default: unknown, any name accepted)
        lets the ``metric_*`` helpers check theirs; ``execution_role`` and ``encryption_key`` (default:
        unknown) are what a refresh of the endpoint must be allowed to pass and use;
        ``detailed_observability``, ``metric_publish_frequency`` and ``serving_engines`` (variant name ->
        ``vllm``/``sglang``/...; default: unknown) are what its TTFT alarm and chart read;
        ``deployed_resource_arns`` (default: none) the ARNs of the EndpointConfig and Models it serves now, which a
        refresh may read before it serves one of its own: without them its first refresh is denied."""
        return ImportedInferenceEndpoint(
            scope, id, endpoint_name=endpoint_name, variant_names=variant_names, execution_role=execution_role,
            encryption_key=encryption_key, detailed_observability=detailed_observability,
            metric_publish_frequency=metric_publish_frequency, serving_engines=serving_engines,
            deployed_resource_arns=deployed_resource_arns)

    def __init__(self, scope: Construct, id: str, props: InferenceEndpointProps) -> None:
        super().__init__(scope, id, physical_name=props.endpoint_name)
        self._props = props
        self._label = props.endpoint_name or self.node.path
        self._raise(endpoint_problems(props))
        self._check_images()
        self.variants: dict[str, ProductionVariant] = {v.name: v for v in props.variants}
        """The production variants by name."""
        self.variant_names = tuple(self.variants)
        self.execution_role: iam.Role = iam.Role(
            self, "ExecutionRole", assumed_by=sagemaker_principal(self),
            description=f"SageMaker execution role of endpoint {self._label}: model data, image pull, logs",
        )
        self._grant_logs()
        self.encryption_key: kms.IKey | None = props.encryption_key
        """Encrypts storage volumes and captured data; None when neither needs a key."""
        if self.encryption_key is None and (takes_volume_key(props.variants) or props.data_capture):
            self.encryption_key = kms.Key(self, "Key", enable_key_rotation=True,
                                          description=f"Endpoint {self._label}: storage volumes and captured data")
        self.models: dict[str, InferenceModel] = {v.name: self._model(v) for v in props.variants}
        """One model per variant, by variant name."""
        self.data_capture_bucket: s3.IBucket | None = None
        """Where captured data goes; None without data capture."""
        self.endpoint_config = EndpointConfiguration(self, "EndpointConfig", EndpointConfigurationProps(
            variants=props.variants,
            model_names={v.name: self.models[v.name].model_name for v in props.variants if not v.inference_component},
            encryption_key=self.encryption_key,
            execution_role=self.execution_role if any(v.inference_component for v in props.variants) else None,
            data_capture=self._data_capture(),
            detailed_observability=props.detailed_observability,
            metric_publish_frequency=props.metric_publish_frequency,
        ))
        self.detailed_observability: bool = props.detailed_observability
        self.metric_publish_frequency: cdk.Duration | None = props.metric_publish_frequency
        self._resource = self._endpoint()
        self.node.default_child = self._resource
        self._endpoint_arn = self._resource.ref
        # The configured name where there is one: IAM policies of other stacks can then name it.
        self._endpoint_name = props.endpoint_name or self._resource.attr_endpoint_name
        self.rollback_alarms: list[cloudwatch.IAlarm] = self._rollback_alarms(props.guardrails)
        """Alarms that roll a blue/green update back (a refresh's too); no action until ``notify_alarms``."""
        self._resource.deployment_config = _deployment_config(props.guardrails, self.rollback_alarms)
        self.inference_components: dict[str, InferenceComponent] = {
            v.name: self._inference_component(v) for v in props.variants if v.inference_component}
        """Inference components by variant name (variants that serve their model as one)."""
        self.scalable_targets: dict[str, appscaling.ScalableTarget] = {
            v.name: scale_instances(self, v, self.endpoint_name, self._resource)
            for v in props.variants if v.autoscaling}
        """Autoscaling targets by variant name (variants with ``autoscaling``)."""
        for v in props.variants:
            for warning in routing_warnings(v):
                cdk.Annotations.of(self).add_warning_v2(f"hyperwarm:routing:{v.name}", f"variant {v.name!r}: {warning}")

    @property
    def grant_principal(self) -> iam.IPrincipal:
        """The execution role: what grants to this endpoint give its models and configuration."""
        return self.execution_role

    def serving_engine(self, variant_name: str) -> str | None:
        """The serving convention of the variant's container (``vllm``, ``sglang``, ``lmi`` ...); None if unknown."""
        return getattr(variant_server_settings(self.variants[variant_name]).convention, "name", None)

    @property
    def deployed_resource_arns(self) -> Sequence[str]:
        """The EndpointConfig's and the Models' ARNs (their ``Ref``: names CloudFormation generates)."""
        return [self.endpoint_config.endpoint_config_arn, *(m.model_arn for m in self.models.values())]

    @property
    def deployed_fingerprint(self) -> str:
        """A hash of the EndpointConfig's and the Models' properties as synthesized: their properties but tags are
        create-only, so it changes whenever CloudFormation replaces them (and their generated names), and with a
        change of their tags."""
        return cdk.Lazy.string(_Fingerprint(self))

    # -- validation ------------------------------------------------------------------------

    def _raise(self, errors: list[str]) -> None:
        if errors:
            raise ValueError(f"{self.node.path} (endpoint {self._label}): invalid InferenceEndpoint props:\n  "
                             + "\n  ".join(errors))

    def _check_images(self) -> None:
        """Each variant's host driver runs the CUDA its image was built for (needs the region's image URI)."""
        errors = []
        for v in self._props.variants:
            if v.serverless is not None:
                continue
            image_errors, warnings = image_problems(v, v.model.image.uri_for(self))
            errors += image_errors
            for warning in warnings:
                cdk.Annotations.of(self).add_warning_v2(f"hyperwarm:ami:{v.name}", warning)
        self._raise(errors)

    # -- building blocks -------------------------------------------------------------------

    def _model(self, v: ProductionVariant) -> InferenceModel:
        return InferenceModel(self, f"{v.name}Model", InferenceModelProps(
            image=v.model.image, role=self.execution_role, model_data=v.model.model_data,
            model_data_key=v.model.model_data_key,
            server_settings=variant_server_settings(v), network_isolation=self._props.network_isolation))

    def _endpoint(self) -> sagemaker.CfnEndpoint:
        autoscaled = any(v.autoscaling for v in self._props.variants)
        return sagemaker.CfnEndpoint(
            self, "Resource",
            endpoint_config_name=self.endpoint_config.endpoint_config_name,
            endpoint_name=self._props.endpoint_name,
            # Keep the instance counts autoscaling has set across updates; weights still follow the config.
            retain_all_variant_properties=True if autoscaled else None,
            exclude_retained_variant_properties=[
                sagemaker.CfnEndpoint.VariantPropertyProperty(variant_property_type="DesiredWeight")
            ] if autoscaled else None,
        )

    def _grant_logs(self) -> None:
        stack = cdk.Stack.of(self)
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
        self.data_capture_bucket = capture.bucket or capture_bucket(self, self.encryption_key)
        return capture_config(capture, self.data_capture_bucket, self.encryption_key, self.execution_role)

    def _rollback_alarms(self, g: DeploymentGuardrails | None) -> list[cloudwatch.IAlarm]:
        if g is None:
            return []
        alarms = list(g.rollback_alarms)
        if g.alarm_on_5xx_errors:
            alarms += [_rollback_5xx_alarm(self, name, str(self._props.endpoint_name)) for name in self.variants]
        if alarms:
            # Deployment guardrails prerequisite: the execution role may describe its auto-rollback alarms.
            self.execution_role.add_to_principal_policy(iam.PolicyStatement(
                sid="DescribeRollbackAlarms", actions=["cloudwatch:DescribeAlarms"],
                resources=[a.alarm_arn for a in alarms]))
        return alarms

    def _inference_component(self, v: ProductionVariant) -> InferenceComponent:
        assert v.inference_component is not None
        component = InferenceComponent(self, f"{v.name}Component", InferenceComponentProps(
            endpoint_name=self.endpoint_name, variant_name=v.name, model_name=self.models[v.name].model_name,
            spec=v.inference_component))
        component.node.add_dependency(self._resource)  # EndpointName may be a literal name, not a reference
        return component


def _rollback_5xx_alarm(endpoint: InferenceEndpoint, variant: str, endpoint_name: str) -> cloudwatch.Alarm:
    """The variant's rollback alarm: 5XX on :data:`ROLLBACK_5XX_SHARE` of its requests, sustained."""
    return cloudwatch.Alarm(
        endpoint, f"{variant}5xxAlarm",
        # Invocation5XXErrors is 1 or 0 per request: its Average is the share of requests that failed.
        metric=endpoint.metric_invocation_5xx_errors(variant, statistic="Average", period=ONE_MINUTE),
        threshold=ROLLBACK_5XX_SHARE, evaluation_periods=ROLLBACK_5XX_MINUTES[1],
        datapoints_to_alarm=ROLLBACK_5XX_MINUTES[0],
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        alarm_description=f"5XX errors on variant {variant} of {endpoint_name} in at least {ROLLBACK_5XX_SHARE:.0%} "
                          f"of requests for {ROLLBACK_5XX_MINUTES[0]} of {ROLLBACK_5XX_MINUTES[1]} minutes: rolls "
                          "a blue/green update back")


def _deployment_config(g: DeploymentGuardrails | None,
                       rollback_alarms: Sequence[cloudwatch.IAlarm]) -> sagemaker.CfnEndpoint.DeploymentConfigProperty | None:
    """The blue/green update policy of ``g`` (its traffic shift), rolled back by ``rollback_alarms``; None without
    guardrails."""
    if g is None:
        return None
    shift = g.traffic
    size = sagemaker.CfnEndpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=shift.percent) \
        if shift.percent is not None else None
    return sagemaker.CfnEndpoint.DeploymentConfigProperty(
        blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
            traffic_routing_configuration=sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
                type=shift.type, wait_interval_in_seconds=shift.bake_time().to_seconds(),
                canary_size=size if shift.type == "CANARY" else None,
                linear_step_size=size if shift.type == "LINEAR" else None,
            ),
            termination_wait_in_seconds=g.termination_wait.to_seconds(),
        ),
        auto_rollback_configuration=sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
            alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=a.alarm_name) for a in rollback_alarms]
        ) if rollback_alarms else None,
    )


@jsii.implements(cdk.IStableStringProducer)
class _Fingerprint:
    """:attr:`InferenceEndpoint.deployed_fingerprint`, produced at synth from the resources' resolved properties."""

    def __init__(self, endpoint: InferenceEndpoint) -> None:
        self._endpoint = endpoint

    def produce(self) -> str:
        endpoint = self._endpoint
        resources = [endpoint.endpoint_config.node.default_child, *(m.node.default_child for m in
                                                                    endpoint.models.values())]
        return properties_digest(resources, cdk.Stack.of(endpoint).resolve)  # type: ignore[arg-type]
