"""Stand-ins the construct tests share: a HyperPod cluster for tests that only reference one (imported, as
another stack would: no MagicMock, no synthesized VPC and EKS cluster), and one endpoint model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
import boto3
from aws_cdk import aws_ec2 as ec2, aws_eks_v2 as eks, aws_iam as iam

from hyperwarm import (
    CachedModelHandle,
    HyperPodEksCluster,
    IHyperPodCluster,
    InferenceOperator,
    InstanceGroupSpec,
    ModelSpec,
    Serving,
    ServingImage,
)
from hyperwarm._internal.constraints import gigabytes
from hyperwarm.caches import DeploymentKind
from hyperwarm.caches.sources import AnyModelSource

ACCOUNT = "123456789012"
IMAGE = ServingImage.from_uri("123456789012.dkr.ecr.us-east-1.amazonaws.com/serving/vllm:0.27.1")
# A repository of the account's own: hyperwarm is told which convention the image follows.
MODEL = ModelSpec(IMAGE, model_data="s3://models-bucket/llama/v1/", serving=Serving(framework="vllm"))
OPERATOR_BUILD = "v2.0.0-eksbuild.1"
"""The inference operator add-on build the stand-in cluster runs (one that holds model caches)."""


def imported_cluster(scope: cdk.Stack, groups: Sequence[InstanceGroupSpec], *, operator: bool = True,
                     id: str = "HyperPod", operator_build: str | None = OPERATOR_BUILD) -> IHyperPodCluster:
    """A deployed cluster with ``groups``, its kubectl provider and (with ``operator``) its inference operator,
    installed from add-on build ``operator_build``."""
    def arn(service: str, resource: str) -> str:
        return f"arn:aws:{service}:{scope.region}:{ACCOUNT}:{resource}"

    vpc = ec2.Vpc.from_vpc_attributes(scope, f"{id}Vpc", vpc_id="vpc-0123456789abcdef0",
                                      availability_zones=[f"{scope.region}a", f"{scope.region}b"],
                                      private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"])
    kubectl = eks.KubectlProvider.from_kubectl_provider_attributes(
        scope, f"{id}Kubectl", service_token=arn("lambda", "function:kubectl-provider"),
        role=iam.Role.from_role_arn(scope, f"{id}KubectlRole", f"arn:aws:iam::{ACCOUNT}:role/kubectl"))
    eks_cluster = eks.Cluster.from_cluster_attributes(scope, f"{id}Eks", cluster_name="hyperpod-eks", vpc=vpc,
                                                      kubectl_provider=kubectl)
    inference_operator = None
    if operator:
        inference_operator = InferenceOperator.from_operator_attributes(
            scope, f"{id}Operator",
            execution_role=iam.Role.from_role_arn(scope, f"{id}OperatorRole", f"arn:aws:iam::{ACCOUNT}:role/operator"),
            s3_csi_role=iam.Role.from_role_arn(scope, f"{id}CsiRole", f"arn:aws:iam::{ACCOUNT}:role/s3-csi"),
            addon_version=operator_build)
    return HyperPodEksCluster.from_cluster_attributes(
        scope, id, cluster_arn=arn("sagemaker", "cluster/abc123"), eks_cluster=eks_cluster,
        security_group=ec2.SecurityGroup.from_security_group_id(scope, f"{id}Group", "sg-0123456789abcdef0"),
        instance_groups=groups, inference_operator=inference_operator)


def cached_model(cluster: IHyperPodCluster, name: str, namespace: str = "hyperwarm-models", *,
                 node_cached: bool = False, kind: DeploymentKind = "InferenceEndpointConfig", size_gb: float = 16,
                 refreshed: bool = True, source: AnyModelSource | None = None) -> CachedModelHandle:
    """The handle ``CachedModels.models`` gives a model, without rendering one (for tests of what takes it)."""
    return CachedModelHandle(name=name, cluster=cluster, namespace=namespace, kind=kind, node_cached=node_cached,
                             size=gigabytes(size_gb), refreshed=refreshed, source=source)


def pk_table(name: str, region: str | None = None) -> Any:
    """A DynamoDB table keyed by ``pk`` (S), on demand, as hyperwarm's state, quota and deploy-record tables are, in
    moto (the caller's ``mock_aws``); its boto3 ``Table`` resource."""
    dynamodb = boto3.resource("dynamodb", region_name=region)
    return dynamodb.create_table(TableName=name, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                                 AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                                 BillingMode="PAY_PER_REQUEST")
