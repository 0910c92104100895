"""Build the CDK app: one set of stacks per environment in ``cdk.json``'s ``environments``.

``-c env=prod`` (or ``env=dev,prod``) limits the app to those environments, so ``cdk deploy``
targets one; without it every environment is synthesized.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from hyperwarm import IHyperPodCluster, declare_existing_buckets, retain_except_on_create
from hyperwarm.observability import has_alarms
from stacks.config import ConfigError, EnvironmentConfig, parse_environments
from stacks.config.environment import load_context

from . import served
from .alarms_stack import AlarmsStack, wire_alarms
from .buckets_stack import BucketsStack
from .caches_stack import CachesStack
from .cluster_stack import ClusterStack
from .endpoints_stack import EndpointsStack
from .observability_stack import ObservabilityStack
from .refresh_guards import add_refresh_guards, refresh_function_name, state_table_name
from .refresh_stack import RefreshStack


def freeze_imports() -> None:
    """Put what the imports made (aws-cdk-lib's generated modules and the library: ~190,000 objects, alive as long as
    the process) out of the garbage collector's reach, so the full collection that building the app sets off walks
    only what the app made: 0.01-0.02 s instead of 0.09-0.19 s for prod (docs/performance.md, "Synth time"). The
    entry points call it once, after their imports and before building."""
    gc.freeze()


def stack_name(env_name: str, part: str) -> str:
    return f"hyperwarm-{env_name}-{part}"


def selected_environments(app: cdk.App) -> dict[str, EnvironmentConfig]:
    environments = parse_environments(app.node.try_get_context("environments"))
    wanted = app.node.try_get_context("env")
    if not wanted:
        return environments
    names = [n.strip() for n in str(wanted).split(",") if n.strip()]
    unknown = [n for n in names if n not in environments]
    if unknown:
        raise ConfigError(f"-c env={wanted}: unknown environment(s) {', '.join(unknown)}; "
                          f"configured: {', '.join(sorted(environments))}")
    return {n: environments[n] for n in names}


def add_environment(app: cdk.App, env_name: str, config: EnvironmentConfig) -> dict[str, cdk.Stack]:
    """Every stack of one environment, keyed by part name; refreshed targets at the versions that serve
    (:mod:`stacks.served`)."""
    config = _at_served_versions(app, env_name, config)
    # Production stacks refuse deletion (termination protection); see docs/operations.md, "Protecting production".
    common = {"env": cdk.Environment(account=config.account, region=config.region),
              "tags": {"hyperwarm:environment": env_name}, "termination_protection": config.production}
    stacks: dict[str, cdk.Stack] = {}
    cluster: IHyperPodCluster | None = None
    if config.instance_groups:  # an endpoints-only environment has no HyperPod cluster
        cluster_stack = stacks["cluster"] = ClusterStack(
            app, stack_name(env_name, "cluster"), config=config, **common,
            description=f"hyperwarm {env_name}: VPC, EKS and the HyperPod cluster")
        cluster = cluster_stack.cluster
    caches_stack: CachesStack | None = None
    if config.caches.models:
        assert cluster is not None  # the config rules place every cached model on an instance group
        caches_stack = stacks["caches"] = CachesStack(
            app, stack_name(env_name, "caches"), env_name=env_name, config=config, cluster=cluster, **common,
            description=f"hyperwarm {env_name}: model weights and image caches")
    endpoints_stack: EndpointsStack | None = None
    if config.endpoints:
        endpoints_stack = stacks["endpoints"] = EndpointsStack(
            app, stack_name(env_name, "endpoints"), env_name=env_name, config=config, **common,
            description=f"hyperwarm {env_name}: SageMaker inference endpoints")
    endpoints = endpoints_stack.endpoints if endpoints_stack is not None else {}
    if config.refresh.models:
        stacks["refresh"] = RefreshStack(app, stack_name(env_name, "refresh"), env_name=env_name, config=config,
                                         caches=caches_stack.caches if caches_stack is not None else None,
                                         endpoints=endpoints, **common,
                                         description=f"hyperwarm {env_name}: cache and endpoint refresh on new "
                                                     "model versions")
        for part in ("caches", "endpoints"):
            if part in stacks:
                stacks["refresh"].add_stack_dependency(stacks[part])
    add_refresh_guards(env_name, config, cluster, caches_stack, endpoints_stack)
    if config.observability.enabled and ("endpoints" in stacks or "caches" in stacks):  # something to observe
        stacks["observability"] = ObservabilityStack(
            app, stack_name(env_name, "observability"), env_name=env_name, config=config,
            caches=caches_stack.caches if caches_stack is not None else None,
            refreshed=stacks["refresh"].hyperpod_targets if "refresh" in stacks else {},  # type: ignore[attr-defined]
            endpoints=endpoints, **common,
            description=f"hyperwarm {env_name}: dashboard, alarms and the cache metrics exporter")
        if "caches" in stacks:  # the models' deployments exist before their metrics are read
            stacks["observability"].add_stack_dependency(stacks["caches"])
    stacks = _with_model_buckets(app, env_name, config, stacks, common)
    add_alarms(app, env_name, config, stacks, **common)
    for stack in stacks.values():  # aws-cdk-lib retains logs, keys and buckets by default: not after a failed create
        retain_except_on_create(stack)
    return stacks


def _at_served_versions(app: cdk.App, env_name: str, config: EnvironmentConfig) -> EnvironmentConfig:
    """``config`` with its refreshed targets at the versions that serve, where :mod:`stacks.served` says to read
    them; else as cdk.json has it."""
    if served.should_read(served.setting(app.node.try_get_context), config):
        found, cluster_name = served.read(env_name, config, state_table_name(env_name), stack_name(env_name, "cluster"),
                                          refresh_function_name(env_name))
        config = served.follow(env_name, config, app.node.try_get_context("environments")[env_name], found,
                               cluster_name)
    return config


def _with_model_buckets(app: cdk.App, env_name: str, config: EnvironmentConfig, stacks: dict[str, cdk.Stack],
                        common: dict[str, Any]) -> dict[str, cdk.Stack]:
    """Models are read from buckets by name: those hyperwarm creates come first (the buckets stack, first in the
    result), the others must exist."""
    declared = {b.name: b.create for b in config.model_buckets}
    for stack in stacks.values():
        declare_existing_buckets(stack, [name for name, create in declared.items() if not create])
    if any(declared.values()):
        buckets = BucketsStack(app, stack_name(env_name, "buckets"), config=config, **common,
                               description=f"hyperwarm {env_name}: model buckets, created before their readers")
        for stack in stacks.values():
            stack.add_stack_dependency(buckets)
        stacks = {"buckets": buckets, **stacks}
    return stacks


def add_alarms(app: cdk.App, env_name: str, config: EnvironmentConfig, stacks: dict[str, cdk.Stack],
               **kwargs: Any) -> None:
    """Every alarm of the environment notifies its topic: ``hyperwarm-<env>-alarms`` (created first) or the
    existing ``alarms.topic_arn``."""
    alarms = None
    if not config.alarms.topic_arn and any(has_alarms(s) for s in stacks.values()):
        alarms = AlarmsStack(app, stack_name(env_name, "alarms"), env_name=env_name, config=config,
                             description=f"hyperwarm {env_name}: the alarm topic and its subscribers", **kwargs)
    wire_alarms(env_name, config, stacks, alarms)
    if alarms is not None:
        if config.production:  # on-call first: a deploy without its address stops before anything bills
            for stack in stacks.values():
                stack.add_stack_dependency(alarms)
        stacks["alarms"] = alarms


def build_app(outdir: str | None = None, context: Mapping[str, Any] | None = None,
              nag: bool = True) -> cdk.App:
    """The whole app; ``context`` overrides cdk.json (tests use it)."""
    kwargs: dict[str, Any] = {"outdir": outdir} if outdir else {}
    if context is not None:
        kwargs["context"] = dict(context)
    elif Path("cdk.json").exists():  # run by the cdk CLI: what it passes has lost the file's nulls
        load_context("cdk.json")
    app = cdk.App(**kwargs)
    for env_name, config in selected_environments(app).items():
        add_environment(app, env_name, config)
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app
