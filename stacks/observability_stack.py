"""``hyperwarm-<env>-observability``: the environment's dashboard, alarms and cache metrics exporter."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_sns as sns
from constructs import Construct

from hyperwarm import IHyperPodCluster, InferenceEndpoint
from hyperwarm.observability import HyperPodModels, InferenceObservability
from stacks.config import EnvironmentConfig


class ObservabilityStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, env_name: str, config: EnvironmentConfig,
                 cluster: IHyperPodCluster | None, endpoints: dict[str, InferenceEndpoint], **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        settings = config.observability
        topic = sns.Topic.from_topic_arn(self, "AlarmTopic", settings.alarm_topic_arn) \
            if settings.alarm_topic_arn else None
        hyperpod = None
        if cluster is not None and config.caches.models:
            hyperpod = HyperPodModels(cluster=cluster, models=[m.name for m in config.caches.models],
                                      namespace=config.caches.namespace)
        self.observability = InferenceObservability(self, "Observability", settings.to_props(
            endpoints=list(endpoints.values()), hyperpod=hyperpod, topic=topic,
            dashboard_name=f"hyperwarm-{env_name}"))
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.observability.topic.topic_arn,
                      description="subscribe on-call here: every hyperwarm alarm of this environment")
