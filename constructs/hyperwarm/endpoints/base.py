"""``IInferenceEndpoint``: what other constructs and stacks need of a SageMaker endpoint, and the
grant and metric methods every endpoint (created or imported) shares."""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import aws_cdk as cdk
import jsii
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from hyperwarm.functions.cache_refresh import contract
from constructs import Construct, Node

_NAMESPACE = "AWS/SageMaker"


@runtime_checkable
class IInferenceEndpoint(Protocol):
    """A SageMaker real-time endpoint: one created by :class:`~hyperwarm.endpoints.endpoint.InferenceEndpoint`
    or imported with ``InferenceEndpoint.from_endpoint_attributes``."""

    @property
    def node(self) -> Node: ...

    @property
    def endpoint_name(self) -> str:
        """The endpoint's name."""

    @property
    def endpoint_arn(self) -> str:
        """The endpoint's ARN."""

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

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant: ...

    def metric_invocations(self, variant_name: str, **options: Any) -> cloudwatch.Metric: ...

    def metric_invocation_4xx_errors(self, variant_name: str, **options: Any) -> cloudwatch.Metric: ...

    def metric_invocation_5xx_errors(self, variant_name: str, **options: Any) -> cloudwatch.Metric: ...

    def metric_model_latency(self, variant_name: str, **options: Any) -> cloudwatch.Metric: ...

    def metric_overhead_latency(self, variant_name: str, **options: Any) -> cloudwatch.Metric: ...


class EndpointBase(Construct):
    """``grant_invoke`` and the ``metric_*`` helpers, for subclasses that set ``endpoint_name``,
    ``endpoint_arn`` and ``variant_names``. Each metric is ``AWS/SageMaker`` with the dimensions
    EndpointName and VariantName; ``options`` are ``cloudwatch.Metric`` keyword arguments
    (``statistic``, ``period``, ``label`` ...) that override the documented defaults."""

    endpoint_name: str
    endpoint_arn: str
    variant_names: Sequence[str] | None

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` call InvokeEndpoint and InvokeEndpointWithResponseStream on this endpoint."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"],
            resource_arns=[self.endpoint_arn],
        )

    def metric_invocations(self, variant_name: str, **options: Any) -> cloudwatch.Metric:
        """Requests sent to the variant. Default: Sum over 5 minutes."""
        return self._metric(variant_name, "Invocations", "Sum", options)

    def metric_invocation_4xx_errors(self, variant_name: str, **options: Any) -> cloudwatch.Metric:
        """Requests the model answered with a 4XX status. Default: Sum over 5 minutes."""
        return self._metric(variant_name, "Invocation4XXErrors", "Sum", options)

    def metric_invocation_5xx_errors(self, variant_name: str, **options: Any) -> cloudwatch.Metric:
        """Requests the model answered with a 5XX status. Default: Sum over 5 minutes."""
        return self._metric(variant_name, "Invocation5XXErrors", "Sum", options)

    def metric_model_latency(self, variant_name: str, **options: Any) -> cloudwatch.Metric:
        """Microseconds the model took to respond (for streaming: to the last token). Default: Average
        over 5 minutes."""
        return self._metric(variant_name, "ModelLatency", "Average", options)

    def metric_overhead_latency(self, variant_name: str, **options: Any) -> cloudwatch.Metric:
        """Microseconds SageMaker added to the model's latency (routing included). Default: Average over 5 minutes."""
        return self._metric(variant_name, "OverheadLatency", "Average", options)

    def _metric(self, variant_name: str, metric_name: str, statistic: str,
                options: dict[str, Any]) -> cloudwatch.Metric:
        known = self.variant_names
        if known is not None and variant_name not in known:
            raise ValueError(f"{self.node.path}: variant_name = {variant_name!r} -- allowed: {', '.join(known)}")
        return cloudwatch.Metric(namespace=_NAMESPACE, metric_name=metric_name,
                                 dimensions_map={"EndpointName": self.endpoint_name, "VariantName": variant_name},
                                 **{"statistic": statistic, "period": cdk.Duration.minutes(5), **options})


@jsii.implements(iam.IGrantable)
class ImportedInferenceEndpoint(EndpointBase):
    """An endpoint defined elsewhere (another stack or app). Use ``InferenceEndpoint.from_endpoint_attributes``."""

    def __init__(self, scope: Construct, id: str, *, endpoint_name: str,
                 variant_names: Sequence[str] | None = None, execution_role: iam.IRole | None = None,
                 encryption_key: kms.IKey | None = None, detailed_observability: bool | None = None,
                 metric_publish_frequency: cdk.Duration | None = None,
                 serving_engines: Mapping[str, str] | None = None) -> None:
        super().__init__(scope, id)
        self.detailed_observability: bool | None = detailed_observability
        self.metric_publish_frequency: cdk.Duration | None = metric_publish_frequency
        self._engines = dict(serving_engines or {})
        if not cdk.Token.is_unresolved(endpoint_name):
            problem = contract.endpoint_name_problem(endpoint_name)
            if problem:
                raise ValueError(f"{self.node.path}: endpoint_name = {endpoint_name!r} -- {problem}")
        self.endpoint_name: str = endpoint_name
        # SageMaker ARNs carry the name in lower case.
        arn_name = endpoint_name if cdk.Token.is_unresolved(endpoint_name) else contract.arn_name(endpoint_name)
        self.endpoint_arn: str = cdk.Stack.of(self).format_arn(
            service="sagemaker", resource="endpoint", resource_name=arn_name)
        self.variant_names: tuple[str, ...] | None = tuple(variant_names) if variant_names is not None else None
        self.execution_role: iam.IRole | None = execution_role
        self.encryption_key: kms.IKey | None = encryption_key

    def serving_engine(self, variant_name: str) -> str | None:
        """The engine given for the variant in ``serving_engines``; None if not given."""
        return self._engines.get(variant_name)

    @property
    def grant_principal(self) -> iam.IPrincipal:
        """The execution role if given; else grants to the endpoint only warn (there is no role to add them to)."""
        return self.execution_role or iam.UnknownPrincipal(resource=self)
