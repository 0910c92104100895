"""What runs inside the EKS cluster before and after HyperPod nodes join, one unit per concern.

Deploys are reproducible: AWS-published pieces come as EKS add-ons (``AWS::EKS::Addon``) and
the HyperPod dependencies, which AWS ships only as a Helm chart in git, come as manifests
packaged with the stack (:mod:`hyperwarm.hyperpod_dependencies`). Nothing is fetched from a
branch, a chart repository or a script at deploy time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from . import hyperpod_dependencies
from .nag import acknowledge, logical_id, managed_policy, object_arn_finding

CORE_ADDONS = ("vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent")
"""EKS add-ons every HyperPod EKS cluster needs, created right after the control plane."""

OPERATOR_NAMESPACE = "hyperpod-inference-system"
OPERATOR_SERVICE_ACCOUNT = "hyperpod-inference-controller-manager"


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
              description: str, extra_principals: Sequence[iam.IPrincipal] = ()) -> iam.Role:
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
    return iam.Role(scope, id, assumed_by=principal, description=description)


class HyperPodDependencies(Construct):
    """HyperPod's in-cluster dependencies; must exist before ``AWS::SageMaker::Cluster``.

    Applied as manifests packaged with the stack: the ``aws-hyperpod`` namespace, the health
    monitoring agent (node resilience) and the NVIDIA device plugin (``nvidia.com/gpu``).
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, region: str,
                 after: Sequence[IConstruct] = ()) -> None:
        super().__init__(scope, id)
        self.objects = hyperpod_dependencies.objects(region)
        self.manifest = eks.KubernetesManifest(self, "Manifest", cluster=cluster, manifest=self.objects)
        for dependency in after:
            self.manifest.node.add_dependency(dependency)


@dataclass(frozen=True)
class InferenceOperatorRoles:
    """IAM roles the inference operator and its prerequisites run with."""

    execution: iam.Role
    s3_csi: iam.Role
    load_balancer: iam.Role
    keda: iam.Role


class InferenceOperator(Construct):
    """The HyperPod inference operator add-on with every prerequisite it checks for.

    Order: OIDC provider and roles -> cert-manager, metrics-server, Mountpoint for S3 and FSx CSI
    drivers -> ``amazon-sagemaker-hyperpod-inference`` (which needs the HyperPod cluster ARN, so
    it comes after ``AWS::SageMaker::Cluster``). ``node.default_child`` is the operator add-on.
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.Cluster, hyperpod_cluster_arn: str,
                 versions: Mapping[str, str], after: Sequence[IConstruct] = ()) -> None:
        super().__init__(scope, id)
        provider = eks.OidcProviderNative(self, "OidcProvider", url=cluster.cluster_open_id_connect_issuer_url)
        self.tls_bucket = s3.Bucket(
            self, "TlsCertificates", encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True, versioned=True,
        )
        acknowledge(self.tls_bucket, "holds only the operator's generated TLS certificates, written and "
                    "read by the operator role alone", "S1")
        self.roles = self._roles(provider)
        self.roles.execution.add_to_policy(iam.PolicyStatement(
            sid="ManageTlsCertificates",
            actions=["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject"],
            resources=[self.tls_bucket.arn_for_objects("*")]))
        acknowledge(self.roles.execution, "the operator writes one certificate object per endpoint into its "
                    "own TLS bucket", f"IAM5[Resource::<{logical_id(self.tls_bucket)}.Arn>/*]")

        prerequisites = [
            addon(self, "cert-manager", cluster, versions, after=after),
            addon(self, "metrics-server", cluster, versions, after=after),
            addon(self, "aws-mountpoint-s3-csi-driver", cluster, versions, role=self.roles.s3_csi, after=after),
            addon(self, "aws-fsx-csi-driver", cluster, versions, after=after),
        ]
        self.addon = addon(
            self, "amazon-sagemaker-hyperpod-inference", cluster, versions,
            configuration={
                "executionRoleArn": self.roles.execution.role_arn,
                "tlsCertificateS3Bucket": self.tls_bucket.bucket_name,
                "hyperpodClusterArn": hyperpod_cluster_arn,
                "alb": {"serviceAccount": {"create": True, "roleArn": self.roles.load_balancer.role_arn}},
                "keda": {"auth": {"aws": {"irsa": {"roleArn": self.roles.keda.role_arn}}}},
            },
            after=[*after, *prerequisites],
        )
        self.node.default_child = self.addon

    def grant_model_read(self, bucket: s3.IBucket, prefix: str) -> None:
        """Let the operator mount models under ``prefix`` of ``bucket`` (Mountpoint for S3, read-only)."""
        prefix = prefix.strip("/")
        for role in (self.roles.s3_csi, self.roles.execution):
            role.add_to_principal_policy(iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{prefix}/*")]))
            role.add_to_principal_policy(iam.PolicyStatement(
                actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}/", f"{prefix}/*"]}}))
            acknowledge(role, "reads every object of one model prefix: a model version is many files",
                        f"IAM5[Resource::{object_arn_finding(bucket, prefix + '/*')}]")

    def _roles(self, provider: eks.OidcProviderNative) -> InferenceOperatorRoles:
        execution = irsa_role(
            self, "ExecutionRole", provider, f"{OPERATOR_NAMESPACE}:{OPERATOR_SERVICE_ACCOUNT}",
            "HyperPod inference operator", extra_principals=[iam.ServicePrincipal("sagemaker.amazonaws.com")])
        execution.add_managed_policy(
            iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSageMakerHyperPodInferenceAccess"))
        acknowledge(execution, "the operator add-on documents this AWS-managed policy; AWS keeps it in step "
                    "with the operator's API use", managed_policy("AmazonSageMakerHyperPodInferenceAccess"))
        s3_csi = irsa_role(self, "S3CsiRole", provider, "kube-system:s3-csi-driver-sa",
                           "Mountpoint for S3 CSI driver: read-only access to granted model prefixes")
        load_balancer = irsa_role(self, "LoadBalancerRole", provider,
                                  f"{OPERATOR_NAMESPACE}:aws-load-balancer-controller",
                                  "Load balancer controller of the HyperPod inference operator")
        load_balancer.add_managed_policy(
            iam.ManagedPolicy.from_aws_managed_policy_name("ElasticLoadBalancingFullAccess"))
        acknowledge(load_balancer, "the operator's load balancer controller creates and deletes a load balancer "
                    "per inference endpoint, whose names are not known at synth",
                    managed_policy("ElasticLoadBalancingFullAccess"))
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
