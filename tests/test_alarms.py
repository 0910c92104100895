"""Every alarm the app creates reaches a destination configured per environment; production must reach someone."""

from __future__ import annotations

import copy
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from test_config import error_of

from stacks.alarms_stack import AlarmsStack
from stacks.config import ConfigError, parse_environment, parse_environments

ENDPOINTS = {"endpoints": [{"name": "chat", "variants": [{
    "name": "main", "image": {"framework": "vllm", "version": "0.27.1"}, "instance_type": "ml.g5.2xlarge",
    "model_data": "s3://team-models/m/v1/", "inference_ami_version": "al2023-ami-sagemaker-inference-gpu-4-1"}]}],
    "model_buckets": [{"name": "team-models"}], "observability": {"otel_enrichment": "existing"}}
CREATE = {"observability": {"otel_enrichment": "create"}}




def test_production_without_a_destination_refuses_to_synth() -> None:
    assert ("environments.prod.alarms: {} -- a production environment must notify someone: set alarms.topic_arn"
            in error_of(ENDPOINTS))
    assert "environments.live.alarms: {}" in error_of({**ENDPOINTS, "production": True}, env="live")


@pytest.mark.parametrize("alarms", [{"emails": ["oncall@acme-corp.io"]},
                                    {"topic_arn": "arn:aws:sns:us-west-2:123456789012:oncall"},
                                    {"https_endpoints": ["https://events.pagerduty.com/integration/abc/enqueue"]},
                                    {"slack_channels": [{"workspace_id": "T07EA123LEP", "channel_id": "C07EZ1ABC23"}]}])
def test_any_destination_satisfies_production(alarms: dict[str, Any]) -> None:
    assert parse_environment("prod", {**ENDPOINTS, "alarms": alarms}).alarms.reaches_someone


def test_other_environments_may_go_without_subscribers_and_production_false_says_so() -> None:
    assert not parse_environment("dev", ENDPOINTS).alarms.reaches_someone
    assert parse_environment("prod", {**ENDPOINTS, "production": False})


@pytest.mark.parametrize("alarms, message", [
    ({"emails": ["oncall"]}, "environments.prod.alarms.emails[0]: 'oncall' -- must be an e-mail address"),
    ({"https_endpoints": ["http://hooks.acme-corp.io/x"]}, "alarms.https_endpoints[0]: 'http://hooks.acme-corp.io/x' -- "
                                                          "must be an https:// URL"),
    ({"topic_arn": "oncall"}, "environments.prod.alarms.topic_arn: 'oncall' -- must be an SNS topic ARN"),
    ({"topic_arn": "arn:aws:sns:us-west-2:123456789012:oncall", "emails": ["a@acme-corp.io"]},
     "subscribe those to the existing topic itself"),
    ({"emails": ["a@acme-corp.io", "a@acme-corp.io"]}, "emails: a@acme-corp.io -- each once"),
    ({"slack_channels": [{"workspace_id": "T0", "channel_id": "#alerts"}]},
     "alarms.slack_channels[0].channel_id: '#alerts' -- must be a Slack channel id"),
])
def test_bad_alarm_destinations_fail_with_the_field(alarms: dict[str, Any], message: str) -> None:
    assert message in error_of({**ENDPOINTS, "alarms": alarms})


def _environments(**overrides: dict[str, Any]) -> dict[str, Any]:
    base = {**ENDPOINTS, "alarms": {"emails": ["oncall@acme-corp.io"]}}
    return {name: {**copy.deepcopy(base), **value} for name, value in overrides.items()}


def test_two_environments_that_may_share_an_account_cannot_both_create_the_otel_enrichment() -> None:
    """One per account and region: CloudFormation would fail the second stack (and the first one's deletion
    would turn PromQL off for both, were it not retained)."""
    with pytest.raises(ConfigError) as info:
        parse_environments(_environments(dev=CREATE, staging=CREATE))
    assert ("environments.staging.observability.otel_enrichment: 'create' -- environment dev creates the OTel "
            "enrichment of the same account (the CLI's (no account set)) and region (us-west-2) already") in str(info.value)
    with pytest.raises(ConfigError, match="same account \\(123456789012\\)"):
        parse_environments(_environments(dev={**CREATE, "account": "123456789012"},
                                          staging={**CREATE, "account": "123456789012"}))
    assert parse_environments(_environments(dev=CREATE, staging={"observability": {"otel_enrichment": "existing"}}))
    assert parse_environments(_environments(dev={**CREATE, "account": "111111111111"},
                                             staging={**CREATE, "account": "222222222222"}))
    assert parse_environments(_environments(dev=CREATE, staging={**CREATE, "region": "us-east-1"}))


