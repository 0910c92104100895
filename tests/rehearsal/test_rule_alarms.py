"""alarms.notify: every alarm notifies a topic CloudWatch may publish to."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rehearsal import Assembly
from rehearsal.rules.alarms import alarm_subscribers_reach_someone, alarms_notify_through_open_topics

ARN = {"Fn::Join": ["", ["arn:aws:sns:us-east-1:", {"Ref": "AWS::AccountId"}, ":hyperwarm-prod-alarms"]]}
SSL_ONLY = {"Action": "sns:Publish", "Condition": {"Bool": {"aws:SecureTransport": "false"}}, "Effect": "Deny",
            "Principal": "*", "Resource": {"Ref": "Topic"}, "Sid": "AllowPublishThroughSSLOnly"}
THIS_ACCOUNTS_ALARMS = {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                        "ArnLike": {"aws:SourceArn": {"Fn::Join": ["", [
                            "arn:aws:cloudwatch:us-east-1:", {"Ref": "AWS::AccountId"}, ":alarm:*"]]}}}
CLOUDWATCH_PUBLISH = {"Action": "sns:Publish", "Effect": "Allow", "Principal": {"Service": "cloudwatch.amazonaws.com"},
                      "Resource": {"Ref": "Topic"}, "Condition": THIS_ACCOUNTS_ALARMS}
KEY_FOR_CLOUDWATCH = {"Action": ["kms:Decrypt", "kms:GenerateDataKey*"], "Effect": "Allow",
                      "Principal": {"Service": "cloudwatch.amazonaws.com"}, "Resource": "*",
                      "Condition": THIS_ACCOUNTS_ALARMS}
ROOT = {"Action": "kms:*", "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Resource": "*"}


def alarm(*actions: Any, **props: Any) -> dict[str, Any]:
    return {"Type": "AWS::CloudWatch::Alarm", "Properties": {
        "MetricName": "Errors", "Namespace": "AWS/Lambda", "Threshold": 1, "EvaluationPeriods": 1,
        **({"AlarmActions": list(actions)} if actions else {}), **props}}


def alarms_stack(statements: list[dict[str, Any]] | None = (SSL_ONLY, CLOUDWATCH_PUBLISH),
                 key_statements: list[dict[str, Any]] = (ROOT, KEY_FOR_CLOUDWATCH), key: Any = "ref") -> dict[str, Any]:
    """The topic of hyperwarm-<env>-alarms as hyperwarm.observability.alarms.alarm_topic writes it (by default)."""
    resources: dict[str, Any] = {
        "Key": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": {"Statement": list(key_statements)}}},
        "Topic": {"Type": "AWS::SNS::Topic", "Properties": {
            "TopicName": "hyperwarm-prod-alarms",
            **({"KmsMasterKeyId": {"Fn::GetAtt": ["Key", "Arn"]} if key == "ref" else key} if key else {})}}}
    if statements is not None:
        resources["Policy"] = {"Type": "AWS::SNS::TopicPolicy", "Properties": {
            "Topics": [{"Ref": "Topic"}], "PolicyDocument": {"Statement": list(statements)}}}
    return {"Resources": resources}


def findings(templates: dict[str, dict[str, Any]], dependencies: dict[str, list[str]] | None = None) -> list[str]:
    deps = {"refresh": ["alarms"]} if dependencies is None else dependencies
    assembly = Assembly.from_templates(templates, deps)
    return [f"{f.stack}/{f.resource}: {f.message}" for f in alarms_notify_through_open_topics(assembly)]


def app(*actions: Any, alarms: dict[str, Any] | None = None, **props: Any) -> dict[str, dict[str, Any]]:
    return {"alarms": alarms or alarms_stack(), "refresh": {"Resources": {"ErrorsAlarm": alarm(*actions, **props)}}}


def test_hyperwarms_topic_named_by_arn_from_a_stack_deployed_first_passes():
    assert findings(app(ARN)) == []


def test_an_alarm_without_actions_fails():
    """The refresh hook's four alarms had none."""
    (finding,) = findings(app())
    assert finding.startswith("refresh/ErrorsAlarm: has no AlarmActions")


def test_disabled_actions_fail():
    assert "ActionsEnabled is false" in findings(app(ARN, ActionsEnabled=False))[0]


def test_a_topic_policy_with_only_the_ssl_deny_fails():
    """What enforce_ssl alone writes: the policy replaces SNS's default one and CloudWatch may not publish."""
    (finding,) = findings(app(ARN, alarms=alarms_stack(statements=[SSL_ONLY])))
    assert "has a topic policy (it replaces SNS's default one) without an Allow of sns:Publish" in finding


def test_a_topic_without_a_policy_keeps_the_default_one_and_passes():
    assert findings(app(ARN, alarms=alarms_stack(statements=None))) == []


def test_a_key_cloudwatch_may_not_use_fails():
    (finding,) = findings(app(ARN, alarms=alarms_stack(key_statements=[ROOT])))
    assert "whose policy does not let cloudwatch.amazonaws.com use it" in finding


@pytest.mark.parametrize("condition", [None, {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}])
def test_a_key_any_accounts_alarms_may_make_cloudwatch_use_fails(condition):
    """hyperwarm's alarm topic key granted CloudWatch kms:Decrypt/GenerateDataKey* with no condition at all."""
    grant = {k: v for k, v in KEY_FOR_CLOUDWATCH.items() if k != "Condition"} | ({"Condition": condition} if condition else {})
    (finding,) = findings(app(ARN, alarms=alarms_stack(key_statements=[ROOT, grant])))
    assert "whose policy lets CloudWatch use it for any account's alarms: condition the Allow on aws:SourceAccount" \
        in finding


