"""How a Lambda function reaches a HyperPod cluster's private Kubernetes API (shared by the refresh
function and the cache metrics exporter)."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from hyperwarm.cluster.cluster import IHyperPodCluster


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
