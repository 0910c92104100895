"""``IInferenceEndpoint``: what other constructs and stacks need of a SageMaker endpoint, and the
grant and metric methods every endpoint (created or imported) shares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import aws_cdk as cdk
import jsii
from aws_cdk import aws_cloudwatch as cloudwatch, aws_iam as iam, aws_kms as kms, aws_sagemaker as sagemaker
from aws_cdk.interfaces.aws_sagemaker import EndpointReference
from constructs import Construct
from typing_extensions import Protocol, Unpack, runtime_checkable

from hyperwarm._internal.durations import FIVE_MINUTES
from hyperwarm._internal.tokens import unresolved
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.metric_options import MetricOptions, over_defaults

_NAMESPACE = "AWS/SageMaker"


# typing_extensions' Protocol, as aws-cdk-lib's interfaces use: typing's cannot extend them at run time.
@runtime_checkable
class IInferenceEndpoint(sagemaker.IEndpoint, Protocol):
    """A SageMaker real-time endpoint: one created by :class:`~hyperwarm.endpoints.endpoint.InferenceEndpoint`
    or imported with ``InferenceEndpoint.from_endpoint_attributes``. An ``aws_sagemaker.IEndpoint``
    (``endpoint_name``, ``endpoint_arn``, ``grant_invoke``) with what hyperwarm's refresh, alarms and
    dashboards need besides."""

    @property
    def variant_names(self) -> Sequence[str] | None:
        """The production variants' names; None where they are not known (an import without them)."""

    @property
    def execution_role(self) -> iam.IRole | None:
        """The role SageMaker runs the endpoint's models as (what an UpdateEndpoint passes); None if unknown."""

    @property
    def encryption_key(self) -> kms.IKey | None:
        """The key of the endpoint's storage volumes and captured data; None if none or unknown."""

    @property
    def deployed_resource_arns(self) -> Sequence[str]:
        """ARNs of the EndpointConfig and Models the endpoint was deployed with: what a refresh reads before it
        serves a config of its own (whose names it knows). Empty if unknown."""

    @property
    def deployed_fingerprint(self) -> str:
        """Changes whenever CloudFormation replaces what :attr:`deployed_resource_arns` names (resolved at synth);
        empty if unknown. A stack that grants on those ARNs through a cross-stack reference, which CloudFormation
        resolves only when that stack updates, puts it in the grant so that it updates with them."""

    @property
    def detailed_observability(self) -> bool | None:
        """Whether SageMaker publishes the containers' own metrics (TTFT among them); None if unknown."""

    @property
    def metric_publish_frequency(self) -> cdk.Duration | None:
        """How often SageMaker publishes them; None for SageMaker's default (60 s) or unknown."""

    def serving_engine(self, variant_name: str) -> str | None:
        """The serving convention of the variant's container (``vllm``, ``sglang``, ``lmi`` ...); None if unknown."""

    @property
    def grant_principal(self) -> iam.IPrincipal:
        """What grants to the endpoint give permissions to: its execution role (``bucket.grant_read(endpoint)``)."""

    def metric(self, metric_name: str, *, account: str | None = None, color: str | None = None,
               dimensions_map: Mapping[str, str] | None = None, label: str | None = None,
               period: cdk.Duration | None = None, region: str | None = None, stack_account: str | None = None,
               stack_region: str | None = None, statistic: str | None = None,
               unit: cloudwatch.Unit | None = None) -> cloudwatch.Metric:
        """The endpoint's ``AWS/SageMaker`` metric ``metric_name`` (dimension EndpointName, plus ``dimensions_map``)."""
        ...

    def metric_invocations(self, variant_name: str, **options: Unpack[MetricOptions]) -> cloudwatch.Metric: ...

    def metric_invocation_4xx_errors(self, variant_name: str, **options: Unpack[MetricOptions]) -> cloudwatch.Metric: ...

    def metric_invocation_5xx_errors(self, variant_name: str, **options: Unpack[MetricOptions]) -> cloudwatch.Metric: ...

    def metric_model_latency(self, variant_name: str, **options: Unpack[MetricOptions]) -> cloudwatch.Metric: ...

    def metric_overhead_latency(self, variant_name: str, **options: Unpack[MetricOptions]) -> cloudwatch.Metric: ...


