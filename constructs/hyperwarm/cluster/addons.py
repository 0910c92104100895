"""What runs inside the EKS cluster before and after HyperPod nodes join, one unit per concern.

Deploys are reproducible: AWS-published pieces come as EKS add-ons (``AWS::EKS::Addon``) and
the HyperPod dependencies, which AWS ships only as a Helm chart in git, come as manifests
packaged with the stack (:mod:`hyperwarm.cluster.hyperpod_dependencies`). Nothing is fetched from a
branch, a chart repository or a script at deploy time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks, aws_iam as iam, aws_s3 as s3
from constructs import Construct, DependencyGroup, IConstruct, IDependable, Node

from hyperwarm._internal.interfaces import as_cluster
from hyperwarm._internal.kinds import is_a
from hyperwarm._internal.nag import (
    acknowledge,
    acknowledge_checkov,
    acknowledge_deploy_time_handlers,
    arn_prefix,
    logical_id,
    managed_policy,
    object_arn_finding,
    stack_singletons,
)
from hyperwarm._internal.principals import sagemaker_principal
from hyperwarm.cluster import hyperpod_dependencies
from hyperwarm.cluster.rules import INFERENCE_OPERATOR_ADDON, addon_build_problem, operator_pin_unverified
from hyperwarm.serving.buckets import grant_bucket_key

CORE_ADDONS = ("vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent")
"""EKS add-ons every HyperPod EKS cluster needs, created right after the control plane."""

LOAD_BALANCER_CONTROLLER_POLICY = Path(__file__).parent / "policies" / "aws-load-balancer-controller-v2.13.2.json"
"""The controller's published ``iam_policy.json`` for the version the operator installs (see policies/README.md)."""

OPERATOR_NAMESPACE = "hyperpod-inference-system"
OPERATOR_SERVICE_ACCOUNT = "hyperpod-inference-controller-manager"

OPERATOR_ROLE_PREFIX = "SageMakerHyperPodInference"
"""The AWS-managed AmazonSageMakerHyperPodInferenceAccess lets its holder pass only roles named
``SageMakerHyperPodInference*`` (``iam:PassRole`` on ``arn:aws:iam::*:role/SageMakerHyperPodInference*``, with
``iam:PassedToService`` sagemaker.amazonaws.com), and the operator passes its own execution role to SageMaker.
AWS's setup guide and reference stack name the role ``SageMakerHyperPodInference-<suffix>``
(aws/sagemaker-hyperpod-cluster-setup, eks/cloudformation/inference-addon-iam-roles-template.yaml)."""


def addon(scope: Construct, name: str, cluster: eks.ICluster, versions: Mapping[str, str], *,
          role: iam.IRole | None = None, configuration: Mapping[str, object] | None = None,
          after: Sequence[IConstruct] = ()) -> eks.CfnAddon:
    """One EKS add-on; ``role`` is bound to its service account through IRSA."""
    resource = eks.CfnAddon(
        scope, "".join(p.capitalize() for p in name.split("-")),
        addon_name=name,
        cluster_name=cluster.cluster_name,
        addon_version=versions.get(name),
        resolve_conflicts="OVERWRITE",
        service_account_role_arn=role.role_arn if role else None,
        configuration_values=cdk.Stack.of(scope).to_json_string(configuration) if configuration else None,
    )
    for dependency in after:
        resource.node.add_dependency(dependency)
    return resource


def irsa_role(scope: Construct, id: str, provider: eks.OidcProviderNative, service_account: str,
              description: str, extra_principals: Sequence[iam.IPrincipal] = (),
              role_name: str | None = None) -> iam.Role:
    """A role only ``namespace:name`` may assume with its projected token (IRSA)."""
    issuer = provider.open_id_connect_provider_issuer
    conditions = cdk.CfnJson(scope, f"{id}Conditions", value={
        f"{issuer}:sub": f"system:serviceaccount:{service_account}",
        f"{issuer}:aud": "sts.amazonaws.com",
    })
    principal: iam.IPrincipal = iam.WebIdentityPrincipal(
        provider.open_id_connect_provider_arn, {"StringEquals": conditions})
    if extra_principals:
        principal = iam.CompositePrincipal(principal, *extra_principals)
    return iam.Role(scope, id, assumed_by=principal, description=description, role_name=role_name)


def _stack_unique_name(prefix: str) -> str:
    """``<prefix>-<8 hex>``: the first part of the stack's id, as AWS's reference stacks name roles. Unique
    per stack (names are global to the account, the same stack name may exist in two regions) and stable
    across updates of the stack."""
    stack_uuid = cdk.Fn.select(2, cdk.Fn.split("/", cdk.Aws.STACK_ID))
    return cdk.Fn.join("-", [prefix, cdk.Fn.select(0, cdk.Fn.split("-", stack_uuid))])


