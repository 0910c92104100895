"""Target tracking of a variant's instance count (Application Auto Scaling)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling, aws_iam as iam
from constructs import Construct, IConstruct

from hyperwarm.endpoints.props import ProductionVariant

PREDEFINED_METRICS = {
    "InvocationsPerInstance": appscaling.PredefinedMetric.SAGEMAKER_VARIANT_INVOCATIONS_PER_INSTANCE,
    "ConcurrentRequestsPerModel":
        appscaling.PredefinedMetric.SAGEMAKER_VARIANT_CONCURRENT_REQUESTS_PER_MODEL_HIGH_RESOLUTION,
}
"""Application Auto Scaling's metric for each of :data:`~hyperwarm.endpoints.props.SCALING_METRICS`."""


def _scaling_role(scope: Construct) -> iam.IRole:
    """Application Auto Scaling's service-linked role for SageMaker (no role of our own to maintain)."""
    existing = scope.node.try_find_child("ScalingServiceLinkedRole")
    if existing is not None:
        return existing  # type: ignore[return-value]
    arn = cdk.Stack.of(scope).format_arn(
        service="iam", region="", resource="role",
        resource_name="aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
                      "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")
    return iam.Role.from_role_arn(scope, "ScalingServiceLinkedRole", arn, mutable=False)


def scale_instances(scope: Construct, variant: ProductionVariant, endpoint_name: str,
                    endpoint: IConstruct) -> appscaling.ScalableTarget:
    """``<variant>Scaling`` in ``scope``: ``variant.autoscaling`` on the instance count of ``endpoint``."""
    a = variant.autoscaling
    assert a is not None
    target = appscaling.ScalableTarget(
        scope, f"{variant.name}Scaling",
        service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
        resource_id=f"endpoint/{endpoint_name}/variant/{variant.name}",
        scalable_dimension="sagemaker:variant:DesiredInstanceCount",
        min_capacity=a.min_capacity, max_capacity=a.max_capacity,
        role=_scaling_role(scope),
    )
    # The ResourceId names the endpoint by string: without this, registration races the endpoint's
    # creation (10-40 min) and the stack rolls back (ScalableTarget reference, "add a dependency").
    target.node.add_dependency(endpoint)
    target.scale_to_track_metric(
        "TargetTracking", target_value=a.target_value, predefined_metric=PREDEFINED_METRICS[a.metric],
        scale_in_cooldown=a.scale_in_cooldown, scale_out_cooldown=a.scale_out_cooldown,
    )
    return target
