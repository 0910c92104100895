"""refresh.dead-letter-senders: the refresh dead-letter queue takes letters from the refresh alone."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from rehearsal import Assembly
from rehearsal.rules.dead_letters import refresh_dead_letter_senders

QUEUE = "hyperwarm-prod-cache-refresh-dead-letters"
ARN = {"Fn::GetAtt": ["Dlq", "Arn"]}
SSL_ONLY = {"Action": "sqs:*", "Condition": {"Bool": {"aws:SecureTransport": "false"}}, "Effect": "Deny",
            "Principal": {"AWS": "*"}, "Resource": ARN}
EVENTS_ALLOW = {"Action": "sqs:SendMessage", "Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
                "Condition": {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": ["Rule", "Arn"]}}}, "Resource": ARN}
GUARDS = {"Fn::Join": ["", ["arn:aws:iam::", {"Ref": "AWS::AccountId"},
                            f":role/hyperwarm/dead-letter-senders/{QUEUE}/*"]]}


def deny(**condition: Any) -> dict[str, Any]:
    return {"Sid": "LettersFromTheRefreshAlone", "Action": "sqs:SendMessage", "Effect": "Deny",
            "Principal": {"AWS": "*"}, "Resource": ARN, "Condition": condition or {
                "ArnNotEquals": {"aws:PrincipalArn": [{"Fn::GetAtt": ["Role", "Arn"]},
                                                      {"Fn::GetAtt": ["RolloutRole", "Arn"]}],
                                 "aws:SourceArn": [{"Fn::GetAtt": ["Rule", "Arn"]}]},
                "ArnNotLike": {"aws:PrincipalArn": GUARDS}}}


def function(role: str) -> dict[str, Any]:
    return {"Type": "AWS::Lambda::Function", "Properties": {
        "Role": {"Fn::GetAtt": [role, "Arn"]}, "Environment": {"Variables": {"HYPERWARM_DLQ_URL": {"Ref": "Dlq"}}}}}


def refresh_stack(*statements: dict[str, Any]) -> dict[str, Any]:
    """The refresh hook's queue, functions, rule and queue policy, shaped as CacheRefreshHook writes them."""
    return {"Resources": {
        "Dlq": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": QUEUE}},
        "Role": {"Type": "AWS::IAM::Role", "Properties": {}},
        "RolloutRole": {"Type": "AWS::IAM::Role", "Properties": {}},
        "OtherRole": {"Type": "AWS::IAM::Role", "Properties": {}},
        "Function": function("Role"), "StateFunction": function("Role"), "RolloutStep": function("RolloutRole"),
        "Rule": {"Type": "AWS::Events::Rule", "Properties": {"Targets": [
            {"Id": "t", "Arn": {"Fn::GetAtt": ["Function", "Arn"]}, "DeadLetterConfig": {"Arn": ARN}}]}},
        "OtherRule": {"Type": "AWS::Events::Rule", "Properties": {"Targets": [
            {"Id": "t", "Arn": {"Fn::GetAtt": ["Function", "Arn"]}}]}},
        "Policy": {"Type": "AWS::SQS::QueuePolicy", "Properties": {
            "Queues": [{"Ref": "Dlq"}], "PolicyDocument": {"Statement": list(statements)}}}}}


def findings(template: dict[str, Any]) -> list[str]:
    return [f"{f.resource}: {f.message}" for f in refresh_dead_letter_senders(Assembly.from_templates({"s": template}))]


def test_the_queue_as_the_hook_writes_it_passes() -> None:
    assert findings(refresh_stack(SSL_ONLY, EVENTS_ALLOW, deny())) == []


def test_a_queue_that_only_enforces_ssl_lets_the_account_send() -> None:
    (finding,) = findings(refresh_stack(SSL_ONLY, EVENTS_ALLOW))
    assert finding.startswith("Dlq: the refresh dead-letter queue lets other principals of the account send")
    assert "no Deny of sqs:SendMessage" in finding


def test_a_queue_without_a_policy_is_reported() -> None:
    template = refresh_stack()
    del template["Resources"]["Policy"]
    assert len(findings(template)) == 1


PRINCIPALS = [{"Fn::GetAtt": ["Role", "Arn"]}, {"Fn::GetAtt": ["RolloutRole", "Arn"]}]
SOURCES = [{"Fn::GetAtt": ["Rule", "Arn"]}]


