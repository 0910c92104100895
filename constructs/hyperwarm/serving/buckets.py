"""Model-source buckets: created before everything that reads them, or declared as existing.

A bucket named by string (``s3://name/...`` in a model, ``arn:...:s3:::name`` in a policy) carries no
reference CloudFormation could order by: whatever creates it must deploy first, or it must exist
before the deploy. Stacks record the buckets they expect to exist in their template metadata, so
the deploy rehearsal can tell "exists already" from "nobody creates it".
"""

from __future__ import annotations

from collections.abc import Iterable

import aws_cdk as cdk
from aws_cdk import aws_iam as iam, aws_s3 as s3
from constructs import Construct

from hyperwarm._internal.nag import acknowledge, acknowledge_checkov

EXISTING_BUCKETS_METADATA = "hyperwarm:existingBuckets"
"""Template metadata key: bucket names the stack reads that exist before it deploys."""


def declare_existing_buckets(stack: cdk.Stack, names: Iterable[str]) -> None:
    """Record in ``stack``'s template that the buckets ``names`` exist before it deploys."""
    names = set(names)
    if not names:
        return
    metadata = dict(stack.template_options.metadata or {})
    metadata[EXISTING_BUCKETS_METADATA] = sorted(names | set(metadata.get(EXISTING_BUCKETS_METADATA, ())))
    stack.template_options.metadata = metadata


def model_bucket(scope: Construct, id: str, bucket_name: str | None = None) -> s3.Bucket:
    """A bucket for model versions: encrypted, versioned, SSL-only, public access blocked, retained."""
    bucket = s3.Bucket(
        scope, id, bucket_name=bucket_name, encryption=s3.BucketEncryption.S3_MANAGED,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True, versioned=True,
        removal_policy=cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
    )
    no_access_logs = ("model versions are written by the team's release pipeline, each under a new version "
                      "folder; object-level access is audited with CloudTrail S3 data events")
    acknowledge(bucket, no_access_logs, "S1")
    acknowledge_checkov(bucket, no_access_logs, "CKV_AWS_18")
    return bucket


def grant_bucket_key(grantee: iam.IGrantable, bucket: s3.IBucket, grant: iam.Grant) -> iam.Grant:
    """``grant`` plus ``kms:Decrypt`` on the bucket's customer-managed key, when it has one (SSE-KMS objects
    cannot be read without it; import the bucket with ``Bucket.from_bucket_attributes(encryption_key=...)``)."""
    if bucket.encryption_key is None:
        return grant
    return grant.combine(bucket.encryption_key.grant_decrypt(grantee))
