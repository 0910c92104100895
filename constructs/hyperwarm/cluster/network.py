"""``HyperPodNetwork``: where a HyperPod EKS cluster runs: private subnets and one intra-cluster security group."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2, aws_logs as logs
from constructs import Construct

from hyperwarm._internal.nag import acknowledge_checkov, acknowledge_deploy_time_handlers, stack_singletons
from hyperwarm._internal.tokens import unresolved
from hyperwarm._internal.validation import raise_problems


@dataclass(frozen=True)
class HyperPodNetworkProps:
    """Properties of :class:`HyperPodNetwork`."""

    vpc: ec2.IVpc | None = None
    """An existing VPC whose private (with egress) subnets HyperPod uses. Default: a new VPC."""
    availability_zones: Sequence[str] = ()
    """AZs of the new VPC. Default: ``max_azs`` zones from ``Fn::GetAZs``."""
    vpc_cidr: str = "10.0.0.0/16"
    """CIDR of the new VPC. Default: 10.0.0.0/16."""
    max_azs: int = 2
    """Zones of the new VPC when ``availability_zones`` is empty. Default: 2."""
    nat_gateways: int = 1
    """NAT gateways of the new VPC. Default: 1 (use one per AZ in production)."""


class HyperPodNetwork:
    """A VPC (new: public and large private subnets, NAT, S3 gateway endpoint, flow logs) and a
    security group that allows all traffic to and from itself, as HyperPod's EFA health checks need.

    A part of :class:`hyperwarm.HyperPodEksCluster` (see there): it adds ``Vpc``, ``FlowLogs``,
    ``ClusterSecurityGroup`` and ``ClusterSecurityGroupSelfEgress`` to ``scope``.
    """

    def __init__(self, scope: Construct, props: HyperPodNetworkProps | None = None) -> None:
        props = props or HyperPodNetworkProps()
        raise_problems(scope.node.path, "HyperPodNetworkProps", network_problems(props))
        self.flow_logs: logs.LogGroup | None = None
        """The new VPC's flow-log group; None with an existing VPC."""
        self.vpc: ec2.IVpc = props.vpc or self._new_vpc(scope, props)
        self.security_group = ec2.SecurityGroup(
            scope, "ClusterSecurityGroup", vpc=self.vpc, allow_all_outbound=True,
            description="HyperPod nodes and EKS control plane: all traffic within the group",
        )
        self.security_group.add_ingress_rule(self.security_group, ec2.Port.all_traffic(), "intra-cluster traffic")
        # HyperPod prerequisites: all traffic to AND from the group itself; EFA health checks can fail with
        # 0.0.0.0/0-only egress. An L1 rule, since add_egress_rule is ignored beside allow_all_outbound.
        ec2.CfnSecurityGroupEgress(
            scope, "ClusterSecurityGroupSelfEgress", group_id=self.security_group.security_group_id,
            destination_security_group_id=self.security_group.security_group_id, ip_protocol="-1",
            description="intra-cluster traffic (EFA)")
        self.private_subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        self.private_subnet_ids: list[str] = self.vpc.select_subnets(
            subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnet_ids

    def _new_vpc(self, scope: Construct, props: HyperPodNetworkProps) -> ec2.Vpc:
        zones = {"availability_zones": list(props.availability_zones)} if props.availability_zones \
            else {"max_azs": props.max_azs}
        vpc = ec2.Vpc(
            scope, "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(props.vpc_cidr),
            nat_gateways=props.nat_gateways,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                # HyperPod gives every pod a VPC IP: large private subnets.
                ec2.SubnetConfiguration(name="hyperpod", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                                        cidr_mask=18),
            ],
            gateway_endpoints={"S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)},
            restrict_default_security_group=True,
            **zones,
        )
        self.flow_logs = flow_logs = logs.LogGroup(scope, "FlowLogs", retention=logs.RetentionDays.ONE_MONTH)
        acknowledge_checkov(flow_logs, "flow-log records hold addresses, ports and byte counts, no payloads; "
                            "CloudWatch Logs encrypts every log group at rest", "CKV_AWS_158")
        vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs))
        for provider in stack_singletons(scope, "Custom::VpcRestrictDefaultSG"):
            acknowledge_deploy_time_handlers(provider)
        return vpc


def network_problems(props: HyperPodNetworkProps) -> list[str]:
    """``field = value -- rule`` for each problem of ``props``; unresolved tokens are not judged."""
    errors = []
    if props.vpc is None:
        if not unresolved(props.max_azs) and not props.availability_zones and props.max_azs < 1:
            errors.append(f"max_azs = {props.max_azs!r} -- allowed: >= 1")
        if not unresolved(props.nat_gateways) and props.nat_gateways < 1:
            errors.append(f"nat_gateways = {props.nat_gateways!r} -- allowed: >= 1 (the private subnets' egress)")
    return errors
