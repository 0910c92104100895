"""``hyperwarm-<env>-refresh``: new model versions in S3 refresh the environment's caches and endpoints."""

from __future__ import annotations

import dataclasses
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch, aws_iam as iam, aws_kms as kms
from constructs import Construct

from hyperwarm import (
    BlueGreen,
    CachedModels,
    CacheRefreshHook,
    CacheRefreshHookProps,
    EndpointRefreshTarget,
    HyperPodRefreshTarget,
    InferenceEndpoint,
    PublisherSigning,
    RefreshedPrefix,
)
from stacks.buckets_stack import model_bucket_by_name
from stacks.config import EnvironmentConfig
from stacks.config.endpoints import EndpointConfig
from stacks.config.refresh import signing_required

from .refresh_guards import dead_letter_queue_name, refresh_function_name, state_table_name


def blue_green(endpoint: EndpointConfig, construct: InferenceEndpoint) -> BlueGreen:
    """A refresh shifts traffic the way the endpoint's own deployments do, with the same rollback alarms."""
    g = endpoint.guardrails
    alarms = construct.rollback_alarms
    if g is None:
        return BlueGreen(rollback_alarms=alarms)
    return BlueGreen(traffic=g.traffic, step_percent=g.percent or 10, wait=g.to_traffic().bake_time(),
                     rollback_alarms=alarms)


class RefreshStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, env_name: str, config: EnvironmentConfig,
                 caches: CachedModels | None, endpoints: dict[str, InferenceEndpoint], **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        refresh = config.refresh
        assert refresh.bucket is not None  # the config rules require it with models
        # By name: the bucket exists before this stack (model_buckets: created by the buckets stack, or existing).
        bucket = model_bucket_by_name(self, "Models", refresh.bucket, config)
        configured = {e.name: e for e in config.endpoints}
        models = []
        self.hyperpod_targets: dict[str, HyperPodRefreshTarget] = {}
        """The refreshed cached models' HyperPod targets, by cached model name."""
        for entry in refresh.active:  # a pinned prefix is refreshed by no one
            hyperpod: list[HyperPodRefreshTarget] = []
            if entry.caches:
                assert caches is not None  # the config rules name cached models only where there are some
                for name in entry.caches:
                    target = HyperPodRefreshTarget(caches.model(name), staging_timeout=entry.staging_timeout)
                    # cdk.json's switch_timeout overrides the library's default only when it is set
                    hyperpod.append(dataclasses.replace(target, switch_timeout=entry.switch_timeout)
                                    if entry.switch_timeout else target)
                self.hyperpod_targets.update(zip(entry.caches, hyperpod, strict=True))
            served = [EndpointRefreshTarget(endpoint=endpoints[name],
                                            blue_green=blue_green(configured[name], endpoints[name]))
                      for name in entry.endpoints]
            models.append(RefreshedPrefix(prefix=entry.prefix, hyperpod=hyperpod, endpoints=served,
                                          versions=entry.versions, max_step=entry.max_step))
        self.hook = CacheRefreshHook(self, "CacheRefresh", CacheRefreshHookProps(
            models=models, bucket=bucket, dry_run=refresh.dry_run, function_name=refresh_function_name(env_name),
            state_table_name=state_table_name(env_name), dead_letter_queue_name=dead_letter_queue_name(env_name),
            signing=self._signing(config), reserved_concurrency=refresh.reserved_concurrency))
        cdk.CfnOutput(self, "RefreshFunctionName", value=self.hook.function.function_name,
                      description="replay dead letters: hyperwarm refresh replay --function-name <this>")
        self.rollout_workflow = self.hook.rollout_workflow
        """The warm rollout's state machine (None without a node-cached refreshed model); its metrics are the hook's
        ``metric_rollout_executions_failed()`` and ``metric_time_to_warm(target)``."""
        if self.rollout_workflow is not None:
            cdk.CfnOutput(self, "RolloutStateMachineArn", value=self.rollout_workflow.state_machine_arn,
                          description="warm rollouts, one execution per target and version (Step Functions console)")
        if self.hook.publisher_key is not None:
            cdk.CfnOutput(self, "PublisherKeyArn", value=self.hook.publisher_key.key_arn,
                          description="sign new model versions with it: hyperwarm publish --key <this>")
        cdk.CfnOutput(self, "DeadLetterQueueUrl", value=self.hook.dead_letter_queue.queue_url,
                      description="refresh events that failed for good: hyperwarm refresh replay --queue-url <this>")

    def _signing(self, config: EnvironmentConfig) -> PublisherSigning | None:
        """cdk.json's ``refresh.signing``: the named publishers, and an existing key where it names one."""
        if not signing_required(config.production, config.refresh):
            return None
        signing = config.refresh.signing
        key = kms.Key.from_key_arn(self, "PublisherKeyByArn", signing.key_arn) if signing.key_arn else None
        return PublisherSigning(publishers=[iam.ArnPrincipal(arn) for arn in signing.publishers], key=key)

    def metric_rollout_executions_failed(self, **options: Any) -> cloudwatch.Metric:
        """The hook's :meth:`~hyperwarm.refresh.hook.CacheRefreshHook.metric_rollout_executions_failed`."""
        return self.hook.metric_rollout_executions_failed(**options)

    def metric_time_to_warm(self, model: str, **options: Any) -> cloudwatch.Metric:
        """The hook's :meth:`~hyperwarm.refresh.hook.CacheRefreshHook.metric_time_to_warm` for the refreshed
        cached model ``model`` (a ``caches.models[].name``)."""
        return self.hook.metric_time_to_warm(self.hyperpod_targets[model], **options)
