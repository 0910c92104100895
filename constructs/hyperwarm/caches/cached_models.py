"""Models cached on a HyperPod cluster's NVMe, applied to its EKS cluster: :class:`CachedModels`.

One construct for every cached model of a cluster, because models share objects: the namespace, one image
cache per image and group, one pre-pull DaemonSet per group, and each group's NVMe. It renders the objects
through cdk8s (:class:`~hyperwarm.caches.chart.CachesChart`, the operator's kinds from its CRDs' generated
types) into one ``KubernetesManifest`` created after the inference operator add-on (which installs the CRDs),
lets the operator's model readers read each model's S3 version prefix, and refuses at synth what the cluster
cannot hold: a group without NVMe or GPUs enough, caches beyond a node's NVMe, an operator build too old for
the fields the objects use.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks, aws_iam as iam, aws_s3 as s3
from constructs import Construct

from hyperwarm._internal.constraints import PropsError
from hyperwarm.caches.chart import CachesChart, CachesChartProps
from hyperwarm.caches.fsx import admit_nodes, vpc_problems
from hyperwarm.caches.handle import CachedModelHandle
from hyperwarm.caches.hub import HubTokenSync, HubTokenSyncProps, fingerprint, hub_egress_problems, tokens_of
from hyperwarm.caches.jumpstart import gated_download_role, grant_jumpstart_read, group_types
from hyperwarm.caches.node_cache import SERVICE_ACCOUNT
from hyperwarm.caches.placement import placement_problems
from hyperwarm.caches.props import CachedModelsProps
from hyperwarm.caches.sources import JumpStartModelSource, ModelSource
from hyperwarm.cluster.addons import grant_mounted_model_read
from hyperwarm.cluster.interfaces import IHyperPodCluster
from hyperwarm.cluster.rules import operator_pin_problem

CLUSTER_NAME_PLACEHOLDER = "${HYPERWARM_EKS_CLUSTER_NAME}"
"""What an exporter trigger's ``ClusterName`` reads in manifests written without a cluster (to be filled in)."""


class OperatorBuildError(ValueError):
    """The inference operator add-on build cannot serve the objects: ``problem`` says why and what to pin."""

    def __init__(self, where: str, addon_version: str | None, problem: str) -> None:
        super().__init__(f"{where}: the inference operator add-on build {addon_version!r} -- {problem}")
        self.addon_version = addon_version
        self.problem = problem