def _major(version: str | None) -> int:
    """The major number of an add-on build (``v2.0.0-eksbuild.1`` -> 2); 0 for none or a token."""
    match = re.match(r"^v(\d+)\.", version) if isinstance(version, str) else None
    return int(match[1]) if match else 0


def load_balancer_controller_policy(partition: str) -> list[iam.PolicyStatement]:
    """The vendored controller policy's statements, with ARNs in ``partition``."""
    text = LOAD_BALANCER_CONTROLLER_POLICY.read_text().replace('"arn:aws:', f'"arn:{partition}:')
    return [iam.PolicyStatement.from_json(statement) for statement in json.loads(text)["Statement"]]


def _wildcard_findings(scope: IConstruct, statements: Sequence[iam.PolicyStatement]) -> list[str]:
    """cdk-nag's IAM5 finding ids for the wildcard resources of ``statements`` in ``scope``'s stack."""
    resources = sorted({r for s in statements for r in s.resources if "*" in r})
    return [f"IAM5[Resource::{re.sub(r'^arn:[^:]+', arn_prefix(scope), r)}]" for r in resources]


@dataclass(frozen=True)
class HyperPodDependenciesProps:
    """Properties of :class:`HyperPodDependencies`."""

    cluster: eks.ICluster
    """The EKS cluster they are applied to (with a kubectl provider)."""
    region: str
    """The cluster's region: the registries of the images they run."""
    after: Sequence[IConstruct] = ()
    """What must exist first, e.g. the core add-ons. Default: nothing."""


class HyperPodDependencies(Construct):
    """HyperPod's in-cluster dependencies; must exist before ``AWS::SageMaker::Cluster``.

    Applied as manifests packaged with the stack: what the HyperPod Helm chart installs by default
    for an inference cluster (see :mod:`hyperwarm.cluster.hyperpod_dependencies`).
    """

    def __init__(self, scope: Construct, id: str, props: HyperPodDependenciesProps) -> None:
        super().__init__(scope, id)
        self.objects = hyperpod_dependencies.objects(props.region)
        self.manifest = eks.KubernetesManifest(self, "Manifest", cluster=props.cluster, manifest=self.objects)
        for dependency in props.after:
            self.manifest.node.add_dependency(dependency)


class IInferenceOperator(Protocol):
    """What other stacks use of an installed HyperPod inference operator."""

    @property
    def node(self) -> Node: ...

    @property
    def namespace(self) -> str:
        """The operator's own namespace."""
        ...

    @property
    def addon(self) -> IDependable:
        """Depend on this for the operator's custom resource definitions to exist."""
        ...

    @property
    def model_readers(self) -> Sequence[iam.IGrantable]:
        """What reads the models the operator mounts (the Mountpoint for S3 driver, the operator):
        grant each with :func:`grant_mounted_model_read`."""
        ...

    @property
    def addon_version(self) -> str | None:
        """The pinned add-on build, or None (EKS's default build, or not known): what
        :func:`~hyperwarm.cluster.rules.operator_pin_problem` judges objects applied to the operator against."""
        ...


@dataclass(frozen=True)
class InferenceOperatorRoles:
    """IAM roles the inference operator and its prerequisites run with."""

    execution: iam.Role
    s3_csi: iam.Role
    load_balancer: iam.Role
    keda: iam.Role


@dataclass(frozen=True)
class InferenceOperatorProps:
    """Properties of :class:`InferenceOperator`."""

    cluster: eks.Cluster
    """The EKS cluster the operator and its prerequisites are installed on."""
    hyperpod_cluster_arn: str
    """The ``AWS::SageMaker::Cluster`` the operator deploys models to."""
    addon_versions: Mapping[str, str] = field(default_factory=dict)
    """Pinned EKS add-on builds by add-on name (the operator's and its prerequisites'). Default: EKS's default
    build for the Kubernetes version."""
    after: Sequence[IConstruct] = ()
    """What must exist first, e.g. the ``AWS::SageMaker::Cluster``. Default: nothing."""


