"""``hyperwarm-<env>-cluster``: VPC, EKS and the HyperPod cluster with its NVMe instance groups."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2, aws_iam as iam
from constructs import Construct

from hyperwarm import HyperPodEksCluster, HyperPodEksClusterProps
from stacks import served
from stacks.config import EnvironmentConfig
from stacks.config.regional import pull_registry_accounts


class ClusterStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        vpc = None
        if config.vpc.vpc_id:
            vpc = ec2.Vpc.from_vpc_attributes(
                self, "ExistingVpc", vpc_id=config.vpc.vpc_id,
                availability_zones=list(config.vpc.availability_zones),
                private_subnet_ids=list(config.vpc.private_subnet_ids),
            )
        self.cluster = HyperPodEksCluster(self, "HyperPod", HyperPodEksClusterProps(
            instance_groups=[g.to_spec() for g in config.instance_groups],
            kubernetes_version=config.kubernetes_version,
            vpc=vpc,
            availability_zones=config.vpc.availability_zones,
            vpc_cidr=config.vpc.cidr,
            max_azs=config.vpc.max_azs,
            nat_gateways=config.vpc.nat_gateways,
            endpoint_public_access=config.endpoint_public_access,
            addon_versions=dict(config.addon_versions),
            admin_principals=[_principal(self, f"Admin{i}", arn) for i, arn in enumerate(config.cluster_admins)],
            image_registry_accounts=pull_registry_accounts(config.caches.models, config.image_registry_accounts),
            pods_per_node=dict(config.pods_per_node),
        ))
        cdk.CfnOutput(self, served.CLUSTER_NAME_OUTPUT, value=self.cluster.eks_cluster.cluster_name,
                      description="the EKS cluster's name: synth reads it to find what the refresh made serve")
        if config.production:
            # Deleting the stack (or a replacement that gets past the stack policy) leaves the GPU cluster and
            # its control plane in place (DeletionPolicy RetainExceptOnCreate, UpdateReplacePolicy Retain); a
            # failed first create deletes them, as nothing could adopt them (no static name).
            for resource in (self.cluster.eks_cluster.node.default_child, self.cluster.node.default_child):
                assert isinstance(resource, cdk.CfnResource)  # the AWS::EKS::Cluster, the AWS::SageMaker::Cluster
                resource.apply_removal_policy(cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE)


def _principal(scope: Construct, id: str, arn: str) -> iam.IRole | iam.IUser:
    """An existing role or user by ARN (``cluster_admins``)."""
    if ":role/" in arn:
        return iam.Role.from_role_arn(scope, id, arn, mutable=False)
    return iam.User.from_user_arn(scope, id, arn)
