"""How a Lambda function reaches a HyperPod cluster's private Kubernetes API (shared by the refresh
function, the cache metrics exporter and the Hub token sync)."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_ec2 as ec2, aws_iam as iam
from constructs import Construct

from hyperwarm._internal.nag import acknowledge, managed_policy
from hyperwarm.cluster.interfaces import IHyperPodCluster


def cluster_function_role(scope: Construct, cluster: IHyperPodCluster, description: str) -> iam.Role:
    """The role of a function in the cluster's VPC that reads the cluster's endpoint (``eks:DescribeCluster`` on
    it alone); what it may do in Kubernetes is its access entry's."""
    role = iam.Role(scope, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=description)
    role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(
        "service-role/AWSLambdaVPCAccessExecutionRole"))
    acknowledge(role, "the AWS-managed Lambda VPC execution policy only writes the function's logs and "
                "manages its network interfaces", managed_policy("service-role/AWSLambdaVPCAccessExecutionRole"))
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["eks:DescribeCluster"], resources=[cluster.eks_cluster.cluster_arn]))
    return role


def private_api_network(scope: Construct, cluster: IHyperPodCluster, who: str) -> tuple[ec2.SecurityGroup, dict[str, Any]]:
    """A security group for the function, HTTPS from it to the EKS API, and the ``lambda_.Function``
    keyword arguments that put the function in the cluster's private subnets (the EKS API endpoint is private).

    The ingress rule lives in ``scope``, not in the cluster's stack: that stack must not depend on this one.
    """
    group = ec2.SecurityGroup(scope, "SecurityGroup", vpc=cluster.vpc, allow_all_outbound=True,
                              description=f"{who}: HTTPS to the EKS API and AWS APIs")
    ec2.CfnSecurityGroupIngress(
        scope, "KubernetesApiIngress", group_id=cluster.security_group.security_group_id,
        source_security_group_id=group.security_group_id, ip_protocol="tcp",
        from_port=443, to_port=443, description=f"{who} to the Kubernetes API")
    return group, {"vpc": cluster.vpc, "security_groups": [group],
                   "vpc_subnets": ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)}
