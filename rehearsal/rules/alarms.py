"""Every alarm notifies someone, through a topic only this account's alarms may make CloudWatch publish to."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from hyperwarm.observability.alarms import CLOUDWATCH, EXISTING_TOPICS_METADATA, PLACEHOLDER
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
    Each of those Allows is conditioned on ``aws:SourceAccount`` and ``aws:SourceArn`` (this account's
    alarms): without them any account's alarm could make CloudWatch publish there (the confused deputy;
    SNS developer guide, "Example cases for Amazon SNS access control").
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
    publish = [s for p in policies for s in _statements(p.get("Properties", {}).get("PolicyDocument"))
               if _allows(s, CLOUDWATCH, {"sns:publish"})]
    if policies and not publish:
        return (f"{where} has a topic policy (it replaces SNS's default one) without an Allow of sns:Publish for "
                f"{CLOUDWATCH}: CloudWatch cannot deliver the alarm (hyperwarm.observability.alarms.allow_cloudwatch_alarms)")
    if not all(_scoped(s) for s in publish):
        return f"{where}'s topic policy lets CloudWatch publish for {_ANY_ACCOUNT}"
    key = _resource(assembly, stack, topic_id).get("Properties", {}).get("KmsMasterKeyId")
    if key is None:
        return None
    if any("alias/aws/sns" in text for text in strings(key)):
        return f"{where} is encrypted with the AWS-managed alias/aws/sns key, which CloudWatch cannot use"
    key_id = ref_target(key)
    resource = _resource(assembly, stack, key_id) if key_id else {}
    if resource.get("Type") != "AWS::KMS::Key":
        return f"{where} is encrypted with a key the rule cannot see ({next(strings(key), key)})"
    grants = [s for s in _statements(resource.get("Properties", {}).get("KeyPolicy"))
              if _allows(s, CLOUDWATCH, {"kms:decrypt", "kms:generatedatakey*"})]
    if not grants:
        return (f"{where} is encrypted with key {stack}/{key_id}, whose policy does not let {CLOUDWATCH} use it "
                "(kms:Decrypt, kms:GenerateDataKey*)")
    if not all(_scoped(s) for s in grants):
        return f"{where} is encrypted with key {stack}/{key_id}, whose policy lets CloudWatch use it for {_ANY_ACCOUNT}"
    return None


_ANY_ACCOUNT = ("any account's alarms: condition the Allow on aws:SourceAccount and aws:SourceArn, this account's "
                "alarms (the confused deputy)")


def _scoped(statement: dict[str, Any]) -> bool:
    """The statement holds for this account's alarms only: it conditions both aws:SourceAccount and aws:SourceArn."""
    keys = {key.lower() for test in (statement.get("Condition") or {}).values() if isinstance(test, dict)
            for key in test}
    return {"aws:sourceaccount", "aws:sourcearn"} <= keys


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


SUBSCRIBERS = "alarms.real-subscribers"
_ADDRESSED = ("email", "email-json", "http", "https", "sms")
PLACEHOLDERS = ("oncall-replace-me@example.com", "oncall@example.org", "ops@alerts.example.net", "changeme@corp.io",
                "todo@corp.io", "replaceme@corp.io", "oncall+change-me@corp.io")
"""What an address given at deploy time must be refused as: each kind of :data:`PLACEHOLDER`."""


@rule(SUBSCRIBERS, source="https://www.rfc-editor.org/rfc/rfc2606")
def alarm_subscribers_reach_someone(assembly: Assembly) -> Iterator[Finding]:
    """Every subscription of a topic (``AWS::SNS::Subscription``, a topic's own ``Subscription`` list) names
    an address that reaches someone: no ``example.com``/``.org``/``.net`` address or URL (RFC 2606 reserves
    them for documentation: mail to them reaches no one) and no ``replace-me``, ``changeme`` or ``todo``
    (``hyperwarm.observability.alarms.PLACEHOLDER``). An address given at deploy time (a ``Ref`` to a
    template parameter) passes when its ``AllowedPattern`` refuses every kind of placeholder and its default
    is none; an address the rule cannot read is a finding (unknown is not someone)."""
    for stack, logical_id, resource in assembly.resources():
        props = resource.get("Properties", {})
        if resource.get("Type") == "AWS::SNS::Subscription":
            subscriptions = [props]
        elif resource.get("Type") == _TOPIC:
            subscriptions = list(props.get("Subscription") or [])
        else:
            continue
        for subscription in subscriptions:
            if str(subscription.get("Protocol", "")).lower() not in _ADDRESSED:
                continue
            problem = _subscriber_problem(assembly.templates[stack], subscription.get("Endpoint"))
            if problem:
                yield Finding(SUBSCRIBERS, stack, logical_id, problem)


def _subscriber_problem(template: dict[str, Any], endpoint: Any) -> str | None:
    if isinstance(endpoint, str):
        return (f"subscribes {endpoint!r}, a placeholder (example.com/.org/.net, replace-me, changeme, todo): the "
                "alarms reach no one; give the real on-call address") if PLACEHOLDER.search(endpoint) else None
    name = endpoint.get("Ref") if isinstance(endpoint, dict) else None
    parameter = template.get("Parameters", {}).get(name) if isinstance(name, str) else None
    if parameter is None:
        return f"subscribes {next(strings(endpoint), endpoint)!r}, which the rule cannot read: it may reach no one"
    pattern = parameter.get("AllowedPattern")
    passed = [p for p in PLACEHOLDERS if pattern is None or re.fullmatch(pattern, p)]
    if passed or PLACEHOLDER.search(str(parameter.get("Default", ""))):
        return (f"subscribes parameter {name}, whose AllowedPattern lets placeholders through "
                f"({', '.join(passed) or 'its Default'}): refuse them (hyperwarm.observability.alarms."
                "EMAIL_PARAMETER_PATTERN)")
    return None
