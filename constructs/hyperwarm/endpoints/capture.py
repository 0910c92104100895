"""Data capture of an endpoint: the destination bucket (a new one by default) and the execution role's grants."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam, aws_kms as kms, aws_s3 as s3, aws_sagemaker as sagemaker
from constructs import Construct

from hyperwarm._internal.nag import acknowledge, acknowledge_checkov, object_arn_finding
from hyperwarm.endpoints.props import DataCapture


def capture_bucket(scope: Construct, key: kms.IKey) -> s3.Bucket:
    """A new bucket for captured data (``DataCaptureBucket`` in ``scope``), encrypted with ``key``."""
    bucket = s3.Bucket(
        scope, "DataCaptureBucket", encryption=s3.BucketEncryption.KMS, encryption_key=key,
        bucket_key_enabled=True, block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True,
        versioned=True, removal_policy=cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
    )
    no_access_logs = ("written only by this endpoint's execution role; object-level access is "
                      "audited with CloudTrail S3 data events rather than server access logs")
    acknowledge(bucket, no_access_logs, "S1")
    acknowledge_checkov(bucket, no_access_logs, "CKV_AWS_18")
    return bucket


def capture_config(capture: DataCapture, bucket: s3.IBucket, key: kms.IKey,
                   role: iam.Role) -> sagemaker.CfnEndpointConfig.DataCaptureConfigProperty:
    """``DataCaptureConfig`` writing to ``capture.prefix`` of ``bucket``, with ``role`` granted the writes.

    ``bucket`` is ``capture.bucket`` or one from :func:`capture_bucket`, whose own grant covers ``key``.
    """
    prefix = capture.prefix.strip("/")
    bucket.grant_put(role, f"{prefix}/*")
    if capture.bucket is not None:  # the caller's bucket: its grant_put knows nothing of our key
        key.grant_encrypt(role)
    acknowledge(role,
                "captured data only: multipart-upload actions on the capture prefix and data-key actions on "
                "the endpoint's own key (cdk's grant_put and grant_encrypt action groups)",
                "IAM5[Action::s3:Abort*]", "IAM5[Action::kms:GenerateDataKey*]", "IAM5[Action::kms:ReEncrypt*]",
                f"IAM5[Resource::{object_arn_finding(bucket, prefix + '/*')}]")
    return sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
        enable_capture=True,
        initial_sampling_percentage=capture.sampling_percentage,
        destination_s3_uri=bucket.s3_url_for_object(prefix),
        kms_key_id=key.key_arn,
        capture_options=[sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Input"),
                         sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Output")],
    )
