"""The refresh dead-letter queue takes letters from the refresh alone."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from hyperwarm.functions.cache_refresh.contract import DLQ_URL
from hyperwarm.functions.cache_refresh.naming import dead_letter_sender_path
from rehearsal.core import Assembly, Finding, ref_target, rule, text_of

RULE = "refresh.dead-letter-senders"
_SEND_ACTIONS = ("sqs:SendMessage", "sqs:*", "*")
_PRINCIPALS = ("*", {"AWS": "*"})


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _refresh_queues(resources: dict[str, Any]) -> dict[str, set[str]]:
    """Queue logical id -> the roles of the functions that write letters to it (``HYPERWARM_DLQ_URL``)."""
    queues: dict[str, set[str]] = {}
    for resource in resources.values():
        props = resource.get("Properties", {})
        queue = ref_target(props.get("Environment", {}).get("Variables", {}).get(DLQ_URL))
        if resource.get("Type") == "AWS::Lambda::Function" and queue in resources:
            queues.setdefault(queue, set()).add(str(ref_target(props.get("Role"))))
    return queues


def _exemption_problems(resources: dict[str, Any], queue: str, roles: set[str], condition: Any) -> list[str]:
    """Why a Deny of sending with ``condition`` lets more than the refresh send (empty: it does not)."""
    if not isinstance(condition, dict) or not condition:
        return ["denies every sender, the refresh functions and EventBridge included"]
    name = resources[queue].get("Properties", {}).get("QueueName")
    senders = re.escape(f":role{dead_letter_sender_path(text_of(name))}*") if isinstance(name, str) else None
    problems = []
    for operator, keys in condition.items():
        for key, values in (keys.items() if isinstance(keys, dict) else [(keys, None)]):
            for value in _listed(values):
                target = ref_target(value)
                if (operator, key) == ("ArnNotEquals", "aws:PrincipalArn") and target in roles:
                    continue
                if (operator, key) == ("ArnNotEquals", "aws:SourceArn") and _delivers_to(resources, target, queue):
                    continue
                if (operator, key) == ("ArnNotLike", "aws:PrincipalArn") and senders and re.fullmatch(
                        r"arn:[^:*]+:iam::[^:*]+" + senders, text_of(value)):
                    continue
                problems.append(f"exempts {operator} {key} {target or text_of(value)}, which is no refresh "
                                "function's role, none of the rules that dead-letter here, and not the queue's "
                                "sender path")
    return problems


def _delivers_to(resources: dict[str, Any], rule_id: str | None, queue: str) -> bool:
    """``rule_id`` is an event rule with a target whose dead-letter queue is ``queue``."""
    resource = resources.get(rule_id or "", {})
    return resource.get("Type") == "AWS::Events::Rule" and any(
        ref_target(t.get("DeadLetterConfig", {}).get("Arn")) == queue
        for t in resource.get("Properties", {}).get("Targets", []))


def _restrictions(resources: dict[str, Any], queue: str) -> Iterator[dict[str, Any]]:
    """The statements of the queue's policies that deny sending to every principal."""
    for resource in resources.values():
        props = resource.get("Properties", {})
        if resource.get("Type") != "AWS::SQS::QueuePolicy" or queue not in map(ref_target, props.get("Queues", [])):
            continue
        for statement in _listed(props.get("PolicyDocument", {}).get("Statement", [])):
            if (statement.get("Effect") == "Deny" and statement.get("Principal") in _PRINCIPALS
                    and any(a in _SEND_ACTIONS for a in _listed(statement.get("Action")))
                    and not statement.get("NotPrincipal") and not statement.get("NotAction")
                    and all(r == "*" or ref_target(r) == queue for r in _listed(statement.get("Resource")))):
                yield statement


@rule(RULE, source="https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html")
def refresh_dead_letter_senders(assembly: Assembly) -> Iterator[Finding]:
    """A refresh dead-letter queue (one a function's ``HYPERWARM_DLQ_URL`` names) denies ``sqs:SendMessage`` to
    every principal except the roles of the functions that write to it, EventBridge on behalf of the rules whose
    targets dead-letter there (``aws:SourceArn``) and the roles under the queue's sender path
    (``naming.dead_letter_sender_path``: the deploy guards').

    Every letter is an event ``hyperwarm refresh replay`` invokes the refresh function with. An SQS queue's
    default is to let any principal of the account whose IAM policy allows ``sqs:SendMessage`` send to it, so
    without the Deny a developer, a CI role or a compromised workload could plant letters. Lambda sends its
    on-failure records with the function's execution role (the role needs ``sqs:SendMessage``:
    https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html), and EventBridge sends
    what a rule could not deliver as ``events.amazonaws.com`` with the rule's ARN as ``aws:SourceArn``: those
    are the exemptions, each a negated condition of the one Deny (all must hold for it to apply). Any other
    exemption, an extra condition that narrows the Deny, or no such Deny is a finding.
    """
    for stack, template in assembly.templates.items():
        resources = template.get("Resources", {})
        for queue, roles in sorted(_refresh_queues(resources).items()):
            problems = [_exemption_problems(resources, queue, roles, s.get("Condition"))
                        for s in _restrictions(resources, queue)
                        if "aws:PrincipalArn" in json.dumps(s.get("Condition"))]  # not the SSL-only Deny
            if [] in problems:
                continue
            detail = "; ".join(p for found in problems for p in found) or (
                "its policy has no Deny of sqs:SendMessage to every principal but the refresh")
            yield Finding(RULE, stack, queue, f"the refresh dead-letter queue lets other principals of the account "
                          f"send letters ({detail}): deny sqs:SendMessage except to the refresh roles "
                          "(aws:PrincipalArn), the rules that dead-letter here (aws:SourceArn) and the queue's "
                          "sender path (CacheRefreshHook does)")