class InferenceOperator(Construct):
    """The HyperPod inference operator add-on with every prerequisite it checks for.

    Order: OIDC provider and roles -> cert-manager, metrics-server, Mountpoint for S3 and FSx CSI
    drivers -> ``amazon-sagemaker-hyperpod-inference`` (which needs the HyperPod cluster ARN, so
    it comes after ``AWS::SageMaker::Cluster``). ``node.default_child`` is the operator add-on.
    """

    def __init__(self, scope: Construct, id: str, props: InferenceOperatorProps) -> None:
        super().__init__(scope, id)
        cluster, versions, after = props.cluster, props.addon_versions, props.after
        eks_cluster = as_cluster(cluster)
        self.namespace = OPERATOR_NAMESPACE
        self.addon_version: str | None = versions.get(INFERENCE_OPERATOR_ADDON)
        problem = addon_build_problem(self.addon_version)
        if problem:
            raise ValueError(f"{self.node.path}: addon_versions[{INFERENCE_OPERATOR_ADDON!r}] = "
                             f"{self.addon_version!r} -- {problem}")
        unverified = operator_pin_unverified(self.addon_version)
        if unverified:
            cdk.Annotations.of(self).add_warning_v2("hyperwarm:operator-build", unverified)
        provider = eks.OidcProviderNative(self, "OidcProvider", url=cluster.cluster_open_id_connect_issuer_url)
        self.tls_bucket = s3.Bucket(
            self, "TlsCertificates", encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True, versioned=True,
        )
        no_access_logs = ("holds only the operator's generated TLS certificates, written and read by the "
                          "operator role alone")
        acknowledge(self.tls_bucket, no_access_logs, "S1")
        acknowledge_checkov(self.tls_bucket, no_access_logs, "CKV_AWS_18")
        self.roles = self._roles(provider)
        self.load_balancer_policy = self._load_balancer_policy(self.roles.load_balancer)
        for provider_singleton in stack_singletons(self, "AWSCDKCfnUtilsProvider"):  # behind the roles' CfnJson
            acknowledge_deploy_time_handlers(provider_singleton)
        self.roles.execution.add_to_policy(iam.PolicyStatement(
            sid="ManageTlsCertificates",
            actions=["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject"],
            resources=[self.tls_bucket.arn_for_objects("*")]))
        acknowledge(self.roles.execution, "the operator writes one certificate object per endpoint into its "
                    "own TLS bucket", f"IAM5[Resource::<{logical_id(self.tls_bucket)}.Arn>/*]")

        prerequisites = [
            addon(self, "cert-manager", eks_cluster, versions, after=after),
            addon(self, "metrics-server", eks_cluster, versions, after=after),
            addon(self, "aws-mountpoint-s3-csi-driver", eks_cluster, versions, role=self.roles.s3_csi, after=after),
            # No IAM role: the operator requires the FSx CSIDriver; a model read from FSx mounts an existing file
            # system, and the driver needs AWS permissions only to provision new file systems dynamically.
            addon(self, "aws-fsx-csi-driver", eks_cluster, versions, after=after),
        ]
        configuration: dict[str, object] = {
            "executionRoleArn": self.roles.execution.role_arn,
            "tlsCertificateS3Bucket": self.tls_bucket.bucket_name,
            "hyperpodClusterArn": props.hyperpod_cluster_arn,
            "alb": {"serviceAccount": {"create": True, "roleArn": self.roles.load_balancer.role_arn}},
            "keda": {"auth": {"aws": {"irsa": {"roleArn": self.roles.keda.role_arn}}}},
        }
        if _major(self.addon_version) >= 2:
            # Builds v2.0.0 and later carry the inference gateway beside the operator, each with its own switch;
            # AWS's examples for them turn the operator on explicitly (the Inference Gateway blog post and
            # https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-inference-gateway.html).
            configuration["inferenceOperator"] = {"enabled": True}
        self.addon = addon(
            self, INFERENCE_OPERATOR_ADDON, eks_cluster, versions, configuration=configuration,
            after=[*after, *prerequisites, self.load_balancer_policy],
        )
        self.node.default_child = self.addon

    @staticmethod
    def from_operator_attributes(scope: Construct, id: str, *, execution_role: iam.IRole, s3_csi_role: iam.IRole,
                                 namespace: str = OPERATOR_NAMESPACE,
                                 addon_version: str | None = None) -> IInferenceOperator:
        """An operator installed elsewhere (another app or stack), from its execution role and the
        Mountpoint for S3 CSI driver's role; nothing waits for it (it is installed already).
        Both roles are its ``model_readers`` (a grant adds nothing to a role imported with ``mutable=False``).
        ``addon_version`` is the add-on build it was installed with (``aws eks describe-addon``); model caches
        need it. Default: unknown."""
        problem = addon_build_problem(addon_version)
        if problem:
            raise ValueError(f"{scope.node.path}/{id}: addon_version = {addon_version!r} -- {problem}")
        return _ImportedInferenceOperator(scope, id, roles=(execution_role, s3_csi_role), namespace=namespace,
                                          addon_version=addon_version)

    @property
    def model_readers(self) -> Sequence[iam.IGrantable]:
        """The Mountpoint for S3 driver's role and the operator's execution role."""
        return (self.roles.s3_csi, self.roles.execution)

    def _roles(self, provider: eks.OidcProviderNative) -> InferenceOperatorRoles:
        execution = irsa_role(
            self, "ExecutionRole", provider, f"{OPERATOR_NAMESPACE}:{OPERATOR_SERVICE_ACCOUNT}",
            "HyperPod inference operator", extra_principals=[sagemaker_principal(self)],
            role_name=_stack_unique_name(OPERATOR_ROLE_PREFIX))
        execution.add_managed_policy(
            iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSageMakerHyperPodInferenceAccess"))
        acknowledge(execution, "the operator add-on documents this AWS-managed policy; AWS keeps it in step "
                    "with the operator's API use", managed_policy("AmazonSageMakerHyperPodInferenceAccess"))
        s3_csi = irsa_role(self, "S3CsiRole", provider, "kube-system:s3-csi-driver-sa",
                           "Mountpoint for S3 CSI driver: read-only access to granted model prefixes")
        load_balancer = irsa_role(self, "LoadBalancerRole", provider,
                                  f"{OPERATOR_NAMESPACE}:aws-load-balancer-controller",
                                  "Load balancer controller of the HyperPod inference operator")
        keda = irsa_role(self, "KedaRole", provider, f"{OPERATOR_NAMESPACE}:keda-operator",
                         "KEDA autoscaler of the HyperPod inference operator: read metrics")
        keda.add_to_policy(iam.PolicyStatement(
            sid="ReadScalingMetrics",
            actions=["cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics", "cloudwatch:ListMetrics",
                     "aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata"],
            resources=["*"],
        ))
        acknowledge(keda, "CloudWatch and Prometheus metric reads have no resource-level permissions",
                    "IAM5[Resource::*]")
        return InferenceOperatorRoles(execution, s3_csi, load_balancer, keda)

    def _load_balancer_policy(self, role: iam.Role) -> iam.Policy:
        statements = load_balancer_controller_policy(cdk.Stack.of(self).partition)
        policy = iam.Policy(self, "LoadBalancerControllerPolicy", statements=statements)
        role.attach_inline_policy(policy)
        published = ("the AWS Load Balancer Controller's published iam_policy.json, unchanged: it creates load "
                     "balancers, target groups and security groups per inference endpoint, whose names are not "
                     "known at synth, and its describe actions have no resource scope")
        acknowledge(policy, published, *_wildcard_findings(self, statements))
        acknowledge_checkov(policy, published, "CKV_AWS_111")
        return policy


class _ImportedInferenceOperator(Construct):
    """An inference operator installed elsewhere: see :meth:`InferenceOperator.from_operator_attributes`."""

    def __init__(self, scope: Construct, id: str, *, roles: Sequence[iam.IRole], namespace: str,
                 addon_version: str | None) -> None:
        super().__init__(scope, id)
        self.namespace = namespace
        self.addon_version = addon_version
        self.addon: IDependable = DependencyGroup()
        self.model_readers: tuple[iam.IGrantable, ...] = tuple(roles)


def grant_mounted_model_read(grantee: iam.IGrantable, bucket: s3.IBucket, prefix: str) -> iam.Grant:
    """Let ``grantee`` (one of an operator's ``model_readers``) read every object under ``prefix`` of
    ``bucket`` (a model version is many files) and list that prefix: what mounting it read-only needs."""
    prefix = prefix.strip("/")
    grant = iam.Grant.add_to_principal(grantee=grantee, actions=["s3:GetObject"],
                                       resource_arns=[bucket.arn_for_objects(f"{prefix}/*")])
    grant = grant.combine(iam.Grant.add_to_principal(
        grantee=grantee, actions=["s3:ListBucket"], resource_arns=[bucket.bucket_arn],
        conditions={"StringLike": {"s3:prefix": [f"{prefix}/", f"{prefix}/*"]}}))
    if is_a(grantee.grant_principal, Construct):
        acknowledge(grantee.grant_principal, "reads every object of one model prefix: a model version is many files",
                    f"IAM5[Resource::{object_arn_finding(bucket, prefix + '/*')}]")
    return grant_bucket_key(grantee, bucket, grant)
