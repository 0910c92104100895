"""cdk-nag acknowledgments, kept next to the resource they excuse, each with its reason."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge AwsSolutions ``rule`` (e.g. ``IAM5`` or ``IAM5[Action::s3:GetObject*]``) on ``scope``."""
    if len(reason) < 30:
        raise ValueError(f"acknowledgment of {rule} on {scope.node.path} needs a specific reason, got {reason!r}")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"AwsSolutions::AwsSolutions-{rule}", reason=reason))