class CachedModels(Construct):
    """Weights and image caches, pre-warm, pre-pull and serving of models on a HyperPod cluster.

    ``chart`` is the cdk8s chart of the objects and ``objects`` its JSON; ``manifest`` applies them.

    The models' namespace enforces Pod Security admission at the highest level its pods meet
    (:mod:`hyperwarm.caches.pod_security`): ``privileged`` where a model reads weights cached on the node (a
    hostPath, which the Baseline level forbids: the default ``weights_cache="operator"`` and ``"node"`` with its
    fillers), else ``baseline`` (the operator writes its pods' security contexts, so Restricted is never known of
    them); it warns and audits at ``restricted`` either way
    (https://kubernetes.io/docs/concepts/security/pod-security-standards/).
    """

    def __init__(self, scope: Construct, id: str, props: CachedModelsProps) -> None:
        super().__init__(scope, id)
        cluster = props.cluster
        operator = cluster.inference_operator
        if operator is None:
            raise ValueError(f"{self.node.path}: model caches need the HyperPod inference operator; "
                             "the cluster was built with install_inference_operator false")
        # Every group of the cluster: a model naming one it lacks, or one that holds no caches, is a problem there.
        problems = placement_problems(props.models, list(cluster.instance_groups.values()),
                                      props.nvme_headroom_percent, refreshed=props.refreshed)
        problems += hub_egress_problems(props.models, cluster)
        problems += vpc_problems(props.models, cluster.vpc.vpc_id)
        if problems:
            raise PropsError(f"{self.node.path}: CachedModelsProps", problems)
        groups = [cluster.instance_groups[name] for name in sorted({g for m in props.models for g in m.instance_groups})]
        import cdk8s  # here: hyperwarm.caches.chart, imported above, names the extra when cdk8s is missing

        self.jumpstart_gated_role = self._jumpstart_gated_role(props)
        """The role gated JumpStart models download with, or None without one."""

        self.chart = CachesChart(cdk8s.App(), f"{cdk.Names.unique_id(self)}-caches", CachesChartProps(
            props.models, region=cdk.Stack.of(self).region, cluster_name=cluster.eks_cluster.cluster_name,
            namespace=props.namespace, labels=props.labels,
            group_taints={g.name: tuple(g.taints) for g in groups}, filler_image=props.filler_image,
            nvme_headroom_percent=props.nvme_headroom_percent, instance_types=group_types(cluster.instance_groups),
            group_nodes={name: g.instance_count for name, g in cluster.instance_groups.items()},
            jumpstart_gated_role_arn=self.jumpstart_gated_role.role_arn if self.jumpstart_gated_role else None))
        self.objects: list[dict[str, Any]] = self.chart.to_json()
        # The operator must know every field the objects use: an older one drops them without a word.
        problem = operator_pin_problem(operator.addon_version, self.objects)
        if problem:
            raise OperatorBuildError(self.node.path, operator.addon_version, problem)
        self.manifest = eks.KubernetesManifest(
            self, "Manifest", cluster=cluster.eks_cluster, manifest=self.objects,
            overwrite=True,  # adopt objects a GitOps user already applied from written manifests
        )
        # The add-on installs the operator's CRDs: a dependency CloudFormation honours (across stacks too).
        self.manifest.node.add_dependency(operator.addon)
        self.hub_tokens: HubTokenSync | None = None
        """Copies Hub tokens from Secrets Manager into the models' token Secrets; None without a Hub token."""
        tokens = tokens_of(props.models)
        if tokens:
            self.hub_tokens = HubTokenSync(self, "HubTokens", HubTokenSyncProps(
                cluster, props.namespace, tokens, after=[self.manifest], fingerprint=fingerprint(self.objects)))
        self.models: Mapping[str, CachedModelHandle] = _handles(props)
        """A handle on each model, by name, in the order of ``props.models``: what refresh targets, dashboards and
        alarms take (:meth:`model`)."""
        self.filler_role: iam.Role | None = None
        """The node-cache fillers' role (EKS Pod Identity), or None without a ``weights_cache="node"`` model."""
        if any(m.weights_cache == "node" for m in props.models):
            self.filler_role = self._filler_role(cluster, props.namespace)
        self._grant_reads(props, operator.model_readers)
        self.file_system_rules = admit_nodes(self, cluster, props.models)
        """Ingress on each FSx file system's security group from the nodes, on Lustre's ports."""

    def _jumpstart_gated_role(self, props: CachedModelsProps) -> iam.Role | None:
        gated = [m.source for m in props.models if isinstance(m.source, JumpStartModelSource) and m.source.gated]
        if not gated:
            return None
        issuer_url = getattr(props.cluster.eks_cluster, "cluster_open_id_connect_issuer_url", None)
        if issuer_url is None:
            raise ValueError(f"{self.node.path}: gated JumpStart models ({', '.join(s.model_id for s in gated)}) "
                             "download with a role their pods assume through the EKS cluster's OIDC provider, "
                             "and this imported cluster does not give its issuer URL; use a cluster created "
                             "by hyperwarm")
        return gated_download_role(self, "JumpStartGatedModelRole", issuer_url=issuer_url,
                                   namespace=props.namespace, sources=gated)

    def model(self, name: str) -> CachedModelHandle:
        """The handle of the model ``name``; a KeyError naming the models there are otherwise."""
        if name not in self.models:
            raise KeyError(f"{self.node.path}: no cached model {name!r}; models: {', '.join(self.models)}")
        return self.models[name]

    def _filler_role(self, cluster: IHyperPodCluster, namespace: str) -> iam.Role:
        """The role the fillers' service account gets through EKS Pod Identity (the cluster's
        ``eks-pod-identity-agent`` add-on), trusted only for this cluster's pods."""
        role = iam.Role(self, "NodeCacheFillerRole", description="hyperwarm node-cache fillers: read model versions",
                        assumed_by=iam.ServicePrincipal("pods.eks.amazonaws.com").with_conditions({
                            "StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account},
                            "ArnEquals": {"aws:SourceArn": cluster.eks_cluster.cluster_arn}}))
        typing.cast(iam.CfnRole, role.node.default_child).add_property_override(
            "AssumeRolePolicyDocument.Statement.0.Action", ["sts:AssumeRole", "sts:TagSession"])
        eks.CfnPodIdentityAssociation(self, "NodeCacheFillerIdentity", cluster_name=cluster.eks_cluster.cluster_name,
                                      namespace=namespace, service_account=SERVICE_ACCOUNT, role_arn=role.role_arn)
        return role

    def _grant_reads(self, props: CachedModelsProps, readers: Sequence[Any]) -> None:
        """The operator's model readers may read each model's version prefix, nothing else of the bucket; a
        node-cached model's filler reads its whole prefix (a refresh lists later versions for it to fill)."""
        buckets = dict(props.buckets)
        if any(isinstance(m.source, JumpStartModelSource) for m in props.models):
            for reader in readers:
                grant_jumpstart_read(reader, self)
        for model in props.models:
            source = model.source
            if not isinstance(source, ModelSource):
                continue
            name = source.bucket
            if name not in buckets:
                buckets[name] = s3.Bucket.from_bucket_name(self, f"ModelBucket-{name}", name)
            for reader in readers:
                grant_mounted_model_read(reader, buckets[name], source.location)
            if model.weights_cache == "node" and self.filler_role is not None:
                grant_mounted_model_read(self.filler_role, buckets[name], source.prefix)
                # The filler downloads the object version a manifest's version_id names (GetObject with VersionId).
                versions = buckets[name].arn_for_objects(f"{source.prefix.strip('/')}/*")
                iam.Grant.add_to_principal(grantee=self.filler_role, actions=["s3:GetObjectVersion"],
                                           resource_arns=[versions])


def _handles(props: CachedModelsProps) -> Mapping[str, CachedModelHandle]:
    return MappingProxyType({m.name: CachedModelHandle(
        name=m.name, cluster=props.cluster, namespace=props.namespace,
        kind=m.source.deployment_kind,
        node_cached=m.weights_cache == "node", size=m.size, refreshed=m.name in props.refreshed, source=m.source)
        for m in props.models})
