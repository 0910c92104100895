"""Every alarm notifies someone, through a topic CloudWatch may publish to."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from hyperwarm.observability.alarms import CLOUDWATCH, EXISTING_TOPICS_METADATA
from rehearsal.core import Assembly, Finding, ref_target, rule, strings

RULE = "alarms.notify"
_ALARMS = ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
_TOPIC = "AWS::SNS::Topic"
_SNS_ARN = re.compile(r"^arn:[^:]+:sns:[^:]*:[^:]*:(?P<name>[A-Za-z0-9_-]+)$")


@rule(RULE, source="https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Notify_Users_Alarm_Changes.html")
def alarms_notify_through_open_topics(assembly: Assembly) -> Iterator[Finding]:
    """Every CloudWatch alarm has an enabled alarm action, and each action is an SNS topic CloudWatch may
    publish to: a topic of the app (named by reference, or by ARN with its literal name) created no later
    than the alarm, or one the alarm's stack declares as existing (``Metadata.hyperwarm:existingAlarmTopics``,
    whose owner keeps it open to CloudWatch). An alarm without an action changes state unseen.

    A topic policy (``AWS::SNS::TopicPolicy``) replaces the topic's default policy, so it must Allow
    ``sns:Publish`` to ``cloudwatch.amazonaws.com``; a topic with a customer-managed key needs that key's
    policy to Allow CloudWatch ``kms:Decrypt`` and ``kms:GenerateDataKey*``, and the AWS-managed
    ``alias/aws/sns`` key cannot be used by CloudWatch at all
    (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services).
    An action the rule cannot follow to such a topic is a finding: unknown is not open.
    """
    for kind in _ALARMS:
        for stack, logical_id, alarm in assembly.resources(kind):
            props = alarm.get("Properties", {})
            actions = props.get("AlarmActions") or []
            if props.get("ActionsEnabled") in (False, "false"):
                yield Finding(RULE, stack, logical_id, "ActionsEnabled is false: the alarm notifies no one")
            elif not actions:
                yield Finding(RULE, stack, logical_id, (
                    "has no AlarmActions: it changes state unseen; give it the environment's alarm topic "
                    "(hyperwarm.observability.alarms.notify_alarms)"))
            for action in actions:
                problem = _action_problem(assembly, stack, logical_id, action)
                if problem:
                    yield Finding(RULE, stack, logical_id, problem)


def _action_problem(assembly: Assembly, stack: str, alarm_id: str, action: Any) -> str | None:
    if isinstance(action, str) and action in _declared(assembly, stack):
        return None
    topic = _topic(assembly, stack, action)
    shown = next(strings(action), str(action))
    if topic is None:
        return (f"notifies {shown}, which is no SNS topic of the app and not declared in the stack's "
                f"{EXISTING_TOPICS_METADATA}: the rule cannot see that CloudWatch may publish to it")
    if not assembly.created_before(stack, alarm_id, *topic) and topic[0] != stack:
        return f"notifies topic {topic[0]}/{topic[1]}, whose stack does not deploy before this one"
    return _topic_problem(assembly, *topic)


def _declared(assembly: Assembly, stack: str) -> list[str]:
    return list(assembly.templates[stack].get("Metadata", {}).get(EXISTING_TOPICS_METADATA, ()))


def _topic(assembly: Assembly, stack: str, action: Any) -> tuple[str, str] | None:
    """The app's topic an action names: by a reference, or by an ARN whose topic name is literal."""
    found = assembly.referenced(stack, action)
    if found:
        return found if _resource(assembly, *found).get("Type") == _TOPIC else None
    match = _SNS_ARN.match(next(strings(action), ""))
    if not match:
        return None
    return next(((s, i) for s, i, t in assembly.resources(_TOPIC)
                 if t.get("Properties", {}).get("TopicName") == match["name"]), None)


def _topic_problem(assembly: Assembly, stack: str, topic_id: str) -> str | None:
    where = f"topic {stack}/{topic_id}"
    policies = [p for _, _, p in _in(assembly, stack, "AWS::SNS::TopicPolicy")
                if any(ref_target(t) == topic_id for t in p.get("Properties", {}).get("Topics", []))]
    if policies and not any(_allows(s, CLOUDWATCH, {"sns:publish"}) for p in policies
                            for s in _statements(p.get("Properties", {}).get("PolicyDocument"))):
        return (f"{where} has a topic policy (it replaces SNS's default one) without an Allow of sns:Publish for "
                f"{CLOUDWATCH}: CloudWatch cannot deliver the alarm (hyperwarm.observability.alarms.allow_cloudwatch_alarms)")
    key = _resource(assembly, stack, topic_id).get("Properties", {}).get("KmsMasterKeyId")
    if key is None:
        return None
    if any("alias/aws/sns" in text for text in strings(key)):
        return f"{where} is encrypted with the AWS-managed alias/aws/sns key, which CloudWatch cannot use"
    key_id = ref_target(key)
    resource = _resource(assembly, stack, key_id) if key_id else {}
    if resource.get("Type") != "AWS::KMS::Key":
        return f"{where} is encrypted with a key the rule cannot see ({next(strings(key), key)})"
    if not any(_allows(s, CLOUDWATCH, {"kms:decrypt", "kms:generatedatakey*"})
               for s in _statements(resource.get("Properties", {}).get("KeyPolicy"))):
        return (f"{where} is encrypted with key {stack}/{key_id}, whose policy does not let {CLOUDWATCH} use it "
                "(kms:Decrypt, kms:GenerateDataKey*)")
    return None


def _allows(statement: dict[str, Any], service: str, actions: set[str]) -> bool:
    """An Allow statement for the service principal covering every one of ``actions``."""
    if statement.get("Effect") != "Allow":
        return False
    principal = statement.get("Principal", {})
    services = principal.get("Service", []) if isinstance(principal, dict) else []
    if service not in ([services] if isinstance(services, str) else services):
        return False
    granted = statement.get("Action", [])
    granted = {a.lower() for a in ([granted] if isinstance(granted, str) else granted)}
    return all(a in granted or "*" in granted or f"{a.split(':')[0]}:*" in granted for a in actions)


def _statements(document: Any) -> list[dict[str, Any]]:
    statements = document.get("Statement", []) if isinstance(document, dict) else []
    return [statements] if isinstance(statements, dict) else list(statements)


def _in(assembly: Assembly, stack: str, kind: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    return ((s, i, r) for s, i, r in assembly.resources(kind) if s == stack)


def _resource(assembly: Assembly, stack: str, logical_id: str | None) -> dict[str, Any]:
    return assembly.templates.get(stack, {}).get("Resources", {}).get(logical_id, {})
