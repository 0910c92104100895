"""``HyperPodEksCluster``: a SageMaker HyperPod cluster orchestrated by Amazon EKS.

One construct for the whole chain a HyperPod EKS cluster needs, created in the order it must
exist: VPC (private subnets, NAT, S3 gateway endpoint, an intra-cluster security group) ->
EKS control plane (API authentication, all control-plane logs, encrypted secrets) -> core
add-ons -> HyperPod dependencies -> lifecycle scripts and execution role ->
``AWS::SageMaker::Cluster`` -> the HyperPod inference operator and its prerequisites.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from .addons import (
    CORE_ADDONS,
    INFERENCE_OPERATOR_ADDON,
    HyperPodDependencies,
    InferenceOperator,
    addon,
    operator_version_problem,
)
from .catalog import InstanceSpec, instance_spec
from .instance_group import InstanceGroupSpec
from .nag import (acknowledge, acknowledge_checkov, acknowledge_deploy_time_handlers, arn_prefix, logical_id,
                  managed_policy, stack_singletons)
from .node_capacity import INSTANCE_GROUP_LABEL
from .validation import SUPPORTED_KUBERNETES_VERSIONS, repeated

NVME_PATH = "/opt/dlami/nvme"
"""Where HyperPod mounts the local NVMe instance store; the weights cache's default hostPath."""

HEALTH_TAINT_KEY = "sagemaker.amazonaws.com/node-health-status"
"""HyperPod taints nodes with this key (value Unschedulable, NoSchedule) during health checks."""

HYPERPOD_VPC_ACTIONS = (
    "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions", "ec2:DescribeSecurityGroups",
)
"""What the HyperPod IAM prerequisites (EKS tab) add to the execution role beside
AmazonSageMakerClusterInstanceRolePolicy; the deploy rehearsal checks the role for them."""

_LIFECYCLE_DIR = Path(__file__).parent / "lifecycle"
_LIFECYCLE_PREFIX = "lifecycle"


@dataclass(frozen=True)
class InstanceGroup:
    """A synthesized instance group, as other constructs see it (never the L1 internals)."""

    name: str
    instance_type: str
    instance_count: int
    spec: InstanceSpec
    holds_caches: bool

    @property
    def nvme_gb(self) -> int:
        return self.spec.nvme_gb

    @property
    def nvme_path(self) -> str:
        return NVME_PATH

    @property
    def node_labels(self) -> dict[str, str]:
        """Labels HyperPod puts on every node of the group: select the group with these."""
        return {INSTANCE_GROUP_LABEL: self.name, "node.kubernetes.io/instance-type": self.instance_type}


@dataclass(frozen=True)
class HyperPodEksClusterProps:
    """Properties of :class:`HyperPodEksCluster`."""

    instance_groups: Sequence[InstanceGroupSpec]
    """HyperPod instance groups (at least one)."""
    kubernetes_version: str = "1.33"
    """EKS Kubernetes version, 1.30..1.35. Default: 1.33."""
    vpc: ec2.IVpc | None = None
    """An existing VPC whose private subnets HyperPod uses. Default: a new VPC."""
    availability_zones: Sequence[str] = ()
    """AZs of the new VPC. Default: ``max_azs`` zones from ``Fn::GetAZs``."""
    vpc_cidr: str = "10.0.0.0/16"
    """CIDR of the new VPC. Default: 10.0.0.0/16."""
    max_azs: int = 2
    """Zones of the new VPC when ``availability_zones`` is empty. Default: 2."""
    nat_gateways: int = 1
    """NAT gateways of the new VPC. Default: 1 (use one per AZ in production)."""
    endpoint_public_access: bool = False
    """Expose the EKS API endpoint publicly. Default: private only.

    AWS documents no HyperPod requirement either way; its reference stack (aws-samples/
    awsome-distributed-training, ``eks-cluster-stack.yaml``) keeps EKS's default public endpoint.
    Private only works because EKS resolves the endpoint name to VPC addresses from any resolver
    (https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html) and HyperPod nodes
    reach the VPC through their cluster-VPC interface; if nodes fail to register, set this true."""
    admin_principal_arns: Sequence[str] = ()
    """IAM principals given cluster-admin access entries. Default: a new role assumable by the account."""
    node_recovery: str = "Automatic"
    """HyperPod NodeRecovery, ``Automatic`` or ``None``. Default: Automatic."""
    install_inference_operator: bool = True
    """Install the HyperPod inference operator and its prerequisites. Default: true."""
    addon_versions: Mapping[str, str] = field(default_factory=dict)
    """Pinned EKS add-on versions by add-on name. Default: EKS's default for the Kubernetes version.
    A pinned ``amazon-sagemaker-hyperpod-inference`` must be v3.3 or later (model caching)."""


