"""``hyperwarm-<env>-observability``: the environment's dashboard, alarms and cache metrics exporter."""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from constructs import Construct

from hyperwarm import CachedModels, HyperPodModels, HyperPodRefreshTarget, InferenceEndpoint, InferenceObservability
from stacks.config import EnvironmentConfig

from .alarms_stack import alarm_topic


class ObservabilityStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, env_name: str, config: EnvironmentConfig,
                 caches: CachedModels | None, refreshed: Mapping[str, HyperPodRefreshTarget],
                 endpoints: dict[str, InferenceEndpoint], **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        settings = config.observability
        topic = alarm_topic(self, env_name, config)
        hyperpod = None
        if caches is not None:
            hyperpod = HyperPodModels(models=list(caches.models.values()), refreshed=list(refreshed.values()))
        self.observability = InferenceObservability(self, "Observability", settings.to_props(
            endpoints=list(endpoints.values()), hyperpod=hyperpod, topic=topic,
            dashboard_name=f"hyperwarm-{env_name}"))