@pytest.mark.parametrize("condition, shown", [
    ({"ArnNotEquals": {"aws:PrincipalArn": [*PRINCIPALS, {"Fn::GetAtt": ["OtherRole", "Arn"]}],
                       "aws:SourceArn": SOURCES}}, "OtherRole"),
    ({"ArnNotEquals": {"aws:PrincipalArn": PRINCIPALS, "aws:SourceArn": [*SOURCES, {"Fn::GetAtt": ["OtherRule",
                                                                                                   "Arn"]}]}},
     "OtherRule"),
    ({"ArnNotEquals": {"aws:PrincipalArn": PRINCIPALS, "aws:SourceArn": SOURCES},
      "ArnNotLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/*"}}, "arn:aws:iam::*:role/*"),
    ({"ArnNotEquals": {"aws:PrincipalArn": PRINCIPALS, "aws:SourceArn": SOURCES},
      "ArnNotLike": {"aws:PrincipalArn": {"Fn::Join": ["", ["arn:aws:iam::", {"Ref": "AWS::AccountId"},
                                                            ":role/hyperwarm/dead-letter-senders/*"]]}}},
     "dead-letter-senders/*"),  # every queue's senders
    ({"ArnNotEquals": {"aws:PrincipalArn": PRINCIPALS, "aws:SourceArn": SOURCES},
      "StringNotEquals": {"aws:PrincipalAccount": "111122223333"}}, "aws:PrincipalAccount"),  # narrows the Deny
    ({"ArnNotEquals": {"aws:PrincipalArn": PRINCIPALS, "aws:SourceArn": SOURCES},
      "Bool": {"aws:SecureTransport": "false"}}, "aws:SecureTransport"),
])
def test_a_deny_that_exempts_another_sender_is_reported(condition: dict[str, Any], shown: str) -> None:
    (finding,) = findings(refresh_stack(SSL_ONLY, EVENTS_ALLOW, deny(**condition)))
    assert shown in finding


@pytest.mark.parametrize("change", [
    {"Action": "sqs:ReceiveMessage"}, {"Effect": "Allow"}, {"Principal": {"AWS": "arn:aws:iam::1:role/x"}},
    {"Resource": {"Fn::GetAtt": ["OtherQueue", "Arn"]}},
])
def test_a_deny_of_something_else_does_not_count(change: dict[str, Any]) -> None:
    assert len(findings(refresh_stack(SSL_ONLY, EVENTS_ALLOW, {**deny(), **change}))) == 1


def test_queues_no_refresh_function_writes_to_are_not_checked() -> None:
    template = refresh_stack(SSL_ONLY)
    for name in ("Function", "StateFunction", "RolloutStep"):
        del template["Resources"][name]["Properties"]["Environment"]
    assert findings(template) == []


def test_the_refresh_stack_of_every_synthesized_environment_restricts_its_senders_and_fails_without_it(
        synthesized) -> None:
    """The hook's own queue, and the same template with its Deny taken out (the queue as it was)."""
    assembly = Assembly.from_outdir(synthesized.outdir)
    refreshed = [s for s in assembly.templates if s.endswith("-refresh")]
    assert refreshed and refresh_dead_letter_senders(assembly) == []
    for stack in refreshed:
        template = copy.deepcopy(assembly.templates[stack])
        for resource in template["Resources"].values():
            if resource["Type"] == "AWS::SQS::QueuePolicy":
                document = resource["Properties"]["PolicyDocument"]
                document["Statement"] = [s for s in document["Statement"] if s.get("Sid") != "LettersFromTheRefreshAlone"]
        (finding,) = refresh_dead_letter_senders(Assembly.from_templates({stack: template}))
        assert "lets other principals of the account send" in finding.message


def test_the_deploy_guards_roles_are_under_the_queues_sender_path(synthesized) -> None:
    """What the queue's ArnNotLike exemption names is where the guards' roles are (their letters still arrive)."""
    assembly = Assembly.from_outdir(synthesized.outdir)
    guards = [(stack, r) for stack, i, r in assembly.resources("AWS::IAM::Role") if i.startswith("RefreshGuardRole")]
    assert guards
    for stack, role in guards:
        env = stack.split("-")[1]
        if f"hyperwarm-{env}-refresh" not in assembly.templates:  # no queue: dev's guard records deploys only
            assert "Path" not in role["Properties"]
            continue
        assert role["Properties"]["Path"] == f"/hyperwarm/dead-letter-senders/hyperwarm-{env}-cache-refresh-dead-letters/"
        refresh = json.dumps(assembly.templates[f"hyperwarm-{env}-refresh"])
        assert f":role{role['Properties']['Path']}*" in refresh
