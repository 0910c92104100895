"""``HyperPodNodes``: the ``AWS::SageMaker::Cluster`` whose instance groups join an EKS cluster as nodes,
with the lifecycle scripts they run and the execution role they run with."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import (
    aws_ec2 as ec2,
    aws_eks_v2 as eks,
    aws_iam as iam,
    aws_s3 as s3,
    aws_s3_assets as s3_assets,
    aws_s3_deployment as s3deploy,
    aws_sagemaker as sagemaker,
)
from constructs import Construct, IDependable

from hyperwarm._internal.constraints import constraints_of, in_gigabytes
from hyperwarm._internal.interfaces import scope_of
from hyperwarm._internal.kinds import is_a
from hyperwarm._internal.nag import (
    acknowledge,
    acknowledge_checkov,
    acknowledge_deploy_time_handlers,
    arn_prefix,
    finding_text,
    logical_id,
    managed_policy,
)
from hyperwarm._internal.tokens import unresolved
from hyperwarm._internal.validation import raise_problems, repeated
from hyperwarm.cluster import rules as rules
from hyperwarm.cluster.hyperpod_dependencies import HEALTH_AGENT_ACCOUNTS, eks_registry_account
from hyperwarm.cluster.instance_group import InstanceGroup, InstanceGroupSpec, NodeTaint
from hyperwarm.serving.settings import DLC_ACCOUNTS

_HYPERPOD_VPC_ACTIONS = (
    "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions", "ec2:DescribeSecurityGroups",
)
"""What the HyperPod IAM prerequisites (EKS tab) add to the execution role beside
AmazonSageMakerClusterInstanceRolePolicy."""

_LIFECYCLE_DIR = Path(__file__).parent / "lifecycle"
_LIFECYCLE_PREFIX = "lifecycle"


def pull_registry_accounts(region: str, extra: Sequence[str] = (), *, for_nag: bool = False) -> list[str]:
    """The AWS accounts whose ECR repositories in ``region`` the nodes may pull from: this account, AWS's
    Deep Learning Containers (serving images), the region's EKS add-on registry (EKS add-ons, the
    inference operator and HyperPod's device plugins) and HyperPod's health agent registry, and ``extra``.

    In an environment-agnostic stack (a token region) the registries cannot be chosen: any account's
    repositories in the region, as before. ``for_nag``: as cdk-nag prints the own account.
    """
    own = "<AWS::AccountId>" if for_nag else cdk.Aws.ACCOUNT_ID
    if unresolved(region):
        return ["*"]
    agent = HEALTH_AGENT_ACCOUNTS.get(region)
    return [own, *sorted({*DLC_ACCOUNTS, eks_registry_account(region), *([agent] if agent else []), *extra})]


@dataclass(frozen=True)
class HyperPodNodesProps:
    """Properties of :class:`HyperPodNodes`."""

    eks_cluster: eks.ICluster
    """The EKS cluster the nodes join (its HyperPod dependencies must be applied: see ``after``)."""
    security_group: ec2.ISecurityGroup
    """The group of the nodes' cluster-VPC interfaces (all traffic within itself)."""
    subnet_ids: Sequence[str]
    """Private subnets of the nodes' cluster-VPC interfaces."""
    instance_groups: Sequence[InstanceGroupSpec]
    """HyperPod instance groups; at least one, unique names."""
    node_recovery: str = "Automatic"
    """HyperPod NodeRecovery, ``Automatic`` or ``None``. Default: Automatic."""
    after: Sequence[IDependable] = ()
    """What must exist before the cluster is created, e.g. HyperPod's in-cluster dependencies. Default: none."""
    image_registry_accounts: Sequence[str] = ()
    """Further AWS accounts whose ECR repositories (in the cluster's region) the nodes pull from. Default:
    none beyond :func:`pull_registry_accounts`' own (this account, AWS's Deep Learning Containers, the
    EKS add-on registry and HyperPod's agent registry)."""


