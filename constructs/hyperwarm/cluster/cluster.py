"""``HyperPodEksCluster``: a SageMaker HyperPod cluster orchestrated by Amazon EKS, composed of parts
that each do one thing, created in the order they must exist:

:class:`~hyperwarm.cluster.network.HyperPodNetwork` (VPC, intra-cluster security group) ->
:class:`~hyperwarm.cluster.control_plane.EksControlPlane` (EKS, core add-ons, HyperPod dependencies) ->
:class:`~hyperwarm.cluster.nodes.HyperPodNodes` (``AWS::SageMaker::Cluster``, lifecycle scripts, node role) ->
:class:`~hyperwarm.cluster.addons.InferenceOperator` (the HyperPod inference operator and its prerequisites).

Other stacks take an :class:`IHyperPodCluster`; :meth:`HyperPodEksCluster.from_cluster_attributes`
makes one of a cluster deployed elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2, aws_eks_v2 as eks, aws_iam as iam, aws_lambda as lambda_
from constructs import Construct

from hyperwarm._internal.interfaces import as_cluster
from hyperwarm._internal.validation import raise_problems
from hyperwarm.cluster.addons import IInferenceOperator, InferenceOperator, InferenceOperatorProps
from hyperwarm.cluster.control_plane import EksControlPlane, EksControlPlaneProps, control_plane_problems
from hyperwarm.cluster.instance_group import InstanceGroup, InstanceGroupSpec, find_group
from hyperwarm.cluster.interfaces import IHyperPodCluster
from hyperwarm.cluster.network import HyperPodNetwork, HyperPodNetworkProps, network_problems
from hyperwarm.cluster.node_capacity import PODS_PER_NODE_METADATA
from hyperwarm.cluster.nodes import HyperPodNodes, HyperPodNodesProps, nodes_problems
from hyperwarm.cluster.rules import (
    DEFAULT_KUBERNETES_VERSION,
    INFERENCE_OPERATOR_ADDON,
    KubernetesVersion,
    NodeRecovery,
    addon_build_problem,
    pods_per_node_problem,
)


@dataclass(frozen=True)
class HyperPodEksClusterProps:
    """Properties of :class:`HyperPodEksCluster`."""

    instance_groups: Sequence[InstanceGroupSpec]
    """HyperPod instance groups; at least one, unique names."""
    kubernetes_version: KubernetesVersion = DEFAULT_KUBERNETES_VERSION
    """EKS Kubernetes version, 1.30..1.35. Default: 1.33."""
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
    endpoint_public_access: bool = False
    """Expose the EKS API endpoint publicly. Default: private only (see :class:`EksControlPlaneProps`)."""
    admin_principals: Sequence[iam.IRole | iam.IUser] = ()
    """IAM roles or users given cluster-admin access entries. Default: the deploying identity (the CDK bootstrap's
    deploy role, ``cdk-<qualifier>-deploy-role-<account>-<region>``), never every principal of the account."""
    node_recovery: NodeRecovery = "Automatic"
    """HyperPod NodeRecovery, ``Automatic`` or ``None``. Default: Automatic."""
    install_inference_operator: bool = True
    """Install the HyperPod inference operator and its prerequisites. Default: true."""
    image_registry_accounts: Sequence[str] = ()
    """AWS accounts whose ECR repositories (in the cluster's region) the nodes may pull from besides this
    account, AWS's Deep Learning Containers and the EKS add-on and HyperPod agent registries, e.g. a
    central image account. Default: none (:func:`hyperwarm.cluster.nodes.pull_registry_accounts`)."""
    addon_versions: Mapping[str, str] = field(default_factory=dict)
    """Pinned EKS add-on builds by add-on name, e.g. ``{"amazon-sagemaker-hyperpod-inference": "v2.0.0-eksbuild.1"}``.
    Default: EKS's default build for the Kubernetes version. Objects applied to the inference operator that use
    fields newer than its first add-on release (model caches) need a pinned build that carries them
    (:func:`~hyperwarm.cluster.rules.operator_pin_problem`)."""
    pods_per_node: Mapping[str, int] = field(default_factory=dict)
    """Pods one HyperPod node holds, by instance type, where it differs from hyperwarm's estimate (AWS publishes
    no figure; see :mod:`hyperwarm.cluster.catalog`). ``kubectl get node <node> -o jsonpath={.status.allocatable.pods}``
    shows the real one. Recorded in the ``AWS::SageMaker::Cluster``'s metadata for the deploy rehearsal.
    Default: the estimates."""
    kubectl_layer: lambda_.ILayerVersion | None = None
    """The kubectl layer that applies the cluster's manifests, within one minor version of ``kubernetes_version``.
    Default: kubectl 1.34 (``hyperwarm[hyperpod]``), which serves Kubernetes 1.33..1.35; for 1.30..1.32 give
    e.g. ``KubectlV31Layer(scope, "Kubectl")`` from ``aws-cdk.lambda-layer-kubectl-v31``."""


@jsii.implements(ec2.IConnectable)
class _HyperPodClusterBase(cdk.Resource):
    """What a created and an imported cluster share: a ``cdk.Resource`` (which adds nothing to the template) whose
    ``connections`` are its node security group's, as an ``rds.DatabaseCluster``'s are its instances'."""

    cluster_arn: str
    instance_groups: Mapping[str, InstanceGroup]
    security_group: ec2.ISecurityGroup

    @property
    def connections(self) -> ec2.Connections:
        """The nodes' and the EKS control plane's security group: ``peer.connections.allow_to(cluster, port)``
        lets ``peer`` reach the nodes on ``port``, ``allow_from(cluster, port)`` lets the nodes reach it."""
        return ec2.Connections(security_groups=[self.security_group])

    def instance_group(self, name: str) -> InstanceGroup:
        """The instance group called ``name``; raises naming the groups that exist."""
        return find_group(self.instance_groups, name, self.node.path)

    def cache_group(self, name: str) -> InstanceGroup:
        """The instance group ``name``, which must have local NVMe to hold model caches."""
        return find_group(self.instance_groups, name, self.node.path, cache=True)

    def grant_describe(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` describe this HyperPod cluster and its nodes."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:DescribeCluster", "sagemaker:ListClusterNodes"],
            resource_arns=[self.cluster_arn],
        )


class HyperPodEksCluster(_HyperPodClusterBase):
    """A HyperPod cluster on EKS whose NVMe instance groups can hold model caches.

    Composed of parts that each do one thing, in the manner of EKS Blueprints' add-ons: each part
    is a plain class that adds its resources to this construct, so every resource keeps the path
    (logical id, ``Name`` tag) it had when this was one class; a construct between this one and the
    VPC or the EKS cluster would retag the VPC and update their handlers on the next deploy.
    ``network``, ``control_plane`` and ``nodes`` give access to each part's resources.

    ``node.default_child`` is the ``AWS::SageMaker::Cluster`` (``CfnCluster``).
    """

    def __init__(self, scope: Construct, id: str, props: HyperPodEksClusterProps) -> None:
        super().__init__(scope, id)
        network = HyperPodNetworkProps(vpc=props.vpc, availability_zones=props.availability_zones,
                                       vpc_cidr=props.vpc_cidr, max_azs=props.max_azs, nat_gateways=props.nat_gateways)
        pin = props.addon_versions.get(INFERENCE_OPERATOR_ADDON)
        operator = addon_build_problem(pin) if props.install_inference_operator else None
        raise_problems(self.node.path, "HyperPodEksClusterProps", [  # every part's problems at once
            *network_problems(network),
            *control_plane_problems(self, props.kubernetes_version, props.admin_principals, props.kubectl_layer),
            *nodes_problems(props.instance_groups, props.node_recovery),
            *([f"addon_versions[{INFERENCE_OPERATOR_ADDON!r}] = {pin!r} -- {operator}"] if operator else []),
            *(f"pods_per_node[{t!r}] = {n!r} -- {problem}" for t, n in props.pods_per_node.items()
              for problem in [pods_per_node_problem(t, n)] if problem),
        ])
        self.network = HyperPodNetwork(self, network)
        self.control_plane = EksControlPlane(self, EksControlPlaneProps(
            vpc=self.network.vpc, security_group=self.network.security_group, subnets=self.network.private_subnets,
            kubernetes_version=props.kubernetes_version, endpoint_public_access=props.endpoint_public_access,
            admin_principals=props.admin_principals, addon_versions=props.addon_versions,
            kubectl_layer=props.kubectl_layer))
        self.nodes = HyperPodNodes(self, HyperPodNodesProps(
            eks_cluster=as_cluster(self.control_plane.cluster), security_group=self.network.security_group,
            subnet_ids=self.network.private_subnet_ids, instance_groups=props.instance_groups,
            node_recovery=props.node_recovery, after=[self.control_plane.dependencies],
            image_registry_accounts=props.image_registry_accounts))
        self.node.default_child = self.nodes.resource
        if props.pods_per_node:
            self.nodes.resource.add_metadata(PODS_PER_NODE_METADATA, dict(props.pods_per_node))

        self.vpc: ec2.IVpc = self.network.vpc
        self.security_group: ec2.ISecurityGroup = self.network.security_group
        # An ICluster as IHyperPodCluster declares (the full eks.Cluster: control_plane.cluster).
        self.eks_cluster: eks.ICluster = as_cluster(self.control_plane.cluster)
        self.cluster_arn = self.nodes.cluster_arn
        self.instance_groups = self.nodes.instance_groups
        self.inference_operator: InferenceOperator | None = None
        if props.install_inference_operator:
            self.inference_operator = InferenceOperator(self, "InferenceOperator", InferenceOperatorProps(
                cluster=self.control_plane.cluster, hyperpod_cluster_arn=self.cluster_arn,
                addon_versions=props.addon_versions, after=[self.nodes.resource],
            ))

    @staticmethod
    def from_cluster_attributes(scope: Construct, id: str, *, cluster_arn: str, eks_cluster: eks.ICluster,
                                security_group: ec2.ISecurityGroup, instance_groups: Sequence[InstanceGroupSpec],
                                inference_operator: IInferenceOperator | None = None) -> IHyperPodCluster:
        """A HyperPod cluster deployed elsewhere.

        ``eks_cluster`` needs a kubectl provider (``eks.Cluster.from_cluster_attributes`` with
        ``kubectl_provider``) for manifests applied to it; ``instance_groups`` are the cluster's groups as
        created (their types tell ``cache_group`` what NVMe they have); ``inference_operator`` from
        :meth:`InferenceOperator.from_operator_attributes` when the cluster has one. Default: none.
        """
        return _ImportedHyperPodCluster(scope, id, cluster_arn=cluster_arn, eks_cluster=eks_cluster,
                                        security_group=security_group, instance_groups=instance_groups,
                                        inference_operator=inference_operator)


class _ImportedHyperPodCluster(_HyperPodClusterBase):
    """A HyperPod cluster deployed elsewhere: see :meth:`HyperPodEksCluster.from_cluster_attributes`."""

    def __init__(self, scope: Construct, id: str, *, cluster_arn: str, eks_cluster: eks.ICluster,
                 security_group: ec2.ISecurityGroup, instance_groups: Sequence[InstanceGroupSpec],
                 inference_operator: IInferenceOperator | None) -> None:
        super().__init__(scope, id, environment_from_arn=cluster_arn)
        self.cluster_arn = cluster_arn
        self.eks_cluster = eks_cluster
        self.vpc = eks_cluster.vpc
        self.security_group = security_group
        self.inference_operator = inference_operator
        self.instance_groups = {g.name: InstanceGroup.of(g) for g in instance_groups}