def test_a_topic_policy_any_accounts_alarms_may_publish_through_fails():
    publish = {k: v for k, v in CLOUDWATCH_PUBLISH.items() if k != "Condition"}
    (finding,) = findings(app(ARN, alarms=alarms_stack(statements=[SSL_ONLY, publish])))
    assert "'s topic policy lets CloudWatch publish for any account's alarms" in finding


def test_the_aws_managed_sns_key_fails():
    (finding,) = findings(app(ARN, alarms=alarms_stack(key={"KmsMasterKeyId": "alias/aws/sns"})))
    assert "alias/aws/sns" in finding


def test_a_key_the_rule_cannot_see_fails():
    imported = {"KmsMasterKeyId": "arn:aws:kms:us-east-1:123456789012:key/abc"}
    (finding,) = findings(app(ARN, alarms=alarms_stack(key=imported)))
    assert "a key the rule cannot see" in finding


def test_a_topic_outside_the_app_fails_unless_declared():
    outside = "arn:aws:sns:us-east-1:123456789012:oncall"
    (finding,) = findings(app(outside))
    assert "not declared in the stack's hyperwarm:existingAlarmTopics" in finding
    templates = app(outside)
    templates["refresh"]["Metadata"] = {"hyperwarm:existingAlarmTopics": [outside]}
    assert findings(templates) == []


def test_a_topic_in_a_stack_that_deploys_later_fails():
    (finding,) = findings(app(ARN), dependencies={})
    assert "whose stack does not deploy before this one" in finding


def test_a_referenced_topic_in_the_same_stack_is_followed():
    templates = {"s": copy.deepcopy(alarms_stack(statements=[SSL_ONLY]))}
    templates["s"]["Resources"]["A"] = alarm({"Ref": "Topic"})
    assert len(findings(templates, {})) == 1
    templates["s"]["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"].append(CLOUDWATCH_PUBLISH)
    assert findings(templates, {}) == []


@pytest.mark.parametrize("action", ["arn:aws:lambda:us-east-1:123456789012:function:f",
                                    {"Ref": "Key"}, {"Fn::GetAtt": ["Unknown", "Arn"]}])
def test_actions_that_are_no_topic_of_the_app_fail(action):
    templates = app(action)
    templates["refresh"]["Resources"]["Key"] = {"Type": "AWS::KMS::Key", "Properties": {}}
    (finding,) = findings(templates)
    assert "no SNS topic of the app" in finding


def test_every_alarm_of_every_synthesized_environment_notifies_an_open_topic(synthesized):
    assembly = Assembly.from_outdir(synthesized.outdir)
    assert list(alarms_notify_through_open_topics(assembly)) == []


def subscribed(endpoint: Any, protocol: str = "email", parameters: dict[str, Any] | None = None) -> list[str]:
    template = {"Parameters": parameters or {}, "Resources": {**alarms_stack()["Resources"], "Sub": {
        "Type": "AWS::SNS::Subscription",
        "Properties": {"Protocol": protocol, "TopicArn": {"Ref": "Topic"}, "Endpoint": endpoint}}}}
    return [f"{f.resource}: {f.message}" for f in alarm_subscribers_reach_someone(Assembly.from_templates({"a": template}))]


@pytest.mark.parametrize("endpoint, protocol", [
    ("oncall-replace-me@example.com", "email"),  # what cdk.json's prod subscribed: it passed the production check
    ("ops@example.org", "email"), ("pager@alerts.example.net", "email"), ("changeme@corp.io", "email"),
    ("TODO@corp.io", "email-json"), ("https://hooks.example.com/services/x", "https"),
    ("https://events.pagerduty.com/integration/replace-me/enqueue", "https")])
def test_a_placeholder_subscriber_fails(endpoint, protocol):
    (finding,) = subscribed(endpoint, protocol)
    assert finding.startswith(f"Sub: subscribes {endpoint!r}, a placeholder")


@pytest.mark.parametrize("endpoint", ["oncall@corp.io", "mastodon-ops@corp.io", "https://events.pagerduty.com/x"])
def test_real_subscribers_pass(endpoint):
    assert subscribed(endpoint) == []


def test_an_address_given_at_deploy_passes_only_when_its_pattern_refuses_placeholders():
    from hyperwarm.observability.alarms import EMAIL_PARAMETER_PATTERN

    ref = {"Ref": "OnCallEmail"}
    assert subscribed(ref, parameters={"OnCallEmail": {"Type": "String", "AllowedPattern": EMAIL_PARAMETER_PATTERN}}) == []
    (finding,) = subscribed(ref, parameters={"OnCallEmail": {"Type": "String"}})
    assert "whose AllowedPattern lets placeholders through (oncall-replace-me@example.com" in finding
    (finding,) = subscribed(ref, parameters={"OnCallEmail": {"Type": "String", "AllowedPattern": ".+@.+"}})
    assert "lets placeholders through" in finding
    (finding,) = subscribed({"Fn::ImportValue": "oncall"})
    assert "which the rule cannot read" in finding


def test_a_topics_own_subscription_list_is_read_too():
    template = alarms_stack()
    template["Resources"]["Topic"]["Properties"]["Subscription"] = [{"Protocol": "email", "Endpoint": "todo@corp.io"}]
    (finding,) = alarm_subscribers_reach_someone(Assembly.from_templates({"a": template}))
    assert finding.resource == "Topic"


def test_every_subscriber_of_every_synthesized_environment_reaches_someone(synthesized):
    assert list(alarm_subscribers_reach_someone(Assembly.from_outdir(synthesized.outdir))) == []