class HyperPodNodes:
    """A HyperPod cluster orchestrated by EKS: its instance groups, lifecycle scripts bucket and node role.

    A part of :class:`hyperwarm.HyperPodEksCluster` (see there): it adds ``LifecycleScripts``,
    ``LifecycleScriptsUpload``, ``ExecutionRole`` and the ``AWS::SageMaker::Cluster`` as ``Resource``
    (so ``scope.node.default_child``) to ``scope``.
    """

    def __init__(self, scope: Construct, props: HyperPodNodesProps) -> None:
        raise_problems(scope.node.path, "HyperPodNodesProps", nodes_problems(props.instance_groups,
                                                                             props.node_recovery))
        self._scope = scope
        self.lifecycle_bucket, self.lifecycle_upload = self._lifecycle_scripts()
        self.execution_role = self._execution_role(props.eks_cluster, props.image_registry_accounts)
        self.instance_groups: dict[str, InstanceGroup] = {g.name: InstanceGroup.of(g) for g in props.instance_groups}
        self.resource = sagemaker.CfnCluster(
            scope, "Resource",
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(
                    cluster_arn=props.eks_cluster.cluster_arn)),
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                security_group_ids=[props.security_group.security_group_id], subnets=list(props.subnet_ids)),
            node_recovery=props.node_recovery,
            instance_groups=[self._instance_group(g) for g in props.instance_groups],
        )
        self.resource.node.add_dependency(*props.after, self.lifecycle_upload)
        self.cluster_arn: str = self.resource.attr_cluster_arn

    def _lifecycle_scripts(self) -> tuple[s3.Bucket, s3deploy.BucketDeployment]:
        bucket = s3.Bucket(
            self._scope, "LifecycleScripts",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            removal_policy=cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
        )
        no_access_logs = ("holds only the lifecycle scripts this stack uploads; they are versioned "
                          "and changed by deployments alone, which CloudTrail already records")
        acknowledge(bucket, no_access_logs, "S1")
        acknowledge_checkov(bucket, no_access_logs, "CKV_AWS_18")
        upload = s3deploy.BucketDeployment(
            self._scope, "LifecycleScriptsUpload",
            sources=[s3deploy.Source.asset(str(_LIFECYCLE_DIR))],
            destination_bucket=bucket,
            destination_key_prefix=_LIFECYCLE_PREFIX,
        )
        _acknowledge_bucket_deployment(upload, bucket)
        return bucket, upload

    def _execution_role(self, eks_cluster: eks.ICluster, registries: Sequence[str]) -> iam.Role:
        role = iam.Role(
            self._scope, "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="HyperPod node execution role",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSageMakerClusterInstanceRolePolicy"),
                iam.ManagedPolicy.from_aws_managed_policy_name("AmazonEKS_CNI_Policy"),
            ],
        )
        # The managed policy only covers buckets named sagemaker-*: grant the lifecycle prefix explicitly.
        role.add_to_policy(iam.PolicyStatement(
            sid="ReadLifecycleScripts", actions=["s3:GetObject"],
            resources=[self.lifecycle_bucket.arn_for_objects(f"{_LIFECYCLE_PREFIX}/*")]))
        role.add_to_policy(iam.PolicyStatement(
            sid="ListLifecycleScripts", actions=["s3:ListBucket"], resources=[self.lifecycle_bucket.bucket_arn],
            # The folder itself with or without its slash, and what is under it.
            conditions={"StringLike": {"s3:prefix": [_LIFECYCLE_PREFIX, f"{_LIFECYCLE_PREFIX}/",
                                                     f"{_LIFECYCLE_PREFIX}/*"]}}))
        stack = cdk.Stack.of(self._scope)
        self._pull_repositories = [
            stack.format_arn(service="ecr", account=account, resource="repository", resource_name="*")
            for account in pull_registry_accounts(stack.region, registries)]
        role.add_to_policy(iam.PolicyStatement(
            sid="PullServingImages",
            actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
            resources=self._pull_repositories))
        role.add_to_policy(iam.PolicyStatement(
            sid="EcrToken", actions=["ecr:GetAuthorizationToken"], resources=["*"]))
        role.add_to_policy(iam.PolicyStatement(sid="ClusterNetworking", actions=list(_HYPERPOD_VPC_ACTIONS),
                                               resources=["*"]))
        role.add_to_policy(iam.PolicyStatement(
            sid="PodIdentity", actions=["eks-auth:AssumeRoleForPodIdentity"], resources=[eks_cluster.cluster_arn]))
        self._acknowledge_execution_role(role, registries)
        return role

    def _acknowledge_execution_role(self, role: iam.Role, registries: Sequence[str]) -> None:
        acknowledge(role, "HyperPod requires these AWS-managed policies on the node role; AWS updates them "
                    "with the service", managed_policy("AmazonSageMakerClusterInstanceRolePolicy"),
                    managed_policy("AmazonEKS_CNI_Policy"))
        acknowledge(role, "nodes read every script under the lifecycle prefix of this stack's own bucket",
                    f"IAM5[Resource::<{logical_id(self.lifecycle_bucket)}.Arn>/{_LIFECYCLE_PREFIX}/*]")
        region = cdk.Stack.of(self._scope).region
        acknowledge(role, "pull-only ECR actions on the repositories of the registries the nodes' images come "
                    "from (this account, AWS's Deep Learning Containers, the EKS add-on and HyperPod agent "
                    "registries, and those the user names): an image's repository is chosen per model",
                    *(f"IAM5[Resource::{arn_prefix(self._scope)}:ecr:{region}:{account}:repository/*]"
                      for account in pull_registry_accounts(region, registries, for_nag=True)))
        acknowledge(role, "ecr:GetAuthorizationToken and the EC2 describe actions have no resource-level "
                    "permissions; HyperPod's prerequisites grant its network-interface permission actions on * "
                    "because the interfaces are created at run time", "IAM5[Resource::*]")
        acknowledge_checkov(role.node.find_child("DefaultPolicy"), "HyperPod's IAM prerequisites grant "
                            "ec2:Create/DeleteNetworkInterfacePermission on * because the network interfaces "
                            "are created at run time; only sagemaker.amazonaws.com assumes this role", "CKV_AWS_109")

    def _instance_group(self, group: InstanceGroupSpec) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        storage = None
        if group.ebs_volume is not None:
            storage = [sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(
                    volume_size_in_gb=int(in_gigabytes(group.ebs_volume))))]
        kubernetes = None
        if group.labels or group.taints:
            kubernetes = sagemaker.CfnCluster.ClusterKubernetesConfigProperty(
                labels=dict(group.labels) or None,
                taints=[sagemaker.CfnCluster.ClusterKubernetesTaintProperty(key=t.key, value=t.value or None,
                                                                           effect=t.effect)
                        for t in group.taints] or None,
            )
        return sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=group.name,
            instance_type=group.instance_type,
            instance_count=group.instance_count,
            execution_role=self.execution_role.role_arn,
            threads_per_core=group.threads_per_core,
            life_cycle_config=sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(
                # A folder URI, as AWS documents it (s3://bucket/prefix/): the prefix HyperPod lists
                # is then "lifecycle/", which the role's ListBucket condition (lifecycle/*) matches.
                source_s3_uri=self.lifecycle_bucket.s3_url_for_object(f"{_LIFECYCLE_PREFIX}/"),
                on_create="on_create.sh",
            ),
            on_start_deep_health_checks=list(group.deep_health_checks) or None,
            instance_storage_configs=storage,
            kubernetes_config=kubernetes,
        )


