"""Deploy guards: a deploy of the endpoints or caches never moves a refreshed target back.

Each refresh target's version comes from ``cdk.json`` (a cached model's ``source.version``, an
endpoint variant's ``model_data``); once the refresh function moved the target on, that value is
older than what it serves. The endpoints and caches stacks get a :class:`RefreshGuard` that fails
the deployment first, naming the field to update. They deploy before the refresh stack, so the
state table is named, not referenced.
"""

from __future__ import annotations

from hyperwarm import IHyperPodCluster
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.refresh.guard import GuardedTarget, RefreshGuard, RefreshGuardProps
from stacks.config import EnvironmentConfig
from stacks.config.endpoints import endpoint_name

from .caches_stack import CachesStack
from .endpoints_stack import EndpointsStack


def state_table_name(env_name: str) -> str:
    """The refresh function's state table of one environment."""
    return f"hyperwarm-{env_name}-cache-refresh-state"


def dead_letter_queue_name(env_name: str) -> str:
    """The refresh function's dead-letter queue of one environment (the guards write to it too)."""
    return f"hyperwarm-{env_name}-cache-refresh-dead-letters"


def cache_targets(env_name: str, config: EnvironmentConfig, cluster_name: str) -> list[GuardedTarget]:
    """Refreshed cached models: the version is ``caches.models[i].source.version``."""
    refreshed = set(config.refresh.cached_models)
    return [GuardedTarget(
        target_id=contract.hyperpod_target_id(cluster_name, config.caches.namespace, contract.HyperPodTarget.resource,
                                              m.name),
        version=m.source.version, field=f"environments.{env_name}.caches.models[{i}].source.version")
        for i, m in enumerate(config.caches.models) if m.name in refreshed]


def endpoint_targets(env_name: str, config: EnvironmentConfig) -> dict[str, list[GuardedTarget]]:
    """Refreshed endpoints by config name: each variant under a refreshed prefix sets a version."""
    targets: dict[str, list[GuardedTarget]] = {}
    for entry in config.refresh.models:
        root = f"s3://{config.refresh.bucket}/{entry.prefix}/"
        for i, endpoint in enumerate(config.endpoints):
            if endpoint.name not in entry.endpoints:
                continue
            for j, variant in enumerate(endpoint.variants):
                data = variant.model_data or ""
                if not data.startswith(root):
                    continue
                version, _, rest = data[len(root):].partition("/")
                targets.setdefault(endpoint.name, []).append(GuardedTarget(
                    target_id=contract.endpoint_target_id(endpoint_name(env_name, endpoint)), version=version,
                    field=f"environments.{env_name}.endpoints[{i}].variants[{j}].model_data",
                    value=f"{root}{{version}}/{rest}"))
    return targets


def add_refresh_guards(env_name: str, config: EnvironmentConfig, cluster: IHyperPodCluster | None,
                       caches: CachesStack | None, endpoints: EndpointsStack | None) -> dict[str, RefreshGuard]:
    """A guard in the caches and endpoints stacks for the refresh targets they deploy."""
    guards: dict[str, RefreshGuard] = {}
    table = state_table_name(env_name)
    rollback = {"dead_letter_queue_name": dead_letter_queue_name(env_name), "model_bucket_name": config.refresh.bucket}
    cached = cache_targets(env_name, config, cluster.eks_cluster.cluster_name) if cluster is not None else []
    if caches is not None and cached:
        guards["caches"] = RefreshGuard(caches, "RefreshGuard", RefreshGuardProps(state_table_name=table,
                                                                                  targets=cached, **rollback))
        guards["caches"].protect(caches.manifest)
    served = endpoint_targets(env_name, config)
    if endpoints is not None and served:
        guards["endpoints"] = RefreshGuard(endpoints, "RefreshGuard", RefreshGuardProps(
            state_table_name=table, targets=[t for ts in served.values() for t in ts], **rollback))
        for name in served:  # what sets the served model: a change to any of them updates the endpoint
            endpoint = endpoints.endpoints[name]
            resource = endpoint.node.default_child  # the AWS::SageMaker::Endpoint
            assert resource is not None
            guards["endpoints"].protect(resource, endpoint.endpoint_config,
                                        *endpoint.models.values())
    return guards