@jsii.implements(sagemaker.IEndpoint, iam.IGrantable)
class EndpointBase(cdk.Resource):
    """An ``aws_sagemaker.IEndpoint`` (what aws-cdk-lib's integrations take, e.g. API Gateway's
    ``SagemakerIntegration``) with hyperwarm's ``grant_invoke`` and ``metric_*`` helpers, for subclasses that
    set ``_endpoint_name``, ``_endpoint_arn`` and ``variant_names``. Each ``metric_*`` is ``AWS/SageMaker`` with
    the dimensions EndpointName and VariantName; ``options`` are ``cloudwatch.Metric`` keyword arguments
    (``statistic``, ``period``, ``label`` ...) that override the documented defaults.

    ``endpoint_name`` and ``endpoint_arn`` are properties, not attributes: jsii reads them from the JavaScript
    side through the ``IEndpoint`` interface."""

    _endpoint_name: str
    _endpoint_arn: str
    variant_names: tuple[str, ...] | None
    """The production variants' names; None where they are not known (an import without them)."""

    @property
    def endpoint_name(self) -> str:
        """The endpoint's name."""
        return self._endpoint_name

    @property
    def endpoint_arn(self) -> str:
        """The endpoint's ARN (SageMaker writes the name in it in lower case)."""
        return self._endpoint_arn

    @property
    def endpoint_ref(self) -> EndpointReference:
        """A reference to this endpoint (``aws_sagemaker.IEndpointRef``)."""
        return EndpointReference(endpoint_arn=self.endpoint_arn)

    @property
    def grant_principal(self) -> iam.IPrincipal:
        """What grants to the endpoint give permissions to (subclasses: its execution role)."""
        raise NotImplementedError

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` call InvokeEndpoint and InvokeEndpointWithResponseStream on this endpoint."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"],
            resource_arns=[self.endpoint_arn],
        )

    def metric(self, metric_name: str, *, account: str | None = None, color: str | None = None,
               dimensions_map: Mapping[str, str] | None = None, label: str | None = None,
               period: cdk.Duration | None = None, region: str | None = None, stack_account: str | None = None,
               stack_region: str | None = None, statistic: str | None = None,
               unit: cloudwatch.Unit | None = None) -> cloudwatch.Metric:
        """The endpoint's ``AWS/SageMaker`` metric ``metric_name`` with the dimension EndpointName and
        ``dimensions_map`` (e.g. ``{"VariantName": "main"}``: SageMaker publishes invocation metrics per
        variant), in the manner of aws-cdk-lib's ``metric`` methods. Default: Average over 5 minutes."""
        return cloudwatch.Metric(
            namespace=_NAMESPACE, metric_name=metric_name,
            dimensions_map={"EndpointName": self.endpoint_name, **(dimensions_map or {})},
            account=account, color=color, label=label, period=period or FIVE_MINUTES, region=region,
            stack_account=stack_account, stack_region=stack_region, statistic=statistic or "Average", unit=unit)

    def metric_invocations(self, variant_name: str, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
        """Requests sent to the variant. Default: Sum over 5 minutes."""
        return self._metric(variant_name, "Invocations", "Sum", options)

    def metric_invocation_4xx_errors(self, variant_name: str, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
        """Requests the model answered with a 4XX status. Default: Sum over 5 minutes."""
        return self._metric(variant_name, "Invocation4XXErrors", "Sum", options)

    def metric_invocation_5xx_errors(self, variant_name: str, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
        """Requests the model answered with a 5XX status. Default: Sum over 5 minutes."""
        return self._metric(variant_name, "Invocation5XXErrors", "Sum", options)

    def metric_model_latency(self, variant_name: str, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
        """Microseconds the model took to respond (for streaming: to the last token). Default: Average
        over 5 minutes."""
        return self._metric(variant_name, "ModelLatency", "Average", options)

    def metric_overhead_latency(self, variant_name: str, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
        """Microseconds SageMaker added to the model's latency (routing included). Default: Average over 5 minutes."""
        return self._metric(variant_name, "OverheadLatency", "Average", options)

    def _metric(self, variant_name: str, metric_name: str, statistic: str,
                options: MetricOptions) -> cloudwatch.Metric:
        known = self.variant_names
        if known is not None and variant_name not in known:
            raise ValueError(f"{self.node.path}: variant_name = {variant_name!r} -- allowed: {', '.join(known)}")
        return cloudwatch.Metric(namespace=_NAMESPACE, metric_name=metric_name,
                                 dimensions_map={"EndpointName": self.endpoint_name, "VariantName": variant_name},
                                 **over_defaults(options, statistic=statistic, period=FIVE_MINUTES))


class ImportedInferenceEndpoint(EndpointBase):
    """An endpoint defined elsewhere (another stack or app). Use ``InferenceEndpoint.from_endpoint_attributes``."""

    def __init__(self, scope: Construct, id: str, *, endpoint_name: str,
                 variant_names: Sequence[str] | None = None, execution_role: iam.IRole | None = None,
                 encryption_key: kms.IKey | None = None, detailed_observability: bool | None = None,
                 metric_publish_frequency: cdk.Duration | None = None,
                 serving_engines: Mapping[str, str] | None = None, deployed_resource_arns: Sequence[str] = ()) -> None:
        if not unresolved(endpoint_name):
            problem = contract.endpoint_name_problem(endpoint_name)
            if problem:
                raise ValueError(f"{scope.node.path}/{id}: endpoint_name = {endpoint_name!r} -- {problem}")
        # SageMaker ARNs carry the name in lower case.
        arn_name = endpoint_name if unresolved(endpoint_name) else contract.arn_name(endpoint_name)
        arn = cdk.Stack.of(scope).format_arn(service="sagemaker", resource="endpoint", resource_name=arn_name)
        super().__init__(scope, id, environment_from_arn=arn)
        self._endpoint_name = endpoint_name
        self._endpoint_arn = arn
        self.variant_names = tuple(variant_names) if variant_names is not None else None
        self.detailed_observability: bool | None = detailed_observability
        self.metric_publish_frequency: cdk.Duration | None = metric_publish_frequency
        self._engines = dict(serving_engines or {})
        self.execution_role: iam.IRole | None = execution_role
        self.encryption_key: kms.IKey | None = encryption_key
        self.deployed_resource_arns: tuple[str, ...] = tuple(deployed_resource_arns)
        self.deployed_fingerprint = ""

    def serving_engine(self, variant_name: str) -> str | None:
        """The engine given for the variant in ``serving_engines``; None if not given."""
        return self._engines.get(variant_name)

    @property
    def grant_principal(self) -> iam.IPrincipal:
        """The execution role if given; else grants to the endpoint only warn (there is no role to add them to)."""
        if self.execution_role is not None:
            return self.execution_role
        # UnknownPrincipal implements IPrincipal in JavaScript; its Python type does not declare every member.
        return cast(iam.IPrincipal, iam.UnknownPrincipal(resource=self))
