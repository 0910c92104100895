"""``hyperwarm-<env>-observability``: the environment's dashboard, alarms and cache metrics exporter."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from hyperwarm import IHyperPodCluster, InferenceEndpoint
from hyperwarm.observability.dashboard import InferenceObservability
from hyperwarm.observability.props import HyperPodModels
from stacks.config import EnvironmentConfig

from .alarms_stack import alarm_topic


class ObservabilityStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, env_name: str, config: EnvironmentConfig,
                 cluster: IHyperPodCluster | None, endpoints: dict[str, InferenceEndpoint], **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        settings = config.observability
        topic = alarm_topic(self, env_name, config)
        hyperpod = None
        if cluster is not None and config.caches.models:
            hyperpod = HyperPodModels(cluster=cluster, models=[m.name for m in config.caches.models],
                                      namespace=config.caches.namespace, refreshed=list(config.refresh.warm(config.caches)))
        self.observability = InferenceObservability(self, "Observability", settings.to_props(
            endpoints=list(endpoints.values()), hyperpod=hyperpod, topic=topic,
            dashboard_name=f"hyperwarm-{env_name}"))