class HyperPodEksCluster(Construct):
    """A HyperPod cluster on EKS whose NVMe instance groups can hold model caches.

    ``node.default_child`` is the ``AWS::SageMaker::Cluster`` (``CfnCluster``).
    """

    def __init__(self, scope: Construct, id: str, props: HyperPodEksClusterProps) -> None:
        super().__init__(scope, id)
        _validate(self, props)
        self.vpc = props.vpc or self._new_vpc(props)
        self.security_group = ec2.SecurityGroup(
            self, "ClusterSecurityGroup", vpc=self.vpc, allow_all_outbound=True,
            description="HyperPod nodes and EKS control plane: all traffic within the group",
        )
        self.security_group.add_ingress_rule(self.security_group, ec2.Port.all_traffic(), "intra-cluster traffic")
        # HyperPod prerequisites: all traffic to AND from the group itself; EFA health checks can fail with
        # 0.0.0.0/0-only egress. An L1 rule, since add_egress_rule is ignored beside allow_all_outbound.
        ec2.CfnSecurityGroupEgress(
            self, "ClusterSecurityGroupSelfEgress", group_id=self.security_group.security_group_id,
            destination_security_group_id=self.security_group.security_group_id, ip_protocol="-1",
            description="intra-cluster traffic (EFA)")
        private = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        self.private_subnet_ids = self.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnet_ids

        self.eks_cluster = eks.Cluster(
            self, "Eks",
            version=eks.KubernetesVersion.of(props.kubernetes_version),
            vpc=self.vpc,
            vpc_subnets=[private],
            security_group=self.security_group,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            endpoint_access=eks.EndpointAccess.PUBLIC_AND_PRIVATE if props.endpoint_public_access
            else eks.EndpointAccess.PRIVATE,
            cluster_logging=list(_ALL_CONTROL_PLANE_LOGS),
            secrets_encryption_key=kms.Key(self, "SecretsKey", enable_key_rotation=True,
                                           description="EKS secrets envelope encryption"),
            bootstrap_cluster_creator_admin_permissions=False,
            # Applies the packaged HyperPod dependency manifests; kubectl matches the control plane.
            kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=_kubectl_layer(self, props)),
        )
        acknowledge(self.eks_cluster, "the EKS control-plane service role requires the AWS-managed "
                    "AmazonEKSClusterPolicy", managed_policy("AmazonEKSClusterPolicy"))
        _acknowledge_kubectl_provider(self.eks_cluster)
        self._grant_admins(props)
        core = [addon(self, name, self.eks_cluster, props.addon_versions) for name in CORE_ADDONS]
        self.dependencies = HyperPodDependencies(self, "HyperPodDependencies", cluster=self.eks_cluster,
                                                 region=_region(self), after=core)

        self.lifecycle_bucket = self._lifecycle_bucket()
        self.execution_role = self._execution_role()
        self.instance_groups: dict[str, InstanceGroup] = {
            g.name: InstanceGroup(g.name, g.instance_type, g.instance_count, instance_spec(g.instance_type),
                                  g.holds_caches)
            for g in props.instance_groups
        }
        self._resource = sagemaker.CfnCluster(
            self, "Resource",
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(cluster_arn=self.eks_cluster.cluster_arn)
            ),
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                security_group_ids=[self.security_group.security_group_id], subnets=self.private_subnet_ids
            ),
            node_recovery=props.node_recovery,
            instance_groups=[self._instance_group(g) for g in props.instance_groups],
        )
        self._resource.node.add_dependency(self.dependencies, self._lifecycle_upload)
        self.node.default_child = self._resource
        self.cluster_arn = self._resource.attr_cluster_arn
        self.cluster_name = self._resource.ref

        self.inference_operator: InferenceOperator | None = None
        if props.install_inference_operator:
            self.inference_operator = InferenceOperator(
                self, "InferenceOperator", cluster=self.eks_cluster, hyperpod_cluster_arn=self.cluster_arn,
                versions=props.addon_versions, after=[self._resource],
            )

    # -- public API ----------------------------------------------------------------------

    def instance_group(self, name: str) -> InstanceGroup:
        """The instance group called ``name``; raises naming the groups that exist."""
        try:
            return self.instance_groups[name]
        except KeyError:
            raise ValueError(
                f"{self.node.path}: no instance group {name!r}; groups: {', '.join(self.instance_groups)}"
            ) from None

    def cache_group(self, name: str) -> InstanceGroup:
        """The instance group ``name``, which must have local NVMe to hold model caches."""
        group = self.instance_group(name)
        if not group.spec.has_nvme:
            raise ValueError(
                f"{self.node.path}: instance group {name!r} ({group.instance_type}) has no local NVMe "
                "and cannot hold model caches"
            )
        return group

    def grant_describe(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` describe this HyperPod cluster and its nodes."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:DescribeCluster", "sagemaker:ListClusterNodes"],
            resource_arns=[self.cluster_arn],
        )

    # -- building blocks -----------------------------------------------------------------

    def _new_vpc(self, props: HyperPodEksClusterProps) -> ec2.Vpc:
        zones = {"availability_zones": list(props.availability_zones)} if props.availability_zones \
            else {"max_azs": props.max_azs}
        vpc = ec2.Vpc(
            self, "Vpc",
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
        flow_logs = logs.LogGroup(self, "FlowLogs", retention=logs.RetentionDays.ONE_MONTH)
        acknowledge_checkov(flow_logs, "flow-log records hold addresses, ports and byte counts, no payloads; "
                            "CloudWatch Logs encrypts every log group at rest", "CKV_AWS_158")
        vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs))
        for provider in stack_singletons(self, "Custom::VpcRestrictDefaultSG"):
            acknowledge_deploy_time_handlers(provider)
        return vpc

    def _grant_admins(self, props: HyperPodEksClusterProps) -> None:
        admins = list(props.admin_principal_arns)
        if not admins:
            self.admin_role = iam.Role(
                self, "AdminRole", assumed_by=iam.AccountRootPrincipal(),
                description="Cluster administrators of the HyperPod EKS cluster",
            )
            admins = [self.admin_role.role_arn]
        policy = eks.AccessPolicy.from_access_policy_name(
            "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER)
        for index, arn in enumerate(admins):
            self.eks_cluster.grant_access(f"Admin{index}", arn, [policy])

    def _lifecycle_bucket(self) -> s3.Bucket:
        bucket = s3.Bucket(
            self, "LifecycleScripts",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        no_access_logs = ("holds only the lifecycle scripts this stack uploads; they are versioned "
                          "and changed by deployments alone, which CloudTrail already records")
        acknowledge(bucket, no_access_logs, "S1")
        acknowledge_checkov(bucket, no_access_logs, "CKV_AWS_18")
        self._lifecycle_upload = s3deploy.BucketDeployment(
            self, "LifecycleScriptsUpload",
            sources=[s3deploy.Source.asset(str(_LIFECYCLE_DIR))],
            destination_bucket=bucket,
            destination_key_prefix=_LIFECYCLE_PREFIX,
        )
        _acknowledge_bucket_deployment(cdk.Stack.of(self), bucket)
        return bucket

    def _execution_role(self) -> iam.Role:
        role = iam.Role(
            self, "ExecutionRole",
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
        role.add_to_policy(iam.PolicyStatement(
            sid="PullServingImages",
            actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
            resources=[cdk.Stack.of(self).format_arn(service="ecr", account="*", resource="repository",
                                                     resource_name="*")],
        ))
        role.add_to_policy(iam.PolicyStatement(
            sid="EcrToken", actions=["ecr:GetAuthorizationToken"], resources=["*"]))
        role.add_to_policy(iam.PolicyStatement(sid="ClusterNetworking", actions=list(HYPERPOD_VPC_ACTIONS),
                                               resources=["*"]))
        role.add_to_policy(iam.PolicyStatement(
            sid="PodIdentity", actions=["eks-auth:AssumeRoleForPodIdentity"],
            resources=[self.eks_cluster.cluster_arn]))
        acknowledge(role, "HyperPod requires these AWS-managed policies on the node role; AWS updates them "
                    "with the service", managed_policy("AmazonSageMakerClusterInstanceRolePolicy"),
                    managed_policy("AmazonEKS_CNI_Policy"))
        acknowledge(role, "nodes read every script under the lifecycle prefix of this stack's own bucket",
                    f"IAM5[Resource::<{logical_id(self.lifecycle_bucket)}.Arn>/{_LIFECYCLE_PREFIX}/*]")
        acknowledge(role, "pull-only ECR actions: serving images live in AWS-owned accounts' repositories "
                    "(Deep Learning Containers) as well as the user's own",
                    f"IAM5[Resource::{arn_prefix(self)}:ecr:{cdk.Stack.of(self).region}:*:repository/*]")
        acknowledge(role, "ecr:GetAuthorizationToken and the EC2 describe actions have no resource-level "
                    "permissions; HyperPod's prerequisites grant its network-interface permission actions on * "
                    "because the interfaces are created at run time", "IAM5[Resource::*]")
        acknowledge_checkov(role.node.find_child("DefaultPolicy"), "HyperPod's IAM prerequisites grant "
                            "ec2:Create/DeleteNetworkInterfacePermission on * because the network interfaces "
                            "are created at run time; only sagemaker.amazonaws.com assumes this role", "CKV_AWS_109")
        return role

    def _instance_group(self, group: InstanceGroupSpec) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        storage = None
        if group.ebs_volume_gb:
            storage = [sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(
                    volume_size_in_gb=group.ebs_volume_gb))]
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


_ALL_CONTROL_PLANE_LOGS = (
    eks.ClusterLoggingTypes.API, eks.ClusterLoggingTypes.AUDIT, eks.ClusterLoggingTypes.AUTHENTICATOR,
    eks.ClusterLoggingTypes.CONTROLLER_MANAGER, eks.ClusterLoggingTypes.SCHEDULER,
)


def _acknowledge_kubectl_provider(cluster: eks.Cluster) -> None:
    """Findings on the kubectl provider aws-cdk-lib adds to apply manifests."""
    acknowledge(cluster, "aws-cdk-lib's kubectl handler only writes its own logs and runs in the cluster's "
                "private subnets to reach a private EKS API",
                managed_policy("service-role/AWSLambdaBasicExecutionRole"),
                managed_policy("service-role/AWSLambdaVPCAccessExecutionRole"))
    acknowledge(cluster, "aws-cdk-lib's kubectl handler pulls chart images read-only, as aws-cdk-lib designs it",
                managed_policy("AmazonEC2ContainerRegistryReadOnly"),
                'IAM4[Policy::{"Fn::If":["' + _kubectl_logical_id(cluster, "Handler", "HasEcrPublic")
                + '",{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},'
                '":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},{"Ref":"AWS::NoValue"}]}]')
    acknowledge(cluster, "the provider framework may invoke only the kubectl handler and its versions",
                f"IAM5[Resource::<{_kubectl_logical_id(cluster, 'Handler')}.Arn>:*]")
    acknowledge(cluster, "runtimes of aws-cdk-lib's own deployment-time handlers are chosen by aws-cdk-lib "
                "and move with its upgrades", "L1")
    acknowledge_deploy_time_handlers(cluster.node.find_child("KubectlProvider"))


def _kubectl_logical_id(cluster: eks.Cluster, *path: str) -> str:
    node = cluster.node.find_child("KubectlProvider")
    for child in path:
        node = node.node.find_child(child)
    return logical_id(node)


def _acknowledge_bucket_deployment(stack: cdk.Stack, bucket: s3.IBucket) -> None:
    """Findings on aws-cdk-lib's singleton bucket-deployment handler (a child of the stack)."""
    for handler in stack.node.children:
        if handler.node.id.startswith("Custom::CDKBucketDeployment"):
            acknowledge(handler, "aws-cdk-lib's bucket-deployment handler copies the asset from the CDK "
                        "assets bucket into the lifecycle bucket; it only writes its own logs",
                        managed_policy("service-role/AWSLambdaBasicExecutionRole"))
            acknowledge(handler, "aws-cdk-lib grants its bucket-deployment handler these S3 action groups on "
                        "the CDK assets bucket and the lifecycle bucket only",
                        *(f"IAM5[Action::s3:{a}]" for a in ("GetObject*", "GetBucket*", "List*",
                                                             "DeleteObject*", "Abort*")),
                        f"IAM5[Resource::<{logical_id(bucket)}.Arn>/*]",
                        f"IAM5[Resource::{arn_prefix(stack)}:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-"
                        f"{stack.region}/*]")
            acknowledge(handler, "runtime of aws-cdk-lib's own bucket-deployment handler is chosen by "
                        "aws-cdk-lib and moves with its upgrades", "L1")
            acknowledge_deploy_time_handlers(handler)


def _region(scope: Construct) -> str:
    region = cdk.Stack.of(scope).region
    if cdk.Token.is_unresolved(region):
        raise ValueError(f"{scope.node.path}: HyperPodEksCluster needs a stack with a concrete region "
                         "(HyperPod's health monitoring agent image is published per region)")
    return region


def _kubectl_layer(scope: Construct, props: HyperPodEksClusterProps):
    """A kubectl within one minor version of the control plane, as kubectl's skew policy requires."""
    minor = int(props.kubernetes_version.split(".")[1])
    if minor <= 31:
        from aws_cdk.lambda_layer_kubectl_v31 import KubectlV31Layer
        return KubectlV31Layer(scope, "KubectlLayer")
    if minor <= 33:
        from aws_cdk.lambda_layer_kubectl_v33 import KubectlV33Layer
        return KubectlV33Layer(scope, "KubectlLayer")
    from aws_cdk.lambda_layer_kubectl_v34 import KubectlV34Layer
    return KubectlV34Layer(scope, "KubectlLayer")


def _validate(scope: Construct, props: HyperPodEksClusterProps) -> None:
    """Construct-level rules (each group is already a validated InstanceGroupConfig)."""
    path = scope.node.path
    if not props.instance_groups:
        raise ValueError(f"{path}: instance_groups needs at least one instance group")
    dupes = repeated(g.name for g in props.instance_groups)
    if dupes:
        raise ValueError(f"{path}: instance_groups names must be unique; repeated: {', '.join(dupes)}")
    if not cdk.Token.is_unresolved(props.kubernetes_version):
        if props.kubernetes_version not in SUPPORTED_KUBERNETES_VERSIONS:
            raise ValueError(f"{path}: kubernetes_version {props.kubernetes_version!r} is not supported; "
                             f"allowed: {', '.join(SUPPORTED_KUBERNETES_VERSIONS)}")
    problem = operator_version_problem(props.addon_versions.get(INFERENCE_OPERATOR_ADDON))
    if props.install_inference_operator and problem:
        raise ValueError(f"{path}: {problem}")
    if props.node_recovery not in ("Automatic", "None"):
        raise ValueError(f"{path}: node_recovery {props.node_recovery!r}; allowed: Automatic, None")
