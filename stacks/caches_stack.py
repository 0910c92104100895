"""``hyperwarm-<env>-caches``: the environment's model caches applied to the HyperPod EKS cluster.

The library's :class:`~hyperwarm.caches.CachedModels` does the work (objects, manifest after the operator add-on,
read grants, capacity and operator checks); this stack adds the environment's labels, its model buckets and the
planner's warning about cold scale-outs. The manifest resource lives in this stack (not
``cluster.add_cdk8s_chart``, which would put it in the cluster's stack and make the stacks reference each other).
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from hyperwarm import IHyperPodCluster
from hyperwarm.caches import (
    CLUSTER_NAME_PLACEHOLDER,
    CachedModels,
    CachedModelSpec,
    CachedModelsProps,
    CachesChartProps,
    ModelSource,
    OperatorBuildError,
)
from hyperwarm.cluster import INFERENCE_OPERATOR_ADDON
from manifests import environment_labels
from stacks.buckets_stack import model_bucket_by_name
from stacks.config import ConfigError, EnvironmentConfig
from stacks.plan import ColdStart, plan_model


def chart_props(env_name: str, config: EnvironmentConfig,
                cluster_name: str = CLUSTER_NAME_PLACEHOLDER) -> CachesChartProps:
    """What the library's chart renders for the environment (:func:`manifests.build_chart`); ``dist/manifests``
    keep :data:`~hyperwarm.caches.cached_models.CLUSTER_NAME_PLACEHOLDER` for a GitOps user to fill in."""
    return CachesChartProps(
        config.caches.models, region=config.region, cluster_name=cluster_name, namespace=config.caches.namespace,
        labels=environment_labels(env_name),
        group_taints={g.name: tuple(g.to_spec().taints) for g in config.instance_groups},
        filler_image=config.caches.filler_image, nvme_headroom_percent=config.caches.nvme_headroom_percent,
        instance_types={g.name: g.instance_type for g in config.instance_groups},
        group_nodes={g.name: g.instance_count for g in config.instance_groups})


def cold_scale_out_warning(model: CachedModelSpec, config: EnvironmentConfig) -> str | None:
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
                 cluster: IHyperPodCluster, **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        models = config.caches.models
        for model in models:
            warning = cold_scale_out_warning(model, config)
            if warning:
                cdk.Annotations.of(self).add_warning_v2(f"hyperwarm:cold-scale-out:{model.name}", warning)
        # By name, with the key the configuration gives it (the buckets stack may create the bucket).
        buckets = {name: model_bucket_by_name(self, f"ModelBucket-{name}", name, config)
                   for name in dict.fromkeys(m.source.bucket for m in models if isinstance(m.source, ModelSource))}
        try:
            # "Default": the construct adds no level to the logical ids (the stack's resources keep theirs).
            self.caches = CachedModels(self, "Default", CachedModelsProps(
                cluster=cluster, models=models, namespace=config.caches.namespace,
                nvme_headroom_percent=config.caches.nvme_headroom_percent, filler_image=config.caches.filler_image,
            labels=environment_labels(env_name),
                buckets=buckets, refreshed=config.refresh.cached_models))
        except OperatorBuildError as error:
            raise ConfigError(f"invalid configuration for environment {env_name!r}:\n  environments.{env_name}."
                              f"addon_versions[{INFERENCE_OPERATOR_ADDON!r}]: {error.addon_version!r} -- "
                              f"{error.problem}") from None
        self.chart, self.objects, self.manifest = self.caches.chart, self.caches.objects, self.caches.manifest
