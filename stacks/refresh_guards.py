"""Deploy guards: a deploy of the endpoints or caches never moves a refreshed target back.

Each refresh target's version is what synth deploys (:mod:`stacks.served`: ``cdk.json``'s, or the newer one the
refresh made serve); should the refresh have moved the target further since synth read it, that value is
older than what it serves. The endpoints and caches stacks get a :class:`RefreshGuard` that fails the
deployment first, naming the field to update, and records the versions of pinned prefixes. They deploy
before the refresh stack, so the state table is named, not referenced.

A cached model whose version only a deploy moves (a Hugging Face revision, an FSx version folder, a JumpStart model
version, an S3 version no refresh prefix names) is guarded too, in every environment, refresh section or not: the
guard records what each deploy set and fails one that would move it back
(:mod:`hyperwarm.functions.cache_refresh.deployed`), unless ``caches.rollback`` names the model (a deliberate
rollback).
"""

from __future__ import annotations

from hyperwarm import IHyperPodCluster
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.refresh import GuardedTarget, RefreshGuard, RefreshGuardProps
from stacks.config import EnvironmentConfig

from .caches_stack import CachesStack
from .endpoints_stack import EndpointsStack
from .served import refreshed_targets


def state_table_name(env_name: str) -> str:
    """The refresh function's state table of one environment."""
    return f"hyperwarm-{env_name}-cache-refresh-state"


def refresh_function_name(env_name: str) -> str:
    """The refresh function of one environment (synth reads its configuration to check a served version)."""
    return f"hyperwarm-{env_name}-cache-refresh"


def dead_letter_queue_name(env_name: str) -> str:
    """The refresh function's dead-letter queue of one environment (the guards write to it too)."""
    return f"hyperwarm-{env_name}-cache-refresh-dead-letters"


def guarded_targets(env_name: str, config: EnvironmentConfig, cluster_name: str | None
                    ) -> dict[str | None, list[GuardedTarget]]:
    """The refreshed targets by the endpoint that serves them (None: the cached models)."""
    targets: dict[str | None, list[GuardedTarget]] = {}
    for t in refreshed_targets(env_name, config, cluster_name):
        targets.setdefault(t.endpoint, []).append(GuardedTarget(
            target_id=t.target_id, version=t.version, field=t.field, value=t.value, pinned_location=t.pinned_location))
    return targets


def deployed_targets(env_name: str, config: EnvironmentConfig, cluster_name: str) -> list[GuardedTarget]:
    """The cached models whose version only a deploy moves (all but those a refresh prefix names), each recorded by
    the caches stack's guard."""
    targets = []
    refreshed = set(config.refresh.cached_models)
    for i, model in enumerate(config.caches.models):
        source = model.source
        if model.name in refreshed:  # the refresh function's record orders it
            continue
        targets.append(GuardedTarget(
            target_id=contract.hyperpod_target_id(cluster_name, config.caches.namespace, source.deployment_kind,
                                                  model.name),
            version=source.version, field=f"environments.{env_name}.caches.models[{i}].source.{source.version_field}",
            pinned_location=source.uri if model.name in config.caches.rollback else None, recorded=True))
    return targets


def add_refresh_guards(env_name: str, config: EnvironmentConfig, cluster: IHyperPodCluster | None,
                       caches: CachesStack | None, endpoints: EndpointsStack | None) -> dict[str, RefreshGuard]:
    """A guard in the caches and endpoints stacks for the refresh targets they deploy, and in the caches stack for
    the versions only a deploy moves."""
    guards: dict[str, RefreshGuard] = {}
    refreshing = bool(config.refresh.models)
    table = state_table_name(env_name)  # a recorded model that a refresh prefix named until now starts from its state
    rollback = {"dead_letter_queue_name": dead_letter_queue_name(env_name) if refreshing else None,
                "model_bucket_name": config.refresh.bucket}
    cluster_name = cluster.eks_cluster.cluster_name if cluster is not None else None
    targets = guarded_targets(env_name, config, cluster_name) if refreshing else {}
    cached = targets.pop(None, []) + (deployed_targets(env_name, config, cluster_name) if cluster_name else [])
    if caches is not None and cached:
        guards["caches"] = RefreshGuard(caches, "RefreshGuard", RefreshGuardProps(
            state_table_name=table, targets=cached, **rollback))
        guards["caches"].protect(caches.manifest)
    if endpoints is not None and targets:
        guards["endpoints"] = RefreshGuard(endpoints, "RefreshGuard", RefreshGuardProps(
            state_table_name=table, targets=[t for ts in targets.values() for t in ts], **rollback))
        for name in targets:  # what sets the served model: a change to any of them updates the endpoint
            endpoint = endpoints.endpoints[name]  # type: ignore[index]
            resource = endpoint.node.default_child  # the AWS::SageMaker::Endpoint
            assert resource is not None
            guards["endpoints"].protect(resource, endpoint.endpoint_config,
                                        *endpoint.models.values())
    return guards
