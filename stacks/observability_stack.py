"""``hyperwarm-<env>-observability``: the environment's dashboard, alarms and cache metrics exporter."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from hyperwarm import IHyperPodCluster, InferenceEndpoint
from hyperwarm.observability.dashboard import InferenceObservability
from hyperwarm.observability.props import HyperPodModels
from stacks.config import EnvironmentConfig

from .alarms_stack import alarm_topic


def warm_refreshed(config: EnvironmentConfig) -> list[str]:
    """Cached models the refresh function rolls out warm: refreshed, with a stand-alone (pre-warm) weights
    cache, the ``weights_caches`` the refresh stack gives their targets."""
    cached = {m.name: m for m in config.caches.models}
    return list(dict.fromkeys(name for entry in config.refresh.models for name in entry.caches
                              if cached[name].prewarm and cached[name].weights_cache))


class ObservabilityStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, env_name: str, config: EnvironmentConfig,
                 cluster: IHyperPodCluster | None, endpoints: dict[str, InferenceEndpoint], **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        settings = config.observability
        topic = alarm_topic(self, env_name, config)
        hyperpod = None
        if cluster is not None and config.caches.models:
            hyperpod = HyperPodModels(cluster=cluster, models=[m.name for m in config.caches.models],
                                      namespace=config.caches.namespace, refreshed=warm_refreshed(config))
        self.observability = InferenceObservability(self, "Observability", settings.to_props(
            endpoints=list(endpoints.values()), hyperpod=hyperpod, topic=topic,
            dashboard_name=f"hyperwarm-{env_name}"))
