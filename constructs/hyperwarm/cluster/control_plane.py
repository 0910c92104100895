"""``EksControlPlane``: the EKS cluster HyperPod orchestrates with, its core add-ons and HyperPod's dependencies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2, aws_eks_v2 as eks, aws_iam as iam, aws_kms as kms, aws_lambda as lambda_
from constructs import Construct

from hyperwarm._internal.extras import missing_extra
from hyperwarm._internal.interfaces import as_cluster, scope_of
from hyperwarm._internal.kinds import is_a
from hyperwarm._internal.nag import acknowledge, acknowledge_deploy_time_handlers, logical_id, managed_policy
from hyperwarm._internal.tokens import unresolved
from hyperwarm._internal.validation import raise_problems
from hyperwarm.cluster.addons import CORE_ADDONS, HyperPodDependencies, HyperPodDependenciesProps, addon
from hyperwarm.cluster.rules import (
    DEFAULT_KUBECTL_SERVES,
    DEFAULT_KUBERNETES_VERSION,
    SUPPORTED_KUBERNETES_VERSIONS,
    kubectl_layer_problem,
)

_ALL_CONTROL_PLANE_LOGS = (
    eks.ClusterLoggingTypes.API, eks.ClusterLoggingTypes.AUDIT, eks.ClusterLoggingTypes.AUTHENTICATOR,
    eks.ClusterLoggingTypes.CONTROLLER_MANAGER, eks.ClusterLoggingTypes.SCHEDULER,
)


@dataclass(frozen=True)
class EksControlPlaneProps:
    """Properties of :class:`EksControlPlane`."""

    vpc: ec2.IVpc
    """The VPC of the control plane's network interfaces."""
    security_group: ec2.ISecurityGroup
    """The cluster security group, shared with the HyperPod nodes."""
    subnets: ec2.SubnetSelection
    """Subnets of the control plane's network interfaces and of the kubectl handler (private)."""
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    """EKS Kubernetes version, 1.30..1.35. Default: 1.33."""
    endpoint_public_access: bool = False
    """Expose the EKS API endpoint publicly. Default: private only.

    AWS documents no HyperPod requirement either way; its reference stack (aws-samples/
    awsome-distributed-training, ``eks-cluster-stack.yaml``) keeps EKS's default public endpoint.
    Private only works because EKS resolves the endpoint name to VPC addresses from any resolver
    (https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html) and HyperPod nodes
    reach the VPC through their cluster-VPC interface; if nodes fail to register, set this true."""
    admin_principals: Sequence[iam.IRole | iam.IUser] = ()
    """IAM roles or users given cluster-admin access entries. Default: the deploying identity, the CDK bootstrap's
    deploy role of the stack's account and region (``cdk-<qualifier>-deploy-role-<account>-<region>``, which
    ``cdk deploy`` assumes); a stack whose synthesizer names no deploy role must name them."""
    addon_versions: Mapping[str, str] = field(default_factory=dict)
    """Pinned EKS add-on versions by add-on name. Default: EKS's default for the Kubernetes version."""
    kubectl_layer: lambda_.ILayerVersion | None = None
    """The kubectl layer of the handler that applies manifests, within one minor version of ``kubernetes_version``
    (kubectl's version skew policy). Default: kubectl 1.34 from ``aws-cdk.lambda-layer-kubectl-v34`` (the
    ``hyperpod`` extra), which serves Kubernetes 1.33..1.35; another version needs a layer given here."""


