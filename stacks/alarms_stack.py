"""``hyperwarm-<env>-alarms``: the topic every alarm of the environment notifies, and its subscribers.

Deployed before every stack with alarms, which name the topic by its ARN (no export to pin it). Left
out where ``alarms.topic_arn`` names an existing topic: the stacks' alarms notify that one and declare it
in their template metadata (its policy is its owner's to keep open to CloudWatch).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_sns as sns
from constructs import Construct

from hyperwarm.observability import (
    AlarmDestination,
    AlarmDestinationProps,
    SlackChannel,
    declare_existing_alarm_topic,
    has_alarms,
    notify_alarms,
)
from stacks.config import EnvironmentConfig
from stacks.config.alarms import EMAIL_PARAMETER


def topic_name(env_name: str) -> str:
    return f"hyperwarm-{env_name}-alarms"


class AlarmsStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, env_name: str, config: EnvironmentConfig, **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        alarms = config.alarms
        self.destination = AlarmDestination(self, "Alarms", AlarmDestinationProps(
            topic_name=topic_name(env_name), emails=alarms.emails, https_endpoints=alarms.https_endpoints,
            slack_channels=[SlackChannel(c.workspace_id, c.channel_id) for c in alarms.slack_channels],
            email_parameter=EMAIL_PARAMETER if alarms.email_parameter else None))
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.destination.topic.topic_arn,
                      description="every hyperwarm alarm of this environment notifies this topic: subscribe on-call")


def alarm_topic(stack: cdk.Stack, env_name: str, config: EnvironmentConfig) -> sns.ITopic:
    """The environment's alarm topic in ``stack``: the existing one, or the alarms stack's by its name."""
    arn = config.alarms.topic_arn or stack.format_arn(service="sns", resource=topic_name(env_name))
    return sns.Topic.from_topic_arn(stack, "AlarmTopic", arn)


def wire_alarms(env_name: str, config: EnvironmentConfig, stacks: dict[str, cdk.Stack],
                alarms: AlarmsStack | None) -> None:
    """Every alarm of every stack notifies the environment's topic; those stacks deploy after the alarms stack,
    or declare the existing topic."""
    for stack in stacks.values():
        if stack is alarms or not has_alarms(stack):
            continue
        topic = stack.node.try_find_child("AlarmTopic") or alarm_topic(stack, env_name, config)
        notify_alarms(stack, topic)  # type: ignore[arg-type]
        if alarms is not None:
            stack.add_stack_dependency(alarms)
        else:
            declare_existing_alarm_topic(stack, str(config.alarms.topic_arn))
