"""Service principals held to this account's resources (cross-service confused deputy prevention)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import IConstruct


def sagemaker_principal(scope: IConstruct) -> iam.IPrincipal:
    """``sagemaker.amazonaws.com``, only on behalf of SageMaker resources of this stack's account and region:
    ``aws:SourceAccount`` and ``aws:SourceArn`` ``arn:<partition>:sagemaker:<region>:<account>:*``, the form AWS
    documents for SageMaker inference roles, which also says not to name one model or endpoint there
    (https://docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html#security-confused-deputy-inference)."""
    stack = cdk.Stack.of(scope)
    return iam.ServicePrincipal("sagemaker.amazonaws.com").with_conditions({
        "StringEquals": {"aws:SourceAccount": stack.account},
        "ArnLike": {"aws:SourceArn": stack.format_arn(service="sagemaker", resource="*",
                                                       arn_format=cdk.ArnFormat.NO_RESOURCE_NAME)}})