@pytest.fixture(name="project_app")
def project_app_fixture(synthesized) -> cdk.App:
    return synthesized.app


def _stacks(app: cdk.App) -> list[cdk.Stack]:
    return [s for s in app.node.children if isinstance(s, cdk.Stack)]


def _template(synthesized, stack: cdk.Stack) -> assertions.Template:
    """The stack's template from the session's synthesis (Template.from_stack synthesizes the whole app again)."""
    return assertions.Template.from_json(synthesized.template(stack.stack_name))


def test_every_alarm_of_every_environment_notifies_its_alarm_topic(synthesized, project_app: cdk.App) -> None:
    """The refresh hook's four alarms and the endpoints' 5XX rollback alarms had no action at all."""
    checked = set()
    for stack in _stacks(project_app):
        env = stack.stack_name.split("-")[1]
        for logical_id, alarm in synthesized.resources(stack.stack_name, "AWS::CloudWatch::Alarm").items():
            (action,) = alarm["Properties"]["AlarmActions"]
            assert stack.resolve(action) == {"Fn::Join": ["", [
                f"arn:aws:sns:{stack.region}:", {"Ref": "AWS::AccountId"}, f":hyperwarm-{env}-alarms"]]}, logical_id
            checked.add(stack.stack_name.rsplit("-", 1)[1])
    assert checked == {"endpoints", "refresh", "observability"}


def test_stacks_with_alarms_deploy_after_the_alarm_topic_and_in_production_all_do(synthesized,
                                                                                   project_app: cdk.App) -> None:
    """A production deploy without its on-call address (or with a placeholder) stops before any GPU bills."""
    for stack in _stacks(project_app):
        has_alarms = bool(synthesized.resources(stack.stack_name, "AWS::CloudWatch::Alarm"))
        env = stack.stack_name.split("-")[1]
        alarms = project_app.node.find_child(f"hyperwarm-{env}-alarms")
        if stack is not alarms:
            assert (alarms in stack.dependencies) == (has_alarms or env == "prod"), stack.stack_name


def test_prods_on_call_address_is_given_at_deploy_and_refuses_placeholders(synthesized, project_app: cdk.App) -> None:
    """cdk.json's prod subscribed oncall-replace-me@example.com, which passed the production check: now it names no
    address, and CloudFormation asks for one at the first deploy (and keeps it), refusing a placeholder."""
    import re

    from hyperwarm.observability.alarms import EMAIL_PARAMETER_PATTERN
    template = _template(synthesized, project_app.node.find_child("hyperwarm-prod-alarms"))
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": {"Ref": "OnCallEmail"}})
    parameter = template.to_json()["Parameters"]["OnCallEmail"]
    assert "Default" not in parameter and parameter["AllowedPattern"] == EMAIL_PARAMETER_PATTERN
    assert not re.fullmatch(parameter["AllowedPattern"], "oncall-replace-me@example.com")
    assert re.fullmatch(parameter["AllowedPattern"], "oncall@acme-corp.io")
    assert template.find_outputs("AlarmTopicArn")


@pytest.mark.parametrize("alarms, message", [
    ({"emails": ["oncall-replace-me@example.com"]}, "environments.prod.alarms.emails[0]: "
                                                     "'oncall-replace-me@example.com' -- a placeholder"),
    ({"emails": ["ops@acme-corp.io", "changeme@acme-corp.io"]}, "alarms.emails[1]: 'changeme@acme-corp.io' -- a placeholder"),
    ({"emails": ["oncall@example.net"]}, "alarms.emails[0]: 'oncall@example.net' -- a placeholder"),
    ({"https_endpoints": ["https://events.pagerduty.com/integration/todo/enqueue"]},
     "alarms.https_endpoints[0]: 'https://events.pagerduty.com/integration/todo/enqueue' -- a placeholder"),
])
def test_a_placeholder_subscriber_fails_synth_naming_the_field(alarms: dict[str, Any], message: str) -> None:
    assert message in error_of({**ENDPOINTS, "alarms": alarms})
    assert "environments.dev.alarms" in error_of({**ENDPOINTS, "alarms": alarms}, env="dev")  # in every environment


def test_the_alarm_topic_key_serves_this_accounts_alarms_only(synthesized, project_app: cdk.App) -> None:
    """CloudWatch's grant on the topic key had no condition: any account's alarm could make it use the key."""
    template = _template(synthesized, project_app.node.find_child("hyperwarm-prod-alarms"))
    (key,) = template.find_resources("AWS::KMS::Key").values()
    (grant,) = [s for s in key["Properties"]["KeyPolicy"]["Statement"]
                if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert grant["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert grant["Condition"]["ArnLike"] == {"aws:SourceArn": {"Fn::Join": ["", [
        "arn:aws:cloudwatch:us-east-1:", {"Ref": "AWS::AccountId"}, ":alarm:*"]]}}


