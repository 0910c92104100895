"""``hyperwarm-<env>-caches``: the environment's model caches applied to the HyperPod EKS cluster.

The manifest resource lives in this stack (not ``cluster.add_cdk8s_chart``, which would put it in
the cluster's stack and make the stacks reference each other). It is created after the inference
operator add-on, which installs the CRDs it uses, and the operator may read the models' S3 prefixes.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperwarm import IHyperPodCluster, grant_mounted_model_read
from hyperwarm.cluster.rules import INFERENCE_OPERATOR_ADDON, operator_pin_problem
from stacks.buckets_stack import model_bucket_by_name
from stacks.config import ConfigError, EnvironmentConfig
from stacks.config.caches import CachedModel
from stacks.plan import ColdStart, plan_model
from manifests import build_chart


def cold_scale_out_warning(model: CachedModel, config: EnvironmentConfig) -> str | None:
    """The planner's cold share of a scale-out to ``max_replicas``, when some new pods would start cold.

    The planner counts one new pod per node: the group's nodes not yet serving the model are the
    warm ones (W), the K = max_replicas - replicas new pods beyond them start cold, (K-W)/K of them.
    """
    if model.autoscaling is None or model.max_replicas <= model.replicas:
        return None
    cold_start = ColdStart()
    plan = plan_model(model, config, cold_start, model.max_replicas - model.replicas, None)
    if not plan.cold_share:
        return None
    group = config.instance_group(model.instance_group)
    return (f"model {model.name!r}: autoscaling max_replicas {model.max_replicas} exceeds the "
            f"{group.instance_count} node(s) of instance group {group.name!r} that hold its caches: a scale-out from "
            f"{model.replicas} to {model.max_replicas} pods is {plan.cold_share:.0%} cold (planner: cold share "
            f"(K-W)/K with K={plan.scale_out} new pods, W={plan.prewarmed_nodes} warm nodes; cold start "
            f"{plan.cold_s / 60:.1f} min, warm {plan.warm_s:.0f} s). Add nodes to the group or lower "
            "max_replicas if every pod must start warm.")


class CachesStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, env_name: str, config: EnvironmentConfig,
                 cluster: IHyperPodCluster, **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        operator = cluster.inference_operator
        if operator is None:
            raise ValueError(f"{self.node.path}: model caches need the HyperPod inference operator; "
                             "the cluster was built with install_inference_operator false")
        for model in config.caches.models:
            cluster.cache_group(model.instance_group)  # the cluster has it, with NVMe: else a construct error
            warning = cold_scale_out_warning(model, config)
            if warning:
                cdk.Annotations.of(self).add_warning_v2(f"hyperwarm:cold-scale-out:{model.name}", warning)
        self.chart = build_chart(env_name, config, cluster.eks_cluster.cluster_name)
        self.objects = self.chart.to_json()
        # The operator must know every field the objects use: an older one drops them without a word.
        problem = operator_pin_problem(operator.addon_version, self.objects)
        if problem:
            raise ConfigError(f"invalid configuration for environment {env_name!r}:\n  environments.{env_name}."
                              f"addon_versions[{INFERENCE_OPERATOR_ADDON!r}]: {operator.addon_version!r} -- {problem}")
        self.manifest = eks.KubernetesManifest(
            self, "Manifest", cluster=cluster.eks_cluster, manifest=self.objects,
            overwrite=True,  # adopt objects a GitOps user already applied from dist/manifests
        )
        # The add-on installs the operator's CRDs: a dependency across stacks CloudFormation honours
        # by deploying the cluster stack (add-on included) first.
        self.manifest.node.add_dependency(operator.addon)

        buckets: dict[str, s3.IBucket] = {}
        for model in config.caches.models:
            bucket = buckets.get(model.source.bucket)
            if bucket is None:
                bucket = buckets[model.source.bucket] = model_bucket_by_name(
                    self, f"ModelBucket-{model.source.bucket}", model.source.bucket, config)
            for reader in operator.model_readers:
                grant_mounted_model_read(reader, bucket, model.source.location)
