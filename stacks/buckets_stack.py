"""``hyperwarm-<env>-buckets``: the model buckets hyperwarm creates, deployed before every stack that reads them."""

from __future__ import annotations

import aws_cdk as cdk
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
