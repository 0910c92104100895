"""A JumpStart model's artifacts are readable by the roles the operator mounts models with."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from typing import Any

from rehearsal.core import Assembly, Finding, rule, text_of
from rehearsal.rules.roles import role_statements, trusted_service_accounts

RULE = "roles.jumpstart-read"
# Written out here, not imported from the construct: the rule must fail when the construct drops them.
MODEL_READERS = ("hyperpod-inference-system:hyperpod-inference-controller-manager", "kube-system:s3-csi-driver-sa")
"""The operator's execution role and the Mountpoint for S3 CSI driver's role: hyperwarm's model readers."""
_BUCKET = re.compile(r"^arn:[^:]+:s3:::jumpstart-cache-prod-[^/]+$")
_OBJECTS = re.compile(r"^arn:[^:]+:s3:::jumpstart-cache-prod-[^/]+/\*$")


def _grants(statements: list[dict[str, Any]], action: str, pattern: re.Pattern[str]) -> bool:
    for statement in statements:
        actions = statement.get("Action", [])
        actions = actions if isinstance(actions, list) else [actions]
        if not any(isinstance(a, str) and fnmatch.fnmatchcase(action.lower(), a.lower()) for a in actions):
            continue
        resources = statement.get("Resource", [])
        if any(pattern.match(text_of(r, "x")) for r in (resources if isinstance(resources, list) else [resources])):
            return True
    return False


@rule(RULE, source="https://docs.aws.amazon.com/sagemaker/latest/dg/jumpstart-deploy.html")
def jumpstart_artifacts_are_readable(assembly: Assembly) -> Iterator[Finding]:
    """Where a stack applies a ``JumpStartModel``, each model reader of its cluster (roles trusted by the operator's
    ``hyperpod-inference-controller-manager`` and the S3 CSI driver's ``s3-csi-driver-sa``) may ``s3:GetObject`` the
    objects and ``s3:ListBucket`` the JumpStart bucket ``jumpstart-cache-prod-<region>``, the S3 access AWS scopes a
    JumpStart deployment's role to ("Deploy a Model"). Without it the pods never get the weights: hyperwarm's S3 CSI
    role reads only what is granted."""
    applying = {stack for stack, _, obj in assembly.kubernetes_objects() if obj.get("kind") == "JumpStartModel"}
    for stack, logical_id, role in assembly.resources("AWS::IAM::Role"):
        # The readers of the cluster the manifest goes to: in its stack or one it deploys after.
        if not any(stack == s or assembly.deploys_after(s, stack) for s in applying):
            continue
        accounts = trusted_service_accounts(assembly, stack, role)
        if not accounts & set(MODEL_READERS):
            continue
        statements = role_statements(assembly, stack, logical_id)
        missing = [f"{action} on {what}" for action, pattern, what in (
            ("s3:GetObject", _OBJECTS, "arn:aws:s3:::jumpstart-cache-prod-<region>/*"),
            ("s3:ListBucket", _BUCKET, "arn:aws:s3:::jumpstart-cache-prod-<region>"))
            if not _grants(statements, action, pattern)]
        if missing:
            yield Finding(RULE, stack, logical_id, f"a model reader ({', '.join(sorted(accounts))}) lacks "
                          f"{' and '.join(missing)}: a JumpStartModel's pods could not read its artifacts")