def test_slack_channels_receive_alarms_through_chatbot_that_may_run_nothing(project_context) -> None:
    context = copy.deepcopy(project_context)
    context["environments"]["prod"]["alarms"] = {
        "emails": ["oncall@acme-corp.io"], "https_endpoints": ["https://events.pagerduty.com/integration/k/enqueue"],
        "slack_channels": [{"workspace_id": "T07EA123LEP", "channel_id": "C07EZ1ABC23"}]}
    # The alarms stack as the app adds it, alone: the rest of prod plays no part in its topic's subscribers.
    config = parse_environments(context["environments"])["prod"]
    stack = AlarmsStack(cdk.App(), "hyperwarm-prod-alarms", env_name="prod", config=config,
                        env=cdk.Environment(account=config.account, region=config.region))
    template = assertions.Template.from_stack(stack)
    template.resource_count_is("AWS::SNS::Subscription", 2)
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "https"})
    (chatbot,) = template.find_resources("AWS::Chatbot::SlackChannelConfiguration").values()
    props = chatbot["Properties"]
    assert props["ConfigurationName"] == "hyperwarm-prod-alarms-C07EZ1ABC23"
    assert (props["SlackWorkspaceId"], props["SlackChannelId"]) == ("T07EA123LEP", "C07EZ1ABC23")
    assert len(props["SnsTopicArns"]) == 1
    (guardrail,) = props["GuardrailPolicies"]
    assert guardrail["Fn::Join"][1][-1] == ":iam::aws:policy/AWSDenyAll"


def test_notify_alarms_keeps_actions_alarms_already_have() -> None:
    from aws_cdk import aws_cloudwatch as cloudwatch, aws_cloudwatch_actions as actions, aws_sns as sns

    from hyperwarm.observability.alarms import notify_alarms

    stack = cdk.Stack(cdk.App(), "S")
    metric = cloudwatch.Metric(namespace="N", metric_name="M")
    own = sns.Topic.from_topic_arn(stack, "Own", "arn:aws:sns:us-west-2:123456789012:own")
    metric.create_alarm(stack, "Wired", threshold=1, evaluation_periods=1).add_alarm_action(actions.SnsAction(own))
    metric.create_alarm(stack, "Bare", threshold=1, evaluation_periods=1)
    notify_alarms(stack, sns.Topic.from_topic_arn(stack, "Env", "arn:aws:sns:us-west-2:123456789012:env"))
    template = assertions.Template.from_stack(stack)
    assert {k[:4]: a["Properties"]["AlarmActions"] for k, a in template.find_resources("AWS::CloudWatch::Alarm").items()
            } == {"Wire": ["arn:aws:sns:us-west-2:123456789012:own"], "Bare": ["arn:aws:sns:us-west-2:123456789012:env"]}


def test_alarm_destination_validation_names_every_problem() -> None:
    from hyperwarm.observability.alarms import AlarmDestination, AlarmDestinationProps, SlackChannel

    with pytest.raises(ValueError) as info:
        AlarmDestination(cdk.Stack(cdk.App(), "S"), "A", AlarmDestinationProps(
            emails=["x"], https_endpoints=["ftp://a"], slack_channels=[SlackChannel("T1", "#c")]))
    message = str(info.value)
    assert "emails = 'x' -- must be an e-mail address" in message
    with pytest.raises(ValueError, match=r"emails\[0\] = 'oncall@example.com' -- a placeholder"):
        AlarmDestination(cdk.Stack(cdk.App(), "T"), "A", AlarmDestinationProps(emails=["oncall@example.com"]))
    assert "https_endpoints = 'ftp://a' -- must be an https:// URL" in message
    assert "slack_channels[].channel_id = '#c' -- must be 1..255 letters and digits" in message


def test_an_existing_topic_of_another_region_fails_synth_naming_the_field() -> None:
    """CloudWatch notifies only a topic of the alarm's region: the deploy would fail on every alarm."""
    message = error_of({"region": "us-west-2", "alarms": {"topic_arn": "arn:aws:sns:us-east-1:123456789012:oncall"}},
                       env="qa")
    assert ("environments.qa.alarms.topic_arn: 'arn:aws:sns:us-east-1:123456789012:oncall' -- a topic in us-east-1, "
            "while the environment's alarms are in us-west-2") in message
    parse_environment("qa", {"region": "us-west-2", "alarms": {"topic_arn": "arn:aws:sns:us-west-2:123456789012:oncall"}})