class EksControlPlane:
    """An EKS cluster (API authentication, private endpoint, every control-plane log, KMS-encrypted
    secrets, no node groups) with the core add-ons and HyperPod's in-cluster dependencies, which must
    exist before ``AWS::SageMaker::Cluster``.

    A part of :class:`hyperwarm.HyperPodEksCluster` (see there): it adds ``Eks``, ``SecretsKey``,
    ``KubectlLayer``, one child per core add-on and
    ``HyperPodDependencies`` to ``scope``.
    """

    def __init__(self, scope: Construct, props: EksControlPlaneProps) -> None:
        raise_problems(scope.node.path, "EksControlPlaneProps",
                       control_plane_problems(scope, props.kubernetes_version, props.admin_principals,
                                              props.kubectl_layer))
        self.cluster = eks.Cluster(
            scope, "Eks",
            version=eks.KubernetesVersion.of(props.kubernetes_version),
            vpc=props.vpc,
            vpc_subnets=[props.subnets],
            security_group=props.security_group,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            endpoint_access=eks.EndpointAccess.PUBLIC_AND_PRIVATE if props.endpoint_public_access
            else eks.EndpointAccess.PRIVATE,
            cluster_logging=list(_ALL_CONTROL_PLANE_LOGS),
            secrets_encryption_key=kms.Key(scope, "SecretsKey", enable_key_rotation=True,
                                           description="EKS secrets envelope encryption"),
            bootstrap_cluster_creator_admin_permissions=False,
            # Applies the packaged HyperPod dependency manifests; kubectl matches the control plane.
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=props.kubectl_layer or _default_kubectl_layer(scope)),
        )
        acknowledge(self.cluster, "the EKS control-plane service role requires the AWS-managed "
                    "AmazonEKSClusterPolicy", managed_policy("AmazonEKSClusterPolicy"))
        _acknowledge_kubectl_provider(self.cluster)
        self.admin_principal_arns: list[str] = self._grant_admins(scope, props.admin_principals)
        """The principals given cluster-admin access entries (``admin_principals``, else the deploy role)."""
        self.core_addons: list[eks.CfnAddon] = [
            addon(scope, name, as_cluster(self.cluster), props.addon_versions) for name in CORE_ADDONS]
        self.dependencies = HyperPodDependencies(scope, "HyperPodDependencies", HyperPodDependenciesProps(
            cluster=as_cluster(self.cluster), region=cdk.Stack.of(scope).region, after=self.core_addons))

    def _grant_admins(self, scope: Construct, principals: Sequence[iam.IRole | iam.IUser]) -> list[str]:
        """Cluster-admin access entries for ``principals``, or for the deploying identity without any: named
        principals, never every principal of the account."""
        arns = [str(_principal_arn(p)) for p in principals] or [deploy_role_arn(scope)]
        policy = eks.AccessPolicy.from_access_policy_name(
            "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER)
        for index, arn in enumerate(arns):
            self.cluster.grant_access(f"Admin{index}", arn, [policy])
        return arns


def deploy_role_arn(scope: Construct) -> str:
    """The role ``cdk deploy`` assumes for ``scope``'s stack (the CDK bootstrap's deploy role): the deploying identity.
    Known for the stack's own default synthesizer; one given to the stack is bound to a copy Python cannot read."""
    synthesizer = cdk.Stack.of(scope).synthesizer
    if not is_a(synthesizer, cdk.DefaultStackSynthesizer) or synthesizer.bootstrap_qualifier is None:
        raise ValueError(f"{scope.node.path}: admin_principals = [] -- the deploying identity (the CDK bootstrap's "
                         f"deploy role) is not known for the stack's {type(synthesizer).__name__} given to it: name "
                         "the IAM roles or users that administer the cluster")
    return cdk.Fn.sub(synthesizer.deploy_role_arn)


def _principal_arn(principal: iam.IRole | iam.IUser) -> str | None:
    """A role's or a user's ARN (jsii interfaces support no isinstance)."""
    return getattr(principal, "role_arn", None) or getattr(principal, "user_arn", None)


def _acknowledge_kubectl_provider(cluster: eks.Cluster) -> None:
    """Findings on the kubectl provider aws-cdk-lib adds to apply manifests, found through its public API:
    the provider's ``role`` belongs to its handler function, which holds the ECR Public condition."""
    provider = cluster.kubectl_provider
    assert provider is not None and provider.role is not None  # kubectl_provider_options are always given
    handler = scope_of(provider.role)
    acknowledge(provider, "aws-cdk-lib's kubectl handler only writes its own logs and runs in the cluster's "
                "private subnets to reach a private EKS API",
                managed_policy("service-role/AWSLambdaBasicExecutionRole"),
                managed_policy("service-role/AWSLambdaVPCAccessExecutionRole"))
    ecr_public = [c for c in handler.node.children if is_a(c, cdk.CfnCondition)]
    acknowledge(provider, "aws-cdk-lib's kubectl handler pulls chart images read-only, as aws-cdk-lib designs it",
                managed_policy("AmazonEC2ContainerRegistryReadOnly"),
                *('IAM4[Policy::{"Fn::If":["' + logical_id(condition) + '",{"Fn::Join":["",["arn:",'
                  '{"Ref":"AWS::Partition"},":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},'
                  '{"Ref":"AWS::NoValue"}]}]' for condition in ecr_public))
    acknowledge(provider, "the provider framework may invoke only the kubectl handler and its versions",
                f"IAM5[Resource::<{logical_id(handler)}.Arn>:*]")
    acknowledge(provider, "runtimes of aws-cdk-lib's own deployment-time handlers are chosen by aws-cdk-lib "
                "and move with its upgrades", "L1")
    acknowledge_deploy_time_handlers(provider)


def _default_kubectl_layer(scope: Construct) -> lambda_.ILayerVersion:
    """kubectl 1.34 (for control planes 1.33..1.35), from the ``hyperpod`` extra; imported only when used."""
    try:
        from aws_cdk.lambda_layer_kubectl_v34 import KubectlV34Layer
    except ModuleNotFoundError as error:
        raise missing_extra(error, "hyperpod", "HyperPodEksCluster's default kubectl layer") from None
    return KubectlV34Layer(scope, "KubectlLayer")


def control_plane_problems(scope: Construct, kubernetes_version: str, admin_principals: Sequence[iam.IRole | iam.IUser],
                           kubectl_layer: lambda_.ILayerVersion | None = None) -> list[str]:
    """``field = value -- rule`` for each problem; the stack of ``scope`` needs a concrete region."""
    errors = []
    if unresolved(cdk.Stack.of(scope).region):
        errors.append("stack region -- a token: a HyperPod EKS cluster needs a stack with a concrete region "
                      "(HyperPod's health monitoring agent image is published per region)")
    if unresolved(kubernetes_version):
        errors.append("kubernetes_version -- a token: the kubectl layer is chosen by the version at synth")
    elif kubernetes_version not in SUPPORTED_KUBERNETES_VERSIONS:
        errors.append(f"kubernetes_version = {kubernetes_version!r} -- allowed: "
                      f"{', '.join(SUPPORTED_KUBERNETES_VERSIONS)}")
    elif kubectl_layer is None and kubernetes_version not in DEFAULT_KUBECTL_SERVES:
        errors.append(f"kubernetes_version = {kubernetes_version!r} -- {kubectl_layer_problem(kubernetes_version)}")
    for index, principal in enumerate(admin_principals):
        if _principal_arn(principal) is None:
            errors.append(f"admin_principals[{index}] = {principal!r} -- allowed: an iam.IRole or iam.IUser "
                          "(EKS access entries name roles and users)")
    return errors