def _acknowledge_bucket_deployment(deployment: s3deploy.BucketDeployment, bucket: s3.IBucket) -> None:
    """Findings on aws-cdk-lib's bucket-deployment handler (a stack singleton, the owner of ``handler_role``).
    The assets bucket is the one the stack's synthesizer puts the asset in, whatever its bootstrap qualifier."""
    handler = scope_of(deployment.handler_role)
    assets_buckets = sorted({finding_text(deployment, a.s3_bucket_name) for a in deployment.node.find_all()
                             if is_a(a, s3_assets.Asset)})
    acknowledge(handler, "aws-cdk-lib's bucket-deployment handler copies the asset from the CDK "
                "assets bucket into the lifecycle bucket; it only writes its own logs",
                managed_policy("service-role/AWSLambdaBasicExecutionRole"))
    acknowledge(handler, "aws-cdk-lib grants its bucket-deployment handler these S3 action groups on "
                "the CDK assets bucket and the lifecycle bucket only",
                *(f"IAM5[Action::s3:{a}]" for a in ("GetObject*", "GetBucket*", "List*", "DeleteObject*", "Abort*")),
                f"IAM5[Resource::<{logical_id(bucket)}.Arn>/*]",
                *(f"IAM5[Resource::{arn_prefix(deployment)}:s3:::{name}/*]" for name in assets_buckets))
    acknowledge(handler, "runtime of aws-cdk-lib's own bucket-deployment handler is chosen by "
                "aws-cdk-lib and moves with its upgrades", "L1")
    acknowledge_deploy_time_handlers(handler)


