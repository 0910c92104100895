"""``hyperwarm-<env>-buckets``: the model buckets hyperwarm creates, deployed before every stack that reads them."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kms as kms, aws_s3 as s3
from constructs import Construct

from hyperwarm import model_bucket
from stacks.config import EnvironmentConfig


class BucketsStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        self.buckets = {b.name: model_bucket(self, b.name, b.name) for b in config.model_buckets if b.create}
        for name in self.buckets:
            cdk.CfnOutput(self, f"{name}Uri", value=f"s3://{name}/",
                          description="upload model versions here before deploying their readers")


def model_bucket_by_name(scope: Construct, id: str, name: str, config: EnvironmentConfig) -> s3.IBucket:
    """A model bucket by name (it exists before its readers deploy), with its customer-managed key when
    ``model_buckets`` names one, so every grant to read it also grants ``kms:Decrypt``."""
    key_arn = config.bucket_keys().get(name)
    key = kms.Key.from_key_arn(scope, f"{id}Key", key_arn) if key_arn else None
    return s3.Bucket.from_bucket_attributes(scope, id, bucket_name=name, encryption_key=key)