def nodes_problems(instance_groups: Sequence[InstanceGroupSpec], node_recovery: str) -> list[str]:
    """``field = value -- rule`` for each problem of the groups and node recovery."""
    errors = [] if instance_groups else ["instance_groups = [] -- at least one instance group"]
    for index, group in enumerate(instance_groups):
        errors += [f"instance_groups[{index}].{p}" for p in _group_problems(group)]
    dupes = repeated(g.name for g in instance_groups if not unresolved(g.name))
    if dupes:
        errors.append(f"instance_groups names = {', '.join(dupes)} -- names must be unique")
    if node_recovery not in rules.NODE_RECOVERY:
        errors.append(f"node_recovery = {node_recovery!r} -- allowed: {', '.join(rules.NODE_RECOVERY)}")
    return errors


def _group_problems(group: InstanceGroupSpec) -> list[str]:
    """``field = value -- rule`` for each problem of one group; unresolved tokens are not judged."""
    def known(value: object) -> bool:
        return not unresolved(value)

    errors = []
    if known(group.name) and not re.match(rules.GROUP_NAME_PATTERN, group.name):
        errors.append(f"name = {group.name!r} -- allowed: {rules.GROUP_NAME_WORDS}")
    if not known(group.instance_type):
        errors.append("instance_type -- a token: hyperwarm reads the type's NVMe and capacity at synth")
    elif problem := rules.instance_type_problem(group.instance_type):
        errors.append(f"instance_type = {group.instance_type!r} -- {problem}")
    count, allowed = group.instance_count, rules.INSTANCE_COUNT
    if known(count) and not (isinstance(count, int) and count in allowed):
        errors.append(f"instance_count = {count!r} -- allowed: an integer {allowed.start}..{allowed.stop - 1}")
    errors += constraints_of(InstanceGroupSpec)["ebs_volume"].problems(group.ebs_volume)
    if group.threads_per_core not in rules.THREADS_PER_CORE:
        errors.append(f"threads_per_core = {group.threads_per_core!r} -- allowed: 1, 2")
    for check in group.deep_health_checks:
        if check not in rules.DEEP_HEALTH_CHECKS:
            errors.append(f"deep_health_checks = {check!r} -- allowed: {', '.join(rules.DEEP_HEALTH_CHECKS)}")
    for index, taint in enumerate(group.taints):
        errors += [f"taints[{index}].{p}" for p in _taint_problems(taint)]
    if problem := rules.nvme_problem(group.name, group.instance_type, group.holds_caches):
        errors.append(f"holds_caches = True -- {problem}")
    if problem := rules.taints_problem(group.name, bool(group.taints), bool(group.deep_health_checks)):
        errors.append(f"taints -- {problem}")
    return errors


def _taint_problems(taint: NodeTaint) -> list[str]:
    errors = []
    if taint.effect not in rules.TAINT_EFFECTS:
        errors.append(f"effect = {taint.effect!r} -- allowed: {', '.join(rules.TAINT_EFFECTS)}")
    if not unresolved(taint.key) and not 1 <= len(taint.key) <= 253:
        errors.append(f"key = {taint.key!r} -- allowed: 1..253 characters")
    if not unresolved(taint.value) and len(taint.value) > 63:
        errors.append(f"value = {taint.value!r} -- allowed: up to 63 characters")
    return errors
